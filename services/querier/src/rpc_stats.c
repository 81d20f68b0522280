/*
 * rpc_stats.c — GetProfileStats (has this tenant ever ingested, and the
 * oldest/newest profile time), AnalyzeQuery (an empty answer, which Pyroscope
 * also gives when the feature is off) and the method ember does not answer
 * yet (SelectHeatmap, v2-storage only in Pyroscope), which returns
 * unimplemented with a clear message.
 */
#include <string.h>

#include "lc/tenant.h"
#include "querier_int.h"

typedef struct stats_s {
    uint32_t *series; /* the tenant's series in the current block */
    size_t n_series, cap;
    int64_t oldest_ns, newest_ns;
    bool found;
} stats_t;

static int stats_series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                           const lc_labels_t *labels, void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(tenant);
    LC_UNUSED(labels);
    stats_t *s = data;
    s->series = lc_xgrow(s->series, &s->cap, s->n_series + 1, sizeof(*s->series));
    s->series[s->n_series++] = series_id;
    return 0;
}

/* Profiles come in time order: the first one of a series is its oldest. */
static int stats_first_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    stats_t *s = data;
    if (!s->found || p->time_ns < s->oldest_ns)
        s->oldest_ns = p->time_ns;
    s->found = true;
    return 1;
}

static int stats_last_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    stats_t *s = data;
    if (p->time_ns > s->newest_ns)
        s->newest_ns = p->time_ns;
    return 0;
}

/* Blocks partition time in order, so the oldest profile is in the first block
 * holding the tenant's series and the newest in the last one: only those two
 * blocks are scanned. */
static int stats_walk(qry_call_t *c, stats_t *s)
{
    lc_block_t *last = NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < lc_store_reader_count(c->reader); i++) {
        lc_block_t *b = lc_store_reader_block(c->reader, i);
        s->n_series = 0;
        rc = lc_block_series(b, c->tenants, c->n_tenants, NULL, stats_series_cb, s);
        if (rc || s->n_series == 0)
            continue;
        if (!last) {
            for (size_t k = 0; rc == 0 && k < s->n_series; k++) {
                rc = lc_block_profiles(b, s->series[k], INT64_MIN, INT64_MAX, stats_first_cb, s);
                rc = rc == 1 ? 0 : rc;
            }
        }
        last = b;
    }
    if (rc == 0 && last) {
        s->n_series = 0;
        s->newest_ns = s->oldest_ns;
        rc = lc_block_series(last, c->tenants, c->n_tenants, NULL, stats_series_cb, s);
        for (size_t k = 0; rc == 0 && k < s->n_series; k++)
            rc = lc_block_profiles(last, s->series[k], INT64_MIN, INT64_MAX, stats_last_cb, s);
    }
    return rc;
}

int qry_rpc_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in,
                              ProtobufCMessage **out, lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    Types__V1__GetProfileStatsResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Types__V1__GetProfileStatsResponse)TYPES__V1__GET_PROFILE_STATS_RESPONSE__INIT;
    qry_call_t c;
    if (qry_call_begin(&c, data, req, INT64_MIN / 1000000, INT64_MAX / 1000000, st))
        return -1;
    stats_t s = {0};
    int rc = stats_walk(&c, &s);
    qry_call_end(&c);
    lc_free(s.series);
    if (rc)
        return qry_fail(st, rc, "reading profile stats");
    resp->data_ingested = s.found;
    if (s.found) {
        resp->oldest_profile_time = s.oldest_ns / 1000000;
        resp->newest_profile_time = s.newest_ns / 1000000;
    }
    *out = &resp->base;
    return 0;
}

int qry_rpc_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    qry_t *q = data;
    const char *const *tenants;
    size_t n;
    if (lc_tenants_read(req, q->opts.multitenancy, &tenants, &n, st))
        return -1;
    Querier__V1__AnalyzeQueryResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__AnalyzeQueryResponse)QUERIER__V1__ANALYZE_QUERY_RESPONSE__INIT;
    *out = &resp->base;
    return 0;
}

int qry_rpc_unimplemented(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    LC_UNUSED(req);
    LC_UNUSED(in);
    LC_UNUSED(out);
    const char *method = data;
    return lc_status_set(st, LC_CODE_UNIMPLEMENTED, "%s is not implemented by ember yet", method);
}
