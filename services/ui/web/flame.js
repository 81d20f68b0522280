// flame.js: flame graph data (decoded from ember's 4- and 7-number levels, or
// built from a tree) and a canvas renderer with zoom, search, hover and
// keyboard navigation. No DOM work per node: one canvas, typed arrays.

import { packageOf, hashString, unresolvedFrame } from './util.js';

const ROW = 18;              // px per level
const MIN_W = 0.35;          // narrower nodes are not drawn
const FONT = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';

// ---------------------------------------------------------------- data

// Decodes a querier.v1 FlameGraph (4 numbers a node: x delta, total, self,
// name) or FlameGraphDiff (7: left x delta, total, self, right x delta,
// total, self, name). int64s arrive as strings in Connect JSON.
export function decodeFlamegraph(fg, isDiff = false) {
  const names = fg.names || [];
  const levels = (fg.levels || []).map((l) => l.values || []);
  const step = isDiff ? 7 : 4;
  let n = 0;
  for (const v of levels) n += Math.floor(v.length / step);
  const d = newData(names, n, levels.length, isDiff);
  let k = 0;
  for (let li = 0; li < levels.length; li++) {
    const v = levels[li];
    d.levelStart[li] = k;
    let prevL = 0;
    let prevR = 0;
    for (let j = 0; j + step <= v.length; j += step, k++) {
      if (isDiff) {
        const lx = prevL + Number(v[j]); const lt = Number(v[j + 1]); const ls = Number(v[j + 2]);
        const rx = prevR + Number(v[j + 3]); const rt = Number(v[j + 4]); const rs = Number(v[j + 5]);
        prevL = lx + lt; prevR = rx + rt;
        d.x[k] = lx + rx; d.total[k] = lt + rt; d.self[k] = ls + rs; d.name[k] = Number(v[j + 6]);
        d.lt[k] = lt; d.ls[k] = ls; d.rt[k] = rt; d.rs[k] = rs;
      } else {
        const x = prevL + Number(v[j]); const t = Number(v[j + 1]);
        prevL = x + t;
        d.x[k] = x; d.total[k] = t; d.self[k] = Number(v[j + 2]); d.name[k] = Number(v[j + 3]);
      }
    }
  }
  d.levelStart[levels.length] = k;
  // ember's own field (docs/api.md): the names the server's symbolizer gave
  d.symbolizedNames = new Set((fg.symbolized || []).map((i) => names[Number(i)]));
  if (isDiff) {
    d.leftTicks = Number(fg.leftTicks || 0);
    d.rightTicks = Number(fg.rightTicks || 0);
  }
  linkParents(d);
  d.numTicks = n ? d.total[0] : 0;
  return d;
}

function newData(names, n, nLevels, isDiff) {
  const d = {
    names, n, nLevels,
    levelStart: new Int32Array(nLevels + 1),
    x: new Float64Array(n), total: new Float64Array(n), self: new Float64Array(n),
    name: new Int32Array(n), parent: new Int32Array(n).fill(-1),
    childStart: new Int32Array(n), childEnd: new Int32Array(n),
    diff: isDiff, numTicks: 0,
    symbolizedNames: new Set(),   // names the server's symbolizer gave (decodeFlamegraph)
  };
  if (isDiff) {
    d.lt = new Float64Array(n); d.ls = new Float64Array(n);
    d.rt = new Float64Array(n); d.rs = new Float64Array(n);
  }
  return d;
}

// Each level is sorted by x and nests in the one above: one merge pass a level.
function linkParents(d) {
  for (let li = 1; li < d.nLevels; li++) {
    let p = d.levelStart[li - 1];
    const pEnd = d.levelStart[li];
    for (let c = d.levelStart[li]; c < d.levelStart[li + 1]; c++) {
      while (p < pEnd && d.x[p] + d.total[p] <= d.x[c]) p++;
      if (p >= pEnd) break;
      d.parent[c] = p;
    }
  }
  for (let i = 0; i < d.n; i++) { d.childStart[i] = 0; d.childEnd[i] = 0; }
  for (let c = d.n - 1; c >= 0; c--) {
    const p = d.parent[c];
    if (p < 0) continue;
    if (d.childEnd[p] === 0) d.childEnd[p] = c + 1;
    d.childStart[p] = c;
  }
}

