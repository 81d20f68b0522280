/*
 * querier_int.h — what the querier's source files share (not a public header).
 *
 *   frontend.c    the query front end: routes, tenant check, validation, limits
 *                 and truncation of every querier.v1 RPC, over a back end
 *   front_exemplars.c the front end's exemplars and SelectHeatmap, built from the
 *                 back end's profile references (rpc_exemplars.c lists the store's)
 *   async.c       the kept answers of async SelectMergeStacktraces
 *   front_shape.c the front end's shaping: tree/flame graph, pprof wrap, Diff
 *   front_routes.c every route registered: querier.v1, Parca's, the legacy ones
 *   shared.c      what the front end and the store back end both use: failure
 *                 statuses, the clock, durations, the tenant check, §5.9 rules
 *   querier.c     qry_new/qry_free: the front end over the local store
 *   rpc_common.c  the store back end's per-call setup: tenants, time range (§5.9
 *                 rules), selectors, store reader; the series walk and the small
 *                 sets every listing uses
 *   rpc_labels.c  the store back end: ProfileTypes, LabelNames, LabelValues, Series
 *   rpc_merge.c   the store back end: merged trees and pprof
 *   rpc_series.c  the store back end: SelectSeries' buckets
 *   rpc_stats.c   the store back end: GetProfileStats, AnalyzeQuery
 *   shard.c       the shard API an ingester serves the fan-out (shard.h)
 *   legacy_http.c GET /pyroscope/render, render-diff, label-values (clients of the
 *                 front end's RPCs through qry_rpcs_t)
 *   legacy_json.c the flamebearer JSON and the timeline arithmetic
 *   legacy_dot.c  render?format=dot: the merged pprof as a Graphviz call graph
 *
 * Every RPC runs on a thread-pool thread (qry_route_register offloads it);
 * its memory is the request arena, and its store reader is begun and ended
 * within the call.
 */
#ifndef EMBER_QUERIER_INT_H
#define EMBER_QUERIER_INT_H

#include "ember/v1/shard.pb-c.h"
#include "lc/connect.h"
#include "lc/labels.h"
#include "lc/query.h"
#include "lc/ratelimit.h"
#include "querier.h"
#include "querier/v1/querier.pb-c.h"

/* An RPC answer that may come already encoded: merged pprof is built as
 * protobuf bytes, and decoding it only to encode it again would double the
 * work (querier.c sends it with lc_connect_reply_raw). */
typedef struct qry_reply_s {
    ProtobufCMessage *msg;                  /* a message in the request arena, or */
    const ProtobufCMessageDescriptor *desc; /* the type of the bytes in buf */
    lc_buf_t buf;
} qry_reply_t;

/* Like lc_connect_unary_fn, answering a qry_reply_t; the caller runs
 * qry_reply_fini afterwards, whatever the result. */
typedef int (*qry_reply_fn)(lc_http_req_t *req, const ProtobufCMessage *in, qry_reply_t *out,
                            lc_status_t *st, void *data);

static inline void qry_reply_fini(qry_reply_t *r)
{
    lc_buf_fini(&r->buf); /* a zeroed buf is fine */
}

/* The RPCs the legacy endpoints are clients of, with what they are called
 * with: the front end's (qry_rpc_*, data = the qry_front_t), whichever back
 * end it has, so the endpoints answer the same in every binary. */
typedef struct qry_rpcs_s {
    qry_reply_fn select_merge_stacktraces, select_merge_profile;
    lc_connect_unary_fn select_series, diff, profile_types, label_values;
    void *data;
    bool multitenancy; /* for the tenant check the endpoints make first */
} qry_rpcs_t;

/* A Connect method's route (frontend.c); lives as long as the server. Its
 * handler answers either a qry_reply_t (reply) or a message (unary). */
typedef struct qry_route_s {
    const ProtobufCMessageDescriptor *in;
    qry_reply_fn reply;
    lc_connect_unary_fn unary;
    void *data;            /* the handler's */
    bool multitenancy;     /* for the tenant check made first */
    lc_http_scope_t scope; /* set by qry_route_register: the tenant check's scope */
} qry_route_t;

/* Registers a Connect unary route at path (offloaded), callable with a
 * credential of the given scope (checked before the body is read): the tenant
 * check (qry_tenant_first), decode, handler, reply, as lc_connect_register but
 * with the tenant first. route must live as long as the server. */
