// "Over the run": the profiler windows of the selected run and worker against the global step (docs/timeline.md,
// the /over_run route): the step without the profiler and the profiled step as a chart, change points and one-offs
// marked, each with what changed between the windows around it; per window tokens/s, GPU busy, MFU and its top
// finding's saving; a window opens its report (and its trace, for download). Hidden for a run of one window.
// Labels from the metric registry; names and finding texts through textContent only.

import { h, clear, append } from '../dom.js';
import { fmtCount, fmtDuration, fmtShare, isNum } from '../format.js';
import { labelOf } from '../registry.js';
import { traceUrl } from '../api.js';

const SVG = 'http://www.w3.org/2000/svg';
const COLUMNS = [
  ['capture.unprofiled_step_ns', 'step_ns', fmtDuration],
  ['headline.step_median_ns', 'profiled_step_ns', fmtDuration],
  ['headline.tokens_per_s', 'tokens_per_s', fmtCount],
  ['headline.gpu_busy_share', 'gpu_busy_share', fmtShare],
  ['headline.mfu_share', 'mfu_share', fmtShare],
];

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** The series the selection's window belongs to, else the run's first. */
export function seriesOf(doc, sel) {
  const all = (doc && doc.series) || [];
  return all.find((s) => (s.windows || []).some((w) => w.span === sel.span)) || all[0] || null;
}

const signed = (x) => (isNum(x) ? `${x >= 0 ? '+' : ''}${fmtShare(x)}` : 'n/a');
const selOf = (w) => ({ run: w.run, worker: w.worker, span: w.span });

/** The chart: x the global step, y the step; a line through the unprofiled steps, rings for the profiled ones,
 *  a dashed rule at each change, a triangle over each triggered window. */
function chart(series, tab, width) {
  const W = Math.max(320, width), H = 190, L = 52, R = 12, T = 14, B = 26;
  const ws = series.windows.filter((w) => isNum(w.global_step));
  const xs = ws.map((w) => w.global_step);
  const ys = ws.flatMap((w) => [w.step_ns, w.profiled_step_ns]).filter(isNum);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs) === Math.min(...xs) ? Math.min(...xs) + 1 : Math.max(...xs)];
  const y1 = (Math.max(...ys, 1)) * 1.12;
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - y / y1) * (H - T - B);
  const el = svg('svg', { width: W, height: H, class: 'over-run-chart', role: 'img', 'aria-label': 'step over the run' });
  for (const f of [0, 0.5, 1]) {
    el.append(svg('line', { x1: L, x2: W - R, y1: Y(f * y1), y2: Y(f * y1), class: 'grid' }));
    const t = svg('text', { x: L - 6, y: Y(f * y1) + 4, 'text-anchor': 'end', class: 'axis' });
    t.textContent = fmtDuration(f * y1);
    el.append(t);
  }
  for (const c of series.changes || []) {
    const w = series.windows[c.at];
    if (!w || !isNum(w.global_step)) continue;
    el.append(svg('line', { x1: X(w.global_step), x2: X(w.global_step), y1: T, y2: H - B, class: `change ${c.kind}` }));
  }
  const pts = ws.filter((w) => isNum(w.step_ns)).map((w) => `${X(w.global_step)},${Y(w.step_ns)}`);
  el.append(svg('polyline', { points: pts.join(' '), class: 'unprofiled' }));
  for (const w of ws) {
    const g = svg('g', { class: `window ${w.reason}`, 'data-step': w.global_step });
    if (isNum(w.step_ns)) g.append(svg('circle', { cx: X(w.global_step), cy: Y(w.step_ns), r: 4, class: 'unprofiled' }));
    if (isNum(w.profiled_step_ns)) g.append(svg('circle', { cx: X(w.global_step), cy: Y(w.profiled_step_ns), r: 4, class: 'profiled' }));
    if (w.reason === 'triggered') g.append(svg('path', { d: `M${X(w.global_step) - 5},${T} h10 l-5,8 z`, class: 'trigger' }));
    const tip = svg('title', {});
    tip.textContent = `step ${w.global_step} (${w.reason}): ${fmtDuration(w.step_ns)} unprofiled, ${fmtDuration(w.profiled_step_ns)} profiled`;
    g.append(tip);
    g.addEventListener('click', () => tab.select(selOf(w)));
    el.append(g);
  }
  for (const [x, anchor] of [[x0, 'start'], [x1, 'end']]) {
    const t = svg('text', { x: X(x), y: H - 8, 'text-anchor': anchor, class: 'axis' });
    t.textContent = `step ${x}`;
    el.append(t);
  }
  return el;
}

