/*
 * bucket_read.c — bucket_read.h: partitions no longer local, answered from
 * this node's objects in the bucket through a bounded cache.
 *
 * A query's reader is built in this order (lc_store_set_source), which is
 * what makes the boundary exact against bucket_local.c's drop (gone list
 * written, then the block dropped under the store's lock):
 *   1. the gone list of every partition of the range is read;
 *   2. the local snapshot is begun (lc_store_read_begin);
 *   3. per partition: not in the snapshot → every object of this ingester
 *      for it (a block dropped before 2 was confirmed in the bucket first);
 *      in it → every object but the one the local block holds: the one its
 *      upload record names (read now), unless that name is on the list read
 *      in 1 (then the local block is a new one, written after that drop). A
 *      drop after 1 is of a block in the snapshot whose name is not on the
 *      list read, so it is skipped once and read never. After a lost volume
 *      a new local block has no record: the old objects are all read.
 * The index listing is cached for LIST_TTL_NS and fetched again when it
 * lacks a name step 3 knows must be there (the upload record or the list);
 * an older listing that lacks none still answers while the bucket is down.
 *
 * The cache: whole block objects (checksum verified by the object store's
 * get), one read-only store each under <cache_dir>/<name>/blocks/<start>/.
 * Whole objects rather than ranged GETs: LMDB reads its pages through mmap,
 * in an order no one knows before the query runs, so a block is only usable
 * once it is all on disk. Bounded by cache_bytes: the least recently used
 * entries no reader holds go first; a query that needs more than the bound
 * in use at once fails (LC_ETOOBIG) rather than exceed it.
 *
 * Rollups (a reader begun with LC_READ_ROLLUPS_SUFFICE: a flame graph or
 * series that takes rollups): a whole window of the range (days first, then
 * 6-hour windows in what is left) none of whose partitions is local is
 * answered by its rollup object (bucket_rollup.c) instead of its blocks when
 * the rollup's index entry names exactly the objects step 3 would read
 * there, each at the version this node's upload record of its partition
 * names. A dropped partition's object is never rewritten (a later write goes
 * up under a new name), so such a match cannot go stale; objects without a
 * record (an earlier life's) never match. Entries are fetched once (again
 * when one fails to match after a newer listing); a rollup that cannot be
 * fetched, opened or used gives its window back to the blocks. Rollup
 * objects are cached like blocks, <cache_dir>/<name>/rollup.mdb.
 *
 * Downloads: a query's missing objects are fetched FETCHES_AT_ONCE at a time
 * by worker threads, each with its own object store (one store serves one
 * thread). The query thread holds mu and only waits for them meanwhile, so
 * the workers act under its hold: fill_mu orders their updates of the cache
 * table among themselves. Each worker has at most one object in memory.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bucket_int.h"
#include "bucket_read.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/members.h"

#define NS_PER_S 1000000000LL
#define LIST_TTL_NS (10 * NS_PER_S)
#define MAX_PARTITIONS 100000 /* a query range, in blocks (11 years of hours) */
#define CACHE_OPEN_BLOCKS 4   /* each cached store holds one block */
/* Downloads in flight per query. A cold week is 168 small objects whose GETs
 * are mostly waiting (a round trip, the server's disk): 4 hid most of that on
 * loopback SeaweedFS (bench/README.md, "bucket query"); more would hold more
 * objects in memory at once for little gain. */
#define FETCHES_AT_ONCE 4

/* A cached object's directory under cache_dir: "<ing>@<name>" (the
 * querier's shard reads many ingesters' objects; names repeat across them). */
#define ENTRY_NAME_MAX (BKT_ING_MAX + BKT_NAME_MAX + 2)

typedef struct cache_entry_s {
    char name[ENTRY_NAME_MAX];
    int64_t start_ns;
    uint64_t bytes, last_used;
    unsigned refs;            /* readers holding it: never evicted meanwhile */
    lc_store_t *store;        /* a block object's, or */
    lc_rollup_file_t *rollup; /* a rollup object's */
    struct ing_bucket_read_s *owner;
} cache_entry_t;

/* An object to read: a block (its index entry's name), or a rollup. */
typedef struct listed_s {
    int64_t start_ns;
    char ing[BKT_ING_MAX]; /* whose: this node's, or (the querier's shard) another's */
    char name[BKT_NAME_MAX];
    const bkt_rollup_entry_t *rollup; /* NULL: a block object */
} listed_t;

/* A rollup index entry of this ingester, fetched and parsed when first
 * needed (rollups_add). */
typedef struct listed_rollup_s {
    int64_t window_ns;
    int level;
    char key[LC_OBJSTORE_KEY_MAX + 1];
    bkt_rollup_entry_t *entry; /* NULL: not fetched (or not ours) */
    uint64_t fetched_gen;      /* the listing generation it was fetched in */
} listed_rollup_t;

/* Another ingester's index, as listed under one generation of its mark (the
 * querier's shard): objects below a mark appear only with a new generation
 * (a drop raises it, a late write lowers it first), so the same generation's
 * listing answers while the bucket cannot list; it is listed again after
 * LIST_TTL_NS as well (--retention deletes objects). */
typedef struct foreign_s {
    char ing[BKT_ING_MAX];
    uint64_t gen;         /* of the mark */
    int64_t listed_at_ns; /* monotonic; 0: never */
    uint64_t list_gen;    /* listings made */
    listed_t *listed;
    size_t n_listed;
    listed_rollup_t *rollups; /* its rollup index, entries fetched when first needed */
    size_t n_rollups;
} foreign_t;

#define MAX_FOREIGN 4096 /* ingesters one querier's shard reads */

struct ing_bucket_read_s {
    lc_objstore_t *os[FETCHES_AT_ONCE]; /* os[0] lists too; os[i] is worker i's */
    foreign_t *foreign;                 /* the querier's shard: other ingesters' indexes */
    size_t n_foreign, cap_foreign;
    lc_store_t *store;
    char ing[BKT_ING_MAX], uploads[4096], cache_dir[4096];
    int64_t block_ns;
    uint64_t cache_bytes, used_bytes, tick;
    pthread_mutex_t mu;      /* guards everything below, and os */
    pthread_mutex_t fill_mu; /* orders the fetch workers' updates (mu held by their query) */
    listed_t *listed;
    size_t n_listed;
    listed_rollup_t *rollups; /* the rollup index, by key */
    size_t n_rollups;
    uint64_t list_gen;    /* listings made */
    int64_t listed_at_ns; /* monotonic; 0: never */
    cache_entry_t **entries;
    size_t n_entries, cap_entries;
    lc_metric_t *cache_bytes_m, *downloads, *evictions, *rollups_read;
    lc_metric_t *fetch_seconds, *open_seconds, *source_seconds; /* where a query's time goes */
};

