// node --test frontend/*.test.mjs : how api.js reads the server's answers (the error path).
import test from 'node:test';
import assert from 'node:assert/strict';
import { settled } from './api.js';

test('a failed analysis (422) stays an error', () => {
  const body = { run: 'r', status: 'error', error: 'analysis failed: RuntimeError: boom' };
  assert.deepEqual(settled(422, body), { code: 422, body });
});

test('a 202 that says error is an error, never progress', () => {
  const body = { run: 'r', status: 'error', error: 'the analysis process died' };
  assert.deepEqual(settled(202, body), { code: 422, body });
  assert.deepEqual(settled(202, { status: 'error', error: null }).body.error, 'the analysis failed');
});

test('progress and results pass through', () => {
  const prog = { status: 'analysing', phase: 'reading' };
  assert.deepEqual(settled(202, prog), { code: 202, body: prog });
  assert.deepEqual(settled(200, { status: 'error', error: 'not a trace' }), { code: 200, body: { status: 'error', error: 'not a trace' } });
});
