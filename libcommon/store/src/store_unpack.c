/*
 * store_unpack.c — the samples of a compacted block's profile, decompressed
 * (zstd, with the block's dictionary from DB_META "zdict"; store_compact.c
 * writes them). Below both the readers and the compaction, which use it.
 * Threading: one store_unpack_t per reading thread.
 */
#include <string.h>
#include <zstd.h>

#include "store_int.h"

/* ---------------------------------------------------------------- unpacking */

void lc_store__unpack_init(store_unpack_t *u, MDB_txn *txn, MDB_dbi meta)
{
    memset(u, 0, sizeof(*u));
    u->txn = txn;
    u->meta = meta;
}

void lc_store__unpack_init_plain(store_unpack_t *u)
{
    memset(u, 0, sizeof(*u));
    u->loaded = true; /* no dictionary to look up */
    u->dctx = ZSTD_createDCtx();
}

void lc_store__unpack_fini(store_unpack_t *u)
{
    ZSTD_freeDCtx(u->dctx);
    ZSTD_freeDDict(u->ddict);
    lc_free(u->buf);
    memset(u, 0, sizeof(*u));
}

static int unpack_load(store_unpack_t *u)
{
    u->loaded = true;
    u->dctx = ZSTD_createDCtx();
    if (!u->dctx)
        return LC_ECORRUPT;
    MDB_val k = store_val("zdict", 5), v;
    int rc = mdb_get(u->txn, u->meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return 0; /* frames without a dictionary */
    if (rc)
        return lc_store__mdb_fail(rc, "zdict get");
    u->ddict = ZSTD_createDDict(v.mv_data, v.mv_size);
    return u->ddict ? 0 : LC_ECORRUPT;
}

int lc_store__unpack(store_unpack_t *u, const uint8_t *src, size_t len, const uint8_t **out,
                     size_t *out_len)
{
    int rc = u->loaded ? 0 : unpack_load(u);
    if (rc || !u->dctx)
        return rc ? rc : LC_ECORRUPT;
    const uint8_t *p = src, *end = src + len;
    uint64_t raw;
    if (store_get_uvarint(&p, end, &raw) || raw > STORE_MAX_UNPACKED ||
        raw > ((uint64_t)(end - p) / 3 + 1) * ZSTD_BLOCKSIZE_MAX)
        return LC_ECORRUPT; /* every zstd block of at most 128 KiB takes >= 3 bytes: a
                             * length no frame of this size can reach is corrupt, and is
                             * refused before the buffer is grown for it */
    u->buf = lc_xgrow(u->buf, &u->cap, raw + 1, 1);
    size_t got =
        u->ddict ? ZSTD_decompress_usingDDict(u->dctx, u->buf, raw, p, (size_t)(end - p), u->ddict)
                 : ZSTD_decompressDCtx(u->dctx, u->buf, raw, p, (size_t)(end - p));
    if (ZSTD_isError(got) || got != raw)
        return LC_ECORRUPT;
    *out = u->buf;
    *out_len = raw;
    return 0;
}
