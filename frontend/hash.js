// Pure parsing/serialising of TensorBoard's URL hash ("#tab&key=value&..."), the format of
// tf_storage: a part without "=" is the active tab, keys and values are URI-encoded.
// Plugin state lives in keys "p.llm_diag.<key>".

export const PREFIX = 'p.llm_diag.';
export const TAB_KEY = '__tab__';

export function parseHash(hash) {
  const out = {};
  const s = String(hash || '').replace(/^#/, '');
  if (!s) return out;
  for (const part of s.split('&')) {
    if (!part) continue;
    const kv = part.split('=');
    try {
      if (kv.length === 1) out[TAB_KEY] = decodeURIComponent(kv[0]);
      else if (kv.length === 2) out[decodeURIComponent(kv[0])] = decodeURIComponent(kv[1]);
    } catch (e) {
      // a malformed escape in someone else's key: skip it, keep the rest
    }
  }
  return out;
}

export function serializeHash(dict) {
  const parts = [];
  if (dict[TAB_KEY]) parts.push(encodeURIComponent(dict[TAB_KEY]));
  for (const [k, v] of Object.entries(dict)) {
    if (k === TAB_KEY || v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  }
  return parts.length ? `#${parts.join('&')}` : '';
}

/** Our keys only, without the prefix. */
export function pluginState(dict) {
  const out = {};
  for (const [k, v] of Object.entries(dict)) if (k.startsWith(PREFIX)) out[k.slice(PREFIX.length)] = v;
  return out;
}

/** The hash with our keys replaced by `state` (others' keys and the tab kept). */
export function withPluginState(hash, state) {
  const dict = parseHash(hash);
  for (const k of Object.keys(dict)) if (k.startsWith(PREFIX)) delete dict[k];
  for (const [k, v] of Object.entries(state)) if (v !== undefined && v !== null && v !== '') dict[PREFIX + k] = String(v);
  return serializeHash(dict);
}
