/*
 * store.c — the block registry: one LMDB environment per time partition under
 * <dir>/blocks/<start seconds>/, opened on demand, kept open up to
 * max_open_blocks (least recently used closed first), reference counted so
 * that neither the LRU nor retention closes an environment a reader or the
 * writer still uses. The helpers every part shares (meta record, keys, DB
 * table) are in store_helpers.c, below it; opening and closing the whole
 * store (which also drives the passes) in store_open.c, above it.
 * Layout: docs/internals/store.md.
 *
 * Dropped blocks are first renamed into <dir>/trash/ (an open environment
 * keeps working after a rename) and deleted from there once unused, so a new
 * block for the same partition never collides with one still being read, and
 * a crash halfway through a delete never leaves a half block in blocks/.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lc/log.h"
#include "store_int.h"

#define NS_PER_SEC INT64_C(1000000000)
#define STORE_MAX_READERS 512
#define STORE_MAX_DURATION_NS (366LL * 24 * 3600 * NS_PER_SEC)
#define STORE_MAX_ABS_TIME_NS ((int64_t)1 << 62)
/* The open-environment cap when none is given: a month of hourly blocks and
 * more (a query over a range keeps every block of it open until it ends, and
 * a block closed by the LRU costs an mdb_env_open, mmap and munmap on the
 * next query that reads it), as far as the open-file limit allows. */
#define STORE_DEFAULT_OPEN_BLOCKS 1024
#define STORE_MIN_OPEN_BLOCKS 64
#define STORE_FDS_PER_ENV 3 /* data.mdb, lock.mdb and LMDB's O_DSYNC meta fd */

static store_block_t *store_block_new(lc_store_t *s, int64_t start_ns)
{
    store_block_t *b = lc_xcalloc(1, sizeof(*b));
    char name[32];
    snprintf(name, sizeof(name), "%012" PRId64, start_ns / NS_PER_SEC);
    size_t len = strlen(s->blocks_dir) + strlen(name) + 2;
    b->path = lc_xmalloc(len);
    snprintf(b->path, len, "%s/%s", s->blocks_dir, name);
    b->start_ns = start_ns;
    b->end_ns = start_ns + s->opts.block_duration_ns;
    b->summarized_gen = UINT64_MAX; /* unknown until lc_store_summarize looks */
    b->compacted_gen = b->compact_ready_gen = UINT64_MAX; /* store_compact.c */
    return b;
}

