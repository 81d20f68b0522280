/*
 * bucket_rollup.c — the day and 6-hour rollups of uploaded blocks go up
 * beside them (issue 27: "its day/6-hour rollups go up once"), so that a
 * reader of dropped hours fetches one object per window instead of one per
 * hour (bucket_read.c reads them back for flame graphs and series).
 *
 * A window's rollup goes up when it ended, every block of it that holds
 * profiles is local and in the bucket at its current content (its upload
 * record names its version, and no gone list names that object), none of
 * its partitions was dropped (no gone list: the local rollup would sum part
 * of the window), and the store's rollup summed exactly the reader's
 * snapshots of those blocks (lc_store_rollup_export). Its index entry then
 * names the block objects, with their versions, that the rollup sums: a
 * reader may use the rollup exactly when the objects it would read for that
 * window are those. Layout (below --storage.prefix):
 *   rollups/<ing>/<window>-<level>-<life>-<sig>/rollup.mdb   the rollup (LMDB)
 *   rollup-index/<ing>/<window>-<level>-<life>.json          its entry, written last
 * <sig> is a hash of the objects it sums: a rebuilt rollup (a late write
 * changed a block under it) is another data object, and replacing the entry
 * switches to it at once (an entry never names data of other content). The
 * old data object is deleted afterwards. Entries are "guarded": before a
 * named object is replaced (the same name uploaded again, its block having
 * changed), the entries of its ended windows are deleted
 * (bkt_rollups_unguard), so a listed entry names only objects at the
 * versions the bucket holds, in every life of the data dir. A reader
 * without the upload records (the querier's shard) relies on that and
 * compares names only. Local record:
 * <data.dir>/uploads/rollup-<level>-<window> = the data key last uploaded.
 *
 * Threading: the uploader's thread only (bucket.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bucket_int.h"
#include "lc/alloc.h"
#include "lc/hash.h"
#include "lc/log.h"

/* What one window's rollup sums: the objects, and the times of their profiles. */
typedef struct ru_window_s {
    int level;
    int64_t start_ns, min_ns, max_ns;
    size_t n;
    bkt_rollup_object_t objs[BKT_ROLLUP_MAX_OBJECTS];
} ru_window_t;

typedef enum { RU_DONE, RU_NOT_READY, RU_FAILED } ru_outcome_t;

static int64_t window_of(int level, int64_t t_ns)
{
    int64_t len = bkt_rollup_level_ns(level), w = t_ns / len;
    return (t_ns % len < 0 ? w - 1 : w) * len;
}

/* ---------------------------------------------------------------- one window */

/* Adds reader block i to w; false when the bucket does not hold exactly
 * what the block holds. */
static bool window_add_block(const bkt_rollups_t *ru, lc_store_reader_t *r, size_t i,
                             ru_window_t *w)
{
    lc_block_info_t in;
    if (lc_block_info(lc_store_reader_block(r, i), &in) != 0)
        return false;
    if (in.profiles == 0)
        return true; /* nothing summed, no object */
    char start[32], version[BKT_VERSION_MAX];
    bkt_start_name(in.start_ns, start);
    bkt_version_of(&in, version);
    bkt_rollup_object_t *o = &w->objs[w->n];
    if (w->n == BKT_ROLLUP_MAX_OBJECTS ||
        bkt_record_read(ru->uploads, start, o->name, o->version) != 0 ||
        strcmp(o->version, version) != 0)
        return false;
    w->min_ns = w->n == 0 || in.min_time_ns < w->min_ns ? in.min_time_ns : w->min_ns;
    w->max_ns = w->n == 0 || in.max_time_ns > w->max_ns ? in.max_time_ns : w->max_ns;
    w->n++;
    return true;
}

/* Whether a partition of the window was dropped locally (it has a gone
 * list): the local rollup would then sum only part of what the bucket holds. */
static bool window_dropped(const bkt_rollups_t *ru, int level, int64_t start_ns)
{
    char start[32];
    for (int64_t t = start_ns; t < start_ns + bkt_rollup_level_ns(level); t += ru->block_ns) {
        bkt_start_name(t, start);
        char *gone = bkt_gone_read(ru->uploads, start);
        lc_free(gone);
        if (gone)
            return true;
    }
    return false;
}

