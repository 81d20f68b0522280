/*
 * bucket_local.c — --storage.local-retention (bucket_int.h): a closed block
 * older than the local retention leaves the data dir only once the bucket
 * is confirmed to hold exactly what it holds now: its upload record names
 * the current content version, the index entry (meta object) named by that
 * record exists and names the same version, and the block was not written
 * since it was verified (lc_store_drop_block checks the write count under
 * the store's lock). Any doubt keeps the block; the next pass looks again.
 *
 * A profile written later into a dropped partition makes a new local block.
 * Its upload must not overwrite the dropped one's object (that content lives
 * only in the bucket now), so the drop leaves a marker <uploads>/<start>.gone
 * and bkt_upload_name gives such a block a new name. A marker whose block is
 * still local (a crash between marker and drop) is removed at start.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bucket_int.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"

static void gone_path(const char *uploads, const char *start, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.gone", uploads, start);
}

bool bkt_gone(const char *uploads, const char *start)
{
    char path[4200];
    struct stat st;
    gone_path(uploads, start, path, sizeof path);
    return stat(path, &st) == 0;
}

void bkt_gone_clear(const char *uploads, const char *start)
{
    char path[4200];
    gone_path(uploads, start, path, sizeof path);
    unlink(path);
}

void bkt_upload_name(const char *start, const char *life, bool gone, char name[BKT_NAME_MAX])
{
    if (gone) /* a partition dropped before: its old object stays as it is */
        snprintf(name, BKT_NAME_MAX, "%s-%s-%" PRIx64, start, life, (uint64_t)lc_realtime_ns());
    else
        snprintf(name, BKT_NAME_MAX, "%s-%s", start, life);
}

void bkt_version_of(const lc_block_info_t *in, char out[BKT_VERSION_MAX])
{
    snprintf(out, BKT_VERSION_MAX, "%" PRIu64 ".%" PRIu64 ".%" PRIu64 ".%" PRIu64 ".%" PRId64,
             in->profiles, in->samples, in->series, in->nodes, in->max_time_ns);
}

/* What block start_ns holds now, as a version; LC_ENOTFOUND if it is gone. */
static int current_version(lc_store_t *store, int64_t start_ns, char out[BKT_VERSION_MAX])
{
    lc_store_reader_t *r;
    int rc = lc_store_read_begin(store, start_ns, start_ns, &r);
    if (rc)
        return rc;
    rc = LC_ENOTFOUND;
    for (size_t i = 0; i < lc_store_reader_count(r) && rc; i++) {
        lc_block_info_t in;
        if (lc_block_info(lc_store_reader_block(r, i), &in) == 0 && in.start_ns == start_ns) {
            bkt_version_of(&in, out);
            rc = 0;
        }
    }
    lc_store_read_end(r);
    return rc;
}

/* The bucket's index entry for this block names its current content. */
static bool confirmed(const bkt_local_t *l, const char *start, const char *version)
{
    char name[BKT_NAME_MAX], rec_version[BKT_VERSION_MAX];
    char index_key[LC_OBJSTORE_KEY_MAX], data_key[LC_OBJSTORE_KEY_MAX];
    if (bkt_record_read(l->uploads, start, name, rec_version) != 0 ||
        strcmp(rec_version, version) != 0)
        return false; /* not uploaded as it is now */
    bkt_index_key(l->ing, name, index_key, sizeof index_key);
    bkt_data_key(l->ing, name, data_key, sizeof data_key);
    uint8_t *text;
    size_t len;
    if (lc_objstore_get(l->os, index_key, &text, &len) != 0)
        return false;
    bkt_meta_t m;
    int rc = len <= BKT_META_MAX_BYTES ? bkt_meta_parse(text, len, &m) : LC_ETOOBIG;
    lc_free(text);
    return rc == 0 && strcmp(m.start, start) == 0 && strcmp(m.version, version) == 0 &&
           strcmp(m.data, data_key) == 0;
}

/* One verified block past the local retention: dropped if confirmed. */
static bool drop_one(const bkt_local_t *l, const lc_store_block_state_t *st)
{
    char start[32], version[BKT_VERSION_MAX], marker[4200];
    bkt_start_name(st->start_ns, start);
    if (current_version(l->store, st->start_ns, version) != 0 || !confirmed(l, start, version))
        return false;
    gone_path(l->uploads, start, marker, sizeof marker);
    if (bkt_file_write(marker, version, strlen(version)) != 0)
        return false;
    int rc = lc_store_drop_block(l->store, st->start_ns, st->write_gen);
    if (rc) {
        unlink(marker); /* still local: a later upload keeps its name */
        return false;
    }
    LC_LOG_INFO("bucket: local block dropped, kept in the bucket block=%s version=%s", start,
                version);
    return true;
}

size_t bkt_local_retention_pass(const bkt_local_t *l, lc_store_block_state_t *verified, size_t n,
                                int64_t now_ns)
{
    size_t dropped = 0;
    for (size_t i = 0; l->retention_ns > 0 && i < n; i++) {
        if (verified[i].end_ns <= now_ns - l->retention_ns && drop_one(l, &verified[i])) {
            verified[i].write_gen = BKT_GEN_NONE; /* a new block there starts unverified */
            dropped++;
        }
    }
    return dropped;
}

void bkt_local_markers_check(const bkt_local_t *l)
{
    lc_store_block_state_t *states;
    size_t n;
    if (lc_store_block_states(l->store, &states, &n) != 0)
        return;
    char start[32];
    for (size_t i = 0; i < n; i++) {
        bkt_start_name(states[i].start_ns, start);
        char name[BKT_NAME_MAX], version[BKT_VERSION_MAX], now[BKT_VERSION_MAX];
        /* A marker beside a local block that still holds the recorded content:
         * the drop did not happen. A block with other content is a new one. */
        if (bkt_gone(l->uploads, start) && bkt_record_read(l->uploads, start, name, version) == 0 &&
            current_version(l->store, states[i].start_ns, now) == 0 && strcmp(now, version) == 0)
            bkt_gone_clear(l->uploads, start);
    }
    lc_free(states);
}
