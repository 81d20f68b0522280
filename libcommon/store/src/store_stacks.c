/*
 * store_stacks.c — translates a pprof's symbols and stacks into a block's ids.
 *
 * Symbols are translated lazily and memoised (pprof id -> store id), so only
 * symbols that samples reach are stored and each is hashed once per profile;
 * a new one is put into the block at once (ids only grow: MDB_APPEND).
 *
 * A stack becomes one node id by walking the block's tree from the root. The
 * walk is one hash probe per frame into a table far bigger than the caches,
 * each probe depending on the last, so it is bound by memory latency. Several
 * stacks are therefore walked side by side ("lanes"): each round prefetches
 * every lane's next slot and then probes them, so the cache misses overlap.
 *
 * Before any of that, a sample's whole stack is looked up in the block's
 * stack cache (store_int.h): the same service sends the same stacks profile
 * after profile, and then the walk of every frame, the writer's largest cost,
 * is one probe. The key is hashed from the frames' store location ids, which
 * the memo gives at the cost of an array read.
 */
#include <string.h>

#include "store_int.h"

#define STACK_LANES 8

/* ---------------------------------------------------------------- memos */

static void memo_init(store_memo_t *m)
{
    memset(m, 0, sizeof(*m));
    lc_store__idmap_init(&m->sparse);
}

static void memo_fini(store_memo_t *m)
{
    lc_free(m->dense);
    lc_store__idmap_fini(&m->sparse);
}

/* Empties the memo for a profile with n elements of this kind. */
static void memo_reset(store_memo_t *m, size_t n)
{
    m->dense = lc_xgrow(m->dense, &m->cap, n + 1, sizeof(*m->dense));
    m->n_dense = n;
    memset(m->dense, 0, (n + 1) * sizeof(*m->dense));
    lc_store__idmap_clear(&m->sparse);
}

static inline bool memo_get(const store_memo_t *m, uint64_t id, uint32_t *out)
{
    if (id <= m->n_dense) {
        *out = m->dense[id] - 1;
        return m->dense[id] != 0;
    }
    return lc_store__idmap_get(&m->sparse, id, out);
}

static void memo_put(store_memo_t *m, uint64_t id, uint32_t v)
{
    if (id <= m->n_dense)
        m->dense[id] = v + 1;
    else
        lc_store__idmap_put(&m->sparse, id, v);
}

/* ---------------------------------------------------------------- resolver */

void lc_store__resolver_init(store_resolver_t *r)
{
    memset(r, 0, sizeof(*r));
    memo_init(&r->locs);
    memo_init(&r->fns);
    memo_init(&r->maps);
    lc_buf_init(&r->enc, LC_BUF_UNLIMITED);
    lc_buf_init(&r->warm.enc, LC_BUF_UNLIMITED);
}

void lc_store__resolver_fini(store_resolver_t *r)
{
    memo_fini(&r->locs);
    memo_fini(&r->fns);
    memo_fini(&r->maps);
    lc_free(r->strs);
    lc_free(r->sample_node);
    lc_free(r->todo);
    lc_free(r->todo_keys);
    lc_buf_fini(&r->enc);
    lc_free(r->warm.keys);
    lc_free(r->warm.ids);
    lc_free(r->warm.refs);
    lc_free(r->warm.offs);
    lc_buf_fini(&r->warm.enc);
}

void lc_store__resolver_forget(store_resolver_t *r)
{
    r->p = NULL;
}

static void resolver_warm(store_resolver_t *r);

static void resolver_reset(store_resolver_t *r, const lc_pprof_t *p)
{
    memo_reset(&r->locs, p->n_location);
    memo_reset(&r->fns, p->n_function);
    memo_reset(&r->maps, p->n_mapping);
    r->strs = lc_xgrow(r->strs, &r->strs_cap, p->n_string_table + 1, sizeof(*r->strs));
    memset(r->strs, 0, (p->n_string_table + 1) * sizeof(*r->strs));
    r->sample_node =
        lc_xgrow(r->sample_node, &r->sample_node_cap, p->n_sample + 1, sizeof(*r->sample_node));
    memset(r->sample_node, 0xff, (p->n_sample + 1) * sizeof(*r->sample_node));
}

