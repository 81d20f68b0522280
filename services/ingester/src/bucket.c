/*
 * bucket.c — the uploader (bucket.h): a thread that, every interval, finds
 * the closed blocks whose content changed since their last upload, copies
 * each (one LMDB snapshot) and uploads it: the data object first, then the
 * meta object that is its index entry, then the local record. A block is in
 * the bucket's index only once both objects are stored; a crash in between
 * leaves an unindexed data object that the next upload of the block
 * overwrites. A bucket that fails stops the pass (logged once per outage,
 * counted); blocks wait locally and the next pass tries again. A local block
 * leaves only through --retention or, once the bucket is confirmed to hold
 * its current content, --storage.local-retention (bucket_local.c). Late writes into an uploaded
 * block change its content; the block is then uploaded again under the same
 * keys once it is compacted again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "bucket_int.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"

#define NS_PER_S 1000000000LL
#define RETENTION_EVERY_NS (60 * NS_PER_S)

struct ing_bucket_s {
    ing_bucket_opts_t o;
    char *data_dir, *id, *zone;
    char ing[BKT_ING_MAX];
    char uploads[4096];
    char life[17];
    lc_store_t *store;
    lc_objstore_t *os;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool failing; /* the last transfer failed: logged once per outage */
    int64_t retention_done_ns;
    /* Blocks found in the bucket as they are (uploaded, or the record matched, or
     * empty) at a write count: skipped until the count changes. Sorted by start. */
    lc_store_block_state_t *verified;
    size_t n_verified;
    bkt_local_t local;
    bkt_rollups_t rollups;
    lc_metric_t *rollups_uploaded;
    lc_metric_t *uploaded, *failures, *pending, *uploaded_bytes, *deleted, *local_dropped;
};

/* A block that ended and holds profiles: what it holds now. */
typedef struct bkt_candidate_s {
    lc_block_info_t info;
    char start[32];
    char version[BKT_VERSION_MAX];
} bkt_candidate_t;

static void note_failure(ing_bucket_t *b, const char *what, const char *key, int rc)
{
    lc_metric_add(b->failures, 1);
    if (!b->failing)
        LC_LOG_WARN("bucket: %s failed, blocks wait locally and are retried key=%s err=\"%s\" "
                    "detail=\"%s\"",
                    what, key, lc_strerror(rc), lc_objstore_last_error(b->os));
    b->failing = true;
}

/* ---------------------------------------------------------------- one block */

static char *meta_json(const ing_bucket_t *b, const bkt_candidate_t *c, const char *data_key,
                       uint64_t bytes)
{
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s}",
                  "format", BKT_FORMAT, "ingester", b->id, "zone", b->zone, "block", c->start,
                  "start_ns", (json_int_t)c->info.start_ns, "end_ns", (json_int_t)c->info.end_ns,
                  "min_time_ns", (json_int_t)c->info.min_time_ns, "max_time_ns",
                  (json_int_t)c->info.max_time_ns, "series", (json_int_t)c->info.series, "profiles",
                  (json_int_t)c->info.profiles, "samples", (json_int_t)c->info.samples, "bytes",
                  (json_int_t)bytes, "data", data_key, "version", c->version);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

/* The block's LMDB file, one snapshot of it, into memory (lc_free). */
static int snapshot(ing_bucket_t *b, const bkt_candidate_t *c, uint8_t **data, size_t *len)
{
    lc_store_reader_t *r;
    int rc = lc_store_read_begin(b->store, c->info.start_ns, c->info.start_ns, &r);
    if (rc)
        return rc;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/.copy", b->uploads);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    rc = fd < 0 ? LC_ESTORE : LC_ENOTFOUND;
    for (size_t i = 0; fd >= 0 && i < lc_store_reader_count(r); i++) {
        lc_block_t *blk = lc_store_reader_block(r, i);
        lc_block_info_t in;
        if (lc_block_info(blk, &in) == 0 && in.start_ns == c->info.start_ns)
            rc = lc_block_copy(blk, fd);
    }
    lc_store_read_end(r);
    if (fd >= 0)
        close(fd);
    if (!rc)
        rc = bkt_file_read(
            tmp, b->o.store.max_object_bytes ? b->o.store.max_object_bytes : (size_t)1 << 30, data,
            len);
    unlink(tmp);
    return rc;
}

/* The name under which block c goes up: the one it had, else a new one. A
 * record whose partition was dropped locally belongs to the dropped block. */
static void block_name(const ing_bucket_t *b, const bkt_candidate_t *c, const char *old,
                       char name[BKT_NAME_MAX])
{
    char *gone = bkt_gone_read(b->uploads, c->start);
    if (old[0] && !bkt_gone_lists(gone, old))
        snprintf(name, BKT_NAME_MAX, "%s", old);
    else
        bkt_upload_name(c->start, b->life, gone != NULL, name);
    lc_free(gone);
}

