/*
 * frontend.c — the query front end: querier.v1.QuerierService and the legacy
 * HTTP endpoints, validated, limited and shaped once (front_shape.c), over a back end
 * (qry_backend_t) that only gathers: the local store (rpc_*.c) in `ember` and
 * on ingesters, or the fan-out to ingesters (fanout*.c) in `ember-querier`.
 *
 * Every method gets a route of its own (qry_route_register, the table in
 * front_routes.c) rather than lc_connect_register:
 * the two that can answer merged pprof (SelectMergeStacktraces,
 * SelectMergeProfile) may answer protobuf bytes (qry_reply_t) sent with
 * lc_connect_reply_raw, and every route checks the tenant before it reads the
 * request (qry_tenant_first), so a call without X-Scope-OrgID is a 401 with
 * multitenancy on even when its body is bad too.
 *
 * What happens here, in this order, for the merges: the format, the trace-id
 * selector (not kept), max_nodes (§5.5); then the back end merges every node
 * and the answer is truncated once, at the end. SelectSeries: the request's
 * checks and its step here, the bucketing by the back end, the limit when the
 * series are emitted here. The listings are answered by the back end whole.
 * The time-range rules (§5.9, qry_front_range in shared.c) are the front end's too; the
 * store back end applies them where it opens its snapshot
 * (qry_call_begin_range), after the selectors are parsed, as Pyroscope
 * orders its errors, since they clip the range the store reads. The fan-out
 * applies none (qry_fanout_new refuses them).
 *
 * Per-method request counts and latencies come from lc_httpd's route metrics
 * (ember_http_requests_total / ember_http_request_duration_seconds with the
 * method path as the route), so the querier adds none of its own.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lc/tenant.h"
#include "querier_int.h"

/* ------------------------------------------------------------ validation */

static int check_format(int format, lc_status_t *st)
{
    switch (format) {
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF:
        return 0;
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_DOT:
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "PROFILE_FORMAT_DOT is not supported (Pyroscope serves it from v2 "
                             "storage only); GET /pyroscope/render?format=dot answers DOT");
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown profile format %d", format);
    }
}

/* What every merge checks before the back end is asked: trace ids (ember
 * keeps none), then §5.5 max_nodes: 0 -> the default; negative or above the
 * maximum -> invalid_argument. */
static int check_merge(const qry_front_t *fe, size_t n_trace_ids, int64_t requested,
                       int64_t *max_nodes, lc_status_t *st)
{
    const qry_opts_t *o = &fe->opts;
    if (n_trace_ids)
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "trace_id_selector is not supported: ember does not keep trace ids");
    if (requested < 0 || requested > o->max_nodes_max)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "max_nodes %lld is out of range: 0 (default %lld) to %lld",
                             (long long)requested, (long long)o->max_nodes_default,
                             (long long)o->max_nodes_max);
    *max_nodes = requested ? requested : o->max_nodes_default;
    return 0;
}

/* ------------------------------------------------------------ the merges */

/* ------------------------------------------------- concurrency per tenant */

/* The slots one back-end call holds: one per tenant it reads. */
typedef struct qry_slots_s {
    const char *const *tenants;
    size_t n;
    bool held;
} qry_slots_t;

/* Takes a slot of each tenant the request reads, or refuses the call with 429
 * and Retry-After (--querier.max-concurrent-queries). Here, around the back
 * end, so the local store and the fan-out share one limit, and a limited
 * call never starts reading. */
static int front_enter(qry_front_t *fe, lc_http_req_t *req, qry_slots_t *s, lc_status_t *st)
{
    *s = (qry_slots_t){0};
    if (!fe->inflight)
        return 0;
    if (lc_tenants_read(req, fe->opts.multitenancy, &s->tenants, &s->n, st))
        return -1;
    if (lc_inflight_acquire(fe->inflight, s->tenants, s->n)) {
        s->held = true;
        return 0;
    }
    for (size_t i = 0; i < s->n && fe->metrics; i++) {
        char labels[200];
        snprintf(labels, sizeof(labels), "tenant=\"%s\"", s->tenants[i]);
        lc_metric_add(lc_metrics_counter(fe->metrics, "ember_tenant_queries_refused_total",
                                         "Queries refused by the tenant's concurrency limit",
                                         labels),
                      1);
    }
    lc_http_set_header(req, "Retry-After", "1");
    return lc_status_set_http(st, 429, LC_CODE_RESOURCE_EXHAUSTED,
                              "too many concurrent queries for this tenant (limit %lld)",
                              (long long)fe->opts.max_concurrent_per_tenant);
}

