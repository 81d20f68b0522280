/*
 * store_wstate.c — the writer's per-block state: the de-dup maps for strings,
 * functions, mappings, locations, series and stack nodes, plus the block's
 * counters. Built lazily the first time a batch writes to a block since it was
 * opened, by scanning the block's tables (so ids continue after a restart),
 * and dropped when a batch aborts (LMDB rolled back, so the maps must too) or
 * the environment is closed. The stack cache (whole stack -> node) goes with
 * the node table it points into.
 */
#include <string.h>

#include "store_int.h"

void lc_store__wstate_free(store_wstate_t *ws)
{
    if (!ws)
        return;
    lc_store__symtab_fini(&ws->strings);
    lc_store__symtab_fini(&ws->functions);
    lc_store__symtab_fini(&ws->mappings);
    lc_store__symtab_fini(&ws->locations);
    lc_store__symtab_fini(&ws->series);
    lc_store__nodetab_fini(&ws->nodes);
    lc_store__stackcache_fini(&ws->stacks);
    lc_free(ws);
}

/* Reads one id -> bytes table back into its symtab. Ids must be dense from 1
 * and contents unique; anything else means the block is damaged. */
static int symtab_load(MDB_txn *txn, MDB_dbi dbi, store_symtab_t *t, uint64_t expect)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (load)");
    MDB_val k, v;
    int op = MDB_FIRST;
    while (!rc && (rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
        op = MDB_NEXT;
        uint32_t key, id;
        bool added;
        if (k.mv_size != sizeof(key))
            rc = LC_ECORRUPT;
        if (!rc) {
            memcpy(&key, k.mv_data, sizeof(key));
            rc = lc_store__symtab_intern(t, v.mv_data, v.mv_size, &id, &added);
        }
        if (!rc && (!added || id != key))
            rc = LC_ECORRUPT;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND)
        return lc_store__mdb_fail(rc, "symbol scan");
    return t->count == expect ? 0 : LC_ECORRUPT;
}

/* Replays the node chunks through the node table; every node must come back
 * with its own id, which also checks parent < child. */
static int chunk_load(store_nodetab_t *t, const MDB_val *v, uint32_t chunk, uint64_t total)
{
    uint64_t first = (uint64_t)chunk * STORE_NODE_CHUNK;
    uint64_t n = total - first < STORE_NODE_CHUNK ? total - first : STORE_NODE_CHUNK;
    if (v->mv_size < n * 8)
        return LC_ECORRUPT;
    for (uint64_t i = first == 0 ? 1 : 0; i < n; i++) {
        uint32_t pair[2], id;
        memcpy(pair, (const uint8_t *)v->mv_data + i * 8, 8);
        if (pair[0] >= first + i)
            return LC_ECORRUPT;
        int rc =
            lc_store__nodetab_child(t, pair[0], pair[1], store_pair_hash(pair[0], pair[1]), &id);
        if (rc || id != first + i)
            return rc ? rc : LC_ECORRUPT;
    }
    return 0;
}

static int nodes_load(MDB_txn *txn, MDB_dbi dbi, store_nodetab_t *t, uint64_t total)
{
    uint64_t chunks = (total + STORE_NODE_CHUNK - 1) / STORE_NODE_CHUNK;
    for (uint32_t c = 0; c < chunks; c++) {
        MDB_val k = store_val(&c, sizeof(c)), v;
        int rc = mdb_get(txn, dbi, &k, &v);
        if (rc == MDB_NOTFOUND && total == 1)
            return 0; /* only the root, never flushed */
        if (rc)
            return lc_store__mdb_fail(rc == MDB_NOTFOUND ? LC_ECORRUPT : rc, "node chunk get");
        rc = chunk_load(t, &v, c, total);
        if (rc)
            return rc;
    }
    return 0;
}

static void wstate_init(store_wstate_t *ws)
{
    lc_store__symtab_init(&ws->strings);
    lc_store__symtab_init(&ws->functions);
    lc_store__symtab_init(&ws->mappings);
    lc_store__symtab_init(&ws->locations);
    lc_store__symtab_init(&ws->series);
    lc_store__nodetab_init(&ws->nodes);
    lc_store__stackcache_init(&ws->stacks); /* starts empty: filled as stacks are walked */
}

int lc_store__wstate_load(MDB_txn *txn, const MDB_dbi *dbi, store_wstate_t **out)
{
    store_wstate_t *ws = lc_xcalloc(1, sizeof(*ws));
    wstate_init(ws);
    int rc = lc_store__meta_get(txn, dbi[DB_META], &ws->meta);
    if (!rc)
        rc = symtab_load(txn, dbi[DB_STRINGS], &ws->strings, ws->meta.strings - 1);
    if (!rc)
        rc = symtab_load(txn, dbi[DB_FUNCTIONS], &ws->functions, ws->meta.functions);
    if (!rc)
        rc = symtab_load(txn, dbi[DB_MAPPINGS], &ws->mappings, ws->meta.mappings);
    if (!rc)
        rc = symtab_load(txn, dbi[DB_LOCATIONS], &ws->locations, ws->meta.locations);
    if (!rc)
        rc = symtab_load(txn, dbi[DB_SERIES], &ws->series, ws->meta.series);
    if (!rc)
        rc = nodes_load(txn, dbi[DB_NODES], &ws->nodes, ws->meta.nodes);
    if (rc) {
        lc_store__wstate_free(ws);
        return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
    }
    ws->nodes_committed = ws->meta.nodes;
    lc_store__nodetab_trim(&ws->nodes, ws->meta.nodes);
    *out = ws;
    return 0;
}

/* One chunk as (parent, location) u32 pairs, written in place (MDB_RESERVE). */
static int chunk_put(const store_nodetab_t *t, MDB_txn *txn, MDB_dbi dbi, uint32_t chunk)
{
    uint64_t first = (uint64_t)chunk * STORE_NODE_CHUNK;
    uint64_t n = t->count - first < STORE_NODE_CHUNK ? t->count - first : STORE_NODE_CHUNK;
    MDB_val k = store_val(&chunk, sizeof(chunk)), v = store_val(NULL, n * 8);
    int rc = mdb_put(txn, dbi, &k, &v, MDB_RESERVE);
    if (rc)
        return lc_store__mdb_fail(rc, "node chunk put");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pair = lc_store__nodetab_pair(t, first + i);
        uint32_t two[2] = {(uint32_t)(pair >> 32), (uint32_t)pair};
        memcpy((uint8_t *)v.mv_data + i * 8, two, 8);
    }
    return 0;
}

int lc_store__wstate_flush(store_wstate_t *ws, MDB_txn *txn, const MDB_dbi *dbi)
{
    store_nodetab_t *t = &ws->nodes;
    if (t->count > ws->nodes_committed) {
        uint32_t last = (uint32_t)((t->count - 1) / STORE_NODE_CHUNK);
        for (uint32_t c = (uint32_t)(ws->nodes_committed / STORE_NODE_CHUNK); c <= last; c++) {
            int rc = chunk_put(t, txn, dbi[DB_NODES], c);
            if (rc)
                return rc;
        }
    }
    /* A failed commit drops the whole state, so this is safe before it. */
    ws->nodes_committed = t->count;
    lc_store__nodetab_trim(&ws->nodes, t->count);
    ws->meta.nodes = t->count;
    ws->meta.strings = ws->strings.count + 1;
    ws->meta.functions = ws->functions.count;
    ws->meta.mappings = ws->mappings.count;
    ws->meta.locations = ws->locations.count;
    ws->meta.series = ws->series.count;
    return lc_store__meta_put(txn, dbi[DB_META], &ws->meta);
}
