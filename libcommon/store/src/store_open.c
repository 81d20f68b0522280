/*
 * store_open.c — lc_store_open and lc_store_close (lc/store.h): the order in
 * which the registry (store.c) and the passes that keep state across blocks
 * (the compaction's crash recovery, the rollups) come up and go down. The
 * top of the store: it calls them, none of them calls it.
 * Threading: open and close run on one thread, with no reader or writer.
 */
#include "lc/log.h"
#include "store_int.h"

int lc_store_open(const lc_store_opts_t *opts, lc_store_t **out)
{
    lc_store_t *s;
    int rc = lc_store__registry_new(opts, &s);
    if (rc)
        return rc;
    lc_store__compact_recover(s->blocks_dir); /* before the scan: it may rename blocks */
    rc = lc_store__registry_scan(s);
    if (!rc)
        rc = lc_store__rollup_open(s); /* store_rollup.c */
    if (rc) {
        lc_store_close(s);
        return rc;
    }
    LC_LOG_INFO("store: opened dir=%s blocks=%zu max_open_blocks=%zu", s->dir, s->n_blocks,
                s->opts.max_open_blocks);
    *out = s;
    return 0;
}

/* Callers must have ended every reader and write batch. */
void lc_store_close(lc_store_t *s)
{
    if (!s)
        return;
    lc_store__rollup_close(s); /* store_rollup.c */
    lc_store__registry_free(s);
}
