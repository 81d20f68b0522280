/*
 * shard.c — the shard query API of an ingester: what a distributed querier
 * asks every ingester (proto/ember/v1/shard.proto), answered from this
 * ingester's own store with UNTRUNCATED partial results.
 *
 * Most of it is the querier role itself, mounted with limits that truncate
 * nothing (max_nodes 0 = every node): the querier's fan-out sends the public
 * querier.v1 requests asking for TREE bytes or pprof, merges the answers and
 * truncates once. The one answer the public API cannot give is SelectSeries
 * with per-bucket COUNTS next to the sums (an average of averages is wrong),
 * so /ember.v1.ShardService/SelectSeries is served here: the engine computes
 * the sums (with every sample filter), and a second walk of the same profiles
 * counts them (qry_series_collect, rpc_series.c). Another is the list of
 * profile references exemplars and heatmaps are built from
 * (/ember.v1.ShardService/SelectProfiles, rpc_exemplars.c). The last is AnalyzeQuery with the keys
 * of the series it counted (/ember.v1.ShardService/AnalyzeQuery), so the querier can count a series
 * held by several ingesters once.
 */
#include <math.h>
#include <string.h>

#include "ember/v1/shard.pb-c.h"
#include "querier_int.h"
#include "shard.h"

#define SHARD_SERIES_PATH "/ember.v1.ShardService/SelectSeries"
#define SHARD_ANALYZE_PATH "/ember.v1.ShardService/AnalyzeQuery"
#define SHARD_PROFILES_PATH "/ember.v1.ShardService/SelectProfiles"

struct qry_shard_s {
    qry_t *qry;                 /* the querier role on this store, truncating nothing */
    qry_route_t series_route;   /* SelectSeries with counts; tenant checked first */
    qry_route_t analyze_route;  /* AnalyzeQuery with series keys */
    qry_route_t profiles_route; /* the profile references of exemplars and heatmaps */
};

/* ----------------------------------------------------------- the answer */

static Ember__V1__SeriesPartial *partial_of(lc_arena_t *a, const Types__V1__Series *sum,
                                            const Types__V1__Series *count)
{
    Ember__V1__SeriesPartial *p = lc_arena_calloc(a, 1, sizeof(*p));
    Ember__V1__SeriesBucket **bs = lc_arena_calloc(a, sum->n_points + 1, sizeof(*bs));
    if (!p || !bs || sum->n_points != count->n_points)
        return NULL;
    *p = (Ember__V1__SeriesPartial)EMBER__V1__SERIES_PARTIAL__INIT;
    p->labels = sum->labels;
    p->n_labels = sum->n_labels;
    for (size_t i = 0; i < sum->n_points; i++) {
        if (sum->points[i]->timestamp != count->points[i]->timestamp)
            return NULL;
        bs[i] = lc_arena_calloc(a, 1, sizeof(**bs));
        if (!bs[i])
            return NULL;
        *bs[i] = (Ember__V1__SeriesBucket)EMBER__V1__SERIES_BUCKET__INIT;
        bs[i]->timestamp_ms = sum->points[i]->timestamp;
        bs[i]->sum = llround(sum->points[i]->value);
        bs[i]->count = llround(count->points[i]->value);
    }
    p->buckets = bs;
    p->n_buckets = sum->n_points;
    return p;
}

/* Zips the engine's sums with the counts: both are emitted sorted by labels
 * from the same profiles, so they line up series by series, point by point. */
