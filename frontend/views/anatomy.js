// Step anatomy: the GPU's busy time by part of the model (metrics.anatomy): a stacked bar per step by part, and a
// table of each part's time, share, achieved TFLOP/s, efficiency against the device's peak and how it was
// identified. A part's "Show in trace" opens the trace view on its kernels (the trace view's /trace_view `parts`).
// Every label is the metric registry's; every number is formatted by its registry unit.

import { h, clear } from '../dom.js';
import { mountChart, outlierClip, stackedStepBars } from '../charts.js';
import { formatValue, isNum } from '../format.js';
import { definitionOf, labelOf, partLabel, unitOf, valueLabelOf } from '../registry.js';
import { partColor } from '../palette.js';

const P = 'anatomy.parts.*.';
/** why an XLA run has no model parts (the agent's anatomy tool says the same) */
const XLA_NO_PARTS = "the model's parts are read from PyTorch (Kineto) traces' host call chains; this is an XLA trace";
const fmt = (key, v) => formatValue(v, unitOf(key));

/** The report's parts, largest first, `other` last, each with its colour; null when the topic is unavailable. */
export function anatomyParts(report) {
  const a = report && report.metrics && report.metrics.anatomy;
  if (!a || a.available === false || !a.parts) return null;
  const names = Object.keys(a.parts).sort((x, y) => (x === 'other') - (y === 'other') || a.parts[y].time_ns - a.parts[x].time_ns);
  let graphs = 0;
  return names.map((name) => ({ name, color: partColor(name, name.startsWith('compiled_graph:') ? graphs++ : 0), ...a.parts[name] }));
}

function legendOf(parts) {
  return h('div', { class: 'legend chart-legend anatomy-legend' },
    parts.map((p) => h('span', { class: 'lg', dataset: { part: p.name, stepTimes: JSON.stringify(p.step_time_ns || []) } },
      h('i', { style: { background: p.color } }), h('span', { text: partLabel(p.name) }))));
}

/** The stacked bar per step by part (bottom: the largest part), its legend and a hover readout. */
function stepBars(el, a, parts, onPick) {
  const steps = a.step_index || [];
  if (!steps.length) {
    el.append(h('p', { class: 'muted', text: 'No step markers: call prof.step() once per step to split the parts by step.' }));
    return null;
  }
  const series = parts.map((p) => ({ key: p.name, label: partLabel(p.name), color: p.color, values: p.step_time_ns || [] }));
  const totals = steps.map((_, i) => series.reduce((s, p) => s + (p.values[i] || 0), 0));
  const clipAt = outlierClip(totals);
  const readout = h('div', { class: 'hint readout anatomy-readout' });
  const idle = 'Hover a bar for its parts; click it to open that step in the timeline below.';
  readout.textContent = idle;
  const onHover = (i) => {
    if (i === null || i === undefined || steps[i] === undefined) { readout.textContent = idle; return; }
    const inStep = series.filter((p) => (p.values[i] || 0) > 0);
    readout.textContent = `${labelOf('anatomy.step_index[]')} #${fmt('anatomy.step_index[]', steps[i])} · ${fmt(`${P}step_time_ns[]`, totals[i])}: `
      + inStep.map((p) => `${p.label} ${fmt(`${P}step_time_ns[]`, p.values[i])}`).join(' · ');
  };
  const box = h('div', { class: 'chart' });
  el.append(legendOf(parts), box, readout);
  return mountChart(box, (w, hgt, uPlot) => {
    const built = stackedStepBars({ uPlot, steps, parts: series, width: w, height: hgt, clipAt, onHover });
    if (onPick) built.opts.hooks.ready = [(u) => u.over.addEventListener('click', () => { const i = u.cursor.idx; if (i !== null && i !== undefined) onPick(steps[i]); })];
    return built;
  });
}

const COLUMNS = [
  ['per_step_time_ns', (p) => (isNum(p.per_step_time_ns) ? p.per_step_time_ns : p.time_ns)],
  ['share', (p) => p.share],
  ['achieved_tflops', (p) => p.achieved_tflops],
  ['efficiency_share', (p) => p.efficiency_share],
];