static void front_leave(qry_front_t *fe, qry_slots_t *s)
{
    if (s->held)
        lc_inflight_release(fe->inflight, s->tenants, s->n);
    s->held = false;
}

/* The back end's calls, each holding the tenants' slots while it runs. */
static int front_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                            lc_ftree_t **out, lc_status_t *st)
{
    qry_slots_t s;
    if (front_enter(fe, req, &s, st))
        return -1;
    int rc = fe->be->merge_tree(fe, req, in, out, st);
    front_leave(fe, &s);
    return rc;
}

int qry_front_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          lc_buf_t *out, lc_status_t *st)
{
    qry_slots_t s;
    if (front_enter(fe, req, &s, st))
        return -1;
    int rc = fe->be->merge_pprof(fe, req, in, out, st);
    front_leave(fe, &s);
    return rc;
}

int qry_front_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          const qry_merge_sink_t *sink, lc_status_t *st)
{
    qry_slots_t s;
    if (front_enter(fe, req, &s, st))
        return -1;
    int rc = fe->be->merge_parts(fe, req, in, sink, st);
    front_leave(fe, &s);
    return rc;
}

static int front_select_series(qry_front_t *fe, lc_http_req_t *req,
                               const Querier__V1__SelectSeriesRequest *r,
                               const lc_query_series_opts_t *o, lc_query_series_t **out,
                               lc_status_t *st)
{
    qry_slots_t s;
    if (front_enter(fe, req, &s, st))
        return -1;
    int rc = fe->be->select_series(fe, req, r, o, out, st);
    front_leave(fe, &s);
    return rc;
}

static int front_select_profiles(qry_front_t *fe, lc_http_req_t *req,
                                 const Querier__V1__SelectSeriesRequest *r,
                                 const lc_query_series_opts_t *o,
                                 Ember__V1__ProfileRefsResponse **out, lc_status_t *st)
{
    qry_slots_t s;
    if (front_enter(fe, req, &s, st))
        return -1;
    int rc = fe->be->select_profiles(fe, req, r, o, out, st);
    front_leave(fe, &s);
    return rc;
}

/* The back end's untruncated tree of in, shaped as format and truncated at
 * max_nodes into a new response (the one place a flame graph is cut); a
 * span profile's answer has the same two fields. */
static int tree_answer(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in, int format,
                       int64_t max_nodes, Querier__V1__SelectMergeStacktracesResponse **out,
                       lc_status_t *st)
{
    Querier__V1__SelectMergeStacktracesResponse *resp =
        lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SelectMergeStacktracesResponse)
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    lc_ftree_t *t;
    if (front_merge_tree(fe, req, in, &t, st))
        return -1;
    int rc = qry_shape_tree(t, format, max_nodes, req->arena, resp, st);
    lc_ftree_free(t);
    if (rc)
        return -1;
    *out = resp;
    return 0;
}

static int stacktraces_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                             qry_reply_t *out, lc_status_t *st)
{
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    if (qry_front_merge_pprof(fe, req, in, &out->buf, st))
        return -1;
    if (qry_wrap_pprof_response(&out->buf))
        return qry_fail(st, LC_ETOOBIG, "encoding the merged profile");
    out->desc = &querier__v1__select_merge_stacktraces_response__descriptor;
    return 0;
}

static int stacktraces_answer(qry_front_t *fe, lc_http_req_t *req,
                              const Querier__V1__SelectMergeStacktracesRequest *r, qry_reply_t *out,
                              lc_status_t *st)
{
    int64_t max_nodes = 0;
    if (check_format(r->format, st) ||
        check_merge(fe, r->n_trace_id_selector, r->max_nodes, &max_nodes, st))
        return -1;
    if (r->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF)
        return stacktraces_pprof(fe, req, &r->base, out, st);
    Querier__V1__SelectMergeStacktracesResponse *resp;
    if (tree_answer(fe, req, &r->base, r->format, max_nodes, &resp, st))
        return -1;
    out->msg = &resp->base;
    return 0;
}

