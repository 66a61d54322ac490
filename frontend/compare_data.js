// Compare mode's pure helpers (no DOM): the baseline in the URL hash, the runs it can be, and what the
// compare view shows of a /compare document (docs/compare.md). Tested with `node --test frontend/`.

import { isNum } from './format.js';

/** The rows shown as cards, in this order, when the document has them on both sides. */
export const CARD_KEYS = ['headline.tokens_per_s', 'work.ns_per_token', 'headline.step_median_ns',
  'headline.gpu_busy_share', 'headline.mfu_share'];

/** The cards of a job comparison (level "job"), in this order, when both sides have them. */
export const JOB_CARD_KEYS = ['job.tokens_per_s', 'job.job_step_ns', 'job.exposed_transfer_share', 'job.waiting_share',
  'job.straggler_others_wait_share'];

/** The baseline named by the hash's plugin state, or null: a trace ({base_run, base_worker, base_span}) or a job
 * ({base_level: "job", base_run, base_span}: every rank of that run and span). */
export function baseFromState(s) {
  if (!s || !s.base_run || !s.base_span) return null;
  if (s.base_level === 'job') return { run: s.base_run, worker: null, span: s.base_span, level: 'job' };
  if (!s.base_worker) return null;
  return { run: s.base_run, worker: s.base_worker, span: s.base_span };
}

/** The plugin-state keys of a baseline (none when there is no baseline). */
export function baseToState(b) {
  if (!b) return {};
  if (b.level === 'job') return { base_run: b.run, base_span: b.span, base_level: 'job' };
  return { base_run: b.run, base_worker: b.worker, base_span: b.span };
}

export const selKey = (s) => {
  if (!s) return '';
  return s.level === 'job' ? `job:${JSON.stringify([s.run, s.span])}` : JSON.stringify([s.run, s.worker, s.span]);
};

/** The jobs of a run list: [{run, span, ranks}] for every run and span that two or more workers recorded. */
export function jobsOf(runs) {
  const out = [];
  for (const r of runs || []) {
    const counts = new Map();
    for (const w of r.workers) for (const s of w.spans) counts.set(s.span, (counts.get(s.span) || 0) + 1);
    const spans = [...counts].filter(([, n]) => n >= 2);
    for (const [span, n] of spans) out.push({ run: r.run, span, ranks: n, label: spans.length > 1 ? `${r.run} · ${span}` : r.run });
  }
  return out;
}

/** Whether the selection is a rank of a job (its run and span recorded by two or more workers). */
export const inJob = (runs, sel) => !!sel && jobsOf(runs).some((j) => j.run === sel.run && j.span === sel.span);

/** The baselines the picker offers: when the selection is a rank of a job, every other job first (compared job
 * to job), then every span of every run except the selection itself: [{value (selKey), label, status, sel}]. */
export function baselineChoices(runs, sel) {
  const out = [];
  if (inJob(runs, sel)) {
    for (const j of jobsOf(runs)) {
      if (j.run === sel.run && j.span === sel.span) continue;
      const b = { run: j.run, worker: null, span: j.span, level: 'job' };
      out.push({ value: selKey(b), label: `job ${j.label} (${j.ranks} ranks)`, status: 'ready', sel: b });
    }
  }
  for (const r of runs || []) {
    const many = r.workers.length > 1 || r.workers.some((w) => w.spans.length > 1);
    for (const w of r.workers) {
      for (const s of w.spans) {
        const b = { run: r.run, worker: w.worker, span: s.span };
        if (selKey(b) === selKey(sel)) continue;
        out.push({ value: selKey(b), label: many ? `${r.run} · ${w.worker} · ${s.span}` : r.run, status: s.status, sel: b });
      }
    }
  }
  return out;
}

/** The baseline if it is still in the run list (and not the selection itself), else null. */
export function validBase(runs, sel, base) {
  if (!base) return null;
  return baselineChoices(runs, sel).some((c) => c.value === selKey(base)) ? base : null;
}

