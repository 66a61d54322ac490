// Zoomable timeline of one step: a canvas with one row per lane (GPU streams, host launches, syncs,
// data loader) and a row of idle gaps coloured by cause; gaps are also shaded across the GPU rows.
// Wheel zooms at the cursor, drag pans, double-click resets. Names are drawn on the canvas or set
// with textContent: never parsed as HTML.

import { h, clear, append } from '../dom.js';
import { formatValue, shortKernelName } from '../format.js';
import { categoryColor, idleColor, textOn } from '../palette.js';
import { unitOf } from '../registry.js';
import { hasHostLaunches, stepRows } from './data.js';
import { fmtTick, layoutTicks, visibleRange } from '../timeline_math.js';

const ROW_H = 20;
const LABEL_W = 170;
const AXIS_H = 22;
const CAUSE_LABEL = { host_wait: 'GPU idle: waiting for host launches', sync: 'GPU idle: host sync', data_loader: 'GPU idle: data loader', other: 'GPU idle: other' };
// The /timeline body (docs/http_api.md StepTimeline, not a report) holds times in ns and counts.
const ns = (v) => formatValue(v, 'ns');
const count = (v) => formatValue(v, 'count');

function buildDom(el, onStep) {
  const d = {
    select: h('select', { class: 'step-select', 'aria-label': 'Step' }),
    info: h('span', { class: 'muted tl-info' }),
    zoomIn: h('button', { type: 'button', title: 'Zoom in', text: '+' }),
    zoomOut: h('button', { type: 'button', title: 'Zoom out', text: '−' }),
    reset: h('button', { type: 'button', title: 'Show the whole step (double-click)', text: 'Reset' }),
    legend: h('div', { class: 'legend' }),
    canvas: h('canvas', { class: 'tl-canvas' }),
    tip: h('div', { class: 'tl-tip', hidden: true }),
    body: h('div', { class: 'tl-body' }),
    note: h('p', { class: 'muted na', hidden: true }),
  };
  d.box = h('div', { class: 'tl-box' }, d.canvas, d.tip);
  d.select.addEventListener('change', () => onStep && onStep(Number(d.select.value)));
  clear(el).append(h('div', { class: 'tl-toolbar' }, h('label', {}, 'Step ', d.select), d.zoomIn, d.zoomOut, d.reset, d.info), d.note, d.legend, d.body);
  return d;
}

// byCause false for XLA traces: gaps are drawn as plain "GPU idle"
const gapColor = (S, c) => idleColor(S.byCause ? S.tl.causes[c] : null);
const gapLabel = (S, c) => (S.byCause ? CAUSE_LABEL[S.tl.causes[c]] || S.tl.causes[c] : 'GPU idle');
const width = (S) => Math.max(0, Math.floor(S.dom.box.clientWidth));
const plotW = (S) => Math.max(1, width(S) - LABEL_W);
const xOf = (S, t) => LABEL_W + ((t - S.v0) / (S.v1 - S.v0)) * plotW(S);
const tOf = (S, x) => S.v0 + ((x - LABEL_W) / plotW(S)) * (S.v1 - S.v0);

function kernelColor(S, lane, j) {
  const cat = S.tl.categories[lane.cat[j]];
  if (cat !== 'kernel') return categoryColor(cat);
  const nc = S.tl.name_category && S.tl.name_category[lane.name[j]];
  return categoryColor(nc || 'kernel');
}

function shortName(S, i) {
  let v = S.shortCache.get(i);
  if (v === undefined) { v = shortKernelName(S.tl.names[i]); S.shortCache.set(i, v); }
  return v;
}

function themeOf() {
  const cs = getComputedStyle(document.documentElement);
  const v = (k, d) => cs.getPropertyValue(k).trim() || d;
  return { fg: v('--fg', '#222'), muted: v('--fg-muted', '#666'), grid: v('--grid', '#ddd'), bg: v('--bg-alt', '#f6f6f6') };
}

function drawAxis(S, ctx, hgt, th) {
  const ticks = layoutTicks(S.v0, S.v1, Math.max(2, Math.floor(plotW(S) / 110)));
  const tickStep = ticks.length > 1 ? ticks[1] - ticks[0] : S.v1 - S.v0;
  for (const t of ticks) {
    const x = xOf(S, t);
    ctx.fillStyle = th.grid;
    ctx.fillRect(Math.round(x), AXIS_H - 4, 1, hgt - AXIS_H + 4);
    ctx.fillStyle = th.muted;
    ctx.fillText(t === 0 ? '0' : fmtTick(t, tickStep), x + 3, AXIS_H / 2);
  }
}

