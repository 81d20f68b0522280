/*
 * rpc_stats.c — the store back end's GetProfileStats (has this tenant ever
 * ingested, and the oldest/newest profile time) and AnalyzeQuery (what a
 * query would read: blocks, series, profiles, samples and bytes, counted from
 * the store without decoding a sample).
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

int qry_store_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in,
                                ProtobufCMessage **out, lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    Types__V1__GetProfileStatsResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Types__V1__GetProfileStatsResponse)TYPES__V1__GET_PROFILE_STATS_RESPONSE__INIT;
    qry_call_t c;
    if (qry_call_begin(&c, qry_of(data), req, INT64_MIN / 1000000, INT64_MAX / 1000000, st))
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

/* ---------------------------------------------------------- AnalyzeQuery */

typedef struct analyze_s {
    qry_call_t *c;
    qry_analysis_t *out;
    lc_buf_t key;
} analyze_t;

static int analyze_profile_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    qry_analysis_t *a = ((analyze_t *)data)->out;
    a->profiles++;
    a->samples += p->n_samples;
    a->profile_bytes += p->_len;
    return 0;
}

/* A series counts once (across blocks) when it has a profile in range; its
 * key is the tenant, NUL, the encoded labels (shard.proto series_keys). */
static int analyze_series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                             const lc_labels_t *labels, void *data)
{
    analyze_t *a = data;
    uint64_t before = a->out->profiles;
    int rc = lc_block_profiles(b, series_id, a->c->start_ns, a->c->end_ns, analyze_profile_cb, a);
    if (rc || a->out->profiles == before)
        return rc;
    lc_buf_reset(&a->key);
    rc = lc_buf_puts(&a->key, tenant);
    if (!rc)
        rc = lc_buf_putc(&a->key, '\0');
    if (!rc)
        rc = lc_labels_encode(labels, &a->key);
    return rc ? rc : qry_set_add(&a->out->series, a->key.data, a->key.len, NULL);
}

/* `query` is `<profile type>{selector}`; the profile type becomes a matcher. */
static int analyze_selector(const char *query, lc_selector_t *sel, lc_status_t *st)
{
    char *pt = NULL;
    if (lc_selector_parse_query(query, strlen(query), &pt, sel, st))
        return -1;
    int rc = lc_selector_add(sel, "__profile_type__", LC_MATCH_EQ, pt, st);
    lc_free(pt);
    if (rc)
        lc_selector_fini(sel);
    return rc;
}

static int analyze_walk(analyze_t *a, const lc_selector_t *sel)
{
    qry_call_t *c = a->c;
    int rc = 0;
    for (size_t i = 0; rc == 0 && c->reader && i < lc_store_reader_count(c->reader); i++) {
        lc_block_t *b = lc_store_reader_block(c->reader, i);
        lc_block_info_t info;
        rc = lc_block_info(b, &info);
        if (!rc) {
            a->out->blocks++;
            a->out->block_bytes += info.bytes;
            rc = lc_block_series(b, c->tenants, c->n_tenants, sel, analyze_series_cb, a);
        }
    }
    return rc;
}

int qry_analyze(qry_t *q, lc_http_req_t *req, const Querier__V1__AnalyzeQueryRequest *r,
                qry_analysis_t *out, lc_status_t *st)
{
    *out = (qry_analysis_t){0};
    qry_set_init(&out->series, req->arena);
    qry_call_t c;
    if (qry_call_begin_range(&c, q, req, r->start, r->end, QRY_RANGE_RULES, st))
        return -1;
    lc_selector_t sel = {0};
    if (analyze_selector(r->query ? r->query : "", &sel, st)) {
        qry_call_end(&c);
        return -1;
    }
    analyze_t a = {.c = &c, .out = out};
    lc_buf_init(&a.key, 1u << 20);
    int rc = analyze_walk(&a, &sel);
    qry_call_end(&c);
    lc_selector_fini(&sel);
    lc_buf_fini(&a.key);
    return rc ? qry_fail(st, rc, "analyzing the query") : 0;
}

void qry_analysis_fini(qry_analysis_t *a)
{
    qry_set_fini(&a->series);
}

int qry_analysis_response(lc_arena_t *arena, const char *component, uint64_t component_count,
                          const qry_analysis_t *a, ProtobufCMessage **out, lc_status_t *st)
{
    Querier__V1__AnalyzeQueryResponse *resp = lc_arena_calloc(arena, 1, sizeof(*resp));
    Querier__V1__QueryScope *scope = lc_arena_calloc(arena, 1, sizeof(*scope));
    Querier__V1__QueryScope **scopes = lc_arena_calloc(arena, 1, sizeof(*scopes));
    Querier__V1__QueryImpact *impact = lc_arena_calloc(arena, 1, sizeof(*impact));
    if (!resp || !scope || !scopes || !impact)
        return qry_fail_arena(st);
    *scope = (Querier__V1__QueryScope)QUERIER__V1__QUERY_SCOPE__INIT;
    scope->component_type = (char *)component;
    scope->component_count = component_count;
    scope->block_count = a->blocks;
    scope->series_count = a->series.n;
    scope->profile_count = a->profiles;
    scope->sample_count = a->samples;
    scope->profile_bytes = a->profile_bytes;
    *impact = (Querier__V1__QueryImpact)QUERIER__V1__QUERY_IMPACT__INIT;
    impact->total_bytes_in_time_range = a->block_bytes;
    impact->total_queried_series = a->series.n;
    scopes[0] = scope;
    *resp = (Querier__V1__AnalyzeQueryResponse)QUERIER__V1__ANALYZE_QUERY_RESPONSE__INIT;
    resp->n_query_scopes = 1;
    resp->query_scopes = scopes;
    resp->query_impact = impact;
    *out = &resp->base;
    return 0;
}

int qry_store_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                            lc_status_t *st, void *data)
{
    qry_analysis_t a;
    int rc = qry_analyze(qry_of(data), req, (const Querier__V1__AnalyzeQueryRequest *)in, &a, st);
    if (rc == 0)
        rc = qry_analysis_response(req->arena, "ember store", 1, &a, out, st);
    qry_analysis_fini(&a);
    return rc;
}
