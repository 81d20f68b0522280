// A small app profiled by the Pyroscope Node SDK (reference/real-clients.md §1).
// usage: node client.js <server url> <app name> <run ms> <flush ms>
// Resolves @pyroscope/nodejs through NODE_PATH (the version under test).
'use strict';
const Pyroscope = require('@pyroscope/nodejs');
const [url, appName, runMs, flushMs] = process.argv.slice(2);

Pyroscope.init({
  serverAddress: url, appName,
  tags: { region: 'local', env: 'test' },
  flushIntervalMs: Number(flushMs),
  wall: { collectCpuTime: true },
  heap: { samplingIntervalBytes: 64 * 1024 },
});
Pyroscope.start();

function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const keep = [];
const until = Date.now() + Number(runMs);
(function work() {
  if (Date.now() > until) {
    return Promise.resolve(Pyroscope.stop()).then(() => process.exit(0));
  }
  Pyroscope.wrapWithLabels({ handler: 'fib' }, () => fib(24));
  for (let i = 0; i < 2000; i++) keep.push({ s: 'x'.repeat(100) + i });
  if (keep.length > 200000) keep.length = 0;
  setImmediate(work);
})();
