// Parca's published JS client (@parca/client, the code the Parca UI uses) over
// @protobuf-ts/grpcweb-transport against ember, bundled by esbuild (the
// package ships extension-less ES modules). Usage:
//   node parca_client.bundle.mjs <baseUrl> <plan.json>
// plan: {format: "binary"|"text", pprof: path, labels: {name: value},
//        query: "<parca type>{selector}", start_ms, end_ms, time_ms,
//        diff_base: "<parca query>", values_label, pprof_out: path}
// Writes the profile with WriteRaw, then reads it back through every RPC and
// prints what an independent check needs as JSON on stdout (Arrow records are
// decoded here with apache-arrow).
import { readFileSync, writeFileSync } from "node:fs";
import { GrpcWebFetchTransport } from "@protobuf-ts/grpcweb-transport";
import {
  ProfileStoreServiceClient,
  QueryServiceClient,
  QueryRequest_Mode,
  QueryRequest_ReportType,
  ProfileDiffSelection_Mode,
  Timestamp,
  Duration,
} from "@parca/client";
import { tableFromIPC } from "apache-arrow";

const [baseUrl, planPath] = process.argv.slice(2);
const plan = JSON.parse(readFileSync(planPath, "utf8"));
const transport = new GrpcWebFetchTransport({ baseUrl, format: plan.format });
const store = new ProfileStoreServiceClient(transport);
const query = new QueryServiceClient(transport);

const ts = (ms) => Timestamp.fromDate(new Date(ms));
const num = (v) => Number(v); // int64 fields arrive as strings or bigints

async function call(fn) {
  try {
    const r = await fn();
    return { ok: true, response: r.response };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message };
  }
}

function mergeReq(reportType, q = plan.query, extra = {}) {
  return {
    mode: QueryRequest_Mode.MERGE,
    options: { oneofKind: "merge", merge: { query: q, start: ts(plan.start_ms), end: ts(plan.end_ms) } },
    reportType,
    filter: [],
    ...extra,
  };
}

function arrowSummary(bytes) {
  const t = tableFromIPC(bytes);
  const cols = t.schema.fields.map((f) => f.name);
  const col = (name) => t.getChild(name);
  const out = { rows: t.numRows, columns: cols };
  if (col("flat")) {
    let flat = 0n;
    for (const v of col("flat")) flat += BigInt(v);
    out.flat_sum = flat.toString();
  }
  if (col("cumulative")) out.first_cumulative = col("cumulative").get(0).toString();
  if (col("function_name")) {
    const names = new Set();
    for (const v of col("function_name")) if (v) names.add(v);
    out.function_names = [...names].slice(0, 2000);
  }
  if (col("children") && col("parent")) {
    // every child's parent points back at it: the tree is consistent
    let consistent = true;
    for (let i = 0; i < t.numRows; i++) {
      for (const c of col("children").get(i) ?? []) {
        if (col("parent").get(c) !== i) consistent = false;
      }
    }
    out.tree_consistent = consistent;
    // the root's cumulative equals the sum of its children's plus its flat
    let kids = 0n;
    for (const c of col("children").get(0) ?? []) kids += BigInt(col("cumulative").get(c));
    out.root_children_sum = kids.toString();
  }
  return out;
}