/* "rollup-index/<ing>/<window>-<level>-<life>.json" */
static void entry_key(const bkt_rollups_t *ru, int level, int64_t window_ns, char *out)
{
    char start[32];
    bkt_start_name(window_ns, start);
    snprintf(out, LC_OBJSTORE_KEY_MAX, "rollup-index/%s/%s-%d-%s.json", ru->ing, start, level,
             ru->life);
}

static void window_keys(const bkt_rollups_t *ru, const ru_window_t *w, char *data_key,
                        char *index_key, char *record)
{
    char start[32];
    bkt_start_name(w->start_ns, start);
    uint64_t sig = LC_FNV64_OFFSET;
    for (size_t i = 0; i < w->n; i++) {
        sig = lc_fnv1a64(sig, w->objs[i].name, strlen(w->objs[i].name) + 1);
        sig = lc_fnv1a64(sig, w->objs[i].version, strlen(w->objs[i].version) + 1);
    }
    snprintf(data_key, LC_OBJSTORE_KEY_MAX, "rollups/%s/%s-%d-%s-%016" PRIx64 "/rollup.mdb",
             ru->ing, start, w->level, ru->life, sig);
    entry_key(ru, w->level, w->start_ns, index_key);
    snprintf(record, 4200, "%s/rollup-%d-%s", ru->uploads, w->level, start);
}