// Builds data from a tree {name, total, self, children[]} (sandwich views);
// symbolizedNames: those of the graph it comes from.
export function fromTree(root, symbolizedNames = new Set()) {
  const names = [];
  const index = new Map();
  const nameId = (s) => { let i = index.get(s); if (i === undefined) { i = names.length; names.push(s); index.set(s, i); } return i; };
  const levels = [];
  let cur = [{ node: root, x: 0 }];
  while (cur.length) {
    levels.push(cur);
    const next = [];
    for (const { node, x } of cur) {
      let cx = x;
      for (const ch of node.children) { next.push({ node: ch, x: cx }); cx += ch.total; }
    }
    cur = next;
  }
  let n = 0;
  for (const l of levels) n += l.length;
  const d = newData(names, n, levels.length, false);
  d.symbolizedNames = symbolizedNames;
  let k = 0;
  levels.forEach((l, li) => {
    d.levelStart[li] = k;
    for (const { node, x } of l) {
      d.x[k] = x; d.total[k] = node.total; d.self[k] = node.self; d.name[k] = nameId(node.name); k++;
    }
  });
  d.levelStart[levels.length] = k;
  linkParents(d);
  d.numTicks = n ? d.total[0] : 0;
  return d;
}

// Per function: self summed, total summed over the outermost frames only (a
// recursive function is not counted twice). Diff data also gives l*/r* sums.
export function topTable(d) {
  const rows = new Map();
  const onStack = new Int32Array(d.names.length);
  const row = (id) => {
    let r = rows.get(id);
    if (!r) { r = { name: d.names[id], self: 0, total: 0, ls: 0, lt: 0, rs: 0, rt: 0 }; rows.set(id, r); }
    return r;
  };
  // Iterative DFS from the root(s) of level 0.
  const stack = [];
  for (let i = d.levelStart[0]; i < d.levelStart[Math.min(1, d.nLevels)]; i++) stack.push(i);
  while (stack.length) {
    const i = stack.pop();
    if (i < 0) { onStack[d.name[~i]]--; continue; }
    const id = d.name[i];
    if (i < d.levelStart[1] && d.nLevels > 1 && d.names[id] === 'total') {   // the synthetic root
      for (let c = d.childEnd[i] - 1; c >= d.childStart[i] && d.childEnd[i] > 0; c--) stack.push(c);
      continue;
    }
    const r = row(id);
    r.self += d.self[i];
    if (d.diff) { r.ls += d.ls[i]; r.rs += d.rs[i]; }
    if (onStack[id] === 0) {
      r.total += d.total[i];
      if (d.diff) { r.lt += d.lt[i]; r.rt += d.rt[i]; }
    }
    onStack[id]++;
    stack.push(~i);
    for (let c = d.childEnd[i] - 1; c >= d.childStart[i] && d.childEnd[i] > 0; c--) stack.push(c);
  }
  return [...rows.values()];
}

// The sandwich of function `fname`: its callers (paths from the root, as an
// inverted tree rooted at the function) and its callees (subtrees merged).
export function sandwich(d, fname) {
  const id = d.names.indexOf(fname);
  const callees = { name: fname, total: 0, self: 0, children: [] };
  const callers = { name: fname, total: 0, self: 0, children: [] };
  if (id < 0) return null;
  const child = (t, name) => {
    t._m ??= new Map();
    let c = t._m.get(name);
    if (!c) { c = { name, total: 0, self: 0, children: [] }; t._m.set(name, c); t.children.push(c); }
    return c;
  };
  const mergeSub = (t, i) => {
    for (let c = d.childStart[i]; c < d.childEnd[i]; c++) {
      const ct = child(t, d.names[d.name[c]]);
      ct.total += d.total[c]; ct.self += d.self[c];
      mergeSub(ct, c);
    }
  };
  for (let i = 0; i < d.n; i++) {
    if (d.name[i] !== id) continue;
    let outer = true;
    for (let p = d.parent[i]; p >= 0; p = d.parent[p]) if (d.name[p] === id) { outer = false; break; }
    if (!outer) continue;
    callees.total += d.total[i]; callees.self += d.self[i];
    mergeSub(callees, i);
    callers.total += d.total[i]; callers.self += d.self[i];
    let t = callers;
    for (let p = d.parent[i]; p >= 0; p = d.parent[p]) {
      t = child(t, d.names[d.name[p]]);
      t.total += d.total[i];
    }
  }
  const sortTree = (t) => { t.children.sort((a, b) => b.total - a.total); t.children.forEach(sortTree); delete t._m; };
  sortTree(callees); sortTree(callers);
  return { callers: fromTree(callers, d.symbolizedNames), callees: fromTree(callees, d.symbolizedNames) };
}

