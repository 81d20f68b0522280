/*
 * parca_report.c — the reports of parca.query.v1alpha1.QueryService/Query
 * (parca.md §4.3), built from the call tree (parca_tree.c, parca_fold.c);
 * the two Arrow reports are in parca_report_arrow.c.
 *
 * From the tree:
 *   TOP               per frame: flat and cumulative (recursion counted once)
 *   FLAMEGRAPH_TABLE  the tree, nodes referring to string/location/function/
 *                     mapping tables (indices 0-based; string 0 is "")
 *   FLAMEGRAPH_ARROW  the tree as an Arrow record, one row per node in
 *                     pre-order, row 0 the root; children as row numbers
 *   TABLE_ARROW       TOP's rows as an Arrow record
 *   CALLGRAPH         frames as nodes, caller -> callee edges
 * node_trim_threshold drops the subtrees whose cumulative is under the given
 * fraction of the total; `trimmed` reports what they held.
 */
#include <stdlib.h>
#include <string.h>

#include "parca_tree_int.h"

/* ----------------------------------------------------------- per frame */

/* Flat and cumulative per frame; a frame recursing in one stack counts once. */
void parca_frame_totals(const parca_tree_t *t, frame_totals_t *ft)
{
    size_t n = t->n_frames + 1;
    ft->cum = lc_xcalloc(n, sizeof(int64_t));
    ft->cum_diff = lc_xcalloc(n, sizeof(int64_t));
    ft->flat = lc_xcalloc(n, sizeof(int64_t));
    ft->flat_diff = lc_xcalloc(n, sizeof(int64_t));
    uint32_t *active = lc_xcalloc(n, sizeof(uint32_t));
    /* iterative pre-order walk; on the way up `active` is undone */
    uint32_t cur = t->nodes[0].first_child;
    while (cur != NO_FRAME) {
        const node_t *nd = &t->nodes[cur];
        if (active[nd->frame]++ == 0) {
            ft->cum[nd->frame] += nd->cum;
            ft->cum_diff[nd->frame] += nd->diff;
        }
        ft->flat[nd->frame] += nd->flat;
        ft->flat_diff[nd->frame] += nd->flat_diff;
        if (nd->first_child != NO_FRAME) {
            cur = nd->first_child;
            continue;
        }
        /* leave cur and every ancestor without a next sibling */
        while (cur != 0) {
            active[t->nodes[cur].frame]--;
            if (t->nodes[cur].next_sibling != NO_FRAME) {
                cur = t->nodes[cur].next_sibling;
                break;
            }
            cur = t->nodes[cur].parent;
        }
        if (cur == 0)
            break;
    }
    lc_free(active);
}

void parca_frame_totals_fini(frame_totals_t *ft)
{
    lc_free(ft->cum);
    lc_free(ft->cum_diff);
    lc_free(ft->flat);
    lc_free(ft->flat_diff);
}

/* The metastore messages of a frame, self-contained (no table indices). */
typedef struct frame_meta_s {
    Parca__Metastore__V1alpha1__Location *location;
    Parca__Metastore__V1alpha1__Mapping *mapping;
    Parca__Metastore__V1alpha1__Function *function;
    Parca__Metastore__V1alpha1__Line *line;
} frame_meta_t;

static int frame_meta(const parca_tree_t *t, uint32_t id, lc_arena_t *a, frame_meta_t *m)
{
    const frame_t *f = &t->frames[id];
    m->location = lc_arena_alloc(a, sizeof(*m->location));
    m->mapping = lc_arena_alloc(a, sizeof(*m->mapping));
    m->function = lc_arena_alloc(a, sizeof(*m->function));
    m->line = lc_arena_alloc(a, sizeof(*m->line));
    if (!m->location || !m->mapping || !m->function || !m->line)
        return -1;
    *m->location = (Parca__Metastore__V1alpha1__Location)PARCA__METASTORE__V1ALPHA1__LOCATION__INIT;
    *m->mapping = (Parca__Metastore__V1alpha1__Mapping)PARCA__METASTORE__V1ALPHA1__MAPPING__INIT;
    *m->function = (Parca__Metastore__V1alpha1__Function)PARCA__METASTORE__V1ALPHA1__FUNCTION__INIT;
    *m->line = (Parca__Metastore__V1alpha1__Line)PARCA__METASTORE__V1ALPHA1__LINE__INIT;
    m->location->address = f->address;
    m->mapping->file = (char *)t->strings[f->mapping_file];
    m->mapping->build_id = (char *)t->strings[f->build_id];
    m->function->name = (char *)t->strings[f->func];
    m->function->system_name = (char *)t->strings[f->system_name];
    m->function->filename = (char *)t->strings[f->file];
    m->function->start_line = f->start_line;
    m->line->line = f->line;
    return 0;
}

