/*
 * parca_tree_int.h — the call tree Parca's reports are built from, shared by
 * the files that build it and the files that read it (not a public header):
 *
 *   parca_tree.c          interning (strings, frames, nodes) and adding a pprof
 *   parca_fold.c          folding store blocks' nodes and partial pprofs straight
 *                         into the tree; the request's stack filters
 *   parca_report.c        per-frame totals, TOP, FLAMEGRAPH_TABLE, CALLGRAPH
 *   parca_report_arrow.c  FLAMEGRAPH_ARROW and TABLE_ARROW
 *
 * Calls only go down: the reports read the tree, the fold uses the tree's
 * interning, parca_report_arrow.c uses parca_report.c's per-frame totals.
 * A tree belongs to one request and is used on its thread only.
 */
#ifndef EMBER_PARCA_TREE_INT_H
#define EMBER_PARCA_TREE_INT_H

#include "parca_int.h"

#define PARCA_MAX_NODES ((size_t)8 << 20)
#define PARCA_MAX_REPORT ((size_t)512 << 20)
#define NO_FRAME UINT32_MAX

typedef struct frame_s {
    uint32_t mapping_file, build_id, func, system_name, file; /* string ids */
    uint64_t address;
    int64_t line, start_line;
} frame_t;

typedef struct node_s {
    uint32_t parent, frame, first_child, next_sibling, depth;
    int64_t cum, flat, diff, flat_diff;
} node_t;

/* An open-addressing map of 64-bit keys to 32-bit values (value+1 stored, 0 =
 * empty); the key of a slot is found through the caller's table. */
typedef struct slots_s {
    uint32_t *v;
    size_t cap; /* power of two */
    size_t n;
} slots_t;

/* The (parent, frame) -> node table: a slot carries its key, so a probe
 * reads one slot and never the node array (id 0 = empty: node 0, the
 * root, is nobody's child). */
typedef struct node_slot_s {
    uint32_t parent, frame, id;
} node_slot_t;

typedef struct node_slots_s {
    node_slot_t *v;
    size_t cap; /* power of two */
    size_t n;
} node_slots_t;

struct parca_tree_s {
    const char **strings; /* id 0 is "" */
    size_t n_strings, cap_strings;
    slots_t string_slots;
    frame_t *frames;
    size_t n_frames, cap_frames;
    slots_t frame_slots;
    node_t *nodes; /* node 0 is the root */
    size_t n_nodes, cap_nodes;
    node_slots_t node_slots;
    int32_t max_depth;
    bool by_address; /* frames keep address and line; else one per function */
    /* where strings read from store blocks are copied: the request arena,
     * since the reports point at them until the reply is packed */
    lc_arena_t *pool;
};

struct parca_filter_s {
    const char *contains; /* filter_query: a function name containing it */
    const Parca__Query__V1alpha1__StringCondition **conds;
    bool *exclude; /* per condition: drop stacks that match instead */
    size_t n_conds;
};

#define LOC_MAX_LINES 64 /* inlined frames kept per location */

/* ---- parca_tree.c: interning into the tree ---- */

/* A block string (bytes, not NUL-terminated) interned as the C string a
 * decoded pprof would hold (cut at a NUL byte); new ones are copied into the
 * tree's pool (the request arena). NO_FRAME when it is full. */
uint32_t parca_intern_bytes(parca_tree_t *t, const char *s, size_t len);
/* The id of frame f (its string ids already interned), added if new. */
uint32_t parca_intern_frame(parca_tree_t *t, const frame_t *f);
/* Makes room for `need` children in the node table (load at most 1/2). */
void parca_node_slots_reserve(node_slots_t *s, size_t need);
/* The child of parent for frame, created if new; NO_FRAME past the cap. */
uint32_t parca_child_of(parca_tree_t *t, uint32_t parent, uint32_t frame);

/* ---- parca_report.c: per-frame totals and trimming, read by the Arrow reports ---- */

typedef struct frame_totals_s {
    int64_t *cum, *cum_diff, *flat, *flat_diff;
} frame_totals_t;

/* Flat and cumulative per frame; a frame recursing in one stack counts once. */
void parca_frame_totals(const parca_tree_t *t, frame_totals_t *ft);
void parca_frame_totals_fini(frame_totals_t *ft);
/* Frame ids with a value, by flat then cumulative, descending. */
uint32_t *parca_frames_sorted(const parca_tree_t *t, const frame_totals_t *ft, size_t *n);
/* Whether node id survives node_trim_threshold (min_cum from parca_min_cum_of). */
bool parca_node_kept(const parca_tree_t *t, uint32_t id, int64_t min_cum);
int64_t parca_min_cum_of(const parca_tree_t *t, double trim);

#endif
