/*
 * front_routes.c — every route of the query front end, registered in one
 * place above the files that serve them: querier.v1.QuerierService's methods
 * (frontend.c), Parca's QueryService (parca_query.c) and the legacy HTTP
 * endpoints (legacy_http.c). Runs once, on the loop thread, at start-up.
 */
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
    {QRY_SERVICE "SelectHeatmap", &querier__v1__select_heatmap_request__descriptor, NULL,
     qry_rpc_select_heatmap},
};

static int register_methods(qry_front_t *fe, lc_httpd_t *srv)
{
    int rc = 0;
    for (size_t i = 0; i < QRY_METHODS && rc == 0; i++) {
        const qry_method_t *m = &methods[i];
        bool implemented = m->reply || m->unary;
        fe->routes[i] = (qry_route_t){
            .in = m->in,
            .reply = m->reply,
            .unary = implemented ? m->unary : qry_rpc_unimplemented,
            /* the unimplemented handler takes the method name, for its message */
            .data = implemented ? (void *)fe : (void *)(m->path + strlen(QRY_SERVICE)),
            .multitenancy = fe->opts.multitenancy,
        };
        rc = qry_route_register(srv, m->path, LC_HTTP_SCOPE_READ, &fe->routes[i]);
    }
    return rc;
}

int qry_front_register(qry_front_t *fe, lc_httpd_t *srv)
{
    int rc = register_methods(fe, srv);
    if (rc == 0)
        rc = qry_parca_register(fe, srv);
    return rc ? rc : qry_legacy_register(&fe->legacy, srv);
}
