// Where each chart's numbers live in a RunReport (docs/report_schema.md, docs/metrics.md).
// Every accessor tolerates a missing topic and returns null: the view then says what is missing.

import { isNum } from '../format.js';

function topic(report, ...names) {
  const m = (report && report.metrics) || {};
  for (const n of names) if (m[n] && typeof m[n] === 'object') return m[n];
  return null;
}

/** [{category, time_ns}] sorted by time, from the kernels topic ({category: ns} or rows). */
export function kernelCategories(report) {
  const t = topic(report, 'kernels', 'kernel_categories', 'categories');
  if (!t) return null;
  const cand = t.by_category_ns || t.time_ns_by_category || t.category_time_ns || t.by_category || t.categories;
  let rows = null;
  if (Array.isArray(cand)) {
    rows = cand
      .map((r) => ({ category: r.category || r.name, time_ns: r.time_ns ?? r.device_time_ns ?? r.total_ns ?? r.ns }))
      .filter((r) => r.category && isNum(r.time_ns));
  } else if (cand && typeof cand === 'object') {
    rows = Object.entries(cand)
      .map(([category, v]) => ({ category, time_ns: isNum(v) ? v : v && (v.time_ns ?? v.device_time_ns ?? v.total_ns) }))
      .filter((r) => isNum(r.time_ns));
  }
  if (!rows || !rows.length) return null;
  return rows.sort((a, b) => b.time_ns - a.time_ns);
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

const PART_KEYS = {
  busy: ['busy_ns', 'device_busy_ns', 'gpu_busy_ns'],
  host_wait: ['host_wait_ns', 'idle_host_wait_ns', 'launch_wait_ns', 'host_launch_ns'],
  sync: ['sync_ns', 'idle_sync_ns', 'host_sync_ns'],
  data_loader: ['data_loader_ns', 'dataloader_ns', 'idle_data_loader_ns'],
  other: ['other_ns', 'idle_other_ns'],
};

function pick(obj, keys) {
  for (const k of keys) if (obj && isNum(obj[k])) return obj[k];
  return null;
}

/** Per step: {index, duration_ns, busy, host_wait, sync, data_loader, other} (ns; null parts unknown). */
export function stepBreakdown(report, stepsBody) {
  const steps = (report && report.summary && report.summary.steps) || [];
  const t = topic(report, 'idle', 'gaps', 'step_breakdown', 'steps');
  // the plugin's /steps route (exact per-step split of the step by metrics.idle), else the report's topic
  let per = (stepsBody && Array.isArray(stepsBody.steps) && stepsBody.steps.length && stepsBody.steps) || (t && (t.per_step || t.steps || t.by_step));
  // columnar form: {index: [...], busy_ns: [...], ...}
  if (per && !Array.isArray(per) && typeof per === 'object' && Array.isArray(per.index)) {
    per = per.index.map((_, i) => Object.fromEntries(Object.entries(per).map(([k, v]) => [k, Array.isArray(v) ? v[i] : null])));
  }
  const byIndex = new Map();
  if (Array.isArray(per)) for (const r of per) if (r && r.index !== undefined) byIndex.set(r.index, r);
  const rows = steps.map((s) => {
    const r = byIndex.get(s.index) || {};
    const out = { index: s.index, duration_ns: s.duration_ns };
    for (const [part, keys] of Object.entries(PART_KEYS)) out[part] = pick(r, keys);
    return out;
  });
  return { rows, hasParts: rows.some((r) => isNum(r.busy)) };
}

/** [{index, duration_ns, tokens}] when the trace tells tokens per step, else null. */
export function tokensPerStep(report) {
  const steps = (report && report.summary && report.summary.steps) || [];
  // metrics.steps.tokens: tokens per step aligned with the steps (docs/metrics.md), null when unknown
  const st = topic(report, 'steps');
  const t = st && Array.isArray(st.tokens) ? { per_step: st.tokens } : topic(report, 'tokens', 'throughput');
  if (!t) return null;
  let per = t.per_step || t.tokens_per_step || t.steps;
  let rows = null;
  if (Array.isArray(per) && per.length && typeof per[0] === 'object') {
    const m = new Map(per.map((r) => [r.index, r.tokens ?? r.tokens_per_step]));
    rows = steps.map((s) => ({ index: s.index, duration_ns: s.duration_ns, tokens: m.get(s.index) }));
  } else if (Array.isArray(per) && per.length === steps.length) {
    rows = steps.map((s, i) => ({ index: s.index, duration_ns: s.duration_ns, tokens: per[i] }));
  } else if (isNum(per)) {
    rows = steps.map((s) => ({ index: s.index, duration_ns: s.duration_ns, tokens: per }));
  }
  if (!rows) return null;
  rows = rows.filter((r) => isNum(r.tokens) && isNum(r.duration_ns));
  return rows.length ? rows : null;
}
