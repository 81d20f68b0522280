/*
 * fuzz_store_unpack.c — arbitrary bytes as the compressed samples of a
 * compacted block's profile (store_compact.c: varint raw length, then a zstd
 * frame), unpacked with lc_store__unpack and, when that succeeds, walked as a
 * profile's samples with lc_sample_iter_*. This is what a reader runs over
 * LMDB bytes of a format-4 block.
 *
 * Checks: no crash or over-read; an unpack that succeeds returns exactly the
 * length it announced, and the frame of what it returned, made again with
 * zstd, unpacks to the same bytes. The unpacker has no dictionary here (the
 * block's one lives in LMDB); frames that need one fail cleanly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../libcommon/store/src/store_int.h"

static store_unpack_t *fz_unpacker(void)
{
    static store_unpack_t u;
    static int ready;
    if (!ready) { /* no transaction: as if the block had no dictionary */
        lc_store__unpack_init(&u, NULL, 0);
        u.loaded = true;
        u.dctx = ZSTD_createDCtx();
        ready = 1;
    }
    return &u;
}

static void fz_roundtrip(const uint8_t *raw, size_t len)
{
    size_t bound = ZSTD_compressBound(len);
    uint8_t *enc = lc_xmalloc(bound + 10), *p = store_put_uvarint(enc, len);
    size_t z = ZSTD_compress(p, bound, raw, len, 1);
    if (ZSTD_isError(z))
        abort();
    uint8_t *copy = lc_xmalloc(len + 1);
    if (len)
        memcpy(copy, raw, len);
    const uint8_t *out;
    size_t out_len;
    if (lc_store__unpack(fz_unpacker(), enc, (size_t)(p - enc) + z, &out, &out_len) ||
        out_len != len || (len && memcmp(out, copy, len) != 0))
        abort();
    lc_free(copy);
    lc_free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *out;
    size_t len;
    if (lc_store__unpack(fz_unpacker(), data, size, &out, &len))
        return 0;
    /* walk it as samples (flags 0: no spans) */
    uint8_t *prof = lc_xmalloc(len + 1);
    prof[0] = 0;
    if (len)
        memcpy(prof + 1, out, len);
    lc_stored_profile_t p = {._data = prof, ._len = len + 1};
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, &p);
    uint32_t node;
    int64_t value;
    int rc;
    size_t n = 0;
    while ((rc = lc_sample_iter_next(&it, &node, &value, NULL)) == 1)
        if (++n > len)
            abort(); /* every sample consumes input */
    if (rc != 0 && rc != LC_ECORRUPT)
        abort();
    fz_roundtrip(prof + 1, len);
    lc_free(prof);
    return 0;
}
