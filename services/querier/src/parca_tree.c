/*
 * parca_tree.c — the call tree of Parca's reports (parca.md §4.3), built from
 * the merged pprof the back end answers (parca_report.c says which reports
 * read it; parca_fold.c builds the same tree without the merged pprof).
 *
 * The pprof's samples go into a call tree whose nodes are frames: one
 * (location, line) each, inlined lines as frames of their own, root first.
 * A frame is identified by its content (mapping file, build id, address,
 * function name, system name, file, line), interned; a location without
 * lines is one frame whose function name is "module+0xoffset"
 * (lc/frame_name.h), as in every other query path; unless the request
 * groups by location_address, address and line are left out, so a function
 * is one frame wherever in it the samples fell (Parca's default grouping,
 * by function name, and the size of Pyroscope's trees), so the two sides of a
 * diff (two pprofs with their own ids) meet in one tree: the compared side
 * adds to cumulative, flat and diff, the base side subtracts from diff only.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/frame_name.h"
#include "lc/hash.h"
#include "parca_tree_int.h"

/* ---------------------------------------------------------------- hashing */

static uint64_t parca_hash_bytes(const char *s, size_t n)
{
    return lc_hash64(s, n, 0);
}

static void parca_slots_grow(slots_t *s, uint64_t (*rehash)(const parca_tree_t *, uint32_t),
                             const parca_tree_t *t)
{
    size_t cap = s->cap ? s->cap * 2 : 1024;
    uint32_t *v = lc_xcalloc(cap, sizeof(*v));
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->v[i])
            continue;
        size_t j = rehash(t, s->v[i] - 1) & (cap - 1);
        while (v[j])
            j = (j + 1) & (cap - 1);
        v[j] = s->v[i];
    }
    lc_free(s->v);
    s->v = v;
    s->cap = cap;
}

static uint64_t string_hash(const parca_tree_t *t, uint32_t id)
{
    return parca_hash_bytes(t->strings[id], strlen(t->strings[id]));
}

static uint32_t intern_string(parca_tree_t *t, const char *s)
{
    if (!s || !*s)
        return 0;
    if ((t->string_slots.n + 1) * 2 > t->string_slots.cap)
        parca_slots_grow(&t->string_slots, string_hash, t);
    size_t n = strlen(s), mask = t->string_slots.cap - 1;
    for (size_t j = parca_hash_bytes(s, n) & mask;; j = (j + 1) & mask) {
        uint32_t v = t->string_slots.v[j];
        if (!v) {
            t->strings = lc_xgrow(t->strings, &t->cap_strings, t->n_strings + 1, sizeof(char *));
            t->strings[t->n_strings] = s;
            t->string_slots.v[j] = (uint32_t)t->n_strings + 1;
            t->string_slots.n++;
            return (uint32_t)t->n_strings++;
        }
        if (strcmp(t->strings[v - 1], s) == 0)
            return v - 1;
    }
}

/* A block string (bytes, not NUL-terminated) interned as the C string a
 * decoded pprof would hold (cut at a NUL byte); new ones are copied into the
 * tree's pool (the request arena). NO_FRAME when it is full. */
uint32_t parca_intern_bytes(parca_tree_t *t, const char *s, size_t len)
{
    len = strnlen(s, len);
    if (len == 0)
        return 0;
    if ((t->string_slots.n + 1) * 2 > t->string_slots.cap)
        parca_slots_grow(&t->string_slots, string_hash, t);
    size_t mask = t->string_slots.cap - 1;
    for (size_t j = parca_hash_bytes(s, len) & mask;; j = (j + 1) & mask) {
        uint32_t v = t->string_slots.v[j];
        if (v && strncmp(t->strings[v - 1], s, len) == 0 && t->strings[v - 1][len] == '\0')
            return v - 1;
        if (v)
            continue;
        char *copy = lc_arena_strndup(t->pool, s, len);
        if (!copy)
            return NO_FRAME;
        t->strings = lc_xgrow(t->strings, &t->cap_strings, t->n_strings + 1, sizeof(char *));
        t->strings[t->n_strings] = copy;
        t->string_slots.v[j] = (uint32_t)t->n_strings + 1;
        t->string_slots.n++;
        return (uint32_t)t->n_strings++;
    }
}