void lc_store__resolver_bind(store_resolver_t *r, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                             const void *block, MDB_txn *txn, const MDB_dbi *dbi,
                             store_wstate_t *ws, bool keep)
{
    bool fresh = !keep || r->p != p || r->ix != ix || r->block != block;
    if (fresh)
        resolver_reset(r, p);
    r->p = p;
    r->ix = ix;
    r->block = block;
    r->txn = txn;
    r->dbi = dbi;
    r->ws = ws;
    if (fresh)
        resolver_warm(r);
}

/* ---------------------------------------------------------------- symbols */

/* Finds or adds a symbol; a new one is put at once. */
static int symbol_put(store_resolver_t *r, store_db_t db, store_symtab_t *tab, const void *p,
                      size_t len, uint32_t *id)
{
    bool added;
    int rc = lc_store__symtab_intern(tab, p, len, id, &added);
    if (rc || !added)
        return rc;
    MDB_val k = store_val(id, sizeof(*id)), v = store_val(p, len);
    rc = mdb_put(r->txn, r->dbi[db], &k, &v, MDB_APPEND);
    return rc ? lc_store__mdb_fail(rc, "symbol put") : 0;
}

static int string_id(store_resolver_t *r, int64_t idx, uint32_t *out)
{
    if (idx < 0 || (size_t)idx >= r->p->n_string_table)
        return LC_EINPUT;
    if (r->strs[idx]) {
        *out = r->strs[idx] - 1;
        return 0;
    }
    const char *str = r->p->string_table[idx];
    size_t len = strlen(str);
    *out = 0; /* "" is id 0 and never stored */
    if (len > STORE_MAX_STRING_BYTES)
        return LC_ETOOBIG;
    int rc = len ? symbol_put(r, DB_STRINGS, &r->ws->strings, str, len, out) : 0;
    if (!rc)
        r->strs[idx] = *out + 1;
    return rc;
}

/* How an encoder learns the store id of a string, function or mapping: by
 * finding or adding it (string_id, function_id, mapping_id), or by the memo
 * alone (*_known: 1 when the memo does not know it yet). */
typedef int (*store_id_fn)(store_resolver_t *r, int64_t pprof_ref, uint32_t *out);

/* name, system_name, filename (string ids), zigzag start_line; buf holds 40. */
static int function_encode(store_resolver_t *r, const Google__V1__Function *fn, store_id_fn str,
                           uint8_t *buf, size_t *len)
{
    uint32_t name, system_name, filename;
    int rc = str(r, fn->name, &name);
    if (!rc)
        rc = str(r, fn->system_name, &system_name);
    if (!rc)
        rc = str(r, fn->filename, &filename);
    if (rc)
        return rc;
    uint8_t *e = buf;
    e = store_put_uvarint(e, name);
    e = store_put_uvarint(e, system_name);
    e = store_put_uvarint(e, filename);
    e = store_put_uvarint(e, store_zigzag(fn->start_line));
    *len = (size_t)(e - buf);
    return 0;
}

static int function_id(store_resolver_t *r, int64_t pprof_ref, uint32_t *out)
{
    uint64_t pprof_id = (uint64_t)pprof_ref;
    *out = 0;
    if (pprof_id == 0 || memo_get(&r->fns, pprof_id, out))
        return 0;
    const Google__V1__Function *fn = lc_pprof_function(r->ix, pprof_id);
    if (!fn)
        return LC_EINPUT;
    uint8_t buf[40];
    size_t len;
    int rc = function_encode(r, fn, string_id, buf, &len);
    if (!rc)
        rc = symbol_put(r, DB_FUNCTIONS, &r->ws->functions, buf, len, out);
    if (!rc)
        memo_put(&r->fns, pprof_id, *out);
    return rc;
}

static uint64_t mapping_flags(const Google__V1__Mapping *m)
{
    return (uint64_t)(m->has_functions ? 1 : 0) | (m->has_filenames ? 2 : 0) |
           (m->has_line_numbers ? 4 : 0) | (m->has_inline_frames ? 8 : 0);
}

/* memory_start, memory_limit, file_offset, filename, build_id, flags; buf
 * holds 60. */
static int mapping_encode(store_resolver_t *r, const Google__V1__Mapping *m, store_id_fn str,
                          uint8_t *buf, size_t *len)
{
    uint32_t filename, build_id;
    int rc = str(r, m->filename, &filename);
    if (!rc)
        rc = str(r, m->build_id, &build_id);
    if (rc)
        return rc;
    uint8_t *e = buf;
    e = store_put_uvarint(e, m->memory_start);
    e = store_put_uvarint(e, m->memory_limit);
    e = store_put_uvarint(e, m->file_offset);
    e = store_put_uvarint(e, filename);
    e = store_put_uvarint(e, build_id);
    e = store_put_uvarint(e, mapping_flags(m));
    *len = (size_t)(e - buf);
    return 0;
}