/* ---------------------------------------------------------------- files */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void rm_tree(const char *path)
{
    (void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes the entries an earlier run left in dir (not known, not counted):
 * only directories named as objects are ("<digits>-<hex>..."), so a cache
 * dir pointed at a directory with other files loses none of them. */
static void cache_dir_clear(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[4400];
    for (struct dirent *de; (de = readdir(d));) {
        size_t digits = strspn(de->d_name, "0123456789");
        if (digits == 0 || de->d_name[digits] != '-' ||
            strspn(de->d_name + digits + 1, "0123456789abcdef-") != strlen(de->d_name + digits + 1))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        rm_tree(path);
    }
    closedir(d);
}

/* ---------------------------------------------------------------- listing */

/* Every key below <kind>/<this ingester>/; mu held. */
static int list_of(ing_bucket_read_t *br, const char *ing, const char *kind, lc_objstore_list_t *l)
{
    char prefix[BKT_ING_MAX + 32];
    snprintf(prefix, sizeof prefix, "%s/%s/", kind, ing);
    int rc = lc_objstore_list(br->os[0], prefix, l);
    if (rc)
        LC_LOG_ERROR("bucket: cannot list prefix=%s err=\"%s\" detail=\"%s\"", prefix,
                     lc_strerror(rc), lc_objstore_last_error(br->os[0]));
    return rc;
}

/* The parsed entry of key in the old listing, taken over (NULL: none).
 * Both listings are in lexical order, so one cursor walks the old one
 * once; a server that lists out of order costs refetches, never a wrong
 * entry (keys are compared). */
static bkt_rollup_entry_t *rollup_entry_take(listed_rollup_t *old, size_t n, size_t *cursor,
                                             const char *key, uint64_t *gen)
{
    while (*cursor < n && strcmp(old[*cursor].key, key) < 0)
        (*cursor)++;
    if (*cursor == n || !old[*cursor].entry || strcmp(old[*cursor].key, key) != 0)
        return NULL;
    bkt_rollup_entry_t *e = old[*cursor].entry;
    *gen = old[*cursor].fetched_gen;
    old[*cursor].entry = NULL;
    return e;
}

static void rollups_free(listed_rollup_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_free(r[i].entry);
    lc_free(r);
}

/* The rollup index of ingester ing into *rollups (replaced); entries
 * fetched before are kept (a replaced one is fetched again when it no
 * longer matches: rollup_consider). mu held. */
static int rollup_list(ing_bucket_read_t *br, const char *ing, listed_rollup_t **rollups,
                       size_t *n_rollups)
{
    lc_objstore_list_t l = {0};
    int rc = list_of(br, ing, "rollup-index", &l);
    if (rc)
        return rc;
    listed_rollup_t *now = lc_xcalloc(l.n ? l.n : 1, sizeof(*now));
    size_t n = 0, cursor = 0;
    for (size_t i = 0; i < l.n; i++) {
        listed_rollup_t *lr = &now[n];
        if (strlen(l.keys[i]) > LC_OBJSTORE_KEY_MAX ||
            !bkt_rollup_index_key_parse(l.keys[i], &lr->window_ns, &lr->level))
            continue;
        snprintf(lr->key, sizeof lr->key, "%s", l.keys[i]);
        lr->entry = rollup_entry_take(*rollups, *n_rollups, &cursor, lr->key, &lr->fetched_gen);
        n++;
    }
    lc_objstore_list_free(&l);
    rollups_free(*rollups, *n_rollups);
    *rollups = now;
    *n_rollups = n;
    return 0;
}

/* Ingester ing's index into *listed (replaced); mu held. */
static int list_index(ing_bucket_read_t *br, const char *ing, listed_t **listed, size_t *n)
{
    lc_objstore_list_t l = {0};
    int rc = list_of(br, ing, "index", &l);
    if (rc)
        return rc;
    lc_free(*listed);
    *listed = lc_xcalloc(l.n ? l.n : 1, sizeof(**listed));
    *n = 0;
    for (size_t i = 0; i < l.n; i++) {
        listed_t *o = &(*listed)[*n];
        if (bkt_index_key_parse(l.keys[i], &o->start_ns, o->name)) {
            snprintf(o->ing, sizeof o->ing, "%s", ing);
            (*n)++;
        }
    }
    lc_objstore_list_free(&l);
    return 0;
}

/* mu held. */
static int list_refresh(ing_bucket_read_t *br)
{
    int rc = list_index(br, br->ing, &br->listed, &br->n_listed);
    if (rc)
        return rc;
    br->listed_at_ns = lc_monotonic_ns();
    br->list_gen++;
    (void)rollup_list(br, br->ing, &br->rollups, &br->n_rollups); /* logged; blocks answer */
    return 0;
}

static bool listed_has(const ing_bucket_read_t *br, const char *name)
{
    for (size_t i = 0; i < br->n_listed; i++)
        if (strcmp(br->listed[i].name, name) == 0)
            return true;
    return false;
}

/* ---------------------------------------------------------------- cache */

/* The least recently used entry no reader holds; mu held. */
static size_t lru_victim(const ing_bucket_read_t *br)
{
    size_t v = br->n_entries;
    for (size_t i = 0; i < br->n_entries; i++) {
        const cache_entry_t *e = br->entries[i];
        if (!e->refs && (v == br->n_entries || e->last_used < br->entries[v]->last_used))
            v = i;
    }
    return v;
}

static void entry_free(ing_bucket_read_t *br, cache_entry_t *e)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", br->cache_dir, e->name);
    lc_store_close(e->store);
    lc_rollup_file_close(e->rollup);
    rm_tree(dir);
    lc_free(e);
}

/* Makes room for bytes more; mu held. */
static int make_room(ing_bucket_read_t *br, uint64_t bytes)
{
    while (br->used_bytes + bytes > br->cache_bytes) {
        size_t v = lru_victim(br);
        if (v == br->n_entries)
            return LC_ETOOBIG; /* what is in use now already fills the cache */
        cache_entry_t *e = br->entries[v];
        br->used_bytes -= e->bytes;
        br->entries[v] = br->entries[--br->n_entries];
        entry_free(br, e);
        lc_metric_add(br->evictions, 1);
    }
    return 0;
}

/* <cache_dir>/<name>/rollup.mdb, opened as a rollup file. */
static int entry_open_rollup(ing_bucket_read_t *br, cache_entry_t *e, const uint8_t *data,
                             size_t len)
{
    char dir[4300], file[4400];
    snprintf(dir, sizeof dir, "%s/%s", br->cache_dir, e->name);
    snprintf(file, sizeof file, "%s/rollup.mdb", dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return LC_ESTORE;
    int rc = bkt_cache_file_write(file, data, len);
    return rc ? rc : lc_rollup_file_open(file, &e->rollup);
}

/* <cache_dir>/<name>/blocks/<start>/data.mdb, opened as a read-only store. */
static int entry_open(ing_bucket_read_t *br, cache_entry_t *e, const uint8_t *data, size_t len)
{
    char dir[4300], block_dir[4400], file[4500], start[32];
    bkt_start_name(e->start_ns, start);
    snprintf(dir, sizeof dir, "%s/%s", br->cache_dir, e->name);
    snprintf(block_dir, sizeof block_dir, "%s/blocks/%s", dir, start);
    snprintf(file, sizeof file, "%s/data.mdb", block_dir);
    char blocks[4400];
    snprintf(blocks, sizeof blocks, "%s/blocks", dir);
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(blocks, 0755) != 0 && errno != EEXIST) ||
        (mkdir(block_dir, 0755) != 0 && errno != EEXIST))
        return LC_ESTORE;
    int rc = bkt_cache_file_write(file, data, len);
    lc_store_opts_t so = {.dir = dir,
                          .block_duration_ns = br->block_ns,
                          .max_open_blocks = CACHE_OPEN_BLOCKS,
                          .read_only = true};
    if (!rc)
        rc = lc_store_open(&so, &e->store);
    return rc;
}

