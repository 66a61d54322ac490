// The trace view: the whole profiled window of a run on a canvas, lanes served at the zoom's level of
// detail by /trace_view (the server merges to pixel resolution; the browser never holds the trace).
// Wheel zooms at the cursor (shift+wheel pans), drag pans, W/S zoom, A/D pan, double-click shows all;
// hover shows an event, click selects it (details + launch -> kernel flow); search by name; each finding's
// evidence ranges are drawn on the Findings row and "show in trace" zooms there and outlines the culprit op.
// The view fetches nothing itself: the tab hands it its data functions (`data`: window, event, search).
// Its state is one object (S below); each step of the view is a function of it.

import { h, clear, append } from '../dom.js';
import { formatValue } from '../format.js';
import { labelOf } from '../registry.js';
import { LABEL_W, colorOf, draw, layout, rowAt } from '../traceview/draw.js';
import { clampView, covers, fetchWindow, findingView, formatRange, hitInterval, panBy, parseRange, zoomAt } from '../traceview/view_math.js';

const ns = (v) => formatValue(v, 'ns');
const FETCH_DEBOUNCE_MS = 40;

function prepare(body) {
  // typed arrays and colours once per answer: drawing and hit tests then never touch JSON lists
  const catColor = body.categories.map((c) => colorOf(c));
  for (const lane of body.lanes) {
    if (lane.kind === 'memory') continue;
    lane.rows = lane.rows.map((R) => ({
      s: Float64Array.from(R.start_ns), d: Float64Array.from(R.dur_ns), ev: Int32Array.from(R.ev),
      n: Int32Array.from(R.n), name: Int32Array.from(R.name), cat: Uint8Array.from(R.cat),
      color: R.cat.map((c) => catColor[c]),
    }));
  }
  return body;
}

function buildDom(el) {
  const d = {
    search: h('input', { type: 'search', class: 'tv-search', placeholder: 'Search by name', 'aria-label': 'Search events by name' }),
    found: h('span', { class: 'muted tv-found' }),
    prev: h('button', { type: 'button', title: 'Previous match', text: '‹' }),
    next: h('button', { type: 'button', title: 'Next match', text: '›' }),
    allBtn: h('button', { type: 'button', title: 'Show the whole profiled window (double-click)', text: 'All' }),
    info: h('span', { class: 'muted tv-info' }),
    canvas: h('canvas', { class: 'tv-canvas', tabindex: '0', 'aria-label': 'Trace view: wheel or W/S to zoom, drag or A/D to pan' }),
    tip: h('div', { class: 'tv-tip', hidden: true }),
    details: h('div', { class: 'tv-details', hidden: true }),
    note: h('p', { class: 'muted tv-note' }),
  };
  d.box = h('div', { class: 'tv-box' }, d.canvas, d.tip);
  clear(el).append(h('div', { class: 'tl-toolbar' }, d.search, d.prev, d.next, d.found, d.allBtn,
    h('span', { class: 'muted hint', text: 'wheel/W S zoom · drag/A D pan' }), d.info), d.note, d.box, d.details);
  return d;
}

/** The view's state on a fresh selection (`sel` null: nothing shown yet). */
function fresh(S, sel, report, range) {
  Object.assign(S, {
    sel, data: null, lay: layout(null), selected: null, flow: [], expand: new Set(), collapsed: null, revealOnPaint: !!range,
    activeFinding: null, highlight: null, highlightIdx: -1, painted: false, findings: [], parts: [],
    reportFindings: (report && report.findings) || [],
    span: Math.max(1, (report && report.summary && report.summary.window_ns) || 1),
    view: range ? [range[0], range[1]] : [0, 1], unset: !range, matches: [], matchAt: -1,
  });
  if (range) S.span = Math.max(S.span, range[1]);
}

const width = (S) => Math.max(LABEL_W + 50, Math.floor(S.dom.box.clientWidth));
const plotW = (S) => width(S) - LABEL_W;
const tOf = (S, x) => S.view[0] + ((x - LABEL_W) / plotW(S)) * (S.view[1] - S.view[0]);
function theme() {
  const cs = getComputedStyle(document.documentElement);
  const v = (k, d) => cs.getPropertyValue(k).trim() || d;
  return { fg: v('--fg', '#222'), muted: v('--fg-muted', '#666'), grid: v('--grid', '#ddd'), bg: v('--card', '#fff') };
}

