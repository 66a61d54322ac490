// The tab itself, loaded by index.js once the first requests are on their way.
// Data flows one way: state (URL hash) -> api -> views.

import * as api from './api.js';
import * as state from './state.js';
import { h, clear } from './dom.js';
import { fmtBytes, formatValue } from './format.js';
import { loadRegistry, unitOf } from './registry.js';
import { mountSelectors, normalise, findRun } from './views/selectors.js';
import { mountCards } from './views/cards.js';
import { mountTrust } from './views/trust.js';
import { mountFindings } from './views/findings.js';
import { mountKernels } from './views/kernels.js';
import { mountSteps } from './views/steps.js';
import { mountTokens } from './views/tokens.js';
import { mountTimeline } from './views/timeline.js';
import { mountTraceView } from './views/traceview.js';
import { mountTraceCanvas } from './views/traceview_canvas.js';
import { formatRange, parseRange } from './traceview/view_math.js';
import { mountCompare } from './views/compare.js';
import { mountJob } from './views/job.js';
import { baseFromState, baseToState, baselineChoices, selKey, validBase } from './compare_data.js';
import { deviceKind, hasHostLaunches, stepRows } from './views/data.js';
import { showEmpty, showError, showLoading, showNotices, showProgress } from './views/status.js';

const RUNS_POLL_BUSY_MS = 2000;
const RUNS_POLL_IDLE_MS = 10000;
const RUNS_POLL_EMPTY_MS = 3000;
const REPORT_POLL_MS = 1000;
const RANGE_WRITE_MS = 300;
const LAST_KEY = 'llm_diag.last_viewed';

/** The run to open when the URL names none: the one viewed last (if still there), else the one with the most
 *  to gain (largest estimated saving of its top finding), else the first ready one. */
export function initialSelection(runs, last) {
  if (last && findRun(runs, last.run)) return normalise(runs, last);
  let best = null;
  for (const r of runs) if (typeof r.saving_ns === 'number' && (!best || r.saving_ns > best.saving_ns)) best = r;
  return normalise(runs, best ? { run: best.run } : null);
}

/** How long the first open waits for the runs' analyses before opening the best one known. */
const RANKING_WAIT_MS = 20000;
const openedAt = Date.now();
const busyRun = (r) => r.status === 'pending' || r.status === 'analysing';
/** Whether the first open should wait: some run is still being analysed and the wait is not over. */
function waitForRanking(runs) {
  return runs.length > 1 && runs.some(busyRun) && Date.now() - openedAt < RANKING_WAIT_MS;
}

function readLast() {
  try { return JSON.parse(window.localStorage.getItem(LAST_KEY) || 'null'); } catch (e) { return null; }
}
function writeLast(sel) {
  try { window.localStorage.setItem(LAST_KEY, JSON.stringify(sel)); } catch (e) { /* private mode: no memory */ }
}

function section(title, cls, ...extra) {
  const body = h('div', { class: `${cls}-body` });
  return { el: h('section', { class: `panel-section ${cls}` }, h('h2', { text: title }), ...extra, body), body };
}

/** The page's layout: the top bar (selectors, baseline picker, trace viewer links) and the panel's sections,
 * appended to the document; returns the elements the views mount into. */
