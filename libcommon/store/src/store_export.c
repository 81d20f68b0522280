/*
 * store_export.c — closed blocks copied out whole, for the ingester's
 * uploader to the object store (issue 27): which blocks exist and how often
 * each was written since the store opened (without opening them), whether a
 * block has settled (its
 * latest commit is summarised and compacted, so the bytes will not be
 * rewritten soon) and a consistent copy of its LMDB file. Runs on any
 * thread beside the writer and readers.
 */
#include "lc/alloc.h"
#include "store_int.h"

int lc_store_block_states(lc_store_t *s, lc_store_block_state_t **out, size_t *n)
{
    pthread_mutex_lock(&s->mu);
    size_t k = 0;
    lc_store_block_state_t *v = lc_xcalloc(s->n_blocks ? s->n_blocks : 1, sizeof(*v));
    for (size_t i = 0; i < s->n_blocks; i++) {
        const store_block_t *b = s->blocks[i];
        if (!b->dropped)
            v[k++] = (lc_store_block_state_t){
                .start_ns = b->start_ns, .end_ns = b->end_ns, .write_gen = b->write_gen};
    }
    pthread_mutex_unlock(&s->mu);
    *out = v;
    *n = k;
    return 0;
}

bool lc_block_settled(lc_store_reader_t *r, size_t i)
{
    lc_block_t *blk = lc_store_reader_block(r, i);
    if (!blk)
        return false;
    lc_store_t *s = lc_store__reader_store(r);
    store_block_t *b = lc_store__block_ref(blk);
    pthread_mutex_lock(&s->mu);
    bool settled = !b->dropped && b->compacted_gen == b->write_gen;
    pthread_mutex_unlock(&s->mu);
    return settled;
}

int lc_block_copy(lc_block_t *blk, int fd)
{
    /* mdb_env_copyfd2 reads through its own read transaction: one snapshot,
     * whatever the writer does meanwhile. A settled block is compact
     * already, so no MDB_CP_COMPACT. */
    int rc = mdb_env_copyfd2(lc_store__block_ref(blk)->env, fd, 0);
    return rc ? lc_store__mdb_fail(rc, "env copy") : 0;
}
