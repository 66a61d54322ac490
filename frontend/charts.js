// uPlot option builders (pure: data in, {opts, data} out) and the glue that sizes charts to their
// container, including the case where the iframe is hidden (width 0) when the chart is built.

import { formatValue } from './format.js';
import { unitOf } from './registry.js';

// uPlot (145 KB) is imported on first use, so it never delays the cards and findings.
let uPlotPromise = null;
export function loadUPlot() {
  if (!uPlotPromise) uPlotPromise = import('./vendor/uplot/uPlot.esm.js').then((m) => m.default);
  return uPlotPromise;
}

function theme() {
  const cs = getComputedStyle(document.documentElement);
  return {
    fg: cs.getPropertyValue('--fg-muted').trim() || '#555',
    fgStrong: cs.getPropertyValue('--fg').trim() || '#222',
    card: cs.getPropertyValue('--card').trim() || '#fff',
    grid: cs.getPropertyValue('--grid').trim() || 'rgba(0,0,0,0.08)',
    point: cs.getPropertyValue('--link').trim() || '#1a73e8', // one series, no category: the theme's accent
  };
}

function axis(t, extra = {}) {
  return { stroke: t.fg, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1 }, ...extra };
}

const nsAxis = (t, label) => axis(t, { label, values: (u, vals) => vals.map((v) => formatValue(v, 'ns')), size: 70 });

/**
 * Stacked bars per step. parts: [{key, label, color, values: [ns per step]}] bottom-to-top.
 * uPlot has no stacking: each series is drawn as a bar from 0 to its cumulative sum, tallest first,
 * so the shorter ones paint over it. clipAt (ns, optional): the y axis stops there so one huge step
 * (a compile, a warm-up) does not flatten the others; a clipped bar gets its real total written on top.
 * onHover(i | null): the step under the cursor (the view shows its parts; uPlot's legend is off).
 */
