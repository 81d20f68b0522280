/*
 * store_read.c — readers: one MDB_RDONLY transaction per block overlapping the
 * query range, begun together so a query sees one snapshot per block.
 *
 * Zero-copy where the bytes need no decoding (strings, encoded samples point
 * into the LMDB map, valid until lc_store_read_end; a compacted block's
 * packed tables are decoded once per block and kept as long). Locations are decoded
 * into the block's arena once and cached by id, because merges ask for the
 * same location many times. Each lc_block_t has its own arena, so different
 * blocks of one reader can be worked on from different threads (MDB_NOTLS).
 */
#include <string.h>

#include "lc/log.h"
#include "store_int.h"

struct lc_block_s {
    lc_store_t *s; /* the store the block belongs to: the reader's, or an added one */
    store_block_t *b;
    MDB_txn *txn;
    store_meta_t meta;                    /* snapshot of this transaction */
    lc_arena_t *arena;                    /* decoded locations; created on first use */
    lc_store_location_t **loc_cache;      /* by location id; in the arena */
    store_unpack_t unpack;                /* compacted samples (store_compact.c) */
    store_packed_t packed[DB_SERIES + 1]; /* by DB: strings .. locations, series (store_packed.c) */
    unsigned packed_loaded;               /* bit db: packed[db] was looked up */
    const lc_symbol_scope_t *scope;       /* the reader's; NULL: frames stay module+0xoffset */
};

struct lc_store_reader_s {
    lc_store_t *s;
    lc_block_t *blocks;
    size_t n;
    lc_symbol_scope_t scope;        /* lc_store_reader_symbolize */
    bool added;                     /* holds blocks of other stores (lc_store_reader_add) */
    store_reader_rollup_t *rollups; /* windows answered by rollup files */
    size_t n_rollups;
    struct reader_on_end_s {
        void (*fn)(void *arg);
        void *arg;
    } * on_end;
    size_t n_on_end;
};

/* ---------------------------------------------------------------- readers */

static int block_read_begin(lc_block_t *blk, lc_store_t *s, store_block_t *b)
{
    blk->s = s;
    blk->b = b;
    int rc = mdb_txn_begin(b->env, NULL, MDB_RDONLY, &blk->txn);
    if (rc) {
        blk->txn = NULL;
        return lc_store__mdb_fail(rc, "txn begin (read)");
    }
    lc_store__unpack_init(&blk->unpack, blk->txn, b->dbi[DB_META]);
    rc = lc_store__meta_get(blk->txn, b->dbi[DB_META], &blk->meta);
    return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
}

static void block_read_end(lc_block_t *blk)
{
    lc_store__unpack_fini(&blk->unpack);
    for (size_t i = 0; i < sizeof(blk->packed) / sizeof(blk->packed[0]); i++)
        lc_store__packed_fini(&blk->packed[i]);
    if (blk->txn)
        mdb_txn_abort(blk->txn);
    lc_arena_free(blk->arena);
    lc_store__release(blk->s, blk->b);
}

int lc_store_read_begin(lc_store_t *s, int64_t start_ns, int64_t end_ns, lc_store_reader_t **out)
{
    if (start_ns > end_ns)
        return LC_EINPUT;
    store_block_t **refs;
    size_t n;
    int rc = lc_store__acquire_range(s, start_ns, end_ns, &refs, &n);
    if (rc)
        return rc;
    lc_store_reader_t *r = lc_xcalloc(1, sizeof(*r));
    r->s = s;
    r->blocks = lc_xcalloc(n ? n : 1, sizeof(*r->blocks));
    for (size_t i = 0; i < n; i++) {
        if (!rc)
            rc = block_read_begin(&r->blocks[i], s, refs[i]);
        else
            r->blocks[i] = (lc_block_t){.s = s, .b = refs[i]}; /* only to be released */
        r->n++;
    }
    lc_free(refs);
    if (rc) {
        lc_store_read_end(r);
        return rc;
    }
    *out = r;
    return 0;
}

