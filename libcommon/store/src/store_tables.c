/*
 * store_tables.c — the writer's in-memory de-duplication tables.
 *
 * LMDB keys are limited to 511 bytes, so symbols cannot be keyed by their
 * content on disk. The writer keeps content -> id maps in memory instead
 * (rebuilt from the tables when a block is reopened, store_wstate.c). All
 * three tables use open addressing with linear probing on power-of-two
 * arrays of 32-bit ids: small, cache friendly, and no per-entry allocation.
 */
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "store_int.h"

#define TAB_MIN_SLOTS 1024

/* Eight bytes per step. The result is persisted in hashed posting keys, so it
 * must never change; words are loaded in native order, like every integer in a
 * block (LMDB files are not portable across byte orders anyway). */
uint64_t lc_store__hash(const void *p, size_t len, uint64_t seed)
{
    const uint8_t *s = p;
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ULL);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ lc_mix64(w)) * 0x9e3779b97f4a7c15ULL;
        s += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, s, len);
    h ^= lc_mix64(tail ^ ((uint64_t)len << 56));
    return lc_mix64(h);
}

/* Slot arrays are sized so the load stays under 1/2. */
static uint32_t *store_tables_slots_new(size_t n)
{
    return lc_xcalloc(n, sizeof(uint32_t));
}

static bool slots_need_grow(size_t count, size_t mask)
{
    return (count + 1) * 2 > mask + 1;
}

/* Random per table and per stack cache: keys and hashes are never persisted,
 * and a sender who cannot know the seeds can neither aim symbols at one slot
 * or two of its stacks at one key, nor zero a step of a chain of lc_mum64. */
static uint64_t tables_seed(const void *salt)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
        seed = (uint64_t)(uintptr_t)salt ^ (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL;
    return seed;
}

/* ---------------------------------------------------------------- symtab */

void lc_store__symtab_init(store_symtab_t *t)
{
    memset(t, 0, sizeof(*t));
    t->mask = TAB_MIN_SLOTS - 1;
    t->slots = store_tables_slots_new(TAB_MIN_SLOTS);
    lc_buf_init(&t->bytes, LC_BUF_UNLIMITED);
    t->seed1 = tables_seed(&t->seed1);
    t->seed2 = tables_seed(&t->seed2);
}

static inline uint64_t load_u64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof(w));
    return w;
}

static inline uint64_t load_u32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof(w));
    return w;
}

/* A symbol's hash in its table: never persisted (tables are rebuilt by
 * interning what LMDB holds), so unlike lc_store__hash it may be anything.
 * One 128-bit multiply per 16 bytes (lc_mum64), the chain in one operand and
 * the input xored with a seed in the other; the last 1..16 bytes are read as
 * two possibly overlapping words, so no byte loop or memcpy call for a tail.
 * Symbols are mostly 5-20 bytes (encoded locations and functions): one or two
 * multiplies, where lc_store__hash took five to seven (issue 32). */
static uint32_t symtab_hash(const store_symtab_t *t, const void *p, size_t len)
{
    const uint8_t *s = p;
    uint64_t h = t->seed1 ^ len, a = 0, b = 0;
    for (; len > 16; s += 16, len -= 16)
        h = lc_mum64(load_u64(s) ^ t->seed2, load_u64(s + 8) ^ h);
    if (len >= 8) {
        a = load_u64(s);
        b = load_u64(s + len - 8);
    } else if (len >= 4) {
        a = load_u32(s);
        b = load_u32(s + len - 4);
    } else if (len > 0) {
        a = (uint64_t)s[0] << 16 | (uint64_t)s[len / 2] << 8 | s[len - 1];
    }
    return (uint32_t)lc_mum64(a ^ t->seed2, b ^ h);
}

void lc_store__symtab_fini(store_symtab_t *t)
{
    lc_free(t->slots);
    lc_free(t->entries);
    lc_buf_fini(&t->bytes);
    memset(t, 0, sizeof(*t));
}