static int mapping_id(store_resolver_t *r, int64_t pprof_ref, uint32_t *out)
{
    uint64_t pprof_id = (uint64_t)pprof_ref;
    *out = 0;
    if (pprof_id == 0 || memo_get(&r->maps, pprof_id, out))
        return 0;
    const Google__V1__Mapping *m = lc_pprof_mapping(r->ix, pprof_id);
    if (!m)
        return LC_EINPUT;
    uint8_t buf[60];
    size_t len;
    int rc = mapping_encode(r, m, string_id, buf, &len);
    if (!rc)
        rc = symbol_put(r, DB_MAPPINGS, &r->ws->mappings, buf, len, out);
    if (!rc)
        memo_put(&r->maps, pprof_id, *out);
    return rc;
}

/* mapping, address, n_lines, then (function, zigzag line) per line; appended
 * to enc. */
static int location_encode(store_resolver_t *r, const Google__V1__Location *loc, store_id_fn map_of,
                           store_id_fn fn_of, lc_buf_t *enc)
{
    uint32_t map;
    int rc = map_of(r, (int64_t)loc->mapping_id, &map);
    if (!rc)
        rc = lc_buf_reserve(enc, enc->len + 30 + loc->n_line * 20);
    if (rc)
        return rc;
    uint8_t *e = enc->data + enc->len;
    e = store_put_uvarint(e, map);
    e = store_put_uvarint(e, loc->address);
    e = store_put_uvarint(e, loc->n_line);
    for (size_t i = 0; i < loc->n_line; i++) {
        uint32_t fn;
        rc = fn_of(r, (int64_t)loc->line[i]->function_id, &fn);
        if (rc)
            return rc;
        e = store_put_uvarint(e, fn);
        e = store_put_uvarint(e, store_zigzag(loc->line[i]->line));
    }
    enc->len = (size_t)(e - enc->data);
    return 0;
}

static int location_id(store_resolver_t *r, uint64_t pprof_id, uint32_t *out)
{
    if (memo_get(&r->locs, pprof_id, out))
        return 0;
    const Google__V1__Location *loc = lc_pprof_location(r->ix, pprof_id);
    if (!loc)
        return LC_EINPUT;
    lc_buf_reset(&r->enc);
    int rc = location_encode(r, loc, mapping_id, function_id, &r->enc);
    if (!rc)
        rc = symbol_put(r, DB_LOCATIONS, &r->ws->locations, r->enc.data, r->enc.len, out);
    if (!rc)
        memo_put(&r->locs, pprof_id, *out);
    return rc;
}

/* ---------------------------------------------------------------- warm-up */

/* A new profile's symbols that the block already holds are found in batches
 * before its stacks are walked: the strings, then the mappings and functions
 * (encoded from the strings' ids), then the locations (from those ids), each
 * batch a lc_store__symtab_find_many whose cache misses overlap. What a batch
 * finds goes into the memos, so the lazy path above only adds what is new
 * (and raises every error: a batch only skips what it cannot encode, and
 * an element the profile's index would not give for its id). It
 * adds nothing, so a symbol no sample reaches is still never stored. A
 * stage whose batch finds under half its items (a new block, another
 * service) ends the warm-up: the lazy path would redo the rest anyway. */

static int string_known(store_resolver_t *r, int64_t idx, uint32_t *out)
{
    *out = 0;
    if (idx < 0 || (size_t)idx >= r->p->n_string_table)
        return 1;
    if (r->strs[idx]) {
        *out = r->strs[idx] - 1;
        return 0;
    }
    return r->p->string_table[idx][0] == '\0' ? 0 : 1; /* "" is id 0 */
}

static int function_known(store_resolver_t *r, int64_t pprof_ref, uint32_t *out)
{
    *out = 0;
    return pprof_ref == 0 || memo_get(&r->fns, (uint64_t)pprof_ref, out) ? 0 : 1;
}

static int mapping_known(store_resolver_t *r, int64_t pprof_ref, uint32_t *out)
{
    *out = 0;
    return pprof_ref == 0 || memo_get(&r->maps, (uint64_t)pprof_ref, out) ? 0 : 1;
}

