// Findings in the order the report gives them (the engine ranks them; the tab never re-ranks): severity,
// estimated saving, evidence, the fix with copy-able code, what-if.

import { h, clear } from '../dom.js';
import { formatValue, fmtSaving, fmtWhatIf, isNum } from '../format.js';
import { evidenceLabelKnown, evidenceLabelOf, evidenceUnitOf, labelOf, unitOf } from '../registry.js';
import { codeBlock } from './status.js';
import { busyIsBad, deviceKind, workload } from './data.js';
import { unprofiledText } from './cards.js';

export function fixTabs(fix, inference) {
  if (!fix) return null;
  // the second snippet is Hugging Face code: the Trainer's when training, transformers' (generate) when serving
  const variants = [['pytorch', 'PyTorch'], ['hf_trainer', inference ? 'Hugging Face' : 'HF Trainer']].filter(([k]) => fix[k]);
  const wrap = h('div', { class: 'fix' }, fix.text ? h('p', { class: 'fix-text', text: fix.text }) : null);
  if (!variants.length) return wrap;
  const body = h('div', { class: 'fix-body' });
  const bar = h('div', { class: 'tabs', role: 'tablist' });
  const show = (key) => {
    for (const b of bar.children) b.setAttribute('aria-selected', String(b.dataset.key === key));
    clear(body).append(codeBlock(fix[key]));
  };
  for (const [k, label] of variants) {
    bar.append(h('button', { type: 'button', role: 'tab', class: 'tab', dataset: { key: k }, text: label, onclick: () => show(k) }));
  }
  wrap.append(bar, body);
  show(variants[0][0]);
  return wrap;
}

function evidenceTable(f) {
  const entries = Object.entries(f.evidence || {});
  if (!entries.length) return null;
  return h('table', { class: 'evidence' },
    h('tbody', {}, entries.map(([k, v]) => h('tr', { dataset: { key: k, label: evidenceLabelKnown(f.id, k) ? 'registry' : 'missing' } },
      h('th', { text: evidenceLabelOf(f.id, k) }), h('td', { text: formatValue(v, evidenceUnitOf(f.id, k)) })))));
}

function findingCard(f, whatIf, rank, onShow, inference) {
  const saving = fmtSaving(f.saving);
  // the finding's own what-if, from its one saving (the header above says the same numbers)
  const s = f.saving;
  const wi = s && isNum(s.step_ns) && isNum(s.step_ns_if_fixed) && isNum(s.ns) && s.ns > 0
    ? h('div', { class: 'whatif' }, 'If its cause were removed entirely: ', h('b', { text: fmtWhatIf(s) }),
      whatIf && whatIf.finding_id === f.id && isNum(whatIf.tokens_per_s) && isNum(whatIf.tokens_per_s_if_fixed)
        ? `; ${formatValue(whatIf.tokens_per_s, unitOf('what_if.tokens_per_s'))} → at most ${formatValue(whatIf.tokens_per_s_if_fixed, unitOf('what_if.tokens_per_s_if_fixed'))} tokens`
        : '',
      whatIf && whatIf.finding_id === f.id ? unprofiledText(whatIf) : '')
    : null;
  const details = h('details', { class: 'finding-details', open: rank === 0 ? true : null },
    h('summary', { text: 'Evidence and fix' }),
    evidenceTable(f),
    fixTabs(f.fix, inference),
    f.docs && /^https?:\/\//.test(f.docs) ? h('a', { class: 'docs', href: f.docs, target: '_blank', rel: 'noopener noreferrer', text: 'Read more' }) : null);
  return h('article', { class: `finding sev-${f.severity || 'low'}`, dataset: { id: f.id || '' } },
    h('header', {},
      h('span', { class: `sev sev-${f.severity || 'low'}`, text: f.severity || 'info' }),
      h('h3', { class: 'finding-title', text: f.title || f.id || 'finding' }),
      h('span', { class: 'saving', text: saving }),
      onShow ? h('button', { type: 'button', class: 'btn show-in-trace', hidden: true, dataset: { id: f.id || '' }, text: 'Show in trace',
        title: 'Zoom the trace view to where this evidence is and outline the op it blames', onclick: () => onShow(f.id) }) : null),
    f.summary ? h('p', { class: 'finding-summary', text: f.summary }) : null,
    f.source ? h('p', { class: 'finding-source' }, h('b', { text: `${labelOf('findings[].source')}: ` }), h('code', { text: f.source })) : null,
    f.caveat ? h('p', { class: 'finding-caveat', text: f.caveat }) : null,
    wi,
    details);
}

/** What the tab says when no check fired: never "healthy" beside a card the tab colours red. */
export function noFindingsNote(report) {
  return busyIsBad(report)
    ? h('div', { class: 'nofindings' },
      h('b', { text: 'No check fired, but the run is not healthy. ' }),
      `The ${deviceKind(report)} is busy only ${formatValue(report.headline.gpu_busy_share, unitOf('headline.gpu_busy_share'))} of the time and no rule explains the rest: look at the step timeline for what the host does in the gaps.`)
    : h('div', { class: 'nofindings' },
      h('b', { text: 'No problems found. ' }),
      'None of the checks fired on this trace: the step looks healthy for what the profiler recorded.');
}

/** onShowInTrace(id): the finding's "Show in trace" button (shown once markLocated names the finding). */
export function mountFindings(el, { onShowInTrace } = {}) {
  return {
    /** The findings whose evidence the trace view can show. */
    markLocated(ids) {
      const set = new Set(ids);
      for (const b of el.querySelectorAll('.show-in-trace')) b.hidden = !set.has(b.dataset.id);
    },
    update(report) {
      const fs = Array.isArray(report.findings) ? report.findings : []; // the engine's order, as given
      clear(el);
      if (!fs.length) {
        el.append(noFindingsNote(report));
        return;
      }
      const inference = workload(report) === 'inference';
      fs.forEach((f, i) => el.append(findingCard(f, report.what_if, i, onShowInTrace, inference)));
    },
    destroy() { clear(el); },
  };
}

/** The findings as a view of the tab's state: each new report, and which findings the trace view can show. */
export function findingsView(el, tab) {
  const view = mountFindings(el, { onShowInTrace: (id) => tab.views.trace.showFinding(id) });
  let shown = null;
  return {
    render(s) {
      const r = s.report.status === 'ok' ? s.report.body : null;
      if (r && r !== shown) view.update(r);
      shown = r;
      view.markLocated(s.located || []);
    },
    destroy: view.destroy,
  };
}
