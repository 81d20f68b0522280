/*
 * query_tree.c — the function-name tree every flame graph is built from.
 *
 * Names are interned once per tree (pool of bytes + open-addressing table), so
 * a node is 16 bytes: (parent, name, self). Children are found through a
 * second open-addressing table keyed by (parent, name) instead of per-node
 * child lists: inserting a path is then one probe per frame and needs no
 * sorted insertion. Sibling order (byte-wise by name) only matters when the
 * tree is emitted, and query_flame.c sorts once there. Node ids grow as nodes
 * are created, so a parent's id is always smaller than its children's and
 * totals come from one reverse pass.
 */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

#define FT_MIN_SLOTS 1024u

uint64_t lc_query__hash_bytes(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = lc_mix64(h ^ w) * 0x100000001b3ULL;
        b += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, b, len);
    return lc_mix64(h ^ tail ^ ((uint64_t)len << 56));
}

static uint32_t *slots_new(size_t n)
{
    return lc_xcalloc(n, sizeof(uint32_t));
}

/* ------------------------------------------------------------------ names */

static uint32_t name_probe(const lc_ftree_t *t, const char *s, size_t len, uint64_t h, size_t *slot)
{
    size_t i = h & t->name_mask;
    for (;;) {
        uint32_t v = t->name_slots[i];
        if (v == 0)
            break;
        const ft_name_t *n = &t->names[v - 1];
        if (n->hash == (uint32_t)h && n->len == len && memcmp(t->pool + n->off, s, len) == 0)
            return v;
        i = (i + 1) & t->name_mask;
    }
    *slot = i;
    return 0;
}

static void names_rehash(lc_ftree_t *t)
{
    size_t n = (t->name_mask + 1) * 2;
    lc_free(t->name_slots);
    t->name_slots = slots_new(n);
    t->name_mask = n - 1;
    for (size_t id = 0; id < t->n_names; id++) {
        size_t i = t->names[id].hash & t->name_mask;
        while (t->name_slots[i])
            i = (i + 1) & t->name_mask;
        t->name_slots[i] = (uint32_t)id + 1;
    }
}

int lc_ftree_name(lc_ftree_t *t, const char *s, size_t len, uint32_t *id)
{
    uint64_t h = lc_query__hash_bytes(s, len);
    size_t slot = 0;
    uint32_t v = name_probe(t, s, len, h, &slot);
    if (v) {
        *id = v - 1;
        return 0;
    }
    if (t->pool_len + len > LC_FTREE_MAX_NAME_BYTES || t->n_names >= UINT32_MAX - 1)
        return LC_ETOOBIG;
    t->pool = lc_xgrow(t->pool, &t->pool_cap, t->pool_len + len + 1, 1);
    memcpy(t->pool + t->pool_len, s, len);
    t->names = lc_xgrow(t->names, &t->names_cap, t->n_names + 1, sizeof(*t->names));
    t->names[t->n_names] =
        (ft_name_t){.off = t->pool_len, .len = (uint32_t)len, .hash = (uint32_t)h};
    t->pool_len += len;
    t->name_slots[slot] = (uint32_t)t->n_names + 1;
    *id = (uint32_t)t->n_names++;
    /* The hash stored per name is only 32 bits; rehashing uses it, so the table
     * size must stay within 2^32 slots (it does: ids are uint32). */
    if (t->n_names * 2 > t->name_mask + 1)
        names_rehash(t);
    return 0;
}

void lc_ftree_mark_symbolized(lc_ftree_t *t, uint32_t name)
{
    t->names[name].symbolized = 1;
}

int lc_ftree_mark_symbolized_name(lc_ftree_t *t, const char *s, size_t len)
{
    uint32_t id;
    int rc = lc_ftree_name(t, s, len, &id);
    if (rc == 0)
        lc_ftree_mark_symbolized(t, id);
    return rc;
}

int lc_ftree_symbolized_names(const lc_ftree_t *t, lc_arena_t *arena, char ***out, size_t *n)
{
    size_t marked = 0;
    for (size_t i = 0; i < t->n_names; i++)
        marked += t->names[i].symbolized;
    *out = NULL;
    *n = 0;
    if (marked == 0)
        return 0;
    char **names = lc_arena_calloc(arena, marked, sizeof(char *));
    if (!names)
        return LC_ETOOBIG;
    for (size_t i = 0; i < t->n_names; i++) {
        if (!t->names[i].symbolized)
            continue;
        size_t len;
        const char *s = ft_name_str(t, (uint32_t)i, &len);
        names[*n] = lc_arena_strndup(arena, s, len);
        if (!names[(*n)++])
            return LC_ETOOBIG;
    }
    *out = names;
    return 0;
}

/* ------------------------------------------------------------------ nodes */

static inline uint64_t child_hash(uint32_t parent, uint32_t name)
{
    return lc_mix64(((uint64_t)parent << 32) | name);
}

/* Rebuilds the child table with at least min_slots slots (at least double). */
static void children_rehash_to(lc_ftree_t *t, size_t min_slots)
{
    size_t n = (t->child_mask + 1) * 2;
    while (n < min_slots)
        n *= 2;
    ft_slot_t *old = t->child_slots;
    size_t old_n = t->child_mask + 1;
    t->child_slots = lc_xcalloc(n, sizeof(ft_slot_t));
    t->child_mask = n - 1;
    for (size_t k = 0; k < old_n; k++) {
        if (!old[k].id)
            continue;
        size_t i = child_hash(old[k].parent, old[k].name) & t->child_mask;
        while (t->child_slots[i].id)
            i = (i + 1) & t->child_mask;
        t->child_slots[i] = old[k];
    }
    lc_free(old);
}

