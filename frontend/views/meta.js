// The line under the cards: the device, the rank, the trace's kind and size; a cut file's note; the report's warnings.

import { h, clear } from '../dom.js';
import { fmtBytes, formatValue } from '../format.js';
import { unitOf } from '../registry.js';
import { deviceKind } from './data.js';

/** How far the read of a cut file got (read_state): a share when the reader stopped inside the file (invalid
 * JSON), else how much text was read before the file's end (a cut file: its full size is unknown). */
export function truncatedWhere(rs) {
  if (!rs) return 'only part of the file was read';
  if (typeof rs.read_share === 'number' && rs.read_share < 0.9995) return `the read stopped at ${Math.round(rs.read_share * 100)} % of the file`;
  return typeof rs.read_bytes === 'number' ? `the file ends early, after ${fmtBytes(rs.read_bytes)} of trace text` : 'the file ends early';
}

export function renderMeta(el, report) {
  const s = report.summary || {};
  const kind = deviceKind(report);
  const dev = s.device ? `${s.device.name}${s.device.count > 1 ? ` ×${s.device.count}` : ''}`
    : kind === 'CPU' ? 'no device activity in trace (CPU only)' : `${kind} (model not recorded)`;
  const dist = s.distributed && s.distributed.world_size ? ` · rank ${s.distributed.rank} of ${s.distributed.world_size}` : '';
  const rs = report.read_state;
  const cut = report.status === 'partial' || (rs && rs.complete === false);
  clear(el).append(
    h('span', { text: `${dev}${dist} · ${report.source_kind} · ${formatValue(report.size_bytes, unitOf('trace.size_bytes'))}` }),
    // a cut file: say how far the read got and what is left out (docs/report_schema.md read_state)
    ...(cut ? [h('div', { class: 'warn truncated', role: 'status', text: `Truncated: ${truncatedWhere(rs)}${report.error ? ` (${report.error})` : ''}. The figures cover what was read; findings that need the whole file (no device activity, peak memory) and MFU are left out.` })] : []),
    ...(report.warnings || []).slice(0, 5).map((w) => h('div', { class: 'warn', text: `⚠ ${w}` })));
}

export function metaView(el) {
  return {
    render(s) { if (s.report.status === 'ok') renderMeta(el, s.report.body); },
    destroy() { clear(el); },
  };
}
