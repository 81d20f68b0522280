/*
 * querier.c — the querier role: registers querier.v1.QuerierService's methods
 * on the HTTP server as Connect unary routes (run on the thread pool by
 * lc_connect_register) and owns nothing else; every call works on its own
 * request arena and store snapshot (rpc_*.c).
 *
 * Per-method request counts and latencies come from lc_httpd's route metrics
 * (ember_http_requests_total / ember_http_request_duration_seconds with the
 * method path as the route), so the querier adds none of its own.
 */
#include <string.h>

#include "querier_int.h"

#define QRY_SERVICE "/querier.v1.QuerierService/"

typedef struct qry_method_s {
    const char *path;
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn; /* NULL: unimplemented */
} qry_method_t;

static const qry_method_t methods[] = {
    {QRY_SERVICE "ProfileTypes", &querier__v1__profile_types_request__descriptor,
     qry_rpc_profile_types},
    {QRY_SERVICE "LabelValues", &types__v1__label_values_request__descriptor, qry_rpc_label_values},
    {QRY_SERVICE "LabelNames", &types__v1__label_names_request__descriptor, qry_rpc_label_names},
    {QRY_SERVICE "Series", &querier__v1__series_request__descriptor, qry_rpc_series},
    {QRY_SERVICE "SelectMergeStacktraces",
     &querier__v1__select_merge_stacktraces_request__descriptor, qry_rpc_select_merge_stacktraces},
    {QRY_SERVICE "SelectMergeSpanProfile",
     &querier__v1__select_merge_span_profile_request__descriptor,
     qry_rpc_select_merge_span_profile},
    {QRY_SERVICE "SelectMergeProfile", &querier__v1__select_merge_profile_request__descriptor,
     qry_rpc_select_merge_profile},
    {QRY_SERVICE "SelectSeries", &querier__v1__select_series_request__descriptor,
     qry_rpc_select_series},
    {QRY_SERVICE "GetProfileStats", &types__v1__get_profile_stats_request__descriptor,
     qry_rpc_get_profile_stats},
    {QRY_SERVICE "AnalyzeQuery", &querier__v1__analyze_query_request__descriptor,
     qry_rpc_analyze_query},
    {QRY_SERVICE "Diff", &querier__v1__diff_request__descriptor, qry_rpc_diff},
    {QRY_SERVICE "SelectHeatmap", &querier__v1__select_heatmap_request__descriptor, NULL},
};

int qry_new(uv_loop_t *loop, const qry_opts_t *opts, lc_httpd_t *srv, lc_store_t *store,
            lc_metrics_t *metrics, qry_t **out)
{
    LC_UNUSED(loop);
    qry_t *q = lc_xcalloc(1, sizeof(*q));
    q->opts = *opts;
    q->store = store;
    q->metrics = metrics;
    int rc = 0;
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