export function stackedStepBars({ uPlot, steps, parts, width, height, clipAt = null, onHover = null }) {
  const t = theme();
  const x = steps.map((_, i) => i);
  const cum = [];
  const totals = steps.map((_, i) => parts.reduce((a, p) => a + (p.values[i] || 0), 0));
  // a step past the axis (clipAt) is drawn to its top in its own proportions: the axis covers what is drawn, and
  // the bar still says what the step is made of (a compiling step is not a busy one); its label gives its time
  const scale = totals.map((tot) => (clipAt && tot > clipAt ? clipAt / tot : 1));
  let run = steps.map(() => 0);
  for (const p of parts) {
    run = run.map((v, i) => v + (p.values[i] || 0) * scale[i]);
    cum.push(run.slice());
  }
  const order = parts.map((_, i) => i).reverse(); // top part (largest cumulative) drawn first
  const bars = uPlot.paths.bars({ size: [0.7, 60], align: 0 });
  const hooks = {
    draw: [(u) => {
      if (!clipAt) return;
      const ctx = u.ctx;
      ctx.save();
      ctx.font = `${Math.round(11 * devicePixelRatio)}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      const dpr = devicePixelRatio;
      totals.forEach((tot, i) => {
        if (tot <= clipAt) return;
        const text = `↑ ${formatValue(tot, 'ns')}`;
        const cx = u.valToPos(i, 'x', true);
        const top = u.valToPos(clipAt, 'y', true) + 3 * dpr;
        const w = ctx.measureText(text).width + 8 * dpr;
        ctx.fillStyle = t.card;
        ctx.fillRect(cx - w / 2, top - 1 * dpr, w, 15 * dpr);
        ctx.fillStyle = t.fgStrong;
        ctx.fillText(text, cx, top + 1 * dpr);
      });
      ctx.restore();
    }],
    setCursor: [(u) => { if (onHover) onHover(u.cursor.idx ?? null); }],
  };
  const opts = {
    width, height,
    legend: { show: false },
    cursor: { points: { show: false }, drag: { x: false, y: false } },
    scales: {
      x: { time: false, range: (u, mn, mx) => [mn - 0.5, mx + 0.5] },
      y: { range: (u, mn, mx) => [0, clipAt || mx * 1.05 || 1] },
    },
    axes: [
      axis(t, { label: 'step', values: (u, vals) => vals.map((v) => (Number.isInteger(v) && steps[v] !== undefined ? String(steps[v]) : '')), size: 40 }),
      nsAxis(t, ''),
    ],
    series: [
      { label: 'step' },
      ...order.map((i) => ({ label: parts[i].label, fill: parts[i].color, stroke: parts[i].color, width: 0, paths: bars, points: { show: false } })),
    ],
    hooks,
  };
  const data = [x, ...order.map((i) => cum[i])];
  return { opts, data };
}

/** Where to cut the y axis of per-step bars: below one step far above the rest, else null. */
export function outlierClip(totals) {
  const v = totals.filter((x) => Number.isFinite(x) && x > 0).sort((a, b) => a - b);
  if (v.length < 3) return null;
  const max = v[v.length - 1];
  const med = v[(v.length - 1) >> 1];
  if (max <= 4 * med) return null;
  return Math.max(v[v.length - 2], 2 * med) * 1.25;
}

/** Step time (y) against tokens per step (x), points only, each labelled with its step number. */
export function tokensScatter({ rows, width, height, onHover = null }) {
  const t = theme();
  const sorted = [...rows].sort((a, b) => a.tokens - b.tokens);
  const xMin = sorted[0].tokens;
  const xMax = sorted[sorted.length - 1].tokens;
  const opts = {
    width, height,
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: {
      x: { time: false, auto: false, range: () => { const pad = Math.max((xMax - xMin) * 0.08, xMax * 0.05, 1); return [Math.max(0, xMin - pad), xMax + pad]; } },
      y: { range: (u, mn, mx) => [0, mx * 1.15 || 1] },
    },
    axes: [axis(t, { label: 'tokens per step', values: (u, vals) => vals.map((v) => formatValue(v, unitOf('steps.per_step[].tokens'))) }), nsAxis(t, '')],
    series: [
      { label: 'tokens' },
      { label: 'step time', stroke: t.point, fill: t.point, width: 0, paths: () => null,
        points: { show: true, size: 8, fill: t.point } },
    ],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.font = `${Math.round(10 * devicePixelRatio)}px system-ui, sans-serif`;
        ctx.fillStyle = t.fg;
        ctx.textAlign = 'left';
        ctx.textBaseline = 'bottom';
        sorted.forEach((r) => {
          ctx.fillText(`#${r.index}`, u.valToPos(r.tokens, 'x', true) + 5 * devicePixelRatio, u.valToPos(r.duration_ns, 'y', true) - 3 * devicePixelRatio);
        });
        ctx.restore();
      }],
      setCursor: [(u) => { if (onHover) { const i = u.cursor.idx; onHover(i === null || i === undefined ? null : sorted[i]); } }],
    },
  };
  return { opts, data: [sorted.map((r) => r.tokens), sorted.map((r) => r.duration_ns)] };
}

/** Builds a chart in `el` sized to it, rebuilding on resize/theme; returns {destroy()}. */
export function mountChart(el, build, height = 220) {
  let plot = null;
  let lastW = 0;
  let uPlot = null;
  let dead = false;
  const make = () => {
    if (!uPlot || dead) return;
    const w = Math.floor(el.clientWidth);
    if (w <= 0) return; // hidden iframe: wait for the ResizeObserver
    if (plot && w === lastW) return;
    lastW = w;
    if (plot) { plot.destroy(); plot = null; }
    const { opts, data } = build(w, height, uPlot);
    plot = new uPlot(opts, data, el);
  };
  loadUPlot().then((u) => { uPlot = u; make(); });
  const ro = new ResizeObserver(() => make());
  ro.observe(el);
  make();
  return {
    rebuild() { lastW = 0; make(); },
    destroy() { dead = true; ro.disconnect(); if (plot) plot.destroy(); plot = null; },
  };
}
