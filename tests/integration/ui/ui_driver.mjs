// Drives ember's web UI in Debian's headless Chromium (playwright-core, no
// browser download) through a list of steps, and prints what it saw as one
// JSON document; tests/integration/test_ui.py makes the assertions.
//
//   node ui_driver.mjs CONFIG.json
// CONFIG: {base, shots, colorScheme?, steps: [{do, ...}]}; see test_ui.py.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

// Polls fn in the page from here: page.waitForFunction evaluates strings in
// the page, which the UI's Content-Security-Policy (no 'unsafe-eval') refuses.
async function waitFor(page, fn, arg, timeout = 20000) {
  const end = Date.now() + timeout;
  for (;;) {
    if (await page.evaluate(fn, arg)) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${fn}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const out = { results: {}, console: [], pageErrors: [], failed: null };
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 }, colorScheme: cfg.colorScheme || 'light' });
  const page = await ctx.newPage();
  let stepName = '';
  page.on('console', (m) => { if (m.type() === 'error') out.console.push({ step: stepName, type: m.type(), text: m.text(), url: m.location().url }); });
  page.on('pageerror', (e) => out.pageErrors.push({ step: stepName, text: String(e && e.stack || e) }));

  const settled = () => waitFor(page, () => ['ready', 'error'].includes(document.body.dataset.state));
  const R = out.results;
  for (const s of cfg.steps) {
    stepName = s.key || s.do;
    try {
      switch (s.do) {
        case 'goto':
          await page.goto(cfg.base + s.url);
          await settled();
          break;
        case 'settle':
          await page.waitForTimeout(100);
          await settled();
          break;
        case 'table':
          R[s.key] = await page.$$eval(`#${s.id} tbody tr`, (rows) => rows.map((tr) => ({
            name: tr.dataset.name,
            text: tr.innerText,
            values: Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, Number(td.dataset.value)])),
            cells: Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, td.textContent])),
          })));
          break;
        case 'canvas':
          R[s.key] = await page.$eval(s.sel, (c) => {
            const g = c.getContext('2d');
            const { data } = g.getImageData(0, 0, c.width, c.height);
            const bg = [data[data.length - 4], data[data.length - 3], data[data.length - 2]];
            let n = 0; let h = 0;
            for (let i = 0; i < data.length; i += 4) {
              if (data[i] !== bg[0] || data[i + 1] !== bg[1] || data[i + 2] !== bg[2]) n++;
              h = (h * 31 + data[i] + data[i + 1] * 7 + data[i + 2] * 13) >>> 0;
            }
            return { nonBlank: n, width: c.width, height: c.height, hash: h };
          });
          break;
        case 'search':
          await page.fill('#search', s.term);
          await waitFor(page, (t) => (new URLSearchParams(location.search).get('search') || '') === t, s.term);
          R[s.key] = await page.$eval('#search-info', (e) => ({ text: e.textContent, total: Number(e.dataset.total), count: Number(e.dataset.count) }));
          break;
        case 'click-frame': {
          const box = await page.evaluate((n) => window.emberUI.frameBox(n), s.name);
          if (!box) throw new Error(`no frame named ${s.name} on screen`);
          await page.mouse.move(box.x, box.y);
          await page.waitForTimeout(50);
          const tip = await page.$eval('.flame-tip', (e) => (e.hidden ? '' : e.innerText));
          await page.mouse.click(box.x, box.y);
          R[s.key] = { zoom: await page.$eval('#flame', (e) => e.dataset.zoom || ''), tooltip: tip };
          break;
        }
        case 'frame-colour':
          // The canvas pixel near the top of the frame's box (above its label) and the
          // legend's swatch for frames symbolized on the server, as the page shows them.
          R[s.key] = await page.evaluate((n) => {
            const f = window.emberUI.flame();
            const d = f && f.data;
            let best = -1;
            for (let i = 0; d && i < d.n; i++) if (d.names[d.name[i]] === n && (best < 0 || d.total[i] > d.total[best])) best = i;
            const b = best >= 0 ? f.boxOf(best) : null;
            if (!b) return null;
            const dpr = f.canvas.width / f.canvas.getBoundingClientRect().width;
            const px = f.canvas.getContext('2d').getImageData(Math.floor((b.x + b.w / 2) * dpr), Math.floor((b.y + 1.5) * dpr), 1, 1).data;
            const legend = document.getElementById('frame-legend');
            return {
              pixel: [px[0], px[1], px[2]],
              swatch: getComputedStyle(document.getElementById('sw-symbolized')).backgroundColor,
              legendShown: !!legend && !legend.hidden,
            };
          }, s.name);
          break;
        case 'keys':
          await page.focus(s.sel);
          for (const k of s.keys) await page.keyboard.press(k);
          R[s.key] = {
            zoom: await page.$eval('#flame', (e) => e.dataset.zoom || ''),
            live: await page.$eval('#flame-live', (e) => e.textContent).catch(() => ''),
            value: await page.$eval(s.sel, (e) => (e.value === undefined ? null : e.value)),
          };
          break;
        case 'click':
          await page.click(s.sel);
          break;
        case 'download': {
          const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click(s.sel)]);
          const buf = readFileSync(await dl.path());
          R[s.key] = { name: dl.suggestedFilename(), size: buf.length, base64: buf.toString('base64') };
          break;
        }
        case 'drag': {
          const b = await page.$eval(s.sel, (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
          await page.mouse.move(b.x + b.w * s.from, b.y + b.h / 2);
          await page.mouse.down();
          await page.mouse.move(b.x + b.w * s.to, b.y + b.h / 2, { steps: 5 });
          await page.mouse.up();
          await page.waitForTimeout(100);
          await settled();
          R[s.key] = await page.evaluate(() => Object.fromEntries(new URLSearchParams(location.search)));
          break;
        }
        case 'fill':
          await page.fill(s.sel, s.value);
          if (s.press) await page.press(s.sel, s.press);
          break;
        case 'type':
          await page.focus(s.sel);
          await page.keyboard.type(s.value);
          await page.waitForTimeout(s.wait || 300);
          R[s.key] = { value: await page.inputValue(s.sel), options: await page.$$eval('.completions li', (l) => l.map((x) => x.textContent)) };
          break;
        case 'state':
          R[s.key] = await page.evaluate(() => ({
            state: document.body.dataset.state,
            msg: document.getElementById('msg').hidden ? '' : document.getElementById('msg').textContent,
            mainChildren: document.getElementById('main').children.length,
            url: location.pathname + location.search,
            bodyText: document.body.innerText.length,
          }));
          break;
        case 'text':
          R[s.key] = await page.$eval(s.sel, (e) => ({ text: e.textContent, data: { ...e.dataset } }));
          break;
        case 'perf':
          R[s.key] = await page.evaluate(() => JSON.parse(JSON.stringify(window.emberPerf)));
          break;
        case 'shot':
          await page.mouse.move(0, 0);
          await page.screenshot({ path: join(cfg.shots, s.file), fullPage: true });
          break;
        default:
          throw new Error(`unknown step ${s.do}`);
      }
    } catch (e) {
      out.failed = { step: stepName, error: String(e && e.message || e) };
      try { await page.screenshot({ path: join(cfg.shots, `failed-${stepName}.png`), fullPage: true }); } catch { /* closed */ }
      break;
    }
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