// ---------------------------------------------------------------- colours

// Colours by package, computed on first use: a draw touches only the few
// thousand frames wide enough to see, not every name.
class Palette {
  constructor(d, dark, theme) {
    this.names = d.names;
    this.symbolizedNames = d.symbolizedNames || new Set();
    this.theme = theme;
    this.dark = dark;
    this.byName = new Array(d.names.length);
    this.byPkg = new Map();
  }

  get(id) {
    let c = this.byName[id];
    if (c !== undefined) return c;
    // Both outside the warm hues of names the client sent: a debug file on the
    // server named it at query time (teal), or none has yet (grey-blue).
    if (this.symbolizedNames.has(this.names[id]) || unresolvedFrame(this.names[id])) {
      c = this.symbolizedNames.has(this.names[id]) ? this.theme.symbolized : this.theme.unresolved;
      this.byName[id] = c;
      return c;
    }
    const pkg = packageOf(this.names[id]);
    c = this.byPkg.get(pkg);
    if (!c) {
      const h = hashString(pkg);
      const hue = 10 + (h % 50);           // warm: red to yellow, like other flame graphs
      const sat = 60 + ((h >>> 8) % 25);
      const lig = this.dark ? 38 + ((h >>> 16) % 14) : 62 + ((h >>> 16) % 16);
      c = `hsl(${hue},${sat}%,${lig}%)`;
      this.byPkg.set(pkg, c);
    }
    this.byName[id] = c;
    return c;
  }
}

// Diff: the change of the node's share, right vs left, in 13 buckets from
// green (smaller) through grey to red (larger).
const DIFF_STEPS = 6;
function diffPalette(dark) {
  const out = [];
  for (let s = -DIFF_STEPS; s <= DIFF_STEPS; s++) {
    const a = Math.abs(s) / DIFF_STEPS;
    const hue = s < 0 ? 130 : 0;
    const sat = s === 0 ? 0 : 35 + 50 * a;
    const lig = dark ? 32 + 10 * a : 85 - 30 * a;
    out.push(`hsl(${hue},${sat}%,${lig}%)`);
  }
  return out;
}

export function diffChange(d, i) {
  const lp = d.leftTicks ? d.lt[i] / d.leftTicks : 0;
  const rp = d.rightTicks ? d.rt[i] / d.rightTicks : 0;
  if (lp === 0) return rp > 0 ? Infinity : 0;
  return (rp - lp) / lp;
}

function diffBucket(change) {
  if (change === Infinity) return DIFF_STEPS;
  const b = Math.round(Math.max(-1, Math.min(1, change)) * DIFF_STEPS);
  return b;
}

// ---------------------------------------------------------------- renderer

export class FlameGraph {
  constructor(container, opts = {}) {
    this.opts = opts;
    this.container = container;
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'flame-canvas';
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', opts.label || 'Flame graph. Arrow keys move between frames, Enter zooms, Escape resets.');
    this.tip = document.createElement('div');
    this.tip.className = 'flame-tip';
    this.tip.hidden = true;
    container.append(this.canvas, this.tip);
    this.ctx = this.canvas.getContext('2d', { alpha: false });
    this.data = null;
    this.zoom = -1;
    this.selected = -1;
    this.hover = -1;
    this.match = null;          // Uint8Array per name, or null without search
    this.lastRenderMs = 0;
    this.canvas.addEventListener('mousemove', (e) => this.onMove(e));
    this.canvas.addEventListener('mouseleave', () => { this.hover = -1; this.tip.hidden = true; });
    this.canvas.addEventListener('click', (e) => this.onClick(e));
    this.canvas.addEventListener('dblclick', () => this.resetZoom());
    this.canvas.addEventListener('keydown', (e) => this.onKey(e));
    this.resizeObs = new ResizeObserver(() => { if (this.data && this.width() !== this.cssW) this.render(); });
    this.resizeObs.observe(container);
  }

