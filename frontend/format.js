// Pure formatting helpers (no DOM): tested with `node --test frontend/`.

const DASH = '—';

export function isNum(x) {
  return typeof x === 'number' && Number.isFinite(x);
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
  if (p !== 0 && Math.abs(p) < 0.1) return `<0.1%`;
  return `${p.toFixed(digits)}%`;
}

export function fmtBytes(b) {
  if (!isNum(b)) return DASH;
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return i === 0 ? `${Math.round(v)} B` : `${sig(v)} ${units[i]}`;
}

export function fmtCount(x) {
  if (!isNum(x)) return DASH;
  if (Math.abs(x) >= 1e6) return `${sig(x / 1e6)} M`;
  if (Math.abs(x) >= 1e4) return `${sig(x / 1e3)} k`;
  if (Number.isInteger(x)) return String(x);
  return sig(x);
}

export function fmtRate(x, unit = '/s') {
  if (!isNum(x)) return DASH;
  return `${fmtCount(x)}${unit}`;
}

/** 3 significant digits, no trailing zeros: 12.30 -> "12.3", 1234 -> "1234". */
export function sig(x) {
  if (!isNum(x)) return DASH;
  const a = Math.abs(x);
  if (a >= 100) return String(Math.round(x));
  if (a >= 10) return String(Number(x.toFixed(1)));
  return String(Number(x.toFixed(2)));
}

/** A value with a unit suffix in its key (_ns, _bytes, _share, _per_s) formatted for people. */
export function fmtByKey(key, value) {
  if (value === null || value === undefined) return DASH;
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (Array.isArray(value)) return value.map((v) => fmtByKey(key.replace(/s$/, ''), v)).join(', ');
  if (typeof value === 'object') return JSON.stringify(value);
  if (typeof value === 'string') return value;
  if (/_ns$/.test(key)) return fmtDuration(value);
  if (/_bytes$/.test(key)) return fmtBytes(value);
  if (/_(share|ratio_share)$/.test(key)) return fmtShare(value);
  if (/_bytes_per_s$/.test(key)) return `${fmtBytes(value)}/s`;
  if (/_per_s$/.test(key)) return fmtRate(value);
  return fmtCount(value);
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

/** The saving line of a finding: "saves ~12% of the step (3.1 ms)"; tiny shares read "<0.1%". */
export function fmtSaving(saving) {
  if (!saving || !(isNum(saving.share) || isNum(saving.ns))) return 'saving not estimable';
  const sh = fmtShare(saving.share, 0);
  const share = sh.startsWith('<') ? sh : `~${sh}`;
  return `saves ${share} of the step${isNum(saving.ns) ? ` (${fmtDuration(saving.ns)})` : ''}`;
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

const SEVERITY = { high: 0, medium: 1, low: 2 };
export function severityRank(s) {
  return s in SEVERITY ? SEVERITY[s] : 3;
}

/** Findings as the engine ranked them (by saving); severity breaks ties only when savings are equal. */
export function rankFindings(findings) {
  const saving = (f) => (f && f.saving && isNum(f.saving.ns) ? f.saving.ns : -1);
  return [...(findings || [])]
    .map((f, i) => ({ f, i }))
    .sort((a, b) => saving(b.f) - saving(a.f) || severityRank(a.f.severity) - severityRank(b.f.severity) || a.i - b.i)
    .map((x) => x.f);
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
  const words = { pending: 'queued', analysing: 'analysing…', error: 'error' };
  return `${name} (${words[status] || status})`;
}
