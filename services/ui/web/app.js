// app.js: ember's web UI. The URL is the state: every view reads its query
// parameters (Pyroscope's names: query/from/until, leftQuery/…/rightUntil) and
// every control writes them back, so any view can be linked and reloaded.

import { Api, ApiError } from './api.js';
import { FlameGraph, decodeFlamegraph, topTable, sandwich, diffChange } from './flame.js';
import { TimeChart } from './chart.js';
import { HeatmapChart } from './heatmap.js';
import { RulesView } from './rules.js';
import { LabelsView } from './labels.js';
import {
  parseTime, splitQuery, joinQuery, setMatcher, matcherValue, formatValue, formatPct, formatTime,
  formatDuration, el, download, unresolvedFrame,
} from './util.js';

const MAX_NODES = 16384;
const MAX_EXEMPLARS = 20; // rows of the exemplar list under the chart
const TABLE_ROWS = 1000;
const PRESETS = [['now-5m', 'Last 5 minutes'], ['now-15m', 'Last 15 minutes'], ['now-1h', 'Last hour'],
  ['now-6h', 'Last 6 hours'], ['now-12h', 'Last 12 hours'], ['now-24h', 'Last 24 hours']];

const perf = { api: {}, render: [], redraw: [] };
window.emberPerf = perf;

// ------------------------------------------------------------------ URL state

function params() { return new URLSearchParams(location.search); }

function navigate(changes, { replace = false } = {}) {
  const p = params();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === '') p.delete(k); else p.set(k, v);
  }
  const url = `${location.pathname}?${p.toString().replace(/%2C/g, ',')}`;
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  route();
}

function tenant() {
  const t = params().get('tenant');
  if (t !== null) return t;
  try { return localStorage.getItem('ember.tenant') || ''; } catch { return ''; }
}

function pageKind() {
  if (location.pathname.startsWith('/comparison')) return 'diff';
  if (location.pathname.startsWith('/recording-rules')) return 'rules';
  if (location.pathname.startsWith('/explore-labels')) return 'labels';
  return 'single';
}

// ------------------------------------------------------------------ page shell

const main = document.getElementById('main');
const msgBox = document.getElementById('msg');
const tenantInput = document.getElementById('tenant');
const navSingle = document.getElementById('nav-single');
const navDiff = document.getElementById('nav-diff');
const navRules = document.getElementById('nav-rules');
const navLabels = document.getElementById('nav-labels');

// body[data-state] is loading | ready | error: what tests and people wait on.
function setState(st) { document.body.dataset.state = st; }

function showMessage(text, kind = 'error') {
  if (text && kind === 'error') setState('error');
  msgBox.hidden = !text;
  msgBox.className = `msg ${kind}`;
  msgBox.textContent = text || '';
}

function explain(e, what) {
  if (e instanceof ApiError) {
    if (e.status === 401) return 'This server has multi-tenancy on: enter a tenant (X-Scope-OrgID) in the Tenant field at the top, then press Enter.';
    if (e.status === 0) return `Cannot reach ember: ${e.message}.`;
    if (e.code === 'invalid_argument' || e.status === 400) return `${what} was refused: ${e.message}`;
    return `${what} failed (${e.code}): ${e.message}`;
  }
  return `${what} failed: ${e && e.message ? e.message : e}`;
}

tenantInput.value = tenant();
tenantInput.addEventListener('change', () => {
  const t = tenantInput.value.trim();
  try { localStorage.setItem('ember.tenant', t); } catch { /* private mode */ }
  navigate({ tenant: t || null });
});

let current = null;     // the view on screen
window.addEventListener('popstate', route);

function newView(kind) {
  if (kind === 'diff') return new DiffView(main);
  if (kind === 'rules') return new RulesView(main, new Api(tenant()), (e, what) => showMessage(e ? explain(e, what) : null));
  if (kind === 'labels') return new LabelsView(main, new Api(tenant()), params, navigate);
  return new SingleView(main);
}

function route() {
  const kind = pageKind();
  navSingle.setAttribute('aria-current', kind === 'single' ? 'page' : 'false');
  navDiff.setAttribute('aria-current', kind === 'diff' ? 'page' : 'false');
  navRules.setAttribute('aria-current', kind === 'rules' ? 'page' : 'false');
  navLabels.setAttribute('aria-current', kind === 'labels' ? 'page' : 'false');
  tenantInput.value = tenant();
  if (!current || current.kind !== kind || (['rules', 'labels'].includes(kind) && current.api.tenant !== tenant())) {
    if (current) current.destroy?.();
    main.replaceChildren();
    current = newView(kind);
  }
  document.body.dataset.view = current.kind;
  current.update().catch((e) => showMessage(explain(e, 'Loading the page')));
}

// ------------------------------------------------------------------ time range

function resolveRange(fromText, untilText) {
  const now = Date.now();
  const from = parseTime(fromText || 'now-1h', now);
  const until = parseTime(untilText || 'now', now);
  if (Number.isNaN(from)) return { error: `Cannot read the start of the time range: "${fromText}". Use now-1h, a unix time or an ISO date.` };
  if (Number.isNaN(until)) return { error: `Cannot read the end of the time range: "${untilText}". Use now, a unix time or an ISO date.` };
  if (from >= until) return { error: `The time range is empty: from ${formatTime(from)} is not before until ${formatTime(until)}.` };
  return { from, until };
}

