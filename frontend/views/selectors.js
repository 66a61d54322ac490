// Run / worker / span selectors. Pure view: reports the user's choice through onChange.

import { h, clear } from '../dom.js';
import { statusLabel } from '../format.js';

export function findRun(runs, name) {
  return (runs || []).find((r) => r.run === name) || null;
}

/** The selection made valid against the run list: unknown names fall back to the first choice. */
export function normalise(runs, sel) {
  if (!runs || !runs.length) return null;
  const run = findRun(runs, sel && sel.run) || runs.find((r) => r.status === 'ready') || runs[0];
  const worker = run.workers.find((w) => w.worker === (sel && sel.worker)) || run.workers[0];
  const span = worker.spans.find((s) => s.span === (sel && sel.span)) || worker.spans[worker.spans.length - 1];
  return { run: run.run, worker: worker.worker, span: span.span };
}

export function mountSelectors(el, { onChange }) {
  const mk = (name) => h('select', { class: `sel-${name}`, 'aria-label': name, name });
  const runSel = mk('run');
  const workerSel = mk('worker');
  const spanSel = mk('span');
  const count = h('span', { class: 'muted run-count' });
  clear(el).append(
    h('label', {}, h('span', { text: 'Run' }), runSel),
    h('label', {}, h('span', { text: 'Worker' }), workerSel),
    h('label', {}, h('span', { text: 'Span' }), spanSel),
    count);
  let runs = [];
  const current = () => ({ run: runSel.value, worker: workerSel.value, span: spanSel.value });
  runSel.addEventListener('change', () => onChange(normalise(runs, { run: runSel.value })));
  workerSel.addEventListener('change', () => onChange(normalise(runs, { run: runSel.value, worker: workerSel.value })));
  spanSel.addEventListener('change', () => onChange(current()));

  function fill(select, items, value) {
    const same = select.options.length === items.length && items.every((it, i) => select.options[i].value === it.value && select.options[i].textContent === it.label);
    if (!same) {
      clear(select);
      for (const it of items) select.append(h('option', { value: it.value, text: it.label }));
    }
    select.value = value;
    select.disabled = items.length <= 1 && select !== runSel;
  }

  return {
    update(runList, sel) {
      runs = runList || [];
      count.textContent = `${runs.length} run${runs.length === 1 ? '' : 's'}`;
      fill(runSel, runs.map((r) => ({ value: r.run, label: statusLabel(r.run, r.status) })), sel.run);
      const run = findRun(runs, sel.run);
      const workers = run ? run.workers : [];
      fill(workerSel, workers.map((w) => ({ value: w.worker, label: w.worker })), sel.worker);
      const worker = workers.find((w) => w.worker === sel.worker);
      const spans = worker ? worker.spans : [];
      fill(spanSel, spans.map((s) => ({ value: s.span, label: statusLabel(`${s.span} · ${s.source_kind}`, s.status) })), sel.span);
    },
    destroy() { clear(el); },
  };
}

/** The selectors as a view of the tab's state (app.js VIEWS): a choice selects through the tab. */
export function selectorsView(el, tab) {
  const view = mountSelectors(el, { onChange: (s) => tab.select(s) });
  return {
    render(s) {
      el.hidden = !s.runs.length;
      if (s.sel) view.update(s.runs, s.sel);
    },
    destroy: view.destroy,
  };
}
