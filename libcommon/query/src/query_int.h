/*
 * query_int.h — internals shared by the query engine's .c files (query_tree.c,
 * query_flame.c, query_diff.c, query_merge.c, query_pprof.c, query_series.c,
 * query_callsite.c). Not a public header: callers use lc/query.h.
 */
#ifndef LC_QUERY_INT_H
#define LC_QUERY_INT_H

#include <stdint.h>
#include <string.h>

#include "lc/hash.h"
#include "lc/query.h"

/* Name ids 0 and 1 are interned at creation: the root is named "total" (as in
 * Pyroscope, a function literally named "total" shares the root's flame graph
 * name index) and truncation emits "other". */
#define FT_NAME_TOTAL 0u
#define FT_NAME_OTHER 1u

typedef struct ft_name_s {
    uint64_t off;            /* into pool */
    uint32_t len : 31;       /* names total at most LC_FTREE_MAX_NAME_BYTES < 2^31 */
    uint32_t symbolized : 1; /* a frame of this name was named by the symbolizer */
    uint32_t hash;           /* low bits of the string hash, for rehashing */
} ft_name_t;

/* A child-table slot carries its key, so a probe touches one cache line and
 * never the node array. */
typedef struct ft_slot_s {
    uint32_t parent;
    uint32_t name;
    uint32_t id;
} ft_slot_t;

typedef struct ft_node_s {
    uint32_t parent;
    uint32_t name;
    int64_t self;
} ft_node_t;

struct lc_ftree_s {
    char *pool; /* interned name bytes */
    size_t pool_len, pool_cap;
    ft_name_t *names;
    size_t n_names, names_cap;
    uint32_t *name_slots; /* open addressing: name id + 1, 0 = empty */
    size_t name_mask;

    ft_node_t *nodes; /* nodes[0] is the root; parent id < child id */
    size_t n_nodes, nodes_cap, max_nodes;
    ft_slot_t *child_slots; /* open addressing on (parent, name); id 0 = empty */
    size_t child_mask;

    int64_t *total; /* derived by ft_totals(); valid while !totals_stale */
    size_t total_cap;
    bool totals_stale;
};

uint64_t lc_query__hash_bytes(const void *p, size_t len);

/* Every node's children in ascending byte-wise name order (query_flame.c). */
typedef struct ft_kids_s {
    uint32_t *rank;  /* name id -> position in byte-wise order */
    uint32_t *start; /* children of p: list[start[p] .. start[p + 1]) */
    uint32_t *list;
} ft_kids_t;

void lc_query__kids_build(const lc_ftree_t *t, ft_kids_t *k);
void lc_query__kids_fini(ft_kids_t *k);
/* A binary min-heap of int64 in h[0 .. *n). */
void lc_query__heap_push(int64_t *h, size_t *n, int64_t v);
void lc_query__heap_pop(int64_t *h, size_t *n);

/* One block's matching profiles summed per stack node (query_merge.c): the
 * dense array of ARCHITECTURE.md §3, reused across blocks. */
typedef struct qm_sums_s {
    int64_t *self; /* self[node]: summed sample values */
    size_t self_cap;
    uint32_t n;        /* nodes [0, n) cover every touched id; 0 = nothing matched */
    uint32_t *parents; /* of nodes [0, n) */
    uint32_t *locations;
    size_t nodes_cap;
    uint32_t *series; /* scratch: matching series ids */
    size_t n_series, series_cap;
} qm_sums_t;

/* Blocks of a reader; NULL (an empty range) has none. */
static inline size_t lc_query__blocks(const lc_store_reader_t *r)
{
    return r ? lc_store_reader_count(r) : 0;
}

/* Whether a sample's span id passes q's span filter. */
bool lc_query__span_selected(const lc_query_t *q, uint64_t span);

/* Marks keep[i] for the nodes [0, n) of a block whose stack passes q's
 * call-site filter (query_callsite.c); parents/locations as lc_block_nodes
 * gives them (parent < child). */
int lc_query__callsite_mark(lc_block_t *b, const lc_query_t *q, const uint32_t *parents,
                            const uint32_t *locations, uint32_t n, uint8_t *keep) LC_MUST_CHECK;

/* Sums the block's matching profiles into s and loads the node prefix; with a
 * call-site filter, nodes outside the call site keep self 0. */
int lc_query__block_sum(lc_block_t *b, const lc_query_t *q, qm_sums_t *s) LC_MUST_CHECK;
void lc_query__sums_fini(qm_sums_t *s);
/* Maps an engine error to a client status (resource_exhausted for caps). */
int lc_query__fail(lc_status_t *st, int rc, const char *what);
/* Makes room for `extra` more nodes at once (one rehash instead of several);
 * a hint, capped by the tree's node limit. */
void lc_query__ft_reserve(lc_ftree_t *t, size_t extra);
/* Computes t->total for every node (reverse pass over ids). */
void lc_query__ft_totals(lc_ftree_t *t);

static inline const char *ft_name_str(const lc_ftree_t *t, uint32_t id, size_t *len)
{
    *len = t->names[id].len;
    return t->pool + t->names[id].off;
}

/* Byte-wise comparison, shorter prefix first (Go string order). */
static inline int ft_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

#endif