void lc_store_read_end(lc_store_reader_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        block_read_end(&r->blocks[i]);
    lc_free(r->blocks);
    for (size_t i = 0; i < r->n_rollups; i++)
        mdb_txn_abort(r->rollups[i].txn);
    lc_free(r->rollups);
    for (size_t i = 0; i < r->n_on_end; i++)
        r->on_end[i].fn(r->on_end[i].arg);
    lc_free(r->on_end);
    lc_free(r);
}

void lc_store_set_source(lc_store_t *s, lc_store_source_fn fn, void *ctx)
{
    s->source = fn;
    s->source_ctx = ctx;
}

/* The first partition start at or after t (INT64_MAX past the last). */
static int64_t partition_at_or_after(const lc_store_t *s, int64_t t)
{
    int64_t p = lc_store__partition(s, t);
    if (p >= t)
        return p;
    return p > INT64_MAX - s->opts.block_duration_ns ? INT64_MAX : p + s->opts.block_duration_ns;
}

int lc_store_read_begin_all(lc_store_t *s, int64_t start_ns, int64_t end_ns,
                            const lc_read_scope_t *scope, lc_store_reader_t **out)
{
    if (start_ns > end_ns)
        return LC_EINPUT;
    if (scope->from_ns > start_ns) /* the partitions before it are read elsewhere */
        start_ns = partition_at_or_after(s, scope->from_ns);
    if (start_ns > end_ns) { /* all of the range is: a reader of no blocks */
        lc_store_reader_t *r = lc_xcalloc(1, sizeof(*r));
        r->s = s;
        r->blocks = lc_xcalloc(1, sizeof(*r->blocks));
        *out = r;
        return 0;
    }
    if (s->source)
        return s->source(s->source_ctx, s, start_ns, end_ns, scope, out);
    return lc_store_read_begin(s, start_ns, end_ns, out);
}

/* Keeps r->blocks in block start order: the added ones go among the others. */
static void reader_sort(lc_store_reader_t *r)
{
    for (size_t i = 1; i < r->n; i++) {
        lc_block_t cur = r->blocks[i];
        size_t j = i;
        for (; j > 0 && r->blocks[j - 1].b->start_ns > cur.b->start_ns; j--)
            r->blocks[j] = r->blocks[j - 1];
        r->blocks[j] = cur;
    }
}

int lc_store_reader_add(lc_store_reader_t *r, lc_store_t *other, int64_t start_ns, int64_t end_ns)
{
    store_block_t **refs;
    size_t n;
    int rc = lc_store__acquire_range(other, start_ns, end_ns, &refs, &n);
    if (rc)
        return rc;
    r->blocks = lc_xrealloc(r->blocks, (r->n + n + 1) * sizeof(*r->blocks));
    for (size_t i = 0; i < n; i++) {
        lc_block_t *blk = &r->blocks[r->n++];
        *blk = (lc_block_t){0};
        if (!rc)
            rc = block_read_begin(blk, other, refs[i]);
        else
            *blk = (lc_block_t){.s = other, .b = refs[i]}; /* only to be released */
        if (r->scope.sym)
            blk->scope = &r->scope;
    }
    lc_free(refs);
    r->added = r->added || n > 0;
    reader_sort(r);
    return rc;
}

void lc_store_reader_on_end(lc_store_reader_t *r, void (*fn)(void *arg), void *arg)
{
    r->on_end = lc_xrealloc(r->on_end, (r->n_on_end + 1) * sizeof(*r->on_end));
    r->on_end[r->n_on_end++] = (struct reader_on_end_s){fn, arg};
}

bool lc_store__reader_added(const lc_store_reader_t *r)
{
    return r->added;
}

void lc_store__reader_rollup_push(lc_store_reader_t *r, const store_reader_rollup_t *rr)
{
    r->rollups = lc_xrealloc(r->rollups, (r->n_rollups + 1) * sizeof(*r->rollups));
    r->rollups[r->n_rollups++] = *rr;
}