static void warm_reserve(store_warm_t *w, size_t n)
{
    if (n <= w->cap)
        return;
    w->keys = lc_xgrow(w->keys, &w->cap, n, sizeof(*w->keys)); /* sets the cap of all four */
    w->ids = lc_xrealloc(w->ids, w->cap * sizeof(*w->ids));
    w->refs = lc_xrealloc(w->refs, w->cap * sizeof(*w->refs));
    w->offs = lc_xrealloc(w->offs, w->cap * sizeof(*w->offs));
}

/* Looks up the n encoded items (keys[i] spans enc from offs[i] to offs[i+1]
 * or its end) and memoises what is found; true when at least half were. */
static bool warm_find(store_resolver_t *r, store_symtab_t *tab, store_memo_t *memo, size_t n)
{
    store_warm_t *w = &r->warm;
    for (size_t i = 0; i < n; i++) {
        size_t end = i + 1 < n ? w->offs[i + 1] : w->enc.len;
        w->keys[i] = (store_symkey_t){.p = w->enc.data + w->offs[i], .len = end - w->offs[i]};
    }
    lc_store__symtab_find_many(tab, w->keys, n, w->ids);
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        if (w->ids[i]) {
            memo_put(memo, w->refs[i], w->ids[i]);
            found++;
        }
    }
    return found * 2 >= n;
}

static bool warm_strings(store_resolver_t *r)
{
    const lc_pprof_t *p = r->p;
    store_warm_t *w = &r->warm;
    warm_reserve(w, p->n_string_table);
    size_t n = 0;
    for (size_t i = 1; i < p->n_string_table; i++) {
        size_t len = strlen(p->string_table[i]);
        if (len == 0 || len > STORE_MAX_STRING_BYTES)
            continue;
        w->keys[n] = (store_symkey_t){.p = p->string_table[i], .len = len};
        w->refs[n++] = i;
    }
    lc_store__symtab_find_many(&r->ws->strings, w->keys, n, w->ids);
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        if (w->ids[i]) {
            r->strs[w->refs[i]] = w->ids[i] + 1;
            found++;
        }
    }
    return found * 2 >= n;
}

/* Encodes the profile's i-th mapping (or function) into buf (room for 60)
 * and names its pprof id; nonzero when it cannot be (a string not known, or
 * not the element the index gives for its id). */
typedef int (*warm_encode_fn)(store_resolver_t *r, size_t i, uint8_t *buf, size_t *len,
                              uint64_t *ref);

static int warm_encode_mapping(store_resolver_t *r, size_t i, uint8_t *buf, size_t *len,
                               uint64_t *ref)
{
    const Google__V1__Mapping *m = r->p->mapping[i];
    *ref = m->id;
    if (m->id == 0 || lc_pprof_mapping(r->ix, m->id) != m)
        return 1;
    return mapping_encode(r, m, string_known, buf, len);
}

static int warm_encode_function(store_resolver_t *r, size_t i, uint8_t *buf, size_t *len,
                                uint64_t *ref)
{
    const Google__V1__Function *fn = r->p->function[i];
    *ref = fn->id;
    if (fn->id == 0 || lc_pprof_function(r->ix, fn->id) != fn)
        return 1;
    return function_encode(r, fn, string_known, buf, len);
}

/* The batch of the n mappings (or functions) whose strings are known. */
static bool warm_fixed(store_resolver_t *r, size_t n, warm_encode_fn encode, store_symtab_t *tab,
                       store_memo_t *memo)
{
    store_warm_t *w = &r->warm;
    warm_reserve(w, n);
    lc_buf_reset(&w->enc);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        if (lc_buf_reserve(&w->enc, w->enc.len + 60) ||
            encode(r, i, w->enc.data + w->enc.len, &len, &w->refs[k]))
            continue;
        w->offs[k++] = w->enc.len;
        w->enc.len += len;
    }
    return warm_find(r, tab, memo, k);
}

static void warm_locations(store_resolver_t *r)
{
    store_warm_t *w = &r->warm;
    warm_reserve(w, r->p->n_location);
    lc_buf_reset(&w->enc);
    size_t n = 0;
    for (size_t i = 0; i < r->p->n_location; i++) {
        const Google__V1__Location *loc = r->p->location[i];
        size_t at = w->enc.len;
        if (loc->id == 0 || lc_pprof_location(r->ix, loc->id) != loc ||
            location_encode(r, loc, mapping_known, function_known, &w->enc)) {
            w->enc.len = at;
            continue;
        }
        w->offs[n] = at;
        w->refs[n++] = loc->id;
    }
    warm_find(r, &r->ws->locations, &r->locs, n);
}

