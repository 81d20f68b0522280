// util.js: time ranges, query strings and number formatting shared by the views.

const UNIT_MS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 7 * 86400e3, M: 30 * 86400e3, y: 365 * 86400e3 };

// Parses a Pyroscope time: "now", "now-1h", unix seconds/ms/µs/ns by digit
// count, YYYYMMDD, or anything Date.parse reads (ISO). Returns ms or NaN.
export function parseTime(text, nowMs = Date.now()) {
  const s = String(text ?? '').trim();
  if (s === '' || s === 'now') return nowMs;
  let m = /^now\s*-\s*(\d+(?:\.\d+)?)\s*([smhdwMy])$/.exec(s);
  if (m) return nowMs - Number(m[1]) * UNIT_MS[m[2]];
  m = /^now\s*\+\s*(\d+(?:\.\d+)?)\s*([smhdwMy])$/.exec(s);
  if (m) return nowMs + Number(m[1]) * UNIT_MS[m[2]];
  if (/^\d{8}$/.test(s)) {
    const t = Date.UTC(+s.slice(0, 4), +s.slice(4, 6) - 1, +s.slice(6, 8));
    return Number.isNaN(t) ? NaN : t;
  }
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    if (s.length <= 10) return n * 1e3;
    if (s.length <= 13) return n;
    if (s.length <= 16) return Math.floor(n / 1e3);
    return Math.floor(n / 1e6);
  }
  const t = Date.parse(s);
  return Number.isNaN(t) ? NaN : t;
}

// "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="a"}" -> [type, "{...}"]
// The render endpoint's other form, {__name__="<type>", …}, is read too.
export function splitQuery(q) {
  const s = String(q ?? '').trim();
  const i = s.indexOf('{');
  if (i < 0) return { type: s, selector: '{}' };
  const type = s.slice(0, i).trim();
  const selector = s.slice(i).trim() || '{}';
  if (!type) {
    const name = matcherValue(selector, '__name__');
    if (name) return { type: name, selector: setMatcher(selector, '__name__', '') };
  }
  return { type, selector };
}

export function joinQuery(type, selector) {
  const sel = String(selector ?? '').trim();
  return `${type}${sel === '' ? '{}' : sel}`;
}

// Sets (or replaces) one `name="value"` matcher in a selector text.
export function setMatcher(selector, name, value) {
  let s = String(selector ?? '').trim();
  if (!s.startsWith('{')) s = '{}';
  const body = s.slice(1, s.lastIndexOf('}') >= 0 ? s.lastIndexOf('}') : s.length);
  const parts = splitMatchers(body).filter((p) => !new RegExp(`^\\s*${name}\\s*(=|!=|=~|!~)`).test(p));
  if (value !== '' && value != null) parts.unshift(`${name}="${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  return `{${parts.join(', ')}}`;
}

function splitMatchers(body) {
  const out = [];
  let cur = '';
  let inStr = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (inStr && c === '\\') { cur += c + (body[i + 1] ?? ''); i++; continue; }
    if (c === '"') inStr = !inStr;
    if (c === ',' && !inStr) { if (cur.trim()) out.push(cur.trim()); cur = ''; continue; }
    cur += c;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

export function matcherValue(selector, name) {
  const m = new RegExp(`${name}\\s*=\\s*"((?:[^"\\\\]|\\\\.)*)"`).exec(String(selector ?? ''));
  return m ? m[1].replace(/\\(.)/g, '$1') : '';
}

// Formats a sample value in the profile's unit.
export function formatValue(v, unit) {
  if (!Number.isFinite(v)) return '–';
  if (unit === 'nanoseconds') return formatDuration(v / 1e9);
  if (unit === 'bytes') {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return i === 0 ? `${x} B` : `${x.toFixed(x < 10 ? 2 : 1)} ${units[i]}`;
  }
  return formatCount(v);
}

export function formatCount(v) {
  const a = Math.abs(v);
  if (a < 1e4) return String(Math.round(v * 100) / 100);
  if (a < 1e6) return `${(v / 1e3).toFixed(1)}k`;
  if (a < 1e9) return `${(v / 1e6).toFixed(2)}M`;
  return `${(v / 1e9).toFixed(2)}G`;
}

export function formatDuration(sec) {
  const a = Math.abs(sec);
  if (a === 0) return '0 s';
  if (a < 1e-3) return `${(sec * 1e6).toFixed(0)} µs`;
  if (a < 1) return `${(sec * 1e3).toFixed(a < 0.01 ? 2 : 1)} ms`;
  if (a < 60) return `${sec.toFixed(2)} s`;
  if (a < 3600) return `${(sec / 60).toFixed(1)} min`;
  return `${(sec / 3600).toFixed(1)} h`;
}

export function formatPct(v) {
  if (!Number.isFinite(v)) return '–';
  return `${(v * 100).toFixed(v >= 0.1 || v === 0 ? 1 : 2)}%`;
}

export function formatTime(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// Small DOM helper: el('div', {class: 'x', onclick: f}, child, 'text', ...)
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k in e && k !== 'list' && typeof v !== 'string') e[k] = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function download(name, blob) {
  const url = URL.createObjectURL(blob);
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// The package of a symbol, for colouring: Go "pkg/path.Func" -> "pkg/path",
// C++/Rust "ns::f" -> "ns", Java/Python "a.b.C.m" -> "a.b", else the name.
export function packageOf(name) {
  let s = name.replace(/\(.*$/, '');
  const slash = s.lastIndexOf('/');
  if (s.includes('::')) return s.split('::')[0];
  const dot = s.indexOf('.', slash + 1);
  if (dot > 0) {
    const head = s.slice(0, dot);
    if (slash >= 0) return head;
    const parts = s.split('.');
    return parts.length > 2 ? parts.slice(0, -2).join('.') : parts[0];
  }
  return s.split(/[ :]/)[0];
}

// A frame no symbol names yet, as the server shows it (issue 31): "module+0xoffset"
// (the mapping's file or build id and the offset in that file) or a bare "0xaddress".
const UNRESOLVED = /^(?:[^;]+\+0x[0-9a-f]+|0x[0-9a-f]+)$/;
export function unresolvedFrame(name) {
  return UNRESOLVED.test(name);
}

export function hashString(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return h >>> 0;
}
