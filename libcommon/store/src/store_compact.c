/*
 * store_compact.c — closed blocks rewritten smaller.
 *
 * The writer inserts each series' profiles at the end of that series' key
 * range, i.e. in the middle of the profiles tree, so LMDB splits leaves in
 * the middle and they stay about half full; and a profile's samples (~2 bytes
 * each) repeat what the series' other profiles hold. Once a block is closed,
 * quiet and summarised, it is rewritten into a fresh environment in key order
 * with MDB_APPEND (full leaves), its profiles' samples compressed with zstd
 * against a dictionary trained on that block (stored in DB_META "zdict"; the
 * profile header stays plain, so SelectSeries and profile-id filters never
 * decompress), and the new file replaces the old one.
 *
 * Crash safety: the rewrite is built in blocks/.compact-<name>/, renamed to
 * blocks/.compacted-<name>/ once complete and synced, then swapped in under
 * the registry mutex while no one holds the block (the old directory goes to
 * blocks/.old-<name>.<seq>/ and is deleted). lc_store__compact_recover runs at
 * open, before the scan: half-built rewrites and old copies are deleted, and a
 * complete rewrite whose block directory is missing (a crash between the two
 * renames) is renamed into place. Every state a kill leaves is one of: the old
 * block, the new block, or the new one waiting to be renamed.
 *
 * "Already compact" is the DB_META "compacted" record: the LMDB transaction id
 * that wrote it. A later commit (a late profile, its summary) moves the
 * environment's last transaction id past it, so the block is compacted again.
 * The symbol tables and the stack tree are packed into DB_META
 * (store_packed.c). Compacted blocks are format 6 (an older ember refuses
 * them instead of misreading). Retention is unchanged: it drops whole
 * directories.
 *
 * Threading: lc_store_compact runs on one thread at a time (the ingester's
 * summary work), beside the writer and the readers; it only reads the block
 * it rewrites, and swaps it when the block has no other reference.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include "lc/log.h"
#include "store_int.h"

#define COMPACT_DICT_BYTES (64u << 10)
#define COMPACT_TRAIN_MAX (8u << 20)   /* sample bytes given to the trainer at most */
#define COMPACT_MIN_RAW (128u << 10)   /* fewer sample bytes: no dictionary, no zstd */
#define COMPACT_TXN_BYTES (256u << 20) /* the rewrite commits in steps of this */
#define COMPACT_LEVEL 3
/* The packed tables (store_packed.c) are a few MiB an hour at most and read
 * whole: a higher level costs little once and saves on every block. */
#define COMPACT_TABLE_LEVEL 9

/* ---------------------------------------------------------------- files */

static char *compact_path(const char *blocks_dir, const char *prefix, const char *name)
{
    size_t len = strlen(blocks_dir) + strlen(prefix) + strlen(name) + 2;
    char *p = lc_xmalloc(len);
    snprintf(p, len, "%s/%s%s", blocks_dir, prefix, name);
    return p;
}

/* Makes renames in the directory durable (a kill needs no sync; a power cut does). */
static void compact_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (fsync(fd) != 0)
        LC_LOG_WARN("store: fsync failed path=%s err=\"%s\"", dir, strerror(errno));
    close(fd);
}

static bool compact_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ".compacted-<name>" whose <name> is missing: the crash came between the
 * swap's renames, so it is the block. Else a leftover. */
static void recover_ready(const char *blocks_dir, const char *name)
{
    char *ready = compact_path(blocks_dir, ".compacted-", name);
    char *block = compact_path(blocks_dir, "", name);
    if (!compact_exists(block)) {
        if (rename(ready, block) == 0)
            LC_LOG_INFO("store: finished an interrupted compaction path=%s", block);
        else
            LC_LOG_ERROR("store: rename failed path=%s err=\"%s\"", ready, strerror(errno));
        compact_sync_dir(blocks_dir);
    } else {
        lc_store__rm_tree(ready);
    }
    lc_free(ready);
    lc_free(block);
}

/* ".old-<name>.<seq>": the replaced copy; put back only if <name> is missing. */
static void recover_old(const char *blocks_dir, const char *entry)
{
    char *old = compact_path(blocks_dir, "", entry);
    char *name = lc_xstrdup(entry + 5);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
    char *block = compact_path(blocks_dir, "", name);
    if (dot && !compact_exists(block) && rename(old, block) == 0)
        LC_LOG_WARN("store: restored a block from before its compaction path=%s", block);
    else
        lc_store__rm_tree(old);
    lc_free(old);
    lc_free(name);
    lc_free(block);
}