/* async: a request id polls (async.c); FORCE answers and keeps the answer. */
int qry_rpc_select_merge_stacktraces(lc_http_req_t *req, const ProtobufCMessage *in,
                                     qry_reply_t *out, lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Querier__V1__SelectMergeStacktracesRequest *r =
        (const Querier__V1__SelectMergeStacktracesRequest *)in;
    const Querier__V1__AsyncQueryRequest *async = r->async;
    *out = (qry_reply_t){0};
    if (async && async->request_id && *async->request_id)
        return qry_async_poll(fe, req, async->request_id, out, st);
    if (async && async->type != QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_DISABLED &&
        async->type != QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_FORCE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown async type %d",
                             (int)async->type);
    if (stacktraces_answer(fe, req, r, out, st))
        return -1;
    if (async && async->type == QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_FORCE)
        return qry_async_submit(fe, req, out, st);
    return 0;
}

int qry_rpc_select_merge_span_profile(lc_http_req_t *req, const ProtobufCMessage *in,
                                      ProtobufCMessage **out, lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Querier__V1__SelectMergeSpanProfileRequest *r =
        (const Querier__V1__SelectMergeSpanProfileRequest *)in;
    int64_t max_nodes = 0;
    if (r->n_span_selector == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "span_selector is required");
    if (r->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED &&
        r->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH &&
        r->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "SelectMergeSpanProfile answers flame graphs and trees only");
    Querier__V1__SelectMergeStacktracesResponse *tree;
    if (check_merge(fe, 0, r->max_nodes, &max_nodes, st) ||
        tree_answer(fe, req, in, r->format, max_nodes, &tree, st))
        return -1;
    Querier__V1__SelectMergeSpanProfileResponse *resp =
        lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SelectMergeSpanProfileResponse)
        QUERIER__V1__SELECT_MERGE_SPAN_PROFILE_RESPONSE__INIT;
    resp->flamegraph = tree->flamegraph;
    resp->tree = tree->tree;
    resp->symbolized_names = tree->symbolized_names;
    resp->n_symbolized_names = tree->n_symbolized_names;
    *out = &resp->base;
    return 0;
}

int qry_rpc_select_merge_profile(lc_http_req_t *req, const ProtobufCMessage *in, qry_reply_t *out,
                                 lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Querier__V1__SelectMergeProfileRequest *r =
        (const Querier__V1__SelectMergeProfileRequest *)in;
    /* max_nodes is validated but not applied: Pyroscope does not truncate
     * merged pprof by default (max_flamegraph_nodes_on_select_merge_profile). */
    int64_t unused;
    *out = (qry_reply_t){0};
    if (check_merge(fe, r->n_trace_id_selector, r->max_nodes, &unused, st))
        return -1;
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    if (qry_front_merge_pprof(fe, req, in, &out->buf, st))
        return -1;
    out->desc = &google__v1__profile__descriptor;
    return 0;
}

/* One side of a Diff: checked as a merge, merged whole by the back end. */
static int front_diff_side(void *data, lc_http_req_t *req,
                           const Querier__V1__SelectMergeStacktracesRequest *r, lc_ftree_t **out,
                           int64_t *max_nodes, lc_status_t *st)
{
    qry_front_t *fe = data;
    if (check_merge(fe, r->n_trace_id_selector, r->max_nodes, max_nodes, st))
        return -1;
    return front_merge_tree(fe, req, &r->base, out, st);
}

int qry_rpc_diff(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                 lc_status_t *st, void *data)
{
    return qry_diff_answer(req, in, out, st, front_diff_side, data);
}

/* ----------------------------------------------------------- SelectSeries */

int qry_step_ms(double step, int64_t *out, lc_status_t *st)
{
    double ms = step * 1000.0;
    if (!isfinite(ms) || ms < 1.0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "step must be at least 1 ms (got %g s)",
                             step);
    *out = ms >= 9.2e18 ? INT64_MAX : (int64_t)ms;
    return 0;
}

static int check_series_request(const Querier__V1__SelectSeriesRequest *r, lc_status_t *st)
{
    if (!r->profile_typeid || !*r->profile_typeid)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile_typeID is required");
    if (r->exemplar_type != TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_UNSPECIFIED &&
        r->exemplar_type != TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_NONE &&
        r->exemplar_type != TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL &&
        r->exemplar_type != TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown exemplar_type %d",
                             (int)r->exemplar_type);
    if (r->aggregation !=
            TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM &&
        r->aggregation !=
            TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown aggregation %d",
                             (int)r->aggregation);
    return 0;
}

static bool wants_exemplars(const Querier__V1__SelectSeriesRequest *r)
{
    return r->exemplar_type == TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL ||
           r->exemplar_type == TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN;
}

