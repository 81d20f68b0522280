/*
 * fanout_rpc.c — querier.v1.QuerierService answered by fan-out.
 *
 * Each method forwards the caller's request to every ingester, changed only
 * where a partial result must stay whole: flame graphs and diffs are asked as
 * TREE bytes with max_nodes 0 (the ingesters' shard querier truncates
 * nothing), merged pprof as pprof, SelectSeries as per-bucket sums AND counts
 * (/ember.v1.ShardService/SelectSeries) with no limit. The merge happens
 * here and the requested truncation (max_nodes, limit) exactly once, at the
 * end, with the same engine functions as the local querier, so the answer
 * equals the one a single process holding all the data would give.
 *
 * Validation that shapes the merge (max_nodes, format) is checked here; the
 * rest (selectors, time range, tenants) by every ingester, whose
 * invalid_argument comes back unchanged.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ember/v1/shard.pb-c.h"
#include "fanout_int.h"
#include "lc/pprof.h"

/* ------------------------------------------------------- tree merges */

/* §5.5, as the local querier: 0 -> the default; out of range is invalid. */
static int effective_max_nodes(const qry_fanout_t *f, int64_t requested, int64_t *out,
                               lc_status_t *st)
{
    const qry_opts_t *o = &f->opts.q;
    if (requested < 0 || requested > o->max_nodes_max)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "max_nodes %lld is out of range: 0 (default %lld) to %lld",
                             (long long)requested, (long long)o->max_nodes_default,
                             (long long)o->max_nodes_max);
    *out = requested ? requested : o->max_nodes_default;
    return 0;
}

/* Asks every ingester for the untruncated tree of r and merges them. */
static int merged_tree(qry_fanout_t *f, lc_http_req_t *req, const char *method,
                       const ProtobufCMessage *shard_req, lc_ftree_t **out, lc_status_t *st)
{
    fo_answer_t *ans;
    size_t n;
    ProtobufCMessage **resp;
    char *path = lc_arena_sprintf(req->arena, FO_PUBLIC_SERVICE "%s", method);
    if (!path)
        return qry_fail_arena(st);
    if (fo_call_all(f, req, path, shard_req, &ans, &n, st) ||
        fo_unpack_all(req, &querier__v1__select_merge_stacktraces_response__descriptor, ans, n,
                      &resp, st))
        return -1;
    lc_ftree_t *t = lc_ftree_new(0);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        /* SelectMergeSpanProfileResponse has tree at the same field number. */
        const Querier__V1__SelectMergeStacktracesResponse *r =
            (const Querier__V1__SelectMergeStacktracesResponse *)resp[i];
        if (r->tree.len)
            rc = lc_ftree_read_tree(t, r->tree.data, r->tree.len);
    }
    if (rc) {
        lc_ftree_free(t);
        return qry_fail(st, rc, "merging partial trees");
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------------- pprof */

/* Every ingester's merged pprof for r, merged into out (protobuf bytes). */
static int merged_pprof(qry_fanout_t *f, lc_http_req_t *req,
                        const Querier__V1__SelectMergeProfileRequest *r, lc_buf_t *out,
                        lc_status_t *st)
{
    fo_answer_t *ans;
    size_t n;
    if (fo_call_all(f, req, FO_PUBLIC_SERVICE "SelectMergeProfile", &r->base, &ans, &n, st))
        return -1;
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    int64_t start = 0, end = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = fo_pprof_add(b, req->arena, ans[i].body, ans[i].len, i == 0, &start, &end, st);
    if (rc == 0) {
        lc_pprof_builder_times(b, start, end - start);
        rc = lc_pprof_builder_encode(b, false, out);
        if (rc)
            rc = qry_fail(st, rc, "encoding the merged profile");
    }
    lc_pprof_builder_free(b);
    return rc ? -1 : 0;
}

/* The pprof request that matches a SelectMergeStacktraces one. */
static Querier__V1__SelectMergeProfileRequest
profile_req_of(const Querier__V1__SelectMergeStacktracesRequest *r)
{
    Querier__V1__SelectMergeProfileRequest p = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    p.profile_typeid = r->profile_typeid;
    p.label_selector = r->label_selector;
    p.start = r->start;
    p.end = r->end;
    p.stack_trace_selector = r->stack_trace_selector;
    p.n_profile_id_selector = r->n_profile_id_selector;
    p.profile_id_selector = r->profile_id_selector;
    p.n_trace_id_selector = r->n_trace_id_selector;
    p.trace_id_selector = r->trace_id_selector;
    return p;
}

/* ------------------------------------------------- SelectMergeStacktraces */

static int check_format(int format, lc_status_t *st)
{
    switch (format) {
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE:
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF:
        return 0;
    case QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_DOT:
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "PROFILE_FORMAT_DOT is not supported (Pyroscope serves it from v2 "
                             "storage only); GET /pyroscope/render?format=dot answers DOT");
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown profile format %d", format);
    }
}

