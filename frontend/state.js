// Selection state <-> TensorBoard's top-level URL hash (keys "p.llm_diag.<key>"), so a link reopens
// the same view. Writes use location.replace: no history entry per click, and TensorBoard's own
// hash store sees the change (hashchange) and keeps our keys when it rewrites the hash.

import { parseHash, pluginState, withPluginState } from './hash.js';

function topWindow() {
  try {
    void window.top.location.href; // throws if not same-origin (not inside TensorBoard)
    return window.top;
  } catch (e) {
    return window;
  }
}

export function read() {
  return pluginState(parseHash(topWindow().location.hash));
}

export function write(state) {
  const w = topWindow();
  const next = withPluginState(w.location.hash, state);
  const cur = w.location.hash || '';
  if (next === cur || (next === '' && cur === '#')) return;
  const base = w.location.href.split('#')[0];
  w.location.replace(base + (next || '#'));
}

export function subscribe(fn) {
  const w = topWindow();
  let last = JSON.stringify(read());
  const onChange = () => {
    const s = read();
    const j = JSON.stringify(s);
    if (j === last) return;
    last = j;
    fn(s);
  };
  w.addEventListener('hashchange', onChange);
  return () => w.removeEventListener('hashchange', onChange);
}

/** The parent page's dark mode (TensorBoard puts class "dark-mode" on its body). */
export function parentDark() {
  try {
    return topWindow().document.body.classList.contains('dark-mode');
  } catch (e) {
    return false;
  }
}

export function watchTheme(fn) {
  let body;
  try {
    body = topWindow().document.body;
  } catch (e) {
    return () => {};
  }
  let last = parentDark();
  const obs = new MutationObserver(() => {
    const d = parentDark();
    if (d !== last) { last = d; fn(d); }
  });
  obs.observe(body, { attributes: true, attributeFilter: ['class'] });
  return () => obs.disconnect();
}

/** Switch TensorBoard to another plugin's tab (e.g. the PyTorch Profiler's). */
export function openTab(name) {
  const w = topWindow();
  w.location.hash = encodeURIComponent(name);
}