/* ------------------------------------------------------------------- TOP */

typedef struct ranked_s {
    int64_t flat, cum;
    uint32_t id;
} ranked_t;

static int by_flat_desc(const void *x, const void *y)
{
    const ranked_t *a = x, *b = y;
    if (a->flat != b->flat)
        return a->flat > b->flat ? -1 : 1;
    if (a->cum != b->cum)
        return a->cum > b->cum ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Frame ids with a value, by flat then cumulative, descending. */
uint32_t *parca_frames_sorted(const parca_tree_t *t, const frame_totals_t *ft, size_t *n)
{
    ranked_t *r = lc_xcalloc(t->n_frames + 1, sizeof(ranked_t));
    *n = 0;
    for (uint32_t i = 0; i < t->n_frames; i++)
        if (ft->cum[i] || ft->cum_diff[i])
            r[(*n)++] = (ranked_t){ft->flat[i], ft->cum[i], i};
    qsort(r, *n, sizeof(ranked_t), by_flat_desc);
    uint32_t *ids = lc_xcalloc(*n + 1, sizeof(uint32_t));
    for (size_t i = 0; i < *n; i++)
        ids[i] = r[i].id;
    lc_free(r);
    return ids;
}

int parca_report_top(parca_tree_t *t, const char *unit, lc_arena_t *a,
                     Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    frame_totals_t ft;
    parca_frame_totals(t, &ft);
    size_t n;
    uint32_t *ids = parca_frames_sorted(t, &ft, &n);
    Parca__Query__V1alpha1__Top *top = lc_arena_alloc(a, sizeof(*top));
    Parca__Query__V1alpha1__TopNode **list = lc_arena_calloc(a, n + 1, sizeof(*list));
    int rc = top && list ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        Parca__Query__V1alpha1__TopNode *node = lc_arena_alloc(a, sizeof(*node));
        Parca__Query__V1alpha1__TopNodeMeta *meta = lc_arena_alloc(a, sizeof(*meta));
        frame_meta_t fm;
        if (!node || !meta || frame_meta(t, ids[i], a, &fm)) {
            rc = -1;
            break;
        }
        *meta = (Parca__Query__V1alpha1__TopNodeMeta)PARCA__QUERY__V1ALPHA1__TOP_NODE_META__INIT;
        meta->location = fm.location;
        meta->mapping = fm.mapping;
        meta->function = fm.function;
        meta->line = fm.line;
        *node = (Parca__Query__V1alpha1__TopNode)PARCA__QUERY__V1ALPHA1__TOP_NODE__INIT;
        node->meta = meta;
        node->cumulative = ft.cum[ids[i]];
        node->flat = ft.flat[ids[i]];
        node->diff = ft.flat_diff[ids[i]];
        list[i] = node;
    }
    lc_free(ids);
    parca_frame_totals_fini(&ft);
    if (rc)
        return qry_fail_arena(st);
    *top = (Parca__Query__V1alpha1__Top)PARCA__QUERY__V1ALPHA1__TOP__INIT;
    top->list = list;
    top->n_list = n;
    top->reported = (int32_t)n;
    top->total = (int32_t)n;
    top->unit = (char *)unit;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_TOP;
    resp->top = top;
    return 0;
}

/* ------------------------------------------------------- FLAMEGRAPH_TABLE */

bool parca_node_kept(const parca_tree_t *t, uint32_t id, int64_t min_cum)
{
    return t->nodes[id].cum >= min_cum || (t->nodes[id].cum == 0 && t->nodes[id].diff != 0);
}

