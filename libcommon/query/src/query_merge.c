/*
 * query_merge.c — the hot path (ARCHITECTURE.md §3): per block, sum the
 * matching profiles' sample values into a dense array indexed by stack node
 * id, derive subtree totals with one reverse pass (a child's id is larger than
 * its parent's), then fold the block's stack tree into the global name tree.
 *
 * Folding maps each block node to a name-tree node: the parent's mapping
 * followed by the frames of the node's location, root side first (a location's
 * lines[n-1] .. lines[0]; lines[0] is the innermost inlined function). A
 * location without lines (not symbolized) is one frame named
 * "module+0xoffset" (lc_block_frame_name), so stored stacks never vanish
 * from a flame graph. Nodes whose subtree total is 0 are skipped, so the work is
 * proportional to the part of the block the query touches. Frame names are
 * resolved once per location per block and interned in the name tree, so
 * blocks with different string ids still share names.
 *
 * Negative summed self values are dropped, as Pyroscope's tree insertion drops
 * values <= 0 (the encodings carry unsigned values).
 */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

/* ------------------------------------------------------------ block sums */

static int sums_series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                          const lc_labels_t *labels, void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(tenant);
    LC_UNUSED(labels);
    qm_sums_t *s = data;
    s->series = lc_xgrow(s->series, &s->series_cap, s->n_series + 1, sizeof(*s->series));
    s->series[s->n_series++] = series_id;
    return 0;
}

typedef struct sums_walk_s {
    qm_sums_t *s;
    uint32_t node_count;
    const lc_query_t *q;
} sums_walk_t;

bool lc_query__span_selected(const lc_query_t *q, uint64_t span)
{
    if (!q->span_ids)
        return true;
    size_t lo = 0, hi = q->n_span_ids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q->span_ids[mid] < span)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < q->n_span_ids && q->span_ids[lo] == span;
}

bool lc_query_profile_selected(const lc_query_t *q, const lc_stored_profile_t *p)
{
    if (!q->profile_ids)
        return true;
    if (!p->has_profile_id)
        return false;
    size_t lo = 0, hi = q->n_profile_ids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(q->profile_ids[mid], p->profile_id, LC_STORE_PROFILE_ID_BYTES) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < q->n_profile_ids &&
           memcmp(q->profile_ids[lo], p->profile_id, LC_STORE_PROFILE_ID_BYTES) == 0;
}

/* Makes self[] cover node ids [0, need), zero-filled. */
static void sums_reserve(qm_sums_t *s, size_t need)
{
    size_t old = s->self_cap;
    if (need <= old)
        return;
    s->self = lc_xgrow(s->self, &s->self_cap, need, sizeof(*s->self));
    memset(s->self + old, 0, (s->self_cap - old) * sizeof(*s->self));
}

static int sums_profile_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    sums_walk_t *w = data;
    qm_sums_t *s = w->s;
    if (!lc_query_profile_selected(w->q, p))
        return 0;
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    for (;;) {
        uint32_t node;
        int64_t value;
        uint64_t span;
        int rc = lc_sample_iter_next(&it, &node, &value, &span);
        if (rc != 1)
            return rc;
        if (node >= w->node_count)
            return LC_ECORRUPT;
        if (!lc_query__span_selected(w->q, span))
            continue;
        if (node >= s->n) {
            sums_reserve(s, (size_t)node + 1);
            s->n = node + 1;
        }
        s->self[node] += value;
    }
}

/* Loads parents/locations of nodes [0, n) and checks parent < child. */
static int sums_load_nodes(lc_block_t *b, qm_sums_t *s)
{
    s->parents = lc_xgrow(s->parents, &s->nodes_cap, s->n, sizeof(*s->parents));
    s->locations = lc_xrealloc(s->locations, s->nodes_cap * sizeof(*s->locations));
    int rc = lc_block_nodes(b, s->parents, s->locations, s->n);
    for (uint32_t i = 1; rc == 0 && i < s->n; i++) {
        if (s->parents[i] >= i)
            rc = LC_ECORRUPT;
    }
    return rc;
}