function buildLayout() {
  const selEl = h('div', { class: 'selectors' });
  const baseSel = h('select', { class: 'sel-base', 'aria-label': 'baseline', name: 'baseline' });
  const baseEl = h('label', { class: 'baseline', hidden: true }, h('span', { text: 'Compare with' }), baseSel);
  const tvEl = h('div', { class: 'traceview' });
  const statusEl = h('div', { class: 'status' });
  const noticeEl = h('div', { class: 'notices' });
  const linkNote = h('div', { class: 'warn link-note', role: 'status', hidden: true });
  const cardsEl = h('div', { class: 'cards' });
  const trustEl = h('div', { class: 'trust', hidden: true });
  const metaEl = h('div', { class: 'meta muted' });
  const findingsSec = section('Findings', 'findings');
  const kernelsSec = section('Device time by kernel category', 'kernels');
  const stepsSec = section('Per-step time: busy vs idle', 'steps');
  const tokensSec = section('Step time vs tokens per step', 'tokens');
  const timelineSec = section('Step timeline', 'timeline');
  const traceSec = section('Trace', 'trace');
  const compareSec = section('Compared with a baseline', 'compare');
  compareSec.el.hidden = true;
  const jobSec = section('Job: all ranks of this run', 'job');
  jobSec.el.hidden = true;
  // between the job (every rank) and the rank below it: which rank the cards and findings are of
  const rankHead = h('h2', { class: 'rank-head', hidden: true });
  const panel = h('div', { class: 'panel', hidden: true },
    jobSec.el, rankHead, compareSec.el, cardsEl, trustEl, metaEl, h('div', { class: 'side-by-side' }, findingsSec.el, traceSec.el),
    h('div', { class: 'grid' }, kernelsSec.el, stepsSec.el, tokensSec.el),
    timelineSec.el);
  const root = h('div', { class: 'app' },
    h('header', { class: 'topbar' }, h('h1', { text: 'LLM Diag' }), selEl, baseEl, tvEl),
    noticeEl, linkNote, statusEl, panel);
  document.body.append(root);
  return {
    selEl, baseSel, baseEl, tvEl, statusEl, noticeEl, linkNote, cardsEl, trustEl, metaEl, rankHead,
    findingsSec, kernelsSec, stepsSec, tokensSec, timelineSec, traceSec, compareSec, jobSec, panel,
  };
}

/**
 * early: {runs: Promise of the first /runs answer, registry: of the metric registry, css: of the
 * stylesheets}, started by index.js.
 */
