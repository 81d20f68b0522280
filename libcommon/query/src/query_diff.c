/*
 * query_diff.c — the diff flame graph (pyroscope-api.md §5.6): two name trees
 * aligned to one shape (the union of their nodes, a missing side counting 0)
 * and emitted in the 7-number layout [xL, totalL, selfL, xR, totalR, selfR,
 * name], both x columns delta-encoded independently.
 *
 * The union is itself a name tree; each side keeps its selfs in an array
 * indexed by union node, so alignment costs one pass per side. The traversal
 * follows Pyroscope's NewFlamegraphDiff: the virtual root is part of the tree
 * (it counts towards max_nodes, enters the threshold heap first, and its name
 * cache key is the empty name, shown as "total"); the threshold heap takes
 * max(left, right) totals in pre-order, descending only into admitted nodes;
 * a child is kept when either side reaches the threshold, the rest of its
 * siblings fold into one "other" per parent.
 */
#include <string.h>

#include "query_int.h"

#define DIFF_SYNTHETIC UINT32_MAX

typedef struct diff_side_s {
    int64_t *self; /* by union node */
    int64_t *total;
} diff_side_t;

typedef struct diff_s {
    lc_ftree_t *u; /* the union tree */
    diff_side_t side[2];
    ft_kids_t kids;
    int64_t min_val;
    uint32_t root_key; /* name id of "" in u */
} diff_t;

/* Maps src's nodes into the union; node_map[src id] = union id. */
static int diff_map(diff_t *d, const lc_ftree_t *src, uint32_t **node_map)
{
    uint32_t *map = lc_xmalloc(src->n_nodes * sizeof(uint32_t));
    int rc = 0;
    map[0] = LC_FTREE_ROOT;
    for (size_t i = 1; i < src->n_nodes && rc == 0; i++) {
        size_t len;
        const char *s = ft_name_str(src, src->nodes[i].name, &len);
        uint32_t name;
        rc = lc_ftree_name(d->u, s, len, &name);
        if (rc == 0)
            rc = lc_ftree_child(d->u, map[src->nodes[i].parent], name, &map[i]);
    }
    *node_map = map;
    return rc;
}

/* One side's selfs and totals over the union (negative selfs count 0). */
static void diff_side(const lc_ftree_t *u, const lc_ftree_t *src, const uint32_t *node_map,
                      diff_side_t *s)
{
    s->self = lc_xcalloc(u->n_nodes, sizeof(int64_t));
    s->total = lc_xmalloc(u->n_nodes * sizeof(int64_t));
    for (size_t i = 0; i < src->n_nodes; i++)
        s->self[node_map[i]] += src->nodes[i].self > 0 ? src->nodes[i].self : 0;
    memcpy(s->total, s->self, u->n_nodes * sizeof(int64_t));
    for (size_t i = u->n_nodes - 1; i > 0; i--)
        s->total[u->nodes[i].parent] += s->total[i];
}

static int diff_build(diff_t *d, const lc_ftree_t *left, const lc_ftree_t *right)
{
    uint32_t *map_l = NULL, *map_r = NULL;
    d->u = lc_ftree_new(left->max_nodes + right->max_nodes);
    int rc = lc_ftree_name(d->u, "", 0, &d->root_key);
    if (rc == 0)
        rc = diff_map(d, left, &map_l);
    if (rc == 0)
        rc = diff_map(d, right, &map_r);
    if (rc == 0) {
        diff_side(d->u, left, map_l, &d->side[0]);
        diff_side(d->u, right, map_r, &d->side[1]);
        lc_query__kids_build(d->u, &d->kids);
    }
    lc_free(map_l);
    lc_free(map_r);
    return rc;
}

static int64_t side_max(const diff_t *d, uint32_t n)
{
    int64_t l = d->side[0].total[n], r = d->side[1].total[n];
    return l > r ? l : r;
}

/* Pre-order walk (children ascending) keeping the max_nodes largest
 * max(left, right) totals; the root counts as a node. */
