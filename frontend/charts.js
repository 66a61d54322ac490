// uPlot option builders (pure: data in, {opts, data} out) and the glue that sizes charts to their
// container, including the case where the iframe is hidden (width 0) when the chart is built.

import { fmtDuration, fmtCount } from './format.js';

// uPlot (145 KB) is imported on first use, so it never delays the cards and findings.
let uPlotPromise = null;
export function loadUPlot() {
  if (!uPlotPromise) uPlotPromise = import('./vendor/uplot/uPlot.esm.js').then((m) => m.default);
  return uPlotPromise;
}

/** Colours per kernel category (classify.py), gap cause and step part. */
export const PALETTE = {
  gemm: '#4e79a7', attention: '#3f5fbf', conv: '#6b8fd6', copy: '#f28e2b', memcpy: '#e15759', memset: '#ff9d9a',
  elementwise: '#59a14f', norm: '#8cd17d', softmax: '#b6992d', reduce: '#499894', optimizer: '#86bcb6',
  quant: '#d37295', index: '#9d7660', communication: '#b07aa1', other: '#9c9c9c', kernel: '#4e79a7',
  device_sync: '#e15759', launch: '#7f7f7f', runtime: '#bab0ac', sync: '#d62728', data_loader: '#9467bd',
  busy: '#4e79a7', host_wait: '#f28e2b', data_loader_idle: '#9467bd', other_idle: '#bab0ac',
};

export function colorOf(name) {
  return PALETTE[name] || PALETTE.other;
}

function theme() {
  const cs = getComputedStyle(document.documentElement);
  return {
    fg: cs.getPropertyValue('--fg-muted').trim() || '#555',
    grid: cs.getPropertyValue('--grid').trim() || 'rgba(0,0,0,0.08)',
  };
}

function axis(t, extra = {}) {
  return { stroke: t.fg, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1 }, ...extra };
}

const nsAxis = (t, label) => axis(t, { label, values: (u, vals) => vals.map((v) => fmtDuration(v)), size: 70 });

/**
 * Stacked bars per step. parts: [{key, label, color, values: [ns per step]}] bottom-to-top.
 * uPlot has no stacking: each series is drawn as a bar from 0 to its cumulative sum, tallest first,
 * so the shorter ones paint over it.
 */
export function stackedStepBars({ uPlot, steps, parts, width, height }) {
  const t = theme();
  const x = steps.map((_, i) => i);
  const cum = [];
  let run = steps.map(() => 0);
  for (const p of parts) {
    run = run.map((v, i) => v + (p.values[i] || 0));
    cum.push(run.slice());
  }
  const order = parts.map((_, i) => i).reverse(); // top part (largest cumulative) drawn first
  const bars = uPlot.paths.bars({ size: [0.7, 60], align: 0 });
  const opts = {
    width, height,
    legend: { show: true, live: true },
    cursor: { points: { show: false }, drag: { x: false, y: false } },
    scales: { x: { time: false, range: (u, mn, mx) => [mn - 0.5, mx + 0.5] }, y: { range: (u, mn, mx) => [0, mx * 1.05 || 1] } },
    axes: [
      axis(t, { label: 'step', values: (u, vals) => vals.map((v) => (Number.isInteger(v) && steps[v] !== undefined ? String(steps[v]) : '')), size: 40 }),
      nsAxis(t, ''),
    ],
    series: [
      { label: 'step', value: (u, v) => (v === null || steps[v] === undefined ? '' : `#${steps[v]}`) },
      ...order.map((i) => ({
        label: parts[i].label, fill: parts[i].color, stroke: parts[i].color, width: 0, paths: bars, points: { show: false },
        // legend shows the part itself, not the cumulative height it is drawn at
        value: (u, v, si, di) => (di === null || di === undefined ? '' : fmtDuration(parts[i].values[di] || 0)),
      })),
    ],
  };
  const data = [x, ...order.map((i) => cum[i])];
  return { opts, data };
}

/** Step time (y) against tokens per step (x), points only. */
export function tokensScatter({ rows, width, height }) {
  const t = theme();
  const sorted = [...rows].sort((a, b) => a.tokens - b.tokens);
  const opts = {
    width, height,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false }, y: { range: (u, mn, mx) => [0, mx * 1.1 || 1] } },
    axes: [axis(t, { label: 'tokens per step', values: (u, vals) => vals.map((v) => fmtCount(v)) }), nsAxis(t, '')],
    series: [
      { label: 'tokens' },
      { label: 'step time', stroke: PALETTE.gemm, fill: PALETTE.gemm, width: 0, paths: () => null,
        points: { show: true, size: 8, fill: PALETTE.gemm }, value: (u, v) => fmtDuration(v) },
    ],
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
