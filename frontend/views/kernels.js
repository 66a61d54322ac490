// Device time by kernel category: one horizontal bar per category, copy vs GEMM visible at a glance.

import { h, clear } from '../dom.js';
import { formatValue } from '../format.js';
import { unitOf } from '../registry.js';
import { categoryColor } from '../palette.js';
import { kernelCategories } from './data.js';

export function mountKernels(el) {
  return {
    update(report) {
      clear(el);
      const rows = kernelCategories(report);
      if (!rows) {
        const dt = (report.summary && report.summary.device_time_ns) || {};
        const fallback = Object.entries(dt).map(([category, time_ns]) => ({ category, time_ns })).filter((r) => r.time_ns > 0);
        if (!fallback.length) {
          el.append(h('p', { class: 'muted', text: 'No device time in this trace (CPU-only run, or the profiler did not record CUDA activity).' }));
          return;
        }
        return this.draw(fallback, 'Kernel categories are not in this report; kernels, copies and memsets in total:');
      }
      this.draw(rows.filter((r) => r.time_ns > 0));
    },
    draw(rows, note) {
      if (!rows.length) {
        el.append(h('p', { class: 'muted', text: 'No device time in the analysed steps.' }));
        return;
      }
      const total = rows.reduce((a, r) => a + r.time_ns, 0) || 1;
      const max = rows[0].time_ns || 1;
      if (note) el.append(h('p', { class: 'muted', text: note }));
      const ns = (v) => formatValue(v, unitOf('kernels.by_category.*.time_ns'));
      el.append(h('div', { class: 'hbars' }, rows.map((r) => h('div', { class: 'hbar', title: `${r.category}: ${ns(r.time_ns)}` },
        h('span', { class: 'hbar-label', text: r.category }),
        h('span', { class: 'hbar-track' }, h('span', { class: 'hbar-fill', style: { width: `${(100 * r.time_ns) / max}%`, background: categoryColor(r.category) } })),
        h('span', { class: 'hbar-value', text: `${ns(r.time_ns)} · ${formatValue(r.time_ns / total, 'share')}` })))));
    },
    destroy() { clear(el); },
  };
}
