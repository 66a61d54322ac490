// What the first screen says, as data (pure, tested with node --test): the top finding of the run, or of the
// job when the selection is a rank of a job with a finding; its cause in one sentence; its saving; how far the
// capture can be trusted, as one line or, when it could change the verdict, a banner.

import { formatValue, fmtSaving, fmtWhatIf, fmtShare, isNum } from './format.js';

/** The first sentence of a finding's summary: up to the first "; " or ". " outside parentheses. */
export function firstSentence(text) {
  const s = String(text || '').trim();
  let depth = 0;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s[i];
    if (c === '(') depth += 1;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (depth === 0 && s[i + 1] === ' ' && (c === ';' || (c === '.' && !/\d/.test(s[i - 1] || '')))) return `${s.slice(0, i)}.`;
  }
  return s;
}

const cap = (t) => (t ? t[0].toUpperCase() + t.slice(1) : t);

/** The job's top finding as the verdict: {title, cause, saving, whatIf, fixText, id, job: true}. */
function jobVerdict(f) {
  const wi = f.what_if || {};
  const saving = isNum(wi.saving_ns) && isNum(wi.step_ns)
    ? `Saves at most ${formatValue(wi.saving_ns, 'ns')} of the ${formatValue(wi.step_ns, 'ns')} job step (${fmtShare(wi.saving_share)})`
    : null;
  const whatIf = isNum(wi.step_ns) && isNum(wi.step_after_ns) ? `job step ${formatValue(wi.step_ns, 'ns')} → at most ${formatValue(wi.step_after_ns, 'ns')}` : '';
  return { id: f.id, job: true, severity: 'high', title: f.title || f.id, cause: firstSentence(f.summary), saving, whatIf, fixText: f.fix || null, fix: null };
}

/** The verdict of a report (and its job's answer, or null): the top finding's title, cause, saving and fix. */
export function verdictOf(report, job) {
  const jf = job && Array.isArray(job.findings) ? job.findings[0] : null;
  if (jf) return jobVerdict(jf);
  const f = report && Array.isArray(report.findings) ? report.findings[0] : null;
  if (!f) return null;
  const wi = report.what_if && report.what_if.finding_id === f.id ? report.what_if : null;
  const tokens = wi && isNum(wi.tokens_per_s) && isNum(wi.tokens_per_s_if_fixed)
    ? `${formatValue(wi.tokens_per_s, 'per_s')} → at most ${formatValue(wi.tokens_per_s_if_fixed, 'per_s')} tokens` : '';
  return {
    id: f.id, job: false, severity: f.severity || 'low', title: f.title || f.id, cause: firstSentence(f.summary),
    saving: f.saving ? cap(fmtSaving(f.saving)) : null, whatIf: [fmtWhatIf(f.saving), tokens].filter(Boolean).join(' · '),
    fixText: f.fix && f.fix.text ? f.fix.text : null, fix: f.fix || null, caveat: f.caveat || null,
  };
}

/**
 * The capture in one line: the profiler's own cost and what was lost. {text, banner}: a banner when it could
 * change the verdict (the top finding carries the profiler-cost caveat, or a capture problem is a warning).
 */
export function trustLine(capture, verdict, unitOf = () => null) {
  if (!capture) return null;
  const parts = [];
  if (isNum(capture.profiler_overhead_share)) {
    const how = capture.overhead_basis === 'model' ? 'estimated' : capture.overhead_basis === 'unprofiled_steps' ? 'measured' : '';
    parts.push(`the profiler's own cost is ${formatValue(capture.profiler_overhead_share, unitOf('capture.profiler_overhead_share') || 'share')} of the profiled step${how ? ` (${how})` : ''}`);
  } else parts.push("the profiler's own cost is not estimated for this capture");
  const problems = Array.isArray(capture.problems) ? capture.problems : [];
  const warnings = problems.filter((p) => p.severity === 'warning');
  parts.push(warnings.length ? `${warnings.length} problem${warnings.length > 1 ? 's' : ''} in what was recorded` : 'nothing lost or unmatched');
  const caveat = verdict && !verdict.job ? verdict.caveat : null;
  if (caveat) return { banner: true, text: caveat };
  if (warnings.length) return { banner: true, text: `Capture: ${parts.join('; ')}: ${warnings[0].text}` };
  return { banner: false, text: `Capture: ${parts.join('; ')}.` };
}