static int64_t diff_min_value(const diff_t *d, int64_t max_nodes)
{
    const lc_ftree_t *u = d->u;
    if (max_nodes < 1 || (int64_t)u->n_nodes <= max_nodes)
        return 0;
    size_t cap = (size_t)max_nodes, hn = 0, sn = 0;
    int64_t *heap = lc_xmalloc(cap * sizeof(int64_t));
    uint32_t *stack = lc_xmalloc(u->n_nodes * sizeof(uint32_t));
    stack[sn++] = LC_FTREE_ROOT;
    while (sn > 0) {
        uint32_t n = stack[--sn];
        int64_t v = side_max(d, n);
        if (v <= 0 || (hn >= cap && v <= heap[0]))
            continue;
        if (hn >= cap)
            lc_query__heap_pop(heap, &hn);
        lc_query__heap_push(heap, &hn, v);
        /* Pushed descending so they pop ascending: a pre-order walk. */
        for (uint32_t j = d->kids.start[n + 1]; j > d->kids.start[n]; j--)
            stack[sn++] = d->kids.list[j - 1];
    }
    int64_t min = hn ? heap[0] : 0;
    lc_free(heap);
    lc_free(stack);
    return min;
}

/* ------------------------------------------------------------- emission */

typedef struct diff_entry_s {
    uint32_t node; /* DIFF_SYNTHETIC for "other" */
    uint32_t level;
    int64_t x[2];
    int64_t other[2];
} diff_entry_t;

typedef struct diff_level_s {
    int64_t *v;
    size_t n, cap;
} diff_level_t;

typedef struct diff_emit_s {
    diff_t *d;
    diff_entry_t *stack;
    size_t sn, scap;
    diff_level_t *levels;
    size_t n_levels, levels_cap;
    int32_t *name_index;
    uint32_t *names; /* name ids by index; names[0] is shown as "total" */
    size_t n_names;
    int64_t max_self;
} diff_emit_t;

static void emit_push(diff_emit_t *e, const diff_entry_t *en)
{
    e->stack = lc_xgrow(e->stack, &e->scap, e->sn + 1, sizeof(*e->stack));
    e->stack[e->sn++] = *en;
}

static void emit_append(diff_emit_t *e, uint32_t level, const int64_t v[7])
{
    if (level == e->n_levels) {
        e->levels = lc_xgrow(e->levels, &e->levels_cap, level + 1, sizeof(*e->levels));
        e->levels[e->n_levels++] = (diff_level_t){0};
    }
    diff_level_t *l = &e->levels[level];
    l->v = lc_xgrow(l->v, &l->cap, l->n + 7, sizeof(int64_t));
    memcpy(l->v + l->n, v, 7 * sizeof(int64_t));
    l->n += 7;
}

static uint32_t emit_name(diff_emit_t *e, uint32_t key)
{
    if (e->name_index[key] < 0) {
        e->name_index[key] = (int32_t)e->n_names;
        e->names[e->n_names++] = key;
    }
    return (uint32_t)e->name_index[key];
}

static void emit_children(diff_emit_t *e, uint32_t n, uint32_t level, int64_t xl, int64_t xr)
{
    const diff_t *d = e->d;
    diff_entry_t other = {.node = DIFF_SYNTHETIC, .level = level + 1};
    for (uint32_t j = d->kids.start[n]; j < d->kids.start[n + 1]; j++) {
        uint32_t c = d->kids.list[j];
        int64_t tl = d->side[0].total[c], tr = d->side[1].total[c];
        if (tl >= d->min_val || tr >= d->min_val) {
            emit_push(e, &(diff_entry_t){.node = c, .level = level + 1, .x = {xl, xr}});
            xl += tl;
            xr += tr;
        } else {
            other.other[0] += tl;
            other.other[1] += tr;
        }
    }
    if (other.other[0] || other.other[1]) {
        other.x[0] = xl;
        other.x[1] = xr;
        emit_push(e, &other);
    }
}

static void emit_node(diff_emit_t *e, const diff_entry_t *en)
{
    const diff_t *d = e->d;
    bool synthetic = en->node == DIFF_SYNTHETIC;
    int64_t tot[2], self[2];
    for (int k = 0; k < 2; k++) {
        tot[k] = synthetic ? en->other[k] : d->side[k].total[en->node];
        self[k] = synthetic ? en->other[k] : d->side[k].self[en->node];
        if (self[k] > e->max_self)
            e->max_self = self[k];
    }
    uint32_t key = synthetic                   ? FT_NAME_OTHER
                   : en->node == LC_FTREE_ROOT ? d->root_key
                                               : d->u->nodes[en->node].name;
    if (tot[0] < d->min_val && tot[1] < d->min_val && key != FT_NAME_OTHER)
        return;
    int64_t v[7] = {en->x[0], tot[0], self[0], en->x[1], tot[1], self[1], emit_name(e, key)};
    emit_append(e, en->level, v);
    if (!synthetic)
        emit_children(e, en->node, en->level, en->x[0] + self[0], en->x[1] + self[1]);
}

