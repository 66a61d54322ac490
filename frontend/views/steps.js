// Per-step stacked bars: device busy / idle waiting for host launches / idle in syncs / data loader.

import { h, clear } from '../dom.js';
import { colorOf, mountChart, stackedStepBars } from '../charts.js';
import { isNum } from '../format.js';
import { stepBreakdown } from './data.js';

const PARTS = [
  ['busy', 'GPU busy', 'busy'],
  ['host_wait', 'idle: host launch wait', 'host_wait'],
  ['sync', 'idle: host sync', 'sync'],
  ['data_loader', 'idle: data loader', 'data_loader'],
  ['other', 'idle: other', 'other_idle'],
];

export function mountSteps(el, { onPick } = {}) {
  let chart = null;
  return {
    update(report, stepsBody) {
      if (chart) chart.destroy();
      clear(el);
      const { rows, hasParts } = stepBreakdown(report, stepsBody);
      if (!rows.length) {
        el.append(h('p', { class: 'muted', text: 'No step markers: call prof.step() once per training step to get per-step numbers.' }));
        return;
      }
      let parts;
      if (hasParts) {
        parts = PARTS.map(([key, label, color]) => ({ key, label, color: colorOf(color), values: rows.map((r) => (isNum(r[key]) ? r[key] : 0)) }))
          .filter((p) => p.values.some((v) => v > 0));
      } else {
        parts = [{ key: 'step', label: 'step time', color: colorOf('kernel'), values: rows.map((r) => r.duration_ns) }];
        el.append(h('p', { class: 'muted', text: 'The idle breakdown per step is not in this report; step durations only.' }));
      }
      const box = h('div', { class: 'chart' });
      el.append(box);
      const steps = rows.map((r) => r.index);
      chart = mountChart(box, (w, hgt, uPlot) => {
        const built = stackedStepBars({ uPlot, steps, parts, width: w, height: hgt });
        if (onPick) built.opts.hooks = { ready: [(u) => u.over.addEventListener('click', () => { const i = u.cursor.idx; if (i !== null && i !== undefined) onPick(steps[i]); })] };
        return built;
      });
      el.append(h('p', { class: 'hint', text: 'Click a bar to open that step in the timeline below.' }));
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { if (chart) chart.destroy(); clear(el); },
  };
}