/** "+12.3 %", a factor from +900 % ("11.2x"), "new" from 0, "—" when unknown. */
export function changeText(row) {
  if (isNum(row.change)) {
    if (Math.abs(row.change) >= 9) return `${(1 + row.change).toPrecision(3)}x`;
    return `${row.change >= 0 ? '+' : '−'}${Math.abs(100 * row.change).toFixed(1)} %`;
  }
  if (!isNum(row.before) || !isNum(row.after)) return '—';
  return row.before === 0 && row.after !== 0 ? 'new' : '0';
}

/** The noise band as a relative change ("−89.6 … −74.5 %"), in the metric's unit when only that is known. */
export function bandText(row, fmt) {
  const n = row.noise;
  if (!n) return '—';
  const pct = (x) => `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)}`;
  if (isNum(n.band_lo_change) && isNum(n.band_hi_change)) return `${pct(n.band_lo_change)} … ${pct(n.band_hi_change)} %`;
  return `${fmt(n.band_lo, row.unit)} … ${fmt(n.band_hi, row.unit)}`;
}

/** The words the CLI's table shows for a row (render/compare_text.py judgement). */
export function judgement(row) {
  if (!row.comparable) return isNum(row.before) && isNum(row.after) ? 'not compared' : 'one side';
  if (row.direction === 'same') return 'same';
  const words = [row.direction, row.beyond_tolerance ? 'beyond tolerance' : 'within tolerance'];
  if (row.beyond_noise !== null && row.beyond_noise !== undefined) words.push(row.beyond_noise ? 'beyond noise' : 'within noise');
  if (row.regressed) words.push('REGRESSED');
  return words.join(', ');
}

/** A card's tone: bad (regressed), warn (worse beyond tolerance), good (better beyond tolerance and noise). */
export function tone(row) {
  if (row.regressed) return 'bad';
  if (!row.comparable) return '';
  if (row.direction === 'worse' && row.beyond_tolerance) return 'warn';
  if (row.direction === 'better' && row.beyond_tolerance && row.beyond_noise !== false) return 'good';
  return '';
}

/** The card rows of a document, CARD_KEYS (JOB_CARD_KEYS for a job comparison) order, only rows with a value
 * on both sides. */
export function cardRows(doc) {
  const byKey = new Map((doc.metrics || []).map((r) => [r.key, r]));
  const keys = doc.level === 'job' ? JOB_CARD_KEYS : CARD_KEYS;
  return keys.map((k) => byKey.get(k)).filter((r) => r && isNum(r.before) && isNum(r.after));
}

/** A job comparison's per-rank rows as bars: [{rank, before, after, change, beyond, width: {before, after}}] with
 * widths in % of the largest step of either side (each rank's own step median). */
export function rankBars(doc) {
  const rows = (doc.ranks || []).filter((r) => isNum(r.step_median_ns_before) || isNum(r.step_median_ns_after));
  const top = Math.max(0, ...rows.flatMap((r) => [r.step_median_ns_before, r.step_median_ns_after].filter(isNum)));
  const pct = (v) => (isNum(v) && top > 0 ? (100 * v) / top : 0);
  return rows.map((r) => ({
    rank: r.rank,
    before: r.step_median_ns_before,
    after: r.step_median_ns_after,
    change: r.change,
    beyond: r.noise ? r.noise.beyond : null,
    width: { before: pct(r.step_median_ns_before), after: pct(r.step_median_ns_after) },
  }));
}

/** Per-step durations of both sides by position in the profiled window: {x: [1..n], before, after} (null pads). */
export function overlay(doc) {
  const b = (doc.before && doc.before.step_durations_ns) || [];
  const a = (doc.after && doc.after.step_durations_ns) || [];
  const n = Math.max(b.length, a.length);
  const x = Array.from({ length: n }, (_, i) => i + 1);
  return { x, before: x.map((_, i) => (i < b.length ? b[i] : null)), after: x.map((_, i) => (i < a.length ? a[i] : null)) };
}