static void resolver_warm(store_resolver_t *r)
{
    if (warm_strings(r) &&
        warm_fixed(r, r->p->n_mapping, warm_encode_mapping, &r->ws->mappings, &r->maps) &&
        warm_fixed(r, r->p->n_function, warm_encode_function, &r->ws->functions, &r->fns))
        warm_locations(r);
}

/* ---------------------------------------------------------------- stacks */

typedef struct lane_s {
    const Google__V1__Sample *smp;
    uint32_t sample;
    size_t depth;            /* frames left; pprof lists the leaf first */
    uint32_t node, location; /* the next step: child(node, location) */
    uint64_t hash;           /* of (node, location) */
} lane_t;

/* Loads the next sample that still needs its stack into the lane. */
static bool lane_fill(store_resolver_t *r, lane_t *l, const uint32_t *todo, size_t n, size_t *next)
{
    if (*next == n)
        return false;
    l->sample = todo[(*next)++];
    l->smp = r->p->sample[l->sample];
    l->depth = l->smp->n_location_id;
    l->node = 0;
    return true;
}

/* Prepares the lane's next step and prefetches its slot. Returns 1 when the
 * lane holds a step, 0 when it has nothing left to do. */
static int lane_prepare(store_resolver_t *r, lane_t *l, const uint32_t *todo, size_t n,
                        size_t *next)
{
    while (l->depth == 0) {
        if (l->smp)
            r->sample_node[l->sample] = l->node;
        l->smp = NULL;
        if (!lane_fill(r, l, todo, n, next))
            return 0;
    }
    int rc = location_id(r, l->smp->location_id[l->depth - 1], &l->location);
    if (rc)
        return rc;
    l->hash = store_pair_hash(l->node, l->location);
    store_nodetab_prefetch(&r->ws->nodes, l->hash);
    return 1;
}

/* Walks the stacks of todo[0, n) through the tree, STACK_LANES at a time. */
static int stacks_walk(store_resolver_t *r, const uint32_t *todo, size_t n)
{
    lane_t lanes[STACK_LANES] = {{0}};
    size_t next = 0;
    for (;;) {
        int busy = 0, rc;
        for (int i = 0; i < STACK_LANES; i++) {
            rc = lane_prepare(r, &lanes[i], todo, n, &next);
            if (rc < 0)
                return rc;
            busy += rc;
        }
        if (!busy)
            return 0;
        for (int i = 0; i < STACK_LANES; i++) {
            lane_t *l = &lanes[i];
            if (!l->smp)
                continue;
            rc = lc_store__nodetab_child(&r->ws->nodes, l->node, l->location, l->hash, &l->node);
            if (rc)
                return rc;
            l->depth--;
        }
    }
}

/* A sample's frame as a store location id, memoised. */
static inline int sample_frame_location(store_resolver_t *r, const Google__V1__Sample *smp,
                                        size_t d, uint32_t *loc)
{
    uint64_t id = smp->location_id[d];
    return memo_get(&r->locs, id, loc) ? 0 : location_id(r, id, loc);
}

/* Four frames of a step, root side first (ids[3] .. ids[0]), when the memo's
 * array knows all four: one branch for the four instead of one per frame and
 * lookup (most frames, once a profile's first samples are resolved). */
static inline bool frames4_memo(const store_memo_t *m, const uint64_t *ids, uint32_t f[4])
{
    size_t n = m->n_dense;
    if ((ids[0] > n) | (ids[1] > n) | (ids[2] > n) | (ids[3] > n))
        return false;
    uint32_t a = m->dense[ids[3]], b = m->dense[ids[2]], c = m->dense[ids[1]], e = m->dense[ids[0]];
    if ((a == 0) | (b == 0) | (c == 0) | (e == 0))
        return false;
    f[0] = a - 1, f[1] = b - 1, f[2] = c - 1, f[3] = e - 1;
    return true;
}

/* The block location ids of the up to four frames below depth d, root side
 * first; 0 past the stack's leaf (ids are never 0, so those alias nothing). */
static inline int frames_step(store_resolver_t *r, const Google__V1__Sample *smp, size_t d,
                              uint32_t f[4])
{
    if (d >= 4 && frames4_memo(&r->locs, smp->location_id + d - 4, f))
        return 0;
    f[0] = f[1] = f[2] = f[3] = 0;
    for (size_t k = 0; k < 4 && k < d; k++) {
        int rc = sample_frame_location(r, smp, d - 1 - k, &f[k]);
        if (rc)
            return rc;
    }
    return 0;
}