static uint64_t frame_key_hash(const frame_t *f)
{
    uint64_t h = lc_mix64(f->mapping_file ^ ((uint64_t)f->build_id << 32));
    h = lc_mix64(h ^ f->func ^ ((uint64_t)f->system_name << 32));
    h = lc_mix64(h ^ f->file ^ f->address);
    return lc_mix64(h ^ (uint64_t)f->line ^ ((uint64_t)f->start_line << 17));
}

static uint64_t frame_hash(const parca_tree_t *t, uint32_t id)
{
    return frame_key_hash(&t->frames[id]);
}

uint32_t parca_intern_frame(parca_tree_t *t, const frame_t *f)
{
    if ((t->frame_slots.n + 1) * 2 > t->frame_slots.cap)
        parca_slots_grow(&t->frame_slots, frame_hash, t);
    size_t mask = t->frame_slots.cap - 1;
    for (size_t j = frame_key_hash(f) & mask;; j = (j + 1) & mask) {
        uint32_t v = t->frame_slots.v[j];
        if (!v) {
            t->frames = lc_xgrow(t->frames, &t->cap_frames, t->n_frames + 1, sizeof(frame_t));
            t->frames[t->n_frames] = *f;
            t->frame_slots.v[j] = (uint32_t)t->n_frames + 1;
            t->frame_slots.n++;
            return (uint32_t)t->n_frames++;
        }
        if (memcmp(&t->frames[v - 1], f, sizeof(*f)) == 0)
            return v - 1;
    }
}

static uint64_t node_key(uint32_t parent, uint32_t frame)
{
    return lc_mix64(((uint64_t)parent << 32) | frame);
}

/* Makes room for `need` children in the node table (load at most 1/2). */
void parca_node_slots_reserve(node_slots_t *s, size_t need)
{
    if ((need + 1) * 2 <= s->cap)
        return;
    size_t cap = s->cap ? s->cap : 1024;
    while ((need + 1) * 2 > cap)
        cap *= 2;
    node_slot_t *v = lc_xcalloc(cap, sizeof(*v));
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->v[i].id)
            continue;
        size_t j = node_key(s->v[i].parent, s->v[i].frame) & (cap - 1);
        while (v[j].id)
            j = (j + 1) & (cap - 1);
        v[j] = s->v[i];
    }
    lc_free(s->v);
    s->v = v;
    s->cap = cap;
}

/* The child of parent for frame, created if new; NO_FRAME past the cap. */
uint32_t parca_child_of(parca_tree_t *t, uint32_t parent, uint32_t frame)
{
    parca_node_slots_reserve(&t->node_slots, t->node_slots.n + 1);
    size_t mask = t->node_slots.cap - 1;
    for (size_t j = node_key(parent, frame) & mask;; j = (j + 1) & mask) {
        node_slot_t *sl = &t->node_slots.v[j];
        if (sl->id && sl->parent == parent && sl->frame == frame)
            return sl->id;
        if (sl->id)
            continue;
        if (t->n_nodes >= PARCA_MAX_NODES)
            return NO_FRAME;
        t->nodes = lc_xgrow(t->nodes, &t->cap_nodes, t->n_nodes + 1, sizeof(node_t));
        node_t *p = &t->nodes[parent];
        uint32_t id = (uint32_t)t->n_nodes++;
        t->nodes[id] = (node_t){.parent = parent,
                                .frame = frame,
                                .first_child = NO_FRAME,
                                .next_sibling = p->first_child,
                                .depth = p->depth + 1};
        t->nodes[parent].first_child = id;
        if ((int32_t)t->nodes[id].depth > t->max_depth)
            t->max_depth = (int32_t)t->nodes[id].depth;
        *sl = (node_slot_t){parent, frame, id};
        t->node_slots.n++;
        return id;
    }
}

/* ------------------------------------------------------------------- tree */

parca_tree_t *parca_tree_new(bool by_address, lc_arena_t *strings)
{
    parca_tree_t *t = lc_xcalloc(1, sizeof(*t));
    t->by_address = by_address;
    t->pool = strings;
    t->strings = lc_xgrow(NULL, &t->cap_strings, 1, sizeof(char *));
    t->strings[0] = ""; /* id 0, never in the slots: intern_string answers it first */
    t->n_strings = 1;
    t->nodes = lc_xgrow(NULL, &t->cap_nodes, 1, sizeof(node_t));
    t->nodes[0] = (node_t){
        .parent = NO_FRAME, .frame = NO_FRAME, .first_child = NO_FRAME, .next_sibling = NO_FRAME};
    t->n_nodes = 1;
    return t;
}