function frame(S) {
  S.dirty = false;
  const { canvas } = S.dom;
  const w = width(S);
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.floor(w * dpr) || canvas.height !== Math.floor(S.lay.height * dpr)) {
    canvas.width = Math.floor(w * dpr);
    canvas.height = Math.floor(S.lay.height * dpr);
    canvas.style.width = `${w}px`;
    canvas.style.height = `${S.lay.height}px`;
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const frameState = { ctx, w, view: S.view, data: S.data, lay: S.lay, theme: S.th || (S.th = theme()), findings: S.findings,
    activeFinding: S.activeFinding, highlightName: S.highlightIdx, selected: S.selected, flow: S.flow };
  const t0 = performance.now();
  draw(frameState);
  S.drawMs += performance.now() - t0;
  // what the last frame showed, for tests and the bench (never read by the tab itself)
  const ds = S.el.dataset;
  const hl = String(frameState.stats ? frameState.stats.highlighted : 0);
  if (ds.highlighted !== hl) ds.highlighted = hl;
  if (ds.highlight !== (S.highlight || '')) ds.highlight = S.highlight || '';
  S.frames += 1;
  ds.frames = String(S.frames);
  ds.drawMs = S.drawMs.toFixed(1);
}

function redraw(S) {
  if (S.dirty) return;
  S.dirty = true;
  requestAnimationFrame(() => frame(S));
}

function setView(S, v, { fetchNow = false } = {}) {
  S.unset = false;
  S.view = clampView(v[0], v[1], S.span);
  redraw(S);
  if (S.onRange) S.onRange(S.view);
  // throttled, not debounced: a long pan fetches as it goes, at most every FETCH_DEBOUNCE_MS
  if (fetchNow) { clearTimeout(S.fetchTimer); S.fetchTimer = null; load(S); return; }
  if (S.fetchTimer === null) S.fetchTimer = setTimeout(() => { S.fetchTimer = null; load(S); }, FETCH_DEBOUNCE_MS);
}

const expandKey = (S) => [...S.expand].sort().join(',');

async function load(S, force) {
  if (!S.sel) return;
  if (!force && S.data && covers(S.data, S.view, plotW(S)) && S.data.expandKey === expandKey(S)) return;
  const want = S.sel;
  const my = ++S.gen;
  const win = S.unset ? { px: plotW(S) } : fetchWindow(S.view, plotW(S), S.span);
  const res = await S.source.window(want, { ...win, expand: [...S.expand].join(',') || undefined });
  if (res.aborted || want !== S.sel || my !== S.gen) return;
  if (res.code === 202) { setTimeout(() => load(S, true), 1000); S.dom.note.textContent = 'The trace view is being prepared…'; return; }
  if (res.code !== 200 || !res.body || !res.body.lanes) {
    S.dom.note.textContent = (res.body && res.body.error) || 'No trace view for this run.';
    return;
  }
  applyAnswer(S, prepare(res.body));
}

function applyAnswer(S, body) {
  body.expandKey = expandKey(S);
  S.data = body;
  S.span = Math.max(1, body.span_ns);
  if (S.unset) { S.unset = false; S.view = [0, S.span]; }
  setFindingRanges(S, body.findings || []);
  S.parts = body.parts || [];
  if (S.onParts) S.onParts(S.parts.map((p) => p.part));
  S.highlightIdx = S.highlight ? body.names.indexOf(S.highlight) : -1;
  if (S.collapsed === null) {
    // host threads that launch no device work (data loader workers, XLA's compiler threads) start collapsed when
    // another thread does launch: the step's own threads and the GPU lanes come first on screen
    const host = body.lanes.filter((ln) => ln.kind === 'host' && Number.isFinite(ln.launches));
    S.collapsed = new Set(host.some((ln) => ln.launches > 0) ? host.filter((ln) => ln.launches === 0).map((ln) => ln.id) : []);
  }
  S.lay = layout(body, S.collapsed);
  S.dom.note.textContent = '';
  S.dom.info.textContent = `${formatValue(body.intervals, 'count')} intervals at ${ns(body.resolution_ns)} per pixel`;
  redraw(S);
  if (!S.painted) {
    S.painted = true;
    requestAnimationFrame(() => {
      performance.mark('llmdiag-traceview-paint');
      S.el.dataset.painted = '1';
      if (S.revealOnPaint) { S.revealOnPaint = false; reveal(S, true); }
    });
  }
  S.el.dataset.loads = String(Number(S.el.dataset.loads || 0) + 1);
}

/** Scroll the trace (its toolbar first) into view below the tab's sticky header; with ``always`` false, only when
 * it is out of sight (beside the findings it already is). */