int64_t parca_min_cum_of(const parca_tree_t *t, double trim)
{
    return trim > 0 ? (int64_t)((double)t->nodes[0].cum * trim) : 0;
}

/* The tables of a table-form flame graph: one location and one function per
 * frame (index = frame id), mappings by (file, build id). */
static int flamegraph_tables(const parca_tree_t *t, lc_arena_t *a,
                             Parca__Query__V1alpha1__Flamegraph *fg)
{
    size_t n = t->n_frames;
    fg->string_table = lc_arena_calloc(a, t->n_strings + 1, sizeof(char *));
    fg->locations = lc_arena_calloc(a, n + 1, sizeof(*fg->locations));
    fg->function = lc_arena_calloc(a, n + 1, sizeof(*fg->function));
    fg->mapping = lc_arena_calloc(a, n + 1, sizeof(*fg->mapping));
    Parca__Metastore__V1alpha1__Location *locs = lc_arena_calloc(a, n + 1, sizeof(*locs));
    Parca__Metastore__V1alpha1__Function *fns = lc_arena_calloc(a, n + 1, sizeof(*fns));
    Parca__Metastore__V1alpha1__Mapping *maps = lc_arena_calloc(a, n + 1, sizeof(*maps));
    Parca__Metastore__V1alpha1__Line *lines = lc_arena_calloc(a, n + 1, sizeof(*lines));
    Parca__Metastore__V1alpha1__Line **line_ptrs = lc_arena_calloc(a, n + 1, sizeof(*line_ptrs));
    if (!fg->string_table || !fg->locations || !fg->function || !fg->mapping || !locs || !fns ||
        !maps || !lines || !line_ptrs)
        return -1;
    for (size_t i = 0; i < t->n_strings; i++)
        fg->string_table[i] = (char *)t->strings[i];
    fg->n_string_table = t->n_strings;
    for (size_t i = 0; i < n; i++) {
        const frame_t *f = &t->frames[i];
        /* one mapping per frame keeps the tables aligned; readers dedupe by content */
        maps[i] = (Parca__Metastore__V1alpha1__Mapping)PARCA__METASTORE__V1ALPHA1__MAPPING__INIT;
        maps[i].file_string_index = f->mapping_file;
        maps[i].build_id_string_index = f->build_id;
        maps[i].file = (char *)t->strings[f->mapping_file];
        maps[i].build_id = (char *)t->strings[f->build_id];
        fns[i] = (Parca__Metastore__V1alpha1__Function)PARCA__METASTORE__V1ALPHA1__FUNCTION__INIT;
        fns[i].name_string_index = f->func;
        fns[i].system_name_string_index = f->system_name;
        fns[i].filename_string_index = f->file;
        fns[i].start_line = f->start_line;
        lines[i] = (Parca__Metastore__V1alpha1__Line)PARCA__METASTORE__V1ALPHA1__LINE__INIT;
        lines[i].line = f->line;
        lines[i].function_index = (uint32_t)i;
        line_ptrs[i] = &lines[i];
        locs[i] = (Parca__Metastore__V1alpha1__Location)PARCA__METASTORE__V1ALPHA1__LOCATION__INIT;
        locs[i].address = f->address;
        locs[i].mapping_index = (uint32_t)i;
        locs[i].lines = &line_ptrs[i];
        locs[i].n_lines = 1;
        fg->locations[i] = &locs[i];
        fg->function[i] = &fns[i];
        fg->mapping[i] = &maps[i];
    }
    fg->n_locations = fg->n_function = fg->n_mapping = n;
    return 0;
}

static int table_children(const parca_tree_t *t, uint32_t id, int64_t min_cum, lc_arena_t *a,
                          Parca__Query__V1alpha1__FlamegraphNode ***out, size_t *n_out,
                          int64_t *trimmed);

