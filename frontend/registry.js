// The metric registry (tb_llmdiag/registry.py, served at ./metric_registry): for every number in a
// RunReport its unit, direction, noise tolerance, label and definition. Loaded once; views ask
// unitOf(key) and format with formatValue(value, unitOf(key)) (format.js).
//
// Keys are dotted paths relative to a run report: a metric topic's key is "topic.key" ("steps.median_ns",
// held at metrics.steps.median_ns), "summary.*", "headline.*", "what_if.*" are the report's sections and
// "trace.*" its own fields ("trace.size_bytes"); list items are "[]" ("steps.durations_ns[]") and map
// entries "*" ("kernels.by_category.*.time_ns"). A concrete key matches a pattern:
// "kernels.by_category.gemm.time_ns" and "steps.durations_ns[3]" find those two entries; a leading
// "metrics." is dropped. Evidence values of a finding have their unit in evidence_units[finding id][label].
//
// Until the registry has answered (or when it cannot: an older server), a key the registry does not name
// gets the unit its last segment's suffix declares (the report's naming rule: _ns, _bytes, _share...),
// else none, which formatValue writes in full.

import * as api from './api.js';

let entries = new Map(); // normalised pattern -> entry, for patterns without "*"
let wild = []; // [{tokens, entry}] for patterns with "*"
let units = {};
let evidence = {}; // finding id -> evidence label -> unit
let evidenceNames = {}; // finding id -> evidence key -> the label a user reads
let valueWords = {}; // named value -> its words (value_labels)
let loaded = null;

/** "a.b[3].c" / "a.b[].c" -> ["a", "b", "[]", "c"]; a leading "metrics." is dropped. */
export function tokens(key) {
  const t = String(key).replace(/\[\d*\]/g, '.[]').split('.').filter((s) => s !== '');
  return t[0] === 'metrics' ? t.slice(1) : t;
}

/**
 * Installs a registry document ({units, metrics: [{key, unit, ...}], evidence_units: {id: {label: unit}}});
 * returns how many entries it holds.
 */
export function setRegistry(doc) {
  entries = new Map();
  wild = [];
  units = (doc && typeof doc.units === 'object' && doc.units) || {};
  evidence = (doc && typeof doc.evidence_units === 'object' && doc.evidence_units) || {};
  evidenceNames = (doc && typeof doc.evidence_labels === 'object' && doc.evidence_labels) || {};
  valueWords = (doc && typeof doc.value_labels === 'object' && doc.value_labels) || {};
  const list = doc && Array.isArray(doc.metrics) ? doc.metrics : [];
  for (const e of list) {
    if (!e || typeof e.key !== 'string') continue;
    const t = tokens(e.key);
    if (t.includes('*')) wild.push({ t, entry: e });
    else entries.set(t.join('.'), e);
  }
  return list.length;
}

/**
 * Fetches the registry once (later calls share the first answer). `early`, when given, is a request already
 * on its way (index.js starts it beside /runs). Resolves true when the registry is installed, false when
 * the server did not give one (the name rule above then stands in).
 */
export function loadRegistry(early) {
  if (!loaded) {
    loaded = Promise.resolve(early || api.getMetricRegistry()).then((res) => {
      if (res && res.code === 200 && res.body && Array.isArray(res.body.metrics)) {
        setRegistry(res.body);
        return true;
      }
      return false;
    }, () => false);
  }
  return loaded;
}

function matches(pattern, t) {
  if (pattern.length !== t.length) return false;
  for (let i = 0; i < t.length; i++) {
    if (pattern[i] === t[i]) continue;
    if (pattern[i] === '*' && t[i] !== '[]') continue;
    return false;
  }
  return true;
}

/** The registry entry of a key (a concrete path or a pattern), or null. A list key finds its "[]" entry. */
export function entryOf(key) {
  if (key === null || key === undefined || key === '') return null;
  const t = tokens(key);
  for (const cand of [t, [...t, '[]']]) {
    const exact = entries.get(cand.join('.'));
    if (exact) return exact;
    const w = wild.find((x) => matches(x.t, cand));
    if (w) return w.entry;
  }
  return null;
}