size_t lc_store__reader_rollups(const lc_store_reader_t *r, const store_reader_rollup_t **out)
{
    *out = r->rollups;
    return r->n_rollups;
}

lc_store_t *lc_store__block_store(lc_block_t *b)
{
    return b->s;
}

/* For store_rollup.c, which reads blocks through readers. */
MDB_txn *lc_store__block_txn(lc_block_t *b)
{
    return b->txn;
}

store_block_t *lc_store__block_ref(lc_block_t *b)
{
    return b->b;
}

lc_store_t *lc_store__reader_store(lc_store_reader_t *r)
{
    return r->s;
}

void lc_block_drop_cache(lc_block_t *b)
{
    lc_arena_free(b->arena);
    b->arena = NULL;
    b->loc_cache = NULL;
}

void lc_store_set_symbolizer(lc_store_t *s, lc_symbolizer_t *sym)
{
    s->symbolizer = sym;
}

void lc_store_reader_symbolize(lc_store_reader_t *r, const char *const *tenants, size_t n_tenants)
{
    if (!r->s->symbolizer)
        return;
    lc_symbol_scope_init(&r->scope, r->s->symbolizer, tenants, n_tenants);
    for (size_t i = 0; i < r->n; i++)
        r->blocks[i].scope = &r->scope;
}

size_t lc_store_reader_count(const lc_store_reader_t *r)
{
    return r->n;
}

lc_block_t *lc_store_reader_block(lc_store_reader_t *r, size_t i)
{
    return i < r->n ? &r->blocks[i] : NULL;
}

int lc_block_info(lc_block_t *b, lc_block_info_t *out)
{
    const store_meta_t *m = &b->meta;
    MDB_envinfo ei;
    MDB_stat st;
    int rc = mdb_env_info(b->b->env, &ei);
    if (!rc)
        rc = mdb_env_stat(b->b->env, &st);
    if (rc)
        return lc_store__mdb_fail(rc, "env info");
    *out = (lc_block_info_t){
        .start_ns = m->start_ns,
        .end_ns = m->start_ns + m->duration_ns,
        .min_time_ns = m->profiles ? m->min_time_ns : 0,
        .max_time_ns = m->profiles ? m->max_time_ns : 0,
        .series = m->series,
        .profiles = m->profiles,
        .samples = m->samples,
        .nodes = m->nodes,
        .locations = m->locations,
        .functions = m->functions,
        .strings = m->strings,
        .bytes = ((uint64_t)ei.me_last_pgno + 1) * st.ms_psize,
    };
    return 0;
}

/* ---------------------------------------------------------------- series */

typedef struct idlist_s {
    uint32_t *v;
    size_t n, cap;
} idlist_t;

/* Reads a posting's whole sorted id list (DUPFIXED: a page of ids per call). */
static int posting_read(lc_block_t *b, const uint8_t *key, size_t klen, idlist_t *out)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(b->txn, b->b->dbi[DB_POSTINGS], &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (postings)");
    MDB_val k = store_val(key, klen), v;
    out->n = 0;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET);
    if (!rc)
        rc = mdb_cursor_get(cur, &k, &v, MDB_GET_MULTIPLE);
    while (!rc) {
        size_t n = v.mv_size / sizeof(uint32_t);
        out->v = lc_xgrow(out->v, &out->cap, out->n + n, sizeof(uint32_t));
        memcpy(out->v + out->n, v.mv_data, n * sizeof(uint32_t));
        out->n += n;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_MULTIPLE);
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : lc_store__mdb_fail(rc, "postings read");
}

/* a &= b, both sorted. */
static void idlist_intersect(idlist_t *a, const idlist_t *b)
{
    size_t i = 0, j = 0, n = 0;
    while (i < a->n && j < b->n) {
        if (a->v[i] < b->v[j])
            i++;
        else if (a->v[i] > b->v[j])
            j++;
        else
            a->v[n++] = a->v[i++], j++;
    }
    a->n = n;
}