static void symtab_grow(store_symtab_t *t)
{
    size_t n = (t->mask + 1) * 2;
    uint32_t *slots = store_tables_slots_new(n);
    for (size_t id = 1; id <= t->count; id++) {
        size_t i = t->entries[id - 1].hash & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)id;
    }
    lc_free(t->slots);
    t->slots = slots;
    t->mask = n - 1;
}

static bool symtab_entry_is(const store_symtab_t *t, uint32_t id, const void *p, size_t len,
                            uint32_t hash)
{
    const store_symtab_entry_t *e = &t->entries[id - 1];
    return e->hash == hash && e->len == len && memcmp(t->bytes.data + e->off, p, len) == 0;
}

static int symtab_append(store_symtab_t *t, const void *p, size_t len, uint32_t hash)
{
    if (t->count >= STORE_MAX_ID || len > UINT32_MAX)
        return LC_ETOOBIG;
    int rc = lc_buf_append(&t->bytes, p, len);
    if (rc)
        return rc;
    t->entries = lc_xgrow(t->entries, &t->cap, t->count + 1, sizeof(*t->entries));
    t->entries[t->count] =
        (store_symtab_entry_t){.off = t->bytes.len - len, .len = (uint32_t)len, .hash = hash};
    t->count++;
    return 0;
}

/* The slot holding these bytes, or the empty slot where they would go. */
static size_t symtab_probe(const store_symtab_t *t, const void *p, size_t len, uint32_t hash)
{
    size_t i = hash & t->mask;
    while (t->slots[i] && !symtab_entry_is(t, t->slots[i], p, len, hash))
        i = (i + 1) & t->mask;
    return i;
}

int lc_store__symtab_intern(store_symtab_t *t, const void *p, size_t len, uint32_t *id, bool *added)
{
    uint32_t hash = symtab_hash(t, p, len);
    size_t i = symtab_probe(t, p, len, hash);
    if (t->slots[i]) {
        *id = t->slots[i];
        *added = false;
        return 0;
    }
    int rc = symtab_append(t, p, len, hash);
    if (rc)
        return rc;
    t->slots[i] = (uint32_t)t->count;
    *id = (uint32_t)t->count;
    *added = true;
    if (slots_need_grow(t->count, t->mask))
        symtab_grow(t);
    return 0;
}

/* Each lookup is three dependent cache misses in a big table (slot, entry,
 * bytes). Done one after another they serialise; here a batch is hashed with
 * each item's slot prefetched, then probed with the entry of the item
 * SYMTAB_AHEAD places later prefetched, so the misses of several items are
 * in flight at once. */
#define SYMTAB_AHEAD 8

void lc_store__symtab_find_many(const store_symtab_t *t, store_symkey_t *keys, size_t n,
                                uint32_t *ids)
{
    for (size_t i = 0; i < n; i++) {
        keys[i].hash = symtab_hash(t, keys[i].p, keys[i].len);
        __builtin_prefetch(&t->slots[keys[i].hash & t->mask]);
    }
    for (size_t i = 0; i < n; i++) {
        if (i + SYMTAB_AHEAD < n) {
            uint32_t ahead = t->slots[keys[i + SYMTAB_AHEAD].hash & t->mask];
            if (ahead)
                __builtin_prefetch(&t->entries[ahead - 1]);
        }
        ids[i] = t->slots[symtab_probe(t, keys[i].p, keys[i].len, keys[i].hash)];
    }
}

const uint8_t *lc_store__symtab_bytes(const store_symtab_t *t, uint32_t id, size_t *len)
{
    if (id == 0 || id > t->count)
        return NULL;
    *len = t->entries[id - 1].len;
    return t->bytes.data + t->entries[id - 1].off;
}

/* ---------------------------------------------------------------- nodetab */