/* Index of the first block with start >= start_ns. */
static size_t block_lower_bound(const lc_store_t *s, int64_t start_ns)
{
    size_t lo = 0, hi = s->n_blocks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->blocks[mid]->start_ns < start_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void registry_insert(lc_store_t *s, store_block_t *b)
{
    size_t at = block_lower_bound(s, b->start_ns);
    s->blocks = lc_xgrow(s->blocks, &s->cap_blocks, s->n_blocks + 1, sizeof(*s->blocks));
    memmove(s->blocks + at + 1, s->blocks + at, (s->n_blocks - at) * sizeof(*s->blocks));
    s->blocks[at] = b;
    s->n_blocks++;
}

static void registry_remove(lc_store_t *s, store_block_t *b)
{
    size_t at = block_lower_bound(s, b->start_ns);
    if (at < s->n_blocks && s->blocks[at] == b) {
        memmove(s->blocks + at, s->blocks + at + 1, (s->n_blocks - at - 1) * sizeof(*s->blocks));
        s->n_blocks--;
    }
}

/* ---------------------------------------------------------------- environments */

/* Opens every named DB and reads the meta record. Handles opened in a
 * committed transaction stay valid for the life of the environment. */
static int block_dbis_in(store_block_t *b, MDB_txn *txn, unsigned create, store_meta_t *m)
{
    b->has_summaries = false;
    for (int i = 0; i < DB_COUNT; i++) {
        int rc =
            mdb_dbi_open(txn, lc_store__db_name(i), create | lc_store__db_flags(i), &b->dbi[i]);
        if (rc == MDB_NOTFOUND && i == DB_SUMMARIES)
            continue; /* a format 2 block: no summaries, ever */
        if (rc)
            return lc_store__mdb_fail(rc == MDB_NOTFOUND ? LC_ECORRUPT : rc, "dbi open");
        b->has_summaries |= i == DB_SUMMARIES;
    }
    return lc_store__meta_get(txn, b->dbi[DB_META], m);
}

/* Read-only: this runs under the registry mutex, which must never wait on an
 * LMDB writer lock. Blocks are complete on disk before they are registered. */
static int block_dbis_open(store_block_t *b, MDB_env *env)
{
    MDB_txn *txn;
    store_meta_t m;
    int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (open)");
    rc = block_dbis_in(b, txn, 0, &m);
    if (rc) {
        mdb_txn_abort(txn);
        LC_LOG_ERROR("store: bad block path=%s err=\"%s\"", b->path, lc_strerror(rc));
        return rc == LC_ENOTFOUND ? LC_ECORRUPT : rc;
    }
    if (m.start_ns != b->start_ns || m.duration_ns != b->end_ns - b->start_ns) {
        LC_LOG_WARN("store: block partition differs from options path=%s duration_ns=%" PRId64,
                    b->path, m.duration_ns);
        b->end_ns = b->start_ns + m.duration_ns;
    }
    rc = mdb_txn_commit(txn);
    return rc ? lc_store__mdb_fail(rc, "txn commit (open)") : 0;
}

/* A read-only store's files have no writer anywhere: no lock file needed
 * (it would also count against a cache's bound). */
static unsigned store_env_flags(const lc_store_t *s)
{
    return s->opts.read_only ? MDB_NOTLS | MDB_RDONLY | MDB_NOLOCK : MDB_NOTLS;
}

static int store_env_open(const lc_store_t *s, const char *path, MDB_env **out)
{
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc)
        return lc_store__mdb_fail(rc, "env create");
    rc = mdb_env_set_maxdbs(env, DB_COUNT);
    if (!rc)
        rc = mdb_env_set_mapsize(env, s->opts.map_size_bytes);
    if (!rc)
        rc = mdb_env_set_maxreaders(env, STORE_MAX_READERS);
    if (!rc)
        rc = mdb_env_open(env, path, store_env_flags(s), 0644);
    if (rc) {
        LC_LOG_ERROR("store: env open failed path=%s err=\"%s\"", path, mdb_strerror(rc));
        mdb_env_close(env);
        return LC_ESTORE;
    }
    *out = env;
    return 0;
}

static int block_env_open(lc_store_t *s, store_block_t *b)
{
    MDB_env *env;
    int rc = store_env_open(s, b->path, &env);
    if (rc)
        return rc;
    rc = block_dbis_open(b, env);
    if (rc) {
        mdb_env_close(env);
        return rc;
    }
    b->env = env;
    s->n_open++;
    return 0;
}

/* Every named DB and the meta record, in one write transaction. */
static int block_init(const lc_store_t *s, const store_block_t *b, const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    store_block_t tmp = *b;
    store_meta_t m;
    int rc = store_env_open(s, path, &env);
    if (rc)
        return rc;
    rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc) {
        mdb_env_close(env);
        return lc_store__mdb_fail(rc, "txn begin (create)");
    }
    rc = block_dbis_in(&tmp, txn, MDB_CREATE, &m);
    if (rc == LC_ENOTFOUND) {
        lc_store__meta_init(&m, b->start_ns, b->end_ns - b->start_ns);
        rc = lc_store__meta_put(txn, tmp.dbi[DB_META], &m);
    }
    if (!rc)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    mdb_env_close(env);
    return rc > 0 ? lc_store__mdb_fail(rc, "txn commit (create)") : rc;
}

/* Builds a new block under a dot-name and renames it into place: nobody (the
 * registry, a restart) ever sees a block without its DBs and meta record. */
static int block_create(const lc_store_t *s, const store_block_t *b)
{
    const char *name = strrchr(b->path, '/') + 1;
    size_t len = strlen(s->blocks_dir) + strlen(name) + 8;
    char *tmp = lc_xmalloc(len);
    snprintf(tmp, len, "%s/.new-%s", s->blocks_dir, name);
    lc_store__rm_tree(tmp);
    int rc = lc_store__mkdir_one(tmp);
    if (!rc)
        rc = block_init(s, b, tmp);
    if (!rc && rename(tmp, b->path) != 0) {
        rc = -errno;
        LC_LOG_ERROR("store: rename failed path=%s err=\"%s\"", b->path, strerror(errno));
    }
    if (rc)
        lc_store__rm_tree(tmp);
    lc_free(tmp);
    return rc;
}