/* The stack cache key of a sample: its frames' location ids, root first, four
 * to a step, and its depth, through two differently seeded chains of one
 * 128-bit multiply a step (lc_mum64: the chain xored into one operand, the
 * step's other two ids xored with a seed that no ids can cancel into the
 * other, so no input can zero a step and wipe what came before it). Once a
 * profile's locations are known (its first samples), each frame is a memo
 * array read. The key was ~12% of the ingest bench's instructions when each
 * pair of frames went through two lc_mix64 and a multiply per chain (issue 32). */
static int stack_key(store_resolver_t *r, const Google__V1__Sample *smp, store_stackkey_t *key)
{
    const store_stackcache_t *c = &r->ws->stacks;
    uint64_t h1 = c->seed1, h2 = c->seed2;
    for (size_t d = smp->n_location_id; d > 0; d = d > 4 ? d - 4 : 0) {
        uint32_t f[4];
        int rc = frames_step(r, smp, d, f);
        if (rc)
            return rc;
        uint64_t w0 = (uint64_t)f[0] | (uint64_t)f[1] << 32,
                 w1 = (uint64_t)f[2] | (uint64_t)f[3] << 32;
        h1 = lc_mum64(h1 ^ w0, w1 ^ c->step1);
        h2 = lc_mum64(h2 ^ w0, w1 ^ c->step2);
    }
    key->h1 = lc_mix64(h1 ^ smp->n_location_id);
    key->h2 = (uint32_t)(lc_mix64(h2 + smp->n_location_id) >> 32);
    return 0;
}

/* Pass one: the key of every sample that still needs its stack, its stack
 * cache slot prefetched while the next keys are computed; todo[i] is the
 * sample, or UINT32_MAX when there is nothing to look up. */
static int stacks_keys(store_resolver_t *r, const uint32_t *samples, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r->todo[i] = UINT32_MAX;
        if (samples[i] >= r->p->n_sample)
            return LC_EINPUT;
        if (r->sample_node[samples[i]] != UINT32_MAX)
            continue; /* resolved before */
        const Google__V1__Sample *smp = r->p->sample[samples[i]];
        if (smp->n_location_id == 0) {
            r->sample_node[samples[i]] = 0; /* the root */
            continue;
        }
        int rc = stack_key(r, smp, &r->todo_keys[i]);
        if (rc)
            return rc;
        lc_store__stackcache_prefetch(&r->ws->stacks, &r->todo_keys[i]);
        r->todo[i] = samples[i];
    }
    return 0;
}

/* Queues the samples whose stacks are neither resolved nor cached: pass two
 * probes the cache and packs the misses to the front of todo (and keys). */
static int stacks_todo(store_resolver_t *r, const uint32_t *samples, size_t n, size_t *k)
{
    r->todo = lc_xgrow(r->todo, &r->todo_cap, n + 1, sizeof(*r->todo));
    r->todo_keys = lc_xgrow(r->todo_keys, &r->todo_keys_cap, n + 1, sizeof(*r->todo_keys));
    int rc = stacks_keys(r, samples, n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = r->todo[i], node;
        if (s == UINT32_MAX || r->sample_node[s] != UINT32_MAX)
            continue; /* nothing to look up, or listed twice */
        if (lc_store__stackcache_get(&r->ws->stacks, &r->todo_keys[i], &node)) {
            r->sample_node[s] = node;
            continue;
        }
        r->sample_node[s] = UINT32_MAX - 1; /* queued once, even if listed twice */
        r->todo_keys[*k] = r->todo_keys[i];
        r->todo[(*k)++] = s;
    }
    return 0;
}

int lc_store__resolve_stacks(store_resolver_t *r, const uint32_t *samples, size_t n)
{
    size_t k = 0;
    int rc = stacks_todo(r, samples, n, &k);
    if (!rc)
        rc = stacks_walk(r, r->todo, k);
    if (rc) { /* leave nothing half-resolved behind for a later write */
        for (size_t i = 0; i < k; i++)
            r->sample_node[r->todo[i]] = UINT32_MAX;
        return rc;
    }
    for (size_t i = 0; i < k; i++)
        lc_store__stackcache_put(&r->ws->stacks, &r->todo_keys[i], r->sample_node[r->todo[i]]);
    return 0;
}
