/*
 * query_flame.c — emitting a name tree: the flame graph (pyroscope-api.md
 * §5.4), max_nodes truncation (§5.5) and tree bytes (§5.7), plus reading tree
 * bytes back.
 *
 * Byte-for-byte compatibility with Pyroscope depends on visiting nodes in its
 * order, so this file follows its traversals exactly: an explicit stack,
 * siblings pushed in ascending byte-wise name order (popped descending), names
 * indexed on first visit, each level collected in pop order and reversed.
 * Siblings are ordered once per emission: names are ranked by one sort, then
 * two counting sorts lay every parent's children out by rank (CSR), so the
 * cost is O(nodes + names log names) rather than a sort per sibling group.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

#define FT_SYNTHETIC UINT32_MAX /* stack entry for a truncation "other" node */

static int name_rank_cmp(const void *a, const void *b, void *data)
{
    const lc_ftree_t *t = data;
    size_t la, lb;
    const char *sa = ft_name_str(t, *(const uint32_t *)a, &la);
    const char *sb = ft_name_str(t, *(const uint32_t *)b, &lb);
    return ft_bytes_cmp(sa, la, sb, lb);
}

static uint32_t *names_rank(const lc_ftree_t *t)
{
    uint32_t *order = lc_xmalloc(t->n_names * sizeof(uint32_t));
    for (size_t i = 0; i < t->n_names; i++)
        order[i] = (uint32_t)i;
    qsort_r(order, t->n_names, sizeof(uint32_t), name_rank_cmp, (void *)t);
    uint32_t *rank = lc_xmalloc(t->n_names * sizeof(uint32_t));
    for (size_t i = 0; i < t->n_names; i++)
        rank[order[i]] = (uint32_t)i;
    lc_free(order);
    return rank;
}

/* Non-root node ids ordered by the rank of their name (counting sort). */
static uint32_t *nodes_by_rank(const lc_ftree_t *t, const uint32_t *rank)
{
    uint32_t *count = lc_xcalloc(t->n_names + 1, sizeof(uint32_t));
    for (size_t i = 1; i < t->n_nodes; i++)
        count[rank[t->nodes[i].name] + 1]++;
    for (size_t r = 0; r < t->n_names; r++)
        count[r + 1] += count[r];
    uint32_t *order = lc_xmalloc(t->n_nodes * sizeof(uint32_t));
    for (size_t i = 1; i < t->n_nodes; i++)
        order[count[rank[t->nodes[i].name]]++] = (uint32_t)i;
    lc_free(count);
    return order;
}

void lc_query__kids_build(const lc_ftree_t *t, ft_kids_t *k)
{
    size_t n = t->n_nodes;
    k->rank = names_rank(t);
    k->start = lc_xcalloc(n + 1, sizeof(uint32_t));
    k->list = lc_xmalloc(n * sizeof(uint32_t));
    for (size_t i = 1; i < n; i++)
        k->start[t->nodes[i].parent + 1]++;
    for (size_t p = 0; p < n; p++)
        k->start[p + 1] += k->start[p];
    uint32_t *cursor = lc_xmalloc(n * sizeof(uint32_t));
    memcpy(cursor, k->start, n * sizeof(uint32_t));
    uint32_t *order = nodes_by_rank(t, k->rank);
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t c = order[i];
        k->list[cursor[t->nodes[c].parent]++] = c;
    }
    lc_free(order);
    lc_free(cursor);
}

void lc_query__kids_fini(ft_kids_t *k)
{
    lc_free(k->rank);
    lc_free(k->start);
    lc_free(k->list);
}

/* ---------------------------------------------------------- min-heap walk */

