/*
 * store_helpers.c — what every part of the store shares, below all of them:
 * the DB table (names, flags), LMDB error mapping, the block meta record, the
 * key encodings of postings and profiles, time partitions and file-system
 * helpers. Calls nothing else of the store, so the registry (store.c), the
 * writer and the passes (read, rollup, compact, summary, wstate) all build
 * on it without a circle. Threading: pure functions over their arguments.
 */
#define _GNU_SOURCE /* nftw's FTW_DEPTH / FTW_PHYS */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lc/log.h"
#include "store_int.h"

static const char *const store_db_names[DB_COUNT] = {
    "meta",   "strings",  "functions", "mappings", "locations",  "nodes",
    "series", "postings", "profiles",  "applied",  "deliveries", "summaries",
};

static const unsigned store_db_flags[DB_COUNT] = {
    [DB_STRINGS] = MDB_INTEGERKEY,
    [DB_FUNCTIONS] = MDB_INTEGERKEY,
    [DB_MAPPINGS] = MDB_INTEGERKEY,
    [DB_LOCATIONS] = MDB_INTEGERKEY,
    [DB_NODES] = MDB_INTEGERKEY,
    [DB_SERIES] = MDB_INTEGERKEY,
    [DB_POSTINGS] = MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP,
    [DB_SUMMARIES] = MDB_INTEGERKEY,
};

int lc_store__mdb_fail(int rc, const char *what)
{
    if (rc <= LC_EBASE && rc >= LC_ELAST)
        return rc; /* already ours: pass through */
    LC_LOG_ERROR("store: %s failed err=\"%s\"", what, mdb_strerror(rc));
    return LC_ESTORE;
}

/* ---------------------------------------------------------------- files */

int lc_store__mkdir_one(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    int err = -errno;
    LC_LOG_ERROR("store: mkdir failed path=%s err=\"%s\"", path, strerror(-err));
    return err;
}

int lc_store__mkdir_parents(const char *path)
{
    char *p = lc_xstrdup(path);
    int rc = 0;
    for (char *c = p + 1; *c && !rc; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        rc = lc_store__mkdir_one(p);
        *c = '/';
    }
    if (!rc)
        rc = lc_store__mkdir_one(p);
    lc_free(p);
    return rc;
}

char *lc_store__path_join(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 2;
    char *p = lc_xmalloc(len);
    snprintf(p, len, "%s/%s", a, b);
    return p;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    LC_UNUSED(sb);
    LC_UNUSED(flag);
    LC_UNUSED(ftw);
    if (remove(path) != 0)
        LC_LOG_WARN("store: remove failed path=%s err=\"%s\"", path, strerror(errno));
    return 0;
}

void lc_store__rm_tree(const char *path)
{
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        LC_LOG_WARN("store: delete failed path=%s err=\"%s\"", path, strerror(errno));
}

/* ---------------------------------------------------------------- meta */

void lc_store__meta_init(store_meta_t *m, int64_t start_ns, int64_t duration_ns)
{
    memset(m, 0, sizeof(*m));
    m->version = STORE_FORMAT_VERSION;
    m->start_ns = start_ns;
    m->duration_ns = duration_ns;
    m->min_time_ns = INT64_MAX;
    m->max_time_ns = INT64_MIN;
    m->nodes = 1;   /* the root */
    m->strings = 1; /* "" */
}

/* The record is the struct's fields as native u64s, in declaration order. */
int lc_store__meta_get(MDB_txn *txn, MDB_dbi dbi, store_meta_t *m)
{
    MDB_val k = store_val("info", 4), v;
    int rc = mdb_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND)
        return LC_ENOTFOUND;
    if (rc)
        return lc_store__mdb_fail(rc, "meta get");
    if (v.mv_size < STORE_META_FIELDS * 8)
        return LC_ECORRUPT;
    memcpy(m, v.mv_data, STORE_META_FIELDS * 8);
    return m->version >= STORE_FORMAT_VERSION_MIN && m->version <= STORE_FORMAT_VERSION_MAX
               ? 0
               : LC_ECORRUPT;
}

int lc_store__meta_put(MDB_txn *txn, MDB_dbi dbi, const store_meta_t *m)
{
    _Static_assert(sizeof(store_meta_t) == STORE_META_FIELDS * 8, "meta is packed u64s");
    MDB_val k = store_val("info", 4), v = store_val(m, sizeof(*m));
    int rc = mdb_put(txn, dbi, &k, &v, 0);
    return rc ? lc_store__mdb_fail(rc, "meta put") : 0;
}

/* ---------------------------------------------------------------- keys */

size_t lc_store__posting_key(uint8_t *buf, const char *tenant, const char *name, const char *value)
{
    size_t tl = strlen(tenant), nl = strlen(name), vl = strlen(value);
    if (tl + nl + vl + 2 <= STORE_POSTING_KEY_MAX) {
        memcpy(buf, tenant, tl + 1);
        memcpy(buf + tl + 1, name, nl + 1);
        memcpy(buf + tl + nl + 2, value, vl);
        return tl + nl + vl + 2;
    }
    /* Too long for an LMDB key: 0xff (never valid UTF-8, so no raw key starts
     * with it) and 128 bits of hash. Readers verify every hit anyway. */
    uint64_t h[2];
    for (int i = 0; i < 2; i++) {
        h[i] = lc_store__hash(tenant, tl, 0x51ed2701u + (uint64_t)i);
        h[i] = lc_store__hash(name, nl, h[i]);
        h[i] = lc_store__hash(value, vl, h[i]);
    }
    buf[0] = 0xff;
    memcpy(buf + 1, h, sizeof(h));
    return 1 + sizeof(h);
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* Big-endian with the time's sign bit flipped, so memcmp order is
 * (series, time, seq) order, negative times included. */
void lc_store__profile_key(uint8_t key[STORE_PROFILE_KEY_LEN], uint32_t series, int64_t time_ns,
                           uint32_t seq)
{
    put_be(key, series, 4);
    put_be(key + 4, (uint64_t)time_ns ^ (1ULL << 63), 8);
    put_be(key + 12, seq, 4);
}

int64_t lc_store__profile_key_time(const uint8_t *key)
{
    return (int64_t)(get_be(key + 4, 8) ^ (1ULL << 63));
}

uint32_t lc_store__profile_key_series(const uint8_t *key)
{
    return (uint32_t)get_be(key, 4);
}

uint32_t lc_store__profile_key_seq(const uint8_t *key)
{
    return (uint32_t)get_be(key + 12, 4);
}

/* ---------------------------------------------------------------- partitions */

int64_t lc_store__partition(const lc_store_t *s, int64_t time_ns)
{
    int64_t d = s->opts.block_duration_ns;
    int64_t q = time_ns / d;
    if (time_ns % d < 0)
        q--;
    return q * d;
}

/* ---------------------------------------------------------------- DB table */

const char *lc_store__db_name(int db)
{
    return store_db_names[db];
}

unsigned lc_store__db_flags(int db)
{
    return store_db_flags[db];
}
