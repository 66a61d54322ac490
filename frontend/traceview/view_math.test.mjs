// node --test frontend/: the trace view's pure helpers.
import test from 'node:test';
import assert from 'node:assert/strict';
import { MIN_SPAN_NS, clampView, covers, fetchWindow, findingView, formatRange, hitInterval, panBy, parseRange, zoomAt } from './view_math.js';

test('views stay inside the window and at least a microsecond wide', () => {
  assert.deepEqual(clampView(-50, 100, 1000), [0, MIN_SPAN_NS]);
  assert.deepEqual(clampView(900, 1300, 10_000), [900, 1900]);
  assert.deepEqual(clampView(9_500, 10_500, 10_000), [9000, 10_000]);
  assert.deepEqual(clampView(0, 1e12, 5e9), [0, 5e9]);
});

test('zoom keeps the time under the cursor; pan moves by the amount asked', () => {
  const v = zoomAt([0, 1e6], 250_000, 0.5, 1e9);
  assert.deepEqual(v, [125_000, 625_000]);
  assert.deepEqual(panBy([1e6, 2e6], 5e5, 1e9), [1.5e6, 2.5e6]);
  assert.deepEqual(panBy([1e6, 2e6], -5e6, 1e9), [0, 1e6]);
});

test('the URL range round-trips and junk is refused', () => {
  assert.equal(formatRange([12.4, 99999.6]), '12-100000');
  assert.deepEqual(parseRange('12-100000'), [12, 100000]);
  for (const bad of ['', '5-5', '9-3', 'a-b', '1-2-3', '-1-5', '1e3-1e4', null]) assert.equal(parseRange(bad), null, String(bad));
});

test('a loaded answer covers a view inside it at a similar resolution only', () => {
  const loaded = { start_ns: 0, end_ns: 3e6, px: 3000 }; // 1000 ns per pixel
  assert.equal(covers(loaded, [1e6, 2e6], 1000), true);
  assert.equal(covers(loaded, [1e6, 2e6], 100), false); // the view needs 10 µs/px: what is loaded is 10x finer (too many intervals to draw)
  assert.equal(covers(loaded, [1e6, 1.1e6], 1000), false); // zoomed in 10x: too coarse
  assert.equal(covers(loaded, [2.5e6, 3.5e6], 1000), false); // past the loaded end
  assert.equal(covers(null, [0, 1], 10), false);
});

test('the window asked for is the view and one width either side, at the view resolution', () => {
  assert.deepEqual(fetchWindow([1e6, 2e6], 1000, 1e9), { start_ns: 0, end_ns: 3e6, px: 3000 });
  assert.deepEqual(fetchWindow([0, 1e6], 1000, 1.5e6), { start_ns: 0, end_ns: 1.5e6, px: 1500 });
});

test('a finding opens on its longest range, padded', () => {
  const r = findingView([[0, 10_000], [50_000, 150_000], [200_000, 201_000]], 1e9);
  assert.deepEqual(r.range, [50_000, 150_000]);
  assert.deepEqual(r.view, [30_000, 170_000]);
  assert.equal(findingView([], 10), null);
});

test('hit test finds the interval under the pointer, within the slop', () => {
  const s = [0, 100, 300];
  const d = [50, 100, 10];
  assert.equal(hitInterval(s, d, 120, 1), 1);
  assert.equal(hitInterval(s, d, 52, 3), 0);
  assert.equal(hitInterval(s, d, 250, 5), -1);
  assert.equal(hitInterval(s, d, 305, 0), 2);
});