void lc_query__heap_push(int64_t *h, size_t *n, int64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

void lc_query__heap_pop(int64_t *h, size_t *n)
{
    int64_t v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = v;
}

/* The smallest total a node needs to be emitted: the minimum of a heap of the
 * max_nodes largest totals met by a DFS that only descends into admitted
 * nodes (Pyroscope's minValue; approximate by design). */
static int64_t ft_min_value(const lc_ftree_t *t, const ft_kids_t *k, int64_t max_nodes)
{
    if (max_nodes < 1 || (int64_t)(t->n_nodes - 1) <= max_nodes)
        return 0;
    size_t cap = (size_t)max_nodes;
    int64_t *heap = lc_xmalloc(cap * sizeof(int64_t));
    uint32_t *stack = lc_xmalloc(t->n_nodes * sizeof(uint32_t));
    size_t hn = 0, sn = 0;
    for (uint32_t j = k->start[0]; j < k->start[1]; j++)
        stack[sn++] = k->list[j];
    while (sn > 0) {
        uint32_t n = stack[--sn];
        if (hn >= cap) {
            if (t->total[n] <= heap[0])
                continue;
            lc_query__heap_pop(heap, &hn);
        }
        lc_query__heap_push(heap, &hn, t->total[n]);
        for (uint32_t j = k->start[n]; j < k->start[n + 1]; j++)
            stack[sn++] = k->list[j];
    }
    int64_t min = hn < cap ? 0 : heap[0];
    lc_free(heap);
    lc_free(stack);
    return min;
}

/* ------------------------------------------------------------- flame graph */

typedef struct fg_entry_s {
    uint32_t node; /* FT_SYNTHETIC for "other" */
    uint32_t level;
    int64_t x;
    int64_t other; /* value of a synthetic node */
} fg_entry_t;

typedef struct fg_level_s {
    int64_t *v;
    size_t n, cap;
} fg_level_t;

typedef struct fg_state_s {
    lc_ftree_t *t;
    ft_kids_t kids;
    int64_t min_val;
    fg_entry_t *stack;
    size_t sn, scap;
    fg_level_t *levels;
    size_t n_levels, levels_cap;
    int32_t *name_index; /* name id -> index in names, -1 = not yet */
    uint32_t *names;     /* name ids in index order */
    size_t n_names;
    int64_t max_self;
} fg_state_t;

static void fg_push(fg_state_t *s, uint32_t node, uint32_t level, int64_t x, int64_t other)
{
    s->stack = lc_xgrow(s->stack, &s->scap, s->sn + 1, sizeof(*s->stack));
    s->stack[s->sn++] = (fg_entry_t){.node = node, .level = level, .x = x, .other = other};
}

static uint32_t fg_name_index(fg_state_t *s, uint32_t name)
{
    if (s->name_index[name] < 0) {
        s->name_index[name] = (int32_t)s->n_names;
        s->names[s->n_names++] = name;
    }
    return (uint32_t)s->name_index[name];
}

static void fg_append(fg_state_t *s, uint32_t level, int64_t x, int64_t total, int64_t self,
                      uint32_t name_index)
{
    if (level == s->n_levels) {
        s->levels = lc_xgrow(s->levels, &s->levels_cap, level + 1, sizeof(*s->levels));
        s->levels[s->n_levels++] = (fg_level_t){0};
    }
    fg_level_t *l = &s->levels[level];
    l->v = lc_xgrow(l->v, &l->cap, l->n + 4, sizeof(int64_t));
    l->v[l->n++] = x;
    l->v[l->n++] = total;
    l->v[l->n++] = self;
    l->v[l->n++] = name_index;
}

/* Pushes the kept children of n (ascending) and one "other" for the rest. */
static void fg_push_children(fg_state_t *s, uint32_t n, uint32_t level, int64_t x)
{
    const lc_ftree_t *t = s->t;
    int64_t other = 0;
    for (uint32_t j = s->kids.start[n]; j < s->kids.start[n + 1]; j++) {
        uint32_t c = s->kids.list[j];
        if (t->total[c] >= s->min_val && t->nodes[c].name != FT_NAME_OTHER) {
            fg_push(s, c, level + 1, x, 0);
            x += t->total[c];
        } else {
            other += t->total[c];
        }
    }
    if (other != 0)
        fg_push(s, FT_SYNTHETIC, level + 1, x, other);
}

static void fg_walk(fg_state_t *s)
{
    const lc_ftree_t *t = s->t;
    fg_push(s, LC_FTREE_ROOT, 0, 0, 0);
    while (s->sn > 0) {
        fg_entry_t e = s->stack[--s->sn];
        bool synthetic = e.node == FT_SYNTHETIC;
        int64_t self = synthetic ? e.other : t->nodes[e.node].self;
        int64_t total = synthetic ? e.other : t->total[e.node];
        uint32_t name = synthetic ? FT_NAME_OTHER : t->nodes[e.node].name;
        if (self > s->max_self)
            s->max_self = self;
        fg_append(s, e.level, e.x, total, self, fg_name_index(s, name));
        if (!synthetic)
            fg_push_children(s, e.node, e.level, e.x + self);
    }
}

/* Levels were filled in pop order (descending x): reverse, then delta-encode x. */
static void fg_level_finish(fg_level_t *l)
{
    for (size_t i = 0, j = l->n - 4; i < j; i += 4, j -= 4) {
        int64_t tmp[4];
        memcpy(tmp, &l->v[i], sizeof(tmp));
        memcpy(&l->v[i], &l->v[j], sizeof(tmp));
        memcpy(&l->v[j], tmp, sizeof(tmp));
    }
    int64_t prev_end = 0;
    for (size_t i = 0; i < l->n; i += 4) {
        int64_t abs_x = l->v[i];
        l->v[i] = abs_x - prev_end;
        prev_end = abs_x + l->v[i + 1];
    }
}

/* The indices of the emitted names the symbolizer gave (lc_ftree_mark_symbolized). */
static int fg_export_symbolized(const fg_state_t *s, lc_arena_t *arena, Querier__V1__FlameGraph *fg)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_names; i++)
        n += s->t->names[s->names[i]].symbolized;
    if (n == 0)
        return 0;
    int32_t *idx = lc_arena_alloc(arena, n * sizeof(int32_t));
    if (!idx)
        return LC_ETOOBIG;
    fg->symbolized = idx;
    for (size_t i = 0; i < s->n_names; i++) {
        if (s->t->names[s->names[i]].symbolized)
            idx[fg->n_symbolized++] = (int32_t)i;
    }
    return 0;
}

