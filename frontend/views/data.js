// Where each chart's numbers live in a RunReport (docs/report_schema.md, docs/metrics.md).
// Every accessor tolerates a missing topic and returns null: the view then says what is missing.

import { isNum } from '../format.js';

function topic(report, name) {
  const t = report && report.metrics && report.metrics[name];
  return t && typeof t === 'object' && t.available !== false ? t : null;
}

/** [{category, time_ns}] sorted by time, from metrics.kernels.by_category ({category: {time_ns, ...}}). */
export function kernelCategories(report) {
  const t = topic(report, 'kernels');
  if (!t || !t.by_category || typeof t.by_category !== 'object') return null;
  const rows = Object.entries(t.by_category)
    .map(([category, v]) => ({ category, time_ns: v && v.time_ns }))
    .filter((r) => isNum(r.time_ns));
  return rows.length ? rows.sort((a, b) => b.time_ns - a.time_ns) : null;
}

/**
 * Whether the trace has the host launch calls that the launch-based views need (Kineto traces of
 * PyTorch). XLA runs (metrics.run.platform, decided once by the engine) launch whole compiled graphs: their
 * idle time cannot be split by host cause and launches per step mean something else, so those views say
 * they do not apply.
 */
export function hasHostLaunches(report) {
  if (!report) return false;
  const run = report.metrics && report.metrics.run;
  if (run && run.platform) return run.platform !== 'xla';
  return report.source_kind !== 'xplane';
}

/** What the trace's device is, for labels: "GPU", "MTIA", "TPU" or "CPU" (metrics.run.device_kind; "GPU" for
 * reports from before it existed). */
export function deviceKind(report) {
  const run = report && report.metrics && report.metrics.run;
  return (run && typeof run.device_kind === 'string' && run.device_kind) || 'GPU';
}

/** "training" | "inference" | null (metrics.run.workload: from the trace's backward / optimizer activity). */
export function workload(report) {
  const run = report && report.metrics && report.metrics.run;
  return (run && run.workload) || null;
}

/** Below this device-busy share the busy card is red, and the tab never calls the run healthy. */
export const BUSY_BAD_BELOW = 0.6;

/** Whether the headline's device-busy share is one the tab colours red. */
export function busyIsBad(report) {
  const v = report && report.headline && report.headline.gpu_busy_share;
  return isNum(v) && v < BUSY_BAD_BELOW;
}

/** The report's one list of steps (metrics.steps.per_step: index, name, start/end, duration_ns, busy/idle
 * parts, tokens), or []. */
export function stepRows(report) {
  const rows = report && report.metrics && report.metrics.steps && report.metrics.steps.per_step;
  return Array.isArray(rows) ? rows : [];
}

/** The XLA topic (recompiles), or null. */
export function xlaTopic(report) {
  return topic(report, 'xla');
}

const PARTS = { busy: 'busy_ns', communication: 'collective_ns', host_wait: 'host_wait_ns', sync: 'sync_ns', data_loader: 'data_loader_ns', other: 'other_ns' };

/**
 * Per step: {index, duration_ns, busy, communication, host_wait, sync, data_loader, other} (ns; null when unknown). From the
 * plugin's /steps body ({steps: [{index, busy_ns, ...}]}) when given, else from the report's own step rows
 * (metrics.steps.per_step): both come from the engine's one step breakdown.
 */
export function stepBreakdown(report, stepsBody) {
  const steps = stepRows(report);
  let part = (i, key) => (isNum(steps[i][key]) ? steps[i][key] : null);
  if (stepsBody && Array.isArray(stepsBody.steps)) {
    const byIndex = new Map(stepsBody.steps.map((r) => [r.index, r]));
    part = (i, key) => { const r = byIndex.get(steps[i].index); return r && isNum(r[key]) ? r[key] : null; };
  }
  const rows = steps.map((s, i) => {
    const out = { index: s.index, duration_ns: s.duration_ns };
    for (const [name, key] of Object.entries(PARTS)) out[name] = part(i, key);
    return out;
  });
  return { rows, hasParts: rows.some((r) => isNum(r.busy)) };
}

/** [{index, duration_ns, tokens}] from metrics.steps.per_step, else null when no step has tokens. */
export function tokensPerStep(report) {
  const rows = stepRows(report)
    .map((s) => ({ index: s.index, duration_ns: s.duration_ns, tokens: s.tokens }))
    .filter((r) => isNum(r.tokens) && isNum(r.duration_ns));
  return rows.length ? rows : null;
}