static bool matcher_uses_postings(const lc_matcher_t *m)
{
    return m->op == LC_MATCH_EQ && m->value && *m->value;
}

/* Candidate series of one tenant: the intersection of the postings of every
 * non-empty equality matcher, or all of the tenant's series. A superset is
 * fine (hashed keys may collide); the caller checks each candidate. */
static int series_candidates(lc_block_t *b, const char *tenant, const lc_selector_t *sel,
                             idlist_t *out)
{
    uint8_t key[STORE_POSTING_BUF];
    idlist_t one = {0};
    bool first = true;
    int rc = 0;
    for (size_t i = 0; sel && i < sel->n && !rc && (first || out->n); i++) {
        if (!matcher_uses_postings(&sel->m[i]))
            continue;
        size_t klen = lc_store__posting_key(key, tenant, sel->m[i].name, sel->m[i].value);
        rc = posting_read(b, key, klen, first ? out : &one);
        if (!rc && !first)
            idlist_intersect(out, &one);
        first = false;
    }
    if (!rc && first)
        rc = posting_read(b, key, lc_store__posting_key(key, tenant, "", ""), out);
    lc_free(one.v);
    return rc;
}

static int symbol_get(lc_block_t *b, store_db_t db, uint32_t id, uint64_t count, MDB_val *v);

/* Checks one candidate and hands it to the callback if it matches. */
static int series_visit(lc_block_t *b, uint32_t id, const char *tenant, const lc_selector_t *sel,
                        lc_block_series_cb cb, void *data)
{
    MDB_val v;
    int rc = symbol_get(b, DB_SERIES, id, b->meta.series, &v);
    if (rc)
        return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
    size_t tl = strlen(tenant) + 1;
    if (v.mv_size < tl || memcmp(v.mv_data, tenant, tl) != 0)
        return 0; /* a hashed posting key collided with another tenant's */
    lc_labels_t ls;
    rc = lc_labels_decode((const uint8_t *)v.mv_data + tl, v.mv_size - tl, &ls);
    if (rc)
        return LC_ECORRUPT;
    int hit = sel ? lc_selector_match(sel, &ls) : 1;
    if (hit < 0)
        rc = hit; /* LC_EREGEX: undecided is an error answer, never a miss */
    else if (hit)
        rc = cb(b, id, tenant, &ls, data);
    lc_labels_fini(&ls);
    return rc;
}

int lc_block_series(lc_block_t *b, const char *const *tenants, size_t n_tenants,
                    const lc_selector_t *sel, lc_block_series_cb cb, void *data)
{
    idlist_t ids = {0};
    int rc = 0;
    for (size_t t = 0; t < n_tenants && !rc; t++) {
        rc = series_candidates(b, tenants[t], sel, &ids);
        for (size_t i = 0; i < ids.n && !rc; i++)
            rc = series_visit(b, ids.v[i], tenants[t], sel, cb, data);
    }
    lc_free(ids.v);
    return rc;
}

/* ---------------------------------------------------------------- profiles */

/* The profile id after the flags, when they say there is one. Blocks written
 * before the flag existed simply never set it. */
static int profile_id_decode(const uint8_t *s, const uint8_t *end, lc_stored_profile_t *p)
{
    uint64_t flags;
    if (store_get_uvarint(&s, end, &flags) || (flags & ~(uint64_t)STORE_PF_ALL))
        return LC_ECORRUPT;
    p->has_profile_id = (flags & STORE_PF_PROFILE_ID) != 0;
    if (!p->has_profile_id)
        return 0;
    if ((size_t)(end - s) < LC_STORE_PROFILE_ID_BYTES)
        return LC_ECORRUPT;
    memcpy(p->profile_id, s, LC_STORE_PROFILE_ID_BYTES);
    return 0;
}

