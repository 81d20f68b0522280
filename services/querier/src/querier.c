/*
 * querier.c — the querier role: registers querier.v1.QuerierService's methods
 * on the HTTP server as Connect unary routes (run on the thread pool by
 * lc_connect_register) and owns nothing else; every call works on its own
 * request arena and store snapshot (rpc_*.c).
 *
 * The two methods that can answer merged pprof (SelectMergeStacktraces,
 * SelectMergeProfile) get a route of their own here, because their answer may
 * be protobuf bytes (qry_reply_t) sent with lc_connect_reply_raw. The legacy
 * HTTP endpoints (legacy_*.c) are registered here too.
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
    lc_connect_unary_fn fn; /* NULL: unimplemented */
} qry_method_t;

static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *in;
    qry_reply_fn fn;
} reply_methods[QRY_REPLY_METHODS] = {
    {QRY_SERVICE "SelectMergeStacktraces",
     &querier__v1__select_merge_stacktraces_request__descriptor, qry_rpc_select_merge_stacktraces},
    {QRY_SERVICE "SelectMergeProfile", &querier__v1__select_merge_profile_request__descriptor,
     qry_rpc_select_merge_profile},
};

static const qry_method_t methods[] = {
    {QRY_SERVICE "ProfileTypes", &querier__v1__profile_types_request__descriptor,
     qry_rpc_profile_types},
    {QRY_SERVICE "LabelValues", &types__v1__label_values_request__descriptor, qry_rpc_label_values},
    {QRY_SERVICE "LabelNames", &types__v1__label_names_request__descriptor, qry_rpc_label_names},
    {QRY_SERVICE "Series", &querier__v1__series_request__descriptor, qry_rpc_series},
    {QRY_SERVICE "SelectMergeSpanProfile",
     &querier__v1__select_merge_span_profile_request__descriptor,
     qry_rpc_select_merge_span_profile},
    {QRY_SERVICE "SelectSeries", &querier__v1__select_series_request__descriptor,
     qry_rpc_select_series},
    {QRY_SERVICE "GetProfileStats", &types__v1__get_profile_stats_request__descriptor,
     qry_rpc_get_profile_stats},
    {QRY_SERVICE "AnalyzeQuery", &querier__v1__analyze_query_request__descriptor,
     qry_rpc_analyze_query},
    {QRY_SERVICE "Diff", &querier__v1__diff_request__descriptor, qry_rpc_diff},
    {QRY_SERVICE "SelectHeatmap", &querier__v1__select_heatmap_request__descriptor, NULL},
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

/* A Connect unary route whose handler answers a qry_reply_t (thread pool). */
static lc_http_result_t reply_route_work(lc_http_req_t *req, void *data)
{
    const qry_reply_route_t *m = data;
    uint64_t started = uv_hrtime();
    lc_status_t st = {0};
    ProtobufCMessage *in = NULL;
    lc_connect_codec_t codec;
    qry_reply_t out = {0};

    if (lc_connect_decode(req, m->in, &in, &codec, &st) != 0 ||
        m->fn(req, in, &out, &st, m->q) != 0 || deadline_passed(req, started, &st))
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

static int register_reply_methods(qry_t *q, lc_httpd_t *srv)
{
    int rc = 0;
    for (size_t i = 0; i < QRY_REPLY_METHODS && rc == 0; i++) {
        q->reply_routes[i] = (qry_reply_route_t){reply_methods[i].in, reply_methods[i].fn, q};
        lc_http_route_t route = {
            .path = reply_methods[i].path,
            .methods = NULL, /* lc_connect_decode answers 405 itself, with Allow */
            .work = reply_route_work,
            .offload = true,
            .data = &q->reply_routes[i],
        };
        rc = lc_httpd_route(srv, &route);
    }
    return rc;
}

int qry_new(uv_loop_t *loop, const qry_opts_t *opts, lc_httpd_t *srv, lc_store_t *store,
            lc_metrics_t *metrics, qry_t **out)
{
    LC_UNUSED(loop);
    qry_t *q = lc_xcalloc(1, sizeof(*q));
    q->opts = *opts;
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
    };
    int rc = register_reply_methods(q, srv);
    if (rc == 0)
        rc = qry_legacy_register(&q->legacy, srv);
    for (size_t i = 0; i < LC_ARRAY_LEN(methods) && rc == 0; i++) {
        const qry_method_t *m = &methods[i];
        if (m->fn)
            rc = lc_connect_register(srv, m->path, m->in, m->fn, q);
        else /* the method name, for the error message */
            rc = lc_connect_register(srv, m->path, m->in, qry_rpc_unimplemented,
                                     (void *)(m->path + strlen(QRY_SERVICE)));
    }
    if (rc) {
        lc_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

void qry_free(qry_t *q)
{
    lc_free(q);
}
