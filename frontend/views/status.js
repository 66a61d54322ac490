// Loading, empty, progress and error states: each says what is happening and what to do.

import { h, clear } from '../dom.js';
import { fmtBytes } from '../format.js';

const CAPTURE_PYTORCH = `import torch
from torch.profiler import profile, schedule, tensorboard_trace_handler, ProfilerActivity

with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=schedule(wait=5, warmup=2, active=4, repeat=1),
    on_trace_ready=tensorboard_trace_handler("runs/my_run"),
    record_shapes=True,
) as prof:
    for step, batch in enumerate(loader):
        train_step(batch)
        prof.step()          # marks ProfilerStep#N: needed for per-step numbers`;

const CAPTURE_HF = `from transformers import TrainerCallback
import torch

class ProfilerCallback(TrainerCallback):
    def __init__(self, prof): self.prof = prof
    def on_step_end(self, args, state, control, **kw): self.prof.step()

with torch.profiler.profile(
    schedule=torch.profiler.schedule(wait=5, warmup=2, active=4, repeat=1),
    on_trace_ready=torch.profiler.tensorboard_trace_handler("runs/my_run"),
) as prof:
    trainer.add_callback(ProfilerCallback(prof))
    trainer.train()`;

export function codeBlock(code, label) {
  const pre = h('pre', { class: 'code' }, h('code', { text: code }));
  const btn = h('button', { class: 'copy', type: 'button', title: 'Copy to clipboard', text: 'Copy' });
  btn.addEventListener('click', () => copyText(code, btn));
  return h('div', { class: 'codewrap' }, label ? h('div', { class: 'codelabel', text: label }) : null, btn, pre);
}

export async function copyText(text, btn) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch (e) {
    const ta = h('textarea', { style: { position: 'fixed', opacity: '0' } });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    try { ok = document.execCommand('copy'); } catch (e2) { ok = false; }
    ta.remove();
  }
  if (btn) {
    btn.textContent = ok ? 'Copied' : 'Select and copy';
    setTimeout(() => { btn.textContent = 'Copy'; }, 1500);
  }
}

export function showLoading(el, what = 'Looking for profiler runs…') {
  clear(el).append(h('div', { class: 'state loading', role: 'status' }, h('div', { class: 'spinner' }), h('span', { text: what })));
}

export function showEmpty(el, logdir, scanError) {
  clear(el).append(
    h('div', { class: 'state empty' },
      h('h2', { text: 'No profiler runs found' }),
      h('p', {}, 'LLM Diag reads PyTorch profiler traces (', h('code', { text: '*.pt.trace.json[.gz]' }),
        ') and XLA profiles (', h('code', { text: '*.xplane.pb' }), ') under ',
        h('code', { text: logdir || '(no --logdir)' }), '. New traces show up here within about 10 seconds, without a restart.'),
      scanError ? h('p', { class: 'warn', text: scanError }) : null,
      h('h3', { text: 'Capture one with torch.profiler' }),
      codeBlock(CAPTURE_PYTORCH, 'PyTorch'),
      h('h3', { text: 'With the Hugging Face Trainer' }),
      codeBlock(CAPTURE_HF, 'HF Trainer'),
      h('p', { class: 'hint', text: 'Then run: tensorboard --logdir runs, and open this tab again.' })));
}

export function showError(el, message, hint) {
  clear(el).append(
    h('div', { class: 'state error', role: 'alert' },
      h('h2', { text: 'This trace could not be analysed' }),
      h('p', { class: 'errmsg', text: message || 'unknown error' }),
      h('p', { class: 'hint', text: hint || 'If the file is still being written, it is analysed again once it stops changing. Otherwise capture it again, or check the TensorBoard console for details.' })));
}

/** Server-wide states that are not one run's: the result cache cannot be written (results live in memory
 *  until TensorBoard stops). Empty when all is well. */
