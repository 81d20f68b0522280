// The web UI's benchmark in Chromium (driven by bench/ui_bench.py): opens the
// single view on a profile of ~16,384 flame graph nodes and measures with
// performance.now() in the page: response-to-pixels (JSON in hand -> decoded
// -> drawn on the canvas; also until the next animation frame), and the
// redraw of a zoom and of a search. Prints one JSON document.
//   node ui_bench.mjs BASE_URL PATH [RELOADS]
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

const [base, path, reloadsArg] = process.argv.slice(2);
const reloads = Number(reloadsArg || 7);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const out = { loads: [], zoom: [], search: [], errors: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  for (let k = 0; k < reloads; k++) {
    await page.goto(base + path);
    await waitFor(page, () => document.body.dataset.state === 'ready' && window.emberPerf.lastRender && window.emberPerf.lastRender.paintedMs !== undefined, null, 60000);
    out.loads.push(await page.evaluate(() => ({ ...window.emberPerf.lastRender, apiMs: window.emberPerf.api.SelectMergeStacktraces })));
  }
  // Each redraw in its own frame, as a person's clicks and key strokes come:
  // back-to-back redraws in one task would measure Chromium flushing the
  // canvas's queued work instead.
  const r = await page.evaluate(async () => {
    const frame = () => new Promise((res) => requestAnimationFrame(() => setTimeout(res, 0)));
    const f = window.emberUI.flame();
    const d = f.data;
    // zoom targets: the widest node of each of the first 20 levels below the root
    const targets = [];
    for (let li = 1; li < Math.min(d.nLevels, 21); li++) {
      let best = -1;
      for (let i = d.levelStart[li]; i < d.levelStart[li + 1]; i++) if (best < 0 || d.total[i] > d.total[best]) best = i;
      if (best >= 0) targets.push(best);
    }
    const zoom = [];
    for (const i of targets) { await frame(); const t0 = performance.now(); f.zoomTo(i); zoom.push(performance.now() - t0); }
    await frame();
    f.resetZoom();
    const search = [];
    for (const term of ['fn_1', 'pkg_3', 'fn_42', '/fn_[0-9]*7$/', 'nothing-matches', 'mod', 'fn_', '']) {
      await frame();
      const t0 = performance.now(); f.setSearch(term); search.push(performance.now() - t0);
    }
    return { zoom, search, nodes: d.n, levels: d.nLevels };
  });
  Object.assign(out, r);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