/** Idle gaps: shaded across the GPU rows (y0..y1, alpha) or as bars in their own row. */
function drawGaps(S, ctx, y0, y1, alpha) {
  const g = S.tl.gaps;
  ctx.globalAlpha = alpha;
  const [a, b] = visibleRange(g.start_ns, g.dur_ns, S.v0, S.v1);
  for (let j = a; j < b; j++) {
    ctx.fillStyle = gapColor(S, g.cause[j]);
    const x0 = xOf(S, g.start_ns[j]);
    ctx.fillRect(x0, y0, Math.max(1, xOf(S, g.start_ns[j] + g.dur_ns[j]) - x0), y1 - y0);
  }
  ctx.globalAlpha = 1;
}

function drawLane(S, ctx, L, y) {
  const [a, b] = visibleRange(L.start_ns, L.dur_ns, S.v0, S.v1);
  let lastX = -1;
  for (let j = a; j < b; j++) {
    const x0 = xOf(S, L.start_ns[j]);
    const x1 = xOf(S, L.start_ns[j] + L.dur_ns[j]);
    if (x1 - x0 < 1 && Math.floor(x0) === lastX) continue; // sub-pixel neighbours: one pixel is enough
    lastX = Math.floor(x0);
    const color = kernelColor(S, L, j);
    ctx.fillStyle = color;
    ctx.fillRect(x0, y + 2, Math.max(1, x1 - x0), ROW_H - 4);
    if (x1 - x0 <= 40) continue;
    const room = Math.floor((Math.min(x1, LABEL_W + plotW(S)) - Math.max(x0, LABEL_W) - 6) / 6.2);
    const label = shortName(S, L.name[j]);
    if (room >= 4) {
      ctx.fillStyle = textOn(color);
      ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, Math.max(x0, LABEL_W) + 3, y + ROW_H / 2);
    }
  }
}

function clipTo(ctx, x, y, w, hgt, fn) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, hgt);
  ctx.clip();
  fn();
  ctx.restore();
}