int qry_route_register(lc_httpd_t *srv, const char *path, lc_http_scope_t scope,
                       qry_route_t *route) LC_MUST_CHECK;

#define QRY_METHODS 12 /* every querier.v1.QuerierService method */

typedef struct qry_front_s qry_front_t;

/* ---- the back-end interface (frontend.c calls it) ----
 *
 * What a back end does: gather. It answers a request the front end has
 * validated (format, trace ids, max_nodes; SelectSeries' checks and step)
 * with untruncated results, which the front end shapes and truncates once.
 * Every function runs on the RPC's thread-pool thread; fe is the front end
 * the back end is embedded with (LC_CONTAINER_OF finds the back end's own
 * struct); results live in the request arena unless said otherwise. On
 * failure st is set and -1 returned. Two implementations: the local store
 * (qry_store_backend, rpc_*.c) and the fan-out to ingesters (fanout*.c). */
/* Where a merge's parts go when nobody needs them merged into one pprof
 * (Parca's reports, parca_query.c): a local store hands each block's summed
 * nodes to nodes, the fan-out each ingester's partial merged pprof to pprof.
 * Both return 0, an LC_E* error, or -1 with st set. */
typedef struct qry_merge_sink_s {
    lc_query_nodes_fn nodes;
    int (*pprof)(const lc_pprof_t *p, void *data, lc_status_t *st);
    void *data;
} qry_merge_sink_t;

typedef struct qry_backend_s {
    /* The merged tree, every node, of a SelectMergeStacktracesRequest or a
     * SelectMergeSpanProfileRequest (told apart by in->descriptor). *out is
     * the caller's to free. */
    int (*merge_tree)(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                      lc_ftree_t **out, lc_status_t *st);
    /* The merged pprof (protobuf bytes) of a SelectMergeProfileRequest or a
     * SelectMergeStacktracesRequest, appended to out (initialised). */
    int (*merge_pprof)(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                       lc_buf_t *out, lc_status_t *st);
    /* The parts the merged pprof of a SelectMergeProfileRequest would be
     * built from, handed to sink as they are read (qry_merge_sink_t). */
    int (*merge_parts)(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                       const qry_merge_sink_t *sink, lc_status_t *st);
    /* The series of r bucketed as o says, none dropped yet: the front end
     * emits them with o's limit. *out is new, the caller's to free. */
    int (*select_series)(qry_front_t *fe, lc_http_req_t *req,
                         const Querier__V1__SelectSeriesRequest *r, const lc_query_series_opts_t *o,
                         lc_query_series_t **out, lc_status_t *st);
    /* The stored profiles of r's selection in the range o buckets (from
     * start - step), one reference each, or with exemplar_type SPAN one per
     * (profile, span id); at most QRY_MAX_PROFILE_REFS, else
     * resource_exhausted (rpc_exemplars.c). Exemplars and heatmaps are built
     * from them by the front end (front_exemplars.c). */
    int (*select_profiles)(qry_front_t *fe, lc_http_req_t *req,
                           const Querier__V1__SelectSeriesRequest *r,
                           const lc_query_series_opts_t *o, Ember__V1__ProfileRefsResponse **out,
                           lc_status_t *st);
    /* The listings and AnalyzeQuery, answered whole (data = fe). */
    lc_connect_unary_fn profile_types, label_names, label_values, series, get_profile_stats,
        analyze_query;
} qry_backend_t;

#define QRY_PARCA_METHODS 8 /* parca.query.v1alpha1.QueryService (parca_query.c) */

typedef struct qry_async_s qry_async_t; /* async.c */

/* The front end: the limits, the back end, and what it registered. */
struct qry_front_s {
    qry_opts_t opts;
    const qry_backend_t *be;
    lc_inflight_t *inflight; /* owned; NULL: no per-tenant concurrency limit */
    lc_metrics_t *metrics;   /* may be NULL: the refusals are counted there */
    qry_route_t routes[QRY_METHODS];
    qry_route_t parca[QRY_PARCA_METHODS];
    qry_rpcs_t legacy;  /* what the legacy endpoints call: the qry_rpc_* below */
    qry_async_t *async; /* owned: kept answers of async queries */
};

