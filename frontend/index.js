// Entry point: TensorBoard's plugin_entry.html imports this module and calls render().
// Kept tiny on purpose: the first /runs request, the metric registry and the stylesheets start before the rest of the tab's
// modules (and uPlot, loaded only when a chart is drawn) are fetched, so the first paint waits on
// one round of module loading, not on a chain of them.

import * as api from './api.js';

function loadCss(href) {
  return new Promise((resolve) => {
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = href;
    link.addEventListener('load', resolve);
    link.addEventListener('error', resolve);
    document.head.append(link);
  });
}

export async function render() {
  const early = {
    runs: api.runs(),
    registry: api.getMetricRegistry(),
    css: Promise.all([loadCss('./style.css'), loadCss('./vendor/uplot/uPlot.min.css')]),
  };
  const app = await import('./app.js');
  return app.start(early);
}
