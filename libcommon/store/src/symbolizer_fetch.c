/*
 * symbolizer_fetch.c — debuginfod lookups (libdebuginfod) on one worker
 * thread, so a slow or dead server holds up no query past its deadline and
 * never the ingest path: a query asks for a build id and waits on a
 * condition variable until the answer or its deadline; the lookup goes on
 * and the next query finds its file. Each build id has one state:
 *   pending  — queued or being looked up (asked again: just wait);
 *   found    — the path in the cache dir (checked to still exist: the size
 *              cap may have removed it, then it is looked up again);
 *   missing  — no server had it, or none answered, until `until_ns`.
 * A build id with no debug file anywhere is asked for as an executable: the
 * binary's own tables (a Go binary's .gopclntab, .symtab, .dynsym) name it.
 * libdebuginfod reads its settings from the environment: DEBUGINFOD_URLS,
 * DEBUGINFOD_CACHE_PATH and DEBUGINFOD_TIMEOUT are set once at start, before
 * the worker exists; its own negative cache (cache_miss_s in the cache dir)
 * is set to negative_ttl_ms. The progress callback aborts a transfer that
 * runs past fetch_timeout_ms in total (DEBUGINFOD_TIMEOUT bounds only stalls).
 */
#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "lc/log.h"
#include "symbolizer_int.h"

#define MAX_STATES 4096 /* build ids remembered; the oldest missing go first */
#define QUEUE_MAX 64    /* lookups waiting; past it a query just gets no file */

typedef enum { FETCH_PENDING = 1, FETCH_FOUND = 2, FETCH_MISSING = 3 } fetch_state_t;

typedef struct fetch_entry_s {
    char build_id[LC_BUILD_ID_HEX_MAX + 1];
    fetch_state_t state;
    uint64_t until_ns; /* missing: believed until */
    char path[LC_DEBUGINFO_PATH_MAX];
} fetch_entry_t;

struct symfetch_s {
    lc_symbolizer_opts_t opts;
    char *cache_dir;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the worker: a queued lookup, or stop */
    pthread_cond_t done; /* the queries: a lookup ended */
    fetch_entry_t *entries;
    size_t n_entries;
    size_t queue[QUEUE_MAX]; /* indexes into entries */
    size_t q_head, q_len;
    bool stop;
    uint64_t fetches, failures;
};

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

/* Under lock. */
static fetch_entry_t *entry_find(symfetch_t *f, const char *build_id)
{
    for (size_t i = 0; i < f->n_entries; i++)
        if (strcmp(f->entries[i].build_id, build_id) == 0)
            return &f->entries[i];
    return NULL;
}

/* Under lock: a new entry, reusing an expired missing one when full. */
static fetch_entry_t *entry_add(symfetch_t *f, const char *build_id)
{
    fetch_entry_t *e = NULL;
    if (f->n_entries < MAX_STATES)
        e = &f->entries[f->n_entries++];
    for (size_t i = 0; !e && i < f->n_entries; i++)
        if (f->entries[i].state == FETCH_MISSING && f->entries[i].until_ns <= now_ns())
            e = &f->entries[i];
    if (!e)
        return NULL;
    memset(e, 0, sizeof(*e));
    snprintf(e->build_id, sizeof(e->build_id), "%s", build_id);
    return e;
}

/* ------------------------------------------------------------ cache size */

typedef struct cached_s {
    char name[LC_BUILD_ID_HEX_MAX + 1];
    int64_t mtime;
    uint64_t size;
} cached_t;