/* Sets fe up over be (a static table); registers nothing. metrics may be
 * NULL. qry_front_fini frees what it holds (not fe). */
void qry_front_init(qry_front_t *fe, const qry_opts_t *opts, const qry_backend_t *be,
                    lc_metrics_t *metrics);
void qry_front_fini(qry_front_t *fe);
/* Registers every querier.v1 method, Parca's QueryService and the legacy
 * endpoints on srv (front_routes.c); fe must live as long as srv's routes. */
int qry_front_register(qry_front_t *fe, lc_httpd_t *srv) LC_MUST_CHECK;
/* The back end's merge_pprof holding the tenants' concurrency slots (the
 * front end's gate, for callers other than the querier.v1 routes). */
int qry_front_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          lc_buf_t *out, lc_status_t *st) LC_MUST_CHECK;
/* The back end's merge_parts holding the tenants' concurrency slots. */
int qry_front_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          const qry_merge_sink_t *sink, lc_status_t *st) LC_MUST_CHECK;
/* parca_query.c: parca.query.v1alpha1.QueryService over fe, at the root and
 * under /api. */
int qry_parca_register(qry_front_t *fe, lc_httpd_t *srv) LC_MUST_CHECK;

/* The local store as a back end (querier.c, rpc_*.c); its fe is a qry_t's
 * front. Its functions, as qry_backend_t describes them: */
extern const qry_backend_t qry_store_backend;
int qry_store_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                         lc_ftree_t **out, lc_status_t *st);
int qry_store_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          lc_buf_t *out, lc_status_t *st);
int qry_store_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          const qry_merge_sink_t *sink, lc_status_t *st);
int qry_store_select_series(qry_front_t *fe, lc_http_req_t *req,
                            const Querier__V1__SelectSeriesRequest *r,
                            const lc_query_series_opts_t *o, lc_query_series_t **out,
                            lc_status_t *st);
int qry_store_select_profiles(qry_front_t *fe, lc_http_req_t *req,
                              const Querier__V1__SelectSeriesRequest *r,
                              const lc_query_series_opts_t *o, Ember__V1__ProfileRefsResponse **out,
                              lc_status_t *st);
int qry_store_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                            lc_status_t *st, void *data);
int qry_store_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);
int qry_store_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data);
int qry_store_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data);
int qry_store_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in,
                                ProtobufCMessage **out, lc_status_t *st, void *data);
int qry_store_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                            lc_status_t *st, void *data);

struct qry_s {
    qry_front_t front; /* first: the RPCs' data is the front end */
    lc_store_t *store;
    lc_metrics_t *metrics;
};

/* The qry_t whose front end data is (a back-end function's fe). */
static inline qry_t *qry_of(void *data)
{
    return LC_CONTAINER_OF(data, qry_t, front);
}

/* One call's context: who asks, for which range, and the store snapshot. */
typedef struct qry_call_s {
    qry_t *q;
    lc_http_req_t *req;
    lc_status_t *st;
    const char *const *tenants;
    size_t n_tenants;
    int64_t start_ms, end_ms;  /* after look-back clipping */
    int64_t start_ns, end_ns;  /* inclusive */
    bool empty;                /* the range lies before the look-back: answer empty */
    lc_store_reader_t *reader; /* NULL when empty */
} qry_call_t;

/* Whether the §5.9 time-range rules (look-back, maximum length) apply: always
 * to the merges, Diff and SelectSeries; never to ProfileTypes and
 * GetProfileStats; to LabelNames, LabelValues and Series only when sent with
 * both start and end (qry_listing_rules), as Pyroscope's GetTimeRange. */
typedef enum {
    QRY_RANGE_OPEN,
    QRY_RANGE_RULES,
} qry_range_rules_t;

static inline qry_range_rules_t qry_listing_rules(int64_t start_ms, int64_t end_ms)
{
    return start_ms && end_ms ? QRY_RANGE_RULES : QRY_RANGE_OPEN;
}

/* The front end's §5.9 rules on [*start_ms, end_ms] (shared.c): start > end
 * is invalid_argument; with QRY_RANGE_RULES the look-back clips *start_ms, or
 * sets *empty for a range wholly before it, then a range longer than
 * max_query_length_ms is invalid_argument. */
