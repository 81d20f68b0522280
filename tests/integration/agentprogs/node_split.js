// main() calls alpha() and beta() in turn; alpha's loop is three times
// beta's, so about 3/4 of the CPU goes to alpha. The program measures its own
// split (process.cpuUsage around each call) and prints it at the end: the
// oracle the agent's profile is compared with.
//
// Usage: node --perf-basic-prof node_split.js SECONDS.
// Prints "pid N" first, "split ALPHA_S BETA_S" last.
"use strict";

const UNIT = 200000; // loop iterations of beta per round; alpha runs 3 x UNIT

function spin(n) {
  let total = 0;
  for (let i = 0; i < n; i++) total = (total + ((i * i) % 7)) | 0;
  return total;
}

function alpha() {
  return spin(3 * UNIT);
}

function beta() {
  return spin(UNIT);
}

function cpuSeconds(fn) {
  const t0 = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1e6;
}

function main(seconds) {
  console.log("pid " + process.pid);
  const spent = { alpha: 0, beta: 0 };
  const end = Date.now() + seconds * 1000;
  let sink = 0;
  while (Date.now() < end) {
    spent.alpha += cpuSeconds(() => { sink += alpha(); });
    spent.beta += cpuSeconds(() => { sink += beta(); });
  }
  console.log("split " + spent.alpha.toFixed(6) + " " + spent.beta.toFixed(6) + " " + (sink & 1));
}

main(Number(process.argv[2]));
