// Drawing of the trace view on a canvas: layout of the rows, colours, and one frame. No state of its own:
// views/traceview_canvas.js owns the data and the view and calls draw() once per animation frame.
// Names are drawn with fillText, never parsed as HTML.

import { categoryColor, textOn } from '../palette.js';
import { fmtTick, layoutTicks } from '../timeline_math.js';
import { upperBound } from './view_math.js';

export const LABEL_W = 190;
export const AXIS_H = 22;
export const ROW_H = 16;
export const MEM_H = 34;
export const FINDINGS_H = 18;

/** Host categories (the device ones are palette.js's kernel categories). */
export const HOST_COLORS = Object.freeze({
  cpu_op: '#7f93ad', annotation: '#4f8a8b', step: '#35506e', python: '#a3ab78', runtime: '#b39ddb',
  driver: '#9c86c9', gpu_annotation: '#6c8ebf', sync: '#d81b60', host_other: '#9e9e9e',
});
const SEV = { high: '#d93025', medium: '#f29900', low: '#80868b' };
export const HIGHLIGHT = '#ff1744';

export function colorOf(cat) {
  return HOST_COLORS[cat] || categoryColor(cat);
}

/** Display rows from the loaded answer: findings, then per lane one row per depth shown (memory: one tall row). */
export function layout(data, collapsed = null) {
  const rows = [{ kind: 'findings', label: 'Findings', y: AXIS_H, h: FINDINGS_H }];
  let y = AXIS_H + FINDINGS_H;
  if (!data) return { rows, height: y + 4 };
  for (const lane of data.lanes) {
    if (lane.kind === 'memory') {
      rows.push({ kind: 'memory', lane, label: lane.label, y, h: MEM_H, first: true });
      y += MEM_H;
      continue;
    }
    // rows empty in the loaded range at the bottom of a lane take no room
    let n = lane.rows.length;
    while (n > 1 && !lane.rows[n - 1].s.length) n--;
    n = Math.max(1, n);
    const shut = collapsed && collapsed.has(lane.id); // one row: a host thread with no step work, until clicked
    if (shut) n = 1;
    for (let d = 0; d < n; d++) {
      const label = d === 0 ? (shut ? `▸ ${lane.label} (no launches)` : lane.label) : '';
      rows.push({ kind: 'row', lane, depth: d, row: lane.rows[d] || null, label, y, h: ROW_H, first: d === 0 });
      y += ROW_H;
    }
  }
  return { rows, height: y + 4 };
}

/** The display row at canvas y, or null. */
export function rowAt(lay, y) {
  for (const r of lay.rows) if (y >= r.y && y < r.y + r.h) return r;
  return null;
}

const textColors = new Map();
function textColor(bg) {
  let c = textColors.get(bg);
  if (c === undefined) { c = textOn(bg); textColors.set(bg, c); }
  return c;
}

function clipText(ctx, text, room) {
  const chars = Math.floor(room / 6.2);
  if (chars < 3) return '';
  return text.length > chars ? `${text.slice(0, chars - 1)}…` : text;
}

/**
 * One frame. s: {ctx, w, h, view: [v0, v1], data, lay, theme: {fg, muted, grid, bg}, findings: [{id, severity,
 * ranges}], activeFinding, highlightName (index into data.names or -1), selected: {lane, depth, ev} | null,
 * flow: [{lane, depth, ts_ns, dur_ns}], dpr}
 */
export function draw(s) {
  const { ctx, w, view, lay, theme } = s;
  const [v0, v1] = view;
  const plotW = Math.max(1, w - LABEL_W);
  const k = plotW / Math.max(1, v1 - v0);
  const xOf = (t) => LABEL_W + (t - v0) * k;
  ctx.clearRect(0, 0, w, lay.height);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  drawAxis(s, xOf, plotW);
  shadeActiveFinding(s, xOf);
  const batch = { byColor: new Map(), outlines: [], labels: [], seps: [] };
  const rowY = new Map();
  for (const r of lay.rows) {
    if (r.kind === 'row' && r.row) rowY.set(`${r.lane.id}/${r.depth}`, r.y);
    if (r.first && r !== lay.rows[0]) { ctx.fillStyle = theme.grid; ctx.fillRect(0, r.y, w, 1); }
    if (r.kind === 'findings') drawFindingsRow(s, r, xOf);
    else if (r.kind === 'memory') drawMemory(ctx, r, xOf, v0, v1, theme);
    else if (r.row) collectRow(s, r, xOf, batch);
  }
  paintBatch(ctx, batch, theme);
  drawFlow(ctx, s, rowY, xOf);
  s.stats = { highlighted: batch.outlines.filter((o) => o[4] === HIGHLIGHT).length, rects: batch.byColor.size };
  drawLabelColumn(ctx, lay, theme);
}