static void recover_pass(const char *blocks_dir, const char *prefix)
{
    DIR *d = opendir(blocks_dir);
    if (!d)
        return;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        if (strcmp(prefix, ".compact-") == 0) {
            char *p = compact_path(blocks_dir, "", e->d_name);
            lc_store__rm_tree(p); /* a rewrite a crash interrupted */
            lc_free(p);
        } else if (strcmp(prefix, ".compacted-") == 0) {
            recover_ready(blocks_dir, e->d_name + plen);
        } else {
            recover_old(blocks_dir, e->d_name);
        }
    }
    closedir(d);
}

void lc_store__compact_recover(const char *blocks_dir)
{
    recover_pass(blocks_dir, ".compact-");
    recover_pass(blocks_dir, ".compacted-");
    recover_pass(blocks_dir, ".old-");
}

/* ---------------------------------------------------------------- profile values */

/* A profile value split: the header (total, n, flags, [id], [scale]) and the
 * samples, unpacked when they were compressed. */
typedef struct pv_s {
    const uint8_t *head; /* up to and excluding the flags varint */
    size_t head_len;
    uint64_t flags;
    const uint8_t *tail; /* after the flags up to the samples: id, scale */
    size_t tail_len;
    const uint8_t *samples;
    size_t samples_len;
} pv_t;

static int pv_split(const MDB_val *v, store_unpack_t *up, pv_t *pv)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size;
    uint64_t total, n, scale;
    if (store_get_uvarint(&p, end, &total) || store_get_uvarint(&p, end, &n))
        return LC_ECORRUPT;
    pv->head = v->mv_data;
    pv->head_len = (size_t)(p - pv->head);
    if (store_get_uvarint(&p, end, &pv->flags) || (pv->flags & ~(uint64_t)STORE_PF_ALL))
        return LC_ECORRUPT;
    pv->tail = p;
    if (pv->flags & STORE_PF_PROFILE_ID) {
        if ((size_t)(end - p) < LC_STORE_PROFILE_ID_BYTES)
            return LC_ECORRUPT;
        p += LC_STORE_PROFILE_ID_BYTES;
    }
    if ((pv->flags & STORE_PF_SCALED) && store_get_uvarint(&p, end, &scale))
        return LC_ECORRUPT;
    pv->tail_len = (size_t)(p - pv->tail);
    if (pv->flags & STORE_PF_ZSTD) {
        pv->flags &= ~(uint64_t)STORE_PF_ZSTD;
        return lc_store__unpack(up, p, (size_t)(end - p), &pv->samples, &pv->samples_len);
    }
    pv->samples = p;
    pv->samples_len = (size_t)(end - p);
    return 0;
}

/* The raw sample bytes of a value without unpacking (its varint length). */
static size_t pv_raw_len(const MDB_val *v)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size;
    uint64_t total, n, flags, raw, x;
    if (store_get_uvarint(&p, end, &total) || store_get_uvarint(&p, end, &n) ||
        store_get_uvarint(&p, end, &flags))
        return 0;
    if (flags & STORE_PF_PROFILE_ID)
        p += (size_t)(end - p) < LC_STORE_PROFILE_ID_BYTES ? (size_t)(end - p)
                                                           : LC_STORE_PROFILE_ID_BYTES;
    if ((flags & STORE_PF_SCALED) && store_get_uvarint(&p, end, &x))
        return 0;
    if (!(flags & STORE_PF_ZSTD))
        return (size_t)(end - p);
    return store_get_uvarint(&p, end, &raw) || raw > STORE_MAX_UNPACKED ? 0 : (size_t)raw;
}

/* ---------------------------------------------------------------- the rewrite */

typedef struct compact_s {
    store_block_t *b;
    MDB_txn *rtxn; /* the old environment, one snapshot */
    store_unpack_t up;
    MDB_env *env; /* the new one */
    MDB_txn *wtxn;
    MDB_dbi dbi[DB_COUNT];
    size_t txn_bytes; /* written since the last step commit */
    ZSTD_CCtx *cctx;
    ZSTD_CDict *cdict;
    uint8_t *dict;
    size_t dict_len;
    lc_buf_t enc;
    uint8_t *zbuf;
    size_t zcap;
    uint64_t packed; /* profiles and summaries whose samples were compressed */
} compact_t;

