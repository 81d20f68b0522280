/*
 * rpc_series.c — the store back end's SelectSeries (pyroscope-api.md §5.8):
 * the buckets of the engine (lc_query_series_*), which answers from the
 * stored per-profile totals without reading samples, unless a stack-trace
 * selector's call site asks for the part of each profile under it. go_pgo
 * only shapes pprof, so here it leaves the totals whole (and, as in
 * Pyroscope, makes the call site ignored). The request's checks, its step
 * and the limit belong to the front end (frontend.c). With the sums, the
 * shard API (shard.c) asks for the profiles counted per bucket (in the same
 * walk, so rollups read back answer both).
 */
#include "querier_int.h"

/* ----------------------------------------------------------- the series */

/* The engine's sums into sums and, when counts is not NULL, the profiles
 * counted per bucket into counts, both bucketed as o from where the
 * look-back clipped the range. */
static int collect_sums_counts(qry_call_t *c, lc_query_t *q, const lc_query_series_opts_t *opts,
                               lc_query_series_t **sums, lc_query_series_t **counts,
                               lc_status_t *st)
{
    lc_query_series_opts_t o = *opts;
    o.start_ms = c->start_ms; /* the boundaries start where the look-back clipped */
    q->start_ns =
        lc_query_series_first_ns(&o, q->start_ns); /* the point at start sums one step back */
    *sums = lc_query_series_new(&o);
    if (counts)
        *counts = lc_query_series_new(&o);
    return lc_query_series_collect_counted(c->reader, q, *sums, counts ? *counts : NULL, st);
}

static int series_begin(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                        int64_t step_ms, lc_read_need_t need, lc_selector_t *sel, qry_call_t *c,
                        lc_status_t *st)
{
    if (qry_selector(r->label_selector, r->profile_typeid, sel, st))
        return -1;
    if (qry_call_begin_need(c, qry, req, r->start, r->end, QRY_RANGE_RULES, step_ms, need, st)) {
        lc_selector_fini(sel);
        return -1;
    }
    return 0;
}

int qry_series_begin(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     int64_t step_ms, lc_selector_t *sel, qry_call_t *c, lc_status_t *st)
{
    return series_begin(qry, req, r, step_ms, LC_READ_BLOCKS, sel, c, st);
}

int qry_series_collect(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                       const lc_query_series_opts_t *o, lc_query_series_t **sums,
                       lc_query_series_t **counts, lc_status_t *st)
{
    lc_selector_t sel;
    *sums = NULL;
    if (counts)
        *counts = NULL;
    lc_query_t q = {.sel = &sel};
    if (qry_stack_selector(r->stack_trace_selector, req->arena, &q, st))
        return -1;
    lc_read_need_t need =
        lc_query_series_uses_rollups(&q) ? LC_READ_ROLLUPS_SUFFICE : LC_READ_BLOCKS;
    qry_call_t c;
    if (series_begin(qry, req, r, o->step_ms, need, &sel, &c, st))
        return -1;
    q.tenants = c.tenants;
    q.n_tenants = c.n_tenants;
    q.start_ns = c.start_ns;
    q.end_ns = c.end_ns;
    int rc = collect_sums_counts(&c, &q, o, sums, counts, st);
    qry_call_end(&c);
    lc_selector_fini(&sel);
    if (rc == 0)
        return 0;
    lc_query_series_free(*sums);
    *sums = NULL;
    if (counts) {
        lc_query_series_free(*counts);
        *counts = NULL;
    }
    return -1;
}

int qry_store_select_series(qry_front_t *fe, lc_http_req_t *req,
                            const Querier__V1__SelectSeriesRequest *r,
                            const lc_query_series_opts_t *o, lc_query_series_t **out,
                            lc_status_t *st)
{
    return qry_series_collect(qry_of(fe), req, r, o, out, NULL, st);
}
