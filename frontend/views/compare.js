// Compare mode: this run against a baseline run (the /compare route, docs/compare.md). Shows the verdict,
// cards with both values and the change, the metric table with noise bands, the finding diff and the
// per-step times of both runs overlaid. The baseline is BEFORE, this run AFTER, as in `llmdiag compare`.
// A job against a baseline job (level "job", /compare?level=job) adds the per-rank step bars before vs after;
// its overlay is the per-step job step (the median across ranks).

import { h, clear } from '../dom.js';
import { mountChart } from '../charts.js';
import { formatValue, isNum } from '../format.js';
import { BUSY_COLOR, CATEGORY_COLORS } from '../palette.js';
import { bandText, cardRows, changeText, judgement, overlay, rankBars, tone } from '../compare_data.js';

const BASE_COLOR = CATEGORY_COLORS.other; // the baseline is grey
const RUN_COLOR = BUSY_COLOR;

const fmt = (v, unit) => formatValue(v, unit);
const rowLabel = (r) => (r.key.startsWith('kernels.by_category.') ? `kernels: ${r.key.split('.')[2]} share` : r.label);

function card(r) {
  return h('div', { class: `card ${tone(r)}`, dataset: { key: r.key }, title: r.note || null },
    h('div', { class: 'card-label', text: rowLabel(r) }),
    h('div', { class: 'card-value', text: fmt(r.after, r.unit) }),
    h('div', { class: 'card-sub', text: `baseline ${fmt(r.before, r.unit)} · ${changeText(r)}${r.comparable ? '' : ' · not compared'}` }));
}

function table(doc) {
  const head = h('tr', {}, ['metric', 'baseline', doc.level === 'job' ? 'this job' : 'this run', 'change', 'noise band (95 %)', 'judgement'].map((t) => h('th', { text: t })));
  const rows = doc.metrics.map((r) => h('tr', { class: r.regressed ? 'regressed' : null, dataset: { key: r.key }, title: r.note || null },
    h('td', { text: rowLabel(r) }), h('td', { text: fmt(r.before, r.unit) }), h('td', { text: fmt(r.after, r.unit) }),
    h('td', { text: changeText(r) }), h('td', { text: bandText(r, fmt) }), h('td', { text: judgement(r) })));
  return h('table', { class: 'compare-table' }, h('thead', {}, head), h('tbody', {}, rows));
}

function findingList(label, cls, items, text) {
  return h('div', { class: `fd ${cls}` }, h('span', { class: 'fd-label', text: `${label}:` }),
    items.length ? items.map((f) => h('span', { class: 'fd-item', dataset: { id: f.id }, text: text(f) })) : h('span', { class: 'muted', text: 'none' }));
}

function findingsDiff(fd) {
  const share = (x) => (isNum(x) ? fmt(x, 'share') : '—');
  const name = (f) => f.title || f.id; // its title, as the report shows it (#25: never a key)
  return h('div', { class: 'compare-findings' },
    findingList('resolved', 'resolved', fd.resolved, (f) => `${name(f)}${isNum(f.saving_share_before) ? ` (was ~${share(f.saving_share_before)})` : ''}`),
    findingList('new', 'new', fd.new, (f) => `${name(f)}${isNum(f.saving_share_after) ? ` (~${share(f.saving_share_after)})` : ''}`),
    findingList('changed', 'changed', fd.changed, (f) => `${name(f)} ${share(f.saving_share_before)} → ${share(f.saving_share_after)}${f.note ? ` (${f.note})` : ''}`),
    findingList('unchanged', 'unchanged', fd.unchanged, name));
}

function theme() {
  const cs = getComputedStyle(document.documentElement);
  return { fg: cs.getPropertyValue('--fg-muted').trim() || '#555', grid: cs.getPropertyValue('--grid').trim() || 'rgba(0,0,0,0.08)' };
}

/** uPlot options for both runs' step durations by position in their profiled windows. */
export function overlayChart({ uPlot, data, width, height }) {
  const t = theme();
  const axis = (extra) => ({ stroke: t.fg, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1 }, ...extra });
  const line = (label, color) => ({ label, stroke: color, width: 2, spanGaps: false, points: { show: true, size: 7, fill: color } });
  return {
    opts: {
      width, height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, range: (u, mn, mx) => [mn - 0.3, mx + 0.3] }, y: { range: (u, mn, mx) => [0, mx * 1.1 || 1] } },
      axes: [axis({ label: 'profiled step (position in the window)', values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : '')) }),
        axis({ values: (u, vals) => vals.map((v) => formatValue(v, 'ns')), size: 70 })],
      series: [{ label: 'step' }, line('baseline', BASE_COLOR), line('this run', RUN_COLOR)],
      hooks: { setCursor: [] },
    },
    data: [data.x, data.before, data.after],
  };
}

