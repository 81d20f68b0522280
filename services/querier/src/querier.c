/*
 * querier.c — the querier role: registers querier.v1.QuerierService's methods
 * on the HTTP server as Connect unary routes (run on the thread pool by
 * lc_connect_register) and owns nothing else; every call works on its own
 * request arena and store snapshot (rpc_*.c).
 *
 * Every method gets a route of its own here rather than lc_connect_register:
 * the two that can answer merged pprof (SelectMergeStacktraces,
 * SelectMergeProfile) may answer protobuf bytes (qry_reply_t) sent with
 * lc_connect_reply_raw, and every route checks the tenant before it reads the
 * request (qry_tenant_first), so a call without X-Scope-OrgID is a 401 with
 * multitenancy on even when its body is bad too. The legacy HTTP endpoints
 * (legacy_*.c) are registered here too.
 *
 * Per-method request counts and latencies come from lc_httpd's route metrics
 * (ember_http_requests_total / ember_http_request_duration_seconds with the
 * method path as the route), so the querier adds none of its own.
 */
#include <inttypes.h>
#include <string.h>

#include "querier_int.h"

#define QRY_SERVICE "/querier.v1.QuerierService/"

typedef struct qry_method_s {
    const char *path;
    const ProtobufCMessageDescriptor *in;
    qry_reply_fn reply;        /* answers a qry_reply_t, or */
    lc_connect_unary_fn unary; /* answers a message; both NULL: unimplemented */
} qry_method_t;

static const qry_method_t methods[QRY_METHODS] = {
    {QRY_SERVICE "SelectMergeStacktraces",
     &querier__v1__select_merge_stacktraces_request__descriptor, qry_rpc_select_merge_stacktraces,
     NULL},
    {QRY_SERVICE "SelectMergeProfile", &querier__v1__select_merge_profile_request__descriptor,
     qry_rpc_select_merge_profile, NULL},
    {QRY_SERVICE "ProfileTypes", &querier__v1__profile_types_request__descriptor, NULL,
     qry_rpc_profile_types},
    {QRY_SERVICE "LabelValues", &types__v1__label_values_request__descriptor, NULL,
     qry_rpc_label_values},
    {QRY_SERVICE "LabelNames", &types__v1__label_names_request__descriptor, NULL,
     qry_rpc_label_names},
    {QRY_SERVICE "Series", &querier__v1__series_request__descriptor, NULL, qry_rpc_series},
    {QRY_SERVICE "SelectMergeSpanProfile",
     &querier__v1__select_merge_span_profile_request__descriptor, NULL,
     qry_rpc_select_merge_span_profile},
    {QRY_SERVICE "SelectSeries", &querier__v1__select_series_request__descriptor, NULL,
     qry_rpc_select_series},
    {QRY_SERVICE "GetProfileStats", &types__v1__get_profile_stats_request__descriptor, NULL,
     qry_rpc_get_profile_stats},
    {QRY_SERVICE "AnalyzeQuery", &querier__v1__analyze_query_request__descriptor, NULL,
     qry_rpc_analyze_query},
    {QRY_SERVICE "Diff", &querier__v1__diff_request__descriptor, NULL, qry_rpc_diff},
    {QRY_SERVICE "SelectHeatmap", &querier__v1__select_heatmap_request__descriptor, NULL, NULL},
};

/* The request's Connect-Timeout-Ms has passed since started_ns (as
 * lc_connect_register does: a late reply becomes deadline_exceeded). */
static bool deadline_passed(const lc_http_req_t *req, uint64_t started_ns, lc_status_t *st)
{
    uint64_t timeout_ms = lc_connect_timeout_ms(req);
    if (timeout_ms == 0 || (uv_hrtime() - started_ns) / 1000000 <= timeout_ms)
        return false;
    lc_status_set(st, LC_CODE_DEADLINE_EXCEEDED, "deadline of %" PRIu64 " ms exceeded", timeout_ms);
    return true;
}

/* Runs the route's handler; its answer lands in out (a message or bytes). */
static int route_call(const qry_route_t *m, lc_http_req_t *req, const ProtobufCMessage *in,
                      qry_reply_t *out, lc_status_t *st)
{
    if (m->reply)
        return m->reply(req, in, out, st, m->data);
    return m->unary(req, in, &out->msg, st, m->data);
}

/* A Connect unary route (thread pool): tenant, decode, handler, reply. The
 * same steps as lc_connect_register, with the tenant checked first. */
static lc_http_result_t route_work(lc_http_req_t *req, void *data)
{
    const qry_route_t *m = data;
    uint64_t started = uv_hrtime();
    lc_status_t st = {0};
    ProtobufCMessage *in = NULL;
    lc_connect_codec_t codec;
    qry_reply_t out = {0};

    if (qry_tenant_first(req, m->multitenancy, &st) != 0 ||
        lc_connect_decode(req, m->in, &in, &codec, &st) != 0 ||
        route_call(m, req, in, &out, &st) != 0 || deadline_passed(req, started, &st))
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

int qry_route_register(lc_httpd_t *srv, const char *path, qry_route_t *r)
{
    lc_http_route_t route = {
        .path = path,
        .methods = NULL, /* lc_connect_decode answers 405 itself, with Allow */
        .work = route_work,
        .offload = true,
        .data = r,
    };
    return lc_httpd_route(srv, &route);
}

static int register_methods(qry_t *q, lc_httpd_t *srv)
{
    int rc = 0;
    for (size_t i = 0; i < QRY_METHODS && rc == 0; i++) {
        const qry_method_t *m = &methods[i];
        bool implemented = m->reply || m->unary;
        q->routes[i] = (qry_route_t){
            .in = m->in,
            .reply = m->reply,
            .unary = implemented ? m->unary : qry_rpc_unimplemented,
            /* the unimplemented handler takes the method name, for its message */
            .data = implemented ? (void *)q : (void *)(m->path + strlen(QRY_SERVICE)),
            .multitenancy = q->opts.multitenancy,
        };
        rc = qry_route_register(srv, m->path, &q->routes[i]);
    }
    return rc;
}

int qry_new(uv_loop_t *loop, const qry_opts_t *opts, lc_httpd_t *srv, lc_store_t *store,
            lc_metrics_t *metrics, qry_t **out)
{
    LC_UNUSED(loop);
    qry_t *q = lc_xcalloc(1, sizeof(*q));
    q->opts = *opts;
    q->inflight = lc_inflight_new(opts->max_concurrent_per_tenant);
    q->store = store;
    q->metrics = metrics;
    q->legacy = (qry_rpcs_t){
        .select_merge_stacktraces = qry_rpc_select_merge_stacktraces,
        .select_merge_profile = qry_rpc_select_merge_profile,
        .select_series = qry_rpc_select_series,
        .diff = qry_rpc_diff,
        .profile_types = qry_rpc_profile_types,
        .label_values = qry_rpc_label_values,
        .data = q,
        .multitenancy = q->opts.multitenancy,
    };
    int rc = register_methods(q, srv);
    if (rc == 0)
        rc = qry_legacy_register(&q->legacy, srv);
    if (rc) {
        lc_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

void qry_free(qry_t *q)
{
    if (q)
        lc_inflight_free(q->inflight);
    lc_free(q);
}