static void entry_name(const listed_t *obj, char out[ENTRY_NAME_MAX])
{
    snprintf(out, ENTRY_NAME_MAX, "%s@%s", obj->ing, obj->name);
}

/* The cached entry of object obj with a reference, or NULL; mu held. */
static cache_entry_t *entry_lookup(ing_bucket_read_t *br, const listed_t *obj)
{
    char name[ENTRY_NAME_MAX];
    entry_name(obj, name);
    for (size_t i = 0; i < br->n_entries; i++) {
        cache_entry_t *e = br->entries[i];
        if (strcmp(e->name, name) == 0) {
            e->refs++;
            e->last_used = ++br->tick;
            return e;
        }
    }
    return NULL;
}

static double seconds_since(int64_t t0_ns)
{
    return (double)(lc_monotonic_ns() - t0_ns) / (double)NS_PER_S;
}

/* Room made and counted for e, which enters the table held (refs 1) so no
 * eviction takes it while it is written and opened; fill_mu held. */
static int entry_reserve(ing_bucket_read_t *br, cache_entry_t *e)
{
    int rc = make_room(br, e->bytes);
    if (rc)
        return rc;
    br->entries = lc_xgrow(br->entries, &br->cap_entries, br->n_entries + 1, sizeof(*br->entries));
    br->entries[br->n_entries++] = e;
    br->used_bytes += e->bytes;
    e->refs = 1;
    e->last_used = ++br->tick;
    return 0;
}

/* Takes back entry_reserve for an entry that could not be opened; fill_mu held. */
static void entry_unreserve(ing_bucket_read_t *br, cache_entry_t *e)
{
    for (size_t i = 0; i < br->n_entries; i++) {
        if (br->entries[i] == e) {
            br->entries[i] = br->entries[--br->n_entries];
            br->used_bytes -= e->bytes;
            return;
        }
    }
}

/* Downloads object obj through os (checksum verified), caches and opens it:
 * the entry with a reference. Runs on a fetch worker. */
static int entry_fetch(ing_bucket_read_t *br, lc_objstore_t *os, const listed_t *obj,
                       cache_entry_t **out)
{
    char key[LC_OBJSTORE_KEY_MAX + 1];
    if (obj->rollup)
        snprintf(key, sizeof key, "%s", obj->rollup->data);
    else
        bkt_data_key(obj->ing, obj->name, key, sizeof key);
    uint8_t *data;
    size_t len;
    int64_t t0 = lc_monotonic_ns();
    int rc = lc_objstore_get(os, key, &data, &len);
    lc_metric_add(br->fetch_seconds, seconds_since(t0));
    if (rc) {
        LC_LOG_ERROR("bucket: cannot download block key=%s err=\"%s\" detail=\"%s\"", key,
                     lc_strerror(rc), lc_objstore_last_error(os));
        return rc;
    }
    cache_entry_t *e = lc_xcalloc(1, sizeof(*e));
    entry_name(obj, e->name);
    e->start_ns = obj->start_ns;
    e->bytes = len;
    e->owner = br;
    pthread_mutex_lock(&br->fill_mu);
    rc = entry_reserve(br, e);
    pthread_mutex_unlock(&br->fill_mu);
    t0 = lc_monotonic_ns();
    if (!rc)
        rc = obj->rollup ? entry_open_rollup(br, e, data, len) : entry_open(br, e, data, len);
    lc_metric_add(br->open_seconds, seconds_since(t0));
    lc_free(data);
    if (rc) {
        LC_LOG_ERROR("bucket: cannot cache block key=%s bytes=%zu err=\"%s\"", key, len,
                     lc_strerror(rc));
        pthread_mutex_lock(&br->fill_mu);
        entry_unreserve(br, e);
        pthread_mutex_unlock(&br->fill_mu);
        entry_free(br, e);
        return rc;
    }
    lc_metric_add(br->downloads, 1);
    pthread_mutex_lock(&br->fill_mu);
    lc_metric_set(br->cache_bytes_m, (double)br->used_bytes);
    pthread_mutex_unlock(&br->fill_mu);
    *out = e;
    return 0;
}

/* The objects of one query that are not cached yet, fetched by workers. */
typedef struct fetch_job_s {
    ing_bucket_read_t *br;
    const listed_t **objs;
    cache_entry_t **got; /* by object; NULL for the cached ones, filled here */
    size_t n, next;      /* next: the next object to take, under fill_mu */
    int rc;              /* the first failure, under fill_mu: the others stop */
} fetch_job_t;

typedef struct fetch_worker_s {
    fetch_job_t *job;
    lc_objstore_t *os;
} fetch_worker_t;

/* The next object to fetch, or job->n when done or failed. */
static size_t fetch_take(fetch_job_t *j, int failed)
{
    pthread_mutex_lock(&j->br->fill_mu);
    if (failed && !j->rc)
        j->rc = failed;
    while (j->next < j->n && j->got[j->next])
        j->next++; /* cached already */
    size_t i = j->rc ? j->n : j->next;
    if (i < j->n)
        j->next++;
    pthread_mutex_unlock(&j->br->fill_mu);
    return i;
}

static void *fetch_worker(void *arg)
{
    fetch_worker_t *w = arg;
    fetch_job_t *j = w->job;
    int rc = 0;
    for (size_t i; (i = fetch_take(j, rc)) < j->n;) {
        cache_entry_t *e = NULL;
        rc = entry_fetch(j->br, w->os, j->objs[i], &e);
        j->got[i] = e; /* this worker's slot alone */
    }
    return NULL;
}

/* Runs fn on n (<= FETCHES_AT_ONCE) argument blocks of size bytes each:
 * the first on this thread, the others on threads of their own. The workers
 * take their items from a shared job, so one that cannot start is not
 * needed. */