static int upload_block(ing_bucket_t *b, const bkt_candidate_t *c, const char *old_name)
{
    char name[BKT_NAME_MAX], data_key[LC_OBJSTORE_KEY_MAX], index_key[LC_OBJSTORE_KEY_MAX];
    block_name(b, c, old_name, name);
    bkt_data_key(b->ing, name, data_key, sizeof data_key);
    bkt_index_key(b->ing, name, index_key, sizeof index_key);
    uint8_t *data;
    size_t len;
    int rc = snapshot(b, c, &data, &len);
    if (rc) {
        LC_LOG_ERROR("bucket: cannot copy block=%s err=\"%s\"", c->start, lc_strerror(rc));
        return rc;
    }
    if (strcmp(name, old_name) == 0 &&
        (rc = bkt_rollups_unguard(&b->rollups, c->info.start_ns, lc_realtime_ns())) != 0) {
        lc_free(data);
        note_failure(b, "rollup entry delete", "rollup-index/", rc);
        return rc;
    }
    rc = lc_objstore_put(b->os, data_key, data, len);
    lc_free(data);
    if (rc) {
        note_failure(b, "upload", data_key, rc);
        return rc;
    }
    char *meta = meta_json(b, c, data_key, len);
    rc = meta ? lc_objstore_put(b->os, index_key, meta, strlen(meta)) : -ENOMEM;
    free(meta);
    if (rc) {
        note_failure(b, "index entry", index_key, rc);
        return rc;
    }
    rc = bkt_record_write(b->uploads, c->start, name, c->version);
    if (rc)
        return rc;
    if (b->failing)
        LC_LOG_INFO("bucket: uploads work again");
    b->failing = false;
    lc_metric_add(b->uploaded, 1);
    lc_metric_add(b->uploaded_bytes, (double)len);
    LC_LOG_INFO("bucket: block uploaded key=%s bytes=%zu profiles=%" PRIu64, data_key, len,
                c->info.profiles);
    return 0;
}

/* ---------------------------------------------------------------- one pass */

/* Whether block st was verified at its current write count. */
static bool verified_at(const ing_bucket_t *b, const lc_store_block_state_t *st)
{
    size_t lo = 0, hi = b->n_verified;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->verified[mid].start_ns < st->start_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->n_verified && b->verified[lo].start_ns == st->start_ns &&
           b->verified[lo].write_gen == st->write_gen;
}

typedef enum { BKT_IN_BUCKET, BKT_NOT_READY, BKT_FAILED } bkt_outcome_t;

/* One ended block: what it holds now against its last upload; uploads it
 * when it changed and is settled (unsettled: the open block at a graceful
 * stop, which goes up as it is). */
static bkt_outcome_t check_block(ing_bucket_t *b, const lc_store_block_state_t *st, bool unsettled)
{
    lc_store_reader_t *r;
    if (lc_store_read_begin(b->store, st->start_ns, st->start_ns, &r) != 0)
        return BKT_FAILED;
    bkt_candidate_t c = {0};
    bool found = false, settled = false;
    for (size_t i = 0; i < lc_store_reader_count(r) && !found; i++) {
        found = lc_block_info(lc_store_reader_block(r, i), &c.info) == 0 &&
                c.info.start_ns == st->start_ns;
        settled = found && lc_block_settled(r, i);
    }
    lc_store_read_end(r);
    if (!found || c.info.profiles == 0)
        return BKT_IN_BUCKET; /* dropped meanwhile, or nothing to keep */
    bkt_start_name(c.info.start_ns, c.start);
    bkt_version_of(&c.info, c.version);
    char name[BKT_NAME_MAX] = "", version[BKT_VERSION_MAX] = "";
    if (bkt_record_read(b->uploads, c.start, name, version) != 0)
        name[0] = '\0';
    else if (strcmp(version, c.version) == 0)
        return BKT_IN_BUCKET;
    if (!settled && !unsettled)
        return BKT_NOT_READY;
    return upload_block(b, &c, name) == 0 ? BKT_IN_BUCKET : BKT_FAILED;
}

/* The blocks still being written (a graceful stop's last pass, open_too):
 * uploaded as they are, so a volume deleted after the stop loses nothing
 * acknowledged; the next start's writes into them make a new version that
 * goes up again once the block ended. 0, or how many are not in the bucket. */
static size_t upload_open(ing_bucket_t *b, const lc_store_block_state_t *states, size_t n,
                          int64_t now_ns)
{
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        if (states[i].end_ns > now_ns && check_block(b, &states[i], true) != BKT_IN_BUCKET)
            pending++;
    return pending;
}

