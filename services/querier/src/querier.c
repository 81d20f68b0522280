/*
 * querier.c — the querier role over the local store: the query front end
 * (frontend.c) with the store as its back end (qry_store_backend, rpc_*.c).
 * Owns nothing but its qry_t; every call works on its own request arena and
 * store snapshot.
 */
#include "querier_int.h"

const qry_backend_t qry_store_backend = {
    .merge_tree = qry_store_merge_tree,
    .merge_pprof = qry_store_merge_pprof,
    .merge_parts = qry_store_merge_parts,
    .select_series = qry_store_select_series,
    .select_profiles = qry_store_select_profiles,
    .profile_types = qry_store_profile_types,
    .label_names = qry_store_label_names,
    .label_values = qry_store_label_values,
    .series = qry_store_series,
    .get_profile_stats = qry_store_get_profile_stats,
    .analyze_query = qry_store_analyze_query,
};

int qry_new(uv_loop_t *loop, const qry_opts_t *opts, lc_httpd_t *srv, lc_store_t *store,
            lc_metrics_t *metrics, qry_t **out)
{
    LC_UNUSED(loop);
    qry_t *q = lc_xcalloc(1, sizeof(*q));
    qry_front_init(&q->front, opts, &qry_store_backend, metrics);
    q->store = store;
    q->metrics = metrics;
    int rc = qry_front_register(&q->front, srv);
    if (rc) {
        qry_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

void qry_free(qry_t *q)
{
    if (q)
        qry_front_fini(&q->front);
    lc_free(q);
}
