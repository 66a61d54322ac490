// node --test: the polling helper (poll.js) against a hand-driven clock.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createPoller } from './poll.js';

function clock() {
  let now = 0;
  let seq = 0;
  const due = new Map(); // id -> [time, fn]
  return {
    setT: (fn, ms) => { due.set(++seq, [now + ms, fn]); return seq; },
    clearT: (id) => { due.delete(id); },
    async advance(ms) {
      now += ms;
      for (const [id, [t, fn]] of [...due].sort((a, b) => a[1][0] - b[1][0])) {
        if (t <= now && due.has(id)) { due.delete(id); await fn(); }
      }
    },
    count: () => due.size,
  };
}
const tickle = () => new Promise((r) => setImmediate(r));

test('a 202 is asked again after ms until it settles; onWait sees each progress body', async () => {
  const c = clock();
  const p = createPoller(c);
  const answers = [{ code: 202, body: { phase: 'reading' } }, { code: 202, body: { phase: 'analysing' } }, { code: 200, body: 'done' }];
  const asked = [];
  const waits = [];
  let done = null;
  await p.poll('report', { request: async () => { asked.push(1); return answers.shift(); }, ms: 1000, onWait: (b) => waits.push(b.phase), onDone: (r) => { done = r; } });
  assert.deepEqual([asked.length, waits, done, p.pending()], [1, ['reading'], null, ['report']]);
  await c.advance(999);
  assert.equal(asked.length, 1);
  await c.advance(1);
  await c.advance(1000);
  assert.deepEqual([asked.length, waits, done && done.body, p.pending()], [3, ['reading', 'analysing'], 'done', []]);
});

test('a replaced or stopped poll drops its answer; an aborted answer is dropped', async () => {
  const c = clock();
  const p = createPoller(c);
  const got = [];
  let release;
  const slow = new Promise((r) => { release = r; });
  const first = p.poll('job', { request: () => slow, ms: 10, onDone: (r) => got.push(['first', r.body]) });
  await p.poll('job', { request: async () => ({ code: 200, body: 'b' }), ms: 10, onDone: (r) => got.push(['second', r.body]) });
  release({ code: 200, body: 'a' });
  await first;
  assert.deepEqual(got, [['second', 'b']]);
  let release2;
  const slow2 = new Promise((r) => { release2 = r; });
  const third = p.poll('job', { request: () => slow2, ms: 10, onDone: (r) => got.push(['third', r.body]) });
  p.stop('job');
  release2({ code: 200, body: 'c' });
  await third;
  await p.poll('steps', { request: async () => ({ aborted: true }), ms: 10, onDone: () => got.push(['aborted']) });
  assert.deepEqual(got, [['second', 'b']]);
  assert.equal(c.count(), 0);
});

test('after() debounces: only the last call of a name runs, once', async () => {
  const c = clock();
  const p = createPoller(c);
  const ran = [];
  p.after('hash', 300, () => ran.push(1));
  await c.advance(200);
  p.after('hash', 300, () => ran.push(2));
  p.after('runs', 100, () => ran.push('runs'));
  await c.advance(200);
  assert.deepEqual(ran, ['runs']);
  await c.advance(100);
  await tickle();
  assert.deepEqual([ran, p.pending()], [['runs', 2], []]);
});
