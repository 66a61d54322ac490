// node --test: the tab's state (tab_state.js): one update path, sources loaded by key, views told what changed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createState, datumOf, OFF } from './tab_state.js';
import { createPoller } from './poll.js';

const settle = () => new Promise((r) => setImmediate(r));

function harness(answers) {
  const asked = [];
  const changes = [];
  const reportOk = (s) => s.report.status === 'ok';
  const sources = {
    report: { key: (s) => JSON.stringify(s.sel), load: async (s) => { asked.push(['report', s.sel.run]); return answers.report.shift(); } },
    timeline: { key: (s) => (reportOk(s) ? `${s.sel.run}#${s.step}` : null), load: async (s) => { asked.push(['timeline', s.step]); return { code: 200, body: { step: s.step } }; } },
  };
  const timers = [];
  const poller = createPoller({ setT: (fn) => { timers.push(fn); return timers.length; }, clearT: () => {} });
  const tab = createState({ sources, poller, onChange: (s, ch) => changes.push([...ch].sort()) });
  return { tab, asked, changes, timers };
}

test('a selection loads the report; once it is ok the dependent source loads; a new step reloads only that', async () => {
  const { tab, asked, changes, timers } = harness({ report: [{ code: 202, body: { phase: 'reading' } }, { code: 200, body: { status: 'ok', findings: [] } }] });
  tab.set({ sel: { run: 'a', worker: 'w', span: '1' } });
  assert.deepEqual(tab.state.report, { status: 'loading' });
  assert.deepEqual(tab.state.timeline, OFF);
  await settle();
  assert.equal(tab.state.report.status, 'wait');
  await timers.shift()(); // the poller asks again
  await settle();
  assert.equal(tab.state.report.status, 'ok');
  await settle();
  assert.deepEqual(tab.state.timeline.body, { step: null });
  tab.set({ step: 3 });
  await settle();
  assert.deepEqual(asked, [['report', 'a'], ['report', 'a'], ['timeline', null], ['timeline', 3]]);
  assert.deepEqual(tab.state.timeline.body, { step: 3 });
  // the same selection (a new object naming the same trace) changes nothing
  const before = changes.length;
  tab.set({ sel: { run: 'a', worker: 'w', span: '1' } });
  assert.equal(changes.length, before);
  assert.deepEqual(changes[0], ['report', 'sel']);
});

test('a failed analysis is an error datum, never progress; an error report is a failure', () => {
  assert.deepEqual(datumOf({ code: 404, body: { error: 'gone' } }), { status: 'error', code: 404, body: { error: 'gone' }, error: 'gone' });
  assert.equal(datumOf({ code: 200, body: { status: 'error', error: 'bad file' } }).error, 'bad file');
  assert.equal(datumOf({ code: 500, body: null }).error, 'HTTP 500');
  assert.equal(datumOf({ code: 200, body: { status: 'ok' } }).status, 'ok');
});

test('a selection changed while a report is in flight drops the old answer', async () => {
  let release;
  const { tab } = harness({ report: [new Promise((r) => { release = r; }), { code: 200, body: { status: 'ok', run: 'b' } }] });
  tab.set({ sel: { run: 'a', worker: 'w', span: '1' } });
  tab.set({ sel: { run: 'b', worker: 'w', span: '1' } });
  await settle();
  release({ code: 200, body: { status: 'ok', run: 'a' } });
  await settle();
  assert.equal(tab.state.report.body.run, 'b');
});
