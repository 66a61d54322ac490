// node --test: compare mode's pure helpers (compare_data.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { baseFromState, baseToState, baselineChoices, bandText, cardRows, changeText, judgement, overlay, rankBars, tone,
  validBase } from './compare_data.js';

const runs = [
  { run: 'seed', workers: [{ worker: 'rank0', spans: [{ span: '1', status: 'ready' }] }] },
  { run: 'fixed', workers: [{ worker: 'rank0', spans: [{ span: '1', status: 'ready' }, { span: '2', status: 'pending' }] }] },
];

test('the baseline lives in the hash as base_run / base_worker / base_span', () => {
  assert.deepEqual(baseFromState({ run: 'a', base_run: 'seed', base_worker: 'rank0', base_span: '1' }),
    { run: 'seed', worker: 'rank0', span: '1' });
  assert.equal(baseFromState({ base_run: 'seed' }), null);
  assert.deepEqual(baseToState({ run: 'seed', worker: 'rank0', span: '1' }), { base_run: 'seed', base_worker: 'rank0', base_span: '1' });
  assert.deepEqual(baseToState(null), {});
});

test('baseline choices: every span but the selection, with full names where a run has several', () => {
  const sel = { run: 'fixed', worker: 'rank0', span: '1' };
  const c = baselineChoices(runs, sel);
  assert.deepEqual(c.map((x) => x.label), ['seed', 'fixed · rank0 · 2']);
  assert.deepEqual(c[1].sel, { run: 'fixed', worker: 'rank0', span: '2' });
  assert.deepEqual(validBase(runs, sel, { run: 'seed', worker: 'rank0', span: '1' }), { run: 'seed', worker: 'rank0', span: '1' });
  assert.equal(validBase(runs, sel, sel), null);
  assert.equal(validBase(runs, sel, { run: 'gone', worker: 'rank0', span: '1' }), null);
});

test('change and noise band texts', () => {
  assert.equal(changeText({ change: 0.123 }), '+12.3 %');
  assert.equal(changeText({ change: -0.831 }), '−83.1 %');
  assert.equal(changeText({ change: 10.2 }), '11.2x');
  assert.equal(changeText({ change: null, before: 0, after: 3 }), 'new');
  assert.equal(changeText({ change: null, before: null, after: 3 }), '—');
  assert.equal(bandText({ noise: { band_lo_change: -0.896, band_hi_change: -0.745 } }, String), '−89.6 … −74.5 %');
  assert.equal(bandText({ unit: 'share', noise: { band_lo: 0.01, band_hi: 0.02, band_lo_change: null, band_hi_change: null } },
    (v, u) => `${v}${u}`), '0.01share … 0.02share');
  assert.equal(bandText({ noise: null }, String), '—');
});

test('judgement and tone follow the row flags', () => {
  const row = { comparable: true, direction: 'worse', beyond_tolerance: true, beyond_noise: true, regressed: true, before: 1, after: 2 };
  assert.equal(judgement(row), 'worse, beyond tolerance, beyond noise, REGRESSED');
  assert.equal(tone(row), 'bad');
  assert.equal(judgement({ ...row, comparable: false }), 'not compared');
  assert.equal(tone({ ...row, regressed: false, direction: 'better', beyond_noise: null }), 'good');
  assert.equal(tone({ ...row, regressed: false, direction: 'better', beyond_noise: false }), '');
  assert.equal(judgement({ comparable: true, direction: 'changed', beyond_tolerance: false, beyond_noise: null }), 'changed, within tolerance');
});

test('cards and the per-step overlay', () => {
  const doc = {
    metrics: [{ key: 'headline.step_median_ns', before: 2, after: 1 }, { key: 'headline.tokens_per_s', before: 1, after: 2 },
      { key: 'headline.mfu_share', before: null, after: 0.1 }],
    before: { step_durations_ns: [5, 6, 7, 8] }, after: { step_durations_ns: [3, 4, 5] },
  };
  assert.deepEqual(cardRows(doc).map((r) => r.key), ['headline.tokens_per_s', 'headline.step_median_ns']);
  assert.deepEqual(overlay(doc), { x: [1, 2, 3, 4], before: [5, 6, 7, 8], after: [3, 4, 5, null] });
});

const jobRuns = [
  { run: 'slow', workers: [{ worker: 'rank0', spans: [{ span: '1', status: 'ready' }] }, { worker: 'rank1', spans: [{ span: '1', status: 'ready' }] }] },
  { run: 'fast', workers: [{ worker: 'rank0', spans: [{ span: '1', status: 'ready' }] }, { worker: 'rank1', spans: [{ span: '1', status: 'ready' }] }] },
  { run: 'single', workers: [{ worker: 'rank0', spans: [{ span: '1', status: 'ready' }] }] },
];

test('a job baseline: in the hash as base_level=job, offered first when the selection is a rank of a job', () => {
  const b = { run: 'slow', worker: null, span: '1', level: 'job' };
  assert.deepEqual(baseToState(b), { base_run: 'slow', base_span: '1', base_level: 'job' });
  assert.deepEqual(baseFromState({ base_run: 'slow', base_span: '1', base_level: 'job' }), b);
  const sel = { run: 'fast', worker: 'rank1', span: '1' };
  const c = baselineChoices(jobRuns, sel);
  assert.deepEqual(c.map((x) => x.label), ['job slow (2 ranks)', 'slow · rank0 · 1', 'slow · rank1 · 1', 'fast · rank0 · 1', 'single']);
  assert.equal(c[0].value, 'job:["slow","1"]');
  assert.deepEqual(validBase(jobRuns, sel, b), b);
  // a single run is not a job: no job choices
  assert.deepEqual(baselineChoices(jobRuns, { run: 'single', worker: 'rank0', span: '1' }).map((x) => x.label),
    ['slow · rank0 · 1', 'slow · rank1 · 1', 'fast · rank0 · 1', 'fast · rank1 · 1']);
  assert.equal(validBase(jobRuns, { run: 'single', worker: 'rank0', span: '1' }, b), null);
});

test('job cards and per-rank bars', () => {
  const doc = {
    level: 'job',
    metrics: [{ key: 'job.job_step_ns', before: 2, after: 1 }, { key: 'job.tokens_per_s', before: 1, after: 2 },
      { key: 'job.straggler_others_wait_share', before: 0.2, after: null }],
    ranks: [{ rank: '0', step_median_ns_before: 200, step_median_ns_after: 50, change: -0.75, noise: { beyond: true } },
      { rank: '1', step_median_ns_before: 100, step_median_ns_after: 100, change: 0, noise: null }],
  };
  assert.deepEqual(cardRows(doc).map((r) => r.key), ['job.tokens_per_s', 'job.job_step_ns']);
  assert.deepEqual(rankBars(doc), [
    { rank: '0', before: 200, after: 50, change: -0.75, beyond: true, width: { before: 100, after: 25 } },
    { rank: '1', before: 100, after: 100, change: 0, beyond: null, width: { before: 50, after: 50 } },
  ]);
});
