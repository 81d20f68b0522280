/*
 * store_packed.c — a compacted block's symbol tables, series and stack tree,
 * packed (format 6, issue 32): each table is one zstd frame in DB_META
 * ("packed.strings", "packed.functions", "packed.mappings",
 * "packed.locations", "packed.series", "packed.nodes") instead of one LMDB
 * record per id or per 1024 nodes. An hour block of random deep stacks spent more bytes on
 * its tree and names (8 bytes a node, a page entry per string) than on its
 * samples; packed, the tree's parent column is mostly "the node before" and
 * names share their prefixes (as do the label sets of many series).
 *
 * A packed table holds ids 1..n (nodes 0..n-1); ids past n, written by a late
 * write into the compacted block, are records as in any block, and the next
 * compaction packs them all again. Every reader goes through here: readers
 * (store_read.c) decode a symbol table on first use and keep it for their
 * transaction; the writer (store_wstate.c) and the compaction walk all
 * records in id order. Below all three; calls only helpers and the unpacker.
 * Threading: pure functions over the caller's transaction and buffers.
 */
#include <string.h>
#include <zstd.h>

#include "store_int.h"

/* The meta key of db's packed form ("packed." + the DB's name). */
static size_t packed_key(store_db_t db, char buf[STORE_PACKED_KEY_MAX])
{
    const char *name = lc_store__db_name(db);
    size_t len = strlen(name);
    memcpy(buf, "packed.", 7);
    memcpy(buf + 7, name, len);
    return 7 + len;
}

/* db's packed meta value; v->mv_data NULL when the table is not packed. */
static int packed_value(MDB_txn *txn, MDB_dbi meta, store_db_t db, MDB_val *v)
{
    char key[STORE_PACKED_KEY_MAX];
    MDB_val k = store_val(key, packed_key(db, key));
    int rc = mdb_get(txn, meta, &k, v);
    if (rc == MDB_NOTFOUND) {
        *v = store_val(NULL, 0);
        return 0;
    }
    return rc ? lc_store__mdb_fail(rc, "packed table get") : 0;
}

/* The raw form of a packed table from its meta value: varint n, then a
 * store_unpack frame (varint raw length, zstd). *raw is the caller's. */
static int packed_unpack(const MDB_val *v, uint64_t *n, uint8_t **raw, size_t *raw_len)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size, *frame, *out;
    uint64_t len;
    *raw = NULL;
    if (store_get_uvarint(&p, end, n) || *n == 0 || *n > STORE_MAX_ID)
        return LC_ECORRUPT;
    frame = p; /* the unpacker reads the length again; refused here first */
    if (store_get_uvarint(&p, end, &len) || len > STORE_PACKED_MAX)
        return LC_ECORRUPT;
    store_unpack_t up;
    lc_store__unpack_init_plain(&up);
    int rc = lc_store__unpack(&up, frame, (size_t)(end - frame), &out, raw_len);
    if (!rc) { /* the unpacker's buffer becomes the caller's */
        *raw = up.buf;
        up.buf = NULL;
    }
    lc_store__unpack_fini(&up);
    return rc;
}

/* ---------------------------------------------------------------- symbol tables */

int lc_store__packed_parse_table(const MDB_val *v, uint64_t count, store_packed_t *t)
{
    memset(t, 0, sizeof(*t));
    uint64_t n;
    size_t raw_len;
    int rc = packed_unpack(v, &n, &t->raw, &raw_len);
    if (rc || n > count || n > raw_len) /* every record's length takes a byte */
        goto corrupt;
    t->offs = lc_xcalloc(n + 1, sizeof(*t->offs));
    const uint8_t *p = t->raw, *end = p + raw_len;
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if (store_get_uvarint(&p, end, &len) || len > STORE_PACKED_MAX)
            goto corrupt;
        off += len;
        t->offs[i + 1] = (uint32_t)off;
    }
    if (off != (uint64_t)(end - p))
        goto corrupt;
    t->data = p;
    t->n = (uint32_t)n;
    return 0;