/* The series as answered: the limit (top N by total) is applied here. */
static int front_series_reply(lc_query_series_t *s, lc_arena_t *a, ProtobufCMessage **out,
                              lc_status_t *st)
{
    Querier__V1__SelectSeriesResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SelectSeriesResponse)QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    int rc = lc_query_series_emit(s, a, &resp->series, &resp->n_series);
    if (rc)
        return qry_fail(st, rc, "building series");
    *out = &resp->base;
    return 0;
}

/* The exemplars of r's profiles onto the answered points (front_exemplars.c). */
static int series_exemplars(qry_front_t *fe, lc_http_req_t *req,
                            const Querier__V1__SelectSeriesRequest *r,
                            const lc_query_series_opts_t *o,
                            Querier__V1__SelectSeriesResponse *resp, lc_status_t *st)
{
    Ember__V1__ProfileRefsResponse *refs;
    if (front_select_profiles(fe, req, r, o, &refs, st))
        return -1;
    int rc = qry_exemplars_series(refs, o, req->arena, resp->series, resp->n_series);
    return rc ? qry_fail(st, rc, "choosing exemplars") : 0;
}

int qry_rpc_select_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Querier__V1__SelectSeriesRequest *r = (const Querier__V1__SelectSeriesRequest *)in;
    lc_query_series_opts_t o = {
        .start_ms = r->start,
        .end_ms = r->end,
        .group_by = (const char *const *)r->group_by,
        .n_group_by = r->n_group_by,
        .average = r->aggregation ==
                   TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE,
        .limit = r->limit > 0 ? r->limit : 0,
    };
    lc_query_series_t *s = NULL;
    if (check_series_request(r, st) || qry_step_ms(r->step, &o.step_ms, st) ||
        front_select_series(fe, req, r, &o, &s, st))
        return -1;
    int rc = front_series_reply(s, req->arena, out, st);
    lc_query_series_free(s);
    if (rc == 0 && wants_exemplars(r))
        rc = series_exemplars(fe, req, r, &o, (Querier__V1__SelectSeriesResponse *)*out, st);
    return rc ? -1 : 0;
}

/* ----------------------------------------------------------- SelectHeatmap */

/* The heatmap's request as the back end takes it: a SelectSeries whose
 * exemplar_type says individual profiles or spans. */
static int heatmap_request(const Querier__V1__SelectHeatmapRequest *h,
                           Querier__V1__SelectSeriesRequest *r, lc_query_series_opts_t *o,
                           lc_status_t *st)
{
    if (!h->profile_typeid || !*h->profile_typeid)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile_typeID is required");
    if (h->query_type != QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_INDIVIDUAL &&
        h->query_type != QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_SPAN &&
        h->query_type != QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_UNSPECIFIED)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown heatmap query_type %d",
                             (int)h->query_type);
    *r = (Querier__V1__SelectSeriesRequest)QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    r->profile_typeid = h->profile_typeid;
    r->label_selector = h->label_selector;
    r->start = h->start;
    r->end = h->end;
    r->step = h->step;
    r->group_by = h->group_by;
    r->n_group_by = h->n_group_by;
    r->exemplar_type = h->query_type == QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_SPAN
                           ? TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN
                           : TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL;
    *o = (lc_query_series_opts_t){.start_ms = h->start,
                                  .end_ms = h->end,
                                  .group_by = (const char *const *)h->group_by,
                                  .n_group_by = h->n_group_by};
    return qry_step_ms(h->step, &o->step_ms, st);
}

int qry_rpc_select_heatmap(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data)
{
    const Querier__V1__SelectHeatmapRequest *h = (const Querier__V1__SelectHeatmapRequest *)in;
    Querier__V1__SelectSeriesRequest r;
    lc_query_series_opts_t o;
    Ember__V1__ProfileRefsResponse *refs;
    Querier__V1__SelectHeatmapResponse *resp;
    if (heatmap_request(h, &r, &o, st) || front_select_profiles(data, req, &r, &o, &refs, st))
        return -1;
    bool exemplars = h->exemplar_type != TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_NONE;
    int rc =
        qry_exemplars_heatmap(refs, &o, h->limit > 0 ? h->limit : 0, exemplars, req->arena, &resp);
    if (rc)
        return qry_fail(st, rc, "building the heatmap");
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------- the listings */

/* Answered whole by the back end: the union and sort of what it holds. */
#define QRY_LISTING(name)                                                                          \
    int qry_rpc_##name(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,     \
                       lc_status_t *st, void *data)                                                \
    {                                                                                              \
        qry_front_t *fe = data;                                                                    \
        qry_slots_t s;                                                                             \
        if (front_enter(fe, req, &s, st))                                                          \
            return -1;                                                                             \
        int rc = fe->be->name(req, in, out, st, fe);                                               \
        front_leave(fe, &s);                                                                       \
        return rc;                                                                                 \
    }

