// The tab's one polling helper: every timer the tab keeps is a named slot here (the run list, each data
// source that answers 202 while the server works, the debounced URL write). A new call on a name replaces
// what that name had; an answer to a replaced or stopped call is dropped, so a stale answer never lands.

/** `timers` (setTimeout / clearTimeout by default) is injectable for tests. */
export function createPoller({ setT = (fn, ms) => setTimeout(fn, ms), clearT = (t) => clearTimeout(t) } = {}) {
  const timers = new Map();
  const gens = new Map();
  const gen = (name) => gens.get(name) || 0;

  /** Cancels the name's timer, and drops the answer of any request it has in flight. */
  function stop(name) {
    if (timers.has(name)) clearT(timers.get(name));
    timers.delete(name);
    gens.set(name, gen(name) + 1);
  }

  /** Runs fn once after ms, replacing the name's pending run (a debounce when called repeatedly). */
  function after(name, ms, fn) {
    stop(name);
    const g = gen(name);
    timers.set(name, setT(() => { if (gen(name) === g) { timers.delete(name); fn(); } }, ms));
  }

  /**
   * Asks request() until its answer settles: a 202 calls onWait(body) and asks again after ms; an aborted
   * answer, or one to a call since replaced or stopped, is dropped; any other answer goes to onDone(res).
   */
  function poll(name, { request, ms, onWait, onDone }) {
    stop(name);
    const g = gen(name);
    const tick = async () => {
      timers.delete(name);
      const res = await request();
      if (gen(name) !== g || !res || res.aborted) return;
      if (res.code === 202) {
        if (onWait) onWait(res.body);
        if (gen(name) === g) timers.set(name, setT(tick, ms));
        return;
      }
      onDone(res);
    };
    return tick();
  }

  return { after, poll, stop, pending: () => [...timers.keys()].sort() };
}