int qry_front_range(const qry_front_t *fe, int64_t *start_ms, int64_t end_ms,
                    qry_range_rules_t rules, bool *empty, lc_status_t *st) LC_MUST_CHECK;

/* The tenant check every route makes before it looks at the request (as
 * Pyroscope's HTTP middleware does): with multitenancy on, no X-Scope-OrgID
 * is unauthenticated (401) however bad the request. The handlers resolve
 * the tenants again where they need them (a pure, cheap function). */
int qry_tenant_first(lc_http_req_t *req, bool multitenancy, lc_status_t *st) LC_MUST_CHECK;

/* Resolves tenants, checks start <= end (ms), applies the time-range rules,
 * converts the range to ns and opens the store reader (none when the range
 * is empty). On failure st is set and nothing is left open. */
int qry_call_begin_range(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                         int64_t end_ms, qry_range_rules_t rules, lc_status_t *st) LC_MUST_CHECK;
/* Like qry_call_begin_range, but the reader also covers back_ms before the
 * (clipped) start: SelectSeries sums [start - step, start] into its first point. */
int qry_call_begin_back(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                        int64_t end_ms, qry_range_rules_t rules, int64_t back_ms,
                        lc_status_t *st) LC_MUST_CHECK;
/* qry_call_begin_back saying what the call reads: LC_READ_ROLLUPS_SUFFICE
 * for a flame-graph merge or a series collection that takes rollups
 * (lc_query_merge_uses_rollups, lc_query_series_uses_rollups), which lets
 * the store's source answer whole windows by rollups alone. */
int qry_call_begin_need(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                        int64_t end_ms, qry_range_rules_t rules, int64_t back_ms,
                        lc_read_need_t need, lc_status_t *st) LC_MUST_CHECK;
/* qry_call_begin_range with QRY_RANGE_OPEN. */
int qry_call_begin(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms, int64_t end_ms,
                   lc_status_t *st) LC_MUST_CHECK;
void qry_call_end(qry_call_t *c);
/* A duration in Go's notation (25h0m0s, 1.5s) for messages. */
void qry_format_duration(int64_t ms, char *out, size_t size);

/* Parses a label selector and adds __profile_type__ = profile_type (when not
 * NULL). invalid_argument on a bad selector or profile type ID. */
int qry_selector(const char *label_selector, const char *profile_type, lc_selector_t *out,
                 lc_status_t *st) LC_MUST_CHECK;
/* The stack-trace selector into q: call_site names (arena copies, at most
 * LC_QUERY_MAX_CALL_SITE, else invalid_argument) or, when go_pgo is set, the
 * PGO settings instead (Pyroscope then ignores the call site). NULL: none. */
int qry_stack_selector(const Types__V1__StackTraceSelector *sts, lc_arena_t *a, lc_query_t *q,
                       lc_status_t *st) LC_MUST_CHECK;
/* Parses `matchers` (OR-ed); *n = 0 when they match everything. */
int qry_matchers(char **matchers, size_t n_matchers, lc_selector_t **out, size_t *n,
                 lc_status_t *st) LC_MUST_CHECK;
void qry_matchers_free(lc_selector_t *sels, size_t n);
/* Splits a profile type ID into its five parts (in the arena); false if it
 * does not have 5 (or 6) parts. */
bool qry_profile_type_split(lc_arena_t *a, const char *id, char *parts[5]);
/* The ms range [start, end] as ns, saturating. */
void qry_range_ns(int64_t start_ms, int64_t end_ms, int64_t *start_ns, int64_t *end_ns);
int64_t qry_now_ms(void);

/* Calls fn for each series of the call's tenants matching any of sels (n = 0:
 * all) that has a profile in the call's range; a series in several blocks is
 * seen once per block. labels is valid during the callback only. */
typedef int (*qry_series_fn)(const lc_labels_t *labels, void *data);
int qry_walk_series(qry_call_t *c, const lc_selector_t *sels, size_t n_sels, qry_series_fn fn,
                    void *data) LC_MUST_CHECK;

/* A set of byte strings copied into an arena, for de-duplication. */
typedef struct qry_set_s {
    lc_arena_t *arena;
    char **v; /* NUL-terminated copies, insertion order */
    size_t *len;
    size_t n, cap;
    uint32_t *slots;
    size_t mask;
} qry_set_t;

