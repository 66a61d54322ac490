// The tab's state: one object, one update path. Everything the tab shows is a function of `state`:
// the run list, the selection (run, worker, span), the step, the baseline, the trace view's range, and one
// datum per data source ({status: 'off' | 'loading' | 'wait' | 'ok' | 'error', body, code, error}).
// set(patch) is the only way to change it. After each change every data source recomputes its key from
// the state: a new key (re)loads the source through the poller (a 202 is asked again), null turns it off.
// Then the views whose `uses` name a changed key render, once per change.

import { createPoller } from './poll.js';
import { selKey } from './compare_data.js';

export const OFF = Object.freeze({ status: 'off' });
const SAME_BY_KEY = new Set(['sel', 'base']); // objects compared by what they name, not by identity

/** The datum a settled answer makes: a 200 (an error report's status "error" is a failure), else its error. */
export function datumOf(res) {
  const body = res.body;
  if (res.code === 200 && !(body && body.status === 'error')) return { status: 'ok', code: 200, body };
  const error = (body && body.error) || (res.code === 200 ? 'the analysis failed' : `HTTP ${res.code}`);
  return { status: 'error', code: res.code, body, error };
}

/**
 * sources: {name: {key(state) -> string | null, load(state) -> Promise of an api answer}}; onChange(state,
 * changed: Set of keys) runs after each update. Returns {state, set, poller}.
 */
export function createState({ sources, onChange, poller = createPoller(), pollMs = 1000, initial = {} }) {
  const state = { runs: [], runsBody: null, viewers: {}, sel: null, step: null, base: null, range: null, ...initial };
  for (const name of Object.keys(sources)) state[name] = OFF;
  const loadedFor = {}; // source -> the key its datum is for
  let pending = null;

  function load(name, src) {
    const k = state.sel ? src.key(state) : null;
    if (k === (loadedFor[name] ?? null)) return;
    loadedFor[name] = k;
    if (k === null) { poller.stop(name); set({ [name]: OFF }); return; }
    set({ [name]: { status: 'loading' } });
    poller.poll(name, {
      request: () => src.load(state), ms: pollMs,
      onWait: (body) => set({ [name]: { status: 'wait', code: 202, body } }),
      onDone: (res) => set({ [name]: datumOf(res) }),
    });
  }

  function set(patch) {
    if (pending) { Object.assign(pending, patch); return; }
    pending = { ...patch };
    const changed = new Set();
    while (Object.keys(pending).length) {
      const p = pending;
      pending = {};
      for (const [k, v] of Object.entries(p)) {
        const same = SAME_BY_KEY.has(k) ? selKey(v) === selKey(state[k]) && !!v === !!state[k] : v === state[k];
        if (!same) { state[k] = v; changed.add(k); }
      }
      for (const [name, src] of Object.entries(sources)) load(name, src);
    }
    pending = null;
    if (changed.size && onChange) onChange(state, changed);
  }

  return { state, set, poller };
}
