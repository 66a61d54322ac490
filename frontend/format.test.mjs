// node --test frontend/*.test.mjs : the pure modules of the tab.
import test from 'node:test';
import assert from 'node:assert/strict';
import { formatInterval, fmtDuration, fmtShare, fmtBytes, fmtCount, formatValue, humanKey, median, statusLabel, sig } from './format.js';
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
  assert.equal(fmtShare(0.1234), '12.3 %');
  assert.equal(fmtShare(0.0001), '<0.1 %');
  assert.equal(fmtShare(0), '0.0 %');
  assert.equal(fmtShare(undefined), '—');
  // binary units, one decimal: the same strings as tb_llmdiag/units.py fmt_bytes in the finding summaries
  assert.equal(fmtBytes(18_865_979_392), '17.6 GiB'); // 18865979392 / 2^30 = 17.570
  assert.equal(fmtBytes(85_017_493_504), '79.2 GiB'); // 79.179
  assert.equal(fmtBytes(124_800), '121.9 KiB'); // 121.875
  assert.equal(fmtBytes(110_300_000), '105.2 MiB'); // 105.190
  assert.equal(fmtBytes(1024), '1.0 KiB');
  assert.equal(fmtBytes(999), '999 B');
  assert.equal(fmtCount(1478), '1478');
  assert.equal(fmtCount(14_780), '14.8 k');
  assert.equal(fmtCount(2_500_000), '2.5 M');
  assert.equal(sig(0.456), '0.46');
  assert.equal(sig(0.00051), '0.00051');
  assert.equal(sig(0), '0');
});

test('formatValue writes each unit of the registry vocabulary', () => {
  const cases = [
    [512, 'ns', '512 ns'], [1234, 'ns', '1.23 µs'], [165_300_000, 'ns', '165 ms'], [2_075_355_336, 'ns', '2.08 s'],
    [18_865_979_392, 'bytes', '17.6 GiB'], [1.5 * 2 ** 30, 'bytes_per_s', '1.5 GiB/s'],
    [0.2219070289470763, 'share', '22.2 %'], [0.00006, 'share', '<0.1 %'],
    [14_780, 'count', '14.8 k'], [12, 'count', '12'], [5815.5, 'count_per_step', '5816'], [0.3333, 'count_per_step', '0.33'],
    [1953.7985, 'per_s', '1954/s'], [3.2e14, 'flop', '320 TFLOP'], [9.89e14, 'flop_per_s', '989 TFLOP/s'], [512, 'flop', '512 FLOP'],
    [989.4, 'tflop_per_s', '989 TFLOP/s'], [1979, 'tflop_per_s', '1.98 PFLOP/s'],
    [0.18708, 'ratio', '0.19'], [1.7093562, 'ratio', '1.71'],
    [103_869, 'id', '103869'], [12_345_678, 'index', '12345678'], [3, 'index', '3'],
    ['aten::mm', 'text', 'aten::mm'],
    // no unit (a key the registry does not name): the number in full, never abbreviated
    [103_869, null, '103869'], [0.4963, undefined, '0.5'],
  ];
  for (const [v, unit, want] of cases) assert.equal(formatValue(v, unit), want, `${v} ${unit}`);
});

test('formatValue: unknown values, booleans, lists, objects', () => {
  for (const unit of ['ns', 'bytes', 'share', 'id', null]) {
    assert.equal(formatValue(null, unit), '—');
    assert.equal(formatValue(undefined, unit), '—');
    assert.equal(formatValue(NaN, unit), '—');
    assert.equal(formatValue(Infinity, unit), '—');
  }
  assert.equal(formatValue(true, 'count'), 'yes');
  assert.equal(formatValue(true, 'flag'), 'yes');
  assert.equal(formatValue(false, null), 'no');
  assert.equal(formatValue([103_869, 103_870], 'id'), '103869, 103870');
  assert.equal(formatValue([3], 'index'), '3');
  assert.equal(formatValue([1000, 2_500_000], 'ns'), '1 µs, 2.5 ms');
  assert.equal(formatValue([], 'ns'), 'none');
  assert.equal(formatValue([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'index'), '1, 2, 3, 4, 5, 6, 7, 8, … (2 more)');
  assert.equal(formatValue({ a: 1 }, null), '{"a":1}');
});

test('humanKey', () => {
  assert.equal(humanKey('pageable_time_ns'), 'pageable time');
  assert.equal(humanKey('stall_share'), 'stall share');
});

test('median and status labels', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  assert.equal(median([]), null);
  assert.equal(statusLabel('run', 'ready'), 'run');
  assert.equal(statusLabel('run', 'analysing'), 'run (analysing…)');
  assert.equal(statusLabel('run', 'writing'), 'run (still being written…)');
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
  assert.equal(fmtSaving({ basis: 'median_step', share: 0.91, ns: 523_250_000, step_ns: 575e6 }),
    'saves at most 523 ms of the 575 ms median step (91.0 %)');
  assert.equal(fmtSaving({ basis: 'mean_step', share: 0.00006, ns: 35_500, step_ns: 591_666_667 }),
    'saves at most 35.5 µs of the 592 ms mean step (<0.1 %)');
  assert.equal(fmtSaving({ basis: 'median_step', share: 0, ns: 0, step_ns: 575e6 }), 'saves nothing of the 575 ms median step once the findings above it are fixed');
  assert.equal(fmtSaving({ basis: 'window', share: 0.25, ns: null, step_ns: null }), 'saves at most 25.0 % of the profiled window');
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

test('formatInterval writes a pair in its unit, anything else as a dash', () => {
  assert.equal(formatInterval([0.401, 0.523], 'share'), '40.1 % – 52.3 %');
  assert.equal(formatInterval([-0.152, 0.207], 'share'), '-15.2 % – 20.7 %');
  assert.equal(formatInterval([12345, 2150000], 'ns'), '12.3 µs – 2.15 ms');
  assert.equal(formatInterval(null, 'share'), '—');
  assert.equal(formatInterval([0.1], 'share'), '—');
  assert.equal(formatInterval([0.1, null], 'share'), '10.0 % – —');
});
