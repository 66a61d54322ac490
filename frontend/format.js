// Pure formatting helpers (no DOM): tested with `node --test frontend/`.
//
// One formatter for every number the tab shows: formatValue(value, unit), where unit is one word of the
// metric registry's vocabulary (UNITS below; registry.js gives each report key its unit). Conventions,
// the same everywhere: durations in ns / µs / ms / s ("µs", never "us"); bytes in binary units (KiB, MiB,
// GiB: what the finding summaries print); shares as percentages; ids and indices in full, never "104 k";
// an unknown value (null, NaN) as "—".

const DASH = '—';

/** The registry's unit vocabulary (tb_llmdiag/metrics/registry.py UNITS; docs/metrics.md). */
export const UNITS = ['ns', 'bytes', 'bytes_per_s', 'share', 'count', 'count_per_step', 'per_s', 'flop', 'flop_per_s',
  'tflop_per_s', 'ratio', 'id', 'index', 'text', 'flag'];

/** How many items of a list formatValue writes before "… (N more)". */
const LIST_MAX = 8;

export function isNum(x) {
  return typeof x === 'number' && Number.isFinite(x);
}

/**
 * value in `unit` as people read it. Lists item by item; booleans yes/no; strings as they are; an unknown
 * or missing unit: the number in full (3 significant digits for fractions), never abbreviated.
 */
export function formatValue(value, unit) {
  if (value === null || value === undefined) return DASH;
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (Array.isArray(value)) {
    if (!value.length) return 'none';
    const head = value.slice(0, LIST_MAX).map((v) => formatValue(v, unit)).join(', ');
    return value.length > LIST_MAX ? `${head}, … (${value.length - LIST_MAX} more)` : head;
  }
  if (typeof value === 'string') return value;
  if (typeof value === 'object') return JSON.stringify(value);
  if (!isNum(value)) return DASH;
  switch (unit) {
    case 'ns': return fmtDuration(value);
    case 'bytes': return fmtBytes(value);
    case 'bytes_per_s': return `${fmtBytes(value)}/s`;
    case 'share': return fmtShare(value);
    case 'count': case 'count_per_step': return fmtCount(value);
    case 'per_s': return `${fmtCount(value)}/s`;
    case 'flop': return fmtFlop(value);
    case 'flop_per_s': return `${fmtFlop(value)}/s`;
    case 'tflop_per_s': return `${fmtFlop(value * 1e12)}/s`;
    case 'ratio': return sig(value);
    case 'id': case 'index': return fmtWhole(value);
    default: return fmtWhole(value);
  }
}

/** An interval [lo, hi] in `unit`: "40.1 % – 52.3 %" (tb_llmdiag/units.py fmt_interval); "—" for anything but a pair. */
export function formatInterval(value, unit) {
  if (!Array.isArray(value) || value.length !== 2) return DASH;
  return `${formatValue(value[0], unit)} – ${formatValue(value[1], unit)}`;
}

/** 1234567 -> "1.23 ms"; picks ns/µs/ms/s so that 3 significant digits show. */
export function fmtDuration(ns) {
  if (!isNum(ns)) return DASH;
  const a = Math.abs(ns);
  if (a < 1e3) return `${Math.round(ns)} ns`;
  if (a < 1e6) return `${sig(ns / 1e3)} µs`;
  if (a < 1e9) return `${sig(ns / 1e6)} ms`;
  return `${sig(ns / 1e9)} s`;
}

/** 0.1234 -> "12.3%" (shares are fractions 0..1). */
export function fmtShare(x, digits = 1) {
  if (!isNum(x)) return DASH;
  const p = x * 100;
  if (p !== 0 && Math.abs(p) < 0.1) return '<0.1 %';
  return `${p.toFixed(digits)} %`;
}