static int cached_older(const void *a, const void *b)
{
    const cached_t *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* The download of build id `name`: its debug file, else its executable
 * (lookup falls back to it). */
static bool cached_file(const char *dir, const char *name, char p[LC_DEBUGINFO_PATH_MAX],
                        struct stat *sb)
{
    static const char *const kinds[] = {"debuginfo", "executable"};
    for (size_t i = 0; i < LC_ARRAY_LEN(kinds); i++)
        if (snprintf(p, LC_DEBUGINFO_PATH_MAX, "%s/%s/%s", dir, name, kinds[i]) <
                LC_DEBUGINFO_PATH_MAX &&
            stat(p, sb) == 0)
            return true;
    return false;
}

static size_t cache_list(const char *dir, cached_t **out, uint64_t *total)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    *total = 0;
    DIR *dh = opendir(dir);
    if (!dh)
        return 0;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        char p[LC_DEBUGINFO_PATH_MAX];
        struct stat sb;
        if (de->d_name[0] == '.' || strlen(de->d_name) > LC_BUILD_ID_HEX_MAX ||
            !cached_file(dir, de->d_name, p, &sb))
            continue;
        *out = lc_xgrow(*out, &cap, n + 1, sizeof(**out));
        memcpy((*out)[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        (*out)[n].mtime = sb.st_mtime;
        (*out)[n].size = (uint64_t)sb.st_size;
        *total += (uint64_t)sb.st_size;
        n++;
    }
    closedir(dh);
    return n;
}

/* Removes the oldest downloads until the cache is within its cap. */
static void cache_trim(symfetch_t *f)
{
    cached_t *c;
    uint64_t total;
    size_t n = cache_list(f->cache_dir, &c, &total);
    qsort(c, n, sizeof(*c), cached_older);
    for (size_t i = 0; i < n && total > f->opts.cache_max_bytes; i++) {
        char p[LC_DEBUGINFO_PATH_MAX];
        struct stat sb;
        if (cached_file(f->cache_dir, c[i].name, p, &sb) && unlink(p) == 0) {
            total -= c[i].size;
            LC_LOG_INFO("symbolizer: debuginfod cache over its cap, removed build_id=%s",
                        c[i].name);
        }
    }
    lc_free(c);
}

/* ---------------------------------------------------------------- worker */

typedef struct progress_s {
    uint64_t deadline_ns;
} progress_t;

static int progress_past_deadline(debuginfod_client *c, long a, long b)
{
    (void)a, (void)b;
    const progress_t *p = debuginfod_get_user_data(c);
    return now_ns() > p->deadline_ns; /* non-zero aborts the transfer */
}

/* One lookup, without the lock. true with path when found. */
static bool lookup(symfetch_t *f, debuginfod_client *c, const char *build_id,
                   char path[LC_DEBUGINFO_PATH_MAX])
{
    progress_t p = {now_ns() + f->opts.fetch_timeout_ms * 1000000ULL};
    debuginfod_set_user_data(c, &p);
    char *found = NULL;
    int fd = debuginfod_find_debuginfo(c, (const unsigned char *)build_id, 0, &found);
    /* No debug file: the binary itself, whose own tables still name frames
     * (a Go binary's .gopclntab survives -s -w; else .symtab or .dynsym). */
    if (fd == -ENOENT)
        fd = debuginfod_find_executable(c, (const unsigned char *)build_id, 0, &found);
    if (fd < 0) {
        LC_LOG_INFO("symbolizer: debuginfod has no file build_id=%s error=%s", build_id,
                    strerror(-fd));
        return false;
    }
    close(fd);
    snprintf(path, LC_DEBUGINFO_PATH_MAX, "%s", found);
    free(found);
    return true;
}

static void lookup_done(symfetch_t *f, size_t idx, bool ok, const char *path)
{
    fetch_entry_t *e = &f->entries[idx];
    f->fetches++;
    if (ok) {
        e->state = FETCH_FOUND;
        snprintf(e->path, sizeof(e->path), "%s", path);
    } else {
        f->failures++;
        e->state = FETCH_MISSING;
        e->until_ns = now_ns() + f->opts.negative_ttl_ms * 1000000ULL;
    }
    pthread_cond_broadcast(&f->done);
}

static void *worker(void *arg)
{
    symfetch_t *f = arg;
    debuginfod_client *c = debuginfod_begin();
    if (c)
        debuginfod_set_progressfn(c, progress_past_deadline);
    pthread_mutex_lock(&f->lock);
    while (!f->stop) {
        if (f->q_len == 0) {
            pthread_cond_wait(&f->wake, &f->lock);
            continue;
        }
        size_t idx = f->queue[f->q_head];
        f->q_head = (f->q_head + 1) % QUEUE_MAX;
        f->q_len--;
        char id[LC_BUILD_ID_HEX_MAX + 1], path[LC_DEBUGINFO_PATH_MAX];
        snprintf(id, sizeof(id), "%s", f->entries[idx].build_id);
        pthread_mutex_unlock(&f->lock);
        bool ok = c && lookup(f, c, id, path);
        if (ok)
            cache_trim(f);
        pthread_mutex_lock(&f->lock);
        lookup_done(f, idx, ok && access(path, R_OK) == 0, path);
    }
    pthread_mutex_unlock(&f->lock);
    if (c)
        debuginfod_end(c);
    return NULL;
}

/* ------------------------------------------------------------- lifecycle */

static void write_cache_miss_ttl(const char *dir, uint64_t ttl_ms)
{
    char p[LC_DEBUGINFO_PATH_MAX];
    snprintf(p, sizeof(p), "%s/cache_miss_s", dir);
    FILE *fp = fopen(p, "w");
    if (fp) {
        fprintf(fp, "%llu", (unsigned long long)(ttl_ms / 1000));
        fclose(fp);
    }
}

static void set_environment(const lc_symbolizer_opts_t *o)
{
    char timeout[32];
    snprintf(timeout, sizeof(timeout), "%llu",
             (unsigned long long)((o->fetch_timeout_ms + 999) / 1000));
    setenv("DEBUGINFOD_URLS", o->debuginfod_urls, 1);
    setenv("DEBUGINFOD_CACHE_PATH", o->cache_dir, 1);
    setenv("DEBUGINFOD_TIMEOUT", timeout, 1);
    unsetenv("DEBUGINFOD_PROGRESS"); /* it would print to stderr */
}

int symfetch_new(const lc_symbolizer_opts_t *opts, symfetch_t **out)
{
    *out = NULL;
    if (!opts->debuginfod_urls || !opts->debuginfod_urls[0])
        return 0;
    if (mkdir(opts->cache_dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        LC_LOG_ERROR("symbolizer: cannot create the debuginfod cache dir=%s error=%s",
                     opts->cache_dir, strerror(e));
        return -e;
    }
    set_environment(opts);
    write_cache_miss_ttl(opts->cache_dir, opts->negative_ttl_ms);
    symfetch_t *f = lc_xcalloc(1, sizeof(*f));
    f->opts = *opts;
    f->cache_dir = lc_xstrdup(opts->cache_dir);
    f->entries = lc_xcalloc(MAX_STATES, sizeof(*f->entries));
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->wake, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->done, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&f->thread, NULL, worker, f);
    if (rc) {
        symfetch_free(f);
        return -rc;
    }
    *out = f;
    return 0;
}

void symfetch_free(symfetch_t *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->lock);
    if (f->thread)
        pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->wake);
    pthread_cond_destroy(&f->done);
    pthread_mutex_destroy(&f->lock);
    lc_free(f->entries);
    lc_free(f->cache_dir);
    lc_free(f);
}