static int compact_env_open(const lc_store_t *s, const char *path, MDB_env **out)
{
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc)
        return lc_store__mdb_fail(rc, "env create (compact)");
    rc = mdb_env_set_maxdbs(env, DB_COUNT);
    if (!rc)
        rc = mdb_env_set_mapsize(env, s->opts.map_size_bytes);
    if (!rc)
        rc = mdb_env_open(env, path, MDB_NOTLS, 0644);
    if (rc) {
        mdb_env_close(env);
        return lc_store__mdb_fail(rc, "env open (compact)");
    }
    *out = env;
    return 0;
}

/* Gathers every k-th profile's samples (at most COMPACT_TRAIN_MAX bytes) and
 * trains the block's dictionary on them. No dictionary for small blocks. */
static int compact_train(compact_t *c)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(c->rtxn, c->b->dbi[DB_PROFILES], &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (compact)");
    MDB_val k, v;
    uint64_t total = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        total += pv_raw_len(&v);
    if (total < COMPACT_MIN_RAW) {
        mdb_cursor_close(cur);
        return 0;
    }
    uint64_t every = total / COMPACT_TRAIN_MAX + 1, i = 0;
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    size_t *sizes = NULL, n = 0, cap = 0;
    int ret = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && !ret;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        pv_t pv;
        if (i++ % every || pv_split(&v, &c->up, &pv) || !pv.samples_len)
            continue;
        sizes = lc_xgrow(sizes, &cap, n + 1, sizeof(*sizes));
        sizes[n++] = pv.samples_len;
        ret = lc_buf_append(&buf, pv.samples, pv.samples_len);
    }
    mdb_cursor_close(cur);
    if (!ret && n >= 8 && n <= UINT32_MAX) {
        /* A dictionary of at most a quarter of what it describes. */
        size_t dcap = total / 4 < COMPACT_DICT_BYTES ? (size_t)total / 4 : COMPACT_DICT_BYTES;
        c->dict = lc_xmalloc(dcap);
        size_t got = ZDICT_trainFromBuffer(c->dict, dcap, buf.data, sizes, (unsigned)n);
        if (ZDICT_isError(got)) {
            LC_LOG_DEBUG("store: no dictionary block=%" PRId64 " err=\"%s\"", c->b->start_ns,
                         ZDICT_getErrorName(got));
            lc_free(c->dict);
            c->dict = NULL;
        } else {
            c->dict_len = got;
        }
    }
    lc_free(sizes);
    lc_buf_fini(&buf);
    return ret;
}

static int compact_zstd_setup(compact_t *c)
{
    c->cctx = ZSTD_createCCtx();
    c->cdict = c->cctx ? ZSTD_createCDict(c->dict, c->dict_len, COMPACT_LEVEL) : NULL;
    if (!c->cdict)
        return LC_ECORRUPT;
    size_t r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, COMPACT_LEVEL);
    if (!ZSTD_isError(r)) /* the raw length is stored beside the frame */
        r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 0);
    if (!ZSTD_isError(r)) /* one dictionary per block: its id says nothing */
        r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_dictIDFlag, 0);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_refCDict(c->cctx, c->cdict);
    return ZSTD_isError(r) ? LC_ECORRUPT : 0;
}

/* The profile value rewritten: samples as a zstd frame when that is smaller. */
static int compact_profile(compact_t *c, const MDB_val *v, MDB_val *out)
{
    pv_t pv;
    int rc = pv_split(v, &c->up, &pv);
    if (rc)
        return rc;
    lc_buf_t *e = &c->enc;
    lc_buf_reset(e);
    size_t zlen = 0;
    if (c->cctx && pv.samples_len > 16) {
        size_t bound = ZSTD_compressBound(pv.samples_len);
        c->zbuf = lc_xgrow(c->zbuf, &c->zcap, bound, 1);
        zlen = ZSTD_compress2(c->cctx, c->zbuf, bound, pv.samples, pv.samples_len);
        if (ZSTD_isError(zlen) || zlen + 10 >= pv.samples_len)
            zlen = 0;
    }
    uint8_t vi[20], *p = store_put_uvarint(vi, pv.flags | (zlen ? STORE_PF_ZSTD : 0));
    rc = lc_buf_append(e, pv.head, pv.head_len);
    if (!rc)
        rc = lc_buf_append(e, vi, (size_t)(p - vi));
    if (!rc)
        rc = lc_buf_append(e, pv.tail, pv.tail_len);
    if (!rc && zlen) {
        p = store_put_uvarint(vi, pv.samples_len);
        rc = lc_buf_append(e, vi, (size_t)(p - vi));
        if (!rc)
            rc = lc_buf_append(e, c->zbuf, zlen);
        c->packed++;
    } else if (!rc) {
        rc = lc_buf_append(e, pv.samples, pv.samples_len);
    }
    *out = store_val(e->data, e->len);
    return rc;
}

