/*
 * node_bucket.c — `ember-querier`'s store on the bucket (ingester.h:
 * ing_bucket_store_node, issue 27): with --storage.backend, a store of no
 * blocks of its own whose source reads the ingesters' objects below their
 * marks (bucket_read.h, ing_bucket_marks_new) through a cache bounded by
 * --storage.cache-size under --storage.cache-dir (default
 * <data.dir>/bucket-cache). The querier node after it answers its shard API
 * from this store (node_fanout.c), so history below a mark is read here and
 * not by the ingester that wrote it.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "bucket_read.h"
#include "ember_process.h"
#include "ingester.h"
#include "lc/alloc.h"
#include "lc/log.h"

typedef struct bucket_store_s {
    lc_store_t *store;
    ing_bucket_read_t *read;
} bucket_store_t;

static int make_dir(const char *path)
{
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

static int bucket_store_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    bucket_store_t *n = lc_xcalloc(1, sizeof(*n));
    *state = n;
    ing_bucket_marks_opts_t o = {.block_duration_ns = s->block_duration_ns,
                                 .cache_bytes = (uint64_t)s->cache_size_bytes,
                                 .metrics = p->metrics};
    ember_objstore_opts(s, &o.store);
    if (o.store.backend == LC_OBJSTORE_NONE)
        return 0;
    char base[4096], store_dir[4200], cache[4200];
    if (s->cache_dir && *s->cache_dir)
        snprintf(base, sizeof base, "%s", s->cache_dir);
    else
        snprintf(base, sizeof base, "%s/bucket-cache", s->data_dir);
    snprintf(store_dir, sizeof store_dir, "%s/store", base);
    snprintf(cache, sizeof cache, "%s/objects", base);
    o.cache_dir = cache;
    int rc = make_dir(s->data_dir);
    if (!rc)
        rc = make_dir(base);
    lc_store_opts_t so = {.dir = store_dir,
                          .block_duration_ns = s->block_duration_ns,
                          .read_only = true}; /* nothing is ever written to it */
    if (!rc)
        rc = lc_store_open(&so, &n->store);
    if (!rc)
        rc = ing_bucket_marks_new(&o, n->store, &n->read);
    if (rc) {
        LC_LOG_ERROR("bucket: cannot open the querier's store on the bucket dir=%s err=\"%s\"",
                     base, lc_strerror(rc));
        return rc;
    }
    p->store = n->store;
    return 0;
}

static void bucket_store_free(void *state)
{
    bucket_store_t *n = state;
    ing_bucket_read_free(n->read); /* no query runs any more */
    lc_store_close(n->store);
    lc_free(n);
}

const lc_node_ops_t ing_bucket_store_node = {
    .name = "bucket-store", .start = bucket_store_start, .free = bucket_store_free};
