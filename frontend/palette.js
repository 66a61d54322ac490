// Every colour a chart draws, in one place (issue #16): kernel categories (classify.CATEGORIES), the
// timeline's other device and host lanes, GPU busy and the causes of GPU idle time.
// Rules, checked by palette.test.mjs: all colours differ from each other by a visible margin (CIELAB
// distance >= 18), so no idle cause reads as a kind of work (copy vs "waiting for host launches",
// memcpy vs device sync, GEMM vs busy were the same before); idle causes are light tints, work is
// saturated; every colour stands off both the light and the dark card background (contrast >= 1.4:1),
// so one palette serves both themes. Labels drawn on a colour use textOn(colour).

/** Kernel categories: classify.py CATEGORIES, in its order. */
export const CATEGORY_COLORS = Object.freeze({
  gemm: '#1f6fc5', attention: '#6a3fd0', conv: '#14a9c2', copy: '#e8790c', elementwise: '#2e9e44', norm: '#95d17f',
  softmax: '#a8a21c', reduce: '#0f6e62', optimizer: '#8a5a44', quant: '#d65db1', index: '#c9a98c',
  moe: '#28d028', communication: '#9c6fc9', autotune: '#d828d8', memcpy: '#b8322a', memset: '#e59a73',
  other: '#8c8c8c',
});

/** The timeline's lanes other than kernels (timeline.CATEGORIES), GPU busy time and the time only collectives cover. */
export const LANE_COLORS = Object.freeze({
  busy: '#5c5f8a', device_sync: '#5a3d3d', launch: '#6b7f5a', runtime: '#b39ddb', sync: '#d81b60', data_loader: '#6d8fb3',
  collective: '#7b2d8e',
});

/** Causes of GPU idle time (idle.py gap causes); "other" also stands for idle time of unknown cause. */
export const IDLE_COLORS = Object.freeze({
  host_wait: '#ffd23f', sync: '#ff9eb5', data_loader: '#a9c8f0', other: '#d9d4c7',
});

/** The model's parts (metrics/anatomy/parts.py PARTS, then `other`), each the colour of the kernel category that
 *  does most of such a part's work, so every part keeps a colour distinct from the others. */
export const PART_COLORS = Object.freeze({
  embedding: CATEGORY_COLORS.index, attention: CATEGORY_COLORS.attention, mlp: CATEGORY_COLORS.gemm,
  norms: CATEGORY_COLORS.norm, lora: CATEGORY_COLORS.quant, moe: CATEGORY_COLORS.moe, lm_head: CATEGORY_COLORS.conv,
  loss: CATEGORY_COLORS.softmax, optimizer: CATEGORY_COLORS.optimizer, communication: CATEGORY_COLORS.communication,
  data_movement: CATEGORY_COLORS.copy, other: CATEGORY_COLORS.other,
});
/** Compiled graphs (`compiled_graph:<id>` parts) take these in turn: colours no named part uses. */
const GRAPH_COLORS = [CATEGORY_COLORS.reduce, CATEGORY_COLORS.elementwise, CATEGORY_COLORS.autotune, CATEGORY_COLORS.memset,
  CATEGORY_COLORS.memcpy, LANE_COLORS.launch, LANE_COLORS.data_loader, LANE_COLORS.runtime];

/** The colour of a model part; the i-th compiled graph of a report (`graphIndex`) cycles through GRAPH_COLORS. */
export function partColor(name, graphIndex = 0) {
  if (PART_COLORS[name]) return PART_COLORS[name];
  return String(name).startsWith('compiled_graph:') ? GRAPH_COLORS[graphIndex % GRAPH_COLORS.length] : CATEGORY_COLORS.other;
}

// Names that mean the same thing as a category above.
const CATEGORY_ALIASES = { kernel: 'other', collective: 'communication' };

/** The colour of a kernel category or a timeline lane category; unknown names get "other". */
export function categoryColor(name) {
  const n = CATEGORY_ALIASES[name] || name;
  return CATEGORY_COLORS[n] || LANE_COLORS[n] || CATEGORY_COLORS.other;
}

/** The colour of an idle cause (host_wait, sync, data_loader, other); unknown or no cause: "other". */
export function idleColor(cause) {
  return IDLE_COLORS[cause] || IDLE_COLORS.other;
}

export const BUSY_COLOR = LANE_COLORS.busy;

/** sRGB relative luminance (WCAG) of "#rrggbb". */
export function luminance(hex) {
  const n = parseInt(String(hex).slice(1), 16);
  const [r, g, b] = [n >> 16, (n >> 8) & 255, n & 255].map((v) => {
    const c = v / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG contrast ratio of two colours (1..21). */
export function contrast(a, b) {
  const x = luminance(a);
  const y = luminance(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}

/** Black or white, whichever reads better on `bg`. */
export function textOn(bg) {
  return contrast(bg, '#000000') >= contrast(bg, '#ffffff') ? '#000000' : '#ffffff';
}