static int fg_export(fg_state_t *s, lc_arena_t *arena, Querier__V1__FlameGraph **out)
{
    Querier__V1__FlameGraph *fg = lc_arena_calloc(arena, 1, sizeof(*fg));
    char **names = lc_arena_calloc(arena, s->n_names, sizeof(char *));
    Querier__V1__Level **levels = lc_arena_calloc(arena, s->n_levels, sizeof(*levels));
    if (!fg || !names || !levels)
        return LC_ETOOBIG;
    *fg = (Querier__V1__FlameGraph)QUERIER__V1__FLAME_GRAPH__INIT;
    for (size_t i = 0; i < s->n_names; i++) {
        size_t len;
        const char *str = ft_name_str(s->t, s->names[i], &len);
        names[i] = lc_arena_strndup(arena, str, len);
        if (!names[i])
            return LC_ETOOBIG;
    }
    for (size_t i = 0; i < s->n_levels; i++) {
        fg_level_finish(&s->levels[i]);
        levels[i] = lc_arena_calloc(arena, 1, sizeof(**levels));
        int64_t *v = lc_arena_alloc(arena, s->levels[i].n * sizeof(int64_t));
        if (!levels[i] || !v)
            return LC_ETOOBIG;
        *levels[i] = (Querier__V1__Level)QUERIER__V1__LEVEL__INIT;
        memcpy(v, s->levels[i].v, s->levels[i].n * sizeof(int64_t));
        levels[i]->values = v;
        levels[i]->n_values = s->levels[i].n;
    }
    fg->names = names;
    fg->n_names = s->n_names;
    if (fg_export_symbolized(s, arena, fg))
        return LC_ETOOBIG;
    fg->levels = levels;
    fg->n_levels = s->n_levels;
    fg->total = s->t->total[0];
    fg->max_self = s->max_self;
    *out = fg;
    return 0;
}