function changeItem(c, series, tab) {
  const at = series.windows[c.at], from = series.windows[c.from];
  const wc = c.what_changed;
  const head = `${c.kind === 'transient' ? 'One-off' : 'Change'} at step ${c.at_step} (against step ${c.from_step}): `
    + `${labelOf('capture.unprofiled_step_ns')} ${fmtDuration(c.before_ns)} → ${fmtDuration(c.after_ns)} (${signed(c.change_share)})`
    + (c.tokens_per_step_before && c.tokens_per_step_after && c.tokens_per_step_before !== c.tokens_per_step_after
      ? `, tokens per step ${fmtCount(c.tokens_per_step_before)} → ${fmtCount(c.tokens_per_step_after)}` : '');
  const lines = [];
  if (wc && wc.verdict) lines.push(wc.verdict);
  for (const [name, key, field] of [['new', 'findings_new', 'saving_share_after'], ['grew', 'findings_grown', 'saving_share_after'], ['gone', 'findings_resolved', 'saving_share_before']]) {
    const fs = (wc && wc[key]) || [];
    if (fs.length) lines.push(`${name}: ${fs.map((f) => `${f.title} (${fmtShare(f[field])})`).join('; ')}`);
  }
  if (wc && (wc.metrics || []).length) lines.push(`moved: ${wc.metrics.map((m) => `${m.label} ${signed(m.change)}`).join('; ')}`);
  if (!wc) lines.push('what changed: not known (a window without an analysed report)');
  return h('li', { class: `change ${c.kind}`, dataset: { at: c.at_step } }, h('div', { class: 'change-head', text: head }),
    ...lines.map((t) => h('div', { class: 'change-line', text: t })),
    h('div', { class: 'change-open' },
      from ? h('button', { type: 'button', text: `open step ${from.global_step}`, onclick: () => tab.select(selOf(from)) }) : null,
      at ? h('button', { type: 'button', text: `open step ${at.global_step}`, onclick: () => tab.select(selOf(at)) }) : null));
}

function windowRow(w, tab, current) {
  const top = (w.findings || [])[0];
  return h('tr', { class: current ? 'current' : null, dataset: { step: w.global_step } },
    h('td', { text: String(w.global_step) }), h('td', { text: w.reason }),
    ...COLUMNS.map(([, field, f]) => h('td', { class: 'num', text: isNum(w[field]) ? f(w[field]) : 'n/a' })),
    h('td', { text: top ? `${top.title || top.id}${isNum(top.saving_share) ? ` (${fmtShare(top.saving_share)})` : ''}` : '–' }),
    h('td', {}, h('button', { type: 'button', text: 'open', onclick: () => tab.select(selOf(w)) }), ' ',
      h('a', { href: traceUrl(selOf(w)), download: '', text: 'trace' })));
}

function costText(cost) {
  if (!cost) return 'Capture cost: not stated (windows written without the capture helper).';
  const skipped = (cost.skipped_steps || []).length ? `; slots the budget skipped: ${cost.skipped_steps.join(', ')}` : '';
  return `Capture cost: ${fmtDuration(cost.spent_ns)} over ${fmtDuration(cost.elapsed_ns)} of the run (${fmtShare(cost.spent_share)}; `
    + `budget ${fmtShare(cost.budget_share)}), ${cost.windows} windows${skipped}.`;
}

export function renderOverRun(el, doc, sel, tab, width) {
  const series = seriesOf(doc, sel);
  clear(el);
  if (!series || (series.windows || []).length < 2) return false;
  const band = series.noise && series.noise.band_share;
  append(el, [
    h('div', { class: 'muted', text: `${series.windows.length} windows of ${series.run} / ${series.worker}`
      + `${series.series ? ` (series ${series.series})` : ' (profiler schedule)'} · noise band ${fmtShare(band)}` }),
    chart(series, tab, width),
    h('div', { class: 'hint legend' }, h('span', { class: 'key unprofiled', text: '●' }), ` ${labelOf('capture.unprofiled_step_ns')}  `,
      h('span', { class: 'key profiled', text: '○' }), ` ${labelOf('headline.step_median_ns')} (profiled)  `,
      h('span', { class: 'key trigger', text: '▼' }), ' triggered window  ┆ change point'),
    h('ul', { class: 'changes' }, ...(series.changes || []).map((c) => changeItem(c, series, tab))),
    (series.changes || []).length ? null : h('div', { class: 'muted', text: 'No change beyond the noise band.' }),
    h('table', { class: 'over-run-windows' },
      h('thead', {}, h('tr', {}, h('th', { text: 'step' }), h('th', { text: 'why' }),
        ...COLUMNS.map(([key]) => h('th', { text: labelOf(key) })), h('th', { text: 'top finding (saving)' }), h('th', {}))),
      h('tbody', {}, ...series.windows.map((w) => windowRow(w, tab, w.span === sel.span)))),
    h('div', { class: 'muted cost', text: costText(series.cost) })]);
  return true;
}

export function overRunView(el, tab, section) {
  let last = null;
  const show = (s) => {
    const ok = s.overRun && s.overRun.status === 'ok' && s.sel;
    const shown = ok && renderOverRun(el, s.overRun.body, s.sel, tab, el.clientWidth || 760);
    section.hidden = !shown;
  };
  return {
    render(s) { last = s; show(s); },
    redraw() { if (last) show(last); },
    destroy() { clear(el); },
  };
}
