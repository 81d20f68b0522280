/*
 * rpc_series.c — SelectSeries (pyroscope-api.md §5.8): validation here, the
 * bucketing in the engine (lc_query_series_*), which answers from the stored
 * per-profile totals without reading samples, unless a stack-trace selector's
 * call site asks for the part of each profile under it. go_pgo only shapes
 * pprof, so here it leaves the totals whole (and, as in Pyroscope, makes the
 * call site ignored).
 */
#include <math.h>

#include "querier_int.h"

/* step (seconds, double) -> ms; invalid_argument below 1 ms. */
static int step_ms_of(double step, int64_t *out, lc_status_t *st)
{
    double ms = step * 1000.0;
    if (!isfinite(ms) || ms < 1.0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "step must be at least 1 ms (got %g s)",
                             step);
    *out = ms >= 9.2e18 ? INT64_MAX : (int64_t)ms;
    return 0;
}

static int check_request(const Querier__V1__SelectSeriesRequest *r, lc_status_t *st)
{
    if (!r->profile_typeid || !*r->profile_typeid)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile_typeID is required");
    if (r->exemplar_type == TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL ||
        r->exemplar_type == TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN)
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED, "exemplars are not supported by ember yet");
    if (r->aggregation !=
            TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM &&
        r->aggregation !=
            TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown aggregation %d",
                             (int)r->aggregation);
    return 0;
}

static int series_reply(lc_query_series_t *s, lc_arena_t *a, ProtobufCMessage **out,
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

int qry_rpc_select_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
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
    lc_selector_t sel;
    if (check_request(r, st) || step_ms_of(r->step, &o.step_ms, st) ||
        qry_selector(r->label_selector, r->profile_typeid, &sel, st))
        return -1;
    qry_call_t c;
    if (qry_call_begin_back(&c, data, req, r->start, r->end, QRY_RANGE_RULES, o.step_ms, st)) {
        lc_selector_fini(&sel);
        return -1;
    }
    lc_query_t q = {.tenants = c.tenants,
                    .n_tenants = c.n_tenants,
                    .sel = &sel,
                    .start_ns = c.start_ns,
                    .end_ns = c.end_ns};
    o.start_ms = c.start_ms; /* the boundaries start where the look-back clipped */
    q.start_ns = lc_query_series_first_ns(&o, q.start_ns); /* the point at start sums one step back */
    lc_query_series_t *s = NULL;
    int rc = qry_stack_selector(r->stack_trace_selector, req->arena, &q, st);
    if (rc == 0) {
        s = lc_query_series_new(&o);
        rc = lc_query_series_collect(c.reader, &q, s, st);
    }
    qry_call_end(&c);
    lc_selector_fini(&sel);
    if (rc == 0)
        rc = series_reply(s, req->arena, out, st);
    lc_query_series_free(s);
    return rc ? -1 : 0;
}