static Parca__Query__V1alpha1__FlamegraphNode *
table_node(const parca_tree_t *t, uint32_t id, int64_t min_cum, lc_arena_t *a, int64_t *trimmed)
{
    Parca__Query__V1alpha1__FlamegraphNode *n = lc_arena_alloc(a, sizeof(*n));
    Parca__Query__V1alpha1__FlamegraphNodeMeta *m = lc_arena_alloc(a, sizeof(*m));
    if (!n || !m)
        return NULL;
    *m = (Parca__Query__V1alpha1__FlamegraphNodeMeta)
        PARCA__QUERY__V1ALPHA1__FLAMEGRAPH_NODE_META__INIT;
    m->location_index = t->nodes[id].frame;
    m->line_index = 0;
    *n = (Parca__Query__V1alpha1__FlamegraphNode)PARCA__QUERY__V1ALPHA1__FLAMEGRAPH_NODE__INIT;
    n->meta = m;
    n->cumulative = t->nodes[id].cum;
    n->diff = t->nodes[id].diff;
    if (table_children(t, id, min_cum, a, &n->children, &n->n_children, trimmed))
        return NULL;
    return n;
}

static int table_children(const parca_tree_t *t, uint32_t id, int64_t min_cum, lc_arena_t *a,
                          Parca__Query__V1alpha1__FlamegraphNode ***out, size_t *n_out,
                          int64_t *trimmed)
{
    size_t n = 0;
    for (uint32_t c = t->nodes[id].first_child; c != NO_FRAME; c = t->nodes[c].next_sibling)
        n++;
    *out = lc_arena_calloc(a, n + 1, sizeof(**out));
    if (!*out)
        return -1;
    *n_out = 0;
    for (uint32_t c = t->nodes[id].first_child; c != NO_FRAME; c = t->nodes[c].next_sibling) {
        if (!parca_node_kept(t, c, min_cum)) {
            *trimmed += t->nodes[c].cum;
            continue;
        }
        Parca__Query__V1alpha1__FlamegraphNode *child = table_node(t, c, min_cum, a, trimmed);
        if (!child)
            return -1;
        (*out)[(*n_out)++] = child;
    }
    return 0;
}

int parca_report_flamegraph(parca_tree_t *t, const char *unit, double trim, lc_arena_t *a,
                            Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    Parca__Query__V1alpha1__Flamegraph *fg = lc_arena_alloc(a, sizeof(*fg));
    Parca__Query__V1alpha1__FlamegraphRootNode *root = lc_arena_alloc(a, sizeof(*root));
    if (!fg || !root)
        return qry_fail_arena(st);
    *fg = (Parca__Query__V1alpha1__Flamegraph)PARCA__QUERY__V1ALPHA1__FLAMEGRAPH__INIT;
    *root = (Parca__Query__V1alpha1__FlamegraphRootNode)
        PARCA__QUERY__V1ALPHA1__FLAMEGRAPH_ROOT_NODE__INIT;
    root->cumulative = t->nodes[0].cum;
    root->diff = t->nodes[0].diff;
    int64_t trimmed = 0;
    if (flamegraph_tables(t, a, fg) || table_children(t, 0, parca_min_cum_of(t, trim), a,
                                                      &root->children, &root->n_children, &trimmed))
        return qry_fail_arena(st);
    fg->root = root;
    fg->total = t->nodes[0].cum;
    fg->untrimmed_total = t->nodes[0].cum;
    fg->trimmed = trimmed;
    fg->unit = (char *)unit;
    fg->height = t->max_depth + 1;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_FLAMEGRAPH;
    resp->flamegraph = fg;
    return 0;
}

/* -------------------------------------------------------------- CALLGRAPH */

/* Caller -> callee edges: the cumulative of every tree node under a
 * non-root parent, summed per (parent frame, frame). */
typedef struct edge_s {
    uint32_t from, to;
    int64_t cum;
} edge_t;

static int by_edge(const void *x, const void *y)
{
    const edge_t *a = x, *b = y;
    uint64_t ka = (uint64_t)a->from << 32 | a->to, kb = (uint64_t)b->from << 32 | b->to;
    return ka < kb ? -1 : ka > kb;
}

static size_t callgraph_edges(const parca_tree_t *t, edge_t **out)
{
    edge_t *e = lc_xcalloc(t->n_nodes + 1, sizeof(edge_t));
    size_t n = 0;
    for (size_t i = 1; i < t->n_nodes; i++) {
        const node_t *nd = &t->nodes[i];
        if (nd->parent != 0 && nd->cum)
            e[n++] = (edge_t){t->nodes[nd->parent].frame, nd->frame, nd->cum};
    }
    qsort(e, n, sizeof(edge_t), by_edge);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && e[m - 1].from == e[i].from && e[m - 1].to == e[i].to)
            e[m - 1].cum += e[i].cum;
        else
            e[m++] = e[i];
    }
    *out = e;
    return m;
}