function reveal(S, always) {
  const bar = document.querySelector('.topbar');
  const below = bar ? bar.getBoundingClientRect().bottom : 0;
  const top = S.el.getBoundingClientRect().top;
  if (always || top < below || top > window.innerHeight * 0.6) window.scrollBy({ top: top - below - 8, behavior: 'auto' });
}

function setFindingRanges(S, located) {
  const byId = new Map(located.map((f) => [f.id, f]));
  S.findings = S.reportFindings.map((f) => {
    const loc = f.ranges && f.ranges.length ? f : byId.get(f.id);
    return { id: f.id, severity: f.severity, title: f.title, ranges: (loc && loc.ranges) || [], culprit: (loc && loc.culprit) || null,
      source: f.source || null };
  }).filter((f) => f.ranges.length);
  if (S.onLocated) S.onLocated(S.findings.map((f) => f.id));
}

async function showFinding(S, id) {
  const f = S.findings.find((x) => x.id === id);
  if (!f) return false;
  S.activeFinding = id;
  return showRanges(S, f);
}

/** A model part's kernels (/trace_view `parts`): zoom to the run holding most of its time, outline and select the
 *  longest kernel there. */
async function showPart(S, name) {
  const p = S.parts.find((x) => x.part === name);
  if (!p) return false;
  S.activeFinding = null;
  S.el.dataset.part = name;
  return showRanges(S, { ranges: [p.focus], culprit: p.culprit, source: null });
}

/** Zoom to the longest of `f.ranges`, outline `f.culprit` and select its instance there. */
async function showRanges(S, f) {
  const target = findingView(f.ranges, S.span);
  S.highlight = f.culprit;
  S.highlightIdx = S.data && S.highlight ? S.data.names.indexOf(S.highlight) : -1;
  if (f.culprit) {
    // the culprit may sit deeper than the lanes show: expand its lane, and select the instance in the range
    const res = await S.source.search(S.sel, f.culprit);
    if (res.code === 200) {
      const hits = res.body.events.filter((e) => e.name === f.culprit);
      const inRange = hits.filter((e) => e.ts_ns < target.range[1] && e.ts_ns + e.dur_ns > target.range[0]);
      const pick = (inRange.length ? inRange : hits).sort((a, b) => b.dur_ns - a.dur_ns)[0];
      if (pick && pick.lane && pick.depth >= 6) S.expand.add(pick.lane);
      if (pick) selectEvent(S, pick.ev, false, f.source); // the finding's file:line beside the op it blames
    }
  }
  setView(S, target.view, { fetchNow: true });
  reveal(S, false);
  return true;
}

async function selectEvent(S, ev, move, source) {
  const res = await S.source.event(S.sel, ev);
  if (res.code !== 200) return;
  const e = res.body;
  S.selected = { ev: e.ev, lane: e.lane, depth: e.depth, ts_ns: e.ts_ns };
  S.flow = e.flow || [];
  if (move) setView(S, [e.ts_ns - e.dur_ns * 2 - 5000, e.ts_ns + e.dur_ns * 3 + 5000]);
  renderDetails(S, e, source);
  redraw(S);
}

