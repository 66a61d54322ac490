// The first screen: what is wrong, what to change, what it saves. The top finding (of the job when the selection
// is a rank of a job with a finding) with its cause in one sentence, its saving, its fix and snippet; the
// capture's trust as one line, or a banner when it could change the verdict; the details one click away.

import { h, clear } from '../dom.js';
import { unitOf } from '../registry.js';
import { verdictOf, trustLine } from '../verdict_data.js';
import { captureOf } from './trust.js';
import { fixTabs, noFindingsNote } from './findings.js';
import { workload } from './data.js';

/** Scrolls to an element below the sticky top bar (and opens it, or the first <details> in it). */
function reveal(el) {
  if (!el) return;
  const d = el.tagName === 'DETAILS' ? el : el.querySelector('details');
  if (d) d.open = true;
  const bar = document.querySelector('.topbar');
  const below = bar ? bar.getBoundingClientRect().bottom : 0;
  window.scrollBy({ top: el.getBoundingClientRect().top - below - 8, behavior: 'auto' });
}

function trustEl(line) {
  if (!line) return null;
  const more = h('button', { type: 'button', class: 'link verdict-trust-more', text: 'Capture details',
    onclick: () => reveal(document.querySelector('.trust-details')) });
  return h('p', { class: `verdict-trust ${line.banner ? 'banner' : 'muted'}`, role: line.banner ? 'status' : null },
    h('span', { text: `${line.banner ? '⚠ ' : ''}${line.text} ` }), more);
}

function render(el, v, report, tab) {
  const inference = workload(report) === 'inference';
  const evidence = h('button', { type: 'button', class: 'link verdict-evidence', text: v.job ? 'The job, rank by rank' : 'Evidence and all findings',
    onclick: () => reveal(document.querySelector(v.job ? 'section.job' : `.finding[data-id="${CSS.escape(v.id)}"]`)) });
  const show = v.job ? null : h('button', { type: 'button', class: 'btn show-in-trace verdict-show', hidden: true, dataset: { id: v.id },
    text: 'Show in trace', onclick: () => { tab.views.trace.showFinding(v.id); } });
  clear(el).append(
    h('div', { class: 'verdict-head' },
      h('span', { class: `sev sev-${v.severity}`, text: v.job ? 'job' : v.severity }),
      h('h2', { class: 'verdict-title', text: v.title }), show),
    v.saving ? h('p', { class: 'verdict-saving' }, h('b', { text: v.saving }), v.whatIf ? h('span', { class: 'muted', text: ` · ${v.whatIf}` }) : null) : null,
    v.cause ? h('p', { class: 'verdict-cause', text: v.cause }) : null,
    v.fix ? h('div', { class: 'verdict-fix' }, h('b', { class: 'verdict-fix-label', text: 'Fix' }), fixTabs(v.fix, inference))
      : v.fixText ? h('div', { class: 'verdict-fix' }, h('b', { class: 'verdict-fix-label', text: 'Fix' }), h('p', { class: 'fix-text', text: v.fixText })) : null,
    trustEl(trustLine(captureOf(report), v, unitOf)),
    h('p', { class: 'verdict-more' }, evidence));
  el.className = `verdict sev-${v.severity}`;
}

export function verdictView(el, tab) {
  let shown = null;
  const markLocated = (ids) => {
    for (const b of el.querySelectorAll('.show-in-trace')) b.hidden = !(ids || []).includes(b.dataset.id);
  };
  return {
    render(s, changed) {
      const report = s.report.status === 'ok' ? s.report.body : null;
      const jobBusy = s.job.status === 'loading' || s.job.status === 'wait';
      const job = s.job.status === 'ok' ? s.job.body : null;
      const key = [report, job, jobBusy];
      if (report && (changed.has('report') || changed.has('job')) && key.some((x, i) => !shown || x !== shown[i])) {
        shown = key;
        const v = jobBusy ? null : verdictOf(report, job);
        if (jobBusy) clear(el).append(h('p', { class: 'muted verdict-wait', text: 'Analysing the ranks of this job for its verdict…' }));
        else if (v) render(el, v, report, tab);
        else clear(el).append(noFindingsNote(report));
      }
      markLocated(s.located);
    },
    destroy() { clear(el); },
  };
}