/* Clears the self values of nodes outside the call site. */
static int sums_callsite(lc_block_t *b, const lc_query_t *q, qm_sums_t *s)
{
    uint8_t *keep = lc_xmalloc(s->n);
    int rc = lc_query__callsite_mark(b, q, s->parents, s->locations, s->n, keep);
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        if (!keep[i])
            s->self[i] = 0;
    }
    lc_free(keep);
    return rc;
}

/* Whether a series' summary gives exactly what its profiles in range would:
 * the range holds the whole block and nothing narrows below the series
 * (span and profile-id selectors need each sample's or profile's id, which a
 * summary does not keep; a call site only clears nodes, so it still works). */
static bool sums_use_summaries(lc_block_t *b, const lc_query_t *q)
{
    return !q->no_summaries && !q->span_ids && !q->profile_ids &&
           lc_block_covers(b, q->start_ns, q->end_ns);
}

/* Adds one series: its summary when allowed and present, else its profiles. */
static int sums_series(lc_block_t *b, const lc_query_t *q, bool summaries, uint32_t series,
                       sums_walk_t *w)
{
    if (summaries) {
        lc_stored_profile_t p;
        int rc = lc_block_summary(b, series, &p);
        if (rc == 0)
            return sums_profile_cb(b, &p, w);
        if (rc != LC_ENOTFOUND)
            return rc;
    }
    return lc_block_profiles(b, series, q->start_ns, q->end_ns, sums_profile_cb, w);
}

int lc_query__block_sum(lc_block_t *b, const lc_query_t *q, qm_sums_t *s)
{
    if (s->n)
        memset(s->self, 0, s->n * sizeof(*s->self));
    s->n = 0;
    s->n_series = 0;
    int rc = lc_block_series(b, q->tenants, q->n_tenants, q->sel, sums_series_cb, s);
    sums_walk_t w = {.s = s, .node_count = lc_block_node_count(b), .q = q};
    bool summaries = sums_use_summaries(b, q);
    for (size_t i = 0; rc == 0 && i < s->n_series; i++)
        rc = sums_series(b, q, summaries, s->series[i], &w);
    if (rc == 0 && s->n > 0)
        rc = sums_load_nodes(b, s);
    if (rc == 0 && s->n > 0 && q->n_call_site)
        rc = sums_callsite(b, q, s);
    return rc;
}

void lc_query__sums_fini(qm_sums_t *s)
{
    lc_free(s->self);
    lc_free(s->parents);
    lc_free(s->locations);
    lc_free(s->series);
    *s = (qm_sums_t){0};
}

int lc_query__fail(lc_status_t *st, int rc, const char *what)
{
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "%s: the result passes ember's size caps; narrow the query", what);
    return lc_status_set(st, LC_CODE_INTERNAL, "%s: %s", what, lc_strerror(rc));
}

/* ---------------------------------------------------- per-block symbols */

/* Location id -> frame names (ids in the name tree), root side first. */
typedef struct qm_frames_s {
    uint32_t *loc_off; /* by location id: offset into frames + 1; 0 = not resolved */
    uint32_t *loc_len;
    size_t n_locs;       /* valid ids are 1 .. n_locs */
    uint32_t *func_name; /* by function id: name id + 1; 0 = not resolved */
    size_t n_funcs;
    uint32_t *frames;
    size_t n_frames, frames_cap;
} qm_frames_t;

static int frames_init(lc_block_t *b, qm_frames_t *f)
{
    lc_block_info_t info;
    int rc = lc_block_info(b, &info);
    if (rc)
        return rc;
    if (info.locations >= UINT32_MAX || info.functions >= UINT32_MAX)
        return LC_ECORRUPT;
    *f = (qm_frames_t){.n_locs = info.locations, .n_funcs = info.functions};
    f->loc_off = lc_xcalloc(f->n_locs + 1, sizeof(uint32_t));
    f->loc_len = lc_xcalloc(f->n_locs + 1, sizeof(uint32_t));
    f->func_name = lc_xcalloc(f->n_funcs + 1, sizeof(uint32_t));
    return 0;
}

