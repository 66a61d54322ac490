// Step time against tokens per step: does time grow with the tokens, or is something else going on?

import { h, clear } from '../dom.js';
import { mountChart, tokensScatter } from '../charts.js';
import { formatValue, isNum } from '../format.js';
import { unitOf } from '../registry.js';
import { hasHostLaunches, tokensPerStep } from './data.js';

export function mountTokens(el) {
  let chart = null;
  return {
    update(report) {
      if (chart) chart.destroy();
      chart = null;
      clear(el);
      const rows = tokensPerStep(report);
      if (!rows) {
        el.append(h('p', { class: 'muted na', text: hasHostLaunches(report)
          ? 'Tokens per step are unknown for this trace (no input shapes recorded). Profile with record_shapes=True to see step time against tokens.'
          : 'Does not apply to this XLA trace: XPlane profiles carry no operator input shapes, so tokens per step are unknown. (PyTorch traces profiled with input shapes recorded have them.)' }));
        return;
      }
      const st = (report.metrics && report.metrics.steps) || {};
      const corr = isNum(st.tokens_corr) ? ` Correlation of step time with tokens: ${formatValue(st.tokens_corr, unitOf('steps.tokens_corr'))}.` : '';
      const tokens = (v) => formatValue(v, unitOf('steps.per_step[].tokens'));
      const same = rows.every((r) => r.tokens === rows[0].tokens);
      const defaultText = same
        ? `Every step has ${tokens(rows[0].tokens)} tokens (fixed-size batches, e.g. packing): the spread in step time does not come from the input size.`
        : `Each point is a step (#index). Time that grows with the tokens is compute; a step far above the others is something else (warm-up, a sync, a recompile).${corr}`;
      const readout = h('div', { class: 'hint readout', text: defaultText });
      const box = h('div', { class: 'chart' });
      el.append(box, readout);
      const onHover = (r) => {
        readout.textContent = r ? `Step #${formatValue(r.index, unitOf('steps.per_step[].index'))}: ${tokens(r.tokens)} tokens in ${formatValue(r.duration_ns, unitOf('steps.per_step[].duration_ns'))}` : defaultText;
      };
      chart = mountChart(box, (w, hgt) => tokensScatter({ rows, width: w, height: hgt, onHover }));
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { if (chart) chart.destroy(); clear(el); },
  };
}
