// The job view: a run with several ranks (docs/http_api.md /job, the report's jobs[] entry). Job findings on
// top, a ranks x steps heatmap (step time or waiting), per-rank stacked bars (compute, exposed transfer,
// waiting, idle, other); clicking a rank opens its own report. Past HANDFUL ranks the view aggregates
// (jobs/overview.py): per-step percentiles across ranks, the notable ranks and the outlier ranks, each a link
// to its own report.

import { h, clear } from '../dom.js';
import { formatValue, isNum } from '../format.js';
import { labelOf, unitOf, words } from '../registry.js';
import { BUSY_COLOR, CATEGORY_COLORS, LANE_COLORS, idleColor } from '../palette.js';

const BAR_PARTS = [
  ['compute_ns', 'compute', BUSY_COLOR],
  ['exposed_transfer_ns', 'exposed transfer', CATEGORY_COLORS.communication],
  ['waiting_ns', 'waiting for a peer', LANE_COLORS.sync],
  ['idle_ns', 'GPU idle', idleColor('other')],
  ['other_ns', 'other device work', CATEGORY_COLORS.memcpy],
];
const HEAT = { step_ns: 'step time', waiting_ns: 'waiting' };
/** More ranks than this: the aggregate view (a heatmap row and a bar per rank no longer read). */
export const HANDFUL = 16;
const PCT_OF = ['step_ns', 'waiting_ns', 'exposed_ns'];
const PCTS = ['p50', 'p90', 'max'];
const ROLES = ['straggler', 'slowest', 'fastest', 'typical'];
/** Outlier rows drawn at most (the rest counted). */
export const OUTLIERS_SHOWN = 50;

const fmt = (key, v) => formatValue(v, unitOf(key));
const basename = (p) => String(p || '').split(/[\\/]/).pop();

/** Which worker (the tab's selector name) each rank row of the view is: by the file its summary came from. */
export function workersByRow(job) {
  const byFile = new Map((job.files || []).map((f) => [basename(f.path), f.worker]));
  return ((job.view && job.view.labels) || []).map((label) => byFile.get(label) ?? null);
}

/** An evidence value as a user reads it: a code word in words; an extra cost or excess below zero is none (a
 *  negative cost is not a cost: the straggler's profiler cost below the other ranks' adds no delay). */
export function evidenceText(k, v) {
  if (/^[a-z0-9]+(_[a-z0-9]+)+$/.test(String(v))) return words(v);
  if (isNum(v) && v < 0 && /cost|excess|extra/i.test(labelOf(`job.${k}`))) return `none (${fmt(`job.${k}`, -v)} less than the other ranks)`;
  return fmt(`job.${k}`, v);
}

function findingCard(f) {
  const ev = Object.entries(f.evidence || {}).filter(([, v]) => v !== null && typeof v !== 'object');
  const wi = f.what_if && isNum(f.what_if.step_ns) && isNum(f.what_if.step_after_ns)
    ? h('div', { class: 'whatif' }, 'What if fixed: step ', h('b', { text: fmt('job.job_step_ns', f.what_if.step_ns) }), ' → ',
      h('b', { text: fmt('job.job_step_ns', f.what_if.step_after_ns) }), ' at best')
    : null;
  return h('article', { class: 'job-finding', dataset: { id: f.id } },
    h('header', {}, h('b', { text: f.title || f.id }),
      h('span', { class: 'saving', text: ` · ${fmt('job.findings[].value', f.value)} of the step` })),
    f.summary ? h('p', { class: 'summary', text: f.summary }) : null,
    h('table', { class: 'evidence' }, h('tbody', {}, ev.map(([k, v]) => h('tr', {}, h('th', { text: labelOf(`job.${k}`) }), h('td', { text: evidenceText(k, v) }))))),
    f.fix ? h('p', { class: 'fix-text', text: f.fix }) : null,
    wi);
}

function heatmap(job, which, onRank, workers) {
  const v = job.view;
  const grid = v.heatmap[which] || [];
  const vals = grid.flat().filter(isNum);
  const max = vals.length ? Math.max(...vals) : 0;
  const min = vals.length ? Math.min(...vals) : 0;
  const head = h('tr', {}, h('th', { text: 'rank \\ step' }), v.steps.map((s) => h('th', { text: `#${s}` })));
  const rows = v.ranks.map((r, i) => h('tr', {},
    h('th', {}, h('button', { type: 'button', class: 'rank-link', dataset: { rank: r }, text: `rank ${r}`, disabled: !workers[i], onclick: () => workers[i] && onRank(workers[i]) })),
    (grid[i] || []).map((x) => {
      const t = isNum(x) && max > min ? (x - min) / (max - min) : 0;
      return h('td', { class: 'heat', title: isNum(x) ? fmt(`job.view.heatmap.${which}[][]`, x) : 'n/a',
        style: { background: isNum(x) ? `rgba(216, 27, 96, ${(0.08 + 0.8 * t).toFixed(3)})` : 'transparent' },
        text: isNum(x) ? fmt(`job.view.heatmap.${which}[][]`, x) : '—' });
    })));
  return h('table', { class: 'job-heatmap' }, h('thead', {}, head), h('tbody', {}, rows));
}

