// The baseline picker ("Compare with") of the top bar: the runs (and jobs) this selection can be compared with.

import { h, clear } from '../dom.js';
import { baselineChoices, selKey } from '../compare_data.js';

export function baselineView(el, tab) {
  const select = h('select', { class: 'sel-base', 'aria-label': 'baseline', name: 'baseline' });
  el.hidden = true;
  el.append(h('span', { text: 'Compare with' }), select);
  let choices = [];
  select.addEventListener('change', () => {
    const c = choices.find((x) => x.value === select.value);
    tab.setBase(c ? c.sel : null);
  });
  return {
    render(s) {
      choices = s.sel ? baselineChoices(s.runs, s.sel) : [];
      el.hidden = !choices.length;
      const items = [{ value: '', label: '— none —' }, ...choices];
      const same = select.options.length === items.length
        && items.every((it, i) => select.options[i].value === it.value && select.options[i].textContent === it.label);
      if (!same) {
        clear(select);
        for (const it of items) select.append(h('option', { value: it.value, text: it.label }));
      }
      select.value = selKey(s.base);
    },
    destroy() { clear(el); },
  };
}
