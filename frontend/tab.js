// The tab's controller: the data sources, the run list loop, the URL hash in both directions, and the actions
// views call (select a run, a step, a baseline, a rank, a finding in the trace). Views never fetch: they get
// the state (tab_state.js) and, for the trace view, the data functions below.

import * as api from './api.js';
import * as urlState from './state.js';
import { createState } from './tab_state.js';
import { normalise, findRun } from './views/selectors.js';
import { baseFromState, baseToState, inJob, selKey, validBase } from './compare_data.js';

const RUNS_POLL_BUSY_MS = 2000;
const RUNS_POLL_IDLE_MS = 10000;
const RUNS_POLL_EMPTY_MS = 3000;
const REPORT_POLL_MS = 1000;
const RANGE_WRITE_MS = 300;
const LAST_KEY = 'llm_diag.last_viewed';
/** How long the first open waits for the runs' analyses before opening the best one known. */
const RANKING_WAIT_MS = 20000;
const openedAt = Date.now();

const reportOk = (s) => s.report.status === 'ok';
const busyRun = (r) => r.status === 'pending' || r.status === 'analysing';

/** How many traces the selected run and worker hold (a new window of a live run reloads its timeline). */
function windowCount(s) {
  const run = findRun(s.runs, s.sel.run);
  const w = run && run.workers.find((x) => x.worker === s.sel.worker);
  return w ? w.spans.length : 0;
}

/** Each data source: its key (a new key reloads it, null turns it off) and its request. */
export const SOURCES = {
  report: { key: (s) => selKey(s.sel), load: (s) => api.report(s.sel) },
  steps: { key: (s) => (reportOk(s) ? selKey(s.sel) : null), load: (s) => api.steps(s.sel) },
  timeline: { key: (s) => (reportOk(s) ? `${selKey(s.sel)}#${s.step}` : null), load: (s) => api.timeline(s.sel, s.step) },
  job: { key: (s) => (inJob(s.runs, s.sel) ? JSON.stringify([s.sel.run, s.sel.span]) : null), load: (s) => api.job(s.sel) },
  /** the windows of the selected run and worker over the run (docs/http_api.md /over_run) */
  overRun: {
    key: (s) => (reportOk(s) ? JSON.stringify([s.sel.run, s.sel.worker, windowCount(s)]) : null),
    load: (s) => api.route('over_run', { run: s.sel.run, worker: s.sel.worker }),
  },
  compare: {
    key: (s) => (reportOk(s) && s.base ? `${selKey(s.sel)}|${selKey(s.base)}` : null),
    load: (s) => (s.base.level === 'job' ? api.compareJob(s.sel, s.base) : api.compare(s.sel, s.base)),
  },
};

/** The run to open when the URL names none: the one viewed last (if still there), else the one with the most
 *  to gain (largest estimated saving of its top finding), else the first ready one. */
export function initialSelection(runs, last) {
  if (last && findRun(runs, last.run)) return normalise(runs, last);
  let best = null;
  for (const r of runs) if (typeof r.saving_ns === 'number' && (!best || r.saving_ns > best.saving_ns)) best = r;
  return normalise(runs, best ? { run: best.run } : null);
}

function readLast() {
  try { return JSON.parse(window.localStorage.getItem(LAST_KEY) || 'null'); } catch (e) { return null; }
}
function writeLast(sel) {
  try { window.localStorage.setItem(LAST_KEY, JSON.stringify(sel)); } catch (e) { /* private mode: no memory */ }
}

/** The URL hash follows the state: at once for a selection, step or baseline; a range once the zoom rests. */
function persist(T, changed) {
  const s = T.state;
  if (!s.sel) return;
  const write = () => urlState.write({ run: s.sel.run, worker: s.sel.worker, span: s.sel.span, step: s.step ?? undefined,
    t: s.range ?? undefined, ...baseToState(s.base) });
  if (changed.has('sel')) writeLast(s.sel);
  if (changed.has('sel') || changed.has('step') || changed.has('base')) { T.poller.stop('hash'); write(); }
  else if (changed.has('range')) T.poller.after('hash', RANGE_WRITE_MS, write);
}

/** The patch that selects `sel` (and `step`): a new trace forgets the old range unless one is given. */
function selectPatch(T, sel, step, range) {
  const s = T.state;
  const same = selKey(sel) === selKey(s.sel);
  return { sel, step: same ? step ?? s.step : step ?? null, range: same ? s.range : range ?? null, base: validBase(s.runs, sel, s.base) };
}