/** Binary units, one decimal past bytes: 512 B, 121.9 KiB, 17.6 GiB (as tb_llmdiag/units.py fmt_bytes). */
export function fmtBytes(b) {
  if (!isNum(b)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** Floating-point operations with SI prefixes: 3.2e14 -> "320 TFLOP". */
export function fmtFlop(x) {
  if (!isNum(x)) return DASH;
  const prefixes = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
  let v = x;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < prefixes.length - 1) { v /= 1000; i++; }
  return `${sig(v)} ${prefixes[i]}FLOP`;
}

/** Counts: in full below 10 000, then "14.8 k", "2.5 M"; fractions to 3 significant digits. */
export function fmtCount(x) {
  if (!isNum(x)) return DASH;
  if (Math.abs(x) >= 1e6) return `${sig(x / 1e6)} M`;
  if (Math.abs(x) >= 1e4) return `${sig(x / 1e3)} k`;
  if (Number.isInteger(x)) return String(x);
  return sig(x);
}

/** Ids, indices and numbers of unknown unit: every digit of an integer (103869 stays "103869"). */
export function fmtWhole(x) {
  if (!isNum(x)) return DASH;
  return Number.isInteger(x) ? String(x) : sig(x);
}

/** 3 significant digits, no trailing zeros: 12.30 -> "12.3", 1234 -> "1234". */
export function sig(x) {
  if (!isNum(x)) return DASH;
  const a = Math.abs(x);
  if (a >= 100) return String(Math.round(x));
  if (a >= 10) return String(Number(x.toFixed(1)));
  if (a >= 0.01 || a === 0) return String(Number(x.toFixed(2)));
  return String(Number(x.toPrecision(2))); // 0.00051 stays "0.00051", not "0"
}

/** "pageable_time_ns" -> "pageable time". */
export function humanKey(key) {
  return String(key)
    .replace(/_ns$/, '')
    .replace(/_/g, ' ');
}

/** Labels for an evidence dict: humanKey, with " time" added to a _ns key whose label another key has. */
export function evidenceLabels(keys) {
  const base = keys.map(humanKey);
  return keys.map((k, i) => (/_ns$/.test(k) && base.some((b, j) => j !== i && b === base[i]) ? `${base[i]} time` : base[i]));
}

const BASIS_WORDS = { median_step: 'median step', mean_step: 'mean step', window: 'profiled window' };

// the words after a step on the step without the profiler's own cost (saving.step_basis), as whatif_text.py BARE_WORDS
const bare = (s) => (s.step_basis === 'without_profiler' ? ' without the profiler' : '');

// "; profiled: 18 ms of 90 ms": the same saving on the profiled step (whatif_text.py _profiled_words)
function profiledWords(s) {
  const p = s.profiled;
  if (!bare(s) || !p || !isNum(p.ns) || !isNum(p.step_ns)) return '';
  return `; profiled: ${fmtDuration(p.ns)} of ${fmtDuration(p.step_ns)}`;
}

/**
 * The saving of a finding in words, the text tb_llmdiag/findings/whatif_text.py saving_text writes (the CLI prints
 * it; tests/test_saving_text.py holds the two to the same text): "saves at most 12.1 ms of the 32.1 ms median
 * step (37.7 %)", on the step without the profiler "... of the 60 ms median step without the profiler (20.2 %;
 * profiled: 18 ms of 90 ms)": time first, the number findings are ranked by.
 */
export function fmtSaving(saving) {
  if (!saving || !isNum(saving.share)) return 'saving not estimable';
  const share = fmtShare(saving.share);
  if (saving.basis === 'window' || !isNum(saving.ns) || !isNum(saving.step_ns)) return `saves at most ${share} of the profiled window`;
  const step = `${fmtDuration(saving.step_ns)} ${BASIS_WORDS[saving.basis] || 'step'}${bare(saving)}`;
  if (saving.ns <= 0) return `saves nothing of the ${step} once the findings above it are fixed${profiledWords(saving)}`;
  return `saves at most ${fmtDuration(saving.ns)} of the ${step} (${share}${profiledWords(saving)})`;
}

/** A finding's own what-if in words (whatif_text.py what_if_text): "median step 32.1 ms → at most 20 ms (−37.7 %)". */
export function fmtWhatIf(saving) {
  if (!saving || !isNum(saving.step_ns) || !isNum(saving.step_ns_if_fixed)) return '';
  return `${BASIS_WORDS[saving.basis] || 'step'}${bare(saving)} ${fmtDuration(saving.step_ns)} → at most ${fmtDuration(saving.step_ns_if_fixed)} (−${fmtShare(saving.share)})`;
}

/**
 * A readable short form of a (demangled C++) kernel name for labels: drops "void ", the return type,
 * template arguments, the parameter list and namespaces ("void at::native::vectorized_elementwise_kernel<4,
 * ...>(int, ...)" -> "vectorized_elementwise_kernel"). Names without C++ decoration come back as they are.
 */
export function shortKernelName(name) {
  let s = String(name || '');
  if (!/<|::/.test(s)) return s;
  s = s.replace(/^void\s+/, '');
  // strip balanced <...> and (...) groups, innermost first
  let prev;
  do { prev = s; s = s.replace(/<[^<>]*>/g, '').replace(/\([^()]*\)/g, ''); } while (s !== prev);
  s = s.trim().split(/\s+/).pop() || s; // a remaining return type ("float foo")
  const parts = s.split('::').filter(Boolean);
  const last = parts.length ? parts[parts.length - 1] : s;
  // an anonymous-namespace or lambda tail is not a name: keep the one before it
  return (/^\{?lambda|^\(anonymous/.test(last) && parts.length > 1 ? parts[parts.length - 2] : last) || String(name);
}

export function median(xs) {
  const v = xs.filter(isNum).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Short label of a (run, worker, span) for selectors; statuses other than ready are shown. */
export function statusLabel(name, status) {
  if (!status || status === 'ready') return name;
  const words = { pending: 'queued', analysing: 'analysing…', writing: 'still being written…', error: 'error' };
  return `${name} (${words[status] || status})`;
}