function timeControls(prefix, fromText, untilText, onApply) {
  const id = (s) => `${prefix}${s}`;
  const preset = el('select', { id: id('preset'), 'aria-label': 'Time range preset' },
    el('option', { value: '' }, 'Custom range'),
    PRESETS.map(([v, label]) => el('option', { value: v, selected: v === fromText && (untilText || 'now') === 'now' }, label)));
  const from = el('input', { id: id('from'), class: 'time', value: fromText || 'now-1h', 'aria-label': 'From', title: 'From: now-1h, a unix time or an ISO date' });
  const until = el('input', { id: id('until'), class: 'time', value: untilText || 'now', 'aria-label': 'Until', title: 'Until: now, a unix time or an ISO date' });
  const syncPreset = () => { preset.value = PRESETS.some(([v]) => v === from.value.trim()) && until.value.trim() === 'now' ? from.value.trim() : ''; };
  syncPreset();
  from.addEventListener('input', syncPreset);
  until.addEventListener('input', syncPreset);
  preset.addEventListener('change', () => {
    if (!preset.value) return;
    from.value = preset.value; until.value = 'now';
    onApply();
  });
  const shown = el('span', { class: 'muted range-text', id: id('range'), 'aria-live': 'polite' });
  const showRange = () => {
    const r = resolveRange(from.value, until.value);
    shown.textContent = r.error ? '' : `${formatTime(r.from)} → ${formatTime(r.until)} (${formatDuration((r.until - r.from) / 1000)})`;
  };
  return { syncPreset, showRange, shown, nodes: [preset, el('label', { for: id('from') }, 'from'), from, el('label', { for: id('until') }, 'until'), until], from, until };
}

// ------------------------------------------------------------------ selector completion

class Completer {
  constructor(input, source) {
    this.input = input;
    this.source = source;   // {names(): Promise<string[]>, values(name): Promise<string[]>}
    this.list = el('ul', { class: 'completions', role: 'listbox', id: `${input.id}-list`, hidden: true });
    this.items = [];
    this.active = -1;
    input.setAttribute('role', 'combobox');
    input.setAttribute('aria-autocomplete', 'list');
    input.setAttribute('aria-controls', this.list.id);
    input.setAttribute('aria-expanded', 'false');
    input.addEventListener('input', () => this.refresh());
    input.addEventListener('focus', () => this.refresh());
    input.addEventListener('blur', () => setTimeout(() => this.close(), 150));
    input.addEventListener('keydown', (e) => this.onKey(e));
  }