static void block_env_close(lc_store_t *s, store_block_t *b)
{
    if (!b->env)
        return;
    lc_store__wstate_free(b->ws);
    b->ws = NULL;
    mdb_env_close(b->env);
    b->env = NULL;
    s->n_open--;
}

static void block_destroy(lc_store_t *s, store_block_t *b)
{
    block_env_close(s, b);
    if (b->dropped)
        lc_store__rm_tree(b->path);
    lc_free(b->path);
    lc_free(b);
}

/* Closes idle environments, least recently used first, down to the bound. */
static void evict_lru(lc_store_t *s)
{
    while (s->n_open > s->opts.max_open_blocks) {
        store_block_t *victim = NULL;
        for (size_t i = 0; i < s->n_blocks; i++) {
            store_block_t *b = s->blocks[i];
            if (b->env && !b->refs && (!victim || b->last_used < victim->last_used))
                victim = b;
        }
        if (!victim)
            return; /* everything open is in use: the bound is exceeded for now */
        block_env_close(s, victim);
    }
}

/* Takes a reference; mu held. */
static int block_ref(lc_store_t *s, store_block_t *b)
{
    if (!b->env) {
        int rc = block_env_open(s, b);
        if (rc)
            return rc;
    }
    b->refs++;
    b->last_used = ++s->tick;
    evict_lru(s);
    return 0;
}

static store_block_t *registry_find(const lc_store_t *s, int64_t start_ns)
{
    size_t at = block_lower_bound(s, start_ns);
    return at < s->n_blocks && s->blocks[at]->start_ns == start_ns ? s->blocks[at] : NULL;
}

/* A new block is built with no lock held; only the writer creates blocks, so
 * no one else can register the same partition meanwhile. */
static int acquire_new(lc_store_t *s, int64_t start_ns, store_block_t **out)
{
    store_block_t *b = store_block_new(s, start_ns);
    int rc = block_create(s, b);
    if (!rc) {
        pthread_mutex_lock(&s->mu);
        registry_insert(s, b);
        rc = block_ref(s, b);
        if (rc)
            registry_remove(s, b);
        pthread_mutex_unlock(&s->mu);
    }
    if (rc) {
        block_destroy(s, b);
        return rc;
    }
    *out = b;
    return 0;
}

static int acquire_registered(lc_store_t *s, int64_t start_ns, bool create, store_block_t **out)
{
    pthread_mutex_lock(&s->mu);
    store_block_t *b = registry_find(s, start_ns);
    int rc = b ? block_ref(s, b) : LC_ENOTFOUND;
    pthread_mutex_unlock(&s->mu);
    if (!rc)
        *out = b;
    if (rc == LC_ENOTFOUND && create)
        return acquire_new(s, start_ns, out);
    return rc;
}

/* A write below the floor publishes the lower floor first; the floor's lock
 * spans the block's registration, so lc_store_floor_update sees it. */
int lc_store__acquire(lc_store_t *s, int64_t start_ns, bool create, store_block_t **out)
{
    if (!create)
        return acquire_registered(s, start_ns, create, out);
    pthread_mutex_lock(&s->floor.mu);
    int rc = 0;
    if (s->floor.publish && start_ns < s->floor.ns &&
        !(rc = s->floor.publish(s->floor.ctx, start_ns, true)))
        s->floor.ns = start_ns;
    if (!rc)
        rc = acquire_registered(s, start_ns, create, out);
    pthread_mutex_unlock(&s->floor.mu);
    return rc;
}

void lc_store_set_floor(lc_store_t *s, lc_store_floor_fn publish, void *ctx)
{
    pthread_mutex_lock(&s->floor.mu);
    s->floor.publish = publish;
    s->floor.ctx = ctx;
    pthread_mutex_unlock(&s->floor.mu);
}