/* Splits a stored value into header fields and the encoded samples. */
int lc_store__profile_value_decode(const MDB_val *v, lc_stored_profile_t *p)
{
    const uint8_t *s = v->mv_data, *end = s + v->mv_size;
    uint64_t total, n;
    if (store_get_uvarint(&s, end, &total) || store_get_uvarint(&s, end, &n) || n > UINT32_MAX ||
        profile_id_decode(s, end, p))
        return LC_ECORRUPT;
    p->total = store_unzigzag(total);
    p->n_samples = (uint32_t)n;
    p->_data = s;
    p->_len = (size_t)(end - s);
    return 0;
}

static int profile_decode(const MDB_val *k, const MDB_val *v, lc_stored_profile_t *p)
{
    p->series_id = lc_store__profile_key_series(k->mv_data);
    p->time_ns = lc_store__profile_key_time(k->mv_data);
    return lc_store__profile_value_decode(v, p);
}

bool lc_block_covers(lc_block_t *b, int64_t start_ns, int64_t end_ns)
{
    const store_meta_t *m = &b->meta;
    return m->profiles == 0 || (start_ns <= m->min_time_ns && m->max_time_ns <= end_ns);
}

int lc_block_summary(lc_block_t *b, uint32_t series_id, lc_stored_profile_t *out)
{
    if (!b->b->has_summaries)
        return LC_ENOTFOUND;
    unsigned key = series_id;
    MDB_val k = store_val(&key, sizeof(key)), v;
    int rc = mdb_get(b->txn, b->b->dbi[DB_SUMMARIES], &k, &v);
    if (rc == MDB_NOTFOUND)
        return LC_ENOTFOUND;
    if (rc)
        return lc_store__mdb_fail(rc, "summary get");
    /* A compacted block's summaries are compressed like its profiles. */
    *out = (lc_stored_profile_t){
        .series_id = series_id, .time_ns = b->meta.min_time_ns, ._unpack = &b->unpack};
    rc = lc_store__profile_value_decode(&v, out);
    return rc == 0 && out->has_profile_id ? LC_ECORRUPT : rc;
}

int lc_store__profiles_scan(MDB_txn *txn, MDB_dbi dbi, store_unpack_t *up, uint32_t series_id,
                            int64_t start_ns, int64_t end_ns, store_profile_fn fn, void *data)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (profiles)");
    uint8_t first[STORE_PROFILE_KEY_LEN];
    lc_store__profile_key(first, series_id, start_ns, 0);
    MDB_val k = store_val(first, sizeof(first)), v;
    int ret = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc && !ret;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        lc_stored_profile_t p;
        if (k.mv_size != STORE_PROFILE_KEY_LEN ||
            lc_store__profile_key_series(k.mv_data) != series_id ||
            lc_store__profile_key_time(k.mv_data) > end_ns)
            break;
        ret = profile_decode(&k, &v, &p);
        p._unpack = up;
        if (!ret)
            ret = fn(&p, data);
    }
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND)
        return lc_store__mdb_fail(rc, "profiles scan");
    return ret;
}

typedef struct block_scan_s {
    lc_block_t *b;
    lc_block_profile_cb cb;
    void *data;
} block_scan_t;

static int block_scan_profile(const lc_stored_profile_t *p, void *data)
{
    block_scan_t *bs = data;
    return bs->cb(bs->b, p, bs->data);
}

int lc_block_profiles(lc_block_t *b, uint32_t series_id, int64_t start_ns, int64_t end_ns,
                      lc_block_profile_cb cb, void *data)
{
    block_scan_t bs = {.b = b, .cb = cb, .data = data};
    return lc_store__profiles_scan(b->txn, b->b->dbi[DB_PROFILES], &b->unpack, series_id, start_ns,
                                   end_ns, block_scan_profile, &bs);
}