  context() {
    const before = this.input.value.slice(0, this.input.selectionStart ?? this.input.value.length);
    let m = /([a-zA-Z_][a-zA-Z0-9_.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)$/.exec(before);
    if (m) return { kind: 'value', name: m[1], prefix: m[3], start: before.length - m[3].length };
    m = /(?:^|[{,])\s*([a-zA-Z_][a-zA-Z0-9_.]*)?$/.exec(before);
    if (m && before.includes('{') && !/}\s*$/.test(before)) {
      const p = m[1] || '';
      return { kind: 'name', prefix: p, start: before.length - p.length };
    }
    return null;
  }

  async refresh() {
    const ctx = this.context();
    if (!ctx) { this.close(); return; }
    let all;
    try {
      all = ctx.kind === 'name' ? await this.source.names() : await this.source.values(ctx.name);
    } catch { this.close(); return; }
    const now = this.context();
    if (!now || now.kind !== ctx.kind || now.prefix !== ctx.prefix) return;
    const pre = ctx.prefix.toLowerCase();
    this.items = all.filter((s) => s.toLowerCase().startsWith(pre) && s !== ctx.prefix).slice(0, 50);
    this.ctx = ctx;
    this.active = this.items.length ? 0 : -1;
    this.draw();
  }

  draw() {
    this.list.replaceChildren(...this.items.map((s, i) => {
      const li = el('li', { role: 'option', id: `${this.list.id}-${i}`, 'aria-selected': i === this.active ? 'true' : 'false', class: i === this.active ? 'active' : '' }, s);
      li.addEventListener('mousedown', (e) => { e.preventDefault(); this.accept(i); });
      return li;
    }));
    const open = this.items.length > 0;
    this.list.hidden = !open;
    this.input.setAttribute('aria-expanded', open ? 'true' : 'false');
    if (this.active >= 0) this.input.setAttribute('aria-activedescendant', `${this.list.id}-${this.active}`);
    else this.input.removeAttribute('aria-activedescendant');
  }

  close() { this.items = []; this.active = -1; this.draw(); }

  accept(i) {
    const s = this.items[i];
    const v = this.input.value;
    const caret = this.input.selectionStart ?? v.length;
    const ins = this.ctx.kind === 'name' ? `${s}="` : `${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    let rest = v.slice(caret);
    if (this.ctx.kind === 'value' && rest.startsWith('"')) rest = rest.slice(1);
    this.input.value = v.slice(0, this.ctx.start) + ins + rest;
    const pos = this.ctx.start + ins.length;
    this.input.setSelectionRange(pos, pos);
    this.close();
    this.refresh();
  }

  onKey(e) {
    if (this.list.hidden) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      const n = this.items.length;
      this.active = (this.active + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      this.draw();
    } else if ((e.key === 'Enter' || e.key === 'Tab') && this.active >= 0) {
      e.preventDefault();
      this.accept(this.active);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      this.close();
    }
  }
}

// ------------------------------------------------------------------ tables

function unitOf(typeId) { return (typeId || '').split(':')[2] || ''; }

// A sortable, filterable table. cols: [{key, label, num, fmt(row), title}]
class Table {
  constructor(container, { cols, sort, onRow, caption, id }) {
    this.cols = cols;
    this.sort = sort;
    this.desc = true;
    this.onRow = onRow;
    this.rows = [];
    this.filterText = '';
    this.filter = el('input', { type: 'search', class: 'table-filter', placeholder: 'Filter functions', 'aria-label': 'Filter the table' });
    this.filter.addEventListener('input', () => { this.filterText = this.filter.value; this.draw(); });
    this.count = el('span', { class: 'muted table-count' });
    this.table = el('table', { class: 'top-table', id });
    this.table.append(el('caption', { class: 'sr-only' }, caption || 'Functions'));
    this.thead = el('thead');
    this.tbody = el('tbody');
    this.table.append(this.thead, this.tbody);
    container.append(el('div', { class: 'table-tools' }, this.filter, this.count), el('div', { class: 'table-scroll' }, this.table));
  }

  setRows(rows) { this.rows = rows; this.draw(); }

  draw() {
    const tr = el('tr');
    for (const c of this.cols) {
      const sorted = this.sort === c.key;
      const b = el('button', { type: 'button', class: 'th-sort', 'data-key': c.key }, c.label, sorted ? (this.desc ? ' ▼' : ' ▲') : '');
      b.addEventListener('click', () => {
        if (this.sort === c.key) this.desc = !this.desc; else { this.sort = c.key; this.desc = c.num !== false; }
        this.draw();
      });
      tr.append(el('th', { scope: 'col', class: c.num === false ? '' : 'num', 'aria-sort': sorted ? (this.desc ? 'descending' : 'ascending') : 'none', title: c.title }, b));
    }
    this.thead.replaceChildren(tr);
    const f = this.filterText.trim().toLowerCase();
    let rows = f ? this.rows.filter((r) => r.name.toLowerCase().includes(f)) : this.rows.slice();
    const k = this.sort;
    const col = this.cols.find((c) => c.key === k);
    const val = col && col.sortValue ? col.sortValue : (r) => r[k];
    rows.sort((a, b) => {
      const x = val(a); const y = val(b);
      const c = typeof x === 'string' ? x.localeCompare(y) : (x - y);
      return this.desc ? -c : c;
    });
    const shown = rows.slice(0, TABLE_ROWS);
    this.count.textContent = rows.length > shown.length ? `${shown.length} of ${rows.length} functions` : `${rows.length} functions`;
    const frag = document.createDocumentFragment();
    for (const r of shown) {
      const row = el('tr', { 'data-name': r.name });
      for (const c of this.cols) {
        if (c.num === false) {
          const b = el('button', { type: 'button', class: 'link', title: 'Search for this function in the flame graph' }, r.name);
          b.addEventListener('click', () => this.onRow && this.onRow(r, 'select'));
          const cell = el('td', { class: 'name' }, b);
          if (c.extra) cell.append(c.extra(r));
          row.append(cell);
        } else {
          row.append(el('td', { class: `num ${c.cls ? c.cls(r) : ''}`, 'data-col': c.key, 'data-value': String(c.raw ? c.raw(r) : r[c.key]) }, c.fmt(r)));
        }
      }
      frag.append(row);
    }
    this.tbody.replaceChildren(frag);
  }
}

// ------------------------------------------------------------------ single view

class SingleView {
  constructor(root) {
    this.kind = 'single';
    this.root = root;
    this.key = null;
    this.typesCache = null;
    this.namesCache = new Map();
    this.abort = null;
    this.build();
  }

  build() {
    const p = params();
    this.typeSel = el('select', { id: 'profile-type', 'aria-label': 'Profile type' });
    this.serviceSel = el('select', { id: 'service', 'aria-label': 'Service' }, el('option', { value: '' }, 'all services'));
    this.selInput = el('input', { id: 'selector', class: 'selector', spellcheck: false, autocomplete: 'off', 'aria-label': 'Label selector', placeholder: '{service_name="…"}' });
    this.time = timeControls('s-', p.get('from'), p.get('until'), () => this.apply());
    const form = el('form', { class: 'toolbar', id: 'query-form', role: 'search' },
      el('label', { for: 'profile-type' }, 'Type'), this.typeSel,
      el('label', { for: 'service' }, 'Service'), this.serviceSel,
      el('span', { class: 'selector-wrap' }, this.selInput),
      this.time.nodes,
      el('button', { type: 'submit', class: 'primary' }, 'Apply'), this.time.shown);
    form.addEventListener('submit', (e) => { e.preventDefault(); this.apply(); });
    this.typeSel.addEventListener('change', () => this.apply());
    this.serviceSel.addEventListener('change', () => {
      this.selInput.value = setMatcher(this.selInput.value, 'service_name', this.serviceSel.value);
      this.apply();
    });
    this.completer = new Completer(this.selInput, {
      names: () => this.labelNames(),
      values: (n) => this.labelValues(n),
    });
    this.selInput.parentNode.append(this.completer.list);

    this.groupSel = el('select', { id: 'group-by', 'aria-label': 'Group the time series by' }, el('option', { value: '' }, 'no grouping'));
    this.groupSel.addEventListener('change', () => navigate({ groupBy: this.groupSel.value || null }));
    const chartBox = el('div', { class: 'chart', id: 'chart' });
    this.chart = new TimeChart(chartBox, {
      onRange: (a, b) => navigate({ from: String(a), until: String(b) }),
      format: (v) => formatValue(v, unitOf(this.type)),
    });
    this.heatBox = el('div', { class: 'chart', id: 'heatmap', hidden: true });
    this.heatmap = new HeatmapChart(this.heatBox, { format: (v) => formatValue(v, unitOf(this.type)) });
    this.chartSel = el('select', { id: 'chart-kind', 'aria-label': 'Chart' },
      el('option', { value: '' }, 'time series'), el('option', { value: 'heatmap' }, 'heatmap'));
    this.chartSel.addEventListener('change', () => navigate({ chart: this.chartSel.value || null }));

    this.modeBtns = ['both', 'table', 'flame', 'sandwich'].map((m) => {
      const b = el('button', { type: 'button', class: 'mode', 'data-mode': m, 'aria-pressed': 'false' },
        { both: 'Table + flame graph', table: 'Table', flame: 'Flame graph', sandwich: 'Sandwich' }[m]);
      b.addEventListener('click', () => navigate({ view: m === 'both' ? null : m }));
      return b;
    });
    this.search = el('input', { type: 'search', id: 'search', placeholder: 'Search (text or /regex/)', 'aria-label': 'Search functions in the flame graph' });
    this.search.addEventListener('input', () => {
      navigate({ search: this.search.value || null }, { replace: true });
    });
    this.searchInfo = el('span', { id: 'search-info', class: 'muted', 'aria-live': 'polite' });
    const resetBtn = el('button', { type: 'button', id: 'reset-zoom' }, 'Reset zoom');
    resetBtn.addEventListener('click', () => this.flame.resetZoom());
    const svgBtn = el('button', { type: 'button', id: 'download-svg' }, 'Download SVG');
    svgBtn.addEventListener('click', () => {
      if (this.flame.data) download('flamegraph.svg', new Blob([this.flame.toSVG(params().get('query'))], { type: 'image/svg+xml' }));
    });
    const pprofBtn = el('button', { type: 'button', id: 'download-pprof' }, 'Download pprof');
    pprofBtn.addEventListener('click', () => this.downloadPprof());

    this.tableBox = el('section', { class: 'pane table-pane', 'aria-label': 'Top functions' });
    this.table = new Table(this.tableBox, {
      id: 'top-table',
      caption: 'Top functions by self and total',
      sort: 'self',
      cols: [
        { key: 'name', label: 'Symbol', num: false, extra: (r) => this.sandwichLink(r.name) },
        { key: 'self', label: 'Self', fmt: (r) => formatValue(r.self, unitOf(this.type)) },
        { key: 'selfPct', label: 'Self %', raw: (r) => r.self, sortValue: (r) => r.self, fmt: (r) => formatPct(r.self / this.total) },
        { key: 'total', label: 'Total', fmt: (r) => formatValue(r.total, unitOf(this.type)) },
        { key: 'totalPct', label: 'Total %', raw: (r) => r.total, sortValue: (r) => r.total, fmt: (r) => formatPct(r.total / this.total) },
      ],
      onRow: (r) => { this.search.value = r.name; navigate({ search: r.name }, { replace: true }); },
    });
    this.flameBox = el('section', { class: 'pane flame-pane', 'aria-label': 'Flame graph' });
    const flameHost = el('div', { class: 'flame', id: 'flame' });
    this.flameBox.append(flameHost);
    this.live = el('div', { class: 'sr-only', 'aria-live': 'polite', id: 'flame-live' });
    this.flame = new FlameGraph(flameHost, {
      tooltip: (d, i) => this.tooltip(d, i),
      onSelect: (i) => { this.live.textContent = this.describe(i); },
      onZoom: (i) => {
        perf.redraw.push({ what: 'zoom', ms: this.flame.lastRenderMs });
        flameHost.dataset.zoom = i >= 0 ? this.flame.data.names[this.flame.data.name[i]] : '';
      },
    });
    this.sandwichBox = el('section', { class: 'pane sandwich-pane', id: 'sandwich', 'aria-label': 'Sandwich view' });
    this.exemplarBox = el('section', { class: 'exemplars', id: 'exemplars', 'aria-label': 'Exemplars' });
    this.profileNote = el('div', { class: 'msg info', id: 'profile-note', hidden: true });
    // What the two frame colours outside the warm ones mean; shown when the graph has either.
    this.frameLegend = el('span', { class: 'frame-legend muted', id: 'frame-legend', hidden: true },
      el('span', { class: 'sw sw-symbolized', id: 'sw-symbolized' }), 'symbolized on the server ',
      el('span', { class: 'sw sw-unresolved' }), 'unresolved (module+offset)');

    this.root.append(
      form,
      el('section', { class: 'chart-box', 'aria-label': 'Time series' },
        el('div', { class: 'row' }, el('label', { for: 'group-by' }, 'Group by'), this.groupSel,
          el('label', { for: 'chart-kind' }, 'Chart'), this.chartSel,
          el('span', { class: 'muted hint' }, 'drag across the chart to zoom into a range')),
        chartBox, this.heatBox),
      this.exemplarBox,
      this.profileNote,
      el('div', { class: 'toolbar2' }, el('div', { class: 'modes', role: 'group', 'aria-label': 'View' }, this.modeBtns),
        this.search, this.searchInfo, el('span', { class: 'spacer' }), this.frameLegend, resetBtn, svgBtn, pprofBtn),
      el('div', { class: 'panes', id: 'panes' }, this.tableBox, this.flameBox, this.sandwichBox),
      this.live);
  }

  // The exemplars under the chart: the highest-valued profiles of the range,
  // each a button showing that one profile's flame graph (?profile=<id>).
  showExemplars(list, shown) {
    const u = unitOf(this.type);
    const rows = list.filter((e) => e.profileId).slice(0, MAX_EXEMPLARS);
    if (!rows.length) { this.exemplarBox.replaceChildren(); return; }
    const labelText = (ls) => ls.map((l) => `${l.name}=${l.value}`).join(', ');
    this.exemplarBox.replaceChildren(
      el('h2', {}, 'Exemplars'),
      el('table', { class: 'exemplar-table', id: 'exemplar-table' },
        el('thead', {}, el('tr', {}, el('th', {}, 'Time'), el('th', {}, 'Value'), el('th', {}, 'Labels'), el('th', {}, 'Profile'))),
        el('tbody', {}, ...rows.map((e) => {
          const b = el('button', { type: 'button', class: 'link exemplar', 'data-profile': e.profileId, 'aria-pressed': e.profileId === shown ? 'true' : 'false', title: 'Show this profile\'s flame graph' }, e.profileId);
          b.addEventListener('click', () => navigate({ profile: e.profileId }));
          return el('tr', {}, el('td', {}, formatTime(e.timestamp)), el('td', { class: 'num', 'data-value': String(e.value) }, formatValue(e.value, u)),
            el('td', {}, labelText(e.labels)), el('td', {}, b));
        }))));
  }

  // Above the flame graph when it shows one profile: which, and the way back.
  showProfileNote(id) {
    this.profileNote.hidden = !id;
    if (!id) return;
    const back = el('button', { type: 'button', class: 'link', id: 'all-profiles' }, 'show all profiles');
    back.addEventListener('click', () => navigate({ profile: null }));
    this.profileNote.replaceChildren(`Flame graph of profile ${id} only — `, back);
  }

  sandwichLink(name) {
    const b = el('button', { type: 'button', class: 'icon', title: `Sandwich view of ${name}`, 'aria-label': `Sandwich view of ${name}` }, '⇅');
    b.addEventListener('click', () => navigate({ view: 'sandwich', fn: name }));
    return b;
  }

  apply() {
    const type = this.typeSel.value;
    this.key = null;            // Apply always fetches again (now-1h moves on)
    navigate({
      query: type ? joinQuery(type, this.selInput.value) : null,
      from: this.time.from.value.trim(),
      until: this.time.until.value.trim(),
    });
  }

  range() { return resolveRange(params().get('from'), params().get('until')); }

  async labelNames() {
    const r = this.range();
    const k = `${this.type}|${r.from}`;
    if (!this.namesCache.has(k)) this.namesCache.set(k, this.api.labelNames([], r.from, r.until).then((n) => n.filter((x) => !x.startsWith('__'))));
    return this.namesCache.get(k);
  }

  async labelValues(name) {
    const r = this.range();
    const k = `${name}|${r.from}`;
    if (!this.namesCache.has(k)) this.namesCache.set(k, this.api.labelValues(name, [], r.from, r.until));
    return this.namesCache.get(k);
  }

  tooltip(d, i) {
    const u = unitOf(this.type);
    const T = d.numTicks || 1;
    const name = d.names[d.name[i]];
    const lines = [
      el('div', { class: 'tip-name' }, name),
      el('div', {}, `Total: ${formatValue(d.total[i], u)} (${formatPct(d.total[i] / T)})`),
      el('div', {}, `Self: ${formatValue(d.self[i], u)} (${formatPct(d.self[i] / T)})`),
    ];
    if (d.symbolizedNames && d.symbolizedNames.has(name)) {
      lines.push(el('div', { class: 'tip-symbolized' },
        'Symbolized on the server: the client sent an address, a debug file on the server named it'));
    } else if (unresolvedFrame(name)) {
      lines.push(el('div', { class: 'tip-unresolved' },
        'Unresolved: module+offset, no debug file names it yet (upload it, or set --symbolizer.debuginfod-urls)'));
    }
    return lines;
  }

  describe(i) {
    const d = this.flame.data;
    if (!d || i < 0) return '';
    const u = unitOf(this.type);
    return `${d.names[d.name[i]]}: total ${formatValue(d.total[i], u)} (${formatPct(d.total[i] / (d.numTicks || 1))}), self ${formatValue(d.self[i], u)}`;
  }

  async downloadPprof() {
    const r = this.range();
    if (r.error || !this.type) return;
    try {
      const bytes = await this.api.mergedProfile(this.type, this.selector, r.from, r.until);
      download('profile.pb', new Blob([bytes], { type: 'application/octet-stream' }));
    } catch (e) { showMessage(explain(e, 'Downloading the merged pprof')); }
  }

  setMode(mode) {
    for (const b of this.modeBtns) b.setAttribute('aria-pressed', b.dataset.mode === mode ? 'true' : 'false');
    this.tableBox.hidden = !(mode === 'both' || mode === 'table');
    this.flameBox.hidden = !(mode === 'both' || mode === 'flame');
    this.sandwichBox.hidden = mode !== 'sandwich';
    document.getElementById('panes').className = `panes mode-${mode}`;
  }

  async update() {
    const p = params();
    this.api = new Api(tenant());
    const { type, selector } = splitQuery(p.get('query') || '');
    this.time.from.value = p.get('from') || 'now-1h';
    this.time.until.value = p.get('until') || 'now';
    this.time.syncPreset();
    this.time.showRange();
    const mode = ['table', 'flame', 'sandwich'].includes(p.get('view')) ? p.get('view') : 'both';
    this.setMode(mode);
    if (document.activeElement !== this.search) this.search.value = p.get('search') || '';
    const key = JSON.stringify([p.get('query'), p.get('from'), p.get('until'), p.get('groupBy'), p.get('maxNodes'), p.get('profile'), p.get('chart'), tenant()]);
    if (key === this.key && this.flame.data) {
      this.applySearch();
      this.drawSandwich();
      return;
    }
    this.key = key;
    setState('loading');
    showMessage('');
    const r = this.range();
    if (r.error) { showMessage(r.error); this.clear(); return; }
    if (this.abort) this.abort.abort();
    const abort = new AbortController();
    this.abort = abort;
    const sig = abort.signal;
    document.body.classList.add('loading');
    try {
      await this.load(type, selector, r, p, sig);
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.clear();
      throw e;
    } finally {
      if (this.abort === abort) document.body.classList.remove('loading');
    }
  }

  clear() {
    this.flame.setData({ names: [], n: 0, nLevels: 0, levelStart: new Int32Array(1), numTicks: 0 });
    this.table.setRows([]);
    this.chart.setData([], 0, 0);
    this.exemplarBox.replaceChildren();
  }

  async load(type, selector, r, p, sig) {
    const types = await this.api.profileTypes(r.from, r.until, sig);
    const ids = types.map((t) => t.ID);
    this.typeSel.replaceChildren(...ids.map((id) => el('option', { value: id, selected: id === type }, id)));
    if (!type) {
      if (!ids.length) {
        showMessage(`No profiles between ${formatTime(r.from)} and ${formatTime(r.until)}. Push some (POST /ingest or /push.v1.PusherService/Push), or pick an earlier range.`, 'info');
        setState('ready');
        this.clear();
        return;
      }
      const pick = ids.find((id) => id.startsWith('process_cpu:')) || ids[0];
      navigate({ query: joinQuery(pick, selector === '{}' ? '{}' : selector) }, { replace: true });
      return;
    }
    if (!ids.includes(type)) {
      this.typeSel.prepend(el('option', { value: type, selected: true }, type));
      showMessage(ids.length
        ? `Unknown profile type "${type}": no profiles of that type between ${formatTime(r.from)} and ${formatTime(r.until)}. Types in this range: ${ids.join(', ')}.`
        : `Unknown profile type "${type}": there are no profiles at all between ${formatTime(r.from)} and ${formatTime(r.until)}.`);
      this.clear();
      return;
    }
    this.type = type;
    this.selector = selector;
    this.selInput.value = selector;
    const maxNodes = Number(p.get('maxNodes') || p.get('max-nodes')) || MAX_NODES;
    const groupBy = p.get('groupBy') || '';
    const stepSec = Math.max(1, (r.until - r.from) / 1000 / 240);
    const profile = p.get('profile') || '';
    this.showProfileNote(profile);
    const heat = p.get('chart') === 'heatmap';
    this.chartSel.value = heat ? 'heatmap' : '';
    this.heatBox.hidden = !heat;
    document.getElementById('chart').hidden = heat;
    const fgP = this.api.flamegraph(type, selector, r.from, r.until, maxNodes, sig, profile ? [profile] : []);
    const seriesP = this.api.series(type, selector, r.from, r.until, groupBy ? [groupBy] : [], stepSec, sig);
    // Exemplars are extra: a refusal (too many profiles in the range) only empties their list.
    const exemplarsP = this.api.exemplars(type, selector, r.from, r.until, groupBy ? [groupBy] : [], stepSec, sig).catch(() => []);
    // Handled below (after the flame graph) or dropped when that fails; marked
    // handled now, because a refusal that arrives before the flame graph's
    // would otherwise be reported as an unhandled rejection.
    seriesP.catch(() => {});
    const servicesP = this.api.labelValues('service_name', [`{__profile_type__="${type}"}`], r.from, r.until, sig).catch(() => []);
    const namesP = this.api.labelNames([`{__profile_type__="${type}"}`], r.from, r.until, sig).catch(() => []);
    let fg;
    try {
      fg = await fgP;
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      if (e instanceof ApiError && e.status === 400) {
        showMessage(`The query ${joinQuery(type, selector)} was refused: ${e.message}`);
        this.clear();
        return;
      }
      throw e;
    }
    const timing = this.api.timings.filter((t) => t.method === 'SelectMergeStacktraces').pop();
    const tParsed = performance.now();
    const tResp = timing ? timing.receivedAt : tParsed;   // response body in hand, before JSON.parse
    const d = decodeFlamegraph(fg, false);
    const tDecoded = performance.now();
    this.total = d.numTicks;
    this.flame.setData(d);
    this.frameLegend.hidden = d.symbolizedNames.size === 0 && !d.names.some(unresolvedFrame);
    const tDrawn = performance.now();
    perf.api.SelectMergeStacktraces = timing ? timing.ms : NaN;
    const rec = { nodes: d.n, parseMs: tParsed - tResp, decodeMs: tDecoded - tParsed, drawMs: tDrawn - tDecoded, responseToPixelsMs: tDrawn - tResp };
    // Let the flame graph reach the screen before the table is built.
    await new Promise((res) => requestAnimationFrame(() => { rec.paintedMs = performance.now() - tResp; res(); }));
    if (sig.aborted) return;
    const tTable0 = performance.now();
    this.rows = topTable(d);
    this.table.setRows(this.rows);
    rec.tableMs = performance.now() - tTable0;
    perf.lastRender = rec;
    perf.render.push(rec);
    document.getElementById('flame').dataset.nodes = String(d.n);
    document.getElementById('flame').dataset.total = String(d.numTicks);
    if (d.n === 0) showMessage(`No profiles match ${joinQuery(type, selector)} between ${formatTime(r.from)} and ${formatTime(r.until)}.`, 'info');
    this.applySearch();
    this.drawSandwich();

    const services = await servicesP;
    const cur = matcherValue(selector, 'service_name');
    this.serviceSel.replaceChildren(el('option', { value: '' }, 'all services'),
      ...services.map((s) => el('option', { value: s, selected: s === cur }, s)));
    const names = (await namesP).filter((n) => !n.startsWith('__'));
    this.groupSel.replaceChildren(el('option', { value: '' }, 'no grouping'),
      ...names.map((n) => el('option', { value: n, selected: n === groupBy }, n)));
    try {
      const series = await seriesP;
      this.chart.setData(series, r.from, r.until);
      this.showExemplars(await exemplarsP, profile);
      if (heat) this.heatmap.setData(await this.api.heatmap(type, selector, r.from, r.until, groupBy ? [groupBy] : [], stepSec, sig), r.from, r.until, stepSec * 1000);
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      showMessage(explain(e, 'The time series query'));
    }
    if (document.body.dataset.state === 'loading') setState('ready');
  }

  applySearch() {
    const term = params().get('search') || '';
    const res = this.flame.setSearch(term);
    perf.redraw.push({ what: 'search', ms: this.flame.lastRenderMs });
    const u = unitOf(this.type);
    this.searchInfo.textContent = term
      ? `${res.count} matching frames, total ${formatValue(res.total, u)} (${formatPct(res.total / (this.total || 1))})`
      : '';
    this.searchInfo.dataset.total = String(res.total);
    this.searchInfo.dataset.count = String(res.count);
  }

  drawSandwich() {
    const fn = params().get('fn');
    const box = this.sandwichBox;
    if (box.hidden) return;
    if (!fn || !this.flame.data) {
      box.replaceChildren(el('p', { class: 'muted' }, 'Pick a function with the ⇅ button in the table to see its callers and callees.'));
      return;
    }
    const s = sandwich(this.flame.data, fn);
    if (!s) { box.replaceChildren(el('p', { class: 'msg error' }, `The function "${fn}" is not in this flame graph.`)); return; }
    const callers = el('div', { class: 'flame', id: 'sandwich-callers' });
    const callees = el('div', { class: 'flame', id: 'sandwich-callees' });
    box.replaceChildren(el('h2', {}, `Sandwich: ${fn}`), el('h3', {}, 'Callers'), callers, el('h3', {}, 'Callees'), callees);
    const tip = (d, i) => this.tooltip(d, i);
    new FlameGraph(callers, { inverted: true, tooltip: tip, label: `Callers of ${fn}` }).setData(s.callers);
    new FlameGraph(callees, { tooltip: tip, label: `Callees of ${fn}` }).setData(s.callees);
  }
}

// ------------------------------------------------------------------ diff view

class DiffView {
  constructor(root) {
    this.kind = 'diff';
    this.root = root;
    this.key = null;
    this.build();
  }

  side(name) {
    const p = params();
    const q = el('input', { id: `${name}-query`, class: 'selector', spellcheck: false, 'aria-label': `${name} query`, value: p.get(`${name}Query`) || '' });
    const t = timeControls(`${name}-`, p.get(`${name}From`), p.get(`${name}Until`), () => this.apply());
    return { q, t, box: el('fieldset', { class: `side side-${name}` }, el('legend', {}, name === 'left' ? 'Baseline (left)' : 'Comparison (right)'), q, el('div', { class: 'row' }, t.nodes), t.shown) };
  }

  build() {
    this.left = this.side('left');
    this.right = this.side('right');
    const form = el('form', { class: 'diff-form', id: 'diff-form' }, this.left.box, this.right.box, el('button', { type: 'submit', class: 'primary' }, 'Compare'));
    form.addEventListener('submit', (e) => { e.preventDefault(); this.apply(); });
    this.search = el('input', { type: 'search', id: 'search', placeholder: 'Search (text or /regex/)', 'aria-label': 'Search functions in the diff flame graph' });
    this.search.addEventListener('input', () => navigate({ search: this.search.value || null }, { replace: true }));
    this.searchInfo = el('span', { id: 'search-info', class: 'muted', 'aria-live': 'polite' });
    const resetBtn = el('button', { type: 'button', id: 'reset-zoom' }, 'Reset zoom');
    resetBtn.addEventListener('click', () => this.flame.resetZoom());
    const svgBtn = el('button', { type: 'button', id: 'download-svg' }, 'Download SVG');
    svgBtn.addEventListener('click', () => this.flame.data && download('diff-flamegraph.svg', new Blob([this.flame.toSVG('diff')], { type: 'image/svg+xml' })));
    const legend = el('span', { class: 'diff-legend muted' }, el('span', { class: 'sw-green' }), 'smaller share on the right ', el('span', { class: 'sw-grey' }), 'same ', el('span', { class: 'sw-red' }), 'larger');
    const flameHost = el('div', { class: 'flame', id: 'flame' });
    this.flame = new FlameGraph(flameHost, {
      tooltip: (d, i) => this.tooltip(d, i),
      label: 'Diff flame graph',
      onZoom: (i) => {
        perf.redraw.push({ what: 'zoom', ms: this.flame.lastRenderMs });
        flameHost.dataset.zoom = i >= 0 ? this.flame.data.names[this.flame.data.name[i]] : '';
      },
    });
    const tableBox = el('section', { class: 'pane table-pane', 'aria-label': 'Largest changes' });
    const pct = (v, t) => (t ? v / t : 0);
    this.table = new Table(tableBox, {
      id: 'diff-table',
      caption: 'Largest changes',
      sort: 'change',
      cols: [
        { key: 'name', label: 'Symbol', num: false },
        { key: 'lt', label: 'Left total', fmt: (r) => formatValue(r.lt, this.unit) },
        { key: 'rt', label: 'Right total', fmt: (r) => formatValue(r.rt, this.unit) },
        { key: 'lp', label: 'Left %', raw: (r) => r.lt, sortValue: (r) => pct(r.lt, this.lTicks), fmt: (r) => formatPct(pct(r.lt, this.lTicks)) },
        { key: 'rp', label: 'Right %', raw: (r) => r.rt, sortValue: (r) => pct(r.rt, this.rTicks), fmt: (r) => formatPct(pct(r.rt, this.rTicks)) },
        {
          key: 'change', label: 'Change', title: 'Change of the share in percentage points',
          raw: (r) => pct(r.rt, this.rTicks) - pct(r.lt, this.lTicks),
          sortValue: (r) => Math.abs(pct(r.rt, this.rTicks) - pct(r.lt, this.lTicks)),
          cls: (r) => {
            const c = pct(r.rt, this.rTicks) - pct(r.lt, this.lTicks);
            return Math.abs(c) < 5e-5 ? '' : (c > 0 ? 'up' : 'down');
          },
          fmt: (r) => { const c = (pct(r.rt, this.rTicks) - pct(r.lt, this.lTicks)) * 100; return `${c >= 0 ? '+' : ''}${c.toFixed(2)} pp`; },
        },
      ],
      onRow: (r) => { this.search.value = r.name; navigate({ search: r.name }, { replace: true }); },
    });
    this.totals = el('div', { class: 'muted', id: 'diff-totals' });
    this.root.append(form,
      el('div', { class: 'toolbar2' }, this.search, this.searchInfo, el('span', { class: 'spacer' }), legend, resetBtn, svgBtn),
      this.totals,
      el('div', { class: 'panes mode-both' }, tableBox, el('section', { class: 'pane flame-pane', 'aria-label': 'Diff flame graph' }, flameHost)));
  }

  apply() {
    this.key = null;
    navigate({
      leftQuery: this.left.q.value.trim(), rightQuery: this.right.q.value.trim(),
      leftFrom: this.left.t.from.value.trim(), leftUntil: this.left.t.until.value.trim(),
      rightFrom: this.right.t.from.value.trim(), rightUntil: this.right.t.until.value.trim(),
    });
  }

  tooltip(d, i) {
    const u = this.unit;
    const lp = d.leftTicks ? d.lt[i] / d.leftTicks : 0;
    const rp = d.rightTicks ? d.rt[i] / d.rightTicks : 0;
    const ch = diffChange(d, i);
    return [
      el('div', { class: 'tip-name' }, d.names[d.name[i]]),
      el('div', {}, `Left: ${formatValue(d.lt[i], u)} (${formatPct(lp)}), self ${formatValue(d.ls[i], u)}`),
      el('div', {}, `Right: ${formatValue(d.rt[i], u)} (${formatPct(rp)}), self ${formatValue(d.rs[i], u)}`),
      el('div', {}, `Change: ${ch === Infinity ? 'new' : `${ch >= 0 ? '+' : ''}${(ch * 100).toFixed(1)}%`}`),
    ];
  }

  async update() {
    const p = params();
    this.api = new Api(tenant());
    const lq = p.get('leftQuery') || p.get('query') || '';
    const rq = p.get('rightQuery') || lq;
    for (const [s, q] of [[this.left, lq], [this.right, rq]]) s.q.value = q;
    for (const s of ['left', 'right']) {
      this[s].t.from.value = p.get(`${s}From`) || p.get('from') || 'now-1h';
      this[s].t.until.value = p.get(`${s}Until`) || p.get('until') || 'now';
      this[s].t.syncPreset();
      this[s].t.showRange();
    }
    if (document.activeElement !== this.search) this.search.value = p.get('search') || '';
    const key = JSON.stringify(['leftQuery', 'rightQuery', 'leftFrom', 'leftUntil', 'rightFrom', 'rightUntil', 'maxNodes'].map((k) => p.get(k)).concat(tenant()));
    if (key === this.key && this.flame.data) { this.applySearch(); return; }
    this.key = key;
    setState('loading');
    showMessage('');
    if (!lq) { showMessage('Enter a query on the left and the right (e.g. process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="app"}) and press Compare.', 'info'); setState('ready'); return; }
    const L = splitQuery(lq); const R = splitQuery(rq);
    if (L.type !== R.type) { showMessage(`Left and right must be the same profile type: "${L.type}" and "${R.type}".`); return; }
    const lr = resolveRange(this.left.t.from.value, this.left.t.until.value);
    const rr = resolveRange(this.right.t.from.value, this.right.t.until.value);
    if (lr.error || rr.error) { showMessage(`Left: ${lr.error || 'ok'} Right: ${rr.error || 'ok'}`); return; }
    const types = await this.api.profileTypes(Math.min(lr.from, rr.from), Math.max(lr.until, rr.until));
    if (!types.some((t) => t.ID === L.type)) {
      showMessage(`Unknown profile type "${L.type}" in this range. Types: ${types.map((t) => t.ID).join(', ') || 'none'}.`);
      return;
    }
    this.unit = unitOf(L.type);
    const maxNodes = Number(p.get('maxNodes')) || MAX_NODES;
    let fg;
    try {
      fg = await this.api.diff(
        { profileTypeID: L.type, labelSelector: L.selector, start: lr.from, end: lr.until, maxNodes },
        { profileTypeID: R.type, labelSelector: R.selector, start: rr.from, end: rr.until, maxNodes });
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) { showMessage(`The comparison was refused: ${e.message}`); return; }
      throw e;
    }
    const d = decodeFlamegraph(fg || {}, true);
    this.lTicks = d.leftTicks; this.rTicks = d.rightTicks;
    this.flame.setData(d);
    this.table.setRows(topTable(d));
    this.totals.textContent = `Left total ${formatValue(d.leftTicks, this.unit)}, right total ${formatValue(d.rightTicks, this.unit)}; shares are of each side's total.`;
    this.totals.dataset.left = String(d.leftTicks);
    this.totals.dataset.right = String(d.rightTicks);
    if (!d.leftTicks && !d.rightTicks) showMessage('Neither side has any profiles in its range.', 'info');
    this.applySearch();
    if (document.body.dataset.state === 'loading') setState('ready');
  }

  applySearch() {
    const term = params().get('search') || '';
    const res = this.flame.setSearch(term);
    this.searchInfo.textContent = term ? `${res.count} matching frames` : '';
    this.searchInfo.dataset.count = String(res.count);
  }
}

// For tests and the bench: where a frame is on screen, and the flame graph.
window.emberUI = {
  flame: () => current && current.flame,
  frameBox(name) {
    const f = current && current.flame;
    const d = f && f.data;
    if (!d) return null;
    let best = -1;
    for (let i = 0; i < d.n; i++) if (d.names[d.name[i]] === name && (best < 0 || d.total[i] > d.total[best])) best = i;
    const b = best >= 0 ? f.boxOf(best) : null;
    if (!b) return null;
    const r = f.canvas.getBoundingClientRect();
    return { x: r.left + b.x + Math.min(b.w / 2, 40), y: r.top + b.y + 9, left: r.left + b.x, top: r.top + b.y };
  },
};

route();