void lc_store__nodetab_init(store_nodetab_t *t)
{
    memset(t, 0, sizeof(*t));
    t->mask = TAB_MIN_SLOTS - 1;
    t->slots = lc_xcalloc(TAB_MIN_SLOTS, sizeof(*t->slots));
    t->tail = lc_xgrow(NULL, &t->tail_cap, 1, sizeof(*t->tail));
    t->tail[0] = 0; /* the virtual root: parent 0, location 0 */
    t->count = 1;
}

void lc_store__nodetab_fini(store_nodetab_t *t)
{
    lc_free(t->slots);
    lc_free(t->tail);
    memset(t, 0, sizeof(*t));
}

/* Denser than the other tables (at most 3/4 full): slots are 12 bytes and
 * this table is the biggest; a probe run still mostly stays in one line. */
static bool nodetab_need_grow(const store_nodetab_t *t)
{
    return t->count * 4 > (t->mask + 1) * 3;
}

static void nodetab_grow(store_nodetab_t *t)
{
    size_t n = (t->mask + 1) * 2;
    store_nodeslot_t *slots = lc_xcalloc(n, sizeof(*slots));
    for (size_t i = 0; i <= t->mask; i++) {
        const store_nodeslot_t *e = &t->slots[i];
        if (!e->id)
            continue;
        size_t j = store_pair_hash(e->parent, e->location) & (n - 1);
        while (slots[j].id)
            j = (j + 1) & (n - 1);
        slots[j] = *e;
    }
    lc_free(t->slots);
    t->slots = slots;
    t->mask = n - 1;
}

int lc_store__nodetab_child(store_nodetab_t *t, uint32_t parent, uint32_t location, uint64_t hash,
                            uint32_t *id)
{
    size_t i = hash & t->mask;
    for (; t->slots[i].id; i = (i + 1) & t->mask) {
        if (t->slots[i].parent == parent && t->slots[i].location == location) {
            *id = t->slots[i].id;
            return 0;
        }
    }
    if (t->count >= STORE_MAX_ID)
        return LC_ETOOBIG;
    size_t at = t->count - t->tail_first;
    t->tail = lc_xgrow(t->tail, &t->tail_cap, at + 1, sizeof(*t->tail));
    t->tail[at] = (uint64_t)parent << 32 | location;
    t->slots[i] =
        (store_nodeslot_t){.parent = parent, .location = location, .id = (uint32_t)t->count};
    *id = (uint32_t)t->count++;
    if (nodetab_need_grow(t))
        nodetab_grow(t);
    return 0;
}

uint64_t lc_store__nodetab_pair(const store_nodetab_t *t, uint64_t id)
{
    return t->tail[id - t->tail_first];
}

void lc_store__nodetab_trim(store_nodetab_t *t, uint64_t keep_from)
{
    uint64_t first = keep_from / STORE_NODE_CHUNK * STORE_NODE_CHUNK;
    if (first <= t->tail_first)
        return;
    memmove(t->tail, t->tail + (first - t->tail_first), (t->count - first) * sizeof(*t->tail));
    t->tail_first = first;
}

/* ---------------------------------------------------------------- stack cache */

void lc_store__stackcache_init(store_stackcache_t *c)
{
    memset(c, 0, sizeof(*c));
    c->mask = TAB_MIN_SLOTS - 1;
    c->slots = lc_xcalloc(TAB_MIN_SLOTS, sizeof(*c->slots));
    c->seed1 = tables_seed(c);
    c->seed2 = tables_seed(&c->seed2) ^ 0xc2b2ae3d27d4eb4fULL;
    /* Ids are at most STORE_MAX_ID: no pair of them xored with these is 0. */
    c->step1 = tables_seed(&c->step1) | 0xffffffff00000000ULL;
    c->step2 = tables_seed(&c->step2) | 0xffffffff00000000ULL;
}

void lc_store__stackcache_fini(store_stackcache_t *c)
{
    lc_free(c->slots);
    memset(c, 0, sizeof(*c));
}