export function showNotices(el, runsBody) {
  clear(el);
  const cache = runsBody && runsBody.cache;
  if (cache && cache.error) {
    el.append(h('div', { class: 'state error notice', role: 'status', style: { padding: '12px 8px' } },
      h('h2', { text: 'Results are not being cached' }),
      h('p', { class: 'errmsg', text: cache.error }),
      h('p', { class: 'hint', text: 'Analyses still run. Set LLMDIAG_CACHE_DIR to a directory you own to keep results across restarts.' })));
  }
}

const PHASES = { starting: 'Starting', reading: 'Reading the trace', analysing: 'Computing metrics and findings', timeline: 'Building step timelines' };
const ORDER = ['starting', 'reading', 'analysing', 'timeline'];

export function showProgress(el, st) {
  if (st && st.status === 'error') { // a failure is never shown as progress
    showError(el, st.error);
    return;
  }
  if (st && st.status === 'writing') { // a live file: no analysis yet, re-read once it stops changing
    clear(el).append(
      h('div', { class: 'state progress writing', role: 'status' },
        h('div', { class: 'spinner' }),
        h('div', {},
          h('div', { class: 'progress-title', text: 'Still being written…' }),
          h('div', { class: 'hint', text: `${st.error || 'The profiler is still writing this trace.'} ${fmtBytes(st.size_bytes)} so far.` }))));
    return;
  }
  const phase = st.phase || (st.status === 'pending' ? null : 'starting');
  const i = phase ? ORDER.indexOf(phase) : -1;
  const text = st.status === 'pending'
    ? `Queued for analysis${st.queue_position ? ` (${st.queue_position} ahead)` : ''}…`
    : `${PHASES[phase] || 'Analysing'}… ${st.elapsed_s !== undefined ? `${Math.round(st.elapsed_s)} s` : ''}`;
  clear(el).append(
    h('div', { class: 'state progress', role: 'status' },
      h('div', { class: 'spinner' }),
      h('div', {},
        h('div', { class: 'progress-title', text: text }),
        h('div', { class: 'steps' }, ORDER.slice(1).map((p, k) => h('span', { class: k + 1 < i ? 'done' : k + 1 === i ? 'now' : '', text: PHASES[p] }))),
        h('div', { class: 'hint', text: `${fmtBytes(st.size_bytes)} trace. The result is cached: next time this run opens at once.` }))));
}

let firstPaintMarked = false;
/** The first paint of something final (a report, an error, the empty logdir): a mark the bench and tests read. */
export function markFirstPaint() {
  if (firstPaintMarked) return;
  firstPaintMarked = true;
  requestAnimationFrame(() => {
    performance.mark('llmdiag-first-paint');
    document.body.dataset.firstPaint = '1';
  });
}

/** The page's status line as a view of the tab's state: looking for runs, none, analysing, failed, or nothing. */
export function statusView(el) {
  showLoading(el);
  return {
    render(s) {
      const rep = s.report;
      if (s.runsError && !s.sel) showError(el, s.runsError, 'The LLM Diag plugin did not answer. Check the TensorBoard console.');
      else if (s.runsBody && !s.runs.length) { showEmpty(el, s.runsBody.logdir, s.runsBody.scan_error); markFirstPaint(); }
      else if (s.waiting) showLoading(el, s.waiting);
      else if (rep.status === 'loading') showLoading(el, 'Loading the diagnosis…');
      else if (rep.status === 'wait') showProgress(el, rep.body);
      else if (rep.status === 'error') {
        showError(el, rep.error, rep.code === 404 ? 'This run is no longer in the logdir: pick another one.' : undefined);
        markFirstPaint();
      } else if (rep.status === 'ok') { clear(el); markFirstPaint(); }
    },
    destroy() { clear(el); },
  };
}

/** Server-wide notices (showNotices) as a view of the tab's state. */
export function noticesView(el) {
  return { render(s) { showNotices(el, s.runsBody); }, destroy() { clear(el); } };
}

/** A deep link to a run this logdir lacks: the tab says which one it shows instead. */
export function linkNoteView(el) {
  el.hidden = true;
  el.setAttribute('role', 'status');
  return {
    render(s) { el.hidden = !s.linkNote; el.textContent = s.linkNote || ''; },
    destroy() { clear(el); },
  };
}
