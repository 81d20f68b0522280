/*
 * bucket_read.h — the node's blocks that are no longer local, read back from
 * the object store for queries (issue 27, --storage.local-retention): the
 * store's source (lc_store_set_source), so every query on this store (the
 * all-in-one's querier, an ingester's shard API) reads the local blocks and,
 * for the partitions they no longer hold, the objects this node uploaded,
 * downloaded whole into a bounded cache directory and opened read-only.
 *
 * Which objects (exact, no profile twice, none dropped): per partition, all
 * of this ingester's objects when its block is not in the query's local
 * snapshot, else all but the one the local block holds (its upload record's,
 * unless the gone list read before the snapshot names it; bucket_local.c).
 * Between the node's mark and its local blocks the node that wrote the
 * block reads it, since it alone knows that boundary exactly; below the
 * mark the querier reads the bucket (ing_bucket_marks_new, floor.h). A flame
 * graph or series over whole windows of such partitions reads the window's
 * rollup instead (bucket_read.c).
 *
 * Ownership: ing_bucket_read_new copies the options and opens its own object
 * store; the lc_store_t is borrowed and must outlive ing_bucket_read_free.
 * Threading: the source runs on query threads, any number at once (one lock
 * around the listing, downloads and the cache table); new/free on the loop
 * thread with no query running.
 */
#ifndef EMBER_ING_BUCKET_READ_H
#define EMBER_ING_BUCKET_READ_H

#include <stddef.h>
#include <stdint.h>

#include "bucket.h"

typedef struct ing_bucket_read_s ing_bucket_read_t;

typedef struct ing_bucket_read_opts_s {
    const ing_bucket_opts_t *bucket; /* the uploader's options: store, id, data dir */
    const char *cache_dir;           /* emptied at start */
    uint64_t cache_bytes;            /* bound of cache_dir: block files downloaded */
} ing_bucket_read_opts_t;

/* Opens the cache and sets itself as the store's source. */
int ing_bucket_read_new(const ing_bucket_read_opts_t *o, lc_store_t *store,
                        ing_bucket_read_t **out) LC_MUST_CHECK;

/* The querier's shard on the bucket (issue 27): a store of no blocks of its
 * own whose source reads, per query, the objects of the ingesters its scope
 * names (lc_read_scope_t.bucket, lc/members.h's spec), each below its mark
 * (lc_store_set_floor: everything that ingester stored there is in them),
 * through the same bounded cache. No rollups yet: whole blocks answer. */
typedef struct ing_bucket_marks_opts_s {
    lc_objstore_opts_t store;
    int64_t block_duration_ns; /* the ingesters' */
    const char *cache_dir;     /* emptied at start */
    uint64_t cache_bytes;
    lc_metrics_t *metrics;
} ing_bucket_marks_opts_t;
int ing_bucket_marks_new(const ing_bucket_marks_opts_t *o, lc_store_t *store,
                         ing_bucket_read_t **out) LC_MUST_CHECK;
void ing_bucket_read_free(ing_bucket_read_t *br); /* NULL-safe; unsets the source */

#endif