corrupt:
    lc_store__packed_fini(t);
    return LC_ECORRUPT; /* the unpacker fails with it too */
}

int lc_store__packed_load(MDB_txn *txn, MDB_dbi meta, store_db_t db, uint64_t count,
                          store_packed_t *t)
{
    memset(t, 0, sizeof(*t));
    MDB_val v;
    int rc = packed_value(txn, meta, db, &v);
    if (rc || !v.mv_data)
        return rc;
    return lc_store__packed_parse_table(&v, count, t);
}

void lc_store__packed_fini(store_packed_t *t)
{
    lc_free(t->raw);
    lc_free(t->offs);
    memset(t, 0, sizeof(*t));
}

int lc_store__table_each(MDB_txn *txn, const MDB_dbi *dbi, store_db_t db, uint64_t count,
                         store_record_fn fn, void *arg)
{
    store_packed_t t;
    int rc = lc_store__packed_load(txn, dbi[DB_META], db, count, &t);
    for (uint32_t id = 1; !rc && id <= t.n; id++) {
        MDB_val v;
        lc_store__packed_get(&t, id, &v);
        rc = fn(arg, id, &v);
    }
    uint32_t next = t.n + 1;
    lc_store__packed_fini(&t);
    if (rc)
        return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, dbi[db], &cur)) != 0)
        return lc_store__mdb_fail(rc, "cursor open (table)");
    MDB_val k = store_val(&next, sizeof(next)), v;
    int op = MDB_SET_RANGE;
    while (!rc && (rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
        op = MDB_NEXT;
        uint32_t id = 0; /* a key of another size is corrupt, and not read */
        if (k.mv_size == sizeof(id))
            memcpy(&id, k.mv_data, sizeof(id));
        rc = k.mv_size == sizeof(id) && id == next++ ? fn(arg, id, &v) : LC_ECORRUPT;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND)
        return rc > 0 ? lc_store__mdb_fail(rc, "table scan") : rc;
    return next - 1 == count ? 0 : LC_ECORRUPT;
}

/* ---------------------------------------------------------------- the stack tree */

/* The packed nodes' columns: n - 1 varints (id - parent), then n - 1 varints
 * location, for ids 1..n-1 (the root is (0, 0)). Fills [0, want). */
static int nodes_unpack_columns(const uint8_t *raw, size_t raw_len, uint64_t n, size_t want,
                                uint64_t locations_max, uint32_t *parents, uint32_t *locations)
{
    const uint8_t *p = raw, *end = raw + raw_len;
    for (uint64_t i = 1; i < n; i++) { /* the whole first column, to find the second */
        uint64_t d;
        if (store_get_uvarint(&p, end, &d) || d == 0 || d > i)
            return LC_ECORRUPT;
        if (i < want && parents)
            parents[i] = (uint32_t)(i - d);
    }
    for (uint64_t i = 1; i < n; i++) {
        uint64_t loc;
        if (store_get_uvarint(&p, end, &loc) || loc == 0 || loc > locations_max)
            return LC_ECORRUPT;
        if (i < want && locations)
            locations[i] = (uint32_t)loc;
    }
    return p == end ? 0 : LC_ECORRUPT;
}

int lc_store__packed_parse_nodes(const MDB_val *v, const store_meta_t *m, uint32_t *parents,
                                 uint32_t *locations, size_t want, uint64_t *n)
{
    uint8_t *raw;
    size_t raw_len;
    int rc = packed_unpack(v, n, &raw, &raw_len);
    if (!rc && (*n > m->nodes || *n - 1 > raw_len / 2)) /* a node takes two bytes */
        rc = LC_ECORRUPT;
    if (!rc)
        rc = nodes_unpack_columns(raw, raw_len, *n, want, m->locations, parents, locations);
    lc_free(raw);
    return rc == LC_ETOOBIG ? LC_ECORRUPT : rc;
}

