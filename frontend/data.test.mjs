// node --test: where the charts read their numbers from a RunReport (views/data.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { hasHostLaunches, kernelCategories, stepBreakdown, tokensPerStep } from './views/data.js';

const steps = [{ index: 3, duration_ns: 100 }, { index: 4, duration_ns: 120 }];
const withSteps = (rows) => ({ metrics: { steps: { per_step: rows } } });

test('kernel categories from metrics.kernels.by_category, largest first', () => {
  const report = { metrics: { kernels: { by_category: { gemm: { time_ns: 5, count: 1, share: 0.2 }, copy: { time_ns: 20, count: 2, share: 0.8 } } } } };
  assert.deepEqual(kernelCategories(report), [{ category: 'copy', time_ns: 20 }, { category: 'gemm', time_ns: 5 }]);
  assert.equal(kernelCategories({ metrics: {} }), null);
  assert.equal(kernelCategories({ metrics: { kernels: { available: false } } }), null);
});

test('step breakdown prefers the /steps split, joined by step index', () => {
  const report = withSteps(steps);
  const body = { steps: [{ index: 4, busy_ns: 60, collective_ns: 10, host_wait_ns: 30, sync_ns: 20, data_loader_ns: 0, other_ns: 0 }] };
  const { rows, hasParts } = stepBreakdown(report, body);
  assert.equal(hasParts, true);
  assert.deepEqual(rows[1], { index: 4, duration_ns: 120, busy: 60, communication: 10, host_wait: 30, sync: 20, data_loader: 0, other: 0 });
  assert.equal(rows[0].busy, null);
  assert.equal(stepBreakdown(report, null).hasParts, false);
});

test('step breakdown from the report\'s step rows (metrics.steps.per_step) without a /steps body', () => {
  const report = withSteps([
    { ...steps[0], busy_ns: 50, host_wait_ns: 30, sync_ns: 20, data_loader_ns: 0, other_ns: 0 },
    { ...steps[1], busy_ns: 60, host_wait_ns: 40, sync_ns: 20, data_loader_ns: 0, other_ns: 0 }]);
  const { rows, hasParts } = stepBreakdown(report, null);
  assert.equal(hasParts, true);
  // a schema-2 report has no collective_ns: the communication part is unknown (null), the others stand
  assert.deepEqual(rows[0], { index: 3, duration_ns: 100, busy: 50, communication: null, host_wait: 30, sync: 20, data_loader: 0, other: 0 });
  // rows without parts (no device activity: nulls) give no split
  const none = withSteps(steps.map((s) => ({ ...s, busy_ns: null })));
  assert.equal(stepBreakdown(none, null).hasParts, false);
  assert.deepEqual(stepBreakdown({}, null), { rows: [], hasParts: false });
});

test('tokens per step from metrics.steps.per_step, null when unknown', () => {
  assert.deepEqual(tokensPerStep(withSteps([{ ...steps[0], tokens: 512 }, { ...steps[1], tokens: 1024 }])),
    [{ index: 3, duration_ns: 100, tokens: 512 }, { index: 4, duration_ns: 120, tokens: 1024 }]);
  assert.equal(tokensPerStep(withSteps(steps.map((s) => ({ ...s, tokens: null })))), null);
  assert.equal(tokensPerStep({ metrics: {} }), null);
});

test('host launches follow metrics.run.platform', () => {
  assert.equal(hasHostLaunches({ source_kind: 'kineto', metrics: { run: { platform: 'cuda' } } }), true);
  assert.equal(hasHostLaunches({ source_kind: 'xplane', metrics: { run: { platform: 'xla' } } }), false);
  assert.equal(hasHostLaunches({ source_kind: 'xplane', metrics: {} }), false);  // an error report: no metrics
  assert.equal(hasHostLaunches(null), false);
});