async function main() {
  const out = {};
  const raw = readFileSync(plan.pprof);
  const labels = Object.entries(plan.labels).map(([name, value]) => ({ name, value }));
  out.write = await call(() =>
    store.writeRaw({ tenant: "", normalized: true, series: [{ labels: { labels }, samples: [{ rawProfile: raw, executableInfo: [] }] }] }),
  );
  if (!out.write.ok) {
    console.log(JSON.stringify(out));
    return;
  }
  // the write is durable when acknowledged; the store may take a moment to show it
  const deadline = Date.now() + 15000;
  const name = plan.query.split("{")[0];
  for (;;) {
    const r = await call(() => query.queryRange({ query: plan.query, start: ts(plan.start_ms), end: ts(plan.end_ms), limit: 0, step: Duration.create({ seconds: 1n }), sumBy: [] }));
    if (r.ok || Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  const types = await call(() => query.profileTypes({ start: ts(plan.start_ms), end: ts(plan.end_ms) }));
  out.profile_types = types.ok
    ? types.response.types.map((t) => `${t.name}:${t.sampleType}:${t.sampleUnit}:${t.periodType}:${t.periodUnit}${t.delta ? ":delta" : ""}`)
    : types;
  const lbl = await call(() => query.labels({ match: [], start: ts(plan.start_ms), end: ts(plan.end_ms), profileType: name }));
  out.labels = lbl.ok ? lbl.response.labelNames : lbl;
  const vals = await call(() => query.values({ labelName: plan.values_label, match: [], start: ts(plan.start_ms), end: ts(plan.end_ms), profileType: name }));
  out.values = vals.ok ? vals.response.labelValues : vals;
  const has = await call(() => query.hasProfileData({}));
  out.has_data = has.ok ? has.response.hasData : has;

  const range = await call(() => query.queryRange({ query: plan.query, start: ts(plan.start_ms), end: ts(plan.end_ms), limit: 0, step: Duration.create({ seconds: 10n }), sumBy: [] }));
  out.query_range = range.ok
    ? range.response.series.map((s) => ({
        labels: Object.fromEntries((s.labelset?.labels ?? []).map((l) => [l.name, l.value])),
        sum: s.samples.reduce((a, x) => a + num(x.value), 0),
        points: s.samples.length,
      }))
    : range;

  const RT = QueryRequest_ReportType;
  const pprof = await call(() => query.query(mergeReq(RT.PPROF)));
  if (pprof.ok) {
    writeFileSync(plan.pprof_out, pprof.response.report.pprof);
    out.pprof = { total: num(pprof.response.total), bytes: pprof.response.report.pprof.length };
  } else out.pprof = pprof;

  const top = await call(() => query.query(mergeReq(RT.TOP)));
  out.top = top.ok
    ? {
        total: num(top.response.total),
        flat_sum: top.response.report.top.list.reduce((a, n) => a + num(n.flat), 0),
        max_cumulative: Math.max(0, ...top.response.report.top.list.map((n) => num(n.cumulative))),
        names: top.response.report.top.list.map((n) => n.meta?.function?.name ?? ""),
        unit: top.response.report.top.unit,
      }
    : top;

  const fg = await call(() => query.query(mergeReq(RT.FLAMEGRAPH_TABLE)));
  if (fg.ok) {
    const g = fg.response.report.flamegraph;
    const names = new Set();
    let leafSum = 0;
    const walk = (n) => {
      const fn = g.function[g.locations[n.meta.locationIndex].lines[0].functionIndex];
      names.add(g.stringTable[fn.nameStringIndex]);
      const kids = n.children.reduce((a, c) => a + num(c.cumulative), 0);
      leafSum += num(n.cumulative) - kids;
      n.children.forEach(walk);
    };
    g.root.children.forEach(walk);
    out.flamegraph = { root: num(g.root.cumulative), total: num(fg.response.total), self_sum: leafSum, height: g.height, names: [...names] };
  } else out.flamegraph = fg;

  const fa = await call(() => query.query(mergeReq(RT.FLAMEGRAPH_ARROW, plan.query, { nodeTrimThreshold: 0 })));
  out.flamegraph_arrow = fa.ok ? { total: num(fa.response.total), ...arrowSummary(fa.response.report.flamegraphArrow.record) } : fa;
  const trimmed = await call(() => query.query(mergeReq(RT.FLAMEGRAPH_ARROW, plan.query, { nodeTrimThreshold: 10 })));
  out.flamegraph_arrow_trimmed = trimmed.ok
    ? { trimmed: num(trimmed.response.report.flamegraphArrow.trimmed), ...arrowSummary(trimmed.response.report.flamegraphArrow.record) }
    : trimmed;

  const ta = await call(() => query.query(mergeReq(RT.TABLE_ARROW)));
  out.table_arrow = ta.ok ? arrowSummary(ta.response.report.tableArrow.record) : ta;

  const cg = await call(() => query.query(mergeReq(RT.CALLGRAPH)));
  out.callgraph = cg.ok
    ? {
        flat_sum: cg.response.report.callgraph.nodes.reduce((a, n) => a + num(n.flat), 0),
        nodes: cg.response.report.callgraph.nodes.length,
        edges: cg.response.report.callgraph.edges.length,
      }
    : cg;

  const filtered = await call(() => query.query(mergeReq(RT.TOP, plan.query, { filterQuery: plan.filter_function })));
  out.filtered = filtered.ok ? { total: num(filtered.response.total), filtered: num(filtered.response.filtered) } : filtered;

  const single = await call(() =>
    query.query({
      mode: QueryRequest_Mode.SINGLE_UNSPECIFIED,
      options: { oneofKind: "single", single: { query: plan.query, time: ts(plan.time_ms) } },
      reportType: RT.FLAMEGRAPH_TABLE,
      filter: [],
    }),
  );
  out.single = single.ok ? { total: num(single.response.total), root: num(single.response.report.flamegraph.root.cumulative) } : single;

  const side = (q) => ({ mode: ProfileDiffSelection_Mode.MERGE, options: { oneofKind: "merge", merge: { query: q, start: ts(plan.start_ms), end: ts(plan.end_ms) } } });
  const diff = await call(() =>
    query.query({
      mode: QueryRequest_Mode.DIFF,
      options: { oneofKind: "diff", diff: { a: side(plan.diff_base), b: side(plan.query) } },
      reportType: RT.FLAMEGRAPH_TABLE,
      filter: [],
    }),
  );
  out.diff = diff.ok ? { root: num(diff.response.report.flamegraph.root.cumulative), diff: num(diff.response.report.flamegraph.root.diff) } : diff;

  const bad = await call(() => query.queryRange({ query: "not-a-type{", start: ts(plan.start_ms), end: ts(plan.end_ms), limit: 0, sumBy: [] }));
  out.bad_query = bad;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
