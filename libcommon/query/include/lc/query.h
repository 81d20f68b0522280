/*
 * lc/query.h — the query engine: merging stored profiles into a function-name
 * tree (flame graphs, tree bytes), into a merged pprof, and into time series
 * (ARCHITECTURE.md §3 "Merging is the hot path"; encodings in
 * pyroscope-api.md §5.4-§5.8; the algorithm in docs/internals/query.md).
 *
 * The name tree (lc_ftree_t) is keyed by function-name path: node 0 is the
 * virtual root, every other node is (parent, name) and has a larger id than
 * its parent. It stores self values only; totals are derived on demand. It can
 * be serialised as tree bytes (§5.7) and merged (lc_ftree_merge,
 * lc_ftree_read_tree), so a distributed querier merges partial trees and
 * truncates once, at the end.
 *
 * Ownership: an lc_ftree_t / lc_query_series_t belongs to one thread at a time
 * (nothing here locks). Protobuf outputs are allocated in the caller's arena
 * and own copies of every string. The store functions take a reader the caller
 * began (and ends) on the calling thread.
 */
#ifndef LC_QUERY_H
#define LC_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/labels.h"
#include "lc/pprof.h"
#include "lc/store.h"
#include "querier/v1/querier.pb-c.h"

#define LC_FTREE_ROOT 0u
#define LC_FTREE_DEFAULT_MAX_NODES (16u << 20) /* cap on tree nodes, ~500 MB */
#define LC_FTREE_MAX_NAME_BYTES (256u << 20)   /* cap on interned name bytes */
#define LC_QUERY_MAX_SERIES_POINTS (64u << 20) /* cap on points held by SelectSeries */

/* ------------------------------------------------------------- name tree */
typedef struct lc_ftree_s lc_ftree_t;

/* max_nodes caps the node count (0 = LC_FTREE_DEFAULT_MAX_NODES); growing past
 * it fails with LC_ETOOBIG. */
lc_ftree_t *lc_ftree_new(size_t max_nodes);
void lc_ftree_free(lc_ftree_t *t);

/* Interns a name (bytes, not NUL-terminated) and returns its id. */
int lc_ftree_name(lc_ftree_t *t, const char *s, size_t len, uint32_t *id) LC_MUST_CHECK;
/* The child of `parent` named `name`, created if missing. */
int lc_ftree_child(lc_ftree_t *t, uint32_t parent, uint32_t name, uint32_t *out) LC_MUST_CHECK;
void lc_ftree_add_self(lc_ftree_t *t, uint32_t node, int64_t v);
/* Adds value v to the root->leaf path of names; v <= 0 is ignored (as in
 * Pyroscope's InsertStack). */
int lc_ftree_insert(lc_ftree_t *t, const char *const *frames, size_t n, int64_t v) LC_MUST_CHECK;
/* Adds every node of src into dst (names matched by bytes; a name's
 * symbolized mark carries over). */
int lc_ftree_merge(lc_ftree_t *dst, const lc_ftree_t *src) LC_MUST_CHECK;

/* Marks a name as one the server's symbolizer gave a frame at query time
 * (docs/api.md "Frames named on the server"). The mark belongs to the name,
 * not a node: a name that some frame got from the symbolizer and another
 * frame from the client is marked. The flame graph lists marked names
 * (FlameGraph.symbolized); tree bytes carry none, so a shard answer sends
 * them beside the tree (lc_ftree_symbolized_names) and the merging querier
 * marks them again (lc_ftree_mark_symbolized_name). */
void lc_ftree_mark_symbolized(lc_ftree_t *t, uint32_t name);
/* Interns the name and marks it. */
int lc_ftree_mark_symbolized_name(lc_ftree_t *t, const char *s, size_t len) LC_MUST_CHECK;
/* The marked names, copied into `arena` (*n 0: none). */
int lc_ftree_symbolized_names(const lc_ftree_t *t, lc_arena_t *arena, char ***out,
                              size_t *n) LC_MUST_CHECK;

size_t lc_ftree_node_count(const lc_ftree_t *t); /* including the root */
int64_t lc_ftree_total(lc_ftree_t *t);

/* Encodes the flame graph (§5.4) with max_nodes truncation (§5.5; max_nodes
 * <= 0 = no truncation) into `arena`; `symbolized` lists the indices of the
 * emitted names marked by lc_ftree_mark_symbolized, ascending. */