/* "<prefix><v>" (decimal) in the arena, without the printf machinery: a
 * call graph names 100,000s of nodes and edges. */
static char *cg_id(lc_arena_t *a, char prefix, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char *s = lc_arena_alloc(a, n + 2);
    if (!s)
        return NULL;
    s[0] = prefix;
    for (size_t i = 0; i < n; i++)
        s[1 + i] = tmp[n - 1 - i];
    s[n + 1] = '\0';
    return s;
}

static int callgraph_nodes(const parca_tree_t *t, const frame_totals_t *ft, lc_arena_t *a,
                           Parca__Query__V1alpha1__Callgraph *cg)
{
    cg->nodes = lc_arena_calloc(a, t->n_frames + 1, sizeof(*cg->nodes));
    if (!cg->nodes)
        return -1;
    for (uint32_t i = 0; i < t->n_frames; i++) {
        if (!ft->cum[i])
            continue;
        Parca__Query__V1alpha1__CallgraphNode *n = lc_arena_alloc(a, sizeof(*n));
        Parca__Query__V1alpha1__CallgraphNodeMeta *m = lc_arena_alloc(a, sizeof(*m));
        frame_meta_t fm;
        if (!n || !m || frame_meta(t, i, a, &fm))
            return -1;
        *m = (Parca__Query__V1alpha1__CallgraphNodeMeta)
            PARCA__QUERY__V1ALPHA1__CALLGRAPH_NODE_META__INIT;
        m->location = fm.location;
        m->mapping = fm.mapping;
        m->function = fm.function;
        m->line = fm.line;
        *n = (Parca__Query__V1alpha1__CallgraphNode)PARCA__QUERY__V1ALPHA1__CALLGRAPH_NODE__INIT;
        n->id = cg_id(a, 'n', i);
        n->meta = m;
        n->cumulative = ft->cum[i];
        n->flat = ft->flat[i];
        if (!n->id)
            return -1;
        cg->nodes[cg->n_nodes++] = n;
    }
    return 0;
}

int parca_report_callgraph(parca_tree_t *t, lc_arena_t *a,
                           Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    frame_totals_t ft;
    parca_frame_totals(t, &ft);
    Parca__Query__V1alpha1__Callgraph *cg = lc_arena_alloc(a, sizeof(*cg));
    edge_t *e = NULL;
    size_t n_edges = callgraph_edges(t, &e);
    int rc = cg ? 0 : -1;
    if (rc == 0) {
        *cg = (Parca__Query__V1alpha1__Callgraph)PARCA__QUERY__V1ALPHA1__CALLGRAPH__INIT;
        rc = callgraph_nodes(t, &ft, a, cg);
    }
    if (rc == 0) {
        cg->edges = lc_arena_calloc(a, n_edges + 1, sizeof(*cg->edges));
        rc = cg->edges ? 0 : -1;
    }
    for (size_t i = 0; i < n_edges && rc == 0; i++) {
        Parca__Query__V1alpha1__CallgraphEdge *ed = lc_arena_alloc(a, sizeof(*ed));
        if (!ed) {
            rc = -1;
            break;
        }
        *ed = (Parca__Query__V1alpha1__CallgraphEdge)PARCA__QUERY__V1ALPHA1__CALLGRAPH_EDGE__INIT;
        ed->id = cg_id(a, 'e', i);
        ed->source = cg_id(a, 'n', e[i].from);
        ed->target = cg_id(a, 'n', e[i].to);
        ed->cumulative = e[i].cum;
        if (!ed->id || !ed->source || !ed->target)
            rc = -1;
        cg->edges[cg->n_edges++] = ed;
    }
    lc_free(e);
    parca_frame_totals_fini(&ft);
    if (rc)
        return qry_fail_arena(st);
    cg->cumulative = t->nodes[0].cum;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_CALLGRAPH;
    resp->callgraph = cg;
    return 0;
}