void lc_sample_iter_init(lc_sample_iter_t *it, const lc_stored_profile_t *p)
{
    uint64_t flags;
    it->p = p->_data;
    it->end = p->_data + p->_len;
    it->node = 0;
    if (store_get_uvarint(&it->p, it->end, &flags) || (flags & ~(uint64_t)STORE_PF_ALL))
        it->flags = STORE_PF_CORRUPT;
    else
        it->flags = (uint32_t)flags;
    if (it->flags & STORE_PF_PROFILE_ID) { /* the id was read by lc_block_profiles */
        if ((size_t)(it->end - it->p) < LC_STORE_PROFILE_ID_BYTES)
            it->flags = STORE_PF_CORRUPT;
        else
            it->p += LC_STORE_PROFILE_ID_BYTES;
    }
    uint64_t scale = 1;
    if ((it->flags & STORE_PF_SCALED) &&
        (store_get_uvarint(&it->p, it->end, &scale) || scale < 2 || scale > INT64_MAX))
        it->flags = STORE_PF_CORRUPT;
    it->scale = (int64_t)scale;
    if (it->flags & STORE_PF_ZSTD) { /* a compacted block: unpack the samples first */
        size_t len = 0;
        if (!p->_unpack ||
            lc_store__unpack(p->_unpack, it->p, (size_t)(it->end - it->p), &it->p, &len))
            it->flags = STORE_PF_CORRUPT;
        else
            it->end = it->p + len;
    }
}

int lc_sample_iter_next(lc_sample_iter_t *it, uint32_t *node, int64_t *value, uint64_t *span_id)
{
    if (it->flags & STORE_PF_CORRUPT)
        return LC_ECORRUPT;
    if (it->p == it->end)
        return 0;
    uint64_t delta, v, span = 0;
    if (store_get_uvarint(&it->p, it->end, &delta) || delta > UINT32_MAX - it->node ||
        store_get_uvarint(&it->p, it->end, &v) ||
        ((it->flags & STORE_PF_SPANS) && store_get_uvarint(&it->p, it->end, &span))) {
        it->flags |= STORE_PF_CORRUPT;
        return LC_ECORRUPT;
    }
    it->node += (uint32_t)delta;
    *node = it->node;
    *value = store_unzigzag(v);
    if (it->scale != 1 && __builtin_mul_overflow(*value, it->scale, value)) {
        it->flags |= STORE_PF_CORRUPT;
        return LC_ECORRUPT;
    }
    if (span_id)
        *span_id = span;
    return 1;
}

/* ---------------------------------------------------------------- tree */

uint32_t lc_block_node_count(lc_block_t *b)
{
    return (uint32_t)b->meta.nodes;
}

/* Checks parent < child and location ids in range, so that merges can index
 * arrays with these values without further checks. */
int lc_block_nodes(lc_block_t *b, uint32_t *parents, uint32_t *locations, size_t n)
{
    return lc_store__nodes_read(b->txn, b->b->dbi, &b->meta, parents, locations, n);
}

/* ---------------------------------------------------------------- symbols */

/* The packed part of a symbol table (format 6), decoded on first use. */
static int symbol_packed(lc_block_t *b, store_db_t db, uint64_t count, store_packed_t **out)
{
    unsigned bit = 1u << db;
    store_packed_t *t = &b->packed[db];
    *out = t;
    if (b->packed_loaded & bit)
        return 0;
    int rc = lc_store__packed_load(b->txn, b->b->dbi[DB_META], db, count, t);
    if (!rc)
        b->packed_loaded |= bit;
    return rc;
}

static int symbol_get(lc_block_t *b, store_db_t db, uint32_t id, uint64_t count, MDB_val *v)
{
    if (id == 0 || id > count)
        return LC_ENOTFOUND;
    store_packed_t *t;
    int rc = symbol_packed(b, db, count, &t);
    if (rc)
        return rc;
    if (id <= t->n) {
        lc_store__packed_get(t, id, v);
        return 0;
    }
    MDB_val k = store_val(&id, sizeof(id));
    rc = mdb_get(b->txn, b->b->dbi[db], &k, v);
    if (rc)
        return lc_store__mdb_fail(rc == MDB_NOTFOUND ? LC_ECORRUPT : rc, "symbol get");
    return 0;
}

/* Decodes varints into u64s; every one must be present. */
static int varints_get(const uint8_t **p, const uint8_t *end, uint64_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (store_get_uvarint(p, end, &out[i]))
            return LC_ECORRUPT;
    return 0;
}