static void workers_run(size_t n, void *(*fn)(void *), void *args, size_t size)
{
    pthread_t tid[FETCHES_AT_ONCE];
    bool started[FETCHES_AT_ONCE] = {false};
    for (size_t i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, (char *)args + i * size) == 0;
    if (n)
        (void)fn(args);
    for (size_t i = 1; i < n; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
}

/* Fetches every object of j not cached yet, FETCHES_AT_ONCE at a time; mu
 * held. */
static int fetch_missing(ing_bucket_read_t *br, fetch_job_t *j, size_t missing)
{
    fetch_worker_t w[FETCHES_AT_ONCE];
    size_t n = missing < FETCHES_AT_ONCE ? missing : FETCHES_AT_ONCE;
    for (size_t i = 0; i < n; i++)
        w[i] = (fetch_worker_t){.job = j, .os = br->os[i]};
    workers_run(n, fetch_worker, w, sizeof(*w));
    return j->rc;
}

static void entry_release(void *arg)
{
    cache_entry_t *e = arg;
    pthread_mutex_lock(&e->owner->mu);
    e->refs--;
    pthread_mutex_unlock(&e->owner->mu);
}

/* ---------------------------------------------------------------- a query */

/* Step 1: the gone lists of the range's partitions (NULL where none). */
typedef struct gone_lists_s {
    int64_t first_ns; /* partition of gone[0] */
    size_t n;
    char **gone;
} gone_lists_t;

static int gone_lists_read(const ing_bucket_read_t *br, int64_t start_ns, int64_t end_ns,
                           gone_lists_t *g)
{
    int64_t first = start_ns - (((start_ns % br->block_ns) + br->block_ns) % br->block_ns);
    if ((end_ns - first) / br->block_ns >= MAX_PARTITIONS)
        return LC_ETOOBIG;
    g->first_ns = first;
    g->n = (size_t)((end_ns - first) / br->block_ns) + 1;
    g->gone = lc_xcalloc(g->n, sizeof(*g->gone));
    char start[32];
    for (size_t i = 0; i < g->n; i++) {
        bkt_start_name(first + (int64_t)i * br->block_ns, start);
        g->gone[i] = bkt_gone_read(br->uploads, start);
    }
    return 0;
}

static void gone_lists_free(gone_lists_t *g)
{
    for (size_t i = 0; i < g->n; i++)
        lc_free(g->gone[i]);
    lc_free(g->gone);
}

static bool in_snapshot(lc_store_reader_t *r, int64_t start_ns)
{
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        lc_block_info_t in;
        if (lc_block_info(lc_store_reader_block(r, i), &in) == 0 && in.start_ns == start_ns)
            return true;
    }
    return false;
}

/* Whether the listing lacks a name step 3 must find: a non-local partition's
 * upload record, or a local one's gone list entry. mu held. */
static bool listing_stale(const ing_bucket_read_t *br, const gone_lists_t *g, const bool *local)
{
    char start[32], name[BKT_NAME_MAX], version[BKT_VERSION_MAX];
    for (size_t i = 0; i < g->n; i++) {
        bkt_start_name(g->first_ns + (int64_t)i * br->block_ns, start);
        if (!local[i] && bkt_record_read(br->uploads, start, name, version) == 0 &&
            !listed_has(br, name))
            return true;
        for (const char *p = local[i] ? g->gone[i] : NULL; p && *p;) {
            size_t len = strcspn(p, "\n");
            snprintf(name, sizeof name, "%.*s", (int)(len < BKT_NAME_MAX ? len : 0), p);
            if (!listed_has(br, name))
                return true;
            p += len + (p[len] == '\n');
        }
    }
    return false;
}

typedef char local_name_t[BKT_NAME_MAX];

/* The object a local partition's block holds (at least) the content of: the
 * one its upload record names, read after the snapshot (an upload since
 * then is of what the snapshot holds, or more), unless that name is on the
 * gone list read before it (the block is then a new one written after a
 * drop). "" when none: every object of the partition is read. */
static void held_object(const ing_bucket_read_t *br, const gone_lists_t *g, size_t i,
                        char name[BKT_NAME_MAX])
{
    char start[32], version[BKT_VERSION_MAX];
    bkt_start_name(g->first_ns + (int64_t)i * br->block_ns, start);
    if (bkt_record_read(br->uploads, start, name, version) != 0 || bkt_gone_lists(g->gone[i], name))
        name[0] = '\0';
}

/* The listed objects of [first, end_ns] that the local blocks do not hold;
 * mu held. */
static size_t objects_wanted(const ing_bucket_read_t *br, const gone_lists_t *g, int64_t end_ns,
                             const local_name_t *held, const listed_t **objs)
{
    size_t n = 0;
    for (size_t i = 0; i < br->n_listed; i++) {
        const listed_t *obj = &br->listed[i];
        if (obj->start_ns < g->first_ns || obj->start_ns > end_ns)
            continue;
        size_t k = (size_t)((obj->start_ns - g->first_ns) / br->block_ns);
        if (k < g->n && strcmp(held[k], obj->name) == 0)
            continue; /* the local block holds it */
        objs[n++] = obj;
    }
    return n;
}

/* The wanted objects cached (a reference each) or fetched, then added to r,
 * which releases them when it ends; mu held. */
static int objects_add(ing_bucket_read_t *br, lc_store_reader_t *r, const listed_t **objs, size_t n,
                       int64_t start_ns, int64_t end_ns)
{
    fetch_job_t j = {.br = br, .objs = objs, .n = n};
    j.got = lc_xcalloc(n ? n : 1, sizeof(*j.got));
    size_t missing = 0;
    for (size_t i = 0; i < n; i++)
        missing += !(j.got[i] = entry_lookup(br, objs[i]));
    int rc = fetch_missing(br, &j, missing);
    for (size_t i = 0; i < n; i++) {
        cache_entry_t *e = j.got[i];
        if (e && !e->store && !rc)
            rc = LC_ECORRUPT; /* a rollup's name: never a block's */
        if (e && rc)
            e->refs--; /* not handed to r: release here (mu held) */
        else if (e) {
            lc_store_reader_on_end(r, entry_release, e);
            rc = lc_store_reader_add(r, e->store, start_ns, end_ns);
        }
    }
    lc_free(j.got);
    return rc;
}

/* ---------------------------------------------------------------- rollups */

/* Fetches lr's entry through os into lr (NULL when it cannot be read or is
 * not what its key says: the blocks answer); gen: the listing it is fetched
 * in. lr is this caller's alone. */