static size_t stackcache_find(const store_stackslot_t *slots, size_t mask,
                              const store_stackkey_t *k)
{
    size_t i = k->h1 & mask;
    while (slots[i].node && (slots[i].h1 != k->h1 || slots[i].h2 != k->h2))
        i = (i + 1) & mask;
    return i;
}

bool lc_store__stackcache_get(const store_stackcache_t *c, const store_stackkey_t *k,
                              uint32_t *node)
{
    const store_stackslot_t *slot = &c->slots[stackcache_find(c->slots, c->mask, k)];
    *node = slot->node;
    return slot->node != 0;
}

static void stackcache_grow(store_stackcache_t *c)
{
    size_t n = (c->mask + 1) * 2;
    store_stackslot_t *slots = lc_xcalloc(n, sizeof(*slots));
    for (size_t i = 0; i <= c->mask; i++) {
        if (c->slots[i].node) {
            store_stackkey_t k = {c->slots[i].h1, c->slots[i].h2};
            slots[stackcache_find(slots, n - 1, &k)] = c->slots[i];
        }
    }
    lc_free(c->slots);
    c->slots = slots;
    c->mask = n - 1;
}

void lc_store__stackcache_put(store_stackcache_t *c, const store_stackkey_t *k, uint32_t node)
{
    if (node == 0)
        return;
    if (c->count >= STORE_STACKCACHE_MAX) { /* start over rather than grow without end */
        memset(c->slots, 0, (c->mask + 1) * sizeof(*c->slots));
        c->count = 0;
    }
    store_stackslot_t *slot = &c->slots[stackcache_find(c->slots, c->mask, k)];
    if (!slot->node)
        c->count++;
    *slot = (store_stackslot_t){.h1 = k->h1, .h2 = k->h2, .node = node};
    if (slots_need_grow(c->count, c->mask))
        stackcache_grow(c);
}

/* ---------------------------------------------------------------- idmap */

void lc_store__idmap_init(store_idmap_t *m)
{
    memset(m, 0, sizeof(*m));
    m->mask = TAB_MIN_SLOTS - 1;
    m->slots = lc_xcalloc(TAB_MIN_SLOTS, sizeof(*m->slots));
    m->gen = 1;
}

void lc_store__idmap_fini(store_idmap_t *m)
{
    lc_free(m->slots);
    memset(m, 0, sizeof(*m));
}

void lc_store__idmap_clear(store_idmap_t *m)
{
    m->count = 0;
    if (++m->gen == 0) { /* wrapped: stale generations could look live again */
        memset(m->slots, 0, (m->mask + 1) * sizeof(*m->slots));
        m->gen = 1;
    }
}

bool lc_store__idmap_get(const store_idmap_t *m, uint64_t key, uint32_t *val)
{
    size_t i = lc_mix64(key) & m->mask;
    for (; m->slots[i].gen == m->gen; i = (i + 1) & m->mask) {
        if (m->slots[i].key == key) {
            *val = m->slots[i].val;
            return true;
        }
    }
    return false;
}

static void idmap_grow(store_idmap_t *m)
{
    store_idmap_t bigger = {.mask = (m->mask + 1) * 2 - 1, .gen = 1};
    bigger.slots = lc_xcalloc(bigger.mask + 1, sizeof(*bigger.slots));
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].gen == m->gen)
            lc_store__idmap_put(&bigger, m->slots[i].key, m->slots[i].val);
    lc_free(m->slots);
    *m = bigger;
}

/* The key must not be present (callers look it up first). */
void lc_store__idmap_put(store_idmap_t *m, uint64_t key, uint32_t val)
{
    size_t i = lc_mix64(key) & m->mask;
    while (m->slots[i].gen == m->gen)
        i = (i + 1) & m->mask;
    m->slots[i] = (store_idmap_slot_t){.key = key, .val = val, .gen = m->gen};
    if (slots_need_grow(++m->count, m->mask))
        idmap_grow(m);
}