/** The time axis: a grid line and a label per tick. */
function drawAxis(s, xOf, plotW) {
  const { ctx, view: [v0, v1], lay, theme } = s;
  const ticks = layoutTicks(v0, v1, Math.max(2, Math.floor(plotW / 120)));
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : v1 - v0;
  ctx.fillStyle = theme.grid;
  for (const t of ticks) ctx.fillRect(Math.round(xOf(t)), AXIS_H - 4, 1, lay.height - AXIS_H + 4);
  ctx.fillStyle = theme.muted;
  for (const t of ticks) ctx.fillText(fmtTick(t, step), xOf(t) + 3, AXIS_H / 2);
}

/** The active finding's ranges, shaded across every row. */
function shadeActiveFinding(s, xOf) {
  const { ctx, w, view: [v0, v1], lay } = s;
  const active = s.findings.find((f) => f.id === s.activeFinding);
  if (!active) return;
  ctx.fillStyle = SEV[active.severity] || SEV.low;
  ctx.globalAlpha = 0.1;
  for (const [a, b] of active.ranges) {
    if (b < v0 || a > v1) continue;
    const x0 = Math.max(LABEL_W, xOf(a));
    ctx.fillRect(x0, AXIS_H, Math.max(1, Math.min(w, xOf(b)) - x0), lay.height - AXIS_H);
  }
  ctx.globalAlpha = 1;
}

/** The findings row: each finding's ranges in its severity's colour, the active one opaque. */
function drawFindingsRow(s, r, xOf) {
  const { ctx, w, view: [v0, v1] } = s;
  for (const f of s.findings) {
    ctx.fillStyle = SEV[f.severity] || SEV.low;
    ctx.globalAlpha = f.id === s.activeFinding ? 1 : 0.55;
    for (const [a, b] of f.ranges) {
      if (b < v0 || a > v1) continue;
      const x0 = Math.max(LABEL_W, xOf(a));
      ctx.fillRect(x0, r.y + 3, Math.max(2, Math.min(w, xOf(b)) - x0), r.h - 6);
    }
  }
  ctx.globalAlpha = 1;
}

/** One event row's visible intervals, batched by colour (drawn later in one pass per colour), with the outlines
 * of the highlighted name and the selected event, the 1 px separators and the labels that fit. */
function collectRow(s, r, xOf, batch) {
  const { w, view: [v0, v1], data } = s;
  const R = r.row;
  let i = Math.max(0, upperBound(R.s, v0) - 1);
  let lastPx = -1;
  for (; i < R.s.length; i++) {
    const a = R.s[i];
    if (a > v1) break;
    const b = a + R.d[i];
    if (b < v0) continue;
    const x0 = Math.max(LABEL_W, xOf(a));
    const x1 = Math.min(w, xOf(b));
    const wd = x1 - x0;
    if (wd < 1 && Math.floor(x0) === lastPx) continue; // one sub-pixel interval per pixel is enough
    lastPx = Math.floor(x0);
    const color = R.color[i];
    let list = batch.byColor.get(color);
    if (!list) { list = []; batch.byColor.set(color, list); }
    list.push(x0, r.y + 1, Math.max(1, wd), r.h - 2);
    if (R.name[i] === s.highlightName) batch.outlines.push([x0, r.y + 1, Math.max(2, wd), r.h - 2, HIGHLIGHT]);
    if (s.selected && R.ev[i] === s.selected.ev) batch.outlines.push([x0, r.y + 1, Math.max(2, wd), r.h - 2, s.theme.fg]);
    if (wd >= 4) batch.seps.push(x0, r.y + 1, r.h - 2); // a 1 px gap: neighbours of one colour stay apart
    if (wd > 36) batch.labels.push([data.names[R.name[i]], x0 + 3, r.y + r.h / 2, wd - 6, color, R.n[i]]);
  }
}

