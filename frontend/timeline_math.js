// Pure helpers for the timeline canvas (tested with node --test).

/** Indices [a, b) of intervals (sorted by start) that may intersect [t0, t1]. */
export function visibleRange(starts, durs, t0, t1) {
  const n = starts.length;
  // first interval starting at or after t0, then step back over ones that started earlier but still run
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (starts[m] < t0) lo = m + 1; else hi = m;
  }
  let a = lo;
  // lanes are merged so intervals rarely overlap; walk back while the previous one reaches t0
  while (a > 0 && starts[a - 1] + durs[a - 1] >= t0) a--;
  lo = a;
  hi = n;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (starts[m] <= t1) lo = m + 1; else hi = m;
  }
  return [a, lo];
}

/** "Nice" tick positions (1/2/5 × 10^k) covering [t0, t1] with about `count` ticks. */
export function layoutTicks(t0, t1, count) {
  const spanNs = t1 - t0;
  if (!(spanNs > 0) || !(count > 0)) return [];
  const raw = spanNs / count;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return out;
}

/** A tick label precise enough that neighbouring ticks `step` ns apart read differently ("485.01 ms"). */
export function fmtTick(t, step) {
  const a = Math.abs(t);
  const [unit, scale] = a >= 1e9 ? ['s', 1e9] : a >= 1e6 ? ['ms', 1e6] : a >= 1e3 ? ['µs', 1e3] : ['ns', 1];
  const decimals = Math.min(6, Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9)));
  return `${(t / scale).toFixed(decimals)} ${unit}`;
}