/* Commits the rewrite so far and goes on in a new transaction: one
 * transaction for a block of several GiB would hold all its dirty pages. */
static int compact_step(compact_t *c, size_t bytes)
{
    c->txn_bytes += bytes;
    if (c->txn_bytes < COMPACT_TXN_BYTES)
        return 0;
    c->txn_bytes = 0;
    int rc = mdb_txn_commit(c->wtxn);
    c->wtxn = NULL;
    if (!rc)
        rc = mdb_txn_begin(c->env, NULL, 0, &c->wtxn);
    return rc ? lc_store__mdb_fail(rc, "txn step (compact)") : 0;
}

static bool compact_meta_own(const MDB_val *k)
{
    return (k->mv_size == 9 && memcmp(k->mv_data, "compacted", 9) == 0) ||
           (k->mv_size == 5 && memcmp(k->mv_data, "zdict", 5) == 0) ||
           (k->mv_size > 7 && memcmp(k->mv_data, "packed.", 7) == 0);
}

/* The symbol tables, the series and the tree, packed whole (or as records when too
 * large), from every record the old block has, packed or not. */
static int compact_tables(compact_t *c)
{
    store_meta_t m;
    int rc = lc_store__meta_get(c->rtxn, c->b->dbi[DB_META], &m);
    if (rc)
        return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
    const struct {
        store_db_t db;
        uint64_t count;
    } tables[] = {{DB_STRINGS, m.strings - 1},
                  {DB_FUNCTIONS, m.functions},
                  {DB_MAPPINGS, m.mappings},
                  {DB_LOCATIONS, m.locations},
                  {DB_SERIES, m.series}};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]) && !rc; i++)
        rc = lc_store__packed_write_table(c->rtxn, c->b->dbi, tables[i].db, tables[i].count,
                                          c->wtxn, c->dbi, COMPACT_TABLE_LEVEL);
    if (!rc)
        rc = lc_store__packed_write_nodes(c->rtxn, c->b->dbi, &m, c->wtxn, c->dbi,
                                          COMPACT_TABLE_LEVEL);
    return rc;
}

static bool compact_table_db(int db)
{
    return (db >= DB_STRINGS && db <= DB_LOCATIONS) || db == DB_NODES || db == DB_SERIES;
}

/* Copies one named DB in key order. Meta's own records are rewritten at the
 * end; postings (dupsort, a few pages) go in with plain puts. */
static int compact_copy_db(compact_t *c, int db)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(c->rtxn, c->b->dbi[db], &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (compact)");
    unsigned flags = db == DB_POSTINGS || db == DB_META ? 0 : MDB_APPEND;
    MDB_val k, v;
    int ret = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && !ret;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        MDB_val out = v;
        if (db == DB_META && compact_meta_own(&k))
            continue;
        if (db == DB_PROFILES || db == DB_SUMMARIES) /* the same encoding */
            ret = compact_profile(c, &v, &out);
        if (!ret && (ret = mdb_put(c->wtxn, c->dbi[db], &k, &out, flags)) != 0)
            ret = lc_store__mdb_fail(ret, "put (compact)");
        if (!ret)
            ret = compact_step(c, k.mv_size + out.mv_size);
    }
    mdb_cursor_close(cur);
    if (!ret && rc != MDB_NOTFOUND)
        ret = lc_store__mdb_fail(rc, "cursor (compact)");
    return ret;
}

/* The last transaction: the meta record (format 6: packed tables
 * compressed), the dictionary, and the "compacted" mark. */