int lc_ftree_child(lc_ftree_t *t, uint32_t parent, uint32_t name, uint32_t *out)
{
    size_t i = child_hash(parent, name) & t->child_mask;
    while (t->child_slots[i].id) {
        const ft_slot_t *sl = &t->child_slots[i];
        if (sl->parent == parent && sl->name == name) {
            *out = sl->id;
            return 0;
        }
        i = (i + 1) & t->child_mask;
    }
    if (t->n_nodes >= t->max_nodes)
        return LC_ETOOBIG;
    t->nodes = lc_xgrow(t->nodes, &t->nodes_cap, t->n_nodes + 1, sizeof(*t->nodes));
    uint32_t id = (uint32_t)t->n_nodes++;
    t->nodes[id] = (ft_node_t){.parent = parent, .name = name, .self = 0};
    t->child_slots[i] = (ft_slot_t){.parent = parent, .name = name, .id = id};
    t->totals_stale = true;
    if (t->n_nodes * 2 > t->child_mask + 1)
        children_rehash_to(t, 0);
    *out = id;
    return 0;
}

void lc_query__ft_reserve(lc_ftree_t *t, size_t extra)
{
    size_t want = t->n_nodes + extra;
    if (want > t->max_nodes)
        want = t->max_nodes;
    t->nodes = lc_xgrow(t->nodes, &t->nodes_cap, want, sizeof(*t->nodes));
    if (want * 2 > t->child_mask + 1)
        children_rehash_to(t, want * 2);
}

void lc_ftree_add_self(lc_ftree_t *t, uint32_t node, int64_t v)
{
    t->nodes[node].self += v;
    t->totals_stale = true;
}

/* ------------------------------------------------------------- lifecycle */

lc_ftree_t *lc_ftree_new(size_t max_nodes)
{
    lc_ftree_t *t = lc_xcalloc(1, sizeof(*t));
    t->max_nodes = max_nodes ? max_nodes : LC_FTREE_DEFAULT_MAX_NODES;
    if (t->max_nodes > UINT32_MAX - 1)
        t->max_nodes = UINT32_MAX - 1;
    t->name_slots = slots_new(FT_MIN_SLOTS);
    t->name_mask = FT_MIN_SLOTS - 1;
    t->child_slots = lc_xcalloc(FT_MIN_SLOTS, sizeof(ft_slot_t));
    t->child_mask = FT_MIN_SLOTS - 1;
    uint32_t total_id = 0, other_id = 0;
    /* Cannot fail: the table is empty and far below the caps. */
    (void)!lc_ftree_name(t, "total", 5, &total_id);
    (void)!lc_ftree_name(t, "other", 5, &other_id);
    t->nodes = lc_xgrow(NULL, &t->nodes_cap, 1024, sizeof(*t->nodes));
    t->nodes[0] = (ft_node_t){.parent = 0, .name = FT_NAME_TOTAL, .self = 0};
    t->n_nodes = 1;
    t->totals_stale = true;
    return t;
}

void lc_ftree_free(lc_ftree_t *t)
{
    if (!t)
        return;
    lc_free(t->pool);
    lc_free(t->names);
    lc_free(t->name_slots);
    lc_free(t->nodes);
    lc_free(t->child_slots);
    lc_free(t->total);
    lc_free(t);
}

/* ------------------------------------------------------------ operations */

int lc_ftree_insert(lc_ftree_t *t, const char *const *frames, size_t n, int64_t v)
{
    if (v <= 0)
        return 0;
    uint32_t node = LC_FTREE_ROOT;
    for (size_t i = 0; i < n; i++) {
        uint32_t name;
        int rc = lc_ftree_name(t, frames[i], strlen(frames[i]), &name);
        if (rc == 0)
            rc = lc_ftree_child(t, node, name, &node);
        if (rc)
            return rc;
    }
    lc_ftree_add_self(t, node, v);
    return 0;
}

int lc_ftree_merge(lc_ftree_t *dst, const lc_ftree_t *src)
{
    uint32_t *name_map = lc_xmalloc(src->n_names * sizeof(uint32_t));
    uint32_t *node_map = lc_xmalloc(src->n_nodes * sizeof(uint32_t));
    int rc = 0;
    for (size_t i = 0; i < src->n_names && rc == 0; i++) {
        size_t len;
        const char *s = ft_name_str(src, (uint32_t)i, &len);
        rc = lc_ftree_name(dst, s, len, &name_map[i]);
        if (rc == 0 && src->names[i].symbolized)
            lc_ftree_mark_symbolized(dst, name_map[i]);
    }
    node_map[0] = LC_FTREE_ROOT;
    for (size_t i = 1; i < src->n_nodes && rc == 0; i++) {
        const ft_node_t *n = &src->nodes[i];
        rc = lc_ftree_child(dst, node_map[n->parent], name_map[n->name], &node_map[i]);
    }
    for (size_t i = 0; i < src->n_nodes && rc == 0; i++) {
        if (src->nodes[i].self)
            lc_ftree_add_self(dst, node_map[i], src->nodes[i].self);
    }
    lc_free(name_map);
    lc_free(node_map);
    return rc;
}

void lc_query__ft_totals(lc_ftree_t *t)
{
    if (!t->totals_stale)
        return;
    t->total = lc_xgrow(t->total, &t->total_cap, t->n_nodes, sizeof(*t->total));
    for (size_t i = 0; i < t->n_nodes; i++)
        t->total[i] = t->nodes[i].self;
    for (size_t i = t->n_nodes - 1; i > 0; i--)
        t->total[t->nodes[i].parent] += t->total[i];
    t->totals_stale = false;
}

size_t lc_ftree_node_count(const lc_ftree_t *t)
{
    return t->n_nodes;
}

int64_t lc_ftree_total(lc_ftree_t *t)
{
    lc_query__ft_totals(t);
    return t->total[0];
}