static void frames_fini(qm_frames_t *f)
{
    lc_free(f->loc_off);
    lc_free(f->loc_len);
    lc_free(f->func_name);
    lc_free(f->frames);
}

static int function_name(lc_block_t *b, lc_ftree_t *t, qm_frames_t *f, uint32_t fid, uint32_t *name)
{
    if (fid == 0 || fid > f->n_funcs)
        return LC_ECORRUPT;
    if (f->func_name[fid]) {
        *name = f->func_name[fid] - 1;
        return 0;
    }
    lc_store_function_t fn;
    const char *s;
    size_t len;
    int rc = lc_block_function(b, fid, &fn);
    if (rc == 0)
        rc = lc_block_string(b, fn.name, &s, &len);
    if (rc == 0)
        rc = lc_ftree_name(t, s, len, name);
    if (rc == 0)
        f->func_name[fid] = *name + 1;
    return rc;
}

/* Frame j of a location without lines: a function the symbolizer found, or
 * "module+0xoffset" (lc/frame_name.h). */
static int address_name(lc_block_t *b, lc_ftree_t *t, const lc_store_location_t *l, size_t j,
                        uint32_t *name)
{
    char scratch[LC_FRAME_NAME_MAX];
    const char *s;
    size_t len;
    int rc = lc_block_frame_name(b, l, j, scratch, &s, &len);
    return rc ? rc : lc_ftree_name(t, s, len, name);
}

/* Whether the reader's symbolizer names a location stored without lines:
 * its frames are then marked in the name tree, for the UI (lc/query.h). */
static bool location_symbolized(lc_block_t *b, const lc_store_location_t *l)
{
    lc_symbols_t sy;
    return l->n_lines == 0 && lc_block_symbols(b, l, &sy) == 0 && sy.n > 0;
}

static int location_frames(lc_block_t *b, lc_ftree_t *t, qm_frames_t *f, uint32_t loc,
                           const uint32_t **frames, uint32_t *n)
{
    if (loc == 0 || loc > f->n_locs)
        return LC_ECORRUPT;
    if (!f->loc_off[loc]) {
        lc_store_location_t l;
        int rc = lc_block_location(b, loc, &l);
        if (rc)
            return rc;
        size_t n_frames = lc_block_frame_count(b, &l);
        if (f->n_frames + n_frames >= UINT32_MAX)
            return LC_ETOOBIG;
        f->frames = lc_xgrow(f->frames, &f->frames_cap, f->n_frames + n_frames, sizeof(*f->frames));
        bool symbolized = location_symbolized(b, &l);
        for (size_t j = 0; j < n_frames; j++) {
            uint32_t name;
            rc = l.n_lines ? function_name(b, t, f, l.lines[l.n_lines - 1 - j].function_id, &name)
                           : address_name(b, t, &l, j, &name);
            if (rc)
                return rc;
            if (symbolized)
                lc_ftree_mark_symbolized(t, name);
            f->frames[f->n_frames + j] = name;
        }
        f->loc_off[loc] = (uint32_t)f->n_frames + 1;
        f->loc_len[loc] = (uint32_t)n_frames;
        f->n_frames += n_frames;
    }
    *frames = f->frames + f->loc_off[loc] - 1;
    *n = f->loc_len[loc];
    return 0;
}

/* ------------------------------------------------------------------ fold */

typedef struct qm_fold_s {
    int64_t *total;    /* subtree totals of the block's nodes */
    uint32_t *ft_node; /* block node -> name-tree node */
    size_t cap;
} qm_fold_t;

/* Subtree totals; returns how many nodes have one (an estimate of the name
 * tree nodes the block may add). */