static void rollup_entry_fetch(lc_objstore_t *os, listed_rollup_t *lr, uint64_t gen)
{
    lc_free(lr->entry);
    lr->entry = NULL;
    lr->fetched_gen = gen;
    uint8_t *text;
    size_t len;
    int rc = lc_objstore_get(os, lr->key, &text, &len);
    if (rc) {
        LC_LOG_WARN("bucket: cannot read a rollup entry, blocks answer key=%s err=\"%s\"", lr->key,
                    lc_strerror(rc));
        return;
    }
    bkt_rollup_entry_t *e = lc_xmalloc(sizeof(*e));
    rc = bkt_rollup_entry_parse(text, len, e);
    lc_free(text);
    if (rc || e->level != lr->level || e->start_ns != lr->window_ns) {
        LC_LOG_WARN("bucket: a rollup entry is not ours, blocks answer key=%s", lr->key);
        lc_free(e);
        return;
    }
    lr->entry = e;
}

/* Whose rollups a choice considers: this node's (local set: a window with
 * a local partition is skipped, an entry is matched against the upload
 * records), or another ingester's below its mark (the querier's shard:
 * windows wholly below cut_ns, guarded entries matched by their names). */
typedef struct ru_set_s {
    const char *ing;
    listed_rollup_t *rollups;
    size_t n;
    uint64_t gen;      /* the listing the rollups are of */
    const bool *local; /* this node's: by partition of g; NULL for another's */
    const gone_lists_t *g;
    int64_t cut_ns; /* another's: its mark */
} ru_set_t;

/* lr's entry: fetched when never fetched, or again (refetch) when it was
 * fetched in an older listing (the rollup may have been rebuilt since). mu held. */
static const bkt_rollup_entry_t *rollup_entry(ing_bucket_read_t *br, const ru_set_t *set,
                                              listed_rollup_t *lr, bool refetch)
{
    if (!lr->fetched_gen || (refetch && lr->fetched_gen < set->gen))
        rollup_entry_fetch(br->os[0], lr, set->gen);
    return lr->entry;
}

/* The entries a query may use that were never fetched, fetched
 * FETCHES_AT_ONCE at a time (a cold query's first round trips). */
typedef struct entry_job_s {
    ing_bucket_read_t *br;
    listed_rollup_t **todo;
    uint64_t gen;
    size_t n, next; /* next: under fill_mu */
} entry_job_t;

typedef struct entry_worker_s {
    entry_job_t *job;
    lc_objstore_t *os;
} entry_worker_t;

static void *entry_worker(void *arg)
{
    entry_worker_t *w = arg;
    entry_job_t *j = w->job;
    for (;;) {
        pthread_mutex_lock(&j->br->fill_mu);
        size_t i = j->next < j->n ? j->next++ : j->n;
        pthread_mutex_unlock(&j->br->fill_mu);
        if (i == j->n)
            return NULL;
        rollup_entry_fetch(w->os, j->todo[i], j->gen);
    }
}

/* mu held: the workers act under the query's hold, each on its own entries. */
static void rollup_entries_fetch(ing_bucket_read_t *br, listed_rollup_t **todo, size_t n_todo,
                                 uint64_t gen)
{
    entry_job_t j = {.br = br, .todo = todo, .n = n_todo, .gen = gen};
    entry_worker_t w[FETCHES_AT_ONCE];
    size_t n = n_todo < FETCHES_AT_ONCE ? n_todo : FETCHES_AT_ONCE;
    for (size_t i = 0; i < n; i++)
        w[i] = (entry_worker_t){.job = &j, .os = br->os[i]};
    workers_run(n, entry_worker, w, sizeof(*w));
}

/* e's object named name, or NULL. */
static const bkt_rollup_object_t *entry_object(const bkt_rollup_entry_t *e, const char *name)
{
    for (size_t k = 0; k < e->n; k++)
        if (strcmp(e->objs[k].name, name) == 0)
            return &e->objs[k];
    return NULL;
}

/* Whether e sums exactly the objects want[0..n), none of them local: a
 * guarded entry with the same names (its uploader withdraws it before any
 * of them changes, and a dropped object never changes); an entry written
 * before that rule only on this node, each name with the version its
 * partition's upload record names (an earlier life's objects, without
 * records, never match it: the blocks answer then). */
static bool entry_matches(const ing_bucket_read_t *br, const ru_set_t *set,
                          const bkt_rollup_entry_t *e, const listed_t *const *want, size_t n)
{
    if (!e || e->n != n || (!set->local && !e->guarded))
        return false;
    for (size_t i = 0; i < n; i++) {
        const bkt_rollup_object_t *o = entry_object(e, want[i]->name);
        if (!o)
            return false;
        if (e->guarded)
            continue;
        char start[32], name[BKT_NAME_MAX], version[BKT_VERSION_MAX];
        bkt_start_name(want[i]->start_ns, start);
        if (bkt_record_read(br->uploads, start, name, version) != 0 || strcmp(name, o->name) != 0 ||
            strcmp(version, o->version) != 0)
            return false;
    }
    return true;
}

/* A rollup chosen for a query: its object (to fetch), and the block
 * objects it stands for (objs[k] with taken[k] == its number + 1). */
typedef struct ru_pick_s {
    listed_t obj;
    int level;
} ru_pick_t;

typedef struct ru_choice_s {
    const listed_t **objs; /* the query's block objects */
    size_t n;
    unsigned *taken; /* by object: 0, or the pick that stands for it + 1 */
    ru_pick_t *picks;
    size_t n_picks, cap_picks;
} ru_choice_t;

/* Whether window [w, w + len) may be answered by a rollup of set: no
 * partition of it is local (this node's) or all lie below the mark. */
static bool window_from_bucket(const ing_bucket_read_t *br, const ru_set_t *set, int64_t w,
                               int64_t len)
{
    if (!set->local)
        return w + len <= set->cut_ns;
    for (int64_t t = w; t < w + len; t += br->block_ns) {
        int64_t k = (t - set->g->first_ns) / br->block_ns;
        if (t < set->g->first_ns || (size_t)k >= set->g->n || set->local[k])
            return false;
    }
    return true;
}

/* Whether object k of c is set's, in window [w, w + len), not stood for yet. */
static bool window_has(const ru_choice_t *c, const ru_set_t *set, size_t k, int64_t w, int64_t len)
{
    const listed_t *o = c->objs[k];
    return !c->taken[k] && o->start_ns >= w && o->start_ns < w + len &&
           strcmp(o->ing, set->ing) == 0;
}

/* How many of the query's objects lr's rollup could stand for (into want):
 * its window lies whole in [start_ns, end_ns] and may come from the bucket,
 * and objects there are not stood for yet; 0 when none. */
static size_t rollup_candidate(const ing_bucket_read_t *br, const ru_choice_t *c,
                               const ru_set_t *set, const listed_rollup_t *lr, int64_t start_ns,
                               int64_t end_ns, const listed_t **want)
{
    int64_t len = bkt_rollup_level_ns(lr->level), w = lr->window_ns, last;
    if (w < start_ns || __builtin_add_overflow(w, len - 1, &last) || last > end_ns ||
        !window_from_bucket(br, set, w, len))
        return 0;
    size_t n = 0;
    for (size_t k = 0; k < c->n && n < BKT_ROLLUP_MAX_OBJECTS; k++)
        if (window_has(c, set, k, w, len))
            want[n++] = c->objs[k];
    return n;
}