int lc_ftree_flamegraph(lc_ftree_t *t, int64_t max_nodes, lc_arena_t *arena,
                        Querier__V1__FlameGraph **out) LC_MUST_CHECK;
/* Encodes the diff flame graph (§5.6) of left vs right: the union of their
 * nodes, 7 numbers per node, max_nodes truncation by the larger side. */
int lc_ftree_diff(const lc_ftree_t *left, const lc_ftree_t *right, int64_t max_nodes,
                  lc_arena_t *arena, Querier__V1__FlameGraphDiff **out) LC_MUST_CHECK;
/* Appends the tree bytes (§5.7) with the same truncation; nothing for an empty
 * tree. */
int lc_ftree_write_tree(lc_ftree_t *t, int64_t max_nodes, lc_buf_t *out) LC_MUST_CHECK;
/* Merges tree bytes into t. LC_ECORRUPT on malformed input. */
int lc_ftree_read_tree(lc_ftree_t *t, const uint8_t *p, size_t len) LC_MUST_CHECK;

/* ------------------------------------------------------- store queries */
#define LC_QUERY_MAX_CALL_SITE 1024 /* call-site frames in a stack-trace selector */

/* Go PGO export (types.v1.GoPGO), applied to merged pprof only. */
typedef struct lc_query_pgo_s {
    bool enabled;
    uint32_t keep_locations; /* leaf-most locations kept per sample; 0 = all */
    bool aggregate_callees;  /* the leaf location's innermost line number becomes 0 */
} lc_query_pgo_t;

/* What to read: series of `tenants` matching `sel` (the caller adds the
 * __profile_type__ matcher), profiles with start_ns <= time <= end_ns, and
 * of those only the ones whose stored profile id is in profile_ids when that
 * is set (profiles stored without an id never match), and of their samples:
 *  - with span_ids set, only those carrying one of the span ids;
 *  - with call_site set, only those whose stack, root first, begins with the
 *    call-site function names (a location's lines count outermost first, as
 *    frames; a location without lines is one "module+0xoffset" frame,
 *    lc_block_frame_name). */
typedef struct lc_query_s {
    const char *const *tenants;
    size_t n_tenants;
    const lc_selector_t *sel;
    int64_t start_ns, end_ns;
    const uint64_t *span_ids; /* sorted ascending; NULL = every sample (n 0: none) */
    size_t n_span_ids;
    /* sorted ascending (memcmp); NULL = every profile (n 0: none) */
    const uint8_t (*profile_ids)[LC_STORE_PROFILE_ID_BYTES];
    size_t n_profile_ids;
    const char *const *call_site; /* root first; n_call_site 0 = every stack */
    size_t n_call_site;           /* at most LC_QUERY_MAX_CALL_SITE */
    lc_query_pgo_t pgo;
    /* Read every profile even where a block's per-series summary would give
     * the same sums (tests compare the two paths; lc_block_summary). */
    bool no_summaries;
} lc_query_t;

/* Whether a stored profile passes q's profile_ids. */
bool lc_query_profile_selected(const lc_query_t *q, const lc_stored_profile_t *p);

/* A NULL reader stands for "no blocks" (a range outside the look-back) in
 * every function below. */

/* Folds every matching profile of every block of r into dst. */
/* Whether lc_query_merge_tree answers q from rollups where they cover a
 * window (not for span ids, profile ids or call sites, which they do not
 * keep): then its reader may be begun with LC_READ_ROLLUPS_SUFFICE. */
bool lc_query_merge_uses_rollups(const lc_query_t *q);
int lc_query_merge_tree(lc_store_reader_t *r, const lc_query_t *q, lc_ftree_t *dst,
                        lc_status_t *st) LC_MUST_CHECK;
/* Adds one sample per distinct stack (one value) to b, re-emitting mappings,
 * locations and functions; the caller sets b's sample type and period. */
int lc_query_merge_pprof(lc_store_reader_t *r, const lc_query_t *q, lc_pprof_builder_t *b,
                         lc_status_t *st) LC_MUST_CHECK;

/* One block's matching samples summed per stack node, as the merges see them
 * before they fold the block into a name tree or a pprof: for callers that
 * build a tree of their own (Parca's reports, keyed by more than function
 * names) without a merged pprof in between. */
