/*
 * fanout_rpc.c — the fan-out back end's merges and series.
 *
 * Each forwards the caller's request to every ingester, changed only where a
 * partial result must stay whole: trees (flame graphs, span profiles, diff
 * sides) are asked as TREE bytes with max_nodes 0 (the ingesters' shard
 * querier truncates nothing), merged pprof as pprof, SelectSeries as
 * per-bucket sums AND counts (/ember.v1.ShardService/SelectSeries) with no
 * limit. The partial results are merged here; the front end (frontend.c)
 * validated the request and truncates the merge (max_nodes, limit) once, as
 * it does over the local store, so the answer equals the one a single
 * process holding all the data would give. What only a store reads
 * (selectors, time range, tenants) every ingester checks, and its
 * invalid_argument comes back unchanged.
 */
#include <string.h>

#include "ember/v1/shard.pb-c.h"
#include "fanout_int.h"
#include "lc/pprof.h"

/* ------------------------------------------------------- tree merges */

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
        for (size_t k = 0; k < r->n_symbolized_names && rc == 0; k++)
            rc = lc_ftree_mark_symbolized_name(t, r->symbolized_names[k],
                                               strlen(r->symbolized_names[k]));
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
/* The merge in b, encoded in its canonical order (fo_pprof_canonical): the
 * merge is encoded, decoded and rebuilt. */
static int canonical_encode(lc_pprof_builder_t *b, lc_arena_t *a, int64_t time_ns,
                            int64_t duration_ns, lc_buf_t *out)
{
    lc_buf_t merged;
    lc_buf_init(&merged, out->max);
    int rc = lc_pprof_builder_encode(b, false, &merged);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = SIZE_MAX / 2;
    lim.max_samples = 0;
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    if (rc == 0 && lc_pprof_decode(merged.data, merged.len, &lim, a, &p, &st))
        rc = LC_ETOOBIG;
    lc_pprof_builder_t *canon = lc_pprof_builder_new();
    if (rc == 0 && (rc = fo_pprof_canonical(canon, a, p)) == 0) {
        lc_pprof_builder_times(canon, time_ns, duration_ns);
        rc = lc_pprof_builder_encode(canon, false, out);
    }
    lc_pprof_builder_free(canon);
    lc_buf_fini(&merged);
    return rc;
}

static int fo_merged_pprof(qry_fanout_t *f, lc_http_req_t *req,
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
        rc = canonical_encode(b, req->arena, start, end - start, out);
        if (rc)
            rc = qry_fail(st, rc, "encoding the merged profile");
    }
    lc_pprof_builder_free(b);
    return rc ? -1 : 0;
}

/* Every ingester's merged pprof for r, each decoded and handed to the sink
 * as it is: no merge into one pprof, no encoding of it. */
int fo_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                   const qry_merge_sink_t *sink, lc_status_t *st)
{
    fo_answer_t *ans;
    size_t n;
    if (fo_call_all(fo_of(fe), req, FO_PUBLIC_SERVICE "SelectMergeProfile", in, &ans, &n, st))
        return -1;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = SIZE_MAX / 2;
    lim.max_samples = 0;
    for (size_t i = 0; i < n; i++) {
        lc_pprof_t *p;
        if (lc_pprof_decode(ans[i].body, ans[i].len, &lim, req->arena, &p, st))
            return -1;
        int rc = sink->pprof(p, sink->data, st);
        if (rc)
            return rc == -1 ? -1 : qry_fail(st, rc, "merging partial profiles");
    }
    return 0;
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

/* ------------------------------------------------- the back-end functions */

int fo_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in, lc_ftree_t **out,
                  lc_status_t *st)
{
    if (in->descriptor == &querier__v1__select_merge_span_profile_request__descriptor) {
        Querier__V1__SelectMergeSpanProfileRequest shard =
            *(const Querier__V1__SelectMergeSpanProfileRequest *)in;
        shard.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
        shard.max_nodes = 0;
        return merged_tree(fo_of(fe), req, "SelectMergeSpanProfile", &shard.base, out, st);
    }
    Querier__V1__SelectMergeStacktracesRequest shard =
        *(const Querier__V1__SelectMergeStacktracesRequest *)in;
    shard.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
    shard.max_nodes = 0;
    shard.async = NULL; /* this querier keeps async answers; an ingester answers now */
    return merged_tree(fo_of(fe), req, "SelectMergeStacktraces", &shard.base, out, st);
}

