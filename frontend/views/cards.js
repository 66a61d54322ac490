// Headline cards: step time, device busy (named by the device: GPU, MTIA, TPU), copy vs GEMM, launches per step, MFU and tokens/s when known.

import { h, clear } from '../dom.js';
import { formatValue, fmtWhatIf, isNum, median } from '../format.js';
import { unitOf } from '../registry.js';
import { busyIsBad, deviceKind, hasHostLaunches, stepRows, workload, xlaTopic } from './data.js';

/** A headline value (RunReport.headline) formatted in the unit the registry gives "headline.<name>". */
export function fmtHeadline(hl, name) {
  return formatValue(hl[name], unitOf(`headline.${name}`));
}

function card(label, value, sub, opts = {}) {
  return h('div', { class: `card ${opts.tone || ''}`, title: opts.title || null },
    h('div', { class: 'card-label', text: label }),
    h('div', { class: 'card-value', text: value }),
    sub ? h('div', { class: 'card-sub', text: sub }) : null);
}

/** Headline numbers, falling back to the report's step rows while the headline is absent. */
export function headline(report) {
  const hl = (report && report.headline) || {};
  const steps = stepRows(report).map((s) => s.duration_ns);
  const med = isNum(hl.step_median_ns) ? hl.step_median_ns : median(steps);
  const min = isNum(hl.step_min_ns) ? hl.step_min_ns : (steps.length ? Math.min(...steps) : null);
  const max = isNum(hl.step_max_ns) ? hl.step_max_ns : (steps.length ? Math.max(...steps) : null);
  return { ...hl, step_median_ns: med, step_min_ns: min, step_max_ns: max, n_steps: steps.length };
}

export function mountCards(el) {
  return {
    update(report) {
      const hl = headline(report);
      const cards = [];
      const spread = isNum(hl.step_min_ns) && isNum(hl.step_max_ns)
        ? `${fmtHeadline(hl, 'step_min_ns')} – ${fmtHeadline(hl, 'step_max_ns')}${isNum(hl.step_cv) ? ` · CV ${fmtHeadline(hl, 'step_cv')}` : ''} · ${hl.n_steps} steps`
        : 'no step markers in this trace';
      cards.push(card('Step time (median)', fmtHeadline(hl, 'step_median_ns'), spread,
        { tone: isNum(hl.step_cv) && hl.step_cv > 0.1 ? 'warn' : '', title: 'Median step, its min–max range and coefficient of variation' }));
      const dev = deviceKind(report);
      if (dev !== 'CPU') { // a trace without device events has nothing to be busy
        cards.push(card(`${dev} busy`, fmtHeadline(hl, 'gpu_busy_share'), 'device busy within steps / step time; collectives excluded',
          { tone: busyIsBad(report) ? 'bad' : '' }));
      }
      if (isNum(hl.copy_share) || isNum(hl.gemm_share)) {
        const ratio = isNum(hl.copy_vs_gemm_ratio) ? `copy/GEMM ${fmtHeadline(hl, 'copy_vs_gemm_ratio')}×` : '';
        cards.push(card('Copy vs GEMM', `${fmtHeadline(hl, 'copy_share')} / ${fmtHeadline(hl, 'gemm_share')}`,
          `of device time${ratio ? ' · ' + ratio : ''}`, { tone: isNum(hl.copy_vs_gemm_ratio) && hl.copy_vs_gemm_ratio > 0.5 ? 'warn' : '' }));
      }
      const xla = xlaTopic(report);
      if (!hasHostLaunches(report)) {
        if (xla && isNum(xla.recompile_in_loop_count)) {
          const n = xla.recompile_in_loop_count;
          const steps = (xla.recompile_steps || []).map((s) => `#${formatValue(s, unitOf('xla.recompile_steps[]'))}`).join(', ');
          cards.push(card('Recompiles in the loop', formatValue(n, unitOf('xla.recompile_in_loop_count')),
            n ? `${formatValue(xla.recompile_in_loop_time_ns, unitOf('xla.recompile_in_loop_time_ns'))} compiling${steps ? ` · step ${steps}` : ''}` : 'the step graph compiled once',
            { tone: n ? 'bad' : '', title: 'XLA compilations inside the training loop (after the first step)' }));
        }
      } else if (isNum(hl.launches_per_step)) {
        cards.push(card('Launches / step', fmtHeadline(hl, 'launches_per_step'), 'kernel + copy launches'));
      }
      if (isNum(hl.mfu_share) && dev !== 'CPU') cards.push(card('MFU', fmtHeadline(hl, 'mfu_share'), 'model FLOPs / peak'));
      if (isNum(hl.tokens_per_s)) {
        const wl = workload(report);
        cards.push(card('Throughput', fmtHeadline(hl, 'tokens_per_s'),
          wl === 'inference' ? 'token slots of the median step per second (prompt and generated)' : 'token slots of the median step per second (padding included)'));
      }
      const inf = report && report.metrics && report.metrics.inference;
      if (isNum(hl.generated_tokens_per_s) || isNum(hl.time_per_output_token_ns)) {
        // inference as serving users count it: generated tokens only, and the time between two of a sequence's tokens
        const phases = inf && inf.available
          ? `prefill ${formatValue(inf.prefill_ns, unitOf('inference.prefill_ns'))} · decode ${formatValue(inf.decode_ns, unitOf('inference.decode_ns'))}`
          : '';
        cards.push(card('Generated tokens/s', fmtHeadline(hl, 'generated_tokens_per_s'),
          `${isNum(hl.time_per_output_token_ns) ? `${fmtHeadline(hl, 'time_per_output_token_ns')} per output token` : ''}${phases ? ` · ${phases}` : ''}`,
          { title: 'Tokens the decode steps generate per second (prompt tokens excluded), time per output token, prefill and decode time' }));
      }
      // the top finding's own what-if: its saving, the numbers its card, the CLI and --json show
      const top = Array.isArray(report && report.findings) ? report.findings[0] : null;
      const wi = report && report.what_if;
      if (top && wi && wi.finding_id === top.id && isNum(wi.step_ns_if_fixed) && wi.step_ns_if_fixed > 0) {
        const tokens = isNum(wi.tokens_per_s) && isNum(wi.tokens_per_s_if_fixed)
          ? ` · ${formatValue(wi.tokens_per_s, unitOf('what_if.tokens_per_s'))} → at most ${formatValue(wi.tokens_per_s_if_fixed, unitOf('what_if.tokens_per_s_if_fixed'))} tokens`
          : '';
        cards.push(card('At most, if the top finding were fixed', formatValue(wi.step_ns_if_fixed, unitOf('what_if.step_ns_if_fixed')),
          `${fmtWhatIf(top.saving)}${tokens}${unprofiledText(wi)}`, { tone: 'good', title: top.title || '' }));
      }
      clear(el).append(...cards);
    },
    destroy() { clear(el); },
  };
}

// the same what-if on the unprofiled median step the capture helper timed (the profiled step also holds the
// profiler's own cost), when the capture holds it: stated beside the one saving, never instead of it
export function unprofiledText(wi) {
  const up = wi && wi.unprofiled;
  if (!up || !isNum(up.step_ns) || !isNum(up.step_ns_if_fixed) || !(up.step_ns > 0)) return '';
  return ` · unprofiled ${formatValue(up.step_ns, unitOf('what_if.unprofiled.step_ns'))} → at most ${formatValue(up.step_ns_if_fixed, unitOf('what_if.unprofiled.step_ns_if_fixed'))}`;
}
