// "Open in trace view": the PyTorch Profiler tab when it is installed, Perfetto (its UI takes a trace
// by postMessage, the method its docs give for embedding), and a plain download.

import { h, clear } from '../dom.js';
import { openTab } from '../state.js';

const PERFETTO = 'https://ui.perfetto.dev';

export function openInPerfetto(sel, fileName, onStatus, traceBytes) {
  // window.open must run inside the click handler, before any await, or the popup is blocked
  const win = window.open(`${PERFETTO}/#!/`, '_blank');
  if (!win) { onStatus('The browser blocked the Perfetto window: allow pop-ups for TensorBoard, or download the trace and open it at ui.perfetto.dev.'); return; }
  onStatus('Sending the trace to Perfetto…');
  traceBytes(sel).then((buffer) => {
    let tries = 0;
    const onMsg = (e) => {
      if (e.origin !== PERFETTO || e.data !== 'PONG') return;
      clearInterval(timer);
      window.removeEventListener('message', onMsg);
      win.postMessage({ perfetto: { buffer, title: `${sel.run} ${sel.worker} ${sel.span}`, fileName } }, PERFETTO);
      onStatus('');
    };
    window.addEventListener('message', onMsg);
    const timer = setInterval(() => {
      if (++tries > 100) { clearInterval(timer); window.removeEventListener('message', onMsg); onStatus('Perfetto did not answer; download the trace and open it there instead.'); return; }
      win.postMessage('PING', PERFETTO);
    }, 100);
  }, (err) => onStatus(`Could not read the trace: ${err.message}`));
}

/** trace: {bytes(sel) -> Promise of the file's bytes, url(sel) -> its download URL} (the tab's data functions). */
export function mountTraceView(el, trace) {
  const note = h('span', { class: 'muted tv-note' });
  return {
    update({ sel, span, viewers }) {
      clear(el);
      if (!sel || !span) return;
      const fileName = `${sel.worker}.${sel.span}.${span.source_kind === 'xplane' ? 'xplane.pb' : 'pt.trace.json.gz'}`;
      if (viewers && viewers.pytorch_profiler && span.source_kind === 'kineto') {
        el.append(h('button', { type: 'button', class: 'btn', text: 'PyTorch Profiler tab', title: 'Switch to the PyTorch Profiler tab (select the same run there)', onclick: () => openTab('pytorch_profiler') }));
      }
      if (span.source_kind === 'xplane') {
        if (viewers && viewers.profile) {
          el.append(h('button', { type: 'button', class: 'btn', text: 'Profile tab (XProf)', title: 'Switch to the Profile tab of tensorboard-plugin-profile: trace viewer, HLO ops, the host side of XLA (select the same run there)', onclick: () => openTab('profile') }));
        } else {
          el.append(h('span', { class: 'muted tv-hint', title: 'pip install tensorboard-plugin-profile, then restart TensorBoard', text: 'XProf trace viewer: pip install tensorboard-plugin-profile' }));
        }
      }
      if (span.source_kind === 'kineto') {
        el.append(h('button', { type: 'button', class: 'btn', text: 'Open in Perfetto', title: 'Opens ui.perfetto.dev in a new window and hands it this trace (it stays in your browser)', onclick: () => openInPerfetto(sel, fileName, (t) => { note.textContent = t; }, trace.bytes) }));
      }
      el.append(h('a', { class: 'btn', href: trace.url(sel), download: '', text: 'Download trace' }), note);
    },
    destroy() { clear(el); },
  };
}

/** The trace links as a view of the tab's state (app.js VIEWS). */
export function traceLinksView(el, tab) {
  const view = mountTraceView(el, tab.trace);
  return {
    render(s) { view.update({ sel: s.sel, span: s.sel && tab.spanOf(), viewers: s.viewers }); },
    destroy: view.destroy,
  };
}