static int stacktraces_pprof(qry_fanout_t *f, lc_http_req_t *req,
                             const Querier__V1__SelectMergeStacktracesRequest *r, qry_reply_t *out,
                             lc_status_t *st)
{
    Querier__V1__SelectMergeProfileRequest p = profile_req_of(r);
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    if (merged_pprof(f, req, &p, &out->buf, st))
        return -1;
    if (qry_wrap_pprof_response(&out->buf))
        return qry_fail(st, LC_ETOOBIG, "encoding the merged profile");
    out->desc = &querier__v1__select_merge_stacktraces_response__descriptor;
    return 0;
}

int fo_rpc_select_merge_stacktraces(lc_http_req_t *req, const ProtobufCMessage *in,
                                    qry_reply_t *out, lc_status_t *st, void *data)
{
    qry_fanout_t *f = data;
    const Querier__V1__SelectMergeStacktracesRequest *r =
        (const Querier__V1__SelectMergeStacktracesRequest *)in;
    *out = (qry_reply_t){0};
    int64_t max_nodes = 0;
    if (check_format(r->format, st) || effective_max_nodes(f, r->max_nodes, &max_nodes, st))
        return -1;
    if (r->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF)
        return stacktraces_pprof(f, req, r, out, st);
    Querier__V1__SelectMergeStacktracesRequest shard = *r;
    shard.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
    shard.max_nodes = 0;
    Querier__V1__SelectMergeStacktracesResponse *resp =
        lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SelectMergeStacktracesResponse)
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    lc_ftree_t *t;
    if (merged_tree(f, req, "SelectMergeStacktraces", &shard.base, &t, st))
        return -1;
    int rc = qry_shape_tree(t, r->format, max_nodes, req->arena, &resp->flamegraph, &resp->tree, st);
    lc_ftree_free(t);
    if (rc == 0)
        out->msg = &resp->base;
    return rc;
}

int fo_rpc_select_merge_span_profile(lc_http_req_t *req, const ProtobufCMessage *in,
                                     ProtobufCMessage **out, lc_status_t *st, void *data)
{
    qry_fanout_t *f = data;
    const Querier__V1__SelectMergeSpanProfileRequest *r =
        (const Querier__V1__SelectMergeSpanProfileRequest *)in;
    int64_t max_nodes = 0;
    if (effective_max_nodes(f, r->max_nodes, &max_nodes, st))
        return -1;
    Querier__V1__SelectMergeSpanProfileRequest shard = *r;
    shard.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
    shard.max_nodes = 0;
    Querier__V1__SelectMergeSpanProfileResponse *resp =
        lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SelectMergeSpanProfileResponse)
        QUERIER__V1__SELECT_MERGE_SPAN_PROFILE_RESPONSE__INIT;
    lc_ftree_t *t;
    if (merged_tree(f, req, "SelectMergeSpanProfile", &shard.base, &t, st))
        return -1;
    int rc = qry_shape_tree(t, r->format, max_nodes, req->arena, &resp->flamegraph, &resp->tree, st);
    lc_ftree_free(t);
    if (rc == 0)
        *out = &resp->base;
    return rc;
}

int fo_rpc_select_merge_profile(lc_http_req_t *req, const ProtobufCMessage *in, qry_reply_t *out,
                                lc_status_t *st, void *data)
{
    qry_fanout_t *f = data;
    const Querier__V1__SelectMergeProfileRequest *r =
        (const Querier__V1__SelectMergeProfileRequest *)in;
    int64_t unused;
    *out = (qry_reply_t){0};
    if (effective_max_nodes(f, r->max_nodes, &unused, st))
        return -1;
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    if (merged_pprof(f, req, r, &out->buf, st))
        return -1;
    out->desc = &google__v1__profile__descriptor;
    return 0;
}