function bars(job, onRank, workers) {
  const rows = job.view.bars || [];
  const max = Math.max(1, ...rows.map((b) => (isNum(b.step_ns) ? b.step_ns : 0)));
  const legend = h('div', { class: 'legend chart-legend' }, BAR_PARTS.map(([, label, color]) =>
    h('span', { class: 'lg' }, h('i', { style: { background: color } }), h('span', { text: label }))));
  const list = rows.map((b, i) => h('div', { class: 'job-bar', dataset: { rank: b.rank } },
    h('button', { type: 'button', class: 'rank-link', text: `rank ${b.rank}`, disabled: !workers[i], onclick: () => workers[i] && onRank(workers[i]) }),
    h('div', { class: 'job-bar-track' }, BAR_PARTS.map(([k, label, color]) => (isNum(b[k]) && b[k] > 0
      ? h('span', { class: 'job-bar-part', dataset: { part: k }, title: `${label} ${fmt(`job.view.bars[].${k}`, b[k])}`,
        style: { width: `${(100 * b[k]) / max}%`, background: color } })
      : null))),
    h('span', { class: 'hbar-value', text: fmt('job.view.bars[].step_ns', b.step_ns) })));
  return h('div', { class: 'job-bars' }, legend, list);
}

/** {rank: worker} for the view's ranks (the rows of workersByRow). */
function workerOfRank(job, workers) {
  return new Map(((job.view && job.view.ranks) || []).map((r, i) => [r, workers[i]]));
}

function rankButton(r, byRank, onRank, text) {
  const w = byRank.get(r);
  return h('button', { type: 'button', class: 'rank-link', dataset: { rank: r }, text: text || `rank ${r}`, disabled: !w, onclick: () => w && onRank(w) });
}

/** Per common step: p50 / p90 / max across ranks of step time, waiting and exposed time (registry labels). */
function percentileTable(job) {
  const v = job.view;
  const keys = PCT_OF.flatMap((k) => PCTS.map((p) => [k, p]));
  const head = h('tr', {}, h('th', { text: 'step' }), keys.map(([k, p]) => h('th', { text: labelOf(`job.view.percentiles.${k}.${p}[]`) })));
  const rows = v.steps.map((s, j) => h('tr', { dataset: { step: s } }, h('th', { text: `#${s}` }),
    keys.map(([k, p]) => {
      const x = (((v.percentiles || {})[k] || {})[p] || [])[j];
      return h('td', { text: isNum(x) ? fmt(`job.view.percentiles.${k}.${p}[]`, x) : '—' });
    })));
  return h('div', { class: 'job-scroll' }, h('table', { class: 'job-heatmap job-percentiles' }, h('thead', {}, head), h('tbody', {}, rows)));
}

function notableList(job, byRank, onRank) {
  const n = job.view.notable || {};
  return h('div', { class: 'job-notable' }, ROLES.filter((r) => isNum(n[`${r}_rank`])).map((role) =>
    h('span', { class: 'job-notable-rank', dataset: { role } }, h('span', { class: 'muted', text: `${labelOf(`job.view.notable.${role}_rank`)}: ` }),
      rankButton(n[`${role}_rank`], byRank, onRank))));
}

function outlierTable(job, byRank, onRank) {
  const all = job.view.outliers || [];
  const shown = all.slice(0, OUTLIERS_SHOWN);
  const head = h('tr', {}, ['rank', 'step_ns', 'step_vs_median_ratio', 'reasons[]'].map((k) =>
    h('th', { text: labelOf(`job.view.outliers[].${k}`) })));
  const rows = shown.map((o) => h('tr', { class: 'job-outlier', dataset: { rank: o.rank } },
    h('td', {}, rankButton(o.rank, byRank, onRank)),
    h('td', { text: isNum(o.step_ns) ? fmt('job.view.outliers[].step_ns', o.step_ns) : '—' }),
    h('td', { text: isNum(o.step_vs_median_ratio) ? fmt('job.view.outliers[].step_vs_median_ratio', o.step_vs_median_ratio) : '—' }),
    h('td', { text: (o.reasons || []).join(', ') })));
  return [
    all.length ? h('table', { class: 'job-heatmap job-outliers' }, h('thead', {}, head), h('tbody', {}, rows))
      : h('p', { class: 'muted job-no-outlier', text: 'No rank stands out: every mean step is within the band around the median rank\'s.' }),
    all.length > shown.length ? h('p', { class: 'muted', text: `and ${all.length - shown.length} more (the report's jobs[].view.outliers)` }) : null,
  ];
}