typedef struct lc_query_nodes_s {
    lc_block_t *block;         /* its symbols: lc_block_location/function/mapping/string */
    uint32_t n;                /* nodes [0, n); node 0 is the root (no location) */
    const uint32_t *parents;   /* parents[i] < i */
    const uint32_t *locations; /* store location id of each node */
    const int64_t *self;       /* summed values; 0 where nothing matched, may be < 0 */
} lc_query_nodes_t;

/* Returns 0, an LC_E* error (mapped to a status by the engine), or -1 with
 * st already set (kept as it is). */
typedef int (*lc_query_nodes_fn)(const lc_query_nodes_t *nodes, void *data, lc_status_t *st);

/* Calls fn once per block that has a matching sample, blocks in order; the
 * nodes and the block's decoded symbols are valid during the call only. */
int lc_query_merge_nodes(lc_store_reader_t *r, const lc_query_t *q, lc_query_nodes_fn fn,
                         void *data, lc_status_t *st) LC_MUST_CHECK;

/* ---------------------------------------------------------- time series */
typedef struct lc_query_series_opts_s {
    int64_t start_ms, end_ms; /* bucket boundaries start, start+step, ... <= end */
    int64_t step_ms;          /* >= 1 */
    const char *const *group_by;
    size_t n_group_by;
    bool average;  /* AVERAGE instead of SUM per bucket */
    int64_t limit; /* top N series by total; 0 = all */
} lc_query_series_opts_t;

typedef struct lc_query_series_s lc_query_series_t;

/* The earliest time (ms) that counts, start - step (saturating): Pyroscope's
 * first point, at start, sums [start - step, start]. The store range read for
 * a series query must begin here (lc_query_series_first_ns). */
static inline int64_t lc_query_series_first_ms(const lc_query_series_opts_t *o)
{
    return o->start_ms < INT64_MIN + o->step_ms ? INT64_MIN : o->start_ms - o->step_ms;
}
static inline int64_t lc_query_series_first_ns(const lc_query_series_opts_t *o, int64_t start_ns)
{
    int64_t step_ns = o->step_ms > INT64_MAX / 1000000 ? INT64_MAX : o->step_ms * 1000000;
    return start_ns < INT64_MIN + step_ns ? INT64_MIN : start_ns - step_ns;
}

/* Copies opts (and the group_by strings). */
lc_query_series_t *lc_query_series_new(const lc_query_series_opts_t *opts);
void lc_query_series_free(lc_query_series_t *s);
/* The group a series falls in (its group_by labels); ids are stable. */
int lc_query_series_group(lc_query_series_t *s, const lc_labels_t *labels,
                          uint32_t *group) LC_MUST_CHECK;
/* Adds one profile's value at time_ns to a group's bucket; profiles outside
 * the boundaries are ignored. */
int lc_query_series_add(lc_query_series_t *s, uint32_t group, int64_t time_ns,
                        int64_t value) LC_MUST_CHECK;
/* The boundary (ms) of the bucket a profile at time_ns falls in, as
 * lc_query_series_add buckets it; false outside every bucket. */
bool lc_query_series_bucket(const lc_query_series_opts_t *o, int64_t time_ns, int64_t *boundary_ms);
/* Adds every matching profile's total: the stored one (no sample reads), or,
 * with a span or call-site filter, the sum of the samples that pass it. */
int lc_query_series_collect(lc_store_reader_t *r, const lc_query_t *q, lc_query_series_t *s,
                            lc_status_t *st) LC_MUST_CHECK;
/* The same, and each of those profiles counted as 1 into counts (bucketed
 * as s): what an average over shards divides by. */
int lc_query_series_collect_counted(lc_store_reader_t *r, const lc_query_t *q, lc_query_series_t *s,
                                    lc_query_series_t *counts, lc_status_t *st) LC_MUST_CHECK;
/* Whether the collection answers q from rollups where they cover a window
 * (as lc_query_merge_uses_rollups): then its reader may be begun with
 * LC_READ_ROLLUPS_SUFFICE. */
bool lc_query_series_uses_rollups(const lc_query_t *q);
/* The result: series with points (sparse, ascending time), limited, sorted
 * by labels; allocated in `arena`. */
int lc_query_series_emit(lc_query_series_t *s, lc_arena_t *arena, Types__V1__Series ***out,
                         size_t *n) LC_MUST_CHECK;

#endif
