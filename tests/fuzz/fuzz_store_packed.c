/*
 * fuzz_store_packed.c — arbitrary bytes as a compacted block's packed symbol
 * table or stack tree (store_packed.c, format 6: DB_META "packed.<db>" =
 * varint n, varint raw length, zstd frame), parsed as a reader parses them.
 *
 * The first byte picks the shape: bit 0 table or tree, bit 1 whether the
 * rest is the meta value as stored, or the raw content (the part with
 * structure), which the harness frames itself with zstd after a varint n
 * taken from the next byte, so the fuzzer explores the content's parser
 * instead of zstd's checks.
 *
 * Checks: no crash or over-read; a table that parses has at most the count
 * allowed, and its records lie inside what was unpacked, back to back; a
 * tree that parses has parent < id and locations in [1, max] for every node.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../libcommon/store/src/store_int.h"

#define FZ_COUNT 4096     /* records a table may hold here */
#define FZ_NODES 4096     /* nodes a tree may hold here */
#define FZ_LOCATIONS 1000 /* its locations' ids */

/* The meta value for raw content: varint n, varint length, zstd frame. */
static uint8_t *fz_frame(uint64_t n, const uint8_t *raw, size_t len, size_t *out_len)
{
    size_t bound = ZSTD_compressBound(len);
    uint8_t *v = lc_xmalloc(bound + 20), *p = store_put_uvarint(v, n);
    p = store_put_uvarint(p, len);
    size_t z = ZSTD_compress(p, bound, raw, len, 1);
    if (ZSTD_isError(z))
        abort();
    *out_len = (size_t)(p - v) + z;
    return v;
}

static void fz_table(const MDB_val *v)
{
    store_packed_t t;
    if (lc_store__packed_parse_table(v, FZ_COUNT, &t))
        return;
    if (t.n == 0 || t.n > FZ_COUNT || t.offs[0] != 0)
        abort();
    for (uint32_t id = 1; id <= t.n; id++) {
        MDB_val r;
        lc_store__packed_get(&t, id, &r);
        if (t.offs[id] < t.offs[id - 1] || (const uint8_t *)r.mv_data < t.raw)
            abort();
        volatile uint8_t sink = r.mv_size ? ((const uint8_t *)r.mv_data)[r.mv_size - 1] : 0;
        (void)sink; /* the last byte of each record is readable (ASan) */
    }
    lc_store__packed_fini(&t);
}

static void fz_nodes(const MDB_val *v)
{
    static uint32_t parents[FZ_NODES], locations[FZ_NODES];
    store_meta_t m = {.nodes = FZ_NODES, .locations = FZ_LOCATIONS};
    uint64_t n;
    if (lc_store__packed_parse_nodes(v, &m, parents, locations, FZ_NODES, &n))
        return;
    if (n == 0 || n > FZ_NODES)
        abort();
    for (uint64_t i = 1; i < n; i++)
        if (parents[i] >= i || locations[i] == 0 || locations[i] > FZ_LOCATIONS)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool nodes = data[0] & 1, framed_here = data[0] & 2;
    MDB_val v = {.mv_size = size - 1, .mv_data = (void *)(data + 1)};
    uint8_t *own = NULL;
    if (framed_here) {
        own = fz_frame(data[1] + 1u, data + 2, size - 2, &v.mv_size);
        v.mv_data = own;
    }
    if (nodes)
        fz_nodes(&v);
    else
        fz_table(&v);
    lc_free(own);
    return 0;
}