/* Every ended block whose write count changed since it was last verified;
 * stops at the first failure (the bucket or the disk is down: next pass).
 * Returns how many ended blocks (with open_too, blocks) are still not in
 * the bucket. */
static size_t upload_pass(ing_bucket_t *b, bool open_too)
{
    int64_t now_ns = lc_realtime_ns();
    lc_store_block_state_t *states;
    size_t n, kept = 0, pending = 0;
    if (lc_store_block_states(b->store, &states, &n) != 0)
        return SIZE_MAX;
    if (open_too) /* before the ended ones are kept in place below */
        pending += upload_open(b, states, n, now_ns);
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        const lc_store_block_state_t *st = &states[i];
        bool ok = st->end_ns <= now_ns && verified_at(b, st);
        if (!ok && st->end_ns <= now_ns && !failed) {
            bkt_outcome_t o = check_block(b, st, false);
            ok = o == BKT_IN_BUCKET;
            failed = o == BKT_FAILED;
        }
        if (ok)
            states[kept++] = *st; /* sorted still: a subsequence */
        else if (st->end_ns <= now_ns)
            pending++;
    }
    lc_free(b->verified);
    b->verified = states;
    b->n_verified = kept;
    lc_metric_set(b->pending, (double)pending);
    return pending;
}

/* ---------------------------------------------------------------- retention */

/* The index entry goes first: no entry ever names a missing data object. */
static int delete_block(ing_bucket_t *b, const char *index_key)
{
    const char *slash = strrchr(index_key, '/');
    char name[BKT_NAME_MAX], data_key[LC_OBJSTORE_KEY_MAX];
    size_t len = strlen(slash + 1); /* "<name>.json" */
    snprintf(name, sizeof name, "%.*s", (int)(len > 5 ? len - 5 : 0), slash + 1);
    bkt_data_key(b->ing, name, data_key, sizeof data_key);
    int rc = lc_objstore_delete(b->os, index_key);
    if (!rc)
        rc = lc_objstore_delete(b->os, data_key);
    if (rc)
        note_failure(b, "delete", index_key, rc);
    else
        lc_metric_add(b->deleted, 1);
    return rc;
}

static void retention_pass(ing_bucket_t *b, int64_t now_ns)
{
    if (b->o.retention_ns <= 0 || now_ns - b->retention_done_ns < RETENTION_EVERY_NS)
        return;
    char prefix[BKT_ING_MAX + 16];
    snprintf(prefix, sizeof prefix, "index/%s/", b->ing);
    lc_objstore_list_t l = {0};
    if (lc_objstore_list(b->os, prefix, &l) != 0)
        return;
    int64_t start;
    char name[BKT_NAME_MAX];
    for (size_t i = 0; i < l.n; i++) {
        if (bkt_index_key_parse(l.keys[i], &start, name) &&
            start + b->o.block_duration_ns < now_ns - b->o.retention_ns &&
            delete_block(b, l.keys[i]) != 0)
            break;
    }
    lc_objstore_list_free(&l);
    int rc = bkt_rollups_expire(&b->rollups, now_ns - b->o.retention_ns);
    if (rc)
        note_failure(b, "rollup delete", "rollups/", rc);
    b->retention_done_ns = now_ns;
}

/* ---------------------------------------------------------------- thread */

static bool wait_interval(ing_bucket_t *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)b->o.interval_ms * 1000000;
    ts.tv_sec += (time_t)(ns / NS_PER_S);
    ts.tv_nsec = (long)(ns % NS_PER_S);
    pthread_mutex_lock(&b->mu);
    if (!b->stop)
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    bool stop = b->stop;
    pthread_mutex_unlock(&b->mu);
    return !stop;
}

/* A local block leaves once its window's rollup was looked at (bkt_local_t). */
static bool rollup_settled(void *ctx, const lc_store_block_state_t *verified, size_t n,
                           int64_t start_ns, int64_t now_ns)
{
    return bkt_rollups_settled(ctx, verified, n, start_ns, now_ns);
}

/* The windows' rollups go up after their blocks: an entry names objects. */
static void rollups_pass(ing_bucket_t *b)
{
    int rc = bkt_rollups_pass(&b->rollups, b->verified, b->n_verified, lc_realtime_ns());
    if (rc)
        note_failure(b, "rollup upload", "rollups/", rc);
}

/* After drops the store's floor rises to its oldest block (floor.h: the mark
 * queriers read the bucket below); LC_EINPUT: no floor is set (yet). */
static void floor_pass(ing_bucket_t *b)
{
    int rc = lc_store_floor_update(b->store, lc_realtime_ns());
    if (rc && rc != LC_EINPUT)
        LC_LOG_WARN("bucket: the floor was not published, retried next pass err=\"%s\"",
                    lc_strerror(rc));
}

