/*
 * rpc_series.c — the store back end's SelectSeries (pyroscope-api.md §5.8):
 * the buckets of the engine (lc_query_series_*), which answers from the
 * stored per-profile totals without reading samples, unless a stack-trace
 * selector's call site asks for the part of each profile under it. go_pgo
 * only shapes pprof, so here it leaves the totals whole (and, as in
 * Pyroscope, makes the call site ignored). The request's checks, its step
 * and the limit belong to the front end (frontend.c).
 */
#include "querier_int.h"

int qry_store_select_series(qry_front_t *fe, lc_http_req_t *req,
                            const Querier__V1__SelectSeriesRequest *r,
                            const lc_query_series_opts_t *opts, lc_query_series_t **out,
                            lc_status_t *st)
{
    lc_query_series_opts_t o = *opts;
    lc_selector_t sel;
    *out = NULL;
    if (qry_selector(r->label_selector, r->profile_typeid, &sel, st))
        return -1;
    qry_call_t c;
    if (qry_call_begin_range(&c, qry_of(fe), req, r->start, r->end, QRY_RANGE_RULES, st)) {
        lc_selector_fini(&sel);
        return -1;
    }
    lc_query_t q = {.tenants = c.tenants,
                    .n_tenants = c.n_tenants,
                    .sel = &sel,
                    .start_ns = c.start_ns,
                    .end_ns = c.end_ns};
    o.start_ms = c.start_ms; /* the boundaries start where the look-back clipped */
    lc_query_series_t *s = NULL;
    int rc = qry_stack_selector(r->stack_trace_selector, req->arena, &q, st);
    if (rc == 0) {
        s = lc_query_series_new(&o);
        rc = lc_query_series_collect(c.reader, &q, s, st);
    }
    qry_call_end(&c);
    lc_selector_fini(&sel);
    if (rc) {
        lc_query_series_free(s);
        return -1;
    }
    *out = s;
    return 0;
}
