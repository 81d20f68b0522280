// labels.js: the label explorer (/explore-labels?query=TYPE{SELECTOR}&from=&until=&label=):
// the labels of the selected profiles, and for one of them each value's share
// of the total with a small series, as Grafana's Profiles Drilldown shows. A
// value's row links to the single view of the query narrowed to it.
import { el, splitQuery, joinQuery, setMatcher, parseTime, formatValue, formatPct } from './util.js';

const SVG = 'http://www.w3.org/2000/svg';

// A value's series as 120x24 bars (a bar per point: one profile still shows),
// scaled to the largest point of all rows.
function sparkline(points, from, until, max) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 120 24');
  svg.setAttribute('class', 'spark');
  const span = Math.max(1, until - from);
  for (const p of points) {
    const h = Math.max(1, (p.value / (max || 1)) * 24);
    const bar = document.createElementNS(SVG, 'rect');
    bar.setAttribute('x', (((p.timestamp - from) / span) * 118).toFixed(1));
    bar.setAttribute('y', (24 - h).toFixed(1));
    bar.setAttribute('width', '2');
    bar.setAttribute('height', h.toFixed(1));
    svg.append(bar);
  }
  return svg;
}

// The rows of a label: [{value, total, share, points}], largest first.
export function labelShares(series, label) {
  const rows = series.map((s) => {
    const v = (s.labels || []).find((l) => l.name === label);
    const points = (s.points || []).map((p) => ({ timestamp: Number(p.timestamp), value: Number(p.value) }));
    return { value: v ? v.value : '', total: points.reduce((a, p) => a + p.value, 0), points };
  });
  const all = rows.reduce((a, r) => a + r.total, 0);
  for (const r of rows) r.share = all > 0 ? r.total / all : 0;
  return rows.sort((a, b) => b.total - a.total);
}

export class LabelsView {
  constructor(root, api, params, navigate) {
    this.kind = 'labels';
    this.api = api;
    this.params = params;
    this.navigate = navigate;
    this.query = el('input', { id: 'labels-query', class: 'selector', spellcheck: false, 'aria-label': 'Query: profile type and selector' });
    this.from = el('input', { id: 'labels-from', 'aria-label': 'From', size: 12 });
    this.until = el('input', { id: 'labels-until', 'aria-label': 'Until', size: 12 });
    const form = el('form', { class: 'row', id: 'labels-form' }, this.query, this.from, this.until,
      el('button', { type: 'submit', class: 'primary' }, 'Explore'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.navigate({ query: this.query.value, from: this.from.value, until: this.until.value });
    });
    this.names = el('nav', { id: 'label-names', class: 'label-names', 'aria-label': 'Labels' });
    this.table = el('table', { id: 'label-values', class: 'label-values' });
    root.append(form, el('section', { class: 'pane' }, el('h2', {}, 'Labels'), this.names, this.table));
  }

  async update() {
    const p = this.params();
    this.query.value = p.get('query') || '';
    this.from.value = p.get('from') || 'now-1h';
    this.until.value = p.get('until') || 'now';
    const { type, selector } = splitQuery(this.query.value);
    const now = Date.now();
    const from = parseTime(this.from.value, now), until = parseTime(this.until.value, now);
    if (!type) throw new Error('choose a profile type: the query is TYPE{selector}');
    if (Number.isNaN(from) || Number.isNaN(until) || from >= until) throw new Error('the time range cannot be read or is empty');
    document.body.dataset.state = 'loading';
    const matcher = setMatcher(selector, '__profile_type__', type);
    const names = (await this.api.labelNames([matcher], from, until)).filter((n) => !n.startsWith('__'));
    const label = names.includes(p.get('label')) ? p.get('label') : (names.includes('service_name') ? 'service_name' : names[0]);
    this.names.replaceChildren(...names.map((n) => {
      const b = el('button', { type: 'button', class: 'label-name', 'aria-pressed': n === label ? 'true' : 'false' }, n);
      b.addEventListener('click', () => this.navigate({ label: n }));
      return b;
    }));
    const rows = label ? labelShares(await this.api.series(type, selector, from, until, [label], Math.max(1, (until - from) / 1000 / 60)), label) : [];
    this.render(type, selector, label, rows, from, until);
    document.body.dataset.state = 'ready';
  }

  render(type, selector, label, rows, from, until) {
    const unit = type.split(':')[2] || '';
    const max = Math.max(0, ...rows.flatMap((r) => r.points.map((q) => q.value)));
    const head = el('tr', {}, [label || '', 'share', 'total', 'over time'].map((h) => el('th', {}, h)));
    this.table.replaceChildren(head, ...rows.map((r) => {
      const link = el('a', { href: `/?${new URLSearchParams({ query: joinQuery(type, setMatcher(selector, label, r.value)), from: this.from.value, until: this.until.value })}` }, r.value || '(none)');
      return el('tr', { 'data-value': r.value, 'data-share': r.share.toFixed(6), 'data-points': r.points.length },
        el('td', {}, link), el('td', {}, formatPct(r.share)), el('td', {}, formatValue(r.total, unit)),
        el('td', {}, sparkline(r.points, from, until, max)));
    }));
  }
}