static void fg_state_fini(fg_state_t *s)
{
    lc_query__kids_fini(&s->kids);
    lc_free(s->stack);
    for (size_t i = 0; i < s->n_levels; i++)
        lc_free(s->levels[i].v);
    lc_free(s->levels);
    lc_free(s->name_index);
    lc_free(s->names);
}

int lc_ftree_flamegraph(lc_ftree_t *t, int64_t max_nodes, lc_arena_t *arena,
                        Querier__V1__FlameGraph **out)
{
    fg_state_t s = {.t = t};
    lc_query__ft_totals(t);
    lc_query__kids_build(t, &s.kids);
    s.min_val = ft_min_value(t, &s.kids, max_nodes);
    s.name_index = lc_xmalloc(t->n_names * sizeof(int32_t));
    memset(s.name_index, 0xff, t->n_names * sizeof(int32_t));
    s.names = lc_xmalloc(t->n_names * sizeof(uint32_t));
    fg_walk(&s);
    int rc = fg_export(&s, arena, out);
    fg_state_fini(&s);
    return rc;
}

/* -------------------------------------------------------------- tree bytes */

typedef struct tb_entry_s {
    uint32_t node; /* FT_SYNTHETIC for a new "other" node */
    int64_t extra; /* truncated value added to this node's self */
} tb_entry_t;

typedef struct tb_state_s {
    lc_ftree_t *t;
    ft_kids_t kids;
    int64_t min_val;
    tb_entry_t *stack;
    size_t sn, scap;
    lc_buf_t *out;
} tb_state_t;

static void tb_push(tb_state_t *s, uint32_t node, int64_t extra)
{
    s->stack = lc_xgrow(s->stack, &s->scap, s->sn + 1, sizeof(*s->stack));
    s->stack[s->sn++] = (tb_entry_t){.node = node, .extra = extra};
}

static int tb_write_node(tb_state_t *s, const tb_entry_t *e)
{
    const char *name = "";
    size_t len = 0;
    int64_t self = e->extra;
    if (e->node == FT_SYNTHETIC) {
        name = ft_name_str(s->t, FT_NAME_OTHER, &len);
    } else {
        self += s->t->nodes[e->node].self;
        if (e->node != LC_FTREE_ROOT)
            name = ft_name_str(s->t, s->t->nodes[e->node].name, &len);
    }
    int rc = lc_buf_put_uvarint(s->out, len);
    if (rc == 0)
        rc = lc_buf_append(s->out, name, len);
    if (rc == 0)
        rc = lc_buf_put_uvarint(s->out, (uint64_t)self);
    return rc;
}

/* Writes the child count of n and pushes its kept children (ascending, so
 * they pop descending), with truncated siblings folded into "other" at
 * "other"'s sorted position (added to a real "other" child if one exists). */
static int tb_children(tb_state_t *s, uint32_t n)
{
    const lc_ftree_t *t = s->t;
    uint32_t lo = s->kids.start[n], hi = s->kids.start[n + 1];
    int64_t other = 0;
    bool have_other = false;
    size_t kept = 0;
    for (uint32_t j = lo; j < hi; j++) {
        uint32_t c = s->kids.list[j];
        if (t->total[c] >= s->min_val || t->nodes[c].name == FT_NAME_OTHER) {
            kept++;
            have_other |= t->nodes[c].name == FT_NAME_OTHER;
        } else {
            other += t->total[c];
        }
    }
    bool synthetic = other > 0 && !have_other;
    int rc = lc_buf_put_uvarint(s->out, kept + synthetic);
    uint32_t other_rank = s->kids.rank[FT_NAME_OTHER];
    for (uint32_t j = lo; j < hi; j++) {
        uint32_t c = s->kids.list[j];
        bool is_other = t->nodes[c].name == FT_NAME_OTHER;
        if (synthetic && s->kids.rank[t->nodes[c].name] > other_rank) {
            tb_push(s, FT_SYNTHETIC, other);
            synthetic = false;
        }
        if (t->total[c] >= s->min_val || is_other)
            tb_push(s, c, is_other && other > 0 ? other : 0);
    }
    if (synthetic)
        tb_push(s, FT_SYNTHETIC, other);
    return rc;
}

