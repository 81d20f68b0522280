/*
 * parca_fold.c — the fast path of Parca's Query: the parts of a merge (store
 * blocks' summed nodes, ingesters' partial pprofs) folded straight into the
 * call tree as the back end reads them, with no merged pprof in between; and
 * the request's stack filters (a request with filters takes the merged pprof
 * through parca_tree_add instead).
 */
#include <stdlib.h>
#include <string.h>

#include "parca_tree_int.h"

/* --------------------------------------------- straight from store blocks */

/* One block's symbols resolved to the tree's ids, each once: the frames of a
 * location (as parca_location_frames makes them from a pprof), a function's
 * strings, a mapping's. */
typedef struct block_syms_s {
    lc_block_t *b;
    size_t n_locs, n_funcs;
    uint32_t *loc_off, *loc_len; /* by location id; loc_off: offset + 1, 0 = not yet */
    uint32_t *pool;
    size_t n_pool, cap_pool;
    uint32_t *func_at; /* by function id: index into funcs + 1, 0 = not yet */
    frame_t *funcs;    /* the resolved ones: name, system name, file, start line */
    size_t n_funcs_done, cap_funcs;
    frame_t *map; /* by mapping id: file and build id */
    uint8_t *map_done;
    size_t n_maps;
    uint32_t *str; /* by block string id: tree string id + 1; 0 = not yet */
    size_t n_strs;
} block_syms_t;

static int block_syms_init(block_syms_t *y, lc_block_t *b)
{
    lc_block_info_t info;
    int rc = lc_block_info(b, &info);
    if (rc)
        return rc;
    if (info.locations >= UINT32_MAX || info.functions >= UINT32_MAX || info.strings >= UINT32_MAX)
        return LC_ECORRUPT;
    *y = (block_syms_t){
        .b = b, .n_locs = info.locations, .n_funcs = info.functions, .n_strs = info.strings};
    y->str = lc_xcalloc(y->n_strs + 1, sizeof(uint32_t));
    /* sized by the block (every profile's symbols), touched by the query:
     * only the zeroed id maps are as large as the block */
    y->loc_off = lc_xcalloc(y->n_locs + 1, sizeof(uint32_t));
    y->loc_len = lc_xmalloc((y->n_locs + 1) * sizeof(uint32_t));
    y->func_at = lc_xcalloc(y->n_funcs + 1, sizeof(uint32_t));
    return 0;
}

static void block_syms_fini(block_syms_t *y)
{
    lc_free(y->loc_off);
    lc_free(y->loc_len);
    lc_free(y->pool);
    lc_free(y->func_at);
    lc_free(y->funcs);
    lc_free(y->map);
    lc_free(y->map_done);
    lc_free(y->str);
}

/* A block string as a tree string id, read once per block (functions share
 * their files, and name and system name are often one string). */
static int block_str(parca_tree_t *t, block_syms_t *y, uint32_t id, uint32_t *out)
{
    if (id <= y->n_strs && y->str[id]) {
        *out = y->str[id] - 1;
        return 0;
    }
    const char *s;
    size_t len;
    int rc = lc_block_string(y->b, id, &s, &len);
    if (rc)
        return rc;
    *out = parca_intern_bytes(t, s, len);
    if (*out == NO_FRAME)
        return LC_ETOOBIG;
    if (id <= y->n_strs)
        y->str[id] = *out + 1;
    return 0;
}

static int block_function(parca_tree_t *t, block_syms_t *y, uint32_t fid, const frame_t **out)
{
    if (fid == 0 || fid > y->n_funcs)
        return LC_ECORRUPT;
    if (!y->func_at[fid]) {
        y->funcs = lc_xgrow(y->funcs, &y->cap_funcs, y->n_funcs_done + 1, sizeof(frame_t));
        frame_t *f = &y->funcs[y->n_funcs_done];
        *f = (frame_t){0};
        lc_store_function_t fn;
        int rc = lc_block_function(y->b, fid, &fn);
        if (rc == 0)
            rc = block_str(t, y, fn.name, &f->func);
        if (rc == 0)
            rc = block_str(t, y, fn.system_name, &f->system_name);
        if (rc == 0)
            rc = block_str(t, y, fn.filename, &f->file);
        if (rc)
            return rc;
        f->start_line = fn.start_line;
        y->func_at[fid] = (uint32_t)++y->n_funcs_done;
    }
    *out = &y->funcs[y->func_at[fid] - 1];
    return 0;
}