/* One raw chunk of (parent, location) pairs into the arrays, ids [from, n). */
static int nodes_chunk_copy(const MDB_val *v, uint32_t chunk, uint64_t from, size_t n,
                            uint64_t locations_max, uint32_t *parents, uint32_t *locations)
{
    uint64_t first = (uint64_t)chunk * STORE_NODE_CHUNK;
    size_t cnt = n - first < STORE_NODE_CHUNK ? n - first : STORE_NODE_CHUNK;
    if (v->mv_size < cnt * 8)
        return LC_ECORRUPT;
    for (size_t i = from > first ? from - first : 0; i < cnt; i++) {
        uint32_t pair[2];
        memcpy(pair, (const uint8_t *)v->mv_data + i * 8, 8);
        if (first + i > 0 && (pair[0] >= first + i || pair[1] == 0 || pair[1] > locations_max))
            return LC_ECORRUPT;
        if (parents)
            parents[first + i] = pair[0];
        if (locations)
            locations[first + i] = pair[1];
    }
    return 0;
}

int lc_store__nodes_read(MDB_txn *txn, const MDB_dbi *dbi, const store_meta_t *m, uint32_t *parents,
                         uint32_t *locations, size_t n)
{
    if (n > m->nodes)
        return LC_EINPUT;
    if (n && parents)
        parents[0] = 0;
    if (n && locations)
        locations[0] = 0;
    if (n <= 1)
        return 0;
    uint64_t packed = 0;
    MDB_val v;
    int rc = packed_value(txn, dbi[DB_META], DB_NODES, &v);
    if (!rc && v.mv_data)
        rc = lc_store__packed_parse_nodes(&v, m, parents, locations, n, &packed);
    /* Nodes past the packed ones (a late write) are chunks, written whole. */
    uint32_t last = (uint32_t)((n - 1) / STORE_NODE_CHUNK);
    for (uint32_t c = (uint32_t)(packed / STORE_NODE_CHUNK); !rc && packed < n && c <= last; c++) {
        MDB_val k = store_val(&c, sizeof(c)), chunk;
        rc = mdb_get(txn, dbi[DB_NODES], &k, &chunk);
        if (rc)
            return lc_store__mdb_fail(rc == MDB_NOTFOUND ? LC_ECORRUPT : rc, "node chunk get");
        rc = nodes_chunk_copy(&chunk, c, packed, n, m->locations, parents, locations);
    }
    return rc;
}

/* ---------------------------------------------------------------- packing (compaction) */

static int packed_put(MDB_txn *wtxn, MDB_dbi meta, store_db_t db, uint64_t n, const lc_buf_t *raw,
                      int level)
{
    size_t bound = ZSTD_compressBound(raw->len);
    uint8_t *z = lc_xmalloc(bound + 40), *p = z;
    p = store_put_uvarint(p, n);
    p = store_put_uvarint(p, raw->len);
    size_t zlen = ZSTD_compress(p, bound, raw->data, raw->len, level);
    int rc = ZSTD_isError(zlen) ? LC_ECORRUPT : 0;
    char key[STORE_PACKED_KEY_MAX];
    MDB_val k = store_val(key, packed_key(db, key)), v = store_val(z, (size_t)(p - z) + zlen);
    if (!rc && (rc = mdb_put(wtxn, meta, &k, &v, 0)) != 0)
        rc = lc_store__mdb_fail(rc, "packed table put");
    lc_free(z);
    return rc;
}

typedef struct gather_s {
    lc_buf_t lens, bytes;
} gather_t;

static int gather_record(void *arg, uint32_t id, const MDB_val *v)
{
    (void)id;
    gather_t *g = arg;
    int rc = lc_buf_put_uvarint(&g->lens, v->mv_size);
    return rc ? rc : lc_buf_append(&g->bytes, v->mv_data, v->mv_size);
}

typedef struct copy_s {
    MDB_txn *wtxn;
    MDB_dbi dbi;
} copy_t;

static int copy_record(void *arg, uint32_t id, const MDB_val *v)
{
    copy_t *c = arg;
    MDB_val k = store_val(&id, sizeof(id)), out = *v;
    int rc = mdb_put(c->wtxn, c->dbi, &k, &out, MDB_APPEND);
    return rc ? lc_store__mdb_fail(rc, "put (compact table)") : 0;
}

