// The tab itself, loaded by index.js once the first requests are on their way.
// Data flows one way: the URL hash and the run list -> the tab's state (tab.js, tab_state.js) -> views.
//
// A view is one module and one entry of VIEWS: where it sits, its section title, what state it uses
// (`uses`: state keys and data sources, see tab.js SOURCES) and mount(el, tab, section) -> {render(state,
// changed), redraw?(), destroy()}. A view that only reads the run report wraps its update(report) in
// fromReport. A view with a route of its own adds one SOURCES entry (api.route names any catalog route).

import * as urlState from './state.js';
import { h } from './dom.js';
import { loadRegistry } from './registry.js';
import { createTab } from './tab.js';
import { fromReport } from './views/view.js';
import { selectorsView } from './views/selectors.js';
import { baselineView } from './views/baseline.js';
import { traceLinksView } from './views/traceview.js';
import { noticesView, statusView, linkNoteView } from './views/status.js';
import { verdictView } from './views/verdict.js';
import { mountCards } from './views/cards.js';
import { trustView } from './views/trust.js';
import { metaView } from './views/meta.js';
import { findingsView } from './views/findings.js';
import { mountKernels } from './views/kernels.js';
import { stepsView } from './views/steps.js';
import { mountTokens } from './views/tokens.js';
import { timelineView } from './views/timeline.js';
import { traceCanvasView } from './views/traceview_canvas.js';
import { compareView } from './views/compare.js';
import { jobView, rankHeadView } from './views/job.js';
import { overRunView } from './views/over_run.js';
import { anatomyView } from './views/anatomy.js';

export { initialSelection } from './tab.js';

/** place: 'bar' (the top bar), 'top' (the panel, in order), 'side' (findings beside the trace), 'grid' (charts),
 *  'main' (full width below the charts), 'page' (above the panel: notices, status). */
export const VIEWS = [
  { id: 'selectors', place: 'bar', cls: 'selectors', uses: ['runs', 'sel'], mount: selectorsView },
  { id: 'baseline', place: 'bar', cls: 'baseline', uses: ['runs', 'sel', 'base'], mount: baselineView },
  { id: 'tracelinks', place: 'bar', cls: 'traceview', uses: ['runs', 'sel', 'viewers'], mount: traceLinksView },
  { id: 'notices', place: 'page', cls: 'notices', uses: ['runsBody'], mount: noticesView },
  { id: 'linknote', place: 'page', cls: 'warn link-note', uses: ['linkNote'], mount: linkNoteView },
  { id: 'status', place: 'page', cls: 'status', uses: ['runs', 'runsError', 'waiting', 'report'], mount: statusView },
  { id: 'verdict', place: 'top', cls: 'verdict', uses: ['report', 'job', 'located'], mount: verdictView },
  { id: 'compare', place: 'top', title: 'Compared with a baseline', cls: 'compare', uses: ['compare'], mount: compareView },
  { id: 'job', place: 'top', title: 'Job: all ranks of this run', cls: 'job', uses: ['job'], mount: jobView },
  { id: 'rankhead', place: 'top', tag: 'h2', cls: 'rank-head', uses: ['runs', 'sel'], mount: rankHeadView },
  { id: 'cards', place: 'top', cls: 'cards', uses: ['report'], mount: fromReport(mountCards) },
  { id: 'trust', place: 'top', cls: 'trust', uses: ['report'], mount: trustView },
  { id: 'meta', place: 'top', cls: 'meta muted', uses: ['report'], mount: metaView },
  { id: 'findings', place: 'side', title: 'Findings', cls: 'findings', uses: ['report', 'located'], mount: findingsView },
  { id: 'trace', place: 'side', title: 'Trace', cls: 'trace', uses: ['report'], mount: traceCanvasView },
  { id: 'kernels', place: 'grid', title: 'Device time by kernel category', cls: 'kernels', uses: ['report'], mount: fromReport(mountKernels) },
  { id: 'steps', place: 'grid', title: 'Per-step time: busy vs idle', cls: 'steps', uses: ['report', 'steps'], mount: stepsView },
  { id: 'tokens', place: 'grid', title: 'Step time vs tokens per step', cls: 'tokens', uses: ['report'], mount: fromReport(mountTokens) },
  { id: 'anatomy', place: 'main', title: 'Step anatomy: GPU time by model part', cls: 'anatomy', uses: ['report', 'partsLocated'], mount: anatomyView },
  { id: 'timeline', place: 'main', title: 'Step timeline', cls: 'timeline', uses: ['report', 'timeline'], mount: timelineView },
  { id: 'overrun', place: 'main', title: 'Over the run', cls: 'over-run', uses: ['overRun', 'sel'], mount: overRunView },
];

/** A view's element: a plain container, or a titled panel section whose body the view fills. */
function slot(v) {
  if (!v.title) return { el: h(v.tag || 'div', { class: v.cls }), body: null };
  const body = h('div', { class: `${v.cls}-body` });
  return { el: h('section', { class: `panel-section ${v.cls}` }, h('h2', { text: v.title }), body), body };
}

/** The page: the top bar, the page-level notes, the panel (hidden until a report is on screen). */
function buildLayout(views) {
  const slots = new Map(views.map((v) => [v.id, slot(v)]));
  const at = (place) => views.filter((v) => v.place === place).map((v) => slots.get(v.id).el);
  const panel = h('div', { class: 'panel', hidden: true }, ...at('top'),
    h('div', { class: 'side-by-side' }, ...at('side')), h('div', { class: 'grid' }, ...at('grid')), ...at('main'));
  document.body.append(h('div', { class: 'app' },
    h('header', { class: 'topbar' }, h('h1', { text: 'LLM Diag' }), ...at('bar')), ...at('page'), panel));
  return { slots, panel };
}

/**
 * early: {runs: Promise of the first /runs answer, registry: of the metric registry, css: of the
 * stylesheets}, started by index.js.
 */
export async function start(early) {
  const registryReady = loadRegistry(early.registry); // units and labels for every number; the panel waits on it
  const applyTheme = (dark) => document.documentElement.classList.toggle('dark', dark);
  applyTheme(urlState.parentDark());
  const { slots, panel } = buildLayout(VIEWS);
  const mounted = [];
  const render = (s, changed) => {
    panel.hidden = s.report.status !== 'ok';
    for (const { v, view } of mounted) if (v.uses.some((k) => changed.has(k))) view.render(s, changed);
  };
  const tab = createTab({ early: { runs: early.runs }, render });
  tab.views = {};
  for (const v of VIEWS) {
    const { el, body } = slots.get(v.id);
    const view = v.mount(body || el, tab, el);
    tab.views[v.id] = view;
    mounted.push({ v, view });
  }
  urlState.watchTheme((dark) => { applyTheme(dark); for (const { view } of mounted) if (view.redraw) view.redraw(); });
  await early.css;
  await registryReady;
  await tab.start();
}