static char *entry_json(const bkt_rollups_t *ru, const ru_window_t *w, const char *data_key,
                        size_t bytes)
{
    json_t *objs = json_array();
    for (size_t i = 0; objs && i < w->n; i++)
        json_array_append_new(
            objs, json_pack("{s:s, s:s}", "name", w->objs[i].name, "version", w->objs[i].version));
    json_int_t end_ns = (json_int_t)w->start_ns + (json_int_t)bkt_rollup_level_ns(w->level);
    json_t *j =
        json_pack("{s:s, s:b, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:s, s:o}", "format",
                  BKT_ROLLUP_FORMAT, "guarded", 1, "ingester", ru->id, "zone", ru->zone, "level",
                  w->level, "start_ns", (json_int_t)w->start_ns, "end_ns", end_ns, "min_time_ns",
                  (json_int_t)w->min_ns, "max_time_ns", (json_int_t)w->max_ns, "bytes",
                  (json_int_t)bytes, "data", data_key, "objects", objs);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

/* The window's rollup exported (from reader r's snapshots) into memory. */
static int window_export(const bkt_rollups_t *ru, lc_store_reader_t *r, const ru_window_t *w,
                         uint8_t **data, size_t *len)
{
    char file[4200], scratch[4200];
    snprintf(file, sizeof file, "%s/.rollup", ru->uploads);
    snprintf(scratch, sizeof scratch, "%s/.rollup-env", ru->uploads);
    if (mkdir(scratch, 0755) != 0 && errno != EEXIST)
        return LC_ESTORE;
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return LC_ESTORE;
    int rc = lc_store_rollup_export(r, w->level, w->start_ns, scratch, fd);
    close(fd);
    if (!rc)
        rc = bkt_file_read(file, (size_t)1 << 30, data, len);
    unlink(file);
    return rc;
}

/* Data, then the entry, then the local record; the data object the record
 * named before (another content of the window) is deleted last. */
static int window_put(bkt_rollups_t *ru, const ru_window_t *w, const uint8_t *data, size_t len,
                      const char *data_key, const char *index_key, const char *record,
                      const char *old_key)
{
    int rc = lc_objstore_put(ru->os, data_key, data, len);
    char *entry = rc ? NULL : entry_json(ru, w, data_key, len);
    if (!rc)
        rc = entry ? lc_objstore_put(ru->os, index_key, entry, strlen(entry)) : -ENOMEM;
    free(entry);
    if (rc) {
        LC_LOG_WARN("bucket: rollup upload failed, retried key=%s err=\"%s\" detail=\"%s\"",
                    data_key, lc_strerror(rc), lc_objstore_last_error(ru->os));
        return rc;
    }
    rc = bkt_file_write(record, data_key, strlen(data_key));
    if (!rc && old_key[0] && strcmp(old_key, data_key) != 0 &&
        lc_objstore_delete(ru->os, old_key) != 0)
        LC_LOG_WARN("bucket: cannot delete a replaced rollup key=%s", old_key);
    lc_metric_add(ru->uploaded, 1);
    LC_LOG_INFO("bucket: rollup uploaded key=%s bytes=%zu blocks=%zu", data_key, len, w->n);
    return rc;
}

static ru_outcome_t window_upload(bkt_rollups_t *ru, int level, int64_t start_ns)
{
    lc_store_reader_t *r;
    if (lc_store_read_begin(ru->store, start_ns, start_ns + bkt_rollup_level_ns(level) - 1, &r) !=
        0)
        return RU_FAILED;
    ru_window_t *w = lc_xcalloc(1, sizeof(*w));
    w->level = level;
    w->start_ns = start_ns;
    bool whole = !window_dropped(ru, level, start_ns);
    for (size_t i = 0; whole && i < lc_store_reader_count(r); i++)
        whole = window_add_block(ru, r, i, w);
    char data_key[LC_OBJSTORE_KEY_MAX], index_key[LC_OBJSTORE_KEY_MAX], record[4200];
    char old_key[LC_OBJSTORE_KEY_MAX] = "";
    window_keys(ru, w, data_key, index_key, record);
    uint8_t *old = NULL, *data = NULL;
    size_t old_len = 0, len = 0;
    if (bkt_file_read(record, LC_OBJSTORE_KEY_MAX - 1, &old, &old_len) == 0) {
        snprintf(old_key, sizeof old_key, "%.*s", (int)old_len, (const char *)old);
        lc_free(old);
    }
    ru_outcome_t out = RU_DONE; /* not whole, or nothing in it: never a rollup to keep */
    int rc = 0;
    if (whole && w->n > 0 && strcmp(old_key, data_key) != 0) {
        rc = window_export(ru, r, w, &data, &len);
        /* unusable stays so until a block changes; not built yet: the next pass */
        out = rc == 0 || rc == LC_EUNSUPPORTED ? RU_DONE : RU_NOT_READY;
    }
    lc_store_read_end(r);
    if (data && window_put(ru, w, data, len, data_key, index_key, record, old_key) != 0)
        out = RU_FAILED;
    lc_free(data);
    lc_free(w);
    return out;
}

/* ---------------------------------------------------------------- the pass */

/* Whether (level, window) was done at this signature of its blocks' write counts. */
static bool done_at(const bkt_rollups_t *ru, int level, int64_t window, uint64_t sig)
{
    for (size_t i = 0; i < ru->n_done; i++)
        if (ru->done[i].level == level && ru->done[i].start_ns == window)
            return ru->done[i].sig == sig;
    return false;
}

static void done_set(bkt_rollups_t *ru, int level, int64_t window, uint64_t sig)
{
    for (size_t i = 0; i < ru->n_done; i++) {
        if (ru->done[i].level == level && ru->done[i].start_ns == window) {
            ru->done[i].sig = sig;
            return;
        }
    }
    ru->done = lc_xgrow(ru->done, &ru->cap_done, ru->n_done + 1, sizeof(*ru->done));
    ru->done[ru->n_done++] = (bkt_rollup_done_t){.level = level, .start_ns = window, .sig = sig};
}

/* The signature of the window's blocks' write counts, as the pass sees them. */
static uint64_t window_sig(const lc_store_block_state_t *verified, size_t n, int level,
                           int64_t window)
{
    uint64_t sig = LC_FNV64_OFFSET;
    for (size_t i = 0; i < n; i++) {
        if (window_of(level, verified[i].start_ns) != window)
            continue;
        sig = lc_fnv1a64(sig, &verified[i].start_ns, sizeof verified[i].start_ns);
        sig = lc_fnv1a64(sig, &verified[i].write_gen, sizeof verified[i].write_gen);
    }
    return sig;
}

/* Whether blocks tile the 6-hour windows: else the store keeps no rollups
 * and none go up. */
static bool rollups_kept(const bkt_rollups_t *ru)
{
    return ru->block_ns > 0 && bkt_rollup_level_ns(0) % ru->block_ns == 0;
}

bool bkt_rollups_settled(const bkt_rollups_t *ru, const lc_store_block_state_t *verified, size_t n,
                         int64_t start_ns, int64_t now_ns)
{
    if (!rollups_kept(ru))
        return true;
    int64_t len = bkt_rollup_level_ns(0);
    int64_t win = window_of(0, start_ns);
    if (win + len > now_ns || now_ns - (win + len) > len)
        return true;
    return done_at(ru, 0, win, window_sig(verified, n, 0, win));
}

int bkt_rollups_pass(bkt_rollups_t *ru, const lc_store_block_state_t *verified, size_t n,
                     int64_t now_ns)
{
    if (!rollups_kept(ru))
        return 0;
    for (int lv = 0; lv < BKT_ROLLUP_LEVELS; lv++) {
        for (size_t lo = 0; lo < n;) {
            int64_t win = window_of(lv, verified[lo].start_ns);
            size_t hi = lo;
            while (hi < n && window_of(lv, verified[hi].start_ns) == win)
                hi++;
            uint64_t sig = window_sig(verified + lo, hi - lo, lv, win);
            lo = hi;
            if (win + bkt_rollup_level_ns(lv) > now_ns || done_at(ru, lv, win, sig))
                continue;
            ru_outcome_t o = window_upload(ru, lv, win);
            if (o == RU_FAILED)
                return LC_ESTORE; /* the bucket or the disk: the next pass */
            if (o == RU_DONE)
                done_set(ru, lv, win, sig);
        }
    }
    return 0;
}

int bkt_rollups_unguard(const bkt_rollups_t *ru, int64_t start_ns, int64_t now_ns)
{
    if (!rollups_kept(ru))
        return 0;
    int rc = 0;
    for (int lv = 0; lv < BKT_ROLLUP_LEVELS && !rc; lv++) {
        int64_t win = window_of(lv, start_ns);
        char key[LC_OBJSTORE_KEY_MAX];
        entry_key(ru, lv, win, key);
        if (win + bkt_rollup_level_ns(lv) <= now_ns && (rc = lc_objstore_delete(ru->os, key)))
            LC_LOG_WARN("bucket: cannot withdraw a rollup entry before its block changes, "
                        "retried key=%s err=\"%s\"",
                        key, lc_strerror(rc));
    }
    return rc;
}

/* ---------------------------------------------------------------- retention */

/* The end of the window a rollup key names (".../<secs>-<level>-..."), or
 * INT64_MAX when it names none (a listing is outside input: kept). */
static int64_t key_window_end(const char *key, const char *prefix)
{
    const char *p = key + strlen(prefix);
    long long sec;
    int level;
    if (sscanf(p, "%lld-%d-", &sec, &level) != 2 || level < 0 || level >= BKT_ROLLUP_LEVELS ||
        sec < 0 || sec > INT64_MAX / 1000000000 - 86400)
        return INT64_MAX;
    return (int64_t)sec * 1000000000 + bkt_rollup_level_ns(level);
}

static int expire_prefix(const bkt_rollups_t *ru, const char *prefix, int64_t oldest_ns)
{
    lc_objstore_list_t l = {0};
    int rc = lc_objstore_list(ru->os, prefix, &l);
    for (size_t i = 0; !rc && i < l.n; i++)
        if (key_window_end(l.keys[i], prefix) < oldest_ns)
            rc = lc_objstore_delete(ru->os, l.keys[i]);
    lc_objstore_list_free(&l);
    return rc;
}

int bkt_rollups_expire(const bkt_rollups_t *ru, int64_t oldest_ns)
{
    char prefix[BKT_ING_MAX + 32];
    snprintf(prefix, sizeof prefix, "rollup-index/%s/", ru->ing);
    int rc = expire_prefix(ru, prefix, oldest_ns); /* no entry ever names missing data */
    snprintf(prefix, sizeof prefix, "rollups/%s/", ru->ing);
    return rc ? rc : expire_prefix(ru, prefix, oldest_ns);
}

void bkt_rollups_fini(bkt_rollups_t *ru)
{
    lc_free(ru->done);
    ru->done = NULL;
    ru->n_done = ru->cap_done = 0;
}