/* -------------------------------------------------------------------- Diff */

static int diff_side(void *data, lc_http_req_t *req,
                     const Querier__V1__SelectMergeStacktracesRequest *r, lc_ftree_t **out,
                     int64_t *max_nodes, lc_status_t *st)
{
    qry_fanout_t *f = data;
    if (effective_max_nodes(f, r->max_nodes, max_nodes, st))
        return -1;
    Querier__V1__SelectMergeStacktracesRequest shard = *r;
    shard.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
    shard.max_nodes = 0;
    return merged_tree(f, req, "SelectMergeStacktraces", &shard.base, out, st);
}

int fo_rpc_diff(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                lc_status_t *st, void *data)
{
    return qry_diff_answer(req, in, out, st, diff_side, data);
}

/* ------------------------------------------------------------ SelectSeries */

/* One partial series into s: the bucket sum once, then count-1 zeros, so
 * the engine's AVERAGE divides by the true number of profiles. */
static int add_partial(lc_query_series_t *s, const Ember__V1__SeriesPartial *p)
{
    lc_labels_t ls;
    lc_labels_init(&ls);
    for (size_t i = 0; i < p->n_labels; i++)
        lc_labels_add(&ls, p->labels[i]->name, p->labels[i]->value);
    uint32_t g;
    int rc = lc_query_series_group(s, &ls, &g);
    lc_labels_fini(&ls);
    for (size_t i = 0; rc == 0 && i < p->n_buckets; i++) {
        const Ember__V1__SeriesBucket *b = p->buckets[i];
        int64_t t_ns = b->timestamp_ms * 1000000;
        rc = lc_query_series_add(s, g, t_ns, b->sum);
        for (int64_t k = 1; rc == 0 && k < b->count; k++)
            rc = lc_query_series_add(s, g, t_ns, 0);
    }
    return rc;
}

static int series_opts(const Querier__V1__SelectSeriesRequest *r, lc_query_series_opts_t *o)
{
    double ms = r->step * 1000.0;
    *o = (lc_query_series_opts_t){
        .start_ms = r->start,
        .end_ms = r->end,
        .step_ms = !isfinite(ms) || ms < 1.0 ? 1 : ms >= 9.2e18 ? INT64_MAX : (int64_t)ms,
        .group_by = (const char *const *)r->group_by,
        .n_group_by = r->n_group_by,
        .average = r->aggregation ==
                   TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE,
        .limit = r->limit > 0 ? r->limit : 0,
    };
    return 0;
}

int fo_rpc_select_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    const Querier__V1__SelectSeriesRequest *r = (const Querier__V1__SelectSeriesRequest *)in;
    Querier__V1__SelectSeriesRequest shard = *r;
    shard.limit = 0; /* the top N is chosen once, over the merged totals */
    fo_answer_t *ans;
    size_t n;
    ProtobufCMessage **parts;
    if (fo_call_all(data, req, FO_SHARD_SERVICE "SelectSeries", &shard.base, &ans, &n, st) ||
        fo_unpack_all(req, &ember__v1__series_partial_response__descriptor, ans, n, &parts, st))
        return -1;
    lc_query_series_opts_t o;
    series_opts(r, &o);
    lc_query_series_t *s = lc_query_series_new(&o);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Ember__V1__SeriesPartialResponse *p = (const Ember__V1__SeriesPartialResponse *)parts[i];
        for (size_t k = 0; k < p->n_series && rc == 0; k++)
            rc = add_partial(s, p->series[k]);
    }
    Querier__V1__SelectSeriesResponse *resp =
        rc ? NULL : lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (resp) {
        *resp = (Querier__V1__SelectSeriesResponse)QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
        rc = lc_query_series_emit(s, req->arena, &resp->series, &resp->n_series);
    } else if (rc == 0) {
        rc = LC_ETOOBIG;
    }
    lc_query_series_free(s);
    if (rc)
        return qry_fail(st, rc, "merging series");
    *out = &resp->base;
    return 0;
}