function renderDetails(S, e, source) {
  const { details } = S.dom;
  const rows = [['Name', e.name], ['Category', `${e.category} (${e.kind})`], ['Start', `+${ns(e.ts_ns)}`], ['Duration', ns(e.dur_ns)],
    [e.tid !== undefined ? 'Thread' : 'Stream', e.tid !== undefined ? String(e.tid) : `GPU ${e.device} · stream ${e.stream}`]];
  if (source) rows.push([labelOf('findings[].source'), source]);
  if (e.shapes) rows.push(['Input shapes', e.shapes]);
  if (e.bytes !== null && e.bytes !== undefined) rows.push(['Bytes', formatValue(e.bytes, 'bytes')]);
  if (e.correlation !== null) rows.push(['Correlation', String(e.correlation)]);
  clear(details).append(h('table', { class: 'evidence' }, h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', { text: k }), h('td', { text: v }))))));
  if (e.flow && e.flow.length) {
    details.append(h('div', { class: 'tv-flow' }, h('b', { text: e.kind === 'kernel' || e.kind === 'memcpy' || e.kind === 'memset' ? 'Launched by' : 'Launches' }),
      e.flow.map((f) => h('button', { type: 'button', class: 'btn tv-flow-item', text: `${f.name} · ${ns(f.dur_ns)} · ${f.lane || ''}`,
        onclick: () => selectEvent(S, f.ev, true) }))));
  }
  details.hidden = false;
}

function hitAt(S, x, y) {
  const r = rowAt(S.lay, y);
  if (!r || x < LABEL_W) return { r };
  const t = tOf(S, x);
  const slop = ((S.view[1] - S.view[0]) / plotW(S)) * 2;
  if (r.kind === 'findings') return { r, finding: S.findings.find((ff) => ff.ranges.some(([a, b]) => a - slop <= t && t <= b + slop)) };
  if (r.kind !== 'row' || !r.row) return { r };
  return { r, i: hitInterval(r.row.s, r.row.d, t, slop) };
}

/** The hovered event's recorded details, once the pointer rests on it. */
function hoverDetails(S, evId) {
  S.hoverTimer = setTimeout(async () => {
    const { tip } = S.dom;
    const res = await S.source.event(S.sel, evId, 'trace_event_hover');
    if (res.code !== 200 || tip.hidden) return;
    const e = res.body;
    if (e.shapes) tip.append(h('div', { class: 'tip-full', text: `shapes: ${e.shapes}` }));
    if (e.bytes !== null && e.bytes !== undefined) tip.append(h('div', { text: `bytes: ${formatValue(e.bytes, 'bytes')}` }));
    if (e.correlation !== null) tip.append(h('div', { class: 'muted', text: `correlation ${e.correlation}${e.flow.length ? ` → ${e.flow[0].name}` : ''}` }));
  }, 200);
}

function showTip(S, ev) {
  const { canvas, tip, box } = S.dom;
  const rect = canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left;
  const y = ev.clientY - rect.top;
  const hit = hitAt(S, x, y);
  clearTimeout(S.hoverTimer);
  if (hit.finding) {
    clear(tip).append(h('b', { text: hit.finding.title || hit.finding.id }), h('div', { class: 'muted', text: 'click: show this evidence' }));
  } else if (hit.i !== undefined && hit.i >= 0) {
    const R = hit.r.row;
    const i = hit.i;
    append(clear(tip), [h('b', { class: 'tip-name', text: S.data.names[R.name[i]] }),
      h('div', { text: `${ns(R.d[i])} · ${S.data.categories[R.cat[i]]}` }),
      R.n[i] > 1 ? h('div', { class: 'muted', text: `${formatValue(R.n[i], 'count')} events merged at this zoom (longest named)` }) : null,
      h('div', { class: 'muted', text: `at +${ns(R.s[i])}` })]);
    if (R.n[i] === 1) hoverDetails(S, R.ev[i]);
  } else { tip.hidden = true; return; }
  tip.hidden = false;
  tip.style.left = `${Math.max(0, Math.min(x + 12, box.clientWidth - 380))}px`;
  tip.style.top = `${y + 14}px`;
}

/** A click (a press and release without a drag): open a collapsed lane, expand a deep one, show a finding, select an event. */
function clickAt(S, x, y) {
  const hit = hitAt(S, x, y);
  const lane = hit.r && hit.r.kind === 'row' ? hit.r.lane : null;
  if (x < LABEL_W && lane && S.collapsed && S.collapsed.has(lane.id)) {
    S.collapsed.delete(lane.id); // a collapsed lane opens to its rows
    S.lay = layout(S.data, S.collapsed);
    redraw(S);
  } else if (x < LABEL_W && lane && lane.depth > 1) {
    if (S.expand.has(lane.id)) S.expand.delete(lane.id); else S.expand.add(lane.id);
    load(S, true);
  } else if (hit.finding) {
    showFinding(S, hit.finding.id);
  } else if (hit.i !== undefined && hit.i >= 0) {
    selectEvent(S, hit.r.row.ev[hit.i], false);
  }
}

function bindPointer(S) {
  const { canvas, tip } = S.dom;
  const xy = (ev) => { const rect = canvas.getBoundingClientRect(); return [ev.clientX - rect.left, ev.clientY - rect.top]; };
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const [x] = xy(ev);
    const w = S.view[1] - S.view[0];
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) setView(S, panBy(S.view, ((ev.shiftKey ? ev.deltaY : ev.deltaX) / plotW(S)) * w, S.span));
    else setView(S, zoomAt(S.view, x < LABEL_W ? (S.view[0] + S.view[1]) / 2 : tOf(S, x), ev.deltaY > 0 ? 1.2 : 1 / 1.2, S.span));
  }, { passive: false });
  canvas.addEventListener('mousedown', (ev) => { S.drag = { x: ev.clientX, y: ev.clientY, view: S.view, moved: false }; canvas.focus(); });
  window.addEventListener('mouseup', (ev) => {
    if (!S.drag) return;
    const d = S.drag;
    S.drag = null;
    canvas.classList.remove('dragging');
    if (!d.moved) clickAt(S, ...xy(ev));
  });
  canvas.addEventListener('mousemove', (ev) => {
    if (!S.drag) { showTip(S, ev); return; }
    const dx = ev.clientX - S.drag.x;
    if (Math.abs(dx) > 3) { S.drag.moved = true; canvas.classList.add('dragging'); }
    if (S.drag.moved) {
      const dt = (dx / plotW(S)) * (S.drag.view[1] - S.drag.view[0]);
      setView(S, [S.drag.view[0] - dt, S.drag.view[1] - dt]);
      tip.hidden = true;
    }
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; clearTimeout(S.hoverTimer); });
  canvas.addEventListener('dblclick', () => setView(S, [0, S.span]));
}

