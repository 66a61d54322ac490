// What every view shares: a view that reads only the run report, as a view of the tab's state.

/** mount(el) -> {update(report), rebuild?, redraw?, destroy} as a view of the state: it draws each new report
 *  that is on screen (state.report ok), and redraws on a theme change. */
export function fromReport(mount) {
  return (el) => {
    const inner = mount(el);
    let shown = null;
    return {
      render(s) {
        const r = s.report.status === 'ok' ? s.report.body : null;
        if (r && r !== shown) inner.update(r);
        shown = r;
      },
      redraw() { if (inner.rebuild) inner.rebuild(); else if (inner.redraw) inner.redraw(); },
      destroy() { inner.destroy(); },
    };
  };
}
