// api.js: ember's public API as the UI uses it: querier.v1 over Connect JSON,
// SelectMergeProfile over Connect proto (the pprof download), and
// settings.v1.RecordingRulesService. The tenant, when set, goes in X-Scope-OrgID on every call.

const Q = '/querier.v1.QuerierService/';
const RULES = '/settings.v1.RecordingRulesService/';

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(tenant) {
    this.tenant = tenant || '';
    this.timings = [];          // {method, ms} of the last calls (bench reads them)
  }

  headers(contentType) {
    const h = { 'Content-Type': contentType };
    if (this.tenant) h['X-Scope-OrgID'] = this.tenant;
    return h;
  }

  async call(method, body, signal, service = Q) {
    const t0 = performance.now();
    let res;
    try {
      res = await fetch(service + method, {
        method: 'POST', headers: this.headers('application/json'), body: JSON.stringify(body), signal,
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(`cannot reach the server (${e.message})`, 0, 'unavailable');
    }
    const text = await res.text();
    const t1 = performance.now();     // the response is here: JSON.parse counts as rendering
    let json = null;
    try { json = text ? JSON.parse(text) : {}; } catch { json = null; }
    this.timings.push({ method, ms: t1 - t0, receivedAt: t1 });
    if (this.timings.length > 50) this.timings.shift();
    if (!res.ok) {
      const msg = (json && json.message) || text.slice(0, 300) || res.statusText;
      throw new ApiError(msg, res.status, (json && json.code) || String(res.status));
    }
    if (json === null) throw new ApiError('the server answered with invalid JSON', res.status, 'internal');
    return json;
  }

  // settings.v1.RecordingRulesService: the rules page (rules.js)
  listRules() {
    return this.call('ListRecordingRules', {}, undefined, RULES).then((r) => r.rules || []);
  }

  upsertRule(rule) {
    return this.call('UpsertRecordingRule', rule, undefined, RULES).then((r) => r.rule);
  }

  deleteRule(id) {
    return this.call('DeleteRecordingRule', { id }, undefined, RULES);
  }

  profileTypes(start, end, signal) {
    return this.call('ProfileTypes', { start, end }, signal).then((r) => r.profileTypes || []);
  }

  labelNames(matchers, start, end, signal) {
    return this.call('LabelNames', { matchers, start, end }, signal).then((r) => r.names || []);
  }

  labelValues(name, matchers, start, end, signal) {
    return this.call('LabelValues', { name, matchers, start, end }, signal).then((r) => r.names || []);
  }

  // profileIds (optional): only those profiles (profile_id_selector).
  flamegraph(profileTypeID, labelSelector, start, end, maxNodes, signal, profileIds = []) {
    const req = { profileTypeID, labelSelector, start, end, maxNodes };
    if (profileIds.length) req.profileIdSelector = profileIds;
    return this.call('SelectMergeStacktraces', req, signal)
      .then((r) => r.flamegraph || { names: [], levels: [], total: '0', maxSelf: '0' });
  }

  series(profileTypeID, labelSelector, start, end, groupBy, step, signal) {
    return this.call('SelectSeries', { profileTypeID, labelSelector, start, end, groupBy, step }, signal)
      .then((r) => r.series || []);
  }

  // The top profiles of each point (SelectSeries exemplars), flattened:
  // [{profileId, timestamp, value, labels}], highest value first.
  exemplars(profileTypeID, labelSelector, start, end, groupBy, step, signal) {
    return this.call('SelectSeries', { profileTypeID, labelSelector, start, end, groupBy, step, exemplarType: 'EXEMPLAR_TYPE_INDIVIDUAL' }, signal)
      .then((r) => (r.series || []).flatMap((s) => (s.points || []).flatMap((p) => p.exemplars || []))
        .map((e) => ({ profileId: e.profileId || '', timestamp: Number(e.timestamp || 0), value: Number(e.value || 0), labels: e.labels || [] }))
        .sort((a, b) => b.value - a.value));
  }

  // Profile values bucketed over time x value (SelectHeatmap, individual profiles).
  heatmap(profileTypeID, labelSelector, start, end, groupBy, step, signal) {
    return this.call('SelectHeatmap', { profileTypeID, labelSelector, start, end, groupBy, step,
      queryType: 'HEATMAP_QUERY_TYPE_INDIVIDUAL', exemplarType: 'EXEMPLAR_TYPE_NONE' }, signal)
      .then((r) => r.series || []);
  }

  diff(left, right, signal) {
    return this.call('Diff', { left, right }, signal).then((r) => r.flamegraph || null);
  }

  // The merged pprof as bytes (Connect proto: SelectMergeProfileRequest
  // fields 1 profile_typeID, 2 label_selector, 3 start, 4 end).
  async mergedProfile(profileTypeID, labelSelector, start, end) {
    const body = new ProtoWriter().string(1, profileTypeID).string(2, labelSelector)
      .int64(3, start).int64(4, end).bytes();
    const res = await fetch(Q + 'SelectMergeProfile', { method: 'POST', headers: this.headers('application/proto'), body });
    const buf = await res.arrayBuffer();
    if (!res.ok) {
      let msg = res.statusText;
      try { msg = JSON.parse(new TextDecoder().decode(buf)).message || msg; } catch { /* not JSON */ }
      throw new ApiError(msg, res.status, String(res.status));
    }
    return new Uint8Array(buf);
  }
}

class ProtoWriter {
  constructor() { this.out = []; }
  varint(v) {
    let n = BigInt.asUintN(64, BigInt(v));
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n) b |= 0x80;
      this.out.push(b);
    } while (n);
  }
  string(field, s) {
    if (!s) return this;
    const b = new TextEncoder().encode(s);
    this.varint((field << 3) | 2);
    this.varint(b.length);
    for (const x of b) this.out.push(x);
    return this;
  }
  int64(field, v) {
    if (!v) return this;
    this.varint(field << 3);
    this.varint(Math.trunc(v));
    return this;
  }
  bytes() { return new Uint8Array(this.out); }
}