/* Picks lr's rollup when it is a candidate and sums exactly the objects the
 * query would read in its window; mu held. */
static void rollup_consider(ing_bucket_read_t *br, ru_choice_t *c, const ru_set_t *set,
                            listed_rollup_t *lr, int64_t start_ns, int64_t end_ns)
{
    const listed_t *want[BKT_ROLLUP_MAX_OBJECTS];
    size_t n = rollup_candidate(br, c, set, lr, start_ns, end_ns, want);
    if (n == 0)
        return;
    int64_t len = bkt_rollup_level_ns(lr->level), w = lr->window_ns;
    const bkt_rollup_entry_t *e = rollup_entry(br, set, lr, false);
    if (!entry_matches(br, set, e, want, n) &&
        !entry_matches(br, set, e = rollup_entry(br, set, lr, true), want, n))
        return;
    c->picks = lc_xgrow(c->picks, &c->cap_picks, c->n_picks + 1, sizeof(*c->picks));
    ru_pick_t *p = &c->picks[c->n_picks++];
    *p = (ru_pick_t){.obj = {.start_ns = w, .rollup = e}, .level = lr->level};
    snprintf(p->obj.name, sizeof p->obj.name, "%s", e->data_name);
    snprintf(p->obj.ing, sizeof p->obj.ing, "%s", set->ing);
    for (size_t k = 0; k < c->n; k++)
        if (window_has(c, set, k, w, len))
            c->taken[k] = (unsigned)c->n_picks;
}

/* Whole windows of set's objects in [start_ns, end_ns] whose rollup sums
 * exactly the objects that would be read there are picked (days first,
 * then 6-hour windows in what is left). mu held. */
static void rollups_choose(ing_bucket_read_t *br, ru_choice_t *c, const ru_set_t *set,
                           int64_t start_ns, int64_t end_ns)
{
    listed_rollup_t **todo = lc_xcalloc(set->n ? set->n : 1, sizeof(*todo));
    const listed_t *want[BKT_ROLLUP_MAX_OBJECTS];
    for (int lv = BKT_ROLLUP_LEVELS - 1; lv >= 0; lv--) {
        size_t n_todo = 0; /* the level's candidates never fetched: 4 at a time first */
        for (size_t i = 0; i < set->n; i++) {
            listed_rollup_t *lr = &set->rollups[i];
            if (lr->level == lv && !lr->fetched_gen &&
                rollup_candidate(br, c, set, lr, start_ns, end_ns, want))
                todo[n_todo++] = lr;
        }
        rollup_entries_fetch(br, todo, n_todo, set->gen);
        for (size_t i = 0; i < set->n; i++)
            if (set->rollups[i].level == lv)
                rollup_consider(br, c, set, &set->rollups[i], start_ns, end_ns);
    }
    lc_free(todo);
}

/* The picked rollups cached or fetched and added to r; a pick that cannot
 * be read gives its objects back (taken 0): their blocks answer. mu held. */
static void rollups_fetch_add(ing_bucket_read_t *br, lc_store_reader_t *r, ru_choice_t *c)
{
    const listed_t **objs = lc_xcalloc(c->n_picks ? c->n_picks : 1, sizeof(*objs));
    fetch_job_t j = {.br = br, .objs = objs, .n = c->n_picks};
    j.got = lc_xcalloc(c->n_picks ? c->n_picks : 1, sizeof(*j.got));
    size_t missing = 0;
    for (size_t i = 0; i < c->n_picks; i++) {
        objs[i] = &c->picks[i].obj;
        missing += !(j.got[i] = entry_lookup(br, objs[i]));
    }
    (void)fetch_missing(br, &j, missing); /* what failed is read from the blocks */
    for (size_t i = 0; i < c->n_picks; i++) {
        cache_entry_t *e = j.got[i];
        int rc = e && e->rollup ? lc_store_reader_add_rollup(r, e->rollup, c->picks[i].level,
                                                             c->picks[i].obj.start_ns)
                                : LC_ENOTFOUND;
        if (rc == 0) {
            lc_store_reader_on_end(r, entry_release, e);
            lc_metric_add(br->rollups_read, 1);
            continue;
        }
        if (e)
            e->refs--; /* not handed to r */
        for (size_t k = 0; k < c->n; k++)
            if (c->taken[k] == i + 1)
                c->taken[k] = 0;
    }
    lc_free(j.got);
    lc_free(objs);
}

/* The picked rollups and the blocks they do not stand for, fetched into the
 * cache in one go (a cold query's round trips overlap); what fails here is
 * fetched again, with its error, by the steps that add them. mu held. */
static void prefetch_all(ing_bucket_read_t *br, const ru_choice_t *c)
{
    const listed_t **objs = lc_xcalloc(c->n_picks + c->n + 1, sizeof(*objs));
    size_t n = 0;
    for (size_t i = 0; i < c->n_picks; i++)
        objs[n++] = &c->picks[i].obj;
    for (size_t k = 0; k < c->n; k++)
        if (!c->taken[k])
            objs[n++] = c->objs[k];
    fetch_job_t j = {.br = br, .objs = objs, .n = n};
    j.got = lc_xcalloc(n ? n : 1, sizeof(*j.got));
    size_t missing = 0;
    for (size_t i = 0; i < n; i++)
        missing += !(j.got[i] = entry_lookup(br, objs[i]));
    (void)fetch_missing(br, &j, missing);
    for (size_t i = 0; i < n; i++)
        if (j.got[i])
            j.got[i]->refs--; /* cached; the adding steps take their own references */
    lc_free(j.got);
    lc_free(objs);
}

/* The choice's rollups fetched and added to r; returns c's objects without
 * the ones they stand for (compacted in place), and frees the choice. mu held. */
static size_t rollups_apply(ing_bucket_read_t *br, lc_store_reader_t *r, ru_choice_t *c)
{
    prefetch_all(br, c);
    rollups_fetch_add(br, r, c);
    size_t kept = 0;
    for (size_t k = 0; k < c->n; k++)
        if (!c->taken[k])
            c->objs[kept++] = c->objs[k];
    lc_free(c->taken);
    lc_free(c->picks);
    return kept;
}

static ru_choice_t choice_new(const listed_t **objs, size_t n)
{
    return (ru_choice_t){.objs = objs, .n = n, .taken = lc_xcalloc(n ? n : 1, sizeof(unsigned))};
}

/* Step 3 for a merge that takes rollups: whole windows of non-local
 * partitions whose rollup in the bucket sums exactly the objects that
 * would be read there are answered by it; returns objs without the
 * objects they stand for. mu held. */