static size_t fold_totals(const qm_sums_t *s, qm_fold_t *fo)
{
    if (s->n > fo->cap) {
        fo->total = lc_xrealloc(fo->total, s->n * sizeof(*fo->total));
        fo->ft_node = lc_xrealloc(fo->ft_node, s->n * sizeof(*fo->ft_node));
        fo->cap = s->n;
    }
    for (uint32_t i = 0; i < s->n; i++)
        fo->total[i] = s->self[i] > 0 ? s->self[i] : 0;
    for (uint32_t i = s->n - 1; i > 0; i--)
        fo->total[s->parents[i]] += fo->total[i];
    size_t live = 0;
    for (uint32_t i = 1; i < s->n; i++)
        live += fo->total[i] != 0;
    return live;
}

static int fold_block(lc_block_t *b, const qm_sums_t *s, qm_fold_t *fo, lc_ftree_t *t)
{
    qm_frames_t f;
    int rc = frames_init(b, &f);
    if (rc)
        return rc;
    lc_query__ft_reserve(t, fold_totals(s, fo));
    fo->ft_node[0] = LC_FTREE_ROOT;
    if (s->self[0] > 0)
        lc_ftree_add_self(t, LC_FTREE_ROOT, s->self[0]);
    for (uint32_t i = 1; rc == 0 && i < s->n; i++) {
        if (fo->total[i] == 0)
            continue;
        const uint32_t *frames;
        uint32_t n_frames, cur = fo->ft_node[s->parents[i]];
        rc = location_frames(b, t, &f, s->locations[i], &frames, &n_frames);
        for (uint32_t j = 0; rc == 0 && j < n_frames; j++)
            rc = lc_ftree_child(t, cur, frames[j], &cur);
        fo->ft_node[i] = cur;
        if (rc == 0 && s->self[i] > 0)
            lc_ftree_add_self(t, cur, s->self[i]);
    }
    frames_fini(&f);
    return rc;
}

/* ------------------------------------------------------------- rollups */

/* A rollup window folded into the name tree: its nodes map to name-tree
 * nodes on first use (only the paths the matching series reach). */
typedef struct qm_rollup_s {
    lc_rollups_t *rs;
    size_t i;
    lc_rollup_tree_t tree;
    uint32_t *ft_node; /* by rollup node; UINT32_MAX = not mapped yet */
    uint32_t *name_id; /* by rollup name; UINT32_MAX = not interned yet */
    uint32_t *path;    /* scratch: unmapped ancestors */
    lc_ftree_t *t;
} qm_rollup_t;

static int rollup_name_id(qm_rollup_t *m, uint32_t name, uint32_t *out)
{
    if (m->name_id[name] == UINT32_MAX) {
        const char *s;
        size_t len;
        int rc = lc_rollup_name(m->rs, m->i, name, &s, &len);
        if (!rc)
            rc = lc_ftree_name(m->t, s, len, &m->name_id[name]);
        if (rc)
            return rc;
    }
    *out = m->name_id[name];
    return 0;
}

/* Maps a rollup node and its unmapped ancestors (parents have smaller ids). */
static int rollup_map(qm_rollup_t *m, uint32_t node)
{
    uint32_t n = 0;
    for (uint32_t x = node; m->ft_node[x] == UINT32_MAX; x = m->tree.parents[x])
        m->path[n++] = x;
    while (n--) {
        uint32_t x = m->path[n], name;
        int rc = rollup_name_id(m, m->tree.names[x], &name);
        if (!rc)
            rc = lc_ftree_child(m->t, m->ft_node[m->tree.parents[x]], name, &m->ft_node[x]);
        if (rc)
            return rc;
    }
    return 0;
}