void symfetch_counts(symfetch_t *f, uint64_t *fetches, uint64_t *failures)
{
    pthread_mutex_lock(&f->lock);
    *fetches = f->fetches;
    *failures = f->failures;
    pthread_mutex_unlock(&f->lock);
}

/* Under lock: queues a lookup unless one is on its way. false when the
 * queue is full. */
static bool request(symfetch_t *f, fetch_entry_t *e)
{
    if (e->state == FETCH_PENDING)
        return true;
    if (f->q_len == QUEUE_MAX)
        return false;
    e->state = FETCH_PENDING;
    f->queue[(f->q_head + f->q_len++) % QUEUE_MAX] = (size_t)(e - f->entries);
    pthread_cond_signal(&f->wake);
    return true;
}

/* Under lock: waits for the lookup of e until deadline_ns. */
static void wait_for(symfetch_t *f, fetch_entry_t *e, uint64_t deadline_ns)
{
    while (e->state == FETCH_PENDING && !f->stop && now_ns() < deadline_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t left = deadline_ns - now_ns();
        uint64_t at = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + left;
        ts.tv_sec = (time_t)(at / 1000000000ULL);
        ts.tv_nsec = (long)(at % 1000000000ULL);
        pthread_cond_timedwait(&f->done, &f->lock, &ts);
    }
}

bool symfetch_get(symfetch_t *f, const char *build_id, uint64_t deadline_ns,
                  char path[LC_DEBUGINFO_PATH_MAX])
{
    pthread_mutex_lock(&f->lock);
    fetch_entry_t *e = entry_find(f, build_id);
    if (!e)
        e = entry_add(f, build_id);
    bool ok = false;
    if (e) {
        bool stale = (e->state == FETCH_FOUND && access(e->path, R_OK) != 0) ||
                     (e->state == FETCH_MISSING && e->until_ns <= now_ns()) || e->state == 0;
        if (!stale || request(f, e))
            wait_for(f, e, deadline_ns);
        ok = e->state == FETCH_FOUND;
        if (ok)
            snprintf(path, LC_DEBUGINFO_PATH_MAX, "%s", e->path);
    }
    pthread_mutex_unlock(&f->lock);
    return ok;
}