function draw(S) {
  if (!S.tl) return;
  const w = width(S);
  if (w <= 0) return;
  const { canvas } = S.dom;
  const hgt = AXIS_H + S.rows.length * ROW_H + 4;
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${hgt}px`;
  canvas.width = Math.floor(w * dpr);
  canvas.height = Math.floor(hgt * dpr);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const th = themeOf();
  ctx.clearRect(0, 0, w, hgt);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  drawAxis(S, ctx, hgt, th);
  const gpuRows = S.rows.map((r, i) => (r.kind === 'lane' && r.lane.kind === 'gpu' ? i : -1)).filter((i) => i >= 0);
  if (gpuRows.length && S.tl.gaps.start_ns.length) {
    const top = AXIS_H + Math.min(...gpuRows) * ROW_H;
    const bottom = AXIS_H + (Math.max(...gpuRows) + 1) * ROW_H;
    clipTo(ctx, LABEL_W, top, plotW(S), bottom - top, () => drawGaps(S, ctx, top, bottom, 0.12));
  }
  S.rows.forEach((r, i) => {
    const y = AXIS_H + i * ROW_H;
    if (i % 2) { ctx.fillStyle = th.bg; ctx.globalAlpha = 0.5; ctx.fillRect(LABEL_W, y, plotW(S), ROW_H); ctx.globalAlpha = 1; }
    clipTo(ctx, LABEL_W, y, plotW(S), ROW_H, () => (r.kind === 'gaps' ? drawGaps(S, ctx, y + 3, y + ROW_H - 3, 1) : drawLane(S, ctx, r.lane, y)));
    ctx.fillStyle = th.fg;
    ctx.fillText(r.label.slice(0, 28), 6, y + ROW_H / 2);
  });
}

function hit(S, ev) {
  const rect = S.dom.canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left;
  const y = ev.clientY - rect.top;
  const i = Math.floor((y - AXIS_H) / ROW_H);
  if (x < LABEL_W || i < 0 || i >= S.rows.length) return null;
  const t = tOf(S, x);
  const slop = ((S.v1 - S.v0) / plotW(S)) * 2; // 2 px
  const r = S.rows[i];
  const arr = r.kind === 'gaps' ? S.tl.gaps : r.lane;
  const [a, b] = visibleRange(arr.start_ns, arr.dur_ns, t - slop, t + slop);
  for (let j = a; j < b; j++) {
    if (arr.start_ns[j] - slop <= t && t <= arr.start_ns[j] + arr.dur_ns[j] + slop) return { r, j, x, y };
  }
  return null;
}

function showTip(S, ev) {
  const { tip, box } = S.dom;
  const found = hit(S, ev);
  if (!found) { tip.hidden = true; return; }
  const { r, j, x, y } = found;
  const tl = S.tl;
  clear(tip);
  if (r.kind === 'gaps') {
    append(tip, [h('b', { text: gapLabel(S, tl.gaps.cause[j]) }), h('div', { text: ns(tl.gaps.dur_ns[j]) }),
      h('div', { class: 'muted', text: `at +${ns(tl.gaps.start_ns[j])}` })]);
  } else {
    const L = r.lane;
    const nc = tl.name_category && tl.name_category[L.name[j]];
    const full = tl.names[L.name[j]];
    const short = shortName(S, L.name[j]);
    append(tip, [h('b', { class: 'tip-name', text: short }),
      short !== full ? h('div', { class: 'tip-full', text: full }) : null,
      h('div', { text: `${ns(L.dur_ns[j])} · ${nc || tl.categories[L.cat[j]]}` }),
      L.n[j] > 1 ? h('div', { class: 'muted', text: `${count(L.n[j])} events merged at this zoom (longest shown)` }) : null,
      h('div', { class: 'muted', text: `at +${ns(L.start_ns[j])}` })]);
  }
  tip.hidden = false;
  tip.style.left = `${Math.max(0, Math.min(x + 12, box.clientWidth - 380))}px`;
  tip.style.top = `${y + 14}px`;
}

function setView(S, a, b) {
  const minSpan = 1000; // 1 µs
  const w = Math.min(Math.max(b - a, minSpan), S.span);
  S.v0 = Math.max(0, Math.min(a, S.span - w));
  S.v1 = S.v0 + w;
  draw(S);
}
const zoomAt = (S, t, factor) => setView(S, t - (t - S.v0) * factor, t + (S.v1 - t) * factor);

function bindInput(S) {
  const { canvas, tip, zoomIn, zoomOut, reset } = S.dom;
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const x = ev.clientX - canvas.getBoundingClientRect().left;
    zoomAt(S, x < LABEL_W ? (S.v0 + S.v1) / 2 : tOf(S, x), ev.deltaY > 0 ? 1.25 : 0.8);
  }, { passive: false });
  canvas.addEventListener('mousedown', (ev) => { S.drag = { x: ev.clientX, v0: S.v0, v1: S.v1 }; canvas.classList.add('dragging'); });
  window.addEventListener('mouseup', () => { S.drag = null; canvas.classList.remove('dragging'); });
  canvas.addEventListener('mousemove', (ev) => {
    if (!S.drag) { showTip(S, ev); return; }
    const dt = ((ev.clientX - S.drag.x) / plotW(S)) * (S.drag.v1 - S.drag.v0);
    setView(S, S.drag.v0 - dt, S.drag.v1 - dt);
    tip.hidden = true;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('dblclick', () => setView(S, 0, S.span));
  zoomIn.addEventListener('click', () => zoomAt(S, (S.v0 + S.v1) / 2, 0.5));
  zoomOut.addEventListener('click', () => zoomAt(S, (S.v0 + S.v1) / 2, 2));
  reset.addEventListener('click', () => setView(S, 0, S.span));
}

function buildLegend(S) {
  const tl = S.tl;
  clear(S.dom.legend);
  const seen = new Map();
  for (const L of tl.lanes) {
    for (let j = 0; j < L.cat.length; j++) {
      const cat = tl.categories[L.cat[j]];
      const key = cat === 'kernel' ? (tl.name_category && tl.name_category[L.name[j]]) || 'other' : cat;
      if (!seen.has(key)) seen.set(key, categoryColor(key));
    }
  }
  for (const c of new Set(tl.gaps.cause)) seen.set(gapLabel(S, c), gapColor(S, c));
  for (const [k, c] of seen) S.dom.legend.append(h('span', { class: 'lg' }, h('i', { style: { background: c } }), h('span', { text: k.replace(/_/g, ' ') })));
}

/** A step's timeline answer on screen (or the note that it has nothing to draw). */
function showTimeline(S, timeline) {
  const { select, info, legend, body, box } = S.dom;
  if (!timeline.intervals) {
    S.tl = null;
    select.value = String(timeline.step.index);
    info.textContent = '';
    clear(legend);
    clear(body).append(h('p', { class: 'muted', text: 'Nothing to draw in this step: no device work and no launch, sync or data-loader calls were recorded in it (a CPU-only or host-only trace).' }));
    return;
  }
  S.tl = timeline;
  S.span = Math.max(1, timeline.step.duration_ns || timeline.step.end_ns - timeline.step.start_ns);
  S.v0 = 0;
  S.v1 = S.span;
  select.value = String(timeline.step.index);
  S.rows = [{ label: 'GPU idle (gaps)', kind: 'gaps' }, ...timeline.lanes.map((L) => ({ label: L.label, kind: 'lane', lane: L }))];
  const merged = timeline.merged ? ` · merged at ${ns(timeline.resolution_ns)} to stay under 20k intervals` : '';
  info.textContent = `${count(timeline.source_events)} events · ${count(timeline.intervals)} intervals drawn (idle gaps included)${merged}`;
  S.shortCache.clear();
  clear(body).append(box);
  buildLegend(S);
  draw(S);
}

export function mountTimeline(el, { onStep } = {}) {
  const S = { dom: buildDom(el, onStep), byCause: true, tl: null, rows: [], v0: 0, v1: 1, span: 1, drag: null, shortCache: new Map() };
  bindInput(S);
  const ro = new ResizeObserver(() => draw(S));
  ro.observe(S.dom.box);
  const { select, note, body } = S.dom;
  return {
    /** hostLaunches false (XLA traces): idle gaps are not split by host cause; the note says why. */
    setContext({ hostLaunches }) {
      S.byCause = hostLaunches !== false;
      note.hidden = S.byCause;
      note.textContent = S.byCause ? '' : 'XLA trace: idle gaps are drawn without a host cause (launch wait, sync, data loader do not apply: XLA launches whole compiled graphs). The host side, tracing and compiling included, is in the Profile tab of tensorboard-plugin-profile (XProf).';
    },
    setSteps(steps, current) {
      clear(select);
      for (const s of steps) {
        select.append(h('option', { value: String(s.index), text: `${s.index < 0 ? 'whole trace' : `#${formatValue(s.index, unitOf('steps.per_step[].index'))}`} · ${formatValue(s.duration_ns, unitOf('steps.per_step[].duration_ns'))}` }));
      }
      if (current !== undefined && current !== null) select.value = String(current);
    },
    loading(text) { clear(body).append(h('p', { class: 'muted', text: text || 'Loading the step timeline…' })); },
    message(text) { S.tl = null; clear(body).append(h('p', { class: 'muted', text })); },
    update: (timeline) => showTimeline(S, timeline),
    redraw: () => draw(S),
    destroy() { ro.disconnect(); clear(el); },
  };
}

/** The step timeline as a view of the tab's state: the report gives its steps, the timeline source the step drawn. */
export function timelineView(el, tab, section) {
  const view = mountTimeline(el, { onStep: (idx) => tab.pickStep(idx) });
  let shownReport = null;
  let shownTl = null;
  return {
    render(s) {
      const report = s.report.status === 'ok' ? s.report.body : null;
      if (report && report !== shownReport) {
        view.setContext({ hostLaunches: hasHostLaunches(report) });
        const rows = stepRows(report);
        view.setSteps(rows.length ? rows : [{ index: -1, duration_ns: report.summary && report.summary.window_ns }], s.step);
      }
      shownReport = report;
      const d = s.timeline;
      if (d === shownTl) return;
      shownTl = d;
      if (d.status === 'loading' || d.status === 'wait') view.loading();
      else if (d.status === 'ok' && d.body && d.body.lanes) view.update(d.body);
      else if (d.status === 'ok' || d.status === 'error') view.message((d.body && d.body.error) || 'No timeline for this step.');
    },
    reveal() { section.scrollIntoView({ behavior: 'smooth', block: 'start' }); },
    redraw: view.redraw,
    destroy: view.destroy,
  };
}