int lc_store__packed_write_table(MDB_txn *rtxn, const MDB_dbi *rdbi, store_db_t db, uint64_t count,
                                 MDB_txn *wtxn, const MDB_dbi *wdbi, int level)
{
    gather_t g;
    lc_buf_init(&g.lens, STORE_PACKED_MAX);
    lc_buf_init(&g.bytes, STORE_PACKED_MAX);
    int rc = count ? lc_store__table_each(rtxn, rdbi, db, count, gather_record, &g) : 0;
    if (!rc && count)
        rc = lc_buf_append(&g.lens, g.bytes.data, g.bytes.len);
    if (!rc && count)
        rc = packed_put(wtxn, wdbi[DB_META], db, count, &g.lens, level);
    lc_buf_fini(&g.lens);
    lc_buf_fini(&g.bytes);
    if (rc == LC_ETOOBIG) { /* too large to unpack at once: records, as written */
        copy_t c = {.wtxn = wtxn, .dbi = wdbi[db]};
        rc = lc_store__table_each(rtxn, rdbi, db, count, copy_record, &c);
    }
    return rc;
}

static int nodes_columns(const uint32_t *parents, const uint32_t *locations, uint64_t n,
                         lc_buf_t *out)
{
    int rc = 0;
    for (uint64_t i = 1; i < n && !rc; i++)
        rc = lc_buf_put_uvarint(out, i - parents[i]);
    for (uint64_t i = 1; i < n && !rc; i++)
        rc = lc_buf_put_uvarint(out, locations[i]);
    return rc;
}

/* Raw chunks of every node, as the writer makes them (a tree too large to pack). */
static int nodes_write_chunks(const uint32_t *parents, const uint32_t *locations, uint64_t n,
                              MDB_txn *wtxn, MDB_dbi dbi)
{
    int rc = 0;
    for (uint64_t first = 0; first < n && !rc; first += STORE_NODE_CHUNK) {
        uint32_t chunk = (uint32_t)(first / STORE_NODE_CHUNK);
        uint64_t cnt = n - first < STORE_NODE_CHUNK ? n - first : STORE_NODE_CHUNK;
        MDB_val k = store_val(&chunk, sizeof(chunk)), v = store_val(NULL, cnt * 8);
        if ((rc = mdb_put(wtxn, dbi, &k, &v, MDB_RESERVE | MDB_APPEND)) != 0)
            return lc_store__mdb_fail(rc, "put (compact nodes)");
        for (uint64_t i = 0; i < cnt; i++) {
            uint32_t two[2] = {parents[first + i], locations[first + i]};
            memcpy((uint8_t *)v.mv_data + i * 8, two, 8);
        }
    }
    return rc;
}

int lc_store__packed_write_nodes(MDB_txn *rtxn, const MDB_dbi *rdbi, const store_meta_t *m,
                                 MDB_txn *wtxn, const MDB_dbi *wdbi, int level)
{
    if (m->nodes <= 1) /* only the root (maybe never flushed) */
        return 0;
    if (m->nodes > SIZE_MAX / 8)
        return LC_ECORRUPT;
    uint32_t *parents = lc_xmalloc(m->nodes * sizeof(*parents));
    uint32_t *locations = lc_xmalloc(m->nodes * sizeof(*locations));
    int rc = lc_store__nodes_read(rtxn, rdbi, m, parents, locations, m->nodes);
    lc_buf_t raw;
    lc_buf_init(&raw, STORE_PACKED_MAX);
    if (!rc)
        rc = nodes_columns(parents, locations, m->nodes, &raw);
    if (!rc)
        rc = packed_put(wtxn, wdbi[DB_META], DB_NODES, m->nodes, &raw, level);
    if (rc == LC_ETOOBIG)
        rc = nodes_write_chunks(parents, locations, m->nodes, wtxn, wdbi[DB_NODES]);
    lc_buf_fini(&raw);
    lc_free(parents);
    lc_free(locations);
    return rc;
}