void qry_set_init(qry_set_t *s, lc_arena_t *arena);
void qry_set_fini(qry_set_t *s);
/* Adds a copy unless present; *added (may be NULL) says which. LC_ETOOBIG when
 * the arena is full. */
int qry_set_add(qry_set_t *s, const void *p, size_t len, bool *added) LC_MUST_CHECK;
/* Sorts v byte-wise (len follows). */
void qry_set_sort(qry_set_t *s);

/* What AnalyzeQuery counts (rpc_stats.c). The figures add up over stores;
 * series are keyed (tenant, NUL, encoded labels) so that a union over stores
 * counts a series held by several of them once. */
typedef struct qry_analysis_s {
    uint64_t blocks, block_bytes, profiles, samples, profile_bytes;
    qry_set_t series; /* keys in the request arena */
} qry_analysis_t;

/* Counts what r would read from q's store. out is initialised even on
 * failure: call qry_analysis_fini either way. */
int qry_analyze(qry_t *q, lc_http_req_t *req, const Querier__V1__AnalyzeQueryRequest *r,
                qry_analysis_t *out, lc_status_t *st) LC_MUST_CHECK;
void qry_analysis_fini(qry_analysis_t *a);
/* The AnalyzeQueryResponse of a: one scope naming the component and how many
 * of them were asked. */
int qry_analysis_response(lc_arena_t *arena, const char *component, uint64_t component_count,
                          const qry_analysis_t *a, ProtobufCMessage **out,
                          lc_status_t *st) LC_MUST_CHECK;

/* Label pairs for a response, allocated in the arena; NULL when it is full. */
Types__V1__LabelPair **qry_label_pairs(lc_arena_t *a, const lc_labels_t *ls);
/* Sets st to resource_exhausted for a full arena and returns -1 (shared.c,
 * as are qry_fail, qry_now_ms, qry_range_ns, qry_format_duration and
 * qry_tenant_first). */
int qry_fail_arena(lc_status_t *st);
/* Maps an internal error code to st (internal / resource_exhausted). */
int qry_fail(lc_status_t *st, int rc, const char *what);

/* ---- the RPCs (frontend.c): lc_connect_unary_fn or qry_reply_fn; data is
 * the qry_front_t (for a qry_t: the qry_t itself, its front being first) ---- */
int qry_rpc_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);
int qry_rpc_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data);
int qry_rpc_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int qry_rpc_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                   lc_status_t *st, void *data);
int qry_rpc_select_merge_stacktraces(lc_http_req_t *req, const ProtobufCMessage *in,
                                     qry_reply_t *out, lc_status_t *st, void *data);
int qry_rpc_select_merge_span_profile(lc_http_req_t *req, const ProtobufCMessage *in,
                                      ProtobufCMessage **out, lc_status_t *st, void *data);
int qry_rpc_select_merge_profile(lc_http_req_t *req, const ProtobufCMessage *in, qry_reply_t *out,
                                 lc_status_t *st, void *data);
int qry_rpc_diff(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                 lc_status_t *st, void *data);
int qry_rpc_select_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);
int qry_rpc_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in,
                              ProtobufCMessage **out, lc_status_t *st, void *data);
int qry_rpc_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);
/* data is the method name (a string literal), not the front end. */
int qry_rpc_unimplemented(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);

/* SelectSeries' step (seconds) -> ms; invalid_argument below 1 ms (frontend.c). */
int qry_step_ms(double step, int64_t *out, lc_status_t *st) LC_MUST_CHECK;
/* What a SelectSeries-shaped call of the store begins with (rpc_series.c):
 * r's selector (with its profile type) into *sel and the call over r's range
 * with step_ms of look-back; on success the caller ends both
 * (qry_call_end, lc_selector_fini), on failure nothing is left open. */
int qry_series_begin(qry_t *q, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     int64_t step_ms, lc_selector_t *sel, qry_call_t *c,
                     lc_status_t *st) LC_MUST_CHECK;
/* The store's series for r (rpc_series.c): selector, §5.9 range, stack-trace
 * selector, then the engine's sums bucketed as o (from where the look-back
 * clipped) into *sums and, when counts is not NULL, the profiles per bucket
 * into *counts (the shard API's averages). Both new, the caller's to free;
 * NULL on failure. */