void parca_tree_free(parca_tree_t *t)
{
    if (!t)
        return;
    lc_free(t->strings);
    lc_free(t->string_slots.v);
    lc_free(t->frames);
    lc_free(t->frame_slots.v);
    lc_free(t->nodes);
    lc_free(t->node_slots.v);
    lc_free(t);
}

static const char *pstr(const lc_pprof_t *p, int64_t i)
{
    return i > 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* The frames of one location, root side first (pprof lists inlined lines
 * callee first), appended to out. */
static size_t parca_location_frames(parca_tree_t *t, const lc_pprof_t *p,
                                    const lc_pprof_index_t *ix, uint64_t loc_id, uint32_t *out,
                                    size_t room)
{
    const Google__V1__Location *loc = lc_pprof_location(ix, loc_id);
    if (!loc || room == 0)
        return 0;
    const Google__V1__Mapping *m = loc->mapping_id ? lc_pprof_mapping(ix, loc->mapping_id) : NULL;
    frame_t f = {.mapping_file = m ? intern_string(t, pstr(p, m->filename)) : 0,
                 .build_id = m ? intern_string(t, pstr(p, m->build_id)) : 0,
                 .address = t->by_address || loc->n_line == 0 ? loc->address : 0};
    if (loc->n_line == 0) {
        char name[LC_FRAME_NAME_MAX];
        uint32_t func =
            parca_intern_bytes(t, name, lc_pprof_address_frame_name(p, m, loc->address, name));
        f.func = func == NO_FRAME ? 0 : func;
        out[0] = parca_intern_frame(t, &f);
        return 1;
    }
    size_t n = 0;
    for (size_t i = loc->n_line; i-- > 0 && n < room;) {
        const Google__V1__Line *l = loc->line[i];
        const Google__V1__Function *fn = lc_pprof_function(ix, l->function_id);
        f.func = fn ? intern_string(t, pstr(p, fn->name)) : 0;
        f.system_name = fn ? intern_string(t, pstr(p, fn->system_name)) : 0;
        f.file = fn ? intern_string(t, pstr(p, fn->filename)) : 0;
        f.start_line = fn ? fn->start_line : 0;
        f.line = t->by_address ? l->line : 0;
        out[n++] = parca_intern_frame(t, &f);
    }
    return n;
}

static bool cond_matches(const Parca__Query__V1alpha1__StringCondition *c, const char *s)
{
    size_t n;
    switch (c->condition_case) {
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_EQUAL:
        return strcmp(s, c->equal) == 0;
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_EQUAL:
        return strcmp(s, c->not_equal) != 0;
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_CONTAINS:
        return strstr(s, c->contains) != NULL;
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_CONTAINS:
        return strstr(s, c->not_contains) == NULL;
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_STARTS_WITH:
        n = strlen(c->starts_with);
        return strncmp(s, c->starts_with, n) == 0;
    case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_STARTS_WITH:
        n = strlen(c->not_starts_with);
        return strncmp(s, c->not_starts_with, n) != 0;
    default:
        return true;
    }
}

/* Whether a stack passes every filter: each condition needs one frame whose
 * function name satisfies it (or, excluding, none). */
static bool stack_passes(const parca_tree_t *t, const parca_filter_t *f, const uint32_t *frames,
                         size_t n)
{
    if (!f)
        return true;
    if (f->contains) {
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = strstr(t->strings[t->frames[frames[i]].func], f->contains) != NULL;
        if (!any)
            return false;
    }
    for (size_t c = 0; c < f->n_conds; c++) {
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = cond_matches(f->conds[c], t->strings[t->frames[frames[i]].func]);
        if (any == f->exclude[c])
            return false;
    }
    return true;
}

static int add_stack(parca_tree_t *t, const uint32_t *frames, size_t n, int64_t v, int sign,
                     lc_status_t *st)
{
    uint32_t cur = 0;
    int64_t cum = sign > 0 ? v : 0, d = sign * v;
    t->nodes[0].cum += cum;
    t->nodes[0].diff += d;
    for (size_t i = 0; i < n; i++) {
        cur = parca_child_of(t, cur, frames[i]);
        if (cur == NO_FRAME)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                                 "the report passes %zu call-tree nodes; narrow the query",
                                 PARCA_MAX_NODES);
        t->nodes[cur].cum += cum;
        t->nodes[cur].diff += d;
    }
    t->nodes[cur].flat += cum;
    t->nodes[cur].flat_diff += d;
    return 0;
}