function identified(p) {
  if (!p.identified_by) return '—';
  const by = valueLabelOf(p.identified_by);
  return isNum(p.identified_share) ? `${by} (${fmt(`${P}identified_share`, p.identified_share)})` : by;
}

function partRow(p, onShow) {
  const ops = (p.top_ops || []).map((o) => `${o.name} ${fmt(`${P}top_ops[].time_ns`, o.time_ns)}`).join(' · ');
  const name = h('td', { class: 'part-name' }, h('i', { class: 'swatch', style: { background: p.color } }), h('span', { text: partLabel(p.name) }),
    p.name === 'other' && ops ? h('div', { class: 'muted part-ops', text: ops }) : null,
    p.name === 'attention' && p.backend ? h('div', { class: 'muted part-ops', text: `${labelOf(`${P}backend`)}: ${p.backend}` }) : null);
  const cells = COLUMNS.map(([k, get]) => {
    const withheld = k === 'efficiency_share' && !isNum(p.efficiency_share) ? p.efficiency_withheld : null;
    return h('td', { class: 'num', dataset: { key: k }, title: withheld || null, text: fmt(P + k, get(p)) });
  });
  const show = onShow ? h('button', { type: 'button', class: 'btn show-part', hidden: true, dataset: { part: p.name }, text: 'Show in trace',
    title: "Zoom the trace view to the run of this part's kernels holding most of its time and select its longest kernel", onclick: () => onShow(p.name) }) : null;
  return h('tr', { dataset: { part: p.name, timeNs: String(p.time_ns) } }, name, ...cells,
    h('td', { dataset: { key: 'identified_by' }, text: identified(p) }), h('td', {}, show));
}

function partTable(parts, onShow) {
  const head = ['per_step_time_ns', 'share', 'achieved_tflops', 'efficiency_share', 'identified_by']
    .map((k) => h('th', { title: definitionOf(P + k) || null, text: labelOf(P + k) }));
  return h('table', { class: 'anatomy-table' },
    h('thead', {}, h('tr', {}, h('th', { text: 'Part' }), ...head, h('th', {}))),
    h('tbody', {}, parts.map((p) => partRow(p, onShow))));
}

/** onShowPart(name): a part's "Show in trace" (shown once markLocated names the part); onPick(step): a bar's click. */
export function mountAnatomy(el, { onShowPart, onPick } = {}) {
  let chart = null;
  return {
    update(report) {
      if (chart) chart.destroy();
      chart = null;
      clear(el);
      const a = report.metrics && report.metrics.anatomy;
      const parts = anatomyParts(report);
      if (!parts) {
        const xla = report.metrics && report.metrics.run && report.metrics.run.platform === 'xla';
        const why = a && a.reason ? a.reason : xla ? XLA_NO_PARTS : null;
        el.append(h('p', { class: 'muted', text: `No model parts for this run${why ? `: ${why}.` : '.'}` }));
        return;
      }
      el.append(h('p', { class: 'muted anatomy-summary', text: `${labelOf('anatomy.busy_ns')} ${fmt('anatomy.busy_ns', a.busy_ns)} · `
        + `${labelOf('anatomy.assigned_share')} ${fmt('anatomy.assigned_share', a.assigned_share)}`
        + (a.device ? ` · ${labelOf('anatomy.device')}: ${a.device}` : '') }));
      chart = stepBars(el, a, parts, onPick);
      el.append(partTable(parts, onShowPart));
    },
    /** The parts whose kernels the trace view can show. */
    markLocated(names) {
      const set = new Set(names);
      for (const b of el.querySelectorAll('.show-part')) b.hidden = !set.has(b.dataset.part);
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { if (chart) chart.destroy(); clear(el); },
  };
}

/** The anatomy as a view of the tab's state: each new report, and which parts the trace view can open. */
export function anatomyView(el, tab) {
  const view = mountAnatomy(el, { onShowPart: (name) => tab.showPart(name), onPick: (idx) => tab.pickStep(idx) });
  let shown = null;
  return {
    render(s) {
      const r = s.report.status === 'ok' ? s.report.body : null;
      if (r && r !== shown) view.update(r);
      shown = r;
      view.markLocated(s.partsLocated || []);
    },
    redraw: view.rebuild,
    destroy: view.destroy,
  };
}