export async function start(early) {
  const css = early.css;
  const registryReady = loadRegistry(early.registry); // units for every number; the report waits on it
  const applyTheme = (dark) => document.documentElement.classList.toggle('dark', dark);
  applyTheme(state.parentDark());

  const {
    selEl, baseSel, baseEl, tvEl, statusEl, noticeEl, linkNote, cardsEl, trustEl, metaEl, rankHead,
    findingsSec, kernelsSec, stepsSec, tokensSec, timelineSec, traceSec, compareSec, jobSec, panel,
  } = buildLayout();

  let runs = [];
  let viewers = {};
  let sel = null;
  let step = null;
  let base = null; // the baseline run of compare mode ({run, worker, span}) or null
  let compareTimer = null;
  let jobTimer = null;
  let reportFor = null; // JSON key of the selection whose report is on screen
  let reportTimer = null;
  let runsTimer = null;
  let firstPaintMarked = false;
  let firstRange = false; // the URL's range applies to the first selection only
  let tvRange = null; // "start-end" of the trace view, kept in the URL
  let rangeTimer = null;

  const key = (s) => JSON.stringify([s.run, s.worker, s.span]);
  const selectors = mountSelectors(selEl, { onChange: (s) => { linkNote.hidden = true; select(s, null); } });
  const cards = mountCards(cardsEl);
  const trust = mountTrust(trustEl);
  const traceCanvas = mountTraceCanvas(traceSec.body, {
    onRange: (v) => {
      tvRange = formatRange(v);
      clearTimeout(rangeTimer);
      rangeTimer = setTimeout(writeState, RANGE_WRITE_MS);
    },
  });
  const findings = mountFindings(findingsSec.body, { onShowInTrace: (id) => traceCanvas.showFinding(id) });
  traceSec.body.addEventListener('tv-located', (ev) => findings.markLocated(ev.detail));
  const kernels = mountKernels(kernelsSec.body);
  const steps = mountSteps(stepsSec.body, { onPick: (idx) => pickStep(idx) });
  const tokens = mountTokens(tokensSec.body);
  const timeline = mountTimeline(timelineSec.body, { onStep: (idx) => pickStep(idx) });
  const traceView = mountTraceView(tvEl);
  const compareView = mountCompare(compareSec.body);
  const jobView = mountJob(jobSec.body, { onRank: (worker) => { select({ ...sel, worker }, null); window.scrollTo({ top: 0 }); } });
  baseSel.addEventListener('change', () => {
    const c = baselineChoices(runs, sel).find((x) => x.value === baseSel.value);
    base = c ? c.sel : null;
    writeState();
    loadCompare();
  });

  function writeState() {
    if (!sel) return;
    state.write({ run: sel.run, worker: sel.worker, span: sel.span, step: step ?? undefined, t: tvRange ?? undefined, ...baseToState(base) });
  }

  function updateBaseline() {
    base = validBase(runs, sel, base);
    const choices = baselineChoices(runs, sel);
    baseEl.hidden = !choices.length;
    const items = [{ value: '', label: '— none —' }, ...choices];
    const same = baseSel.options.length === items.length && items.every((it, i) => baseSel.options[i].value === it.value && baseSel.options[i].textContent === it.label);
    if (!same) {
      clear(baseSel);
      for (const it of items) baseSel.append(h('option', { value: it.value, text: it.label }));
    }
    baseSel.value = selKey(base);
  }

  async function loadCompare() {
    clearTimeout(compareTimer);
    if (!sel || !base || reportFor !== key(sel)) {
      compareSec.el.hidden = true;
      compareView.destroy();
      return;
    }
    const want = { ...sel };
    const wantBase = { ...base };
    compareSec.el.hidden = false;
    compareView.loading(wantBase.run);
    const res = await (wantBase.level === 'job' ? api.compareJob(want, wantBase) : api.compare(want, wantBase));
    if (res.aborted || key(want) !== key(sel) || !base || selKey(wantBase) !== selKey(base)) return;
    if (res.code === 200) compareView.update(res.body);
    else if (res.code === 202) compareTimer = setTimeout(loadCompare, REPORT_POLL_MS);
    else compareView.message((res.body && res.body.error) || `The comparison failed (HTTP ${res.code}).`);
  }

  /** Several workers with the selected span: the run is a job (docs/http_api.md /job). */
  function isJob(s) {
    const run = findRun(runs, s.run);
    return !!run && run.workers.filter((w) => w.spans.some((x) => x.span === s.span)).length >= 2;
  }

  async function loadJob() {
    clearTimeout(jobTimer);
    rankHead.hidden = !sel || !isJob(sel);
    if (sel) rankHead.textContent = `This rank: ${sel.worker} (its own report: its median step, its findings)`;
    if (!sel || !isJob(sel)) {
      jobSec.el.hidden = true;
      jobView.destroy();
      return;
    }
    const want = { ...sel };
    jobSec.el.hidden = false;
    const res = await api.job(want);
    if (res.aborted || !sel || want.run !== sel.run || want.span !== sel.span) return;
    if (res.code === 200) jobView.update(res.body);
    else if (res.code === 202) {
      jobView.message(`Analysing the ranks of this run (${res.body.ranks_ready} of ${res.body.rank_count} done)…`);
      jobTimer = setTimeout(loadJob, REPORT_POLL_MS);
    } else jobView.message((res.body && res.body.error) || `The job could not be analysed (HTTP ${res.code}).`);
  }

  state.watchTheme((dark) => {
    applyTheme(dark);
    steps.rebuild();
    tokens.rebuild();
    compareView.rebuild();
    timeline.redraw();
    traceCanvas.redraw();
  });

  function spanOf(s) {
    const run = findRun(runs, s.run);
    const w = run && run.workers.find((x) => x.worker === s.worker);
    return w && w.spans.find((x) => x.span === s.span);
  }

  function markFirstPaint() {
    if (firstPaintMarked) return;
    firstPaintMarked = true;
    requestAnimationFrame(() => {
      performance.mark('llmdiag-first-paint');
      document.body.dataset.firstPaint = '1';
    });
  }

  function select(s, newStep) {
    if (!s) return;
    const changed = !sel || key(s) !== key(sel);
    sel = s;
    step = changed ? newStep : newStep ?? step;
    if (changed && !firstRange) tvRange = null;
    firstRange = false;
    updateBaseline();
    writeState();
    writeLast(sel);
    selectors.update(runs, sel);
    traceView.update({ sel, span: spanOf(sel), viewers });
    if (changed) loadReport();
    else loadTimeline();
  }

  function pickStep(idx) {
    step = idx;
    writeState();
    loadTimeline();
    timelineSec.el.scrollIntoView({ behavior: 'smooth', block: 'start' });
  }

  async function loadReport() {
    clearTimeout(reportTimer);
    const want = { ...sel };
    if (reportFor !== key(want)) {
      panel.hidden = true;
      showLoading(statusEl, 'Loading the diagnosis…');
    }
    const [res] = await Promise.all([api.report(want), registryReady]);
    if (res.aborted || key(want) !== key(sel)) return; // a newer selection owns the panel
    if (res.code === 202) {
      panel.hidden = true;
      reportFor = null;
      showProgress(statusEl, res.body);
      reportTimer = setTimeout(loadReport, REPORT_POLL_MS);
      return;
    }
    if (res.code !== 200) {
      panel.hidden = true;
      reportFor = null;
      showError(statusEl, res.body && res.body.error, res.code === 404 ? 'This run is no longer in the logdir: pick another one.' : undefined);
      return;
    }
    const report = res.body;
    if (report.status === 'error') {
      panel.hidden = true;
      reportFor = null;
      showError(statusEl, report.error);
      markFirstPaint();
      return;
    }
    clear(statusEl);
    reportFor = key(want);
    panel.hidden = false;
    cards.update(report);
    trust.update(report);
    renderMeta(report);
    findings.update(report);
    markFirstPaint();
    traceCanvas.show(want, report, parseRange(tvRange));
    kernels.update(report);
    api.steps(want).then((r) => {
      if (r.aborted || key(want) !== key(sel) || reportFor !== key(want)) return;
      steps.update(report, r.code === 200 ? r.body : null);
    });
    tokens.update(report);
    loadCompare();
    loadJob();
    timeline.setContext({ hostLaunches: hasHostLaunches(report) });
    const rows = stepRows(report);
    timeline.setSteps(rows.length ? rows : [{ index: -1, duration_ns: report.summary && report.summary.window_ns }], step);
    loadTimeline();
  }

  /** How far the read of a cut file got (read_state): a share when the reader stopped inside the file (invalid
   * JSON), else how much text was read before the file's end (a cut file: its full size is unknown). */
  function truncatedWhere(rs) {
    if (!rs) return 'only part of the file was read';
    if (typeof rs.read_share === 'number' && rs.read_share < 0.9995) return `the read stopped at ${Math.round(rs.read_share * 100)} % of the file`;
    return typeof rs.read_bytes === 'number' ? `the file ends early, after ${fmtBytes(rs.read_bytes)} of trace text` : 'the file ends early';
  }

  function renderMeta(report) {
    const s = report.summary || {};
    const kind = deviceKind(report);
    const dev = s.device ? `${s.device.name}${s.device.count > 1 ? ` ×${s.device.count}` : ''}`
      : kind === 'CPU' ? 'no device activity in trace (CPU only)' : `${kind} (model not recorded)`;
    const dist = s.distributed && s.distributed.world_size ? ` · rank ${s.distributed.rank} of ${s.distributed.world_size}` : '';
    const rs = report.read_state;
    const cut = report.status === 'partial' || (rs && rs.complete === false);
    clear(metaEl).append(
      h('span', { text: `${dev}${dist} · ${report.source_kind} · ${formatValue(report.size_bytes, unitOf('trace.size_bytes'))}` }),
      // a cut file: say how far the read got and what is left out (docs/report_schema.md read_state)
      ...(cut ? [h('div', { class: 'warn truncated', role: 'status', text: `Truncated: ${truncatedWhere(rs)}${report.error ? ` (${report.error})` : ''}. The figures cover what was read; findings that need the whole file (no device activity, peak memory) and MFU are left out.` })] : []),
      ...(report.warnings || []).slice(0, 5).map((w) => h('div', { class: 'warn', text: `⚠ ${w}` })));
  }

  async function loadTimeline() {
    if (!sel || reportFor !== key(sel)) return;
    const want = { ...sel };
    const wantStep = step;
    timeline.loading();
    const res = await api.timeline(want, wantStep);
    if (res.aborted || key(want) !== key(sel) || wantStep !== step) return;
    if (res.code === 200 && res.body && res.body.lanes) timeline.update(res.body);
    else if (res.code === 202) setTimeout(loadTimeline, REPORT_POLL_MS);
    else timeline.message((res.body && res.body.error) || 'No timeline for this step.');
  }

  let earlyRuns = early.runs;
  async function refreshRuns(first) {
    clearTimeout(runsTimer);
    const res = earlyRuns ? await earlyRuns : await api.runs();
    earlyRuns = null;
    if (res.aborted) return;
    if (res.code !== 200) {
      if (first) showError(statusEl, res.body && res.body.error, 'The LLM Diag plugin did not answer. Check the TensorBoard console.');
      runsTimer = setTimeout(() => refreshRuns(first), RUNS_POLL_IDLE_MS);
      return;
    }
    runs = res.body.runs || [];
    showNotices(noticeEl, res.body);
    viewers = res.body.trace_viewers || {};
    const busy = runs.some((r) => r.status === 'pending' || r.status === 'analysing' || r.status === 'writing');
    runsTimer = setTimeout(() => refreshRuns(!sel), busy ? RUNS_POLL_BUSY_MS : RUNS_POLL_IDLE_MS);
    selEl.hidden = !runs.length;
    if (!runs.length) {
      clearTimeout(runsTimer);
      runsTimer = setTimeout(() => refreshRuns(true), RUNS_POLL_EMPTY_MS);
      panel.hidden = true;
      sel = null;
      reportFor = null;
      clear(tvEl);
      showEmpty(statusEl, res.body.logdir, res.body.scan_error);
      markFirstPaint();
      return;
    }
    if (!sel && !state.read().run && !readLast() && waitForRanking(runs)) {
      // the first open picks the run with the most to gain: with a cold cache, wait (a while) for the analyses so
      // it lands on the same run as with a warm one
      showLoading(statusEl, `Analysing ${runs.filter(busyRun).length} of ${runs.length} runs to open the one with the most to gain…`);
      clearTimeout(runsTimer);
      runsTimer = setTimeout(() => refreshRuns(true), RUNS_POLL_BUSY_MS);
      return;
    }
    if (!sel) {
      const fromHash = state.read();
      base = baseFromState(fromHash);
      const s = fromHash.run ? normalise(runs, fromHash) : initialSelection(runs, readLast());
      linkNote.hidden = !fromHash.run || (s.run === fromHash.run && (!fromHash.worker || s.worker === fromHash.worker));
      if (!linkNote.hidden) {
        // a deep link to a run (or worker) this logdir does not have: say so, never fall back silently
        const asked = fromHash.worker && s.run === fromHash.run ? `worker "${fromHash.worker}" of run "${fromHash.run}"` : `run "${fromHash.run}"`;
        linkNote.textContent = `⚠ The link names ${asked}, which is not in this logdir: showing "${s.run}" (${s.worker}) instead.`;
      }
      if (fromHash.run && fromHash.t && s.run === fromHash.run) { tvRange = fromHash.t; firstRange = true; }
      const hashStep = fromHash.step !== undefined && fromHash.step !== '' && s.run === fromHash.run ? Number(fromHash.step) : null;
      select(s, Number.isFinite(hashStep) ? hashStep : null);
    } else {
      const s = normalise(runs, sel);
      if (key(s) !== key(sel)) select(s, null);
      else {
        selectors.update(runs, sel);
        const had = selKey(base);
        updateBaseline();
        if (selKey(base) !== had) { writeState(); loadCompare(); }
        traceView.update({ sel, span: spanOf(sel), viewers });
      }
    }
  }

  state.subscribe((s) => {
    if (!runs.length || !s.run) return;
    const n = normalise(runs, s);
    const st = s.step !== undefined && s.step !== '' ? Number(s.step) : null;
    const b = baseFromState(s);
    if (selKey(b) !== selKey(base)) {
      base = b;
      if (sel && key(n) === key(sel)) { updateBaseline(); loadCompare(); }
    }
    if (!sel || key(n) !== key(sel)) select(n, st);
    else if (st !== step) { step = st; loadTimeline(); }
  });

  await css;
  showLoading(statusEl);
  await refreshRuns(true);
}