int lc_store_floor_update(lc_store_t *s, int64_t limit_ns)
{
    pthread_mutex_lock(&s->floor.mu);
    if (!s->floor.publish) {
        pthread_mutex_unlock(&s->floor.mu);
        return LC_EINPUT;
    }
    int64_t floor = lc_store__partition(s, limit_ns);
    pthread_mutex_lock(&s->mu);
    if (s->n_blocks && s->blocks[0]->start_ns < floor)
        floor = s->blocks[0]->start_ns;
    pthread_mutex_unlock(&s->mu);
    int rc = 0;
    if (floor != s->floor.ns) {
        /* A raise that fails may still land: writes below it publish first. */
        if (floor > s->floor.ns)
            s->floor.ns = floor;
        if (!(rc = s->floor.publish(s->floor.ctx, floor, false)))
            s->floor.ns = floor;
    }
    pthread_mutex_unlock(&s->floor.mu);
    return rc;
}

int64_t lc_store_floor(lc_store_t *s)
{
    pthread_mutex_lock(&s->floor.mu);
    int64_t floor = s->floor.ns;
    pthread_mutex_unlock(&s->floor.mu);
    return floor;
}

static bool block_overlaps(const store_block_t *b, int64_t start_ns, int64_t end_ns)
{
    return b->start_ns <= end_ns && b->end_ns > start_ns;
}

int lc_store__acquire_range(lc_store_t *s, int64_t start_ns, int64_t end_ns, store_block_t ***out,
                            size_t *n)
{
    pthread_mutex_lock(&s->mu);
    store_block_t **got = lc_xcalloc(s->n_blocks ? s->n_blocks : 1, sizeof(*got));
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_blocks && !rc; i++) {
        if (!block_overlaps(s->blocks[i], start_ns, end_ns))
            continue;
        rc = block_ref(s, s->blocks[i]);
        if (!rc)
            got[k++] = s->blocks[i];
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        for (size_t i = 0; i < k; i++)
            lc_store__release(s, got[i]);
        lc_free(got);
        return rc;
    }
    *out = got;
    *n = k;
    return 0;
}

void lc_store__release(lc_store_t *s, store_block_t *b)
{
    pthread_mutex_lock(&s->mu);
    LC_ASSERT(b->refs > 0);
    if (--b->refs == 0 && b->dropped)
        block_destroy(s, b);
    else
        evict_lru(s);
    pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- passes */

typedef struct pass_todo_s {
    int64_t start_ns;
    uint64_t gen;
} pass_todo_t;

int lc_store__pass(lc_store_t *s, store_due_fn due, const void *arg, store_pass_fn fn, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    pass_todo_t *todo = lc_xcalloc(s->n_blocks ? s->n_blocks : 1, sizeof(*todo));
    size_t n = 0;
    for (size_t i = 0; i < s->n_blocks; i++) {
        if (due(s->blocks[i], arg))
            todo[n++] = (pass_todo_t){s->blocks[i]->start_ns, s->blocks[i]->write_gen};
    }
    pthread_mutex_unlock(&s->mu);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        store_block_t *b;
        rc = lc_store__acquire(s, todo[i].start_ns, false, &b);
        if (rc == LC_ENOTFOUND) { /* dropped meanwhile */
            rc = 0;
            continue;
        }
        if (rc)
            break;
        rc = fn(s, b, todo[i].gen, ctx);
        lc_store__release(s, b);
    }
    lc_free(todo);
    return rc;
}

size_t lc_store__count(lc_store_t *s, store_due_fn due, const void *arg)
{
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_blocks; i++)
        n += due(s->blocks[i], arg);
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---------------------------------------------------------------- open / close */

/* At most a quarter of the open-file limit for block environments, the rest
 * for connections, the rollups and the settings store; never below the old
 * default of 64, never above STORE_DEFAULT_OPEN_BLOCKS. */
static size_t default_max_open_blocks(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
        return STORE_DEFAULT_OPEN_BLOCKS;
    rlim_t fit = rl.rlim_cur / 4 / STORE_FDS_PER_ENV;
    if (fit < STORE_MIN_OPEN_BLOCKS)
        return STORE_MIN_OPEN_BLOCKS;
    return fit < STORE_DEFAULT_OPEN_BLOCKS ? (size_t)fit : STORE_DEFAULT_OPEN_BLOCKS;
}