  width() { return Math.max(100, this.container.clientWidth); }

  setData(d) {
    this.data = d;
    this.zoom = -1;
    this.selected = -1;
    this.hover = -1;
    this.match = null;
    this.allMatch = new Uint8Array(d.names.length).fill(1);
    this.dark = matchMedia('(prefers-color-scheme: dark)').matches;
    this.readTheme();
    this.colors = d.diff ? null : new Palette(d, this.dark, this.theme);
    this.lower = null;          // lower-cased names for search, made when idle
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 50));
    // When idle: the lower-cased names, and one dry run so the first search is quick.
    idle(() => { if (this.data === d) this.computeMatch('\u0000'); });
    if (d.diff) {
      this.diffColors = diffPalette(this.dark);
      this.bucket = new Int8Array(d.n);
      for (let i = 0; i < d.n; i++) this.bucket[i] = diffBucket(diffChange(d, i)) + DIFF_STEPS;
    }
    return this.render();
  }

  // The theme's colours, read once per data set (getComputedStyle forces a
  // style recalculation: too slow for every redraw).
  readTheme() {
    const cs = getComputedStyle(this.container);
    this.theme = {
      bg: cs.getPropertyValue('--bg').trim() || '#fff',
      fg: cs.getPropertyValue('--flame-text').trim() || '#000',
      faded: cs.getPropertyValue('--flame-faded').trim() || '#ddd',
      accent: cs.getPropertyValue('--accent').trim() || '#06c',
      symbolized: cs.getPropertyValue('--frame-symbolized').trim() || 'hsl(168,48%,60%)',
      unresolved: cs.getPropertyValue('--frame-unresolved').trim() || 'hsl(210,14%,78%)',
    };
  }

  // Case-insensitive substring (or /regex/) over names. Returns the sum of the
  // outermost matching frames, so nested matches are not counted twice.
  setSearch(term) {
    const r = this.computeMatch(term);
    this.match = r.match;
    this.render();
    return { count: r.count, total: r.total };
  }

  computeMatch(term) {
    const d = this.data;
    if (!d) return { match: null, count: 0, total: 0 };
    term = (term || '').trim();
    if (!term) return { match: null, count: 0, total: 0 };
    const names = d.names;
    const match = new Uint8Array(names.length);
    const m = /^\/(.+)\/([i]?)$/.exec(term);
    if (m) {
      let re = null;
      try { re = new RegExp(m[1], m[2]); } catch { re = null; }
      if (re) for (let i = 0; i < names.length; i++) match[i] = re.test(names[i]) ? 1 : 0;
    } else {
      const t = term.toLowerCase();
      if (!this.lower) this.lower = names.map((x) => x.toLowerCase());
      const lower = this.lower;
      for (let i = 0; i < lower.length; i++) match[i] = lower[i].includes(t) ? 1 : 0;
    }
    const inMatch = new Uint8Array(d.n);
    const parent = d.parent;
    const nameOf = d.name;
    let count = 0;
    let total = 0;
    for (let i = 0; i < d.n; i++) {
      const p = parent[i];
      const under = p >= 0 && inMatch[p] === 1;
      if (match[nameOf[i]]) {
        count++;
        if (!under) total += d.total[i];
        inMatch[i] = 1;
      } else if (under) inMatch[i] = 1;
    }
    return { match, count, total };
  }

  zoomTo(i) {
    this.zoom = i;
    this.render();
    if (this.opts.onZoom) this.opts.onZoom(i);
  }

  resetZoom() { this.zoomTo(-1); }

  view() {
    const d = this.data;
    const z = this.zoom >= 0 ? this.zoom : -1;
    const zx = z >= 0 ? d.x[z] : 0;
    const zt = z >= 0 ? d.total[z] : (d.numTicks || 1);
    return { zx, zt, scale: this.cssW / zt };
  }

  levelY(li) {
    return this.opts.inverted ? (this.data.nLevels - 1 - li) * ROW : li * ROW;
  }

  render() {
    const t0 = performance.now();
    const d = this.data;
    const W = this.width();
    const levels = d ? d.nLevels : 0;
    const H = Math.max(ROW, levels * ROW);
    const dpr = window.devicePixelRatio || 1;
    this.cssW = W;
    if (this.canvas.width !== Math.round(W * dpr) || this.canvas.height !== Math.round(H * dpr)) {
      this.canvas.width = Math.round(W * dpr);
      this.canvas.height = Math.round(H * dpr);
      this.canvas.style.width = `${W}px`;
      this.canvas.style.height = `${H}px`;
    }
    const ctx = this.ctx;
    if (!this.theme) this.readTheme();
    const { bg, fg, faded, accent } = this.theme;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = bg;
    ctx.fillRect(0, 0, W, H);
    if (!d || d.n === 0) { this.lastRenderMs = performance.now() - t0; return this.lastRenderMs; }
    const { zx, zt, scale } = this.view();
    const zEnd = zx + zt;
    const zLevel = this.zoom >= 0 ? this.levelOf(this.zoom) : 0;
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    if (!this.charW) this.charW = ctx.measureText('MMMMMMMMMM').width / 10;
    const charW = this.charW;
    const labels = [];
    // Always a typed array (all ones without a search): a render that switches
    // from null to an array would be deoptimised on the first search.
    const match = this.match || this.allMatch;
    let lastColor = null;
    for (let li = 0; li < levels; li++) {
      const y = this.levelY(li);
      const end = d.levelStart[li + 1];
      for (let i = d.levelStart[li]; i < end; i++) {
        const x0 = d.x[i];
        const t = d.total[i];
        if (x0 + t <= zx || x0 >= zEnd) continue;
        let sx = (x0 - zx) * scale;
        let sw = t * scale;
        if (sw < MIN_W) continue;
        if (sx < 0) { sw += sx; sx = 0; }
        if (sx + sw > W) sw = W - sx;
        let color;
        if (match[d.name[i]] === 0) color = faded;
        else if (d.diff) color = this.diffColors[this.bucket[i]];
        else color = this.colors.get(d.name[i]);
        if (li < zLevel) color = faded;
        if (color !== lastColor) { ctx.fillStyle = color; lastColor = color; }
        ctx.fillRect(sx, y, sw > 1.5 ? sw - 0.5 : sw, ROW - 1);
        if (sw > charW * 3 + 6) labels.push(i, sx, sw, y);
      }
    }
    ctx.fillStyle = fg;
    for (let k = 0; k < labels.length; k += 4) {
      const i = labels[k];
      const max = Math.floor((labels[k + 2] - 6) / charW);
      let s = d.names[d.name[i]];
      if (s.length > max) s = max > 2 ? s.slice(0, max - 1) + '…' : '';
      if (s) ctx.fillText(s, labels[k + 1] + 3, labels[k + 3] + ROW / 2);
    }
    const sel = this.selected;
    if (sel >= 0) {
      const box = this.boxOf(sel);
      if (box) {
        ctx.strokeStyle = accent;
        ctx.lineWidth = 2;
        ctx.strokeRect(box.x + 1, box.y + 1, Math.max(2, box.w - 2), ROW - 3);
      }
    }
    this.lastRenderMs = performance.now() - t0;
    return this.lastRenderMs;
  }

  levelOf(i) {
    const ls = this.data.levelStart;
    let lo = 0; let hi = this.data.nLevels - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (ls[mid] <= i) lo = mid; else hi = mid - 1; }
    return lo;
  }

  boxOf(i) {
    const d = this.data;
    const { zx, zt, scale } = this.view();
    if (d.x[i] + d.total[i] <= zx || d.x[i] >= zx + zt) return null;
    let x = (d.x[i] - zx) * scale;
    let w = d.total[i] * scale;
    if (x < 0) { w += x; x = 0; }
    if (x + w > this.cssW) w = this.cssW - x;
    return { x, w, y: this.levelY(this.levelOf(i)) };
  }

  nodeAt(px, py) {
    const d = this.data;
    if (!d || !d.n) return -1;
    let li = Math.floor(py / ROW);
    if (this.opts.inverted) li = d.nLevels - 1 - li;
    if (li < 0 || li >= d.nLevels) return -1;
    const { zx, scale } = this.view();
    const t = zx + px / scale;
    let lo = d.levelStart[li]; let hi = d.levelStart[li + 1] - 1;
    if (hi < lo) return -1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (d.x[mid] <= t) lo = mid; else hi = mid - 1; }
    if (d.x[lo] <= t && t < d.x[lo] + d.total[lo] && d.total[lo] * scale >= MIN_W) return lo;
    return -1;
  }

  onMove(e) {
    const r = this.canvas.getBoundingClientRect();
    const i = this.nodeAt(e.clientX - r.left, e.clientY - r.top);
    this.hover = i;
    if (i < 0 || !this.opts.tooltip) { this.tip.hidden = true; return; }
    this.tip.replaceChildren(...this.opts.tooltip(this.data, i));
    this.tip.hidden = false;
    const cr = this.container.getBoundingClientRect();
    let x = e.clientX - cr.left + 14;
    const y = e.clientY - cr.top + 14;
    if (x + this.tip.offsetWidth > cr.width) x = Math.max(0, e.clientX - cr.left - this.tip.offsetWidth - 10);
    this.tip.style.left = `${x}px`;
    this.tip.style.top = `${y}px`;
  }

  onClick(e) {
    const r = this.canvas.getBoundingClientRect();
    const i = this.nodeAt(e.clientX - r.left, e.clientY - r.top);
    if (i < 0) return;
    this.selected = i;
    this.zoomTo(i === 0 ? -1 : i);
    if (this.opts.onSelect) this.opts.onSelect(i);
  }

  onKey(e) {
    const d = this.data;
    if (!d || !d.n) return;
    let s = this.selected >= 0 ? this.selected : -1;
    const li = s >= 0 ? this.levelOf(s) : 0;
    switch (e.key) {
      case 'ArrowUp': s = s < 0 ? 0 : (this.opts.inverted ? firstChild(d, s) : (d.parent[s] >= 0 ? d.parent[s] : s)); break;
      case 'ArrowDown': s = s < 0 ? 0 : (this.opts.inverted ? (d.parent[s] >= 0 ? d.parent[s] : s) : firstChild(d, s)); break;
      case 'ArrowLeft': s = s > d.levelStart[li] ? s - 1 : Math.max(s, 0); break;
      case 'ArrowRight': s = s >= 0 && s + 1 < d.levelStart[li + 1] ? s + 1 : Math.max(s, 0); break;
      case 'Enter': case ' ': if (s >= 0) this.zoomTo(s === 0 ? -1 : s); e.preventDefault(); return;
      case 'Escape': this.selected = -1; this.resetZoom(); return;
      default: return;
    }
    e.preventDefault();
    this.selected = s;
    this.render();
    if (this.opts.onSelect) this.opts.onSelect(s);
  }

  // The visible part as an SVG document.
  toSVG(title) {
    const d = this.data;
    const W = this.cssW || this.width();
    const H = d.nLevels * ROW;
    const esc = (s) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
    const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H + 24}" font-family="monospace" font-size="12">`,
      `<text x="4" y="16">${esc(title || 'flame graph')}</text><g transform="translate(0,24)">`];
    const { zx, zt, scale } = this.view();
    for (let li = 0; li < d.nLevels; li++) {
      const y = this.levelY(li);
      for (let i = d.levelStart[li]; i < d.levelStart[li + 1]; i++) {
        if (d.x[i] + d.total[i] <= zx || d.x[i] >= zx + zt) continue;
        let x = (d.x[i] - zx) * scale; let w = d.total[i] * scale;
        if (w < MIN_W) continue;
        if (x < 0) { w += x; x = 0; }
        if (x + w > W) w = W - x;
        const fill = d.diff ? this.diffColors[this.bucket[i]] : this.colors.get(d.name[i]);
        const name = esc(d.names[d.name[i]]);
        out.push(`<g><title>${name}</title><rect x="${x.toFixed(2)}" y="${y}" width="${Math.max(0, w - 0.5).toFixed(2)}" height="${ROW - 1}" fill="${fill}"/>`);
        const max = Math.floor((w - 6) / 7.2);
        if (max >= 3) {
          const full = d.names[d.name[i]];
          out.push(`<text x="${(x + 3).toFixed(2)}" y="${y + 13}">${esc(full.length > max ? full.slice(0, max - 1) + '…' : full)}</text>`);
        }
        out.push('</g>');
      }
    }
    out.push('</g></svg>');
    return out.join('');
  }
}

function firstChild(d, s) {
  let best = -1;
  for (let c = d.childStart[s]; c < d.childEnd[s]; c++) if (best < 0 || d.total[c] > d.total[best]) best = c;
  return best >= 0 ? best : s;
}