static int zip_reply(lc_query_series_t *sums, lc_query_series_t *counts, lc_arena_t *a,
                     ProtobufCMessage **out, lc_status_t *st)
{
    Types__V1__Series **sv, **cv;
    size_t ns, nc;
    int rc = lc_query_series_emit(sums, a, &sv, &ns);
    if (rc == 0)
        rc = lc_query_series_emit(counts, a, &cv, &nc);
    if (rc)
        return qry_fail(st, rc, "building series");
    if (ns != nc)
        return lc_status_set(st, LC_CODE_INTERNAL, "series sums and counts disagree");
    Ember__V1__SeriesPartialResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    Ember__V1__SeriesPartial **v = lc_arena_calloc(a, ns + 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_arena(st);
    *resp = (Ember__V1__SeriesPartialResponse)EMBER__V1__SERIES_PARTIAL_RESPONSE__INIT;
    for (size_t i = 0; i < ns; i++) {
        v[i] = partial_of(a, sv[i], cv[i]);
        if (!v[i])
            return lc_status_set(st, LC_CODE_INTERNAL, "series sums and counts disagree");
    }
    resp->series = v;
    resp->n_series = ns;
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------------ the method */

/* SelectSeries' bucketing, unlimited and summed (the querier averages). */
static int series_opts(const Querier__V1__SelectSeriesRequest *r, lc_query_series_opts_t *o,
                       lc_status_t *st)
{
    if (!r->profile_typeid || !*r->profile_typeid)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile_typeID is required");
    *o = (lc_query_series_opts_t){
        .start_ms = r->start,
        .end_ms = r->end,
        .group_by = (const char *const *)r->group_by,
        .n_group_by = r->n_group_by,
    };
    return qry_step_ms(r->step, &o->step_ms, st);
}

static int shard_select_series(lc_http_req_t *req, const ProtobufCMessage *in,
                               ProtobufCMessage **out, lc_status_t *st, void *data)
{
    qry_shard_t *sh = data;
    const Querier__V1__SelectSeriesRequest *r = (const Querier__V1__SelectSeriesRequest *)in;
    lc_query_series_opts_t o;
    lc_query_series_t *sums, *counts;
    if (series_opts(r, &o, st) || qry_series_collect(sh->qry, req, r, &o, &sums, &counts, st))
        return -1;
    int rc = zip_reply(sums, counts, req->arena, out, st);
    lc_query_series_free(sums);
    lc_query_series_free(counts);
    return rc ? -1 : 0;
}

/* The profile references this store holds for a selection (rpc_exemplars.c):
 * the querier's front end builds exemplars and heatmaps from all of them. */
static int shard_select_profiles(lc_http_req_t *req, const ProtobufCMessage *in,
                                 ProtobufCMessage **out, lc_status_t *st, void *data)
{
    qry_shard_t *sh = data;
    const Querier__V1__SelectSeriesRequest *r = (const Querier__V1__SelectSeriesRequest *)in;
    lc_query_series_opts_t o;
    Ember__V1__ProfileRefsResponse *resp;
    if (series_opts(r, &o, st) || qry_profile_refs(sh->qry, req, r, &o, &resp, st))
        return -1;
    *out = &resp->base;
    return 0;
}

/* ----------------------------------------------------------- AnalyzeQuery */

static int analyze_reply(const qry_analysis_t *a, lc_arena_t *arena, ProtobufCMessage **out,
                         lc_status_t *st)
{
    Ember__V1__AnalyzePartialResponse *resp = lc_arena_calloc(arena, 1, sizeof(*resp));
    ProtobufCBinaryData *keys = lc_arena_calloc(arena, a->series.n + 1, sizeof(*keys));
    if (!resp || !keys)
        return qry_fail_arena(st);
    *resp = (Ember__V1__AnalyzePartialResponse)EMBER__V1__ANALYZE_PARTIAL_RESPONSE__INIT;
    resp->block_count = a->blocks;
    resp->block_bytes = a->block_bytes;
    resp->profile_count = a->profiles;
    resp->sample_count = a->samples;
    resp->profile_bytes = a->profile_bytes;
    for (size_t i = 0; i < a->series.n; i++)
        keys[i] = (ProtobufCBinaryData){.len = a->series.len[i], .data = (uint8_t *)a->series.v[i]};
    resp->series_keys = keys;
    resp->n_series_keys = a->series.n;
    *out = &resp->base;
    return 0;
}

static int shard_analyze(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    qry_shard_t *sh = data;
    qry_analysis_t a;
    int rc = qry_analyze(sh->qry, req, (const Querier__V1__AnalyzeQueryRequest *)in, &a, st);
    if (rc == 0)
        rc = analyze_reply(&a, req->arena, out, st);
    qry_analysis_fini(&a); /* the keys stay in the arena */
    return rc;
}

/* ------------------------------------------------------------- lifecycle */

int qry_shard_new(uv_loop_t *loop, lc_httpd_t *srv, lc_store_t *store, lc_metrics_t *metrics,
                  bool multitenancy, qry_shard_t **out)
{
    qry_shard_t *sh = lc_xcalloc(1, sizeof(*sh));
    qry_opts_t qo;
    qry_opts_default(&qo);
    qo.multitenancy = multitenancy;
    qo.max_nodes_default = 0; /* 0 = no truncation: the querier truncates the merge */
    qo.read_from_header = true;
    qo.read_bucket_header = true; /* read by the querier's store on the bucket alone */
    int rc = qry_new(loop, &qo, srv, store, metrics, &sh->qry);
    sh->series_route = (qry_route_t){.in = &querier__v1__select_series_request__descriptor,
                                     .unary = shard_select_series,
                                     .data = sh,
                                     .multitenancy = multitenancy};
    sh->analyze_route = (qry_route_t){.in = &querier__v1__analyze_query_request__descriptor,
                                      .unary = shard_analyze,
                                      .data = sh,
                                      .multitenancy = multitenancy};
    if (rc == 0)
        rc = qry_route_register(srv, SHARD_SERIES_PATH, LC_HTTP_SCOPE_READ, &sh->series_route);
    sh->profiles_route = (qry_route_t){.in = &querier__v1__select_series_request__descriptor,
                                       .unary = shard_select_profiles,
                                       .data = sh,
                                       .multitenancy = multitenancy};
    if (rc == 0)
        rc = qry_route_register(srv, SHARD_ANALYZE_PATH, LC_HTTP_SCOPE_READ, &sh->analyze_route);
    if (rc == 0)
        rc = qry_route_register(srv, SHARD_PROFILES_PATH, LC_HTTP_SCOPE_READ, &sh->profiles_route);
    if (rc) {
        qry_shard_free(sh);
        return rc;
    }
    *out = sh;
    return 0;
}

void qry_shard_free(qry_shard_t *sh)
{
    if (!sh)
        return;
    qry_free(sh->qry);
    lc_free(sh);
}