static int location_decode(lc_block_t *b, const MDB_val *v, lc_store_location_t **out)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size;
    uint64_t head[3];
    if (varints_get(&p, end, head, 3) || head[0] > b->meta.mappings ||
        head[2] > (size_t)(end - p) / 2) /* each line takes at least two bytes */
        return LC_ECORRUPT;
    lc_store_location_t *loc = lc_arena_alloc(b->arena, sizeof(*loc));
    lc_store_line_t *lines = lc_arena_calloc(b->arena, head[2], sizeof(*lines));
    if (!loc || (!lines && head[2]))
        return LC_ETOOBIG;
    for (size_t i = 0; i < head[2]; i++) {
        uint64_t line[2];
        if (varints_get(&p, end, line, 2) || line[0] > b->meta.functions)
            return LC_ECORRUPT;
        lines[i] =
            (lc_store_line_t){.function_id = (uint32_t)line[0], .line = store_unzigzag(line[1])};
    }
    *loc = (lc_store_location_t){
        .mapping_id = (uint32_t)head[0], .address = head[1], .n_lines = head[2], .lines = lines};
    *out = loc;
    return 0;
}

static int location_cache_init(lc_block_t *b)
{
    if (!b->arena)
        b->arena = lc_arena_new(STORE_READER_ARENA_MAX);
    b->loc_cache = lc_arena_calloc(b->arena, b->meta.locations + 1, sizeof(*b->loc_cache));
    return b->loc_cache ? 0 : LC_ETOOBIG;
}

int lc_block_location(lc_block_t *b, uint32_t id, lc_store_location_t *out)
{
    if (id == 0 || id > b->meta.locations)
        return LC_ENOTFOUND;
    int rc = b->loc_cache ? 0 : location_cache_init(b);
    if (rc)
        return rc;
    if (!b->loc_cache[id]) {
        MDB_val v;
        rc = symbol_get(b, DB_LOCATIONS, id, b->meta.locations, &v);
        if (!rc)
            rc = location_decode(b, &v, &b->loc_cache[id]);
        if (rc)
            return rc;
    }
    *out = *b->loc_cache[id];
    return 0;
}

int lc_block_function(lc_block_t *b, uint32_t id, lc_store_function_t *out)
{
    MDB_val v;
    int rc = symbol_get(b, DB_FUNCTIONS, id, b->meta.functions, &v);
    if (rc)
        return rc;
    const uint8_t *p = v.mv_data;
    uint64_t f[4];
    if (varints_get(&p, p + v.mv_size, f, 4) || f[0] >= b->meta.strings ||
        f[1] >= b->meta.strings || f[2] >= b->meta.strings)
        return LC_ECORRUPT;
    *out = (lc_store_function_t){.name = (uint32_t)f[0],
                                 .system_name = (uint32_t)f[1],
                                 .filename = (uint32_t)f[2],
                                 .start_line = store_unzigzag(f[3])};
    return 0;
}

int lc_block_mapping(lc_block_t *b, uint32_t id, lc_store_mapping_t *out)
{
    MDB_val v;
    int rc = symbol_get(b, DB_MAPPINGS, id, b->meta.mappings, &v);
    if (rc)
        return rc;
    const uint8_t *p = v.mv_data;
    uint64_t f[6];
    if (varints_get(&p, p + v.mv_size, f, 6) || f[3] >= b->meta.strings || f[4] >= b->meta.strings)
        return LC_ECORRUPT;
    *out = (lc_store_mapping_t){.memory_start = f[0],
                                .memory_limit = f[1],
                                .file_offset = f[2],
                                .filename = (uint32_t)f[3],
                                .build_id = (uint32_t)f[4],
                                .has_functions = f[5] & 1,
                                .has_filenames = f[5] & 2,
                                .has_line_numbers = f[5] & 4,
                                .has_inline_frames = f[5] & 8};
    return 0;
}

