/*
 * rpc_series.c — the store back end's SelectSeries (pyroscope-api.md §5.8):
 * the buckets of the engine (lc_query_series_*), which answers from the
 * stored per-profile totals without reading samples, unless a stack-trace
 * selector's call site asks for the part of each profile under it. go_pgo
 * only shapes pprof, so here it leaves the totals whole (and, as in
 * Pyroscope, makes the call site ignored). The request's checks, its step
 * and the limit belong to the front end (frontend.c). With the sums, the
 * shard API (shard.c) asks for the profiles counted per bucket.
 */
#include "querier_int.h"

/* ------------------------------------------------------------ the counts */

typedef struct count_walk_s {
    lc_query_series_t *s;
    const lc_query_t *q;
    uint32_t group;
} count_walk_t;

static int count_profile(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    count_walk_t *w = data;
    if (!lc_query_profile_selected(w->q, p))
        return 0;
    return lc_query_series_add(w->s, w->group, p->time_ns, 1);
}

static int count_series(lc_block_t *b, uint32_t series_id, const char *tenant,
                        const lc_labels_t *labels, void *data)
{
    LC_UNUSED(tenant);
    count_walk_t *w = data;
    int rc = lc_query_series_group(w->s, labels, &w->group);
    return rc ? rc
              : lc_block_profiles(b, series_id, w->q->start_ns, w->q->end_ns, count_profile, w);
}

/* The profiles per group and bucket: the same profiles the engine sums. */
static int count_profiles(lc_store_reader_t *r, const lc_query_t *q, lc_query_series_t *s)
{
    count_walk_t w = {.s = s, .q = q};
    int rc = 0;
    for (size_t i = 0; r && rc == 0 && i < lc_store_reader_count(r); i++)
        rc = lc_block_series(lc_store_reader_block(r, i), q->tenants, q->n_tenants, q->sel,
                             count_series, &w);
    return rc;
}

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
    if (lc_query_series_collect(c->reader, q, *sums, st))
        return -1;
    if (counts && count_profiles(c->reader, q, *counts))
        return lc_status_set(st, LC_CODE_INTERNAL, "counting profiles");
    return 0;
}

int qry_series_begin(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     int64_t step_ms, lc_selector_t *sel, qry_call_t *c, lc_status_t *st)
{
    if (qry_selector(r->label_selector, r->profile_typeid, sel, st))
        return -1;
    if (qry_call_begin_back(c, qry, req, r->start, r->end, QRY_RANGE_RULES, step_ms, st)) {
        lc_selector_fini(sel);
        return -1;
    }
    return 0;
}

int qry_series_collect(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                       const lc_query_series_opts_t *o, lc_query_series_t **sums,
                       lc_query_series_t **counts, lc_status_t *st)
{
    lc_selector_t sel;
    *sums = NULL;
    if (counts)
        *counts = NULL;
    qry_call_t c;
    if (qry_series_begin(qry, req, r, o->step_ms, &sel, &c, st))
        return -1;
    lc_query_t q = {.tenants = c.tenants,
                    .n_tenants = c.n_tenants,
                    .sel = &sel,
                    .start_ns = c.start_ns,
                    .end_ns = c.end_ns};
    int rc = qry_stack_selector(r->stack_trace_selector, req->arena, &q, st);
    if (rc == 0)
        rc = collect_sums_counts(&c, &q, o, sums, counts, st);
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