/** A job comparison's per-rank rows: each rank's step median, baseline bar over this run's bar, and the change. */
function rankRows(doc) {
  const bar = (cls, w, color, v) => h('div', { class: `rank-bar ${cls}`, style: { width: `${w.toFixed(1)}%`, background: color }, title: fmt(v, 'ns') });
  return h('div', { class: 'compare-ranks' }, rankBars(doc).map((r) => h('div', { class: 'rank-row', dataset: { rank: String(r.rank) } },
    h('span', { class: 'rank-label', text: `rank ${r.rank}` }),
    h('div', { class: 'rank-bars' }, bar('before', r.width.before, BASE_COLOR, r.before), bar('after', r.width.after, RUN_COLOR, r.after)),
    h('span', { class: 'rank-value', text: `${fmt(r.before, 'ns')} → ${fmt(r.after, 'ns')} · ${changeText({ change: r.change, before: r.before, after: r.after })}${r.beyond === false ? ' (within noise)' : ''}` }))));
}

function sideText(doc) {
  const s = (role, d) => (d.level === 'job'
    ? `${role} job ${d.run} (span ${d.span}, ${d.rank_count} ranks, ${d.step_count} common steps)`
    : `${role} ${d.run} (${d.worker}, span ${d.span}, ${d.step_count} steps)`);
  return `BEFORE = ${s('baseline', doc.before)} · AFTER = ${s('this', doc.after)}`;
}

export function mountCompare(el) {
  let chart = null;
  const reset = () => { if (chart) chart.destroy(); chart = null; clear(el); };
  return {
    loading(label) { reset(); el.append(h('p', { class: 'muted', text: `Comparing with ${label}…` })); },
    message(text) { reset(); el.append(h('p', { class: 'compare-error', text })); },
    update(doc) {
      reset();
      const b = doc.before;
      const a = doc.after;
      el.append(
        h('p', { class: 'compare-verdict', text: doc.verdict }),
        h('p', { class: 'muted compare-sides', text: sideText(doc) }),
        h('div', { class: 'cards compare-cards' }, cardRows(doc).map(card)));
      const job = doc.level === 'job';
      for (const w of doc.warnings || []) el.append(h('p', { class: 'hint compare-warning', text: w }));
      if (doc.work && doc.work.differs) {
        el.append(h('p', { class: 'hint', text: `Tokens per step differ (${fmt(doc.work.tokens_per_step_before, 'count_per_step')} → ${fmt(doc.work.tokens_per_step_after, 'count_per_step')}): step times are shown, not judged; tokens/s is.` }));
      }
      el.append(findingsDiff(doc.findings));
      if (job && (doc.ranks || []).length) {
        el.append(h('h3', { text: 'Per rank: step median, baseline over this job' }),
          h('div', { class: 'legend chart-legend' },
            h('span', { class: 'lg' }, h('i', { style: { background: BASE_COLOR } }), h('span', { text: `baseline ${b.run}` })),
            h('span', { class: 'lg' }, h('i', { style: { background: RUN_COLOR } }), h('span', { text: `this job ${a.run}` }))),
          rankRows(doc));
      }
      const data = overlay(doc);
      if (data.x.length) {
        const box = h('div', { class: 'chart compare-chart' });
        el.append(h('h3', { text: job ? 'Per-step job step (median across ranks), both jobs' : 'Per-step time, both runs' }),
          h('div', { class: 'legend chart-legend' },
            h('span', { class: 'lg' }, h('i', { style: { background: BASE_COLOR } }), h('span', { text: `baseline ${b.run}` })),
            h('span', { class: 'lg' }, h('i', { style: { background: RUN_COLOR } }), h('span', { text: `this ${job ? 'job' : 'run'} ${a.run}` }))),
          box);
        chart = mountChart(box, (w, hgt, uPlot) => overlayChart({ uPlot, data, width: w, height: hgt }), 200);
      }
      el.append(h('details', { class: 'compare-details', open: true }, h('summary', { text: 'Every metric, with its noise band' }), table(doc)));
    },
    rebuild() { if (chart) chart.rebuild(); },
    destroy() { reset(); },
  };
}

/** The compare section as a view of the tab's state: hidden without a baseline. */
export function compareView(el, tab, section) {
  const view = mountCompare(el);
  section.hidden = true;
  return {
    render(s) {
      const d = s.compare;
      section.hidden = d.status === 'off';
      if (d.status === 'off') view.destroy();
      else if (d.status === 'loading') view.loading(s.base ? s.base.run : 'the baseline');
      else if (d.status === 'ok') view.update(d.body);
      else if (d.status === 'error') view.message(d.body && d.body.error ? d.body.error : `The comparison failed (HTTP ${d.code}).`);
    },
    redraw: view.rebuild,
    destroy: view.destroy,
  };
}