/** The aggregate view of a job of many ranks (module comment). */
function aggregate(job, onRank, workers) {
  const byRank = workerOfRank(job, workers);
  return h('div', { class: 'job-aggregate' },
    h('h3', { text: `Per step across ${job.view.ranks.length} ranks` }), percentileTable(job),
    h('h3', { text: 'Notable ranks' }), notableList(job, byRank, onRank),
    h('h3', { text: `Outlier ranks (${(job.view.outliers || []).length})` }), ...outlierTable(job, byRank, onRank),
    h('p', { class: 'hint', text: 'Click a rank to open its own report; the rank selector above lists every rank.' }));
}

export function mountJob(el, { onRank } = {}) {
  let which = 'step_ns';
  let last = null;
  function render() {
    const job = last;
    clear(el);
    if (!job) return;
    if (job.status !== 'ok') {
      el.append(h('p', { class: 'muted', text: job.error || 'The job could not be analysed.' }));
      return;
    }
    const m = job.metrics || {};
    const workers = workersByRow(job);
    el.append(h('p', { class: 'job-meta muted', text: `${m.rank_count} ranks · step ${fmt('job.job_step_ns', m.job_step_ns)} (median rank) · exposed communication ${fmt('job.exposed_share', m.exposed_share)} of it · ${m.matched_collective_count} collectives matched across ranks` }));
    for (const n of job.notes || []) el.append(h('div', { class: 'warn', text: `⚠ ${n}` }));
    const f = job.findings || [];
    el.append(f.length ? h('div', { class: 'job-findings' }, f.map(findingCard))
      : h('p', { class: 'job-none', text: "No job finding: no rank keeps the others waiting beyond the step-to-step noise and the profiler's own cost, and the transfers no compute hides are small." }));
    if (!job.view || !job.view.ranks.length) return;
    if (job.view.ranks.length > HANDFUL) {
      el.append(aggregate(job, onRank || (() => {}), workers));
      return;
    }
    const toggle = h('div', { class: 'tabs', role: 'tablist' }, Object.entries(HEAT).map(([k, label]) =>
      h('button', { type: 'button', role: 'tab', class: 'tab', 'aria-selected': String(k === which), dataset: { key: k }, text: label,
        onclick: () => { which = k; render(); } })));
    el.append(h('h3', { text: 'Ranks × steps' }), toggle, heatmap(job, which, onRank || (() => {}), workers),
      h('h3', { text: 'Mean step per rank' }), bars(job, onRank || (() => {}), workers),
      h('p', { class: 'hint', text: 'Click a rank to open its own report.' }));
  }
  return {
    update(job) { last = job; render(); },
    message(text) { last = null; clear(el).append(h('p', { class: 'muted', text })); },
    destroy() { last = null; clear(el); },
  };
}

/** The job section as a view of the tab's state: hidden unless the selection is a rank of a job. */
export function jobView(el, tab, section) {
  const view = mountJob(el, { onRank: (worker) => { tab.select({ ...tab.state.sel, worker }); window.scrollTo({ top: 0 }); } });
  section.hidden = true;
  return {
    render(s) {
      const d = s.job;
      section.hidden = d.status === 'off';
      if (d.status === 'off') view.destroy();
      else if (d.status === 'wait') view.message(`Analysing the ranks of this run (${d.body.ranks_ready} of ${d.body.rank_count} done)…`);
      else if (d.status === 'ok') view.update(d.body);
      else if (d.status === 'error') view.message(d.body && d.body.error ? d.body.error : `The job could not be analysed (HTTP ${d.code}).`);
    },
    destroy: view.destroy,
  };
}

/** Between the job (every rank) and the rank below it: which rank the cards and findings are of. */
export function rankHeadView(el, tab) {
  el.hidden = true;
  return {
    render(s) {
      el.hidden = !s.sel || !tab.isJob();
      if (s.sel) el.textContent = `This rank: ${s.sel.worker} (its own report: its median step, its findings)`;
    },
    destroy() { el.textContent = ''; },
  };
}
