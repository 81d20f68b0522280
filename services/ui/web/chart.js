// chart.js: the SelectSeries time series on a canvas; drag to pick a range.

import { formatTime } from './util.js';

const PALETTE = ['#3b82f6', '#ef4444', '#10b981', '#f59e0b', '#8b5cf6', '#ec4899', '#14b8a6', '#84cc16', '#f97316', '#6366f1'];
export const PAD = { l: 64, r: 12, t: 8, b: 22 };

// Sizes a chart's canvas to its container (140 px high, device pixels) and
// clears it: {W, H, ctx, cs} (cs: the container's computed style).
export function clearChart(canvas, container) {
  const W = Math.max(200, container.clientWidth);
  const H = 140;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = W * dpr; canvas.height = H * dpr;
  canvas.style.width = `${W}px`; canvas.style.height = `${H}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  return { W, H, ctx, cs: getComputedStyle(container) };
}

export class TimeChart {
  constructor(container, { onRange, format }) {
    this.container = container;
    this.onRange = onRange;
    this.format = format || String;
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'chart-canvas';
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', 'Time series; drag across it to zoom into a time range');
    this.legend = document.createElement('div');
    this.legend.className = 'chart-legend';
    container.append(this.canvas, this.legend);
    this.series = [];
    this.drag = null;
    this.canvas.addEventListener('mousedown', (e) => { this.drag = { a: this.px(e), b: this.px(e) }; });
    window.addEventListener('mousemove', (e) => { if (this.drag) { this.drag.b = this.px(e); this.render(); } });
    window.addEventListener('mouseup', () => {
      if (!this.drag) return;
      const { a, b } = this.drag;
      this.drag = null;
      this.render();
      if (Math.abs(a - b) < 4) return;
      const t0 = this.timeAt(Math.min(a, b));
      const t1 = this.timeAt(Math.max(a, b));
      if (this.onRange && t1 > t0) this.onRange(Math.floor(t0), Math.ceil(t1));
    });
    new ResizeObserver(() => this.render()).observe(container);
  }

  px(e) { return e.clientX - this.canvas.getBoundingClientRect().left; }

  timeAt(px) {
    const w = this.w - PAD.l - PAD.r;
    const f = Math.max(0, Math.min(1, (px - PAD.l) / w));
    return this.from + f * (this.until - this.from);
  }

  setData(series, from, until) {
    this.series = series;
    this.from = from;
    this.until = until;
    this.legend.replaceChildren();
    series.forEach((s, i) => {
      const label = (s.labels || []).map((l) => `${l.name}=${l.value}`).join(', ') || 'total';
      const sw = document.createElement('span');
      sw.className = `swatch c${i % PALETTE.length}`;
      const item = document.createElement('span');
      item.className = 'legend-item';
      item.append(sw, label);
      this.legend.append(item);
    });
    this.render();
  }

  render() {
    const { W, H, ctx, cs } = clearChart(this.canvas, this.container);
    this.w = W;
    const fg = cs.getPropertyValue('--muted').trim() || '#666';
    const grid = cs.getPropertyValue('--border').trim() || '#ddd';
    if (!this.series.length) {
      ctx.fillStyle = fg;
      ctx.font = '12px system-ui, sans-serif';
      ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
      ctx.fillText('No time series for this query', W / 2, H / 2);
      return;
    }
    let max = 0;
    for (const s of this.series) for (const p of s.points || []) max = Math.max(max, Number(p.value));
    if (max <= 0) max = 1;
    const pw = W - PAD.l - PAD.r; const ph = H - PAD.t - PAD.b;
    const X = (t) => PAD.l + ((t - this.from) / Math.max(1, this.until - this.from)) * pw;
    const Y = (v) => PAD.t + ph - (v / max) * ph;
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = fg; ctx.strokeStyle = grid; ctx.lineWidth = 1;
    for (let k = 0; k <= 2; k++) {
      const v = (max * k) / 2; const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(PAD.l, y); ctx.lineTo(W - PAD.r, y); ctx.stroke();
      ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
      ctx.fillText(this.format(v), PAD.l - 6, y);
    }
    ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    if (this.from) {
      ctx.fillText(formatTime(this.from), PAD.l, H - PAD.b + 6);
      ctx.textAlign = 'right';
      ctx.fillText(formatTime(this.until), W - PAD.r, H - PAD.b + 6);
    }
    this.series.forEach((s, i) => {
      const pts = (s.points || []).map((p) => [Number(p.timestamp), Number(p.value)]).sort((a, b) => a[0] - b[0]);
      ctx.strokeStyle = PALETTE[i % PALETTE.length];
      ctx.fillStyle = PALETTE[i % PALETTE.length];
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      pts.forEach(([t, v], k) => { if (k) ctx.lineTo(X(t), Y(v)); else ctx.moveTo(X(t), Y(v)); });
      ctx.stroke();
      if (pts.length < 60) for (const [t, v] of pts) { ctx.beginPath(); ctx.arc(X(t), Y(v), 2.5, 0, 7); ctx.fill(); }
    });
    if (this.drag) {
      ctx.fillStyle = 'rgba(59,130,246,0.2)';
      const a = Math.min(this.drag.a, this.drag.b);
      ctx.fillRect(a, PAD.t, Math.abs(this.drag.b - this.drag.a), ph);
    }
  }
}
