/*
 * bucket.h — the ingester's closed blocks in the object store (issue 27,
 * --storage.backend): a worker thread uploads every closed, settled block
 * (its LMDB file, then a small meta object that is its index entry) and
 * deletes objects past --retention; at start-up, before the store opens, the
 * blocks the bucket's index lists for this ingester id and the data dir lacks
 * are downloaded back (a lost volume costs nothing that was uploaded).
 *
 * Bucket layout (below --storage.prefix), <ing> = the ingester id made a key:
 *   blocks/<ing>/<start>-<life>/block.mdb   the block's LMDB file
 *   index/<ing>/<start>-<life>.json         its meta: the index entry, written last
 *   rollups/<ing>/<window>-<level>-<life>-<sig>/rollup.mdb   a window's rollup
 *   rollup-index/<ing>/<window>-<level>-<life>.json          its entry, written last
 *                                            (bucket_rollup.c: the objects it sums)
 * <start> is the store's block directory name, <life> a random id of the
 * data directory (a block re-created after a wipe is another object).
 * Local bookkeeping: <data.dir>/uploads/<start> = "<name> <version>" of the
 * last upload, <data.dir>/uploads/life.
 *
 * Ownership: ing_bucket_start copies the options and opens its own object
 * store; the lc_store_t is borrowed and must outlive ing_bucket_stop.
 * Threading: ing_bucket_restore blocks (call it before the store opens);
 * the uploader runs on its own thread, never the loop; start/stop on the
 * loop thread (stop joins the thread: at most one object transfer).
 */
#ifndef EMBER_ING_BUCKET_H
#define EMBER_ING_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "lc/metrics.h"
#include "lc/objstore.h"
#include "lc/store.h"

typedef struct ing_bucket_opts_s {
    lc_objstore_opts_t store; /* backend != LC_OBJSTORE_NONE */
    const char *data_dir;
    const char *ingester_id; /* the consumer id: stable across restarts */
    const char *zone;
    int64_t block_duration_ns;
    int64_t retention_ns;       /* 0: keep objects forever */
    int64_t local_retention_ns; /* 0: uploaded blocks stay local for retention_ns */
    int interval_ms;            /* between upload passes */
    lc_metrics_t *metrics;
} ing_bucket_opts_t;

typedef struct ing_bucket_s ing_bucket_t;

/* Downloads the indexed blocks of this ingester that the data dir lacks
 * (and --retention keeps) into <data_dir>/blocks. */
int ing_bucket_restore(const ing_bucket_opts_t *o, size_t *restored) LC_MUST_CHECK;
int ing_bucket_start(const ing_bucket_opts_t *o, lc_store_t *store,
                     ing_bucket_t **out) LC_MUST_CHECK;
/* A graceful stop's last step before ing_bucket_stop: stops the pass
 * thread, then runs one more pass on the caller's thread, so every ended
 * block the store settled meanwhile goes up before the process exits (an
 * operator may then delete a stopped ingester's volume). NULL-safe. */
void ing_bucket_finish(ing_bucket_t *b);
void ing_bucket_stop(ing_bucket_t *b); /* NULL-safe */

#endif