int fo_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in, lc_buf_t *out,
                   lc_status_t *st)
{
    if (in->descriptor == &querier__v1__select_merge_profile_request__descriptor)
        return fo_merged_pprof(fo_of(fe), req, (const Querier__V1__SelectMergeProfileRequest *)in,
                               out, st);
    Querier__V1__SelectMergeProfileRequest p =
        profile_req_of((const Querier__V1__SelectMergeStacktracesRequest *)in);
    return fo_merged_pprof(fo_of(fe), req, &p, out, st);
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

int fo_select_series(qry_front_t *fe, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     const lc_query_series_opts_t *o, lc_query_series_t **out, lc_status_t *st)
{
    Querier__V1__SelectSeriesRequest shard = *r;
    shard.limit = 0; /* the top N is chosen once, over the merged totals */
    fo_answer_t *ans;
    size_t n;
    ProtobufCMessage **parts;
    *out = NULL;
    if (fo_call_all(fo_of(fe), req, FO_SHARD_SERVICE "SelectSeries", &shard.base, &ans, &n, st) ||
        fo_unpack_all(req, &ember__v1__series_partial_response__descriptor, ans, n, &parts, st))
        return -1;
    lc_query_series_t *s = lc_query_series_new(o);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Ember__V1__SeriesPartialResponse *p =
            (const Ember__V1__SeriesPartialResponse *)parts[i];
        for (size_t k = 0; k < p->n_series && rc == 0; k++)
            rc = add_partial(s, p->series[k]);
    }
    if (rc) {
        lc_query_series_free(s);
        return qry_fail(st, rc, "merging series");
    }
    *out = s;
    return 0;
}

/* --------------------------------------------------------- SelectProfiles */

/* Every ingester's profile references, one list: a zone holds each profile
 * once, so they only add up (capped as one store's). */
static int join_refs(lc_arena_t *a, ProtobufCMessage **parts, size_t n,
                     Ember__V1__ProfileRefsResponse **out, lc_status_t *st)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ((const Ember__V1__ProfileRefsResponse *)parts[i])->n_profiles;
    if (total > QRY_MAX_PROFILE_REFS)
        return qry_refs_fail(st, LC_ETOOBIG, true);
    Ember__V1__ProfileRefsResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    Ember__V1__ProfileRef **v = lc_arena_calloc(a, total + 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_arena(st);
    *resp = (Ember__V1__ProfileRefsResponse)EMBER__V1__PROFILE_REFS_RESPONSE__INIT;
    for (size_t i = 0; i < n; i++) {
        const Ember__V1__ProfileRefsResponse *p = (const Ember__V1__ProfileRefsResponse *)parts[i];
        if (p->n_profiles)
            memcpy(v + resp->n_profiles, p->profiles, p->n_profiles * sizeof(*v));
        resp->n_profiles += p->n_profiles;
        /* every ingester clips with the same look-back; the latest start wins */
        resp->start_ms = i == 0 || p->start_ms > resp->start_ms ? p->start_ms : resp->start_ms;
    }
    resp->profiles = v;
    *out = resp;
    return 0;
}

int fo_select_profiles(qry_front_t *fe, lc_http_req_t *req,
                       const Querier__V1__SelectSeriesRequest *r, const lc_query_series_opts_t *o,
                       Ember__V1__ProfileRefsResponse **out, lc_status_t *st)
{
    LC_UNUSED(o); /* each ingester buckets the range itself from r */
    fo_answer_t *ans;
    size_t n;
    ProtobufCMessage **parts;
    if (fo_call_all(fo_of(fe), req, FO_SHARD_SERVICE "SelectProfiles", &r->base, &ans, &n, st) ||
        fo_unpack_all(req, &ember__v1__profile_refs_response__descriptor, ans, n, &parts, st))
        return -1;
    return join_refs(req->arena, parts, n, out, st);
}
