// The only place that talks to the server. Relative URLs resolve against the plugin's base
// (data/plugin/llm_diag/), so they work under --path_prefix too. One AbortController per kind of
// request: a newer request of the same kind cancels the older, so a stale answer never lands.

const controllers = new Map();

function query(sel, extra = {}) {
  const p = new URLSearchParams();
  for (const k of ['run', 'worker', 'span']) p.set(k, sel[k]);
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  return p.toString();
}

async function getJSON(kind, url) {
  const prev = controllers.get(kind);
  if (prev) prev.abort();
  const ctl = new AbortController();
  controllers.set(kind, ctl);
  let resp;
  try {
    resp = await fetch(url, { signal: ctl.signal, credentials: 'same-origin', headers: { Accept: 'application/json' } });
  } catch (e) {
    if (e && e.name === 'AbortError') return { aborted: true };
    return { code: 0, body: { error: `TensorBoard did not answer (${e.message || e}). Is it still running?` } };
  } finally {
    if (controllers.get(kind) === ctl) controllers.delete(kind);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    if (e && e.name === 'AbortError') return { aborted: true };
    body = { error: `unexpected answer from TensorBoard (HTTP ${resp.status})` };
  }
  return settled(resp.status, body);
}

/** A failed analysis is an error, never progress: 422 (docs/http_api.md), and a 202 whose body says
 *  `status: "error"` (an older server) is read as one too, so no view polls a failure forever. */
export function settled(code, body) {
  if (code === 202 && body && body.status === 'error') return { code: 422, body: { ...body, error: body.error || 'the analysis failed' } };
  return { code, body };
}

/** Any JSON route of the catalog (``tab/routes.py`` CATALOG_ROUTES) by name, with its parameters: a new view's
 *  data needs no fetcher of its own. */
export const route = (name, params) => getJSON(name, `./${name}?${new URLSearchParams(params).toString()}`);
export const runs = () => getJSON('runs', './runs');
export const report = (sel) => getJSON('report', `./report?${query(sel)}`);
export const steps = (sel) => getJSON('steps', `./steps?${query(sel)}`);
/** This run against a baseline run (docs/http_api.md /compare). */
export const compare = (sel, base) => getJSON('compare', `./compare?${query(sel, { base_run: base.run, base_worker: base.worker, base_span: base.span })}`);
/** This run's job against a baseline job: every rank of each (docs/http_api.md /compare?level=job). */
export const compareJob = (sel, base) => getJSON('compare', `./compare?${new URLSearchParams({ level: 'job', run: sel.run, span: sel.span, base_run: base.run, base_span: base.span }).toString()}`);
/** The job of a run with several ranks: the run and span of ``sel`` (docs/http_api.md /job). */
export const job = (sel) => getJSON('job', `./job?${new URLSearchParams({ run: sel.run, span: sel.span }).toString()}`);
export const timeline = (sel, step) => getJSON('timeline', `./timeline?${query(sel, { step })}`);
/** The metric registry (units, directions, definitions of every report key): fetched once by registry.js. */
export const getMetricRegistry = () => getJSON('metric_registry', './metric_registry');
export const traceUrl = (sel) => `./trace?${query(sel)}`;

export async function traceBytes(sel) {
  const resp = await fetch(traceUrl(sel), { credentials: 'same-origin' });
  if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
  return resp.arrayBuffer();
}
/** The trace view (docs/http_api.md /trace_view, /trace_event, /trace_search). `kind` separates requests that must not cancel each other. */
export const traceView = (sel, params) => getJSON('trace_view', `./trace_view?${query(sel, params)}`);
export const traceEvent = (sel, ev, kind = 'trace_event') => getJSON(kind, `./trace_event?${query(sel, { ev })}`);
export const traceSearch = (sel, q) => getJSON('trace_search', `./trace_search?${query(sel, { q })}`);