static int block_mapping(parca_tree_t *t, block_syms_t *y, uint32_t mid, frame_t *f)
{
    if (mid == 0)
        return 0;
    if (mid >= y->n_maps) {
        size_t old = y->n_maps, cap = old;
        y->map = lc_xgrow(y->map, &cap, (size_t)mid + 1, sizeof(frame_t));
        y->map_done = lc_xrealloc(y->map_done, cap);
        memset(y->map_done + old, 0, cap - old);
        y->n_maps = cap;
    }
    frame_t *m = &y->map[mid];
    if (!y->map_done[mid]) {
        lc_store_mapping_t sm;
        int rc = lc_block_mapping(y->b, mid, &sm);
        if (rc == 0)
            rc = block_str(t, y, sm.filename, &m->mapping_file);
        if (rc == 0)
            rc = block_str(t, y, sm.build_id, &m->build_id);
        if (rc)
            return rc;
        y->map_done[mid] = 1;
    }
    f->mapping_file = m->mapping_file;
    f->build_id = m->build_id;
    return 0;
}

/* A location without lines is named "module+0xoffset" (lc/frame_name.h),
 * as every query path names it. */
static int block_address_func(parca_tree_t *t, block_syms_t *y, const lc_store_location_t *l,
                              frame_t *f)
{
    char scratch[LC_FRAME_NAME_MAX];
    const char *s;
    size_t len;
    int rc = lc_block_frame_name(y->b, l, 0, scratch, &s, &len);
    if (rc == 0)
        f->func = parca_intern_bytes(t, s, len);
    return rc ? rc : f->func == NO_FRAME ? LC_ETOOBIG : 0;
}

/* The frames of a location the symbolizer named, root side first, as
 * parca_location_frames makes them from the merged pprof's copy (whose lines
 * qp_symbolized_lines wrote: system name = name, no start line). */
static int block_symbol_frames(parca_tree_t *t, const lc_symbols_t *sy, frame_t *f, uint32_t *out,
                               size_t room, size_t *k)
{
    for (size_t i = sy->n; i-- > 0 && *k < room;) {
        const lc_symbol_frame_t *s = &sy->frames[i];
        f->func = parca_intern_bytes(t, s->function, strlen(s->function));
        f->system_name = f->func;
        f->file = parca_intern_bytes(t, s->file, strlen(s->file));
        if (f->func == NO_FRAME || f->file == NO_FRAME)
            return LC_ETOOBIG;
        f->start_line = 0;
        f->line = t->by_address ? s->line : 0;
        out[(*k)++] = parca_intern_frame(t, f);
    }
    return 0;
}

/* The frames of store location lid, root side first, computed once per
 * block: the same frames parca_location_frames makes of the location's
 * copy in a merged pprof (at most LOC_MAX_LINES). */
static int block_location_frames(parca_tree_t *t, block_syms_t *y, uint32_t lid,
                                 const uint32_t **frames, uint32_t *n)
{
    if (lid == 0 || lid > y->n_locs)
        return LC_ECORRUPT;
    if (!y->loc_off[lid]) {
        lc_store_location_t l;
        frame_t f = {0};
        int rc = lc_block_location(y->b, lid, &l);
        if (rc == 0)
            rc = block_mapping(t, y, l.mapping_id, &f);
        if (rc)
            return rc;
        lc_symbols_t sy = {0};
        if (l.n_lines == 0 && lc_block_symbols(y->b, &l, &sy) != 0)
            sy.n = 0; /* as stored, as lc_block_frame_count falls back */
        f.address = t->by_address || (l.n_lines == 0 && sy.n == 0) ? l.address : 0;
        size_t k = 0, want = l.n_lines ? l.n_lines : sy.n ? sy.n : 1;
        if (want > LOC_MAX_LINES)
            want = LOC_MAX_LINES;
        y->pool = lc_xgrow(y->pool, &y->cap_pool, y->n_pool + want, sizeof(uint32_t));
        if (sy.n)
            rc = block_symbol_frames(t, &sy, &f, y->pool + y->n_pool, want, &k);
        else if (l.n_lines == 0) {
            rc = block_address_func(t, y, &l, &f);
            if (rc == 0)
                y->pool[y->n_pool + k++] = parca_intern_frame(t, &f);
        }
        if (rc)
            return rc;
        for (size_t i = l.n_lines; i-- > 0 && k < want;) {
            const frame_t *fn;
            rc = block_function(t, y, l.lines[i].function_id, &fn);
            if (rc)
                return rc;
            f.func = fn->func;
            f.system_name = fn->system_name;
            f.file = fn->file;
            f.start_line = fn->start_line;
            f.line = t->by_address ? l.lines[i].line : 0;
            y->pool[y->n_pool + k++] = parca_intern_frame(t, &f);
        }
        y->loc_off[lid] = (uint32_t)y->n_pool + 1;
        y->loc_len[lid] = (uint32_t)k;
        y->n_pool += k;
    }
    *frames = y->pool + y->loc_off[lid] - 1;
    *n = y->loc_len[lid];
    return 0;
}