static int tb_walk(tb_state_t *s)
{
    tb_push(s, LC_FTREE_ROOT, 0);
    while (s->sn > 0) {
        tb_entry_t e = s->stack[--s->sn];
        int rc = tb_write_node(s, &e);
        if (rc == 0)
            rc = e.node == FT_SYNTHETIC ? lc_buf_put_uvarint(s->out, 0) : tb_children(s, e.node);
        if (rc)
            return rc;
    }
    return 0;
}

int lc_ftree_write_tree(lc_ftree_t *t, int64_t max_nodes, lc_buf_t *out)
{
    if (t->n_nodes == 1 && t->nodes[0].self == 0)
        return 0;
    tb_state_t s = {.t = t, .out = out};
    lc_query__ft_totals(t);
    lc_query__kids_build(t, &s.kids);
    s.min_val = ft_min_value(t, &s.kids, max_nodes);
    int rc = tb_walk(&s);
    lc_query__kids_fini(&s.kids);
    lc_free(s.stack);
    return rc;
}

/* ------------------------------------------------------ reading tree bytes */

typedef struct tr_frame_s {
    uint32_t node;
    uint64_t remaining; /* children still to read */
} tr_frame_t;

/* Reads one node: name, self and child count. */
static int tr_node(lc_ftree_t *t, const uint8_t **p, const uint8_t *end, uint32_t parent,
                   bool is_root, uint32_t *node, uint64_t *n_children)
{
    uint64_t len, self;
    int rc = lc_uvarint_get(p, end, &len);
    if (rc == 0 && len > (uint64_t)(end - *p))
        rc = LC_ECORRUPT;
    if (rc)
        return rc;
    const char *name = (const char *)*p;
    *p += len;
    rc = lc_uvarint_get(p, end, &self);
    if (rc == 0)
        rc = lc_uvarint_get(p, end, n_children);
    /* Every child takes at least three bytes: a cheap bound on bogus counts. */
    if (rc == 0 && *n_children > (uint64_t)(end - *p) / 3)
        rc = LC_ECORRUPT;
    if (rc)
        return rc;
    *node = LC_FTREE_ROOT;
    if (!is_root) {
        uint32_t name_id;
        rc = lc_ftree_name(t, name, len, &name_id);
        if (rc == 0)
            rc = lc_ftree_child(t, parent, name_id, node);
    }
    if (rc == 0 && self)
        lc_ftree_add_self(t, *node, (int64_t)self);
    return rc;
}

int lc_ftree_read_tree(lc_ftree_t *t, const uint8_t *p, size_t len)
{
    if (len == 0)
        return 0;
    const uint8_t *end = p + len;
    tr_frame_t *stack = NULL;
    size_t sn = 0, scap = 0;
    uint32_t node;
    uint64_t n_children;
    int rc = tr_node(t, &p, end, LC_FTREE_ROOT, true, &node, &n_children);
    if (rc == 0 && n_children) {
        stack = lc_xgrow(stack, &scap, 1, sizeof(*stack));
        stack[sn++] = (tr_frame_t){.node = node, .remaining = n_children};
    }
    while (rc == 0 && sn > 0) {
        tr_frame_t *top = &stack[sn - 1];
        if (top->remaining == 0) {
            sn--;
            continue;
        }
        top->remaining--;
        rc = tr_node(t, &p, end, top->node, false, &node, &n_children);
        if (rc == 0 && n_children) {
            stack = lc_xgrow(stack, &scap, sn + 1, sizeof(*stack));
            stack[sn++] = (tr_frame_t){.node = node, .remaining = n_children};
        }
    }
    if (rc == 0 && p != end)
        rc = LC_ECORRUPT;
    lc_free(stack);
    return rc;
}