function bindKeys(S) {
  S.dom.canvas.addEventListener('keydown', (ev) => {
    const v = S.view;
    const w = v[1] - v[0];
    const c = (v[0] + v[1]) / 2;
    const key = ev.key.toLowerCase();
    if (key === 'w') setView(S, zoomAt(v, c, 0.8, S.span));
    else if (key === 's') setView(S, zoomAt(v, c, 1.25, S.span));
    else if (key === 'a') setView(S, panBy(v, -0.15 * w, S.span));
    else if (key === 'd') setView(S, panBy(v, 0.15 * w, S.span));
    else return;
    ev.preventDefault();
  });
  S.dom.allBtn.addEventListener('click', () => setView(S, [0, S.span]));
}

async function runSearch(S) {
  const q = S.dom.search.value.trim();
  if (!q || !S.sel) return;
  const res = await S.source.search(S.sel, q);
  if (res.code !== 200) { S.dom.found.textContent = (res.body && res.body.error) || 'search failed'; return; }
  S.matches = res.body.events;
  S.matchAt = -1;
  S.dom.found.textContent = `${formatValue(res.body.count, 'count')} events${res.body.count > S.matches.length ? ` (first ${S.matches.length})` : ''}`;
  stepMatch(S, 1);
}

function stepMatch(S, dir) {
  if (!S.matches.length) return;
  S.matchAt = (S.matchAt + dir + S.matches.length) % S.matches.length;
  const m = S.matches[S.matchAt];
  S.highlight = m.name;
  S.highlightIdx = S.data ? S.data.names.indexOf(S.highlight) : -1;
  if (m.lane && m.depth >= 6) S.expand.add(m.lane);
  if (m.lane && S.collapsed) S.collapsed.delete(m.lane);
  selectEvent(S, m.ev, true);
  reveal(S, false);
}

/** source: {window(sel, params), event(sel, ev, kind), search(sel, q)}: the tab's data functions (api.js). */
export function mountTraceCanvas(el, { onRange, onLocated, onParts, source } = {}) {
  const S = { el, dom: buildDom(el), onRange, onLocated, onParts, source, th: null, dirty: false, drag: null, gen: 0, frames: 0, drawMs: 0,
    fetchTimer: null, hoverTimer: null };
  fresh(S, null, null, null);
  bindPointer(S);
  bindKeys(S);
  S.dom.search.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') runSearch(S); });
  S.dom.next.addEventListener('click', () => stepMatch(S, 1));
  S.dom.prev.addEventListener('click', () => stepMatch(S, -1));
  const ro = new ResizeObserver(() => redraw(S));
  ro.observe(S.dom.box);
  return {
    /** A run to show (its report's findings, a range from the URL or null for the whole window). */
    show(sel, report, range) {
      fresh(S, sel, report, range);
      S.dom.details.hidden = true;
      delete el.dataset.painted;
      S.dom.note.textContent = 'Loading the trace view…';
      load(S, true);
    },
    showFinding: (id) => showFinding(S, id),
    showPart: (name) => showPart(S, name),
    hasFinding: (id) => S.findings.some((f) => f.id === id),
    redraw: () => { S.th = null; redraw(S); },
    get view() { return S.view; },
    destroy() { ro.disconnect(); clear(el); },
  };
}

/** The trace view as a view of the tab's state: each new report opens its trace at the URL's range, if any. */
export function traceCanvasView(el, tab) {
  const view = mountTraceCanvas(el, { onRange: (v) => tab.setRange(formatRange(v)), onLocated: (ids) => tab.located(ids),
    onParts: (names) => tab.partsLocated(names), source: tab.trace });
  let shown = null;
  return {
    render(s) {
      const r = s.report.status === 'ok' ? s.report.body : null;
      if (r && r !== shown) view.show(s.sel, r, parseRange(s.range));
      shown = r;
    },
    showFinding: view.showFinding,
    showPart: view.showPart,
    redraw: view.redraw,
    destroy: view.destroy,
  };
}