/* What a block fold needs beyond the nodes: per block node its subtree sum
 * (negative values included, as the pprof path adds them), whether any value
 * lies below it, and the tree node its path ends at. */
typedef struct fold_scratch_s {
    int64_t *sum;
    uint8_t *live;
    uint32_t *at;
    size_t cap;
} fold_scratch_t;

/* Returns how many nodes have a value below them (a bound on the tree
 * nodes the block may add, less inlined frames). */
static size_t fold_scratch_fill(fold_scratch_t *x, const lc_query_nodes_t *nd)
{
    if (nd->n > x->cap) {
        x->sum = lc_xrealloc(x->sum, nd->n * sizeof(*x->sum));
        x->live = lc_xrealloc(x->live, nd->n);
        x->at = lc_xrealloc(x->at, nd->n * sizeof(*x->at));
        x->cap = nd->n;
    }
    for (uint32_t i = 0; i < nd->n; i++) {
        x->sum[i] = nd->self[i];
        x->live[i] = nd->self[i] != 0;
    }
    /* children have larger ids: at i every child has been added */
    size_t live = 0;
    for (uint32_t i = nd->n - 1; i > 0; i--) {
        x->sum[nd->parents[i]] += x->sum[i];
        x->live[nd->parents[i]] |= x->live[i];
        live += x->live[i];
    }
    return live;
}

/* Adds v (sign as in add_stack) to one tree node's cumulative side. */
static void add_cum(node_t *n, int64_t v, int sign)
{
    if (sign > 0)
        n->cum += v;
    n->diff += sign * v;
}

static void add_flat(node_t *n, int64_t v, int sign)
{
    if (sign > 0)
        n->flat += v;
    n->flat_diff += sign * v;
}

/* The block's nodes folded into the tree: a block node's frames hang under
 * its parent's tree node; every tree node on that chain gets the block
 * node's subtree sum (the samples below it pass through each of them once),
 * its last one the node's own value as flat. Only nodes with a value below
 * them are visited, as the pprof path only has samples with a value. */
static int fold_nodes(parca_tree_t *t, const lc_query_nodes_t *nd, block_syms_t *y,
                      fold_scratch_t *x, int sign, lc_status_t *st)
{
    size_t grow = t->n_nodes + fold_scratch_fill(x, nd);
    parca_node_slots_reserve(&t->node_slots, grow < PARCA_MAX_NODES ? grow : PARCA_MAX_NODES);
    x->at[0] = 0;
    add_cum(&t->nodes[0], x->sum[0], sign);
    add_flat(&t->nodes[0], nd->self[0], sign);
    for (uint32_t i = 1; i < nd->n; i++) {
        if (!x->live[i])
            continue;
        const uint32_t *frames;
        uint32_t n_frames, cur = x->at[nd->parents[i]];
        int rc = block_location_frames(t, y, nd->locations[i], &frames, &n_frames);
        if (rc)
            return rc;
        for (uint32_t k = 0; k < n_frames; k++) {
            cur = parca_child_of(t, cur, frames[k]);
            if (cur == NO_FRAME)
                return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                                     "the report passes %zu call-tree nodes; narrow the query",
                                     PARCA_MAX_NODES);
            add_cum(&t->nodes[cur], x->sum[i], sign);
        }
        x->at[i] = cur;
        add_flat(&t->nodes[cur], nd->self[i], sign);
    }
    return 0;
}

