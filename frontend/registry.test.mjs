// node --test: resolving report keys to registry entries (registry.js) against the fixture registry.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setRegistry, entryOf, unitOf, unitFromName, evidenceUnitOf, tokens, definitionOf } from './registry.js';
import { formatValue } from './format.js';

const FIXTURE = JSON.parse(readFileSync(new URL('./testdata/metric_registry.json', import.meta.url), 'utf8'));

test('key tokens: list items, map entries, the metrics. prefix', () => {
  assert.deepEqual(tokens('steps.durations_ns[]'), ['steps', 'durations_ns', '[]']);
  assert.deepEqual(tokens('steps.durations_ns[3]'), ['steps', 'durations_ns', '[]']);
  assert.deepEqual(tokens('metrics.kernels.by_category.gemm.time_ns'), ['kernels', 'by_category', 'gemm', 'time_ns']);
  assert.deepEqual(tokens('idle.step_breakdown.*[]'), ['idle', 'step_breakdown', '*', '[]']);
});

test('exact keys, [] list items and * map entries resolve to their entry', () => {
  assert.equal(setRegistry(FIXTURE), FIXTURE.metrics.length);
  assert.equal(entryOf('steps.median_ns').label, 'median step');
  assert.equal(entryOf('metrics.steps.median_ns').key, 'steps.median_ns');
  assert.equal(entryOf('kernels.by_category.gemm.time_ns').key, 'kernels.by_category.*.time_ns');
  assert.equal(entryOf('kernels.by_category.memcpy.count').key, 'kernels.by_category.*.count');
  assert.equal(entryOf('kernels.by_category.*.time_ns').key, 'kernels.by_category.*.time_ns'); // a pattern finds itself
  assert.equal(entryOf('idle.low_util_steps[]').key, 'idle.low_util_steps[]');
  assert.equal(entryOf('idle.low_util_steps[2]').key, 'idle.low_util_steps[]');
  assert.equal(entryOf('idle.low_util_steps').key, 'idle.low_util_steps[]'); // the list itself: its items' entry
  assert.equal(entryOf('steps.per_step[4].busy_ns').key, 'steps.per_step[].busy_ns');
  assert.equal(entryOf('steps.per_step[4].no_such_ns'), null);
  // "*" is one map entry, not a list item nor several segments
  assert.equal(entryOf('kernels.by_category.time_ns'), null);
  assert.equal(entryOf('kernels.by_category.a.b.time_ns'), null);
  assert.equal(entryOf('kernels.by_category[].time_ns'), null);
  assert.equal(entryOf('steps.median'), null);
  assert.equal(entryOf(''), null);
  assert.equal(entryOf(null), null);
  assert.equal(definitionOf('kernels.by_category.copy.time_ns'), "sum of the category's device event durations");
  // report sections and the trace's own fields
  assert.equal(entryOf('headline.step_median_ns').key, 'headline.step_median_ns');
  assert.equal(entryOf('steps.per_step[2].duration_ns').key, 'steps.per_step[].duration_ns');
  assert.equal(entryOf('steps.per_step[].index').key, 'steps.per_step[].index');
  assert.equal(entryOf('trace.size_bytes').unit, 'bytes');
});

test('the registry decides the unit; ids are never abbreviated', () => {
  setRegistry(FIXTURE);
  assert.equal(unitOf('steps.cv'), 'ratio');
  assert.equal(unitOf('launch.launches_per_step'), 'count_per_step');
  assert.equal(unitOf('xla.recompile_program_ids'), 'id');
  assert.equal(formatValue([103_869], unitOf('xla.recompile_program_ids')), '103869');
  assert.equal(formatValue(18_865_979_392, unitOf('memory.peak_used_bytes')), '17.6 GiB');
  assert.equal(formatValue(0.2219, unitOf('idle.busy_share')), '22.2 %');
  assert.equal(formatValue(975_933_561, unitOf('steps.per_step[0].duration_ns')), '976 ms');
  assert.equal(formatValue('aten::mm', unitOf('idle.host_wait_culprit')), 'aten::mm');
  assert.equal(formatValue(5815.5, unitOf('headline.launches_per_step')), '5816');
  assert.equal(formatValue(0.2706, unitOf('headline.step_cv')), '0.27');
  assert.equal(formatValue(7_021_184, unitOf('trace.size_bytes')), '6.7 MiB');
  assert.equal(formatValue(12_345, unitOf('steps.per_step[].index')), '12345');
  // "as_metric" is not a unit to format with: the key's name decides (here: none, so the number in full)
  assert.equal(unitOf('findings[].value'), null);
  // an entry overrides what the key's name would say
  setRegistry({ units: {}, metrics: [{ key: 'a.odd_ns', unit: 'count' }, { key: 'a.by.*.x[]', unit: 'id' }] });
  assert.equal(unitOf('a.odd_ns'), 'count');
  assert.equal(unitOf('a.by.k.x[7]'), 'id'); // a map entry's list items
  assert.equal(entryOf('a.by.k.x').key, 'a.by.*.x[]');
  assert.equal(unitOf('a.other_ns'), 'ns'); // not in the registry: the name rule
});