QRY_LISTING(profile_types)
QRY_LISTING(label_names)
QRY_LISTING(label_values)
QRY_LISTING(series)
QRY_LISTING(get_profile_stats)
QRY_LISTING(analyze_query)

int qry_rpc_unimplemented(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    LC_UNUSED(req);
    LC_UNUSED(in);
    LC_UNUSED(out);
    const char *method = data;
    return lc_status_set(st, LC_CODE_UNIMPLEMENTED, "%s is not implemented by ember yet", method);
}

/* ------------------------------------------------------------- the routes */

/* Runs the route's handler; its answer lands in out (a message or bytes). */
static int route_call(const qry_route_t *m, lc_http_req_t *req, const ProtobufCMessage *in,
                      qry_reply_t *out, lc_status_t *st)
{
    if (m->reply)
        return m->reply(req, in, out, st, m->data);
    return m->unary(req, in, &out->msg, st, m->data);
}

/* The tenant check made first, with the route's scope: a write route needs
 * its one tenant with write, a public one (version.v1) no credential. */
static int route_tenant(const qry_route_t *m, lc_http_req_t *req, lc_status_t *st)
{
    const char *tenant;
    if (m->scope == LC_HTTP_SCOPE_PUBLIC)
        return 0;
    if (m->scope == LC_HTTP_SCOPE_WRITE)
        return lc_tenant_write(req, m->multitenancy, &tenant, st);
    return qry_tenant_first(req, m->multitenancy, st);
}

/* A Connect unary route (thread pool): tenant, decode, handler, reply. The
 * same steps as lc_connect_register, with the tenant checked first and
 * answers that may come as bytes. */
static lc_http_result_t route_work(lc_http_req_t *req, void *data)
{
    const qry_route_t *m = data;
    uint64_t started = uv_hrtime();
    lc_status_t st = {0};
    ProtobufCMessage *in = NULL;
    lc_connect_codec_t codec;
    qry_reply_t out = {0};

    if (route_tenant(m, req, &st) != 0 || lc_connect_decode(req, m->in, &in, &codec, &st) != 0 ||
        route_call(m, req, in, &out, &st) != 0 || lc_connect_deadline_passed(req, started, &st))
        lc_connect_error(req, &st);
    else if (out.desc)
        lc_connect_reply_raw(req, codec, out.desc, out.buf.data, out.buf.len);
    else if (out.msg)
        lc_connect_reply(req, codec, out.msg);
    else
        lc_connect_error(
            req, &(lc_status_t){.code = LC_CODE_INTERNAL, .msg = "handler returned no message"});
    qry_reply_fini(&out);
    return LC_HTTP_DONE;
}

int qry_route_register(lc_httpd_t *srv, const char *path, lc_http_scope_t scope, qry_route_t *r)
{
    r->scope = scope;
    lc_http_route_t route = {
        .path = path,
        .scope = scope,
        .deny = lc_connect_error,
        .methods = NULL, /* lc_connect_decode answers 405 itself, with Allow */
        .work = route_work,
        .offload = true,
        .data = r,
    };
    return lc_httpd_route(srv, &route);
}

void qry_front_init(qry_front_t *fe, const qry_opts_t *opts, const qry_backend_t *be,
                    lc_metrics_t *metrics)
{
    *fe = (qry_front_t){.opts = *opts,
                        .be = be,
                        .inflight = lc_inflight_new(opts->max_concurrent_per_tenant),
                        .metrics = metrics,
                        .async = qry_async_new()};
    fe->legacy = (qry_rpcs_t){
        .select_merge_stacktraces = qry_rpc_select_merge_stacktraces,
        .select_merge_profile = qry_rpc_select_merge_profile,
        .select_series = qry_rpc_select_series,
        .diff = qry_rpc_diff,
        .profile_types = qry_rpc_profile_types,
        .label_values = qry_rpc_label_values,
        .data = fe,
        .multitenancy = opts->multitenancy,
    };
}

void qry_front_fini(qry_front_t *fe)
{
    lc_inflight_free(fe->inflight);
    fe->inflight = NULL;
    qry_async_free(fe->async);
    fe->async = NULL;
}