/** The batched intervals, separators, labels and outlines, in that order. */
function paintBatch(ctx, batch, theme) {
  for (const [color, list] of batch.byColor) {
    ctx.fillStyle = color;
    for (let j = 0; j < list.length; j += 4) ctx.fillRect(list[j], list[j + 1], list[j + 2], list[j + 3]);
  }
  ctx.fillStyle = theme.bg;
  const seps = batch.seps;
  for (let j = 0; j < seps.length; j += 3) ctx.fillRect(seps[j], seps[j + 1], 1, seps[j + 2]);
  for (const [text, x, y, room, color, n] of batch.labels) {
    const t = clipText(ctx, n > 1 ? `${text} (+${n - 1})` : text, room);
    if (!t) continue;
    ctx.fillStyle = textColor(color);
    ctx.fillText(t, x, y);
  }
  for (const [x, y, wd, hh, color] of batch.outlines) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.strokeRect(x, y, wd, hh);
  }
}

/** The label column, on top of everything. */
function drawLabelColumn(ctx, lay, theme) {
  ctx.fillStyle = theme.bg;
  ctx.fillRect(0, AXIS_H, LABEL_W - 2, lay.height - AXIS_H);
  for (const r of lay.rows) {
    if (!r.label) continue;
    ctx.fillStyle = theme.fg;
    let label = r.label;
    if (r.kind === 'row' && r.lane.depth > r.lane.shown_depth) label = `▸ ${label} (+${r.lane.depth - r.lane.shown_depth})`;
    else if (r.kind === 'row' && r.lane.depth > 6 && r.lane.shown_depth === r.lane.depth) label = `▾ ${label}`;
    ctx.fillText(clipText(ctx, label, LABEL_W - 10), 6, r.y + Math.min(r.h, ROW_H) / 2);
  }
}

function drawMemory(ctx, r, xOf, v0, v1, theme) {
  const L = r.lane;
  const ts = L.ts_ns;
  if (!ts || !ts.length || !(L.max_bytes > 0)) return;
  const base = r.y + r.h - 3;
  const scale = (r.h - 6) / L.max_bytes;
  ctx.beginPath();
  let started = false;
  for (let i = 0; i < ts.length; i++) {
    const x = Math.max(LABEL_W, xOf(ts[i]));
    const nx = i + 1 < ts.length ? xOf(ts[i + 1]) : xOf(v1);
    const y = base - L.bytes[i] * scale;
    if (!started) { ctx.moveTo(x, y); started = true; } else ctx.lineTo(x, y);
    ctx.lineTo(Math.min(nx, xOf(v1)), y);
  }
  ctx.strokeStyle = categoryColor('memcpy');
  ctx.lineWidth = 1.5;
  ctx.stroke();
  ctx.fillStyle = theme.muted;
}

function drawFlow(ctx, s, rowY, xOf) {
  if (!s.selected || !s.flow || !s.flow.length) return;
  const from = rowY.get(`${s.selected.lane}/${s.selected.depth}`);
  if (from === undefined) return;
  ctx.strokeStyle = HIGHLIGHT;
  ctx.lineWidth = 1.5;
  for (const f of s.flow) {
    const to = rowY.get(`${f.lane}/${f.depth}`);
    if (to === undefined) continue;
    const x0 = xOf(s.selected.ts_ns);
    const x1 = xOf(f.ts_ns);
    ctx.beginPath();
    ctx.moveTo(x0, from + ROW_H / 2);
    ctx.lineTo(x1, to + ROW_H / 2);
    ctx.stroke();
    ctx.beginPath();
    ctx.arc(x1, to + ROW_H / 2, 3, 0, Math.PI * 2);
    ctx.fillStyle = HIGHLIGHT;
    ctx.fill();
  }
}
