// Unit tests of the UI's pure modules (no browser): node --test web_unit.test.mjs
// The web directory is given by EMBER_UI_WEB (test_ui.py sets it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const web = process.env.EMBER_UI_WEB;
const util = await import(pathToFileURL(join(web, 'util.js')).href);
const flame = await import(pathToFileURL(join(web, 'flame.js')).href);

test('parseTime reads Pyroscope forms', () => {
  const now = Date.UTC(2024, 0, 2, 3, 4, 5);
  assert.equal(util.parseTime('now', now), now);
  assert.equal(util.parseTime('now-1h', now), now - 3600e3);
  assert.equal(util.parseTime('now-15m', now), now - 900e3);
  assert.equal(util.parseTime('1700000000', now), 1700000000e3);
  assert.equal(util.parseTime('1700000000123', now), 1700000000123);
  assert.equal(util.parseTime('1700000000123456', now), 1700000000123);
  assert.equal(util.parseTime('1700000000123456789', now), 1700000000123);
  assert.equal(util.parseTime('20240102', now), Date.UTC(2024, 0, 2));
  assert.equal(util.parseTime('2024-01-02T00:00:00Z', now), Date.UTC(2024, 0, 2));
  assert.ok(Number.isNaN(util.parseTime('yesterday-ish', now)));
});

test('splitQuery and setMatcher', () => {
  assert.deepEqual(util.splitQuery('a:b:c:d:e{x="1"}'), { type: 'a:b:c:d:e', selector: '{x="1"}' });
  assert.deepEqual(util.splitQuery('a:b:c:d:e'), { type: 'a:b:c:d:e', selector: '{}' });
  assert.deepEqual(util.splitQuery('{__name__="a:b:c:d:e", x="1"}'), { type: 'a:b:c:d:e', selector: '{x="1"}' });
  assert.equal(util.setMatcher('{}', 'service_name', 'api'), '{service_name="api"}');
  assert.equal(util.setMatcher('{service_name="a", env="p,q"}', 'service_name', 'b'), '{service_name="b", env="p,q"}');
  assert.equal(util.setMatcher('{service_name="a", env="x"}', 'service_name', ''), '{env="x"}');
  assert.equal(util.matcherValue('{service_name="a\\"b"}', 'service_name'), 'a"b');
});

test('packageOf groups symbols for colours', () => {
  assert.equal(util.packageOf('github.com/x/y/z.(*T).M'), 'github.com/x/y/z');
  assert.equal(util.packageOf('net/http.(*conn).serve'), 'net/http');
  assert.equal(util.packageOf('runtime.mallocgc'), 'runtime');
  assert.equal(util.packageOf('std::vector<int>::push_back'), 'std');
  assert.equal(util.packageOf('org.acme.Shop.handle'), 'org.acme');
});

test('unresolvedFrame tells the server\'s module+offset frames from names', () => {
  assert.equal(util.unresolvedFrame('libc.so.6+0x1f2e0'), true);
  assert.equal(util.unresolvedFrame('b00b1e5deadbeef+0x1010'), true);
  assert.equal(util.unresolvedFrame('0x7ffff00'), true);
  assert.equal(util.unresolvedFrame('main.hotLoop'), false);
  assert.equal(util.unresolvedFrame('std::vector<int>::operator+'), false);
  assert.equal(util.unresolvedFrame('a+0xZZ'), false);
});

// total;main;a;b 4, main;a;c 2, main;d 1, main;e 5 in the 4-number layout,
// x delta-encoded from the previous node's end.
const FG = {
  names: ['total', 'main', 'e', 'd', 'a', 'c', 'b'],
  levels: [
    { values: ['0', '12', '0', '0'] },
    { values: ['0', '12', '0', '1'] },
    { values: ['0', '6', '0', '4', '0', '1', '1', '3', '0', '5', '5', '2'] },
    { values: ['0', '4', '4', '6', '0', '2', '2', '5'] },
  ],
  total: '12',
};

test('decodeFlamegraph: absolute x, parents, children', () => {
  const d = flame.decodeFlamegraph(FG);
  assert.equal(d.n, 7);
  assert.equal(d.numTicks, 12);
  assert.deepEqual([...d.x], [0, 0, 0, 6, 7, 0, 4]);
  const name = (i) => d.names[d.name[i]];
  assert.equal(name(d.parent[6]), 'a');    // c under a
  assert.equal(name(d.parent[4]), 'main'); // e under main
  assert.deepEqual([d.childStart[1], d.childEnd[1]], [2, 5]);
});

test('topTable: self summed, total once per stack (recursion)', () => {
  // main;f;f;g 3 (recursive f) and main;g 1
  const t = flame.fromTree({ name: 'main', total: 4, self: 0, children: [
    { name: 'f', total: 3, self: 0, children: [{ name: 'f', total: 3, self: 0, children: [{ name: 'g', total: 3, self: 3, children: [] }] }] },
    { name: 'g', total: 1, self: 1, children: [] }] });
  const rows = Object.fromEntries(flame.topTable(t).map((r) => [r.name, r]));
  assert.equal(rows.f.total, 3);
  assert.equal(rows.f.self, 0);
  assert.equal(rows.g.self, 4);
  assert.equal(rows.g.total, 4);
  assert.equal(rows.main.total, 4);
  const fromApi = Object.fromEntries(flame.topTable(flame.decodeFlamegraph(FG)).map((r) => [r.name, r]));
  assert.equal(fromApi.total, undefined, 'the synthetic root is left out');
  assert.equal(fromApi.a.total, 6);
  assert.equal(fromApi.e.self, 5);
});

test('sandwich: callers inverted, callees merged', () => {
  const s = flame.sandwich(flame.decodeFlamegraph(FG), 'a');
  assert.equal(s.callees.numTicks, 6);
  assert.deepEqual(s.callees.names.slice().sort(), ['a', 'b', 'c']);
  assert.deepEqual(s.callers.names, ['a', 'main', 'total']);
  assert.equal(s.callers.nLevels, 3);
});

test('diff decode: left and right side by side, change', () => {
  // one child x: left 2 of 4, right 3 of 3
  const d = flame.decodeFlamegraph({
    names: ['total', 'x', 'y'],
    levels: [{ values: [0, 4, 0, 0, 3, 0, 0] }, { values: [0, 2, 2, 0, 3, 3, 1, 0, 2, 2, 0, 0, 0, 2] }],
    leftTicks: '4', rightTicks: '3',
  }, true);
  assert.equal(d.n, 3);
  assert.equal(d.total[0], 7);
  assert.equal(d.lt[1], 2);
  assert.equal(d.rt[1], 3);
  assert.ok(Math.abs(flame.diffChange(d, 1) - 1) < 1e-9);     // 50% -> 100%
  assert.equal(flame.diffChange(d, 2), -1);                    // 50% -> 0%
});
