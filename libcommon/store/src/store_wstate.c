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

static int symtab_add(void *arg, uint32_t key, const MDB_val *v)
{
    uint32_t id;
    bool added;
    int rc = lc_store__symtab_intern(arg, v->mv_data, v->mv_size, &id, &added);
    return rc ? rc : added && id == key ? 0 : LC_ECORRUPT;
}

/* Reads one id -> bytes table back into its symtab. Ids must be dense from 1
 * and contents unique; anything else means the block is damaged. */
static int symtab_load(MDB_txn *txn, const MDB_dbi *dbi, store_db_t db, store_symtab_t *t,
                       uint64_t expect)
{
    return lc_store__table_each(txn, dbi, db, expect, symtab_add, t);
}

/* Replays the tree through the node table; every node must come back with
 * its own id (lc_store__nodes_read checked parent < child). */
static int nodes_load(MDB_txn *txn, const MDB_dbi *dbi, const store_meta_t *m, store_nodetab_t *t)
{
    if (m->nodes > SIZE_MAX / 8)
        return LC_ECORRUPT;
    uint32_t *parents = lc_xmalloc((m->nodes + 1) * sizeof(*parents));
    uint32_t *locations = lc_xmalloc((m->nodes + 1) * sizeof(*locations));
    int rc = 0;
    if (m->nodes > 1) /* else only the root, maybe never flushed */
        rc = lc_store__nodes_read(txn, dbi, m, parents, locations, m->nodes);
    for (uint64_t i = 1; i < m->nodes && !rc; i++) {
        uint32_t id;
        rc = lc_store__nodetab_child(t, parents[i], locations[i],
                                     store_pair_hash(parents[i], locations[i]), &id);
        if (!rc && id != i)
            rc = LC_ECORRUPT;
    }
    lc_free(parents);
    lc_free(locations);
    return rc;
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
        rc = symtab_load(txn, dbi, DB_STRINGS, &ws->strings, ws->meta.strings - 1);
    if (!rc)
        rc = symtab_load(txn, dbi, DB_FUNCTIONS, &ws->functions, ws->meta.functions);
    if (!rc)
        rc = symtab_load(txn, dbi, DB_MAPPINGS, &ws->mappings, ws->meta.mappings);
    if (!rc)
        rc = symtab_load(txn, dbi, DB_LOCATIONS, &ws->locations, ws->meta.locations);
    if (!rc)
        rc = symtab_load(txn, dbi, DB_SERIES, &ws->series, ws->meta.series);
    if (!rc)
        rc = nodes_load(txn, dbi, &ws->meta, &ws->nodes);
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