/* What parca_tree_add_nodes folds into; one per side of a query. */
struct parca_fold_s {
    parca_tree_t *t;
    int sign;
    int64_t *total;
    fold_scratch_t x;
};

parca_fold_t *parca_fold_new(parca_tree_t *t, int sign, int64_t *total)
{
    parca_fold_t *f = lc_xcalloc(1, sizeof(*f));
    *f = (parca_fold_t){.t = t, .sign = sign, .total = total};
    return f;
}

void parca_fold_free(parca_fold_t *f)
{
    if (!f)
        return;
    lc_free(f->x.sum);
    lc_free(f->x.live);
    lc_free(f->x.at);
    lc_free(f);
}

int parca_fold_nodes(const lc_query_nodes_t *nd, void *data, lc_status_t *st)
{
    parca_fold_t *f = data;
    block_syms_t y;
    int rc = block_syms_init(&y, nd->block);
    if (rc)
        return rc;
    rc = fold_nodes(f->t, nd, &y, &f->x, f->sign, st);
    if (rc == 0 && f->sign > 0)
        *f->total += f->x.sum[0];
    block_syms_fini(&y);
    return rc;
}

int parca_fold_pprof(const lc_pprof_t *p, void *data, lc_status_t *st)
{
    parca_fold_t *f = data;
    int64_t ignored = 0;
    return parca_tree_add(f->t, p, f->sign, NULL, f->sign > 0 ? f->total : &ignored, &ignored, st);
}

int parca_filter_new(const Parca__Query__V1alpha1__QueryRequest *r, lc_arena_t *a,
                     parca_filter_t **out, lc_status_t *st)
{
    *out = NULL;
    bool any = r->filter_query && *r->filter_query;
    if (!any && r->n_filter == 0)
        return 0;
    parca_filter_t *f = lc_arena_calloc(a, 1, sizeof(*f));
    f->conds = lc_arena_calloc(a, r->n_filter + 1, sizeof(*f->conds));
    f->exclude = lc_arena_calloc(a, r->n_filter + 1, sizeof(bool));
    if (!f || !f->conds || !f->exclude)
        return qry_fail_arena(st);
    f->contains = any ? r->filter_query : NULL;
    static Parca__Query__V1alpha1__StringCondition fname_cond =
        PARCA__QUERY__V1ALPHA1__STRING_CONDITION__INIT;
    for (size_t i = 0; i < r->n_filter; i++) {
        const Parca__Query__V1alpha1__Filter *fl = r->filter[i];
        const Parca__Query__V1alpha1__StackFilter *sf =
            fl->filter_case == PARCA__QUERY__V1ALPHA1__FILTER__FILTER_STACK_FILTER
                ? fl->stack_filter
                : NULL;
        if (sf && sf->filter_case == PARCA__QUERY__V1ALPHA1__STACK_FILTER__FILTER_CRITERIA &&
            sf->criteria && sf->criteria->function_name && !sf->criteria->system_name &&
            !sf->criteria->binary && !sf->criteria->filename && !sf->criteria->address &&
            !sf->criteria->line_number) {
            f->conds[f->n_conds++] = sf->criteria->function_name;
            continue;
        }
        if (sf &&
            sf->filter_case ==
                PARCA__QUERY__V1ALPHA1__STACK_FILTER__FILTER_FUNCTION_NAME_STACK_FILTER &&
            sf->function_name_stack_filter) {
            Parca__Query__V1alpha1__StringCondition *c = lc_arena_alloc(a, sizeof(*c));
            if (!c)
                return qry_fail_arena(st);
            *c = fname_cond;
            c->condition_case = PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_CONTAINS;
            c->contains = sf->function_name_stack_filter->function_to_filter;
            f->exclude[f->n_conds] = sf->function_name_stack_filter->exclude;
            f->conds[f->n_conds++] = c;
            continue;
        }
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "filter %zu: ember filters stacks by function name only "
                             "(stack_filter with criteria.function_name or "
                             "function_name_stack_filter)",
                             i);
    }
    *out = f;
    return 0;
}
