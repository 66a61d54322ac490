// Zoomable timeline of one step: a canvas with one row per lane (GPU streams, host launches, syncs,
// data loader) and a row of idle gaps coloured by cause; gaps are also shaded across the GPU rows.
// Wheel zooms at the cursor, drag pans, double-click resets. Names are drawn on the canvas or set
// with textContent: never parsed as HTML.

import { h, clear, append } from '../dom.js';
import { formatValue, shortKernelName } from '../format.js';
import { categoryColor, idleColor, textOn } from '../palette.js';
import { unitOf } from '../registry.js';
import { fmtTick, layoutTicks, visibleRange } from '../timeline_math.js';

const ROW_H = 20;
const LABEL_W = 170;
const AXIS_H = 22;
const CAUSE_LABEL = { host_wait: 'GPU idle: waiting for host launches', sync: 'GPU idle: host sync', data_loader: 'GPU idle: data loader', other: 'GPU idle: other' };
// The /timeline body (docs/http_api.md StepTimeline, not a report) holds times in ns and counts.
const ns = (v) => formatValue(v, 'ns');
const count = (v) => formatValue(v, 'count');

export function mountTimeline(el, { onStep } = {}) {
  const select = h('select', { class: 'step-select', 'aria-label': 'Step' });
  select.addEventListener('change', () => onStep && onStep(Number(select.value)));
  const info = h('span', { class: 'muted tl-info' });
  const zoomIn = h('button', { type: 'button', title: 'Zoom in', text: '+' });
  const zoomOut = h('button', { type: 'button', title: 'Zoom out', text: '−' });
  const reset = h('button', { type: 'button', title: 'Show the whole step (double-click)', text: 'Reset' });
  const legend = h('div', { class: 'legend' });
  const canvas = h('canvas', { class: 'tl-canvas' });
  const tip = h('div', { class: 'tl-tip', hidden: true });
  const box = h('div', { class: 'tl-box' }, canvas, tip);
  const body = h('div', { class: 'tl-body' });
  const note = h('p', { class: 'muted na', hidden: true });
  clear(el).append(h('div', { class: 'tl-toolbar' }, h('label', {}, 'Step ', select), zoomIn, zoomOut, reset, info), note, legend, body);
  let byCause = true; // false for XLA traces: gaps are drawn as plain "GPU idle"
  const gapColor = (c) => idleColor(byCause ? tl.causes[c] : null);
  const gapLabel = (c) => (byCause ? CAUSE_LABEL[tl.causes[c]] || tl.causes[c] : 'GPU idle');

  let tl = null; // StepTimeline JSON
  let rows = []; // [{label, kind:'lane'|'gaps', lane?}]
  let v0 = 0;
  let v1 = 1;
  let span = 1;
  let drag = null;

  const width = () => Math.max(0, Math.floor(box.clientWidth));
  const plotW = () => Math.max(1, width() - LABEL_W);
  const xOf = (t) => LABEL_W + ((t - v0) / (v1 - v0)) * plotW();
  const tOf = (x) => v0 + ((x - LABEL_W) / plotW()) * (v1 - v0);

  function kernelColor(lane, j) {
    const cat = tl.categories[lane.cat[j]];
    if (cat !== 'kernel') return categoryColor(cat);
    const nc = tl.name_category && tl.name_category[lane.name[j]];
    return categoryColor(nc || 'kernel');
  }

  function draw() {
    if (!tl) return;
    const w = width();
    if (w <= 0) return;
    const hgt = AXIS_H + rows.length * ROW_H + 4;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${w}px`;
    canvas.style.height = `${hgt}px`;
    canvas.width = Math.floor(w * dpr);
    canvas.height = Math.floor(hgt * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const cs = getComputedStyle(document.documentElement);
    const fg = cs.getPropertyValue('--fg').trim() || '#222';
    const muted = cs.getPropertyValue('--fg-muted').trim() || '#666';
    const grid = cs.getPropertyValue('--grid').trim() || '#ddd';
    const bg = cs.getPropertyValue('--bg-alt').trim() || '#f6f6f6';
    ctx.clearRect(0, 0, w, hgt);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';

    // axis
    const ticks = layoutTicks(v0, v1, Math.max(2, Math.floor(plotW() / 110)));
    const tickStep = ticks.length > 1 ? ticks[1] - ticks[0] : v1 - v0;
    for (const t of ticks) {
      const x = xOf(t);
      ctx.fillStyle = grid;
      ctx.fillRect(Math.round(x), AXIS_H - 4, 1, hgt - AXIS_H + 4);
      ctx.fillStyle = muted;
      ctx.fillText(t === 0 ? '0' : fmtTick(t, tickStep), x + 3, AXIS_H / 2);
    }
    const gpuRows = rows.map((r, i) => (r.kind === 'lane' && r.lane.kind === 'gpu' ? i : -1)).filter((i) => i >= 0);
    // gap shading across the GPU rows
    const g = tl.gaps;
    if (gpuRows.length && g.start_ns.length) {
      const top = AXIS_H + Math.min(...gpuRows) * ROW_H;
      const bottom = AXIS_H + (Math.max(...gpuRows) + 1) * ROW_H;
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_W, top, plotW(), bottom - top);
      ctx.clip();
      ctx.globalAlpha = 0.12;
      const [a, b] = visibleRange(g.start_ns, g.dur_ns, v0, v1);
      for (let j = a; j < b; j++) {
        ctx.fillStyle = gapColor(g.cause[j]);
        const x0 = xOf(g.start_ns[j]);
        ctx.fillRect(x0, top, Math.max(1, xOf(g.start_ns[j] + g.dur_ns[j]) - x0), bottom - top);
      }
      ctx.globalAlpha = 1;
      ctx.restore();
    }
    rows.forEach((r, i) => {
      const y = AXIS_H + i * ROW_H;
      if (i % 2) { ctx.fillStyle = bg; ctx.globalAlpha = 0.5; ctx.fillRect(LABEL_W, y, plotW(), ROW_H); ctx.globalAlpha = 1; }
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_W, y, plotW(), ROW_H);
      ctx.clip();
      if (r.kind === 'gaps') {
        const [a, b] = visibleRange(g.start_ns, g.dur_ns, v0, v1);
        for (let j = a; j < b; j++) {
          ctx.fillStyle = gapColor(g.cause[j]);
          const x0 = xOf(g.start_ns[j]);
          ctx.fillRect(x0, y + 3, Math.max(1, xOf(g.start_ns[j] + g.dur_ns[j]) - x0), ROW_H - 6);
        }
      } else {
        const L = r.lane;
        const [a, b] = visibleRange(L.start_ns, L.dur_ns, v0, v1);
        let lastX = -1;
        for (let j = a; j < b; j++) {
          const x0 = xOf(L.start_ns[j]);
          const x1 = xOf(L.start_ns[j] + L.dur_ns[j]);
          if (x1 - x0 < 1 && Math.floor(x0) === lastX) continue; // sub-pixel neighbours: one pixel is enough
          lastX = Math.floor(x0);
          const color = kernelColor(L, j);
          ctx.fillStyle = color;
          ctx.fillRect(x0, y + 2, Math.max(1, x1 - x0), ROW_H - 4);
          if (x1 - x0 > 40) {
            const room = Math.floor((Math.min(x1, LABEL_W + plotW()) - Math.max(x0, LABEL_W) - 6) / 6.2);
            const label = shortName(L.name[j]);
            if (room >= 4) {
              ctx.fillStyle = textOn(color);
              ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, Math.max(x0, LABEL_W) + 3, y + ROW_H / 2);
            }
          }
        }
      }
      ctx.restore();
      ctx.fillStyle = fg;
      ctx.fillText(r.label.slice(0, 28), 6, y + ROW_H / 2);
    });
  }

  const shortCache = new Map();
  function shortName(i) {
    let v = shortCache.get(i);
    if (v === undefined) { v = shortKernelName(tl.names[i]); shortCache.set(i, v); }
    return v;
  }

  function hit(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const i = Math.floor((y - AXIS_H) / ROW_H);
    if (x < LABEL_W || i < 0 || i >= rows.length) return null;
    const t = tOf(x);
    const slop = ((v1 - v0) / plotW()) * 2; // 2 px
    const r = rows[i];
    const arr = r.kind === 'gaps' ? tl.gaps : r.lane;
    const [a, b] = visibleRange(arr.start_ns, arr.dur_ns, t - slop, t + slop);
    for (let j = a; j < b; j++) {
      if (arr.start_ns[j] - slop <= t && t <= arr.start_ns[j] + arr.dur_ns[j] + slop) return { r, j, x, y };
    }
    return null;
  }

  function showTip(ev) {
    const found = hit(ev);
    if (!found) { tip.hidden = true; return; }
    const { r, j, x, y } = found;
    clear(tip);
    if (r.kind === 'gaps') {
      append(tip, [h('b', { text: gapLabel(tl.gaps.cause[j]) }), h('div', { text: ns(tl.gaps.dur_ns[j]) }),
        h('div', { class: 'muted', text: `at +${ns(tl.gaps.start_ns[j])}` })]);
    } else {
      const L = r.lane;
      const nc = tl.name_category && tl.name_category[L.name[j]];
      const full = tl.names[L.name[j]];
      const short = shortName(L.name[j]);
      append(tip, [h('b', { class: 'tip-name', text: short }),
        short !== full ? h('div', { class: 'tip-full', text: full }) : null,
        h('div', { text: `${ns(L.dur_ns[j])} · ${nc || tl.categories[L.cat[j]]}` }),
        L.n[j] > 1 ? h('div', { class: 'muted', text: `${count(L.n[j])} events merged at this zoom (longest shown)` }) : null,
        h('div', { class: 'muted', text: `at +${ns(L.start_ns[j])}` })]);
    }
    tip.hidden = false;
    const bw = box.clientWidth;
    tip.style.left = `${Math.max(0, Math.min(x + 12, bw - 380))}px`;
    tip.style.top = `${y + 14}px`;
  }

  function zoomAt(t, factor) {
    const nv0 = t - (t - v0) * factor;
    const nv1 = t + (v1 - t) * factor;
    setView(nv0, nv1);
  }
  function setView(a, b) {
    const minSpan = 1000; // 1 µs
    let w = Math.min(Math.max(b - a, minSpan), span);
    a = Math.max(0, Math.min(a, span - w));
    v0 = a;
    v1 = a + w;
    draw();
  }

  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    zoomAt(x < LABEL_W ? (v0 + v1) / 2 : tOf(x), ev.deltaY > 0 ? 1.25 : 0.8);
  }, { passive: false });
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, v0, v1 }; canvas.classList.add('dragging'); });
  window.addEventListener('mouseup', () => { drag = null; canvas.classList.remove('dragging'); });
  canvas.addEventListener('mousemove', (ev) => {
    if (drag) {
      const dt = ((ev.clientX - drag.x) / plotW()) * (drag.v1 - drag.v0);
      setView(drag.v0 - dt, drag.v1 - dt);
      tip.hidden = true;
      return;
    }
    showTip(ev);
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('dblclick', () => setView(0, span));
  zoomIn.addEventListener('click', () => zoomAt((v0 + v1) / 2, 0.5));
  zoomOut.addEventListener('click', () => zoomAt((v0 + v1) / 2, 2));
  reset.addEventListener('click', () => setView(0, span));
  const ro = new ResizeObserver(() => draw());
  ro.observe(box);

  function buildLegend() {
    clear(legend);
    const seen = new Map();
    for (const L of tl.lanes) {
      for (let j = 0; j < L.cat.length; j++) {
        const cat = tl.categories[L.cat[j]];
        const key = cat === 'kernel' ? (tl.name_category && tl.name_category[L.name[j]]) || 'other' : cat;
        if (!seen.has(key)) seen.set(key, categoryColor(key));
      }
    }
    for (const c of new Set(tl.gaps.cause)) seen.set(gapLabel(c), gapColor(c));
    for (const [k, c] of seen) legend.append(h('span', { class: 'lg' }, h('i', { style: { background: c } }), h('span', { text: k.replace(/_/g, ' ') })));
  }

  return {
    /** hostLaunches false (XLA traces): idle gaps are not split by host cause; the note says why. */
    setContext({ hostLaunches }) {
      byCause = hostLaunches !== false;
      note.hidden = byCause;
      note.textContent = byCause ? '' : 'XLA trace: idle gaps are drawn without a host cause (launch wait, sync, data loader do not apply: XLA launches whole compiled graphs). The host side, tracing and compiling included, is in the Profile tab of tensorboard-plugin-profile (XProf).';
    },
    setSteps(steps, current) {
      clear(select);
      for (const s of steps) {
        select.append(h('option', { value: String(s.index), text: `${s.index < 0 ? 'whole trace' : `#${formatValue(s.index, unitOf('steps.per_step[].index'))}`} · ${formatValue(s.duration_ns, unitOf('steps.per_step[].duration_ns'))}` }));
      }
      if (current !== undefined && current !== null) select.value = String(current);
    },
    loading(text) {
      clear(body).append(h('p', { class: 'muted', text: text || 'Loading the step timeline…' }));
    },
    message(text) {
      tl = null;
      clear(body).append(h('p', { class: 'muted', text }));
    },
    update(timeline) {
      if (!timeline.intervals) {
        tl = null;
        select.value = String(timeline.step.index);
        info.textContent = '';
        clear(legend);
        clear(body).append(h('p', { class: 'muted', text: 'Nothing to draw in this step: no device work and no launch, sync or data-loader calls were recorded in it (a CPU-only or host-only trace).' }));
        return;
      }
      tl = timeline;
      span = Math.max(1, tl.step.duration_ns || tl.step.end_ns - tl.step.start_ns);
      v0 = 0;
      v1 = span;
      select.value = String(tl.step.index);
      rows = [{ label: 'GPU idle (gaps)', kind: 'gaps' }];
      for (const L of tl.lanes) rows.push({ label: L.label, kind: 'lane', lane: L });
      const merged = tl.merged ? ` · merged at ${ns(tl.resolution_ns)} to stay under 20k intervals` : '';
      info.textContent = `${count(tl.source_events)} events · ${count(tl.intervals)} intervals drawn (idle gaps included)${merged}`;
      shortCache.clear();
      clear(body).append(box);
      buildLegend();
      draw();
    },
    redraw: draw,
    destroy() { ro.disconnect(); clear(el); },
  };
}