static size_t rollups_add(ing_bucket_read_t *br, lc_store_reader_t *r, const gone_lists_t *g,
                          const bool *local, int64_t start_ns, int64_t end_ns,
                          const listed_t **objs, size_t n)
{
    ru_choice_t c = choice_new(objs, n);
    ru_set_t set = {.ing = br->ing,
                    .rollups = br->rollups,
                    .n = br->n_rollups,
                    .gen = br->list_gen,
                    .local = local,
                    .g = g};
    rollups_choose(br, &c, &set, start_ns, end_ns);
    return rollups_apply(br, r, &c);
}

/* Step 3 (mu held): every chosen object into r, referenced until r ends. */
static int add_objects(ing_bucket_read_t *br, lc_store_reader_t *r, const gone_lists_t *g,
                       int64_t start_ns, int64_t end_ns, lc_read_need_t need)
{
    bool *local = lc_xcalloc(g->n, sizeof(bool));
    local_name_t *held = lc_xcalloc(g->n, sizeof(*held));
    for (size_t i = 0; i < g->n; i++) {
        local[i] = in_snapshot(r, g->first_ns + (int64_t)i * br->block_ns);
        if (local[i])
            held_object(br, g, i, held[i]);
    }
    int rc = 0;
    bool stale = !br->listed_at_ns || listing_stale(br, g, local);
    if (stale || lc_monotonic_ns() - br->listed_at_ns > LIST_TTL_NS) {
        rc = list_refresh(br);
        if (rc && !stale)
            rc = 0; /* the old listing holds every name this query needs */
    }
    if (!rc) {
        const listed_t **objs = lc_xcalloc(br->n_listed ? br->n_listed : 1, sizeof(*objs));
        size_t n = objects_wanted(br, g, end_ns, held, objs);
        if (need == LC_READ_ROLLUPS_SUFFICE)
            n = rollups_add(br, r, g, local, start_ns, end_ns, objs, n);
        rc = objects_add(br, r, objs, n, start_ns, end_ns);
        lc_free(objs);
    }
    lc_free(local);
    lc_free(held);
    return rc;
}

/* A source's end: its time counted; r handed out, or ended on failure
 * (NULL-safe; releases what was added). */