static int compact_finish(compact_t *c)
{
    store_meta_t m;
    int rc = lc_store__meta_get(c->rtxn, c->b->dbi[DB_META], &m);
    if (rc)
        return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
    m.version = STORE_FORMAT_VERSION_COMPACT_PACKED; /* compact_tables */
    rc = lc_store__meta_put(c->wtxn, c->dbi[DB_META], &m);
    if (!rc && c->packed) {
        MDB_val k = store_val("zdict", 5), v = store_val(c->dict, c->dict_len);
        if ((rc = mdb_put(c->wtxn, c->dbi[DB_META], &k, &v, 0)) != 0)
            rc = lc_store__mdb_fail(rc, "zdict put");
    }
    if (!rc) {
        uint64_t id = mdb_txn_id(c->wtxn);
        MDB_val k = store_val("compacted", 9), v = store_val(&id, sizeof(id));
        if ((rc = mdb_put(c->wtxn, c->dbi[DB_META], &k, &v, 0)) != 0)
            rc = lc_store__mdb_fail(rc, "compacted put");
    }
    if (!rc) {
        rc = mdb_txn_commit(c->wtxn);
        c->wtxn = NULL;
        if (rc)
            rc = lc_store__mdb_fail(rc, "txn commit (compact)");
    }
    return rc;
}