// The report's naming rule, longest suffix first: what a key's name says its unit is.
const NAME_UNITS = [
  [/_bytes_per_s$/, 'bytes_per_s'], [/_flop_per_s$/, 'flop_per_s'], [/_per_s$/, 'per_s'], [/_per_step$/, 'count_per_step'],
  [/_ns$/, 'ns'], [/_bytes$/, 'bytes'], [/_share$/, 'share'], [/_flops?$/, 'flop'], [/_ratio$/, 'ratio'],
  [/(^|_)ids?$/, 'id'], [/(^|_)(index|indexes|indices)$/, 'index'], [/(^|_)count$/, 'count'],
];

/** The unit a key's last name declares by the naming rule, or null. */
export function unitFromName(key) {
  const t = tokens(key).filter((s) => s !== '[]');
  const last = t.length ? t[t.length - 1] : '';
  const hit = NAME_UNITS.find(([re]) => re.test(last));
  return hit ? hit[1] : null;
}

/** The unit of a report key: the registry's, else the one its name declares, else null. */
export function unitOf(key) {
  const e = entryOf(key);
  return e && typeof e.unit === 'string' && e.unit !== 'as_metric' ? e.unit : unitFromName(key);
}

/**
 * The unit of a finding's evidence value: the registry's evidence_units for the finding's id and label (the
 * unit of the metric the rule reads it from), else the unit the label's name declares, else null.
 */
export function evidenceUnitOf(findingId, label) {
  const byLabel = evidence[findingId];
  const u = byLabel && typeof byLabel === 'object' ? byLabel[label] : null;
  return typeof u === 'string' && u !== 'as_metric' ? u : unitFromName(label);
}

/** The label a user reads for a report key: the registry's, else the key's own words (never a raw key). */
export function labelOf(key) {
  const e = entryOf(key);
  if (e && typeof e.label === 'string' && e.label) return e.label;
  const t = tokens(key);
  return words(t.length ? t[t.length - 1] : String(key));
}

/** "pageable_host_ns" -> "pageable host": a key's words, its unit suffix dropped. */
export function words(key) {
  return String(key).replace(/_(ns|share|bytes)$/, '').replace(/_/g, ' ');
}

/** The label of a finding's evidence value: the registry's label of the metric it comes from, else its words. */
export function evidenceLabelOf(findingId, key) {
  const byKey = evidenceNames[findingId];
  const l = byKey && typeof byKey === 'object' ? byKey[key] : null;
  return typeof l === 'string' && l ? l : words(key);
}

/** Whether the registry gives a finding's evidence key a label of its own (not just the key's words). A tab
 *  that shows words(key) marks the row, and the e2e tests fail on it. */
export function evidenceLabelKnown(findingId, key) {
  const byKey = evidenceNames[findingId];
  const l = byKey && typeof byKey === 'object' ? byKey[key] : null;
  return typeof l === 'string' && l !== '' && l !== words(key) && !l.includes('_');
}

/** A named value of the report in words (the registry's value_labels: "lm_head" -> "LM head"), else as it is. */
export function valueLabelOf(v) {
  return typeof v === 'string' && typeof valueWords[v] === 'string' ? valueWords[v] : v;
}

/** A model part's name in words (tb_llmdiag/metrics/labels.py part_words): "compiled_graph:0/1" -> "compiled graph 0/1". */
export function partLabel(name) {
  const s = String(name);
  const at = s.indexOf(':');
  return at < 0 ? valueLabelOf(s) : `${valueLabelOf(s.slice(0, at))} ${s.slice(at + 1)}`;
}

/** The one-line definition of a key (for tooltips), or null. */
export function definitionOf(key) {
  const e = entryOf(key);
  return (e && e.definition) || null;
}

/** The registry's description of a unit (as served: a sentence), or null. */
export function unitInfo(unit) {
  return (unit && units[unit]) || null;
}
