// node --test frontend/*.test.mjs : the pure modules of the tab.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fmtDuration, fmtShare, fmtBytes, fmtCount, fmtByKey, humanKey, rankFindings, median, statusLabel, sig } from './format.js';
import { parseHash, serializeHash, pluginState, withPluginState } from './hash.js';
import { visibleRange, layoutTicks } from './timeline_math.js';

test('fmtDuration picks the unit', () => {
  assert.equal(fmtDuration(512), '512 ns');
  assert.equal(fmtDuration(1234), '1.23 µs');
  assert.equal(fmtDuration(165_300_000), '165 ms');
  assert.equal(fmtDuration(12_340_000), '12.3 ms');
  assert.equal(fmtDuration(2_500_000_000), '2.5 s');
  assert.equal(fmtDuration(null), '—');
  assert.equal(fmtDuration(NaN), '—');
});

test('shares, bytes, counts', () => {
  assert.equal(fmtShare(0.1234), '12.3%');
  assert.equal(fmtShare(0.0001), '<0.1%');
  assert.equal(fmtShare(0), '0.0%');
  assert.equal(fmtShare(undefined), '—');
  assert.equal(fmtBytes(110_300_000), '110 MB');
  assert.equal(fmtBytes(999), '999 B');
  assert.equal(fmtCount(1478), '1478');
  assert.equal(fmtCount(14_780), '14.8 k');
  assert.equal(fmtCount(2_500_000), '2.5 M');
  assert.equal(sig(0.456), '0.46');
});

test('fmtByKey reads the unit from the key', () => {
  assert.equal(fmtByKey('pageable_time_ns', 123_000), '123 µs');
  assert.equal(fmtByKey('htod_pageable_bytes', 2_000_000), '2 MB');
  assert.equal(fmtByKey('stall_share', 0.229), '22.9%');
  assert.equal(fmtByKey('iterator', 'single_process'), 'single_process');
  assert.equal(fmtByKey('warm', true), 'yes');
  assert.equal(fmtByKey('x', null), '—');
  assert.equal(humanKey('pageable_time_ns'), 'pageable time');
  assert.equal(humanKey('stall_share'), 'stall share');
});

test('findings keep the engine rank by saving; severity breaks ties', () => {
  const fs = [
    { id: 'a', severity: 'low', saving: { ns: 5 } },
    { id: 'b', severity: 'high', saving: null },
    { id: 'c', severity: 'medium', saving: { ns: 9 } },
    { id: 'd', severity: 'high', saving: { ns: 5 } },
  ];
  assert.deepEqual(rankFindings(fs).map((f) => f.id), ['c', 'd', 'a', 'b']);
  assert.deepEqual(rankFindings(undefined), []);
});

test('median and status labels', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  assert.equal(median([]), null);
  assert.equal(statusLabel('run', 'ready'), 'run');
  assert.equal(statusLabel('run', 'analysing'), 'run (analysing…)');
});

test('hash round trip keeps TensorBoard keys and the tab', () => {
  const h = '#llm_diag&smoothing=0.6&p.llm_diag.run=a%2Fb&p.llm_diag.span=1';
  const d = parseHash(h);
  assert.equal(d.__tab__, 'llm_diag');
  assert.equal(d['p.llm_diag.run'], 'a/b');
  assert.deepEqual(pluginState(d), { run: 'a/b', span: '1' });
  assert.equal(serializeHash(d), h);
  const next = withPluginState(h, { run: 'x=y&z', worker: 'w', span: '2', step: undefined });
  assert.equal(next, '#llm_diag&smoothing=0.6&p.llm_diag.run=x%3Dy%26z&p.llm_diag.worker=w&p.llm_diag.span=2');
  assert.deepEqual(pluginState(parseHash(next)), { run: 'x=y&z', worker: 'w', span: '2' });
  assert.deepEqual(parseHash(''), {});
  assert.deepEqual(parseHash('#a&%E0%A4%A=1&b=2'), { __tab__: 'a', b: '2' });
});

test('visibleRange finds the intervals under a window', () => {
  const s = [0, 10, 20, 30, 40];
  const d = [5, 5, 15, 5, 5];
  assert.deepEqual(visibleRange(s, d, 12, 31), [1, 4]);
  assert.deepEqual(visibleRange(s, d, 33, 34), [2, 4]); // [20,35) still runs at 33
  assert.deepEqual(visibleRange(s, d, 100, 200), [5, 5]);
  assert.deepEqual(visibleRange([], [], 0, 1), [0, 0]);
});

test('layoutTicks gives round steps', () => {
  assert.deepEqual(layoutTicks(0, 100, 5), [0, 20, 40, 60, 80, 100]);
  assert.deepEqual(layoutTicks(5, 5, 5), []);
  assert.deepEqual(layoutTicks(1_000_000, 3_000_000, 2), [1_000_000, 2_000_000, 3_000_000]);
});

test('short kernel names for labels, evidence labels, saving line', async () => {
  const { shortKernelName, evidenceLabels, fmtSaving } = await import('./format.js');
  assert.equal(shortKernelName('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)'), 'vectorized_elementwise_kernel');
  assert.equal(shortKernelName('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas'), 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas');
  assert.equal(shortKernelName('Memcpy HtoD (Pageable -> Device)'), 'Memcpy HtoD (Pageable -> Device)');
  assert.equal(shortKernelName('cudaLaunchKernel'), 'cudaLaunchKernel');
  assert.equal(shortKernelName('void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(float*, float const*, int, int, int, bool const*, int, bool)'), 'softmax_warp_forward');
  assert.deepEqual(evidenceLabels(['host_op', 'host_op_share', 'host_op_ns', 'kernel_median_ns']), ['host op', 'host op share', 'host op time', 'kernel median']);
  assert.equal(fmtSaving({ share: 0.924, ns: 531e6 }), 'saves ~92% of the step (531 ms)');
  assert.equal(fmtSaving({ share: 0.00006, ns: 35_500 }), 'saves <0.1% of the step (35.5 µs)');
  assert.equal(fmtSaving(null), 'saving not estimable');
});

test('tick labels keep enough digits to tell neighbours apart', async () => {
  const { fmtTick } = await import('./timeline_math.js');
  assert.equal(fmtTick(485_010_000, 10_000), '485.01 ms');
  assert.equal(fmtTick(200_000_000, 100_000_000), '200 ms');
  assert.equal(fmtTick(1_500_000, 500_000), '1.5 ms');
  assert.equal(fmtTick(2_500_000_000, 500_000_000), '2.5 s');
  assert.equal(fmtTick(750, 250), '750 ns');
});
