/*
 * parca_int.h — Parca's parca.query.v1alpha1.QueryService on the query front
 * end (parca.md §3, §4.2-4.3), shared by:
 *
 *   parca_ql.c      Parca's query strings <-> Pyroscope's profile type ids and
 *                   label selectors; the delta rule for ProfileTypes
 *   parca_tree.c, parca_fold.c, parca_report.c, parca_report_arrow.c
 *                   the reports of a Query (TOP, FLAMEGRAPH_TABLE,
 *                   FLAMEGRAPH_ARROW, TABLE_ARROW, CALLGRAPH) built from a
 *                   call tree folded straight from what the back end reads
 *                   (store blocks, ingesters' partials), or from the merged
 *                   pprof when the request filters stacks (the tree and the
 *                   files' split: parca_tree_int.h)
 *   parca_query.c   the RPCs and their routes (root and /api)
 *
 * Everything runs on the RPC's thread-pool thread, in the request arena.
 */
#ifndef EMBER_PARCA_INT_H
#define EMBER_PARCA_INT_H

#include "lc/pprof.h"
#include "parca/query/v1alpha1/query.pb-c.h"
#include "querier_int.h"

#define PARCA_QUERY_SERVICE "/parca.query.v1alpha1.QueryService/"

/* A Parca query `name:sample_type:sample_unit:period_type:period_unit
 * [:delta]{selector}` as Pyroscope's parts. */
typedef struct parca_query_s {
    const char *type_id;  /* "name:st:su:pt:pu" (no :delta), arena */
    const char *selector; /* "{...}" or "{}" */
    const char *name, *sample_type, *sample_unit, *period_type, *period_unit;
    bool delta;
} parca_query_t;

/* Parses q into the arena; invalid_argument with Parca's words on a query
 * without a profile type or a type that is not 5 or 6 parts. A selector
 * alone ("{job="a"}") is accepted when allow_no_type (Labels' match). */
int parca_parse_query(const char *q, bool allow_no_type, lc_arena_t *a, parca_query_t *out,
                      lc_status_t *st) LC_MUST_CHECK;
/* Whether a Pyroscope profile type reads as a Parca delta type: CPU and
 * wall-clock types are (their pprof carry a duration), the rest are gauges
 * or cumulative snapshots. */
bool parca_type_is_delta(const char *name, const char *period_type);
/* `{__profile_type__="<type_id>", <selector's matchers>}` in the arena, the
 * matcher Labels and Values send the back end (type_id NULL: the selector). */
const char *parca_selector_with_type(const char *type_id, const char *selector, lc_arena_t *a);

/* ---- the call tree and its reports (parca_tree_int.h) ---- */

typedef struct parca_tree_s parca_tree_t;

/* Adds the samples of p (one sample type, the one queried) to the tree with
 * weight sign (+1, or -1 for the base of a diff: counted in diff only).
 * filter: keep only stacks with a frame whose function name satisfies the
 * request's filters. *filtered grows by what was dropped. */
typedef struct parca_filter_s parca_filter_t;
/* by_address: one frame per (location, line); else one per function.
 * strings: where the strings of store blocks are copied (the request
 * arena: the reports point at them until the reply is packed, after the
 * tree is freed); a pprof's strings are used in place, and must live as
 * long. */
parca_tree_t *parca_tree_new(bool by_address, lc_arena_t *strings);
void parca_tree_free(parca_tree_t *t);
int parca_tree_add(parca_tree_t *t, const lc_pprof_t *p, int sign, const parca_filter_t *f,
                   int64_t *total, int64_t *filtered, lc_status_t *st) LC_MUST_CHECK;

/* The fast path: the parts of a merge folded into a tree as the back end
 * reads them (qry_front_merge_parts), with no merged pprof in between. The
 * tree is the one parca_tree_add would build from that pprof: the same
 * nodes and values (sibling order may differ). sign as parca_tree_add's;
 * *total grows by the values added with sign > 0. No filters: a request
 * with filters takes the merged pprof. */
typedef struct parca_fold_s parca_fold_t;
parca_fold_t *parca_fold_new(parca_tree_t *t, int sign, int64_t *total);
void parca_fold_free(parca_fold_t *f);
/* qry_merge_sink_t's callbacks (data = the fold): a store block's summed
 * nodes; an ingester's partial merged pprof. */
int parca_fold_nodes(const lc_query_nodes_t *nodes, void *data, lc_status_t *st);
int parca_fold_pprof(const lc_pprof_t *p, void *data, lc_status_t *st);

/* The request's filter_query and stack filters; NULL when there are none. */
int parca_filter_new(const Parca__Query__V1alpha1__QueryRequest *r, lc_arena_t *a,
                     parca_filter_t **out, lc_status_t *st) LC_MUST_CHECK;

/* The reports, in the response (allocated in the arena). unit is the
 * sample unit; trim is node_trim_threshold as a fraction of the total. */
int parca_report_top(parca_tree_t *t, const char *unit, lc_arena_t *a,
                     Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st) LC_MUST_CHECK;
int parca_report_flamegraph(parca_tree_t *t, const char *unit, double trim, lc_arena_t *a,
                            Parca__Query__V1alpha1__QueryResponse *resp,
                            lc_status_t *st) LC_MUST_CHECK;
int parca_report_flamegraph_arrow(parca_tree_t *t, const char *unit, double trim, lc_arena_t *a,
                                  Parca__Query__V1alpha1__QueryResponse *resp,
                                  lc_status_t *st) LC_MUST_CHECK;
int parca_report_table_arrow(parca_tree_t *t, const char *unit, lc_arena_t *a,
                             Parca__Query__V1alpha1__QueryResponse *resp,
                             lc_status_t *st) LC_MUST_CHECK;
int parca_report_callgraph(parca_tree_t *t, lc_arena_t *a,
                           Parca__Query__V1alpha1__QueryResponse *resp,
                           lc_status_t *st) LC_MUST_CHECK;

#endif
