// node --test: one palette for every chart (issue #16). Kernel categories, timeline lanes and GPU idle
// causes are all distinct, idle never looks like work, and every colour shows on both themes' cards.
// (tests/test_frontend_palette.py checks that the names here are the engine's: classify.CATEGORIES,
// timeline.CATEGORIES, idle.CAUSES.)
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CATEGORY_COLORS, LANE_COLORS, IDLE_COLORS, BUSY_COLOR, PART_COLORS, categoryColor, idleColor, partColor, contrast, textOn } from './palette.js';

const KERNEL_CATEGORIES = ['gemm', 'attention', 'conv', 'copy', 'elementwise', 'norm', 'softmax', 'reduce', 'optimizer',
  'quant', 'index', 'moe', 'communication', 'autotune', 'memcpy', 'memset', 'other'];
const TIMELINE_CATEGORIES = ['kernel', 'memcpy', 'memset', 'device_sync', 'launch', 'runtime', 'sync', 'data_loader'];
const IDLE_CAUSES = ['host_wait', 'sync', 'data_loader', 'other'];

/** CIE L*a*b* (D65) of "#rrggbb", written out here rather than shared with the product. */
function lab(hex) {
  const n = parseInt(hex.slice(1), 16);
  const [r, g, b] = [n >> 16, (n >> 8) & 255, n & 255].map((v) => { const c = v / 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  const xyz = [(0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883];
  const f = (t) => (t > 216 / 24389 ? Math.cbrt(t) : (24389 / 27 * t + 16) / 116);
  const [fx, fy, fz] = xyz.map(f);
  return [116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)];
}
const deltaE = (a, b) => { const p = lab(a); const q = lab(b); return Math.hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]); };

const work = { ...Object.fromEntries(Object.entries(CATEGORY_COLORS).map(([k, v]) => [`category ${k}`, v])),
  ...Object.fromEntries(Object.entries(LANE_COLORS).map(([k, v]) => [`lane ${k}`, v])) };
const idle = Object.fromEntries(Object.entries(IDLE_COLORS).map(([k, v]) => [`idle ${k}`, v]));
const all = { ...work, ...idle };

test('every kernel category, timeline lane and idle cause has its own colour', () => {
  assert.deepEqual(Object.keys(CATEGORY_COLORS).sort(), [...KERNEL_CATEGORIES].sort());
  for (const c of TIMELINE_CATEGORIES.filter((c) => c !== 'kernel')) assert.ok(c in CATEGORY_COLORS || c in LANE_COLORS, c);
  assert.deepEqual(Object.keys(IDLE_COLORS).sort(), [...IDLE_CAUSES].sort());
  for (const c of KERNEL_CATEGORIES) assert.equal(categoryColor(c), CATEGORY_COLORS[c]);
  assert.equal(categoryColor('kernel'), CATEGORY_COLORS.other); // a kernel no pattern classified
  assert.equal(categoryColor('collective'), CATEGORY_COLORS.communication); // XLA's word for it
  assert.equal(categoryColor('no such thing'), CATEGORY_COLORS.other);
  assert.equal(categoryColor('sync'), LANE_COLORS.sync);
  assert.equal(idleColor('sync'), IDLE_COLORS.sync);
  assert.equal(idleColor(null), IDLE_COLORS.other);
  assert.equal(idleColor('no such cause'), IDLE_COLORS.other);
  assert.equal(BUSY_COLOR, LANE_COLORS.busy);
});

test('all colours are distinct, by value and by a visible margin', () => {
  const entries = Object.entries(all);
  assert.equal(new Set(entries.map(([, v]) => v.toLowerCase())).size, entries.length);
  for (let i = 0; i < entries.length; i++) {
    for (let j = i + 1; j < entries.length; j++) {
      const d = deltaE(entries[i][1], entries[j][1]);
      assert.ok(d >= 18, `${entries[i][0]} ${entries[i][1]} and ${entries[j][0]} ${entries[j][1]}: ΔE ${d.toFixed(1)}`);
    }
  }
});

test('no idle colour equals a category colour (the old clashes are gone)', () => {
  for (const [k, v] of Object.entries(idle)) for (const [w, c] of Object.entries(work)) assert.notEqual(v.toLowerCase(), c.toLowerCase(), `${k} = ${w}`);
  assert.notEqual(idleColor('host_wait'), categoryColor('copy'));
  assert.notEqual(categoryColor('memcpy'), categoryColor('device_sync'));
  assert.notEqual(categoryColor('gemm'), BUSY_COLOR);
  // idle is a light tint, work is not: every idle cause is lighter than every kind of work
  const L = (hex) => lab(hex)[0];
  const darkestIdle = Math.min(...Object.values(IDLE_COLORS).map(L));
  for (const c of KERNEL_CATEGORIES.filter((c) => !['norm', 'index', 'memset'].includes(c))) assert.ok(L(CATEGORY_COLORS[c]) < darkestIdle, c);
});

test('every colour shows on the light and on the dark card (style.css)', () => {
  const css = readFileSync(new URL('./style.css', import.meta.url), 'utf8');
  const cards = [...css.matchAll(/--card:\s*(#[0-9a-fA-F]{6})/g)].map((m) => m[1]);
  assert.equal(cards.length, 2, 'a light and a dark --card');
  for (const bg of cards) {
    for (const [k, v] of Object.entries(all)) assert.ok(contrast(v, bg) >= 1.4, `${k} ${v} on ${bg}: ${contrast(v, bg).toFixed(2)}`);
  }
});

test('labels on a colour: black on light fills, white on dark ones', () => {
  assert.equal(contrast('#000000', '#ffffff'), 21);
  assert.equal(textOn(IDLE_COLORS.host_wait), '#000000');
  assert.equal(textOn(CATEGORY_COLORS.norm), '#000000');
  assert.equal(textOn(CATEGORY_COLORS.attention), '#ffffff');
  assert.equal(textOn(LANE_COLORS.busy), '#ffffff');
});

test('every model part has its own colour; compiled graphs take colours no named part uses', () => {
  const PARTS = ['embedding', 'attention', 'mlp', 'norms', 'lora', 'moe', 'lm_head', 'loss', 'optimizer', 'communication',
    'data_movement', 'other'];
  assert.deepEqual(Object.keys(PART_COLORS).sort(), [...PARTS].sort());
  const named = PARTS.map((p) => partColor(p).toLowerCase());
  assert.equal(new Set(named).size, PARTS.length);
  const graphs = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => partColor(`compiled_graph:${i}`, i).toLowerCase());
  assert.equal(new Set(graphs).size, 8);
  for (const g of graphs) assert.ok(!named.includes(g), g);
  assert.equal(partColor('no such part'), CATEGORY_COLORS.other);
});
