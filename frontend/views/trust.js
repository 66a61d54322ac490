// The trust card: what the capture holds, what it lost, and the profiler's own cost (the report's `capture` topic).
// Every label comes from the metric registry; problem texts are the report's own words (set through textContent).

import { h, clear } from '../dom.js';
import { formatInterval, formatValue, isNum } from '../format.js';
import { entryOf, unitOf } from '../registry.js';

function label(key) {
  const e = entryOf(key);
  return (e && e.label) || key.split('.').pop();
}

function row(c, name) {
  const key = `capture.${name}`;
  const v = c[name];
  if (v === null || v === undefined) return null;
  // a [lo, hi] pair is an interval (capture.*_95)
  const shown = Array.isArray(v) ? formatInterval(v, unitOf(key))
    : typeof v === 'boolean' ? (v ? 'yes' : 'no') : isNum(v) ? formatValue(v, unitOf(key)) : String(v);
  return h('div', { class: 'trust-row', dataset: { key } },
    h('span', { class: 'trust-label', text: label(key) }), h('span', { class: 'trust-value', text: shown }));
}

/** The capture topic of a report, or null when absent or unavailable. */
export function captureOf(report) {
  const c = report && report.metrics && report.metrics.capture;
  return c && c.available ? c : null;
}

export function mountTrust(el) {
  return {
    update(report) {
      const c = captureOf(report);
      clear(el);
      el.hidden = !c;
      if (!c) return;
      const problems = Array.isArray(c.problems) ? c.problems : [];
      const warn = problems.some((p) => p.severity === 'warning');
      const held = ['record_shapes', 'profile_memory', 'with_stack', 'steps', 'world_size', 'graph_kernels', 'graphs']
        .map((n) => row(c, n));
      const cost = ['profiler_overhead_share', 'profiler_overhead_share_95', 'profiled_step_ns', 'unprofiled_step_ns',
        'after_window_slowdown_share', 'overhead_basis'].map((n) => row(c, n));
      el.append(h('section', { class: `trust-card ${warn ? 'warn' : ''}`, 'aria-label': 'capture trust' },
        h('h2', { text: 'Capture' }),
        h('div', { class: 'trust-cols' },
          h('div', { class: 'trust-col' }, ...held),
          h('div', { class: 'trust-col' }, ...cost,
            c.overhead_method ? h('div', { class: 'trust-method muted', text: c.overhead_method }) : null)),
        problems.length
          ? h('ul', { class: 'trust-problems' }, ...problems.map((p) =>
            h('li', { class: `trust-problem sev-${p.severity}`, dataset: { kind: p.kind }, text: p.text })))
          : h('p', { class: 'trust-ok muted', text: 'No lost or unmatched records found.' })));
    },
    destroy() { clear(el); },
  };
}

/** The trust card as a view of the tab's state: folded under one summary line (the first screen carries the
 *  line that matters, verdict.js); open, it is the whole card. Open stays open across runs. */
export function trustView(el) {
  const body = h('div', { class: 'trust-body' });
  const details = h('details', { class: 'trust-details' }, h('summary', { text: 'Capture: what the profiler recorded, lost and cost' }), body);
  el.append(details);
  const view = mountTrust(body);
  let shown = null;
  return {
    render(s) {
      const r = s.report.status === 'ok' ? s.report.body : null;
      if (!r || r === shown) return;
      shown = r;
      view.update(r);
      el.hidden = body.hidden;
      body.hidden = false;
    },
    destroy: view.destroy,
  };
}