/** The first selection: the URL's (saying so when it names a run this logdir lacks), else initialSelection. */
function firstSelection(T, runs) {
  const fromHash = urlState.read();
  const s = fromHash.run ? normalise(runs, fromHash) : initialSelection(runs, readLast());
  const missing = fromHash.run && !(s.run === fromHash.run && (!fromHash.worker || s.worker === fromHash.worker));
  const asked = fromHash.worker && s.run === fromHash.run ? `worker "${fromHash.worker}" of run "${fromHash.run}"` : `run "${fromHash.run}"`;
  const linkNote = missing ? `⚠ The link names ${asked}, which is not in this logdir: showing "${s.run}" (${s.worker}) instead.` : null;
  const own = s.run === fromHash.run;
  const hashStep = fromHash.step !== undefined && fromHash.step !== '' && own ? Number(fromHash.step) : null;
  T.set({ runs, base: baseFromState(fromHash), linkNote });
  T.set(selectPatch(T, s, Number.isFinite(hashStep) ? hashStep : null, own && fromHash.t ? fromHash.t : null));
}

/** One round of the run list: the answer, the next round's timer, and the selection it implies. */
async function refreshRuns(T, first) {
  T.poller.stop('runs');
  const res = T.earlyRuns ? await T.earlyRuns : await api.runs();
  T.earlyRuns = null;
  if (res.aborted) return;
  const again = (ms, f) => T.poller.after('runs', ms, () => refreshRuns(T, f));
  if (res.code !== 200) {
    if (first) T.set({ runsError: (res.body && res.body.error) || `HTTP ${res.code}` });
    again(RUNS_POLL_IDLE_MS, first);
    return;
  }
  const runs = res.body.runs || [];
  const busy = runs.some((r) => busyRun(r) || r.status === 'writing');
  T.set({ runsBody: res.body, viewers: res.body.trace_viewers || {}, runsError: null });
  if (!runs.length) {
    again(RUNS_POLL_EMPTY_MS, true);
    T.set({ runs, sel: null, waiting: null });
    return;
  }
  const s = T.state;
  if (!s.sel && !urlState.read().run && !readLast() && runs.length > 1 && runs.some(busyRun) && Date.now() - openedAt < RANKING_WAIT_MS) {
    // the first open picks the run with the most to gain: with a cold cache, wait (a while) for the analyses so
    // it lands on the same run as with a warm one
    T.set({ runs, waiting: `Analysing ${runs.filter(busyRun).length} of ${runs.length} runs to open the one with the most to gain…` });
    again(RUNS_POLL_BUSY_MS, true);
    return;
  }
  again(busy ? RUNS_POLL_BUSY_MS : RUNS_POLL_IDLE_MS, false);
  T.set({ waiting: null });
  if (!s.sel) firstSelection(T, runs);
  else {
    T.set({ runs });
    T.set(selectPatch(T, normalise(runs, s.sel), null));
  }
}

/** The tab: its state, its actions for views, and start(). `render(state, changed)` draws the views. */
export function createTab({ early, render }) {
  const T = { earlyRuns: early && early.runs };
  const { state, set, poller } = createState({
    sources: SOURCES, pollMs: REPORT_POLL_MS, initial: { runsError: null, waiting: null, linkNote: null, located: [], partsLocated: [] },
    onChange: (s, changed) => { persist(T, changed); render(s, changed); },
  });
  Object.assign(T, {
    state, set, poller,
    select: (sel, step = null) => set({ ...selectPatch(T, sel, step), linkNote: null }),
    pickStep: (idx) => { set({ step: idx }); if (T.views && T.views.timeline.reveal) T.views.timeline.reveal(); },
    setBase: (base) => set({ base }),
    setRange: (range) => set({ range }),
    located: (ids) => set({ located: ids }),
    /** the model parts the trace view can open (its /trace_view `parts`); showPart(name) opens one there */
    partsLocated: (names) => { if (names.join('\n') !== state.partsLocated.join('\n')) set({ partsLocated: names }); },
    showPart: (name) => T.views.trace.showPart(name),
    isJob: () => inJob(state.runs, state.sel),
    spanOf: () => {
      const run = findRun(state.runs, state.sel && state.sel.run);
      const w = run && run.workers.find((x) => x.worker === state.sel.worker);
      return w && w.spans.find((x) => x.span === state.sel.span);
    },
    /** the trace view's data: windows of lanes, one event, a search (docs/http_api.md /trace_view...) */
    trace: { window: api.traceView, event: api.traceEvent, search: api.traceSearch, bytes: api.traceBytes, url: api.traceUrl },
    start: () => refreshRuns(T, true),
  });
  urlState.subscribe((h) => { // a link pasted or edited in the address bar: the state follows
    if (!state.runs.length || !h.run) return;
    const sel = normalise(state.runs, h);
    const step = h.step !== undefined && h.step !== '' ? Number(h.step) : null;
    set({ ...selectPatch(T, sel, null), step: Number.isFinite(step) ? step : null, base: validBase(state.runs, sel, baseFromState(h)) });
  });
  return T;
}
