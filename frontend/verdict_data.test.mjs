// node --test: the first screen's words (verdict_data.js) on the shapes of the demo runs' reports.
import test from 'node:test';
import assert from 'node:assert/strict';
import { firstSentence, trustLine, verdictOf } from './verdict_data.js';

const SEED_SUMMARY = 'For 92.3 % of step time the GPU has run out of queued work and waits for the host to launch more (GPU busy 7.4 %; 5816 launches per step, median kernel 4.42 µs); while it waits the host is spread over 11 activities.';

test('the cause is the summary up to its first clause, parentheses kept whole', () => {
  assert.equal(firstSentence(SEED_SUMMARY), 'For 92.3 % of step time the GPU has run out of queued work and waits for the host to launch more (GPU busy 7.4 %; 5816 launches per step, median kernel 4.42 µs).');
  assert.equal(firstSentence('XLA compiled jit_train_step (program 103869) again inside the loop (recompiles: 1; in steps: 3), taking 2.08 s, 95.0 % of step time; a steady step takes 3.93 ms.'),
    'XLA compiled jit_train_step (program 103869) again inside the loop (recompiles: 1; in steps: 3), taking 2.08 s, 95.0 % of step time.');
  assert.equal(firstSentence('Rank 1 is the straggler: it waits. At least 4.75 ms per step.'), 'Rank 1 is the straggler: it waits.');
  assert.equal(firstSentence('One clause only'), 'One clause only');
  assert.equal(firstSentence(null), '');
});

const seed = {
  findings: [{ id: 'host_bound', severity: 'high', title: 'The GPU waits for the host to launch work', summary: SEED_SUMMARY,
    saving: { basis: 'median_step', step_ns: 575018245, ns: 433972259, share: 0.7547, step_ns_if_fixed: 141045986 },
    fix: { text: 'Give the GPU more work per launch.', pytorch: 'model = torch.compile(model)' },
    caveat: "The profiler's own cost is 38 % of the profiled step (estimated from the trace)." }],
  what_if: { finding_id: 'host_bound', tokens_per_s: 2295.6, tokens_per_s_if_fixed: 9358.6 },
};

test('the verdict: the top finding, its saving and what-if, its fix; a job finding comes first', () => {
  const v = verdictOf(seed, null);
  assert.equal(v.title, 'The GPU waits for the host to launch work');
  assert.equal(v.saving, 'Saves at most 434 ms of the 575 ms median step (75.5 %)');
  assert.equal(v.whatIf, 'median step 575 ms → at most 141 ms (−75.5 %) · 2296/s → at most 9359/s tokens');
  assert.equal(v.fix.pytorch, 'model = torch.compile(model)');
  const job = { findings: [{ id: 'straggler', title: 'The other ranks wait', summary: 'Rank 1 is the straggler: x. More.', fix: 'Balance tokens per rank.',
    what_if: { step_ns: 31499460.1, step_after_ns: 24256757.3, saving_ns: 7242702.8, saving_share: 0.2299 } }] };
  const j = verdictOf(seed, job);
  assert.deepEqual([j.id, j.saving, j.fixText, j.cause], ['straggler', 'Saves at most 7.24 ms of the 31.5 ms job step (23.0 %)', 'Balance tokens per rank.', 'Rank 1 is the straggler: x.']);
  assert.equal(verdictOf({ findings: [] }, { findings: [] }), null);
});

test("the capture's trust: one line, a banner when the top finding carries the profiler's caveat or a problem warns", () => {
  const capture = { profiler_overhead_share: 0.376, overhead_basis: 'model', problems: [] };
  assert.deepEqual(trustLine(capture, verdictOf(seed, null)), { banner: true, text: seed.findings[0].caveat });
  const plain = { ...seed, findings: [{ ...seed.findings[0], caveat: null }] };
  assert.deepEqual(trustLine(capture, verdictOf(plain, null)),
    { banner: false, text: "Capture: the profiler's own cost is 37.6 % of the profiled step (estimated); nothing lost or unmatched." });
  const lost = { profiler_overhead_share: null, overhead_basis: 'none', problems: [{ severity: 'warning', text: '12 records dropped.' }, { severity: 'info', text: 'x' }] };
  assert.deepEqual(trustLine(lost, verdictOf(plain, null)),
    { banner: true, text: "Capture: the profiler's own cost is not estimated for this capture; 1 problem in what was recorded: 12 records dropped." });
  assert.equal(trustLine(null, null), null);
});
