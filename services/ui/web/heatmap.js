// heatmap.js: SelectHeatmap's answer on a canvas: time across, profile value
// up (the server's rows, y_min their lower bounds), darker for more profiles.
// Every series of the answer is drawn on one grid (their counts added).

import { clearChart, PAD } from './chart.js';
import { el, formatTime } from './util.js';

// {timestamp, yMin, count} cells of every series, equal cells added.
export function heatmapCells(series) {
  const cells = new Map();
  for (const s of series) {
    for (const slot of s.slots || []) {
      const ys = slot.yMin || []; const ks = slot.counts || [];
      for (let i = 0; i < ys.length && i < ks.length; i++) {
        const key = `${slot.timestamp}|${ys[i]}`;
        const c = cells.get(key) || { timestamp: Number(slot.timestamp), yMin: Number(ys[i]), count: 0 };
        c.count += Number(ks[i]);
        cells.set(key, c);
      }
    }
  }
  return [...cells.values()];
}

export class HeatmapChart {
  constructor(container, { format }) {
    this.container = container;
    this.format = format || String;
    this.canvas = el('canvas', { class: 'chart-canvas', role: 'img', 'aria-label': 'Heatmap of profile values over time' });
    container.append(this.canvas);
    this.cells = [];
    new ResizeObserver(() => this.render()).observe(container);
  }

  setData(series, from, until, stepMs) {
    this.cells = heatmapCells(series);
    this.from = from; this.until = until; this.stepMs = stepMs;
    this.container.dataset.cells = String(this.cells.length);
    this.container.dataset.count = String(this.cells.reduce((n, c) => n + c.count, 0));
    this.render();
  }

  render() {
    if (this.container.hidden) return;
    const { W, H, ctx, cs } = clearChart(this.canvas, this.container);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = cs.getPropertyValue('--muted').trim() || '#666';
    if (!this.cells.length) {
      ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
      ctx.fillText('No profiles for this query', W / 2, H / 2);
      return;
    }
    const rows = [...new Set(this.cells.map((c) => c.yMin))].sort((a, b) => a - b);
    const maxCount = Math.max(...this.cells.map((c) => c.count));
    const pw = W - PAD.l - PAD.r; const ph = H - PAD.t - PAD.b;
    const span = Math.max(1, this.until - this.from);
    const cw = Math.max(2, (this.stepMs / span) * pw);
    const rh = ph / rows.length;
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    ctx.fillText(this.format(rows[0]), PAD.l - 6, PAD.t + ph - rh / 2);
    if (rows.length > 1) ctx.fillText(this.format(rows[rows.length - 1]), PAD.l - 6, PAD.t + rh / 2);
    ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    ctx.fillText(formatTime(this.from), PAD.l, H - PAD.b + 6);
    ctx.textAlign = 'right';
    ctx.fillText(formatTime(this.until), W - PAD.r, H - PAD.b + 6);
    for (const c of this.cells) {
      const x = PAD.l + ((c.timestamp - this.stepMs - this.from) / span) * pw; // the bucket ends at its timestamp
      const y = PAD.t + ph - (rows.indexOf(c.yMin) + 1) * rh;
      ctx.fillStyle = `rgba(239, 68, 68, ${0.25 + 0.75 * (c.count / maxCount)})`;
      ctx.fillRect(Math.max(PAD.l, x), y, cw, Math.max(1, rh - 1));
    }
  }
}
