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
 * only in the bucket now), so the drop adds the object's name to the
 * partition's gone list <uploads>/<start>.gone (names, one a line, never
 * removed but for a drop that did not happen), and a block whose record names
 * a listed object goes up under a new name (bkt_upload_name). The list also
 * tells queries which objects hold what is no longer local (bucket_read.c).
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

static void gone_path(const char *uploads, const char *start, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.gone", uploads, start);
}

char *bkt_gone_read(const char *uploads, const char *start)
{
    char path[4200];
    gone_path(uploads, start, path, sizeof path);
    uint8_t *data;
    size_t len;
    if (bkt_file_read(path, BKT_GONE_MAX_BYTES, &data, &len) != 0)
        return NULL;
    data[len] = '\0'; /* bkt_file_read leaves room for it */
    return (char *)data;
}

bool bkt_gone_lists(const char *gone, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = gone; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        p = eol ? eol + 1 : p + len;
    }
    return false;
}

/* Writes the list (text of "<name>\n" lines); an empty one removes it. */
static int gone_write(const char *uploads, const char *start, const char *text)
{
    char path[4200];
    gone_path(uploads, start, path, sizeof path);
    if (!text || !*text)
        return unlink(path) == 0 || errno == ENOENT ? 0 : LC_ESTORE;
    return bkt_file_write(path, text, strlen(text));
}

/* The list without name. */
static char *gone_without(const char *gone, const char *name)
{
    size_t n = strlen(name), k = 0;
    char *out = lc_xmalloc(strlen(gone) + 1);
    for (const char *p = gone; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) + 1 : strlen(p);
        if (!(len >= n && memcmp(p, name, n) == 0 && (p[n] == '\n' || p[n] == '\0'))) {
            memcpy(out + k, p, len);
            k += len;
        }
        p += len;
    }
    out[k] = '\0';
    return out;
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
static bool confirmed(const bkt_local_t *l, const char *start, const char *version,
                      char name[BKT_NAME_MAX])
{
    char rec_version[BKT_VERSION_MAX];
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

/* One verified block past the local retention: dropped if confirmed. Its
 * object's name joins the partition's gone list first, so a query that sees
 * the list before its snapshot reads it from the bucket exactly when the
 * block is no longer in that snapshot (bucket_read.c). */
static bool drop_one(const bkt_local_t *l, const lc_store_block_state_t *st)
{
    char start[32], version[BKT_VERSION_MAX], name[BKT_NAME_MAX];
    bkt_start_name(st->start_ns, start);
    if (current_version(l->store, st->start_ns, version) != 0 ||
        !confirmed(l, start, version, name))
        return false;
    char *old = bkt_gone_read(l->uploads, start);
    size_t n = (old ? strlen(old) : 0) + strlen(name) + 2;
    char *list = lc_xmalloc(n);
    snprintf(list, n, "%s%s\n", old ? old : "", name);
    int rc = n <= BKT_GONE_MAX_BYTES ? gone_write(l->uploads, start, list) : LC_ETOOBIG;
    lc_free(list);
    if (!rc) {
        rc = lc_store_drop_block(l->store, st->start_ns, st->write_gen);
        if (rc && gone_write(l->uploads, start, old) != 0) /* still local: as it was */
            LC_LOG_ERROR("bucket: cannot restore the gone list of block=%s", start);
    }
    lc_free(old);
    if (rc)
        return false;
    LC_LOG_INFO("bucket: local block dropped, kept in the bucket block=%s name=%s", start, name);
    return true;
}

size_t bkt_local_retention_pass(const bkt_local_t *l, lc_store_block_state_t *verified, size_t n,
                                int64_t now_ns)
{
    size_t dropped = 0;
    for (size_t i = 0; l->retention_ns > 0 && i < n; i++) {
        if (verified[i].end_ns <= now_ns - l->retention_ns &&
            (!l->may_drop ||
             l->may_drop(l->may_drop_ctx, verified, n, verified[i].start_ns, now_ns)) &&
            drop_one(l, &verified[i])) {
            verified[i].write_gen = BKT_GEN_NONE; /* a new block there starts unverified */
            dropped++;
        }
    }
    return dropped;
}

/* A partition's gone list naming the local block's own upload: the drop did
 * not happen (a crash between list and drop) when the block still holds the
 * recorded content. */
static void marker_check(const bkt_local_t *l, int64_t start_ns)
{
    char start[32], name[BKT_NAME_MAX], version[BKT_VERSION_MAX], now[BKT_VERSION_MAX];
    bkt_start_name(start_ns, start);
    char *gone = bkt_gone_read(l->uploads, start);
    if (gone && bkt_record_read(l->uploads, start, name, version) == 0 &&
        bkt_gone_lists(gone, name) && current_version(l->store, start_ns, now) == 0 &&
        strcmp(now, version) == 0) {
        char *rest = gone_without(gone, name);
        if (gone_write(l->uploads, start, rest) != 0)
            LC_LOG_ERROR("bucket: cannot fix the gone list of block=%s", start);
        lc_free(rest);
    }
    lc_free(gone);
}

void bkt_local_markers_check(const bkt_local_t *l)
{
    lc_store_block_state_t *states;
    size_t n;
    if (lc_store_block_states(l->store, &states, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++)
        marker_check(l, states[i].start_ns);
    lc_free(states);
}
