/*
 * bucket_restore.c — ing_bucket_restore (bucket.h): before the store opens,
 * every block the bucket's index lists for this ingester id that the data
 * dir lacks is downloaded (checksum verified by the object store) into
 * <data_dir>/blocks/.new-<start>/data.mdb and renamed to blocks/<start>, so
 * the store's scan finds it and a crash leaves a .new- directory that the
 * store removes at open. Its upload record is written too, so the block is
 * not uploaded again unless a late write changes it. Blocks past
 * --storage.local-retention stay in the bucket. A block the data dir
 * holds already is left alone: the local one is at least as new.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bucket_int.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* blocks/.new-<start>/data.mdb, then the rename that makes it a block. */
static int install_block(const char *data_dir, const char *start, const uint8_t *data, size_t len)
{
    char tmp_dir[4096], file[4200], final[4096];
    snprintf(tmp_dir, sizeof tmp_dir, "%s/blocks/.new-%s", data_dir, start);
    snprintf(file, sizeof file, "%s/data.mdb", tmp_dir);
    snprintf(final, sizeof final, "%s/blocks/%s", data_dir, start);
    if (mkdir(tmp_dir, 0755) != 0 && errno != EEXIST)
        return LC_ESTORE;
    int rc = bkt_file_write(file, data, len);
    if (!rc && rename(tmp_dir, final) != 0)
        rc = LC_ESTORE;
    return rc;
}

/* Blocks past --retention are gone; past --storage.local-retention they are
 * read from the bucket by the queriers and would only be dropped again. */
static bool wanted_locally(const ing_bucket_opts_t *o, int64_t end_ns)
{
    int64_t now = lc_realtime_ns();
    return !(o->retention_ns > 0 && end_ns < now - o->retention_ns) &&
           !(o->local_retention_ns > 0 && end_ns <= now - o->local_retention_ns);
}

/* One index entry: LC_ENOTFOUND when nothing had to be done. */
static int restore_one(const ing_bucket_opts_t *o, lc_objstore_t *os, const char *uploads,
                       const char *index_key)
{
    uint8_t *text, *data;
    size_t len;
    bkt_meta_t m;
    int rc = lc_objstore_get(os, index_key, &text, &len);
    if (rc)
        return rc;
    rc = len <= BKT_META_MAX_BYTES ? bkt_meta_parse(text, len, &m) : LC_ETOOBIG;
    lc_free(text);
    if (rc) {
        LC_LOG_WARN("bucket: index entry skipped key=%s err=\"%s\"", index_key, lc_strerror(rc));
        return LC_ENOTFOUND;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/blocks/%s", o->data_dir, m.start);
    if (exists(path) || !wanted_locally(o, m.end_ns))
        return LC_ENOTFOUND;
    rc = lc_objstore_get(os, m.data, &data, &len);
    if (rc)
        return rc;
    rc = install_block(o->data_dir, m.start, data, len);
    lc_free(data);
    const char *slash = strrchr(index_key, '/');
    char name[BKT_NAME_MAX];
    size_t n = strlen(slash + 1); /* "<name>.json" */
    snprintf(name, sizeof name, "%.*s", (int)(n > 5 ? n - 5 : 0), slash + 1);
    if (!rc)
        rc = bkt_record_write(uploads, m.start, name, m.version);
    if (!rc)
        LC_LOG_INFO("bucket: block restored key=%s bytes=%zu", m.data, len);
    return rc;
}

/* The data dir has a life id: it is the volume that uploaded, not a new one. */
static bool volume_known(const char *uploads)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/life", uploads);
    return exists(path);
}

int ing_bucket_restore(const ing_bucket_opts_t *o, size_t *restored)
{
    *restored = 0;
    char ing[BKT_ING_MAX], uploads[4096], prefix[BKT_ING_MAX + 16], blocks[4096];
    bkt_ingester_key(o->ingester_id, ing);
    snprintf(prefix, sizeof prefix, "index/%s/", ing);
    snprintf(blocks, sizeof blocks, "%s/blocks", o->data_dir);
    if ((mkdir(o->data_dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(blocks, 0755) != 0 && errno != EEXIST))
        return LC_ESTORE;
    int rc = bkt_uploads_dir(o->data_dir, uploads, sizeof uploads);
    lc_objstore_t *os = NULL;
    if (!rc)
        rc = lc_objstore_open(&o->store, &os);
    lc_objstore_list_t l = {0};
    if (!rc)
        rc = lc_objstore_list(os, prefix, &l);
    for (size_t i = 0; !rc && i < l.n; i++) {
        rc = restore_one(o, os, uploads, l.keys[i]);
        if (rc == 0)
            (*restored)++;
        if (rc == LC_ENOTFOUND)
            rc = 0;
    }
    if (rc && volume_known(uploads)) {
        /* This volume uploaded before: blocks leave it only through
         * --retention, so there is nothing to miss. Ingest may go on. */
        LC_LOG_WARN("bucket: cannot check the bucket for missing blocks; this data dir is "
                    "intact (it has uploaded before), starting err=\"%s\" detail=\"%s\"",
                    lc_strerror(rc), os ? lc_objstore_last_error(os) : "");
        rc = 0;
    } else if (rc) {
        LC_LOG_ERROR("bucket: cannot restore this ingester's blocks into a new data dir "
                     "prefix=%s err=\"%s\" detail=\"%s\"",
                     prefix, lc_strerror(rc), os ? lc_objstore_last_error(os) : "");
    }
    lc_objstore_list_free(&l);
    lc_objstore_close(os);
    return rc;
}