/* The frames of every location, computed once per location id: merged
 * profiles repeat the same locations in thousands of samples. */
typedef struct loc_cache_s {
    uint32_t *off, *len; /* per location id; len UINT32_MAX = not yet */
    uint32_t *pool;
    size_t n_pool, cap_pool, max_id;
} loc_cache_t;

static void loc_cache_init(loc_cache_t *c, const lc_pprof_t *p)
{
    *c = (loc_cache_t){0};
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id > c->max_id)
            c->max_id = p->location[i]->id;
    if (c->max_id > 4 * p->n_location + 1024) {
        c->max_id = 0; /* sparse ids: no cache */
        return;
    }
    c->off = lc_xcalloc(c->max_id + 1, sizeof(uint32_t));
    c->len = lc_xcalloc(c->max_id + 1, sizeof(uint32_t));
    for (size_t i = 0; i <= c->max_id; i++)
        c->len[i] = UINT32_MAX;
}

static void loc_cache_fini(loc_cache_t *c)
{
    lc_free(c->off);
    lc_free(c->len);
    lc_free(c->pool);
}

/* The frames of loc_id appended at out (room left): from the cache, or
 * computed and cached. */
static size_t loc_frames_cached(parca_tree_t *t, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                                loc_cache_t *c, uint64_t loc_id, uint32_t *out, size_t room)
{
    if (loc_id == 0 || loc_id > c->max_id)
        return parca_location_frames(t, p, ix, loc_id, out, room);
    if (c->len[loc_id] == UINT32_MAX) {
        uint32_t tmp[LOC_MAX_LINES];
        size_t n = parca_location_frames(t, p, ix, loc_id, tmp, LOC_MAX_LINES);
        c->pool = lc_xgrow(c->pool, &c->cap_pool, c->n_pool + n, sizeof(uint32_t));
        memcpy(c->pool + c->n_pool, tmp, n * sizeof(uint32_t));
        c->off[loc_id] = (uint32_t)c->n_pool;
        c->len[loc_id] = (uint32_t)n;
        c->n_pool += n;
    }
    size_t n = c->len[loc_id] < room ? c->len[loc_id] : room;
    memcpy(out, c->pool + c->off[loc_id], n * sizeof(uint32_t));
    return n;
}

/* Sizes the node table once for the most nodes p can add (a frame per
 * location reference), so it is not rehashed on every doubling. */
static void presize_nodes(parca_tree_t *t, const lc_pprof_t *p)
{
    size_t refs = t->n_nodes;
    for (size_t i = 0; i < p->n_sample; i++)
        refs += p->sample[i]->n_location_id;
    if (refs > PARCA_MAX_NODES)
        refs = PARCA_MAX_NODES;
    parca_node_slots_reserve(&t->node_slots, refs);
}

int parca_tree_add(parca_tree_t *t, const lc_pprof_t *p, int sign, const parca_filter_t *f,
                   int64_t *total, int64_t *filtered, lc_status_t *st)
{
    lc_arena_t *a = lc_arena_new((size_t)256 << 20);
    lc_pprof_index_t *ix;
    int rc = lc_pprof_index_new(p, a, &ix);
    if (rc) {
        lc_arena_free(a);
        return qry_fail(st, rc, "indexing the merged profile");
    }
    loc_cache_t cache;
    loc_cache_init(&cache, p);
    presize_nodes(t, p);
    size_t cap = 0;
    uint32_t *frames = NULL;
    for (size_t s = 0; s < p->n_sample && rc == 0; s++) {
        const Google__V1__Sample *sm = p->sample[s];
        if (sm->n_value == 0 || sm->value[0] == 0)
            continue;
        size_t room = sm->n_location_id * LOC_MAX_LINES + 8, n = 0;
        frames = lc_xgrow(frames, &cap, room, sizeof(*frames));
        for (size_t i = sm->n_location_id; i-- > 0;)
            n += loc_frames_cached(t, p, ix, &cache, sm->location_id[i], frames + n, room - n);
        int64_t v = sm->value[0];
        if (!stack_passes(t, f, frames, n)) {
            if (sign > 0)
                *filtered += v;
            continue;
        }
        if (sign > 0)
            *total += v;
        if (add_stack(t, frames, n, v, sign, st))
            rc = -1;
    }
    lc_free(frames);
    loc_cache_fini(&cache);
    lc_arena_free(a);
    return rc;
}