int qry_series_collect(qry_t *q, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                       const lc_query_series_opts_t *o, lc_query_series_t **sums,
                       lc_query_series_t **counts, lc_status_t *st) LC_MUST_CHECK;

/* ---- async SelectMergeStacktraces (async.c) ---- */

#define QRY_ASYNC_TTL_MS (10 * 60 * 1000) /* how long an answer is kept */
#define QRY_ASYNC_PER_TENANT 16u          /* answers kept per tenant set */
#define QRY_ASYNC_MAX 1024u               /* answers kept in all */
#define QRY_ASYNC_MAX_BYTES (64u << 20)   /* one kept answer */

qry_async_t *qry_async_new(void);
void qry_async_free(qry_async_t *a); /* NULL-safe */
/* Keeps the answer in out (a message or bytes; made bytes) under a new
 * request id and adds async {request_id, SUCCESS} to it. */
int qry_async_submit(qry_front_t *fe, lc_http_req_t *req, qry_reply_t *out,
                     lc_status_t *st) LC_MUST_CHECK;
/* The kept answer of id for the request's tenants into out, with async
 * {id, SUCCESS}; not_found when unknown or expired. */
int qry_async_poll(qry_front_t *fe, lc_http_req_t *req, const char *id, qry_reply_t *out,
                   lc_status_t *st) LC_MUST_CHECK;

/* ---- exemplars and heatmaps (rpc_exemplars.c, front_exemplars.c) ---- */

#define QRY_MAX_PROFILE_REFS 200000u   /* profile references one answer may list */
#define QRY_EXEMPLARS_PER_POINT 3u     /* a point's (a heatmap slot's) top profiles */
#define QRY_EXEMPLARS_PER_ANSWER 2000u /* the answer's, the highest valued kept */
#define QRY_HEATMAP_ROWS 20u           /* value ranges of a heatmap's y axis */

/* The store's profile references (qry_backend_t.select_profiles) of q's
 * store; also the shard API's answer. */
int qry_profile_refs(qry_t *q, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     const lc_query_series_opts_t *o, Ember__V1__ProfileRefsResponse **out,
                     lc_status_t *st) LC_MUST_CHECK;
/* The failure status of a reference walk: over_cap says the walk passed
 * QRY_MAX_PROFILE_REFS (resource_exhausted naming it), else rc as qry_fail. */
int qry_refs_fail(lc_status_t *st, int rc, bool over_cap);
/* Built from refs already listed (front_exemplars.c; also what fuzz_exemplars
 * drives): exemplars onto the series' points, and the heatmap with `limit`
 * (0: every series) and, unless !exemplars, each slot's exemplars; bucketed as
 * o from refs->start_ms. 0 or LC_ETOOBIG (arena full). */
int qry_exemplars_series(const Ember__V1__ProfileRefsResponse *refs,
                         const lc_query_series_opts_t *o, lc_arena_t *a, Types__V1__Series **series,
                         size_t n) LC_MUST_CHECK;
int qry_exemplars_heatmap(const Ember__V1__ProfileRefsResponse *refs,
                          const lc_query_series_opts_t *o, int64_t limit, bool exemplars,
                          lc_arena_t *a, Querier__V1__SelectHeatmapResponse **out) LC_MUST_CHECK;
/* querier.v1 SelectHeatmap (frontend.c); data is the front end. */
int qry_rpc_select_heatmap(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data);

/* ---- tree shaping and Diff (front_shape.c), the front end's ---- */

/* A merged tree as SelectMergeStacktraces answers it: the flame graph, or
 * with PROFILE_FORMAT_TREE the tree bytes (§5.7) and the names the
 * symbolizer gave (symbolized_names, which tree bytes cannot carry: a
 * fan-out querier merges them), truncated at max_nodes. */
int qry_shape_tree(lc_ftree_t *t, int format, int64_t max_nodes, lc_arena_t *a,
                   Querier__V1__SelectMergeStacktracesResponse *resp,
                   lc_status_t *st) LC_MUST_CHECK;
/* One side of a Diff merged into *out (untruncated); *max_nodes gets that
 * side's effective limit. data: the front end. */
typedef int (*qry_diff_side_fn)(void *data, lc_http_req_t *req,
                                const Querier__V1__SelectMergeStacktracesRequest *r,
                                lc_ftree_t **out, int64_t *max_nodes, lc_status_t *st);
