/*
 * parca_report.c — the reports of parca.query.v1alpha1.QueryService/Query
 * (parca.md §4.3), built from the merged pprof the back end answers.
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

#include "arrow_ipc.h"
#include "lc/frame_name.h"
#include "lc/hash.h"
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

/* ---------------------------------------------------------------- hashing */

static uint64_t parca_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return lc_mix64(h);
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
static uint32_t intern_bytes(parca_tree_t *t, const char *s, size_t len)
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

static uint32_t intern_frame(parca_tree_t *t, const frame_t *f)
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
static void node_slots_reserve(node_slots_t *s, size_t need)
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
static uint32_t child_of(parca_tree_t *t, uint32_t parent, uint32_t frame)
{
    node_slots_reserve(&t->node_slots, t->node_slots.n + 1);
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
            intern_bytes(t, name, lc_pprof_address_frame_name(p, m, loc->address, name));
        f.func = func == NO_FRAME ? 0 : func;
        out[0] = intern_frame(t, &f);
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
        out[n++] = intern_frame(t, &f);
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
        cur = child_of(t, cur, frames[i]);
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

#define LOC_MAX_LINES 64 /* inlined frames kept per location */

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
    node_slots_reserve(&t->node_slots, refs);
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
    *out = intern_bytes(t, s, len);
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
        f->func = intern_bytes(t, s, len);
    return rc ? rc : f->func == NO_FRAME ? LC_ETOOBIG : 0;
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
        f.address = t->by_address || l.n_lines == 0 ? l.address : 0;
        size_t k = 0, want = l.n_lines ? l.n_lines : 1;
        if (want > LOC_MAX_LINES)
            want = LOC_MAX_LINES;
        y->pool = lc_xgrow(y->pool, &y->cap_pool, y->n_pool + want, sizeof(uint32_t));
        if (l.n_lines == 0) {
            rc = block_address_func(t, y, &l, &f);
            if (rc)
                return rc;
            y->pool[y->n_pool + k++] = intern_frame(t, &f);
        }
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
            y->pool[y->n_pool + k++] = intern_frame(t, &f);
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
    node_slots_reserve(&t->node_slots, grow < PARCA_MAX_NODES ? grow : PARCA_MAX_NODES);
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
            cur = child_of(t, cur, frames[k]);
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

/* ----------------------------------------------------------- per frame */

typedef struct frame_totals_s {
    int64_t *cum, *cum_diff, *flat, *flat_diff;
} frame_totals_t;

/* Flat and cumulative per frame; a frame recursing in one stack counts once. */
static void frame_totals(const parca_tree_t *t, frame_totals_t *ft)
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

static void frame_totals_fini(frame_totals_t *ft)
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
static uint32_t *frames_sorted(const parca_tree_t *t, const frame_totals_t *ft, size_t *n)
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
    frame_totals(t, &ft);
    size_t n;
    uint32_t *ids = frames_sorted(t, &ft, &n);
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
    frame_totals_fini(&ft);
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

static bool node_kept(const parca_tree_t *t, uint32_t id, int64_t min_cum)
{
    return t->nodes[id].cum >= min_cum || (t->nodes[id].cum == 0 && t->nodes[id].diff != 0);
}

static int64_t min_cum_of(const parca_tree_t *t, double trim)
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
        if (!node_kept(t, c, min_cum)) {
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
    if (flamegraph_tables(t, a, fg) ||
        table_children(t, 0, min_cum_of(t, trim), a, &root->children, &root->n_children, &trimmed))
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

/* ------------------------------------------------------- FLAMEGRAPH_ARROW */

enum {
    FA_MAPPING_FILE,
    FA_BUILD_ID,
    FA_ADDRESS,
    FA_LINE,
    FA_INLINED,
    FA_STARTLINE,
    FA_NAME,
    FA_SYSTEM_NAME,
    FA_FILE_NAME,
    FA_CHILDREN,
    FA_PARENT,
    FA_CUMULATIVE,
    FA_FLAT,
    FA_DIFF,
    FA_DEPTH,
    FA_COLUMNS
};

static const arw_field_t flame_fields[FA_COLUMNS] = {
    {"mapping_file", ARW_DICT_UTF8},
    {"mapping_build_id", ARW_DICT_UTF8},
    {"location_address", ARW_UINT64},
    {"location_line", ARW_INT64},
    {"inlined", ARW_BOOL},
    {"function_startline", ARW_INT64},
    {"function_name", ARW_DICT_UTF8},
    {"function_system_name", ARW_DICT_UTF8},
    {"function_file_name", ARW_DICT_UTF8},
    {"children", ARW_LIST_UINT32},
    {"parent", ARW_INT32},
    {"cumulative", ARW_INT64},
    {"flat", ARW_INT64},
    {"diff", ARW_INT64},
    {"depth", ARW_UINT32},
};

/* Every string column is dictionary-encoded over the tree's string table
 * (string ids are the indices), as Parca's records are: a name is written
 * once, not once per node. */
static void set_string_dicts(arw_batch_t *b, const parca_tree_t *t, const arw_field_t *fields,
                             size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fields[i].type == ARW_DICT_UTF8)
            arw_set_dict(b, i, t->strings, t->n_strings);
}

/* Pre-order rows of the kept nodes: order[] the node ids, row[] the row of
 * each node (UINT32_MAX when trimmed). */
static size_t preorder_rows(const parca_tree_t *t, int64_t min_cum, uint32_t *order, uint32_t *row,
                            int64_t *trimmed)
{
    size_t n = 0;
    uint32_t *stack = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    size_t top = 0;
    stack[top++] = 0;
    for (size_t i = 0; i < t->n_nodes; i++)
        row[i] = UINT32_MAX;
    while (top) {
        uint32_t id = stack[--top];
        row[id] = (uint32_t)n;
        order[n++] = id;
        for (uint32_t c = t->nodes[id].first_child; c != NO_FRAME; c = t->nodes[c].next_sibling) {
            if (node_kept(t, c, min_cum))
                stack[top++] = c;
            else
                *trimmed += t->nodes[c].cum;
        }
    }
    lc_free(stack);
    return n;
}

static void flame_row(arw_batch_t *b, const parca_tree_t *t, uint32_t id, const uint32_t *row,
                      uint32_t **kids, size_t *kids_cap)
{
    const node_t *nd = &t->nodes[id];
    const frame_t *f = nd->frame == NO_FRAME ? NULL : &t->frames[nd->frame];
    arw_put_i32(b, FA_MAPPING_FILE, f ? f->mapping_file : 0);
    arw_put_i32(b, FA_BUILD_ID, f ? f->build_id : 0);
    arw_put_i64(b, FA_ADDRESS, f ? (int64_t)f->address : 0);
    arw_put_i64(b, FA_LINE, f ? f->line : 0);
    arw_put_bool(b, FA_INLINED, false);
    arw_put_i64(b, FA_STARTLINE, f ? f->start_line : 0);
    arw_put_i32(b, FA_NAME, f ? f->func : 0);
    arw_put_i32(b, FA_SYSTEM_NAME, f ? f->system_name : 0);
    arw_put_i32(b, FA_FILE_NAME, f ? f->file : 0);
    size_t n = 0;
    for (uint32_t c = nd->first_child; c != NO_FRAME; c = t->nodes[c].next_sibling) {
        if (row[c] == UINT32_MAX)
            continue;
        *kids = lc_xgrow(*kids, kids_cap, n + 1, sizeof(uint32_t));
        (*kids)[n++] = row[c];
    }
    arw_put_list(b, FA_CHILDREN, *kids, n);
    arw_put_i32(b, FA_PARENT, id == 0 ? -1 : (int64_t)row[nd->parent]);
    arw_put_i64(b, FA_CUMULATIVE, nd->cum);
    arw_put_i64(b, FA_FLAT, nd->flat);
    arw_put_i64(b, FA_DIFF, nd->diff);
    arw_put_i32(b, FA_DEPTH, nd->depth);
}

static int encode_batch(arw_batch_t *b, lc_arena_t *a, ProtobufCBinaryData *out, lc_status_t *st)
{
    lc_buf_t buf;
    lc_buf_init(&buf, PARCA_MAX_REPORT);
    int rc = arw_encode(b, &buf);
    arw_batch_fini(b);
    if (rc == 0) {
        out->data = lc_arena_alloc(a, buf.len + 1);
        if (out->data)
            memcpy(out->data, buf.data, buf.len);
        out->len = buf.len;
        rc = out->data ? 0 : LC_ETOOBIG;
    }
    lc_buf_fini(&buf);
    return rc ? qry_fail(st, rc, "encoding the Arrow record") : 0;
}

int parca_report_flamegraph_arrow(parca_tree_t *t, const char *unit, double trim, lc_arena_t *a,
                                  Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    uint32_t *order = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    uint32_t *row = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    int64_t trimmed = 0;
    size_t n = preorder_rows(t, min_cum_of(t, trim), order, row, &trimmed);
    arw_batch_t b;
    arw_batch_init(&b, flame_fields, FA_COLUMNS, PARCA_MAX_REPORT);
    arw_batch_reserve(&b, n);
    set_string_dicts(&b, t, flame_fields, FA_COLUMNS);
    uint32_t *kids = NULL;
    size_t kids_cap = 0;
    for (size_t i = 0; i < n; i++)
        flame_row(&b, t, order[i], row, &kids, &kids_cap);
    lc_free(kids);
    lc_free(order);
    lc_free(row);
    Parca__Query__V1alpha1__FlamegraphArrow *fa = lc_arena_alloc(a, sizeof(*fa));
    if (!fa) {
        arw_batch_fini(&b);
        return qry_fail_arena(st);
    }
    *fa = (Parca__Query__V1alpha1__FlamegraphArrow)PARCA__QUERY__V1ALPHA1__FLAMEGRAPH_ARROW__INIT;
    if (encode_batch(&b, a, &fa->record, st))
        return -1;
    fa->unit = (char *)unit;
    fa->height = t->max_depth + 1;
    fa->trimmed = trimmed;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_FLAMEGRAPH_ARROW;
    resp->flamegraph_arrow = fa;
    return 0;
}

/* ------------------------------------------------------------ TABLE_ARROW */

enum {
    TA_MAPPING_FILE,
    TA_BUILD_ID,
    TA_ADDRESS,
    TA_LINE,
    TA_STARTLINE,
    TA_NAME,
    TA_SYSTEM_NAME,
    TA_FILE_NAME,
    TA_CUMULATIVE,
    TA_CUMULATIVE_DIFF,
    TA_FLAT,
    TA_FLAT_DIFF,
    TA_COLUMNS
};

static const arw_field_t table_fields[TA_COLUMNS] = {
    {"mapping_file", ARW_DICT_UTF8},
    {"mapping_build_id", ARW_DICT_UTF8},
    {"location_address", ARW_UINT64},
    {"location_line", ARW_INT64},
    {"function_startline", ARW_INT64},
    {"function_name", ARW_DICT_UTF8},
    {"function_system_name", ARW_DICT_UTF8},
    {"function_file_name", ARW_DICT_UTF8},
    {"cumulative", ARW_INT64},
    {"cumulative_diff", ARW_INT64},
    {"flat", ARW_INT64},
    {"flat_diff", ARW_INT64},
};

int parca_report_table_arrow(parca_tree_t *t, const char *unit, lc_arena_t *a,
                             Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    frame_totals_t ft;
    frame_totals(t, &ft);
    size_t n;
    uint32_t *ids = frames_sorted(t, &ft, &n);
    arw_batch_t b;
    arw_batch_init(&b, table_fields, TA_COLUMNS, PARCA_MAX_REPORT);
    arw_batch_reserve(&b, n);
    set_string_dicts(&b, t, table_fields, TA_COLUMNS);
    for (size_t i = 0; i < n; i++) {
        const frame_t *f = &t->frames[ids[i]];
        arw_put_i32(&b, TA_MAPPING_FILE, f->mapping_file);
        arw_put_i32(&b, TA_BUILD_ID, f->build_id);
        arw_put_i64(&b, TA_ADDRESS, (int64_t)f->address);
        arw_put_i64(&b, TA_LINE, f->line);
        arw_put_i64(&b, TA_STARTLINE, f->start_line);
        arw_put_i32(&b, TA_NAME, f->func);
        arw_put_i32(&b, TA_SYSTEM_NAME, f->system_name);
        arw_put_i32(&b, TA_FILE_NAME, f->file);
        arw_put_i64(&b, TA_CUMULATIVE, ft.cum[ids[i]]);
        arw_put_i64(&b, TA_CUMULATIVE_DIFF, ft.cum_diff[ids[i]]);
        arw_put_i64(&b, TA_FLAT, ft.flat[ids[i]]);
        arw_put_i64(&b, TA_FLAT_DIFF, ft.flat_diff[ids[i]]);
    }
    lc_free(ids);
    frame_totals_fini(&ft);
    Parca__Query__V1alpha1__TableArrow *ta = lc_arena_alloc(a, sizeof(*ta));
    if (!ta) {
        arw_batch_fini(&b);
        return qry_fail_arena(st);
    }
    *ta = (Parca__Query__V1alpha1__TableArrow)PARCA__QUERY__V1ALPHA1__TABLE_ARROW__INIT;
    if (encode_batch(&b, a, &ta->record, st))
        return -1;
    ta->unit = (char *)unit;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_TABLE_ARROW;
    resp->table_arrow = ta;
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
    frame_totals(t, &ft);
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
    frame_totals_fini(&ft);
    if (rc)
        return qry_fail_arena(st);
    cg->cumulative = t->nodes[0].cum;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_CALLGRAPH;
    resp->callgraph = cg;
    return 0;
}