static int compact_open_dbs(compact_t *c)
{
    int rc = mdb_txn_begin(c->env, NULL, 0, &c->wtxn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (compact)");
    for (int i = 0; i < DB_COUNT && !rc; i++)
        rc = mdb_dbi_open(c->wtxn, lc_store__db_name(i), MDB_CREATE | lc_store__db_flags(i),
                          &c->dbi[i]);
    return rc ? lc_store__mdb_fail(rc, "dbi open (compact)") : 0;
}

static int compact_write(const lc_store_t *s, compact_t *c, const char *dir)
{
    int rc = compact_env_open(s, dir, &c->env);
    if (!rc)
        rc = compact_train(c);
    if (!rc && c->dict)
        rc = compact_zstd_setup(c);
    if (!rc)
        rc = compact_open_dbs(c);
    /* Every DB the block has. A DB that older blocks may lack (summaries in
     * format 2, which is never compacted) must be skipped when absent. */
    for (int i = 0; i < DB_COUNT && !rc; i++)
        if ((i != DB_SUMMARIES || c->b->has_summaries) && !compact_table_db(i))
            rc = compact_copy_db(c, i);
    if (!rc)
        rc = compact_tables(c);
    if (!rc)
        rc = compact_finish(c);
    if (c->wtxn)
        mdb_txn_abort(c->wtxn);
    if (c->env)
        mdb_env_close(c->env); /* every commit was synced: data.mdb is durable */
    return rc;
}

/* Builds the rewrite of b into blocks/.compacted-<name>; *ready is its path. */
static int compact_build(lc_store_t *s, store_block_t *b, const char *name, char **ready)
{
    char *tmp = compact_path(s->blocks_dir, ".compact-", name);
    char *done = compact_path(s->blocks_dir, ".compacted-", name);
    lc_store__rm_tree(tmp);
    lc_store__rm_tree(done);
    compact_t c = {.b = b};
    lc_buf_init(&c.enc, LC_BUF_UNLIMITED);
    int rc = mkdir(tmp, 0755) == 0 ? 0 : -errno;
    if (!rc && (rc = mdb_txn_begin(b->env, NULL, MDB_RDONLY, &c.rtxn)) != 0)
        rc = lc_store__mdb_fail(rc, "txn begin (compact read)");
    if (!rc) {
        lc_store__unpack_init(&c.up, c.rtxn, b->dbi[DB_META]);
        rc = compact_write(s, &c, tmp);
        lc_store__unpack_fini(&c.up);
        mdb_txn_abort(c.rtxn);
    }
    if (!rc) { /* the lock file is made again, sized for the registry's options */
        char *lock = compact_path(tmp, "", "lock.mdb");
        unlink(lock);
        lc_free(lock);
        if (rename(tmp, done) != 0)
            rc = -errno;
        compact_sync_dir(s->blocks_dir);
    }
    ZSTD_freeCCtx(c.cctx);
    ZSTD_freeCDict(c.cdict);
    lc_free(c.dict);
    lc_free(c.zbuf);
    lc_buf_fini(&c.enc);
    if (rc) {
        LC_LOG_ERROR("store: compaction failed block=%s err=\"%s\"", name, lc_strerror(rc));
        lc_store__rm_tree(tmp);
        lc_free(done);
        done = NULL;
    }
    lc_free(tmp);
    *ready = done;
    return rc;
}

/* ---------------------------------------------------------------- the pass */

/* True when the block needs no rewrite: its format predates summaries (left
 * as it is), or nothing was committed since its compaction. */
static int compact_not_needed(store_block_t *b, bool *skip)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(b->env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (compact check)");
    store_meta_t m;
    rc = lc_store__meta_get(txn, b->dbi[DB_META], &m);
    MDB_val k = store_val("compacted", 9), v;
    *skip = rc == 0 && (m.version < 3 || m.profiles == 0);
    if (!rc && !*skip && mdb_get(txn, b->dbi[DB_META], &k, &v) == 0 && v.mv_size == 8) {
        uint64_t id;
        memcpy(&id, v.mv_data, 8);
        *skip = id == mdb_txn_id(txn);
    }
    mdb_txn_abort(txn);
    return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
}

static void compact_set(lc_store_t *s, store_block_t *b, uint64_t *field, uint64_t v)
{
    pthread_mutex_lock(&s->mu);
    *field = v;
    pthread_mutex_unlock(&s->mu);
}

static uint64_t block_bytes(const char *path)
{
    char *p = compact_path(path, "", "data.mdb");
    struct stat st;
    uint64_t n = stat(p, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
    lc_free(p);
    return n;
}

/* Swaps a built rewrite in; a busy block keeps it for a later pass. */
static int compact_swap(lc_store_t *s, store_block_t *b, uint64_t gen, const char *path,
                        const char *ready, lc_store_compact_stats_t *st)
{
    uint64_t before = block_bytes(path);
    char *old = NULL;
    /* First, so that no moment (nor a kill) leaves a stale rollup beside the new file. */
    int rc = lc_store__rollup_forget_block(s, b->start_ns);
    if (rc)
        return rc;
    rc = lc_store__block_swap(s, b, gen, ready, &old);
    if (rc == -EBUSY) {
        pthread_mutex_lock(&s->mu);
        bool dropped = b->dropped;
        pthread_mutex_unlock(&s->mu);
        if (dropped) /* retention took the block: its rewrite must not come back */
            lc_store__rm_tree(ready);
        else
            st->blocks_waiting++;
        return 0;
    }
    if (rc)
        return rc;
    compact_sync_dir(s->blocks_dir);
    lc_store__rm_tree(old);
    lc_free(old);
    pthread_mutex_lock(&s->mu);
    b->compacted_gen = gen;
    b->compact_ready_gen = UINT64_MAX;
    pthread_mutex_unlock(&s->mu);
    st->blocks_done++;
    st->bytes_before += before;
    st->bytes_after += block_bytes(path);
    return 0;
}

/* Builds (unless a rewrite of this very state waits) and swaps. */
static int compact_block(lc_store_t *s, store_block_t *b, uint64_t gen,
                         lc_store_compact_stats_t *st)
{
    /* b->path changes under mu if retention drops the block: the name is made
     * from the start, as store.c names block directories. */
    char name[32];
    snprintf(name, sizeof(name), "%012" PRId64, b->start_ns / 1000000000);
    char *ready = compact_path(s->blocks_dir, ".compacted-", name);
    int rc = 0;
    bool skip = false;
    if (b->compact_ready_gen != gen || !compact_exists(ready)) {
        lc_free(ready);
        ready = NULL;
        rc = compact_not_needed(b, &skip);
        if (!rc && skip)
            compact_set(s, b, &b->compacted_gen, gen);
        if (!rc && !skip)
            rc = compact_build(s, b, name, &ready);
        if (!rc && !skip)
            compact_set(s, b, &b->compact_ready_gen, gen);
    }
    if (!rc && !skip) {
        char *path = compact_path(s->blocks_dir, "", name);
        rc = compact_swap(s, b, gen, path, ready, st);
        lc_free(path);
    }
    lc_free(ready);
    return rc;
}

/* Closed and not compact at its last commit (summarised or not yet). */
static bool compact_pending(const store_block_t *b, const void *now_ns)
{
    return !b->dropped && b->end_ns <= *(const int64_t *)now_ns && b->compacted_gen != b->write_gen;
}

/* Closed, summarised since their last commit, not compact at that commit. */
static bool compact_due(const store_block_t *b, const void *now_ns)
{
    return compact_pending(b, now_ns) && b->summarized_gen == b->write_gen;
}

/* One block of the pass (lc_store__pass). */
static int compact_one(lc_store_t *s, store_block_t *b, uint64_t gen, void *st)
{
    return compact_block(s, b, gen, st);
}

int lc_store_compact(lc_store_t *s, int64_t now_ns, lc_store_compact_stats_t *stats)
{
    lc_store_compact_stats_t st = {0};
    int rc = lc_store__pass(s, compact_due, &now_ns, compact_one, &st);
    st.blocks_pending = lc_store__count(s, compact_pending, &now_ns);
    if (stats)
        *stats = st;
    return rc;
}
