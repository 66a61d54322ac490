// The trace view: the whole profiled window of a run on a canvas, lanes served at the zoom's level of
// detail by /trace_view (the server merges to pixel resolution; the browser never holds the trace).
// Wheel zooms at the cursor (shift+wheel pans), drag pans, W/S zoom, A/D pan, double-click shows all;
// hover shows an event, click selects it (details + launch -> kernel flow); search by name; each finding's
// evidence ranges are drawn on the Findings row and "show in trace" zooms there and outlines the culprit op.

import { h, clear, append } from '../dom.js';
import * as api from '../api.js';
import { formatValue } from '../format.js';
import { labelOf } from '../registry.js';
import { LABEL_W, colorOf, draw, layout, rowAt } from '../traceview/draw.js';
import { clampView, covers, fetchWindow, findingView, hitInterval, panBy, zoomAt } from '../traceview/view_math.js';

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

export function mountTraceCanvas(el, { onRange } = {}) {
  const search = h('input', { type: 'search', class: 'tv-search', placeholder: 'Search by name', 'aria-label': 'Search events by name' });
  const found = h('span', { class: 'muted tv-found' });
  const prev = h('button', { type: 'button', title: 'Previous match', text: '‹' });
  const next = h('button', { type: 'button', title: 'Next match', text: '›' });
  const allBtn = h('button', { type: 'button', title: 'Show the whole profiled window (double-click)', text: 'All' });
  const info = h('span', { class: 'muted tv-info' });
  const canvas = h('canvas', { class: 'tv-canvas', tabindex: '0', 'aria-label': 'Trace view: wheel or W/S to zoom, drag or A/D to pan' });
  const tip = h('div', { class: 'tv-tip', hidden: true });
  const box = h('div', { class: 'tv-box' }, canvas, tip);
  const details = h('div', { class: 'tv-details', hidden: true });
  const note = h('p', { class: 'muted tv-note' });
  clear(el).append(h('div', { class: 'tl-toolbar' }, search, prev, next, found, allBtn,
    h('span', { class: 'muted hint', text: 'wheel/W S zoom · drag/A D pan' }), info), note, box, details);

  let sel = null;
  let span = 1;
  let view = [0, 1];
  let data = null; // the prepared answer drawn now
  let lay = layout(null);
  let findings = []; // [{id, severity, title, ranges, culprit}]
  let activeFinding = null;
  let highlight = null; // a name to outline (a finding's culprit, a search)
  let highlightIdx = -1;
  let selected = null; // {ev, lane, depth, ts_ns}
  let flow = [];
  let expand = new Set();
  let collapsed = null; // host lanes shown as one row: those with no launch call (no step work), set at the first answer
  let revealOnPaint = false; // a deep link's range: bring the trace into view once drawn
  let matches = [];
  let matchAt = -1;
  let fetchTimer = null;
  let dirty = false;
  let drag = null;
  let painted = false;
  let gen = 0;
  let frames = 0;
  let drawMs = 0; // time spent drawing, all frames (the bench reads it)
  let unset = true; // no range yet: the first answer is the whole window

  const width = () => Math.max(LABEL_W + 50, Math.floor(box.clientWidth));
  const plotW = () => width() - LABEL_W;
  const tOf = (x) => view[0] + ((x - LABEL_W) / plotW()) * (view[1] - view[0]);
  const theme = () => {
    const cs = getComputedStyle(document.documentElement);
    const v = (k, d) => cs.getPropertyValue(k).trim() || d;
    return { fg: v('--fg', '#222'), muted: v('--fg-muted', '#666'), grid: v('--grid', '#ddd'), bg: v('--card', '#fff') };
  };
  let th = null;

  function frame() {
    dirty = false;
    const w = width();
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.floor(w * dpr) || canvas.height !== Math.floor(lay.height * dpr)) {
      canvas.width = Math.floor(w * dpr);
      canvas.height = Math.floor(lay.height * dpr);
      canvas.style.width = `${w}px`;
      canvas.style.height = `${lay.height}px`;
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const frameState = { ctx, w, view, data, lay, theme: th || (th = theme()), findings, activeFinding, highlightName: highlightIdx,
      selected, flow };
    const t0 = performance.now();
    draw(frameState);
    drawMs += performance.now() - t0;
    // what the last frame showed, for tests and the bench (never read by the tab itself)
    const hl = String(frameState.stats ? frameState.stats.highlighted : 0);
    if (el.dataset.highlighted !== hl) el.dataset.highlighted = hl;
    if (el.dataset.highlight !== (highlight || '')) el.dataset.highlight = highlight || '';
    frames += 1;
    el.dataset.frames = String(frames);
    el.dataset.drawMs = drawMs.toFixed(1);
  }
  function redraw() {
    if (dirty) return;
    dirty = true;
    requestAnimationFrame(frame);
  }

  function setView(v, { fetchNow = false } = {}) {
    unset = false;
    view = clampView(v[0], v[1], span);
    redraw();
    if (onRange) onRange(view);
    // throttled, not debounced: a long pan fetches as it goes, at most every FETCH_DEBOUNCE_MS
    if (fetchNow) { clearTimeout(fetchTimer); fetchTimer = null; load(); return; }
    if (fetchTimer === null) fetchTimer = setTimeout(() => { fetchTimer = null; load(); }, FETCH_DEBOUNCE_MS);
  }

  async function load(force) {
    if (!sel) return;
    if (!force && data && covers(data, view, plotW()) && data.expandKey === [...expand].sort().join(',')) return;
    const want = sel;
    const my = ++gen;
    const win = unset ? { px: plotW() } : fetchWindow(view, plotW(), span);
    const res = await api.traceView(want, { ...win, expand: [...expand].join(',') || undefined });
    if (res.aborted || want !== sel || my !== gen) return;
    if (res.code === 202) { setTimeout(() => load(true), 1000); note.textContent = 'The trace view is being prepared…'; return; }
    if (res.code !== 200 || !res.body || !res.body.lanes) {
      note.textContent = (res.body && res.body.error) || 'No trace view for this run.';
      return;
    }
    const body = prepare(res.body);
    body.expandKey = [...expand].sort().join(',');
    data = body;
    span = Math.max(1, body.span_ns);
    if (unset) { unset = false; view = [0, span]; }
    setFindingRanges(body.findings || []);
    highlightIdx = highlight ? data.names.indexOf(highlight) : -1;
    if (collapsed === null) {
      // host threads that launch no device work (data loader workers, XLA's compiler threads) start collapsed when
      // another thread does launch: the step's own threads and the GPU lanes come first on screen
      const host = data.lanes.filter((ln) => ln.kind === 'host' && Number.isFinite(ln.launches));
      collapsed = new Set(host.some((ln) => ln.launches > 0) ? host.filter((ln) => ln.launches === 0).map((ln) => ln.id) : []);
    }
    lay = layout(data, collapsed);
    note.textContent = '';
    info.textContent = `${formatValue(body.intervals, 'count')} intervals at ${ns(body.resolution_ns)} per pixel`;
    redraw();
    if (!painted) {
      painted = true;
      requestAnimationFrame(() => {
        performance.mark('llmdiag-traceview-paint');
        el.dataset.painted = '1';
        if (revealOnPaint) { revealOnPaint = false; reveal(true); }
      });
    }
    el.dataset.loads = String(Number(el.dataset.loads || 0) + 1);
  }

  /** Scroll the trace (its toolbar first) into view below the tab's sticky header; with ``always`` false, only when
   * it is out of sight (beside the findings it already is). */
  function reveal(always) {
    const bar = document.querySelector('.topbar');
    const below = bar ? bar.getBoundingClientRect().bottom : 0;
    const top = el.getBoundingClientRect().top;
    if (always || top < below || top > window.innerHeight * 0.6) window.scrollBy({ top: top - below - 8, behavior: 'auto' });
  }

  // -- findings
  let reportFindings = [];
  function setFindingRanges(located) {
    const byId = new Map(located.map((f) => [f.id, f]));
    findings = reportFindings.map((f) => {
      const loc = f.ranges && f.ranges.length ? f : byId.get(f.id);
      return { id: f.id, severity: f.severity, title: f.title, ranges: (loc && loc.ranges) || [], culprit: (loc && loc.culprit) || null,
        source: f.source || null };
    }).filter((f) => f.ranges.length);
    el.dispatchEvent(new CustomEvent('tv-located', { detail: findings.map((f) => f.id) }));
  }

  async function showFinding(id) {
    const f = findings.find((x) => x.id === id);
    if (!f) return false;
    activeFinding = id;
    const target = findingView(f.ranges, span);
    highlight = f.culprit;
    highlightIdx = data && highlight ? data.names.indexOf(highlight) : -1;
    if (f.culprit) {
      // the culprit may sit deeper than the lanes show: expand its lane, and select the instance in the range
      const res = await api.traceSearch(sel, f.culprit);
      if (res.code === 200) {
        const hits = res.body.events.filter((e) => e.name === f.culprit);
        const inRange = hits.filter((e) => e.ts_ns < target.range[1] && e.ts_ns + e.dur_ns > target.range[0]);
        const pick = (inRange.length ? inRange : hits).sort((a, b) => b.dur_ns - a.dur_ns)[0];
        if (pick && pick.lane && pick.depth >= 6) expand.add(pick.lane);
        if (pick) selectEvent(pick.ev, false, f.source); // the finding's file:line beside the op it blames
      }
    }
    setView(target.view, { fetchNow: true });
    reveal(false);
    return true;
  }

  // -- selection and details
  async function selectEvent(ev, move, source) {
    const res = await api.traceEvent(sel, ev);
    if (res.code !== 200) return;
    const e = res.body;
    selected = { ev: e.ev, lane: e.lane, depth: e.depth, ts_ns: e.ts_ns };
    flow = e.flow || [];
    if (move) setView([e.ts_ns - e.dur_ns * 2 - 5000, e.ts_ns + e.dur_ns * 3 + 5000]);
    renderDetails(e, source);
    redraw();
  }

  function renderDetails(e, source) {
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
          onclick: () => selectEvent(f.ev, true) }))));
    }
    details.hidden = false;
  }

  // -- hover
  let hoverTimer = null;
  function hitAt(x, y) {
    const r = rowAt(lay, y);
    if (!r || x < LABEL_W) return { r };
    const t = tOf(x);
    const slop = ((view[1] - view[0]) / plotW()) * 2;
    if (r.kind === 'findings') {
      const f = findings.find((ff) => ff.ranges.some(([a, b]) => a - slop <= t && t <= b + slop));
      return { r, finding: f };
    }
    if (r.kind !== 'row' || !r.row) return { r };
    const i = hitInterval(r.row.s, r.row.d, t, slop);
    return { r, i };
  }
  function showTip(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const hit = hitAt(x, y);
    clearTimeout(hoverTimer);
    if (hit.finding) {
      clear(tip).append(h('b', { text: hit.finding.title || hit.finding.id }), h('div', { class: 'muted', text: 'click: show this evidence' }));
    } else if (hit.i !== undefined && hit.i >= 0) {
      const R = hit.r.row;
      const i = hit.i;
      clear(tip);
      append(tip, [h('b', { class: 'tip-name', text: data.names[R.name[i]] }),
        h('div', { text: `${ns(R.d[i])} · ${data.categories[R.cat[i]]}` }),
        R.n[i] > 1 ? h('div', { class: 'muted', text: `${formatValue(R.n[i], 'count')} events merged at this zoom (longest named)` }) : null,
        h('div', { class: 'muted', text: `at +${ns(R.s[i])}` })]);
      if (R.n[i] === 1) {
        const evId = R.ev[i];
        hoverTimer = setTimeout(async () => {
          const res = await api.traceEvent(sel, evId, 'trace_event_hover');
          if (res.code !== 200 || tip.hidden) return;
          const e = res.body;
          if (e.shapes) tip.append(h('div', { class: 'tip-full', text: `shapes: ${e.shapes}` }));
          if (e.bytes !== null && e.bytes !== undefined) tip.append(h('div', { text: `bytes: ${formatValue(e.bytes, 'bytes')}` }));
          if (e.correlation !== null) tip.append(h('div', { class: 'muted', text: `correlation ${e.correlation}${e.flow.length ? ` → ${e.flow[0].name}` : ''}` }));
        }, 200);
      }
    } else { tip.hidden = true; return; }
    tip.hidden = false;
    tip.style.left = `${Math.max(0, Math.min(x + 12, box.clientWidth - 380))}px`;
    tip.style.top = `${y + 14}px`;
  }

  // -- input
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const w = view[1] - view[0];
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      setView(panBy(view, ((ev.shiftKey ? ev.deltaY : ev.deltaX) / plotW()) * w, span));
    } else {
      setView(zoomAt(view, x < LABEL_W ? (view[0] + view[1]) / 2 : tOf(x), ev.deltaY > 0 ? 1.2 : 1 / 1.2, span));
    }
  }, { passive: false });
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, y: ev.clientY, view, moved: false }; canvas.focus(); });
  window.addEventListener('mouseup', (ev) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    canvas.classList.remove('dragging');
    if (d.moved) return;
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const hit = hitAt(x, y);
    if (x < LABEL_W && hit.r && hit.r.kind === 'row' && collapsed && collapsed.has(hit.r.lane.id)) {
      collapsed.delete(hit.r.lane.id); // a collapsed lane opens to its rows
      lay = layout(data, collapsed);
      redraw();
    } else if (x < LABEL_W && hit.r && hit.r.kind === 'row' && hit.r.lane.depth > 1) {
      if (expand.has(hit.r.lane.id)) expand.delete(hit.r.lane.id); else expand.add(hit.r.lane.id);
      load(true);
    } else if (hit.finding) {
      showFinding(hit.finding.id);
    } else if (hit.i !== undefined && hit.i >= 0) {
      selectEvent(hit.r.row.ev[hit.i], false);
    }
  });
  canvas.addEventListener('mousemove', (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) { drag.moved = true; canvas.classList.add('dragging'); }
      if (drag.moved) {
        const dt = (dx / plotW()) * (drag.view[1] - drag.view[0]);
        setView([drag.view[0] - dt, drag.view[1] - dt]);
        tip.hidden = true;
      }
      return;
    }
    showTip(ev);
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; clearTimeout(hoverTimer); });
  canvas.addEventListener('dblclick', () => setView([0, span]));
  canvas.addEventListener('keydown', (ev) => {
    const w = view[1] - view[0];
    const c = (view[0] + view[1]) / 2;
    const key = ev.key.toLowerCase();
    if (key === 'w') setView(zoomAt(view, c, 0.8, span));
    else if (key === 's') setView(zoomAt(view, c, 1.25, span));
    else if (key === 'a') setView(panBy(view, -0.15 * w, span));
    else if (key === 'd') setView(panBy(view, 0.15 * w, span));
    else return;
    ev.preventDefault();
  });
  allBtn.addEventListener('click', () => setView([0, span]));

  async function runSearch() {
    const q = search.value.trim();
    if (!q || !sel) return;
    const res = await api.traceSearch(sel, q);
    if (res.code !== 200) { found.textContent = (res.body && res.body.error) || 'search failed'; return; }
    matches = res.body.events;
    matchAt = -1;
    found.textContent = `${formatValue(res.body.count, 'count')} events${res.body.count > matches.length ? ` (first ${matches.length})` : ''}`;
    step(1);
  }
  function step(dir) {
    if (!matches.length) return;
    matchAt = (matchAt + dir + matches.length) % matches.length;
    const m = matches[matchAt];
    highlight = m.name;
    highlightIdx = data ? data.names.indexOf(highlight) : -1;
    if (m.lane && m.depth >= 6) expand.add(m.lane);
    if (m.lane && collapsed) collapsed.delete(m.lane);
    selectEvent(m.ev, true);
    reveal(false);
  }
  search.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') runSearch(); });
  next.addEventListener('click', () => step(1));
  prev.addEventListener('click', () => step(-1));
  const ro = new ResizeObserver(() => redraw());
  ro.observe(box);

  return {
    /** A run to show (its report's findings, a range from the URL or null for the whole window). */
    show(newSel, report, range) {
      sel = newSel;
      data = null;
      lay = layout(null);
      selected = null;
      flow = [];
      expand = new Set();
      collapsed = null;
      revealOnPaint = !!range;
      activeFinding = null;
      highlight = null;
      highlightIdx = -1;
      details.hidden = true;
      painted = false;
      delete el.dataset.painted;
      reportFindings = (report && report.findings) || [];
      findings = [];
      span = Math.max(1, (report && report.summary && report.summary.window_ns) || 1);
      view = range ? [range[0], range[1]] : [0, 1];
      unset = !range;
      if (range) span = Math.max(span, range[1]);
      note.textContent = 'Loading the trace view…';
      load(true);
    },
    showFinding,
    hasFinding: (id) => findings.some((f) => f.id === id),
    redraw: () => { th = null; redraw(); },
    get view() { return view; },
    destroy() { ro.disconnect(); clear(el); },
  };
}