int lc_block_string(lc_block_t *b, uint32_t id, const char **s, size_t *len)
{
    if (id == 0) {
        *s = "";
        *len = 0;
        return 0;
    }
    MDB_val v;
    int rc = symbol_get(b, DB_STRINGS, id, b->meta.strings - 1, &v);
    if (rc)
        return rc;
    *s = v.mv_data;
    *len = v.mv_size;
    return 0;
}

/* The mapping of a location without lines, as lc/frame_name.h reads it. */
static int frame_mapping(lc_block_t *b, const lc_store_location_t *l, lc_frame_mapping_t *fm)
{
    lc_store_mapping_t sm;
    int rc = lc_block_mapping(b, l->mapping_id, &sm);
    if (!rc)
        rc = lc_block_string(b, sm.filename, &fm->file, &fm->file_len);
    if (!rc)
        rc = lc_block_string(b, sm.build_id, &fm->build_id, &fm->build_id_len);
    fm->memory_start = sm.memory_start;
    fm->file_offset = sm.file_offset;
    return rc;
}

bool lc_store_reader_symbolizes(const lc_store_reader_t *r)
{
    return r->scope.sym != NULL;
}

bool lc_block_location_symbolizable(lc_block_t *b, const lc_store_location_t *l)
{
    lc_frame_mapping_t fm;
    return l->n_lines == 0 && l->mapping_id != 0 && frame_mapping(b, l, &fm) == 0 &&
           fm.build_id_len > 0;
}

/* The frames the reader's symbolizer finds for a location without lines
 * (out->n = 0: none, or no symbolizer), in the block's arena. */
static int location_symbols(lc_block_t *b, const lc_store_location_t *l, lc_symbols_t *out)
{
    out->n = 0;
    if (!b->scope || l->mapping_id == 0 || l->n_lines)
        return 0;
    lc_frame_mapping_t fm;
    int rc = frame_mapping(b, l, &fm);
    if (rc || fm.build_id_len == 0)
        return rc;
    if (!b->arena)
        b->arena = lc_arena_new(STORE_READER_ARENA_MAX);
    return lc_symbolize(b->scope, fm.build_id, fm.build_id_len,
                        lc_frame_file_offset(&fm, l->address), b->arena, out);
}

/* The name of a location without lines, from its mapping (if any). */
static int address_frame_name(lc_block_t *b, const lc_store_location_t *l,
                              char scratch[LC_FRAME_NAME_MAX], size_t *len)
{
    if (l->mapping_id == 0) {
        *len = lc_frame_address_name(NULL, l->address, scratch);
        return 0;
    }
    lc_frame_mapping_t fm;
    int rc = frame_mapping(b, l, &fm);
    if (rc)
        return rc;
    *len = lc_frame_address_name(&fm, l->address, scratch);
    return 0;
}

int lc_block_symbols(lc_block_t *b, const lc_store_location_t *l, lc_symbols_t *out)
{
    return location_symbols(b, l, out);
}

size_t lc_block_frame_count(lc_block_t *b, const lc_store_location_t *l)
{
    if (l->n_lines)
        return l->n_lines;
    lc_symbols_t sy;
    return location_symbols(b, l, &sy) == 0 && sy.n ? sy.n : 1;
}

int lc_block_frame_name(lc_block_t *b, const lc_store_location_t *l, size_t j,
                        char scratch[LC_FRAME_NAME_MAX], const char **s, size_t *len)
{
    if (l->n_lines == 0) {
        lc_symbols_t sy;
        int rc = location_symbols(b, l, &sy);
        if (rc == 0 && j < sy.n) {
            *s = sy.frames[sy.n - 1 - j].function;
            *len = strlen(*s);
            return 0;
        }
        *s = scratch;
        return address_frame_name(b, l, scratch, len);
    }
    if (j >= l->n_lines)
        return LC_ECORRUPT;
    lc_store_function_t fn;
    int rc = lc_block_function(b, l->lines[l->n_lines - 1 - j].function_id, &fn);
    return rc ? rc : lc_block_string(b, fn.name, s, len);
}