/* Reverses a level's 7-wide entries and delta-encodes both x columns. */
static void level_finish(int64_t *v, size_t n)
{
    for (size_t i = 0, j = n - 7; i < j; i += 7, j -= 7) {
        int64_t tmp[7];
        memcpy(tmp, &v[i], sizeof(tmp));
        memcpy(&v[i], &v[j], sizeof(tmp));
        memcpy(&v[j], tmp, sizeof(tmp));
    }
    for (size_t col = 0; col <= 3; col += 3) {
        int64_t prev_end = 0;
        for (size_t i = col; i < n; i += 7) {
            int64_t abs_x = v[i];
            v[i] = abs_x - prev_end;
            prev_end = abs_x + v[i + 1];
        }
    }
}

static int emit_export(diff_emit_t *e, lc_arena_t *arena, Querier__V1__FlameGraphDiff *fg)
{
    char **names = lc_arena_calloc(arena, e->n_names + 1, sizeof(char *));
    Querier__V1__Level **levels = lc_arena_calloc(arena, e->n_levels + 1, sizeof(*levels));
    if (!names || !levels)
        return LC_ETOOBIG;
    for (size_t i = 0; i < e->n_names; i++) {
        size_t len;
        const char *s = i == 0 ? "total" : ft_name_str(e->d->u, e->names[i], &len);
        names[i] = lc_arena_strndup(arena, s, i == 0 ? 5 : len);
        if (!names[i])
            return LC_ETOOBIG;
    }
    for (size_t i = 0; i < e->n_levels; i++) {
        const diff_level_t *l = &e->levels[i];
        level_finish(l->v, l->n);
        levels[i] = lc_arena_calloc(arena, 1, sizeof(**levels));
        int64_t *v = lc_arena_alloc(arena, l->n * sizeof(int64_t));
        if (!levels[i] || !v)
            return LC_ETOOBIG;
        *levels[i] = (Querier__V1__Level)QUERIER__V1__LEVEL__INIT;
        memcpy(v, l->v, l->n * sizeof(int64_t));
        levels[i]->values = v;
        levels[i]->n_values = l->n;
    }
    fg->names = names;
    fg->n_names = e->n_names;
    fg->levels = levels;
    fg->n_levels = e->n_levels;
    fg->max_self = e->max_self;
    return 0;
}

static void emit_fini(diff_emit_t *e)
{
    lc_free(e->stack);
    for (size_t i = 0; i < e->n_levels; i++)
        lc_free(e->levels[i].v);
    lc_free(e->levels);
    lc_free(e->name_index);
    lc_free(e->names);
}

static void diff_fini(diff_t *d)
{
    for (int k = 0; k < 2; k++) {
        lc_free(d->side[k].self);
        lc_free(d->side[k].total);
    }
    if (d->kids.list)
        lc_query__kids_fini(&d->kids);
    lc_ftree_free(d->u);
}

int lc_ftree_diff(const lc_ftree_t *left, const lc_ftree_t *right, int64_t max_nodes,
                  lc_arena_t *arena, Querier__V1__FlameGraphDiff **out)
{
    diff_t d = {0};
    int rc = diff_build(&d, left, right);
    Querier__V1__FlameGraphDiff *fg = rc ? NULL : lc_arena_calloc(arena, 1, sizeof(*fg));
    if (rc == 0 && !fg)
        rc = LC_ETOOBIG;
    if (rc == 0) {
        d.min_val = diff_min_value(&d, max_nodes);
        diff_emit_t e = {.d = &d};
        e.name_index = lc_xmalloc(d.u->n_names * sizeof(int32_t));
        memset(e.name_index, 0xff, d.u->n_names * sizeof(int32_t));
        e.names = lc_xmalloc(d.u->n_names * sizeof(uint32_t));
        emit_push(&e, &(diff_entry_t){.node = LC_FTREE_ROOT});
        while (e.sn > 0) {
            diff_entry_t en = e.stack[--e.sn];
            emit_node(&e, &en);
        }
        *fg = (Querier__V1__FlameGraphDiff)QUERIER__V1__FLAME_GRAPH_DIFF__INIT;
        rc = emit_export(&e, arena, fg);
        fg->leftticks = d.side[0].total[0];
        fg->rightticks = d.side[1].total[0];
        fg->total = fg->leftticks + fg->rightticks;
        emit_fini(&e);
    }
    diff_fini(&d);
    if (rc == 0)
        *out = fg;
    return rc;
}