static void *uploader_main(void *arg)
{
    ing_bucket_t *b = arg;
    do {
        upload_pass(b, false);
        rollups_pass(b);
        lc_metric_add(b->local_dropped,
                      (double)bkt_local_retention_pass(&b->local, b->verified, b->n_verified,
                                                       lc_realtime_ns()));
        floor_pass(b);
        retention_pass(b, lc_realtime_ns());
    } while (wait_interval(b));
    return NULL;
}

static void bucket_register_metrics(ing_bucket_t *b, lc_metrics_t *m)
{
    b->uploaded = lc_metrics_counter(m, "ember_bucket_blocks_uploaded_total",
                                     "Closed blocks uploaded to the object store", "");
    b->uploaded_bytes = lc_metrics_counter(m, "ember_bucket_uploaded_bytes_total",
                                           "Bytes of block files uploaded to the object store", "");
    b->failures = lc_metrics_counter(m, "ember_bucket_failures_total",
                                     "Object store requests that failed after their retries", "");
    b->pending = lc_metrics_gauge(
        m, "ember_bucket_blocks_pending",
        "Closed blocks whose content is not in the object store yet (they stay local)", "");
    b->deleted = lc_metrics_counter(m, "ember_bucket_blocks_deleted_total",
                                    "Blocks deleted from the object store by --retention", "");
    b->rollups_uploaded =
        lc_metrics_counter(m, "ember_bucket_rollups_uploaded_total",
                           "Day and 6-hour rollups uploaded beside the blocks they sum", "");
    b->local_dropped = lc_metrics_counter(
        m, "ember_bucket_local_blocks_dropped_total",
        "Local blocks deleted by --storage.local-retention after the object store was "
        "confirmed to hold their content",
        "");
}

int ing_bucket_start(const ing_bucket_opts_t *o, lc_store_t *store, ing_bucket_t **out)
{
    ing_bucket_t *b = lc_xcalloc(1, sizeof(*b));
    b->o = *o;
    b->store = store;
    b->id = lc_xstrdup(o->ingester_id);
    b->zone = lc_xstrdup(o->zone ? o->zone : "");
    bkt_ingester_key(o->ingester_id, b->ing);
    bucket_register_metrics(b, o->metrics);
    int rc = bkt_uploads_dir(o->data_dir, b->uploads, sizeof b->uploads);
    if (!rc)
        rc = bkt_life(b->uploads, b->life);
    if (!rc)
        rc = lc_objstore_open(&o->store, &b->os);
    if (rc) {
        LC_LOG_ERROR("bucket: cannot start the uploader err=\"%s\"", lc_strerror(rc));
        b->os = NULL;
        ing_bucket_stop(b);
        return rc;
    }
    b->local = (bkt_local_t){.store = store,
                             .os = b->os,
                             .ing = b->ing,
                             .uploads = b->uploads,
                             .retention_ns = o->local_retention_ns,
                             .may_drop = rollup_settled,
                             .may_drop_ctx = &b->rollups};
    bkt_local_markers_check(&b->local);
    b->rollups = (bkt_rollups_t){.store = store,
                                 .os = b->os,
                                 .ing = b->ing,
                                 .uploads = b->uploads,
                                 .life = b->life,
                                 .id = b->id,
                                 .zone = b->zone,
                                 .block_ns = o->block_duration_ns,
                                 .uploaded = b->rollups_uploaded};
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (pthread_create(&b->thread, NULL, uploader_main, b) != 0) {
        b->thread = 0;
        ing_bucket_stop(b);
        return -ENOMEM;
    }
    LC_LOG_INFO("bucket: uploading closed blocks as ingester=%s life=%s", b->ing, b->life);
    *out = b;
    return 0;
}

static void uploader_join(ing_bucket_t *b)
{
    if (!b->thread)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    b->thread = 0;
}

void ing_bucket_finish(ing_bucket_t *b)
{
    if (!b || !b->os)
        return;
    uploader_join(b);
    size_t pending = upload_pass(b, true); /* rollups wait for the next start */
    if (pending)
        LC_LOG_WARN("bucket: stopping with blocks only on this volume blocks=%zu "
                    "(the next start uploads them; do not delete the volume)",
                    pending);
    else
        LC_LOG_INFO("bucket: every block is in the object store");
}

void ing_bucket_stop(ing_bucket_t *b)
{
    if (!b)
        return;
    uploader_join(b);
    lc_objstore_close(b->os);
    bkt_rollups_fini(&b->rollups);
    lc_free(b->verified);
    lc_free(b->id);
    lc_free(b->zone);
    lc_free(b);
}