/* Answers Diff from two sides merged by side: the left request's max_nodes
 * governs the whole diff (§5.6). */
int qry_diff_answer(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                    lc_status_t *st, qry_diff_side_fn side, void *data) LC_MUST_CHECK;
/* Wraps the pprof bytes in buf, in place, as SelectMergeStacktracesResponse
 * {pprof (5): PprofProfile{profile (1): ...}}: two field headers in front. */
int qry_wrap_pprof_response(lc_buf_t *buf) LC_MUST_CHECK;

/* ---- legacy HTTP (legacy_*.c, pyroscope-api.md §7) ---- */

/* Registers GET /pyroscope/render, /pyroscope/render-diff, /pyroscope/label-values.
 * rpcs is borrowed: it must live as long as srv's routes. */
int qry_legacy_register(const qry_rpcs_t *rpcs, lc_httpd_t *srv) LC_MUST_CHECK;

/* A plain GET route of read scope; qry_register_gets registers n of them
 * (offloaded to the thread pool when offload) and stops at the first error. */
typedef struct qry_get_route_s {
    const char *path;
    lc_http_handler_cb work;
    void *data;
} qry_get_route_t;
int qry_register_gets(lc_httpd_t *srv, const qry_get_route_t *routes, size_t n,
                      bool offload) LC_MUST_CHECK;

/* A flamebearer timeline: samples from start_sec, one per step_sec. */
typedef struct qry_timeline_s {
    int64_t start_sec, step_sec;
    uint64_t *samples; /* in the arena */
    size_t n;
} qry_timeline_t;

/* One entry of `groups`; order = the series' position (the last one wins a
 * repeated key, as in Pyroscope's map). */
typedef struct qry_group_s {
    const char *key;
    size_t order;
    qry_timeline_t timeline;
} qry_group_t;

/* What the render JSON carries (pointers into the RPC answers). */
typedef struct qry_flamebearer_s {
    char **names;
    size_t n_names;
    const int32_t *symbolized; /* indices into names the server named (FlameGraph.symbolized) */
    size_t n_symbolized;
    Querier__V1__Level **levels; /* 4 numbers per node, 7 when diff */
    size_t n_levels;
    int64_t total, max_self;
    bool diff;
    int64_t left_ticks, right_ticks;
    const char *sample_type, *sample_unit;
    const qry_timeline_t *timeline; /* NULL: "timeline": null */
    bool has_groups;                /* false: "groups": null */
    qry_group_t *groups;
    size_t n_groups;
} qry_flamebearer_t;

/* Pyroscope's timeline.CalcPointInterval: (until - from) / 1500 put on
 * Grafana's ladder of round intervals, at least 15 s; in seconds. */
double qry_calc_point_interval(int64_t from_ms, int64_t until_ms);
/* Pyroscope's timeline.New: start and end snapped down to the step, one
 * sample per step in [start, end), points of s (may be NULL) placed by their
 * distance from the previous one, zeros elsewhere. LC_ETOOBIG past the cap. */
int qry_timeline_build(const Types__V1__Series *s, int64_t start_ms, int64_t end_ms,
                       int64_t step_sec, lc_arena_t *a, qry_timeline_t *out) LC_MUST_CHECK;
/* Points fb's names, levels, total and max_self at fg's (NULL: left as is). */
void qry_flamebearer_set_graph(qry_flamebearer_t *fb, const Querier__V1__FlameGraph *fg);
/* The same for a diff graph: fb->diff set, and the left and right ticks too. */
void qry_flamebearer_set_diff(qry_flamebearer_t *fb, const Querier__V1__FlameGraphDiff *fg);
/* The FlamebearerProfile JSON (with json.Encoder's trailing newline). */
int qry_flamebearer_json(const qry_flamebearer_t *fb, lc_buf_t *out) LC_MUST_CHECK;
/* A JSON array of strings ("null" when empty, as a nil Go slice). */
int qry_string_array_json(char **v, size_t n, lc_buf_t *out) LC_MUST_CHECK;
/* A Graphviz call graph of a pprof (first sample type), at most node_count
 * nodes; nothing is appended when the profile has no value. */
int qry_pprof_to_dot(const Google__V1__Profile *p, size_t node_count, lc_buf_t *out) LC_MUST_CHECK;

#endif