test('keys the registry does not name: the unit their name declares', () => {
  setRegistry({ units: {}, metrics: [] });
  const cases = {
    pageable_host_ns: 'ns', peak_used_bytes: 'bytes', h2d_bytes_per_s: 'bytes_per_s', stall_share: 'share',
    tokens_per_s: 'per_s', tiny_kernels_per_step: 'count_per_step', model_flop: 'flop', copy_vs_gemm_ratio: 'ratio',
    program_ids: 'id', program_id: 'id', indexes: 'index', step_index: 'index', outlier_count: 'count',
    'xla.recompile_program_ids[]': 'id', 'steps.durations_ns[2]': 'ns',
  };
  for (const [k, u] of Object.entries(cases)) assert.equal(unitFromName(k), u, k);
  for (const k of ['steps', 'cv', 'host_op', 'first_over_rest', 'idle']) assert.equal(unitFromName(k), null, k);
  assert.equal(unitOf('program_ids'), 'id');
  assert.equal(formatValue([103_869], unitOf('program_ids')), '103869');
  assert.equal(formatValue([3, 4], unitOf('steps')), '3, 4');
});

test("evidence values take the unit of the metric the finding's rule reads", () => {
  setRegistry(FIXTURE);
  assert.equal(evidenceUnitOf('recompilation', 'program_ids'), 'id');
  assert.equal(evidenceUnitOf('recompilation', 'steps'), 'index');
  assert.equal(evidenceUnitOf('host_bound', 'launches_per_step'), 'count_per_step');
  assert.equal(formatValue([103_869], evidenceUnitOf('recompilation', 'program_ids')), '103869');
  assert.equal(formatValue(18_865_979_392, evidenceUnitOf('memory_headroom', 'peak_used_bytes')), '17.6 GiB');
  // a finding or label the registry does not list: the label's name, else none
  assert.equal(evidenceUnitOf('no_such_finding', 'stall_ns'), 'ns');
  assert.equal(evidenceUnitOf('host_bound', 'new_label_share'), 'share');
  assert.equal(evidenceUnitOf('host_bound', 'first_step'), null);
  setRegistry({ units: {}, metrics: [], evidence_units: { x: { v: 'as_metric' } } });
  assert.equal(evidenceUnitOf('x', 'v'), null);
});

test('loadRegistry: fetched once; without a registry the name rule stands in', async () => {
  const a = await import('./registry.js?instance=ok');
  assert.equal(await a.loadRegistry(Promise.resolve({ code: 200, body: FIXTURE })), true);
  assert.equal(a.unitOf('steps.cv'), 'ratio');
  // a second call shares the first answer: no new request
  assert.equal(await a.loadRegistry(Promise.resolve({ code: 200, body: { units: {}, metrics: [] } })), true);
  assert.equal(a.unitOf('steps.cv'), 'ratio');
  const b = await import('./registry.js?instance=missing');
  assert.equal(await b.loadRegistry(Promise.resolve({ code: 404, body: { error: 'not found' } })), false);
  assert.equal(b.unitOf('steps.cv'), null);
  assert.equal(b.unitOf('steps.median_ns'), 'ns');
  const c = await import('./registry.js?instance=failed');
  assert.equal(await c.loadRegistry(Promise.reject(new Error('offline'))), false);
});