static int rollup_series_cb(const lc_rollup_series_t *se, void *data)
{
    qm_rollup_t *m = data;
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, &se->sums);
    for (;;) {
        uint32_t node;
        int64_t value;
        int rc = lc_sample_iter_next(&it, &node, &value, NULL);
        if (rc != 1)
            return rc;
        if (node >= m->tree.n_nodes || value <= 0)
            return LC_ECORRUPT;
        rc = rollup_map(m, node);
        if (rc)
            return rc;
        lc_ftree_add_self(m->t, m->ft_node[node], value);
    }
}

static int merge_rollup(lc_rollups_t *rs, size_t i, const lc_query_t *q, lc_ftree_t *t)
{
    qm_rollup_t m = {.rs = rs, .i = i, .t = t};
    int rc = lc_rollup_tree(rs, i, &m.tree);
    if (rc)
        return rc;
    m.ft_node = lc_xmalloc(m.tree.n_nodes * sizeof(uint32_t));
    memset(m.ft_node, 0xff, m.tree.n_nodes * sizeof(uint32_t));
    m.ft_node[0] = LC_FTREE_ROOT;
    m.name_id = lc_xmalloc((m.tree.n_names + 1) * sizeof(uint32_t));
    memset(m.name_id, 0xff, (m.tree.n_names + 1) * sizeof(uint32_t));
    m.path = lc_xmalloc(m.tree.n_nodes * sizeof(uint32_t));
    rc = lc_rollup_series(rs, i, q->tenants, q->n_tenants, q->sel, rollup_series_cb, &m);
    lc_free(m.ft_node);
    lc_free(m.name_id);
    lc_free(m.path);
    return rc;
}

/* Rollups answer what summaries answer, except call sites (they keep names,
 * not locations). */
bool lc_query_merge_uses_rollups(const lc_query_t *q)
{
    return !q->no_summaries && !q->span_ids && !q->profile_ids && !q->n_call_site;
}

int lc_query_merge_tree(lc_store_reader_t *r, const lc_query_t *q, lc_ftree_t *dst, lc_status_t *st)
{
    qm_sums_t sums = {0};
    qm_fold_t fold = {0};
    lc_rollups_t *rs = NULL;
    int rc = r && lc_query_merge_uses_rollups(q)
                 ? lc_store_rollups_begin(r, q->start_ns, q->end_ns, &rs)
                 : 0;
    for (size_t i = 0; rc == 0 && rs && i < lc_rollups_count(rs); i++)
        rc = merge_rollup(rs, i, q, dst);
    for (size_t i = 0; rc == 0 && i < lc_query__blocks(r); i++) {
        if (rs && lc_rollups_cover_block(rs, i))
            continue;
        lc_block_t *b = lc_store_reader_block(r, i);
        rc = lc_query__block_sum(b, q, &sums);
        if (rc == 0 && sums.n > 0)
            rc = fold_block(b, &sums, &fold, dst);
        lc_block_drop_cache(b); /* long ranges: one block's symbols at a time */
    }
    lc_store_rollups_end(rs);
    lc_query__sums_fini(&sums);
    lc_free(fold.total);
    lc_free(fold.ft_node);
    return rc ? lc_query__fail(st, rc, "merging stack traces") : 0;
}

int lc_query_merge_nodes(lc_store_reader_t *r, const lc_query_t *q, lc_query_nodes_fn fn,
                         void *data, lc_status_t *st)
{
    qm_sums_t sums = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < lc_query__blocks(r); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        rc = lc_query__block_sum(b, q, &sums);
        if (rc == 0 && sums.n > 0) {
            lc_query_nodes_t nodes = {.block = b,
                                      .n = sums.n,
                                      .parents = sums.parents,
                                      .locations = sums.locations,
                                      .self = sums.self};
            rc = fn(&nodes, data, st);
        }
        lc_block_drop_cache(b); /* long ranges: one block's symbols at a time */
    }
    lc_query__sums_fini(&sums);
    if (rc == -1)
        return -1; /* fn set st */
    return rc ? lc_query__fail(st, rc, "merging stack traces") : 0;
}
