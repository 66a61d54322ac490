// Per-step stacked bars: device busy (collectives excluded) / communication only / idle waiting for host launches / idle in syncs / data loader.
// XLA (XPlane) traces get busy vs idle only: splitting idle time by host cause needs the per-kernel
// host launch calls of a PyTorch trace, which XLA's graph launches do not give.

import { h, clear } from '../dom.js';
import { mountChart, outlierClip, stackedStepBars } from '../charts.js';
import { BUSY_COLOR, LANE_COLORS, idleColor } from '../palette.js';
import { formatValue, isNum } from '../format.js';
import { unitOf } from '../registry.js';
import { hasHostLaunches, stepBreakdown, xlaTopic } from './data.js';

const PARTS = [
  ['busy', 'GPU busy', BUSY_COLOR],
  ['communication', 'communication only', LANE_COLORS.collective],
  ['host_wait', 'idle: host launch wait', idleColor('host_wait')],
  ['sync', 'idle: host sync', idleColor('sync')],
  ['data_loader', 'idle: data loader', idleColor('data_loader')],
  ['other', 'idle: other', idleColor('other')],
];
const ns = (v) => formatValue(v, unitOf('steps.per_step[].busy_ns'));

function legendOf(parts) {
  return h('div', { class: 'legend chart-legend' },
    parts.map((p) => h('span', { class: 'lg' }, h('i', { style: { background: p.color } }), h('span', { text: p.label }))));
}

export function mountSteps(el, { onPick } = {}) {
  let chart = null;
  return {
    update(report, stepsBody) {
      if (chart) chart.destroy();
      chart = null;
      clear(el);
      const { rows, hasParts } = stepBreakdown(report, stepsBody);
      if (!rows.length) {
        el.append(h('p', { class: 'muted', text: 'No step markers: call prof.step() once per training step to get per-step numbers.' }));
        return;
      }
      const launches = hasHostLaunches(report);
      let parts;
      if (hasParts && launches) {
        parts = PARTS.map(([key, label, color]) => ({ key, label, color, values: rows.map((r) => (isNum(r[key]) ? r[key] : 0)) }))
          .filter((p) => p.values.some((v) => v > 0));
      } else if (hasParts) {
        // a step that compiles is drawn as such: its compile time (xla.compiles in that step) is its own part
        const xla = xlaTopic(report);
        const compileNs = new Map();
        for (const c of (xla && Array.isArray(xla.compiles) ? xla.compiles : [])) {
          if (c && isNum(c.step) && isNum(c.duration_ns)) compileNs.set(c.step, (compileNs.get(c.step) || 0) + c.duration_ns);
        }
        const busyOf = (r) => (isNum(r.busy) ? r.busy : 0);
        const compileOf = (r) => Math.min(compileNs.get(r.index) || 0, Math.max(0, r.duration_ns - busyOf(r)));
        parts = [
          { key: 'busy', label: 'GPU busy', color: BUSY_COLOR, values: rows.map(busyOf) },
          { key: 'compile', label: 'compiling (XLA)', color: LANE_COLORS.sync, values: rows.map(compileOf) },
          { key: 'idle', label: 'GPU idle', color: idleColor(null), values: rows.map((r) => Math.max(0, r.duration_ns - busyOf(r) - compileOf(r))) },
        ].filter((p) => p.key !== 'compile' || p.values.some((v) => v > 0));
        const compiles = xla && Array.isArray(xla.recompile_steps) && xla.recompile_steps.length
          ? ` Steps that recompiled: ${xla.recompile_steps.map((s) => `#${formatValue(s, unitOf('xla.recompile_steps[]'))}`).join(', ')} (${formatValue(xla.recompile_in_loop_time_ns, unitOf('xla.recompile_in_loop_time_ns'))} compiling).`
          : '';
        el.append(h('p', { class: 'muted na', text: `Idle time by host cause (launch wait, sync, data loader) does not apply to this XLA trace: XLA launches whole compiled graphs, not one kernel per host call. Busy vs idle only.${compiles}` }));
      } else {
        parts = [{ key: 'step', label: 'step time', color: BUSY_COLOR, values: rows.map((r) => r.duration_ns) }];
        el.append(h('p', { class: 'muted', text: 'The idle breakdown per step is not in this report; step durations only.' }));
      }
      const totals = rows.map((r, i) => parts.reduce((a, p) => a + (p.values[i] || 0), 0));
      const clipAt = outlierClip(totals);
      const readout = h('div', { class: 'hint readout' });
      const idle = clipAt ? `The axis stops at ${ns(clipAt)} so the other steps stay readable; a longer step (↑ its time) is drawn to the top in its own proportions.` : '';
      const defaultText = `Hover a bar for its split; click it to open that step in the timeline below. ${idle}`.trim();
      readout.textContent = defaultText;
      const box = h('div', { class: 'chart' });
      el.append(legendOf(parts), box, readout);
      const steps = rows.map((r) => r.index);
      const onHover = (i) => {
        if (i === null || i === undefined || rows[i] === undefined) { readout.textContent = defaultText; return; }
        readout.textContent = `Step #${formatValue(steps[i], unitOf('steps.per_step[].index'))} · ${ns(totals[i])}: ${parts.map((p) => `${p.label} ${ns(p.values[i] || 0)}`).join(' · ')}`;
      };
      chart = mountChart(box, (w, hgt, uPlot) => {
        const built = stackedStepBars({ uPlot, steps, parts, width: w, height: hgt, clipAt, onHover });
        if (onPick) built.opts.hooks.ready = [(u) => u.over.addEventListener('click', () => { const i = u.cursor.idx; if (i !== null && i !== undefined) onPick(steps[i]); })];
        return built;
      });
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { if (chart) chart.destroy(); clear(el); },
  };
}

/** The per-step chart as a view of the tab's state: drawn once the report's /steps answer settles. */
export function stepsView(el, tab) {
  const view = mountSteps(el, { onPick: (idx) => tab.pickStep(idx) });
  let shown = null;
  return {
    render(s) {
      const d = s.steps;
      if (s.report.status !== 'ok' || (d.status !== 'ok' && d.status !== 'error') || d === shown) return;
      shown = d;
      view.update(s.report.body, d.status === 'ok' ? d.body : null);
    },
    redraw: view.rebuild,
    destroy: view.destroy,
  };
}