static int source_done(ing_bucket_read_t *br, int64_t t0, int rc, lc_store_reader_t *r,
                       lc_store_reader_t **out)
{
    lc_metric_add(br->source_seconds, seconds_since(t0));
    if (rc) {
        lc_store_read_end(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int bucket_source(void *ctx, lc_store_t *s, int64_t start_ns, int64_t end_ns,
                         const lc_read_scope_t *scope, lc_store_reader_t **out)
{
    ing_bucket_read_t *br = ctx;
    int64_t t0 = lc_monotonic_ns();
    gone_lists_t g = {0};
    int rc = gone_lists_read(br, start_ns, end_ns, &g);
    lc_store_reader_t *r = NULL;
    if (!rc)
        rc = lc_store_read_begin(s, start_ns, end_ns, &r);
    if (!rc) {
        pthread_mutex_lock(&br->mu);
        rc = add_objects(br, r, &g, start_ns, end_ns, scope->need);
        pthread_mutex_unlock(&br->mu);
    }
    gone_lists_free(&g);
    return source_done(br, t0, rc, r, out);
}

/* ---------------------------------------------------------------- the querier's shard */

/* The index of ingester key ing's listing, or n_foreign when none. */
static size_t foreign_find(const ing_bucket_read_t *br, const char *ing)
{
    size_t i = 0;
    while (i < br->n_foreign && strcmp(br->foreign[i].ing, ing) != 0)
        i++;
    return i;
}

/* The listing of ingester key ing, current for mark generation gen; mu held. */
static int foreign_listing(ing_bucket_read_t *br, const char *ing, uint64_t gen, foreign_t **out)
{
    size_t at = foreign_find(br, ing);
    foreign_t *f = at < br->n_foreign ? &br->foreign[at] : NULL;
    if (!f) {
        if (br->n_foreign == MAX_FOREIGN)
            return LC_ETOOBIG;
        br->foreign =
            lc_xgrow(br->foreign, &br->cap_foreign, br->n_foreign + 1, sizeof(*br->foreign));
        f = &br->foreign[br->n_foreign++];
        *f = (foreign_t){0};
        snprintf(f->ing, sizeof f->ing, "%s", ing);
    }
    bool same = f->listed_at_ns && f->gen == gen;
    if (!same || lc_monotonic_ns() - f->listed_at_ns > LIST_TTL_NS) {
        int rc = list_index(br, ing, &f->listed, &f->n_listed);
        if (rc && !same)
            return rc; /* an older generation's listing may lack what lies below the mark */
        if (!rc) {
            f->gen = gen;
            f->listed_at_ns = lc_monotonic_ns();
            f->list_gen++;
            (void)rollup_list(br, ing, &f->rollups, &f->n_rollups); /* logged; blocks answer */
        }
    }
    *out = f;
    return 0;
}

/* Adds to objs the listed objects of f below cut_ns that overlap the range. */
static size_t foreign_wanted(const ing_bucket_read_t *br, const foreign_t *f, int64_t cut_ns,
                             int64_t start_ns, int64_t end_ns, const listed_t **objs)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_listed; i++) {
        const listed_t *o = &f->listed[i];
        if (o->start_ns < cut_ns && o->start_ns <= end_ns && o->start_ns + br->block_ns > start_ns)
            objs[n++] = o;
    }
    return n;
}

static bool seen(const size_t *which, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (which[k] == i)
            return true;
    return false;
}

/* Every object the scope's marks name (scope->bucket: which ingesters, each
 * below its mark) into r, through their guarded rollups where need takes
 * them; mu held. */
static int marks_add(ing_bucket_read_t *br, lc_store_reader_t *r, const char *spec,
                     int64_t start_ns, int64_t end_ns, lc_read_need_t need)
{
    const listed_t **objs = NULL;
    ru_set_t *sets = NULL; /* the ingesters' rollups; ing and rollups set below */
    size_t *which = NULL;  /* the sets' foreign_t, by index: br->foreign grows meanwhile */
    size_t n = 0, cap = 0, n_sets = 0, cap_sets = 0, cap_which = 0;
    lc_marks_entry_t m;
    int rc;
    for (const char *p = spec; (rc = lc_marks_spec_next(&p, &m)) == 0;) {
        char ing[BKT_ING_MAX];
        bkt_ingester_key(m.id, ing);
        if (seen(which, n_sets, foreign_find(br, ing)))
            continue; /* named twice: listing it again would free what objs points into */
        foreign_t *f;
        if ((rc = foreign_listing(br, ing, m.gen, &f)) != 0)
            break;
        objs = lc_xgrow(objs, &cap, n + f->n_listed + 1, sizeof(*objs));
        n += foreign_wanted(br, f, lc_ms_to_ns(m.mark_ms), start_ns, end_ns, objs + n);
        sets = lc_xgrow(sets, &cap_sets, n_sets + 1, sizeof(*sets));
        which = lc_xgrow(which, &cap_which, n_sets + 1, sizeof(*which));
        sets[n_sets] = (ru_set_t){.cut_ns = lc_ms_to_ns(m.mark_ms), .gen = f->list_gen};
        which[n_sets++] = (size_t)(f - br->foreign);
    }
    if (rc == 1 && need == LC_READ_ROLLUPS_SUFFICE) {
        ru_choice_t c = choice_new(objs, n);
        for (size_t i = 0; i < n_sets; i++) {
            foreign_t *f = &br->foreign[which[i]];
            sets[i].ing = f->ing;
            sets[i].rollups = f->rollups;
            sets[i].n = f->n_rollups;
            rollups_choose(br, &c, &sets[i], start_ns, end_ns);
        }
        n = rollups_apply(br, r, &c);
    }
    if (rc == 1)
        rc = objects_add(br, r, objs, n, start_ns, end_ns);
    lc_free(objs);
    lc_free(sets);
    lc_free(which);
    return rc;
}

static int marks_source(void *ctx, lc_store_t *s, int64_t start_ns, int64_t end_ns,
                        const lc_read_scope_t *scope, lc_store_reader_t **out)
{
    ing_bucket_read_t *br = ctx;
    int64_t t0 = lc_monotonic_ns();
    lc_store_reader_t *r = NULL;
    int rc = lc_store_read_begin(s, start_ns, end_ns, &r);
    if (!rc && scope->bucket) {
        pthread_mutex_lock(&br->mu);
        rc = marks_add(br, r, scope->bucket, start_ns, end_ns, scope->need);
        pthread_mutex_unlock(&br->mu);
    }
    return source_done(br, t0, rc, r, out);
}

/* ---------------------------------------------------------------- life */

static void bucket_read_register_metrics(ing_bucket_read_t *br, lc_metrics_t *m)
{
    br->cache_bytes_m = lc_metrics_gauge(
        m, "ember_bucket_cache_bytes",
        "Bytes of blocks read back from the object store held in --storage.cache-dir", "");
    br->downloads = lc_metrics_counter(m, "ember_bucket_cache_downloads_total",
                                       "Blocks downloaded from the object store for queries", "");
    br->rollups_read = lc_metrics_counter(
        m, "ember_bucket_rollups_read_total",
        "Windows of dropped blocks that queries answered from a rollup read back", "");
    br->evictions = lc_metrics_counter(
        m, "ember_bucket_cache_evictions_total",
        "Blocks removed from --storage.cache-dir to stay within --storage.cache-size", "");
    br->fetch_seconds = lc_metrics_counter(
        m, "ember_bucket_cache_fetch_seconds_total",
        "Time spent downloading and verifying blocks for queries, summed over the downloads", "");
    br->open_seconds = lc_metrics_counter(
        m, "ember_bucket_cache_open_seconds_total",
        "Time spent writing downloaded blocks into the cache and opening them", "");
    br->source_seconds = lc_metrics_counter(
        m, "ember_bucket_read_setup_seconds_total",
        "Time queries spent choosing, fetching and adding blocks read back, before merging", "");
}

/* What both kinds of reader open: the cache (emptied) and the object stores. */
static int read_open(ing_bucket_read_t *br, const lc_objstore_opts_t *os, lc_metrics_t *metrics)
{
    pthread_mutex_init(&br->mu, NULL);
    pthread_mutex_init(&br->fill_mu, NULL);
    bucket_read_register_metrics(br, metrics);
    int rc = mkdir(br->cache_dir, 0755) == 0 || errno == EEXIST ? 0 : LC_ESTORE;
    cache_dir_clear(br->cache_dir);
    for (size_t i = 0; !rc && i < FETCHES_AT_ONCE; i++)
        rc = lc_objstore_open(os, &br->os[i]);
    if (rc)
        LC_LOG_ERROR("bucket: cannot start reading blocks back cache=%s err=\"%s\"", br->cache_dir,
                     lc_strerror(rc));
    return rc;
}

int ing_bucket_read_new(const ing_bucket_read_opts_t *o, lc_store_t *store, ing_bucket_read_t **out)
{
    ing_bucket_read_t *br = lc_xcalloc(1, sizeof(*br));
    br->store = store;
    br->block_ns = o->bucket->block_duration_ns;
    br->cache_bytes = o->cache_bytes;
    bkt_ingester_key(o->bucket->ingester_id, br->ing);
    snprintf(br->cache_dir, sizeof br->cache_dir, "%s", o->cache_dir);
    int rc = bkt_uploads_dir(o->bucket->data_dir, br->uploads, sizeof br->uploads);
    if (!rc)
        rc = read_open(br, &o->bucket->store, o->bucket->metrics);
    if (rc) {
        ing_bucket_read_free(br);
        return rc;
    }
    lc_store_set_source(store, bucket_source, br);
    LC_LOG_INFO("bucket: queries read dropped blocks back cache=%s cache_bytes=%" PRIu64,
                br->cache_dir, br->cache_bytes);
    *out = br;
    return 0;
}

int ing_bucket_marks_new(const ing_bucket_marks_opts_t *o, lc_store_t *store,
                         ing_bucket_read_t **out)
{
    ing_bucket_read_t *br = lc_xcalloc(1, sizeof(*br));
    br->store = store;
    br->block_ns = o->block_duration_ns;
    br->cache_bytes = o->cache_bytes;
    snprintf(br->cache_dir, sizeof br->cache_dir, "%s", o->cache_dir);
    int rc = read_open(br, &o->store, o->metrics);
    if (rc) {
        ing_bucket_read_free(br);
        return rc;
    }
    lc_store_set_source(store, marks_source, br);
    LC_LOG_INFO("bucket: this querier reads blocks below the ingesters' marks cache=%s "
                "cache_bytes=%" PRIu64,
                br->cache_dir, br->cache_bytes);
    *out = br;
    return 0;
}

void ing_bucket_read_free(ing_bucket_read_t *br)
{
    if (!br)
        return;
    for (size_t i = 0; i < br->n_foreign; i++) {
        lc_free(br->foreign[i].listed);
        rollups_free(br->foreign[i].rollups, br->foreign[i].n_rollups);
    }
    lc_free(br->foreign);
    if (br->os[FETCHES_AT_ONCE - 1])
        lc_store_set_source(br->store, NULL, NULL);
    for (size_t i = 0; i < br->n_entries; i++)
        entry_free(br, br->entries[i]);
    lc_free(br->entries);
    lc_free(br->listed);
    rollups_free(br->rollups, br->n_rollups);
    for (size_t i = 0; i < FETCHES_AT_ONCE; i++)
        lc_objstore_close(br->os[i]);
    pthread_mutex_destroy(&br->fill_mu);
    pthread_mutex_destroy(&br->mu);
    lc_free(br);
}
