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
 * PyTorch). XLA traces (XPlane) launch whole compiled graphs: their idle time cannot be split by host
 * cause and launches per step mean something else, so those views say they do not apply.
 */
export function hasHostLaunches(report) {
  if (!report) return false;
  return !(report.source_kind === 'xplane' || (report.metrics && report.metrics.xla));
}

/** The XLA topic (recompiles), or null. */
export function xlaTopic(report) {
  return topic(report, 'xla');
}

const PARTS = { busy: 'busy_ns', host_wait: 'host_wait_ns', sync: 'sync_ns', data_loader: 'data_loader_ns', other: 'other_ns' };

/**
 * Per step: {index, duration_ns, busy, host_wait, sync, data_loader, other} (ns; null when unknown). From the
 * plugin's /steps body ({steps: [{index, busy_ns, ...}]}) when given, else from metrics.idle.step_breakdown
 * (columns aligned with summary.steps).
 */
export function stepBreakdown(report, stepsBody) {
  const steps = (report && report.summary && report.summary.steps) || [];
  let part = () => null;
  if (stepsBody && Array.isArray(stepsBody.steps)) {
    const byIndex = new Map(stepsBody.steps.map((r) => [r.index, r]));
    part = (i, key) => { const r = byIndex.get(steps[i].index); return r && isNum(r[key]) ? r[key] : null; };
  } else {
    const cols = (topic(report, 'idle') || {}).step_breakdown;
    if (cols && typeof cols === 'object') {
      part = (i, key) => (Array.isArray(cols[key]) && cols[key].length === steps.length && isNum(cols[key][i]) ? cols[key][i] : null);
    }
  }
  const rows = steps.map((s, i) => {
    const out = { index: s.index, duration_ns: s.duration_ns };
    for (const [name, key] of Object.entries(PARTS)) out[name] = part(i, key);
    return out;
  });
  return { rows, hasParts: rows.some((r) => isNum(r.busy)) };
}

/** [{index, duration_ns, tokens}] from metrics.steps.tokens (aligned with summary.steps), else null. */
export function tokensPerStep(report) {
  const steps = (report && report.summary && report.summary.steps) || [];
  const tokens = (topic(report, 'steps') || {}).tokens;
  if (!Array.isArray(tokens) || tokens.length !== steps.length) return null;
  const rows = steps
    .map((s, i) => ({ index: s.index, duration_ns: s.duration_ns, tokens: tokens[i] }))
    .filter((r) => isNum(r.tokens) && isNum(r.duration_ns));
  return rows.length ? rows : null;
}
