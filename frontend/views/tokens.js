// Step time against tokens per step: does time grow with the tokens, or is something else going on?

import { h, clear } from '../dom.js';
import { mountChart, tokensScatter } from '../charts.js';
import { tokensPerStep } from './data.js';

export function mountTokens(el) {
  let chart = null;
  return {
    update(report) {
      if (chart) chart.destroy();
      chart = null;
      clear(el);
      const rows = tokensPerStep(report);
      if (!rows) {
        el.append(h('p', { class: 'muted', text: 'Tokens per step are unknown for this trace (no input shapes recorded). Profile with record_shapes=True to see step time against tokens.' }));
        return;
      }
      const box = h('div', { class: 'chart' });
      el.append(box);
      chart = mountChart(box, (w, hgt) => tokensScatter({ rows, width: w, height: hgt }));
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { if (chart) chart.destroy(); clear(el); },
  };
}