static int opts_apply(const lc_store_opts_t *in, lc_store_opts_t *o)
{
    *o = *in;
    if (!o->dir || !*o->dir)
        return LC_EINPUT;
    if (!o->block_duration_ns)
        o->block_duration_ns = 3600 * NS_PER_SEC;
    if (!o->map_size_bytes)
        o->map_size_bytes = (size_t)16 << 30;
    if (!o->max_open_blocks)
        o->max_open_blocks = default_max_open_blocks();
    /* Whole seconds: block directories are named by their start in seconds. */
    if (o->block_duration_ns < NS_PER_SEC || o->block_duration_ns % NS_PER_SEC ||
        o->block_duration_ns > STORE_MAX_DURATION_NS || o->retention_ns < 0)
        return LC_EINPUT;
    return 0;
}

/* "000001666105200" -> start in ns; false for anything else. */
static bool block_name_parse(const char *name, int64_t *start_ns)
{
    char *end;
    errno = 0;
    long long sec = strtoll(name, &end, 10);
    if (errno || end == name || *end || (name[0] != '-' && (name[0] < '0' || name[0] > '9')))
        return false;
    if (sec > STORE_MAX_ABS_TIME_NS / NS_PER_SEC || sec < -STORE_MAX_ABS_TIME_NS / NS_PER_SEC)
        return false;
    *start_ns = sec * NS_PER_SEC;
    return true;
}

static int store_scan(lc_store_t *s)
{
    DIR *d = opendir(s->blocks_dir);
    if (!d) {
        LC_LOG_ERROR("store: opendir failed path=%s err=\"%s\"", s->blocks_dir, strerror(errno));
        return -errno;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t start;
        if (strncmp(e->d_name, ".new-", 5) == 0) {
            char *p = lc_store__path_join(s->blocks_dir, e->d_name);
            lc_store__rm_tree(p); /* a block whose creation was interrupted */
            lc_free(p);
        }
        if (e->d_name[0] == '.')
            continue;
        if (!block_name_parse(e->d_name, &start) || start != lc_store__partition(s, start)) {
            LC_LOG_WARN("store: ignoring unexpected entry path=%s/%s", s->blocks_dir, e->d_name);
            continue;
        }
        registry_insert(s, store_block_new(s, start));
    }
    closedir(d);
    return 0;
}

/* LMDB allocates about 3 MiB of write-transaction tables (dirty list, free
 * page list) with malloc at every environment open and frees them at close.
 * A reader over a long range opens more environments than the LRU keeps
 * (a week is 168 blocks), so they are opened and closed at every query.
 * With glibc's default, the mmap threshold rises to the size of the first
 * large block freed, after which such tables come from the heap, are zeroed
 * (touched, so resident) and, freed, fragment it: anonymous memory then grew
 * by hundreds of MiB per week-long query. A fixed threshold keeps every
 * allocation of 1 MiB or more in its own mapping: untouched pages are never
 * resident and a free returns them at once. Process-wide, set once.
 * A fixed mmap threshold also fixes glibc's trim threshold at 128 KiB, so
 * the heap's top is kept as lc_malloc_keep_heap_top says why (ingest bench:
 * 3-8% less CPU per profile, issue 32). */
static void store_malloc_setup(void)
{
    if (mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1)
        LC_LOG_WARN("store: mallopt(M_MMAP_THRESHOLD) failed; memory may fragment");
    if (!lc_malloc_keep_heap_top())
        LC_LOG_WARN("store: mallopt(M_TRIM_THRESHOLD) failed; buffers may fault their pages in");
}

/* The registry of an opened directory, before the passes (store_open.c) look
 * at it: settings checked, blocks/ created, trash/ emptied; not yet scanned. */
int lc_store__registry_new(const lc_store_opts_t *opts, lc_store_t **out)
{
    lc_store_t *s = lc_xcalloc(1, sizeof(*s));
    int rc = opts_apply(opts, &s->opts);
    if (rc) {
        lc_free(s);
        return rc;
    }
    static pthread_once_t malloc_once = PTHREAD_ONCE_INIT;
    pthread_once(&malloc_once, store_malloc_setup);
    s->dir = lc_xstrdup(opts->dir);
    s->opts.dir = s->dir;
    s->blocks_dir = lc_store__path_join(s->dir, "blocks");
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->floor.mu, NULL);
    s->floor.ns = INT64_MAX;
    char *trash = lc_store__path_join(s->dir, "trash");
    lc_store__rm_tree(trash); /* blocks dropped before a crash or restart */
    lc_free(trash);
    rc = lc_store__mkdir_parents(s->blocks_dir);
    if (rc) {
        lc_store__registry_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int lc_store__registry_scan(lc_store_t *s)
{
    return store_scan(s);
}

void lc_store__registry_free(lc_store_t *s)
{
    for (size_t i = 0; i < s->n_blocks; i++)
        block_destroy(s, s->blocks[i]);
    lc_free(s->blocks);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->floor.mu);
    lc_free(s->blocks_dir);
    lc_free(s->dir);
    lc_free(s);
}

