// Pure helpers of the trace view (no DOM; tested with node --test): the visible range, zoom, pan, the
// range kept in the URL, which window to ask the server for, where a finding's evidence is.

export const MIN_SPAN_NS = 1000; // 1 µs across the whole plot at most zoom

/** [v0, v1] kept inside [0, span] and at least MIN_SPAN_NS wide. */
export function clampView(v0, v1, span) {
  const total = Math.max(1, span);
  const w = Math.min(Math.max(v1 - v0, Math.min(MIN_SPAN_NS, total)), total);
  const a = Math.max(0, Math.min(v0, total - w));
  return [a, a + w];
}

/** Zoom by `factor` (< 1 zooms in) keeping time `t` under the cursor. */
export function zoomAt(view, t, factor, span) {
  const [v0, v1] = view;
  return clampView(t - (t - v0) * factor, t + (v1 - t) * factor, span);
}

/** Pan by `dt` ns (positive moves later in time). */
export function panBy(view, dt, span) {
  return clampView(view[0] + dt, view[1] + dt, span);
}

/** The URL form of a range: "start-end" in integer ns. */
export function formatRange(view) {
  return `${Math.round(view[0])}-${Math.round(view[1])}`;
}

/** A range from the URL, or null when it is not "a-b" with 0 <= a < b. */
export function parseRange(text) {
  const m = /^(\d{1,18})-(\d{1,18})$/.exec(String(text || ''));
  if (!m) return null;
  const a = Number(m[1]);
  const b = Number(m[2]);
  return a < b ? [a, b] : null;
}

/**
 * Whether the loaded answer can draw `view` at `px` plot pixels: the view lies inside what was loaded and the
 * loaded resolution is no coarser than 1.5 x and no finer than 1/3 x what the view needs.
 */
export function covers(loaded, view, px) {
  if (!loaded) return false;
  const need = (view[1] - view[0]) / Math.max(1, px);
  if (view[0] < loaded.start_ns || view[1] > loaded.end_ns) return false;
  const res = Math.max(1, (loaded.end_ns - loaded.start_ns) / Math.max(1, loaded.px));
  return res <= need * 1.5 && res >= need / 3;
}

/** What to ask for: the view and one view's width either side (so panning draws from memory), at the view's resolution. */
export function fetchWindow(view, px, span) {
  const w = view[1] - view[0];
  const a = Math.max(0, Math.floor(view[0] - w));
  const b = Math.min(Math.max(span, view[1]), Math.ceil(view[1] + w));
  const res = w / Math.max(1, px);
  return { start_ns: a, end_ns: b, px: Math.max(1, Math.min(16384, Math.round((b - a) / res))) };
}

/** The view that shows a finding's evidence: its longest range with a fifth of its length either side. */
export function findingView(ranges, span) {
  if (!Array.isArray(ranges) || !ranges.length) return null;
  let best = ranges[0];
  for (const r of ranges) if (r[1] - r[0] > best[1] - best[0]) best = r;
  const pad = Math.max((best[1] - best[0]) * 0.2, 5000);
  return { view: clampView(best[0] - pad, best[1] + pad, span), range: best };
}

/** Index of the first element of the sorted array `a` greater than `x` (binary search). */
export function upperBound(a, x) {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (a[m] <= x) lo = m + 1; else hi = m;
  }
  return lo;
}

/** The interval of a row (starts sorted, durs) under time t, with `slop` ns of tolerance, or -1. */
export function hitInterval(starts, durs, t, slop) {
  let i = upperBound(starts, t + slop) - 1;
  let best = -1;
  let bestDist = Infinity;
  for (let k = 0; i >= 0 && k < 8; i--, k++) {
    const s = starts[i];
    const e = s + durs[i];
    const d = t < s ? s - t : t > e ? t - e : 0;
    if (d <= slop && d < bestDist) { best = i; bestDist = d; }
    if (e < t - slop && k > 2) break;
  }
  return best;
}