/* ---------------------------------------------------------------- retention */

/* Moves the block out of blocks/ at once; mu held. */
static int block_to_trash(lc_store_t *s, store_block_t *b)
{
    char *trash = lc_store__path_join(s->dir, "trash");
    int rc = lc_store__mkdir_one(trash);
    char name[48];
    snprintf(name, sizeof(name), "%" PRId64 ".%" PRIu64, b->start_ns / NS_PER_SEC, ++s->trash_seq);
    char *to = lc_store__path_join(trash, name);
    lc_free(trash);
    if (!rc && rename(b->path, to) != 0) {
        rc = -errno;
        LC_LOG_ERROR("store: rename failed path=%s err=\"%s\"", b->path, strerror(errno));
    }
    if (rc) {
        lc_free(to);
        return rc;
    }
    lc_free(b->path);
    b->path = to;
    return 0;
}

int lc_store_retention(lc_store_t *s, int64_t now_ns, size_t *dropped)
{
    *dropped = 0;
    if (!s->opts.retention_ns)
        return 0;
    int64_t cutoff = now_ns - s->opts.retention_ns;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_blocks && !rc;) {
        store_block_t *b = s->blocks[i];
        if (b->end_ns > cutoff) {
            i++;
            continue;
        }
        rc = block_to_trash(s, b);
        if (rc)
            break;
        registry_remove(s, b);
        b->dropped = true;
        if (!b->refs)
            block_destroy(s, b);
        (*dropped)++;
    }
    pthread_mutex_unlock(&s->mu);
    if (*dropped)
        LC_LOG_INFO("store: retention dropped blocks=%zu", *dropped);
    return rc;
}

int lc_store_drop_block(lc_store_t *s, int64_t start_ns, uint64_t write_gen)
{
    pthread_mutex_lock(&s->mu);
    store_block_t *b = registry_find(s, start_ns);
    int rc = b ? 0 : LC_ENOTFOUND;
    /* An open write batch may hold this block and commit into it after the
     * rename: it would commit into the trash. The caller tries again later. */
    if (!rc && (b->write_gen != write_gen || s->writing))
        rc = -EBUSY;
    if (!rc)
        rc = block_to_trash(s, b);
    if (!rc) {
        registry_remove(s, b);
        b->dropped = true;
        if (!b->refs)
            block_destroy(s, b);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---------------------------------------------------------------- compaction hooks */

/* For store_compact.c, which rewrites closed blocks: the DB table and the swap
 * of a rewritten block, which must close the environment under mu. */

int lc_store__block_swap(lc_store_t *s, store_block_t *b, uint64_t gen, const char *ready,
                         char **old_out)
{
    char name[48];
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    snprintf(name, sizeof(name), ".old-%s.%" PRIu64, strrchr(b->path, '/') + 1, ++s->trash_seq);
    char *old = lc_store__path_join(s->blocks_dir, name);
    if (b->refs != 1 || b->dropped || b->write_gen != gen)
        rc = -EBUSY; /* a reader or the writer holds it, or it changed: later */
    if (!rc) {
        block_env_close(s, b); /* our reference stays; the next use opens the new file */
        if (rename(b->path, old) != 0) {
            rc = -errno;
        } else if (rename(ready, b->path) != 0) {
            rc = -errno;
            if (rename(old, b->path) != 0) /* put it back; else the next open recovers */
                LC_LOG_ERROR("store: cannot restore block path=%s", b->path);
        } else {
            /* The new file's transaction ids differ, so rollups summed from the old
             * one are no longer used: have store_rollup.c look at the window again. */
            b->rollup_seen[0] = b->rollup_seen[1] = 0;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc && rc != -EBUSY)
        LC_LOG_ERROR("store: compaction swap failed path=%s err=\"%s\"", b->path, strerror(-rc));
    if (rc) {
        lc_free(old);
        return rc;
    }
    *old_out = old;
    return 0;
}
