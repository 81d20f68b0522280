/*
 * symbolizer.c — lc/symbolizer.h: which debug file names a build id for a
 * query (its tenants' uploads, then debuginfod), the open libdw files (at
 * most MAX_OPEN_FILES, the least recently used closed first) and the cache of
 * answers by (debug file, offset). Answers are keyed by the file, not the
 * build id alone, so one tenant's upload never names another tenant's frames.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "lc/hash.h"
#include "lc/log.h"
#include "symbolizer_int.h"

#define MAX_OPEN_FILES 32
#define CACHE_BUCKETS 4096
/* The answers' strings: dropped with the answers when full. */
#define CACHE_ARENA_BYTES ((size_t)256 << 20)

typedef struct open_file_s {
    char path[LC_DEBUGINFO_PATH_MAX];
    symfile_t *file; /* NULL: not a usable ELF file */
    uint64_t last_used;
} open_file_t;

typedef struct answer_s {
    struct answer_s *next;
    uint64_t hash, offset;
    const char *path;
    lc_symbols_t symbols;
} answer_t;

struct lc_symbolizer_s {
    lc_symbolizer_opts_t opts;
    symfetch_t *fetch;          /* NULL: no debuginfod */
    pthread_mutex_t files_lock; /* open files and every libdw call */
    open_file_t files[MAX_OPEN_FILES];
    uint64_t use_clock;
    pthread_mutex_t cache_lock; /* answers and counters */
    answer_t *buckets[CACHE_BUCKETS];
    size_t n_answers;
    lc_arena_t *answers;
    lc_symbolizer_stats_t stats;
};

int lc_symbolizer_new(const lc_symbolizer_opts_t *opts, lc_symbolizer_t **out)
{
    lc_symbolizer_t *s = lc_xcalloc(1, sizeof(*s));
    s->opts = *opts;
    int rc = symfetch_new(opts, &s->fetch);
    if (rc) {
        lc_free(s);
        return rc;
    }
    pthread_mutex_init(&s->files_lock, NULL);
    pthread_mutex_init(&s->cache_lock, NULL);
    s->answers = lc_arena_new(CACHE_ARENA_BYTES);
    *out = s;
    return 0;
}

void lc_symbolizer_free(lc_symbolizer_t *s)
{
    if (!s)
        return;
    symfetch_free(s->fetch);
    for (size_t i = 0; i < MAX_OPEN_FILES; i++)
        symfile_close(s->files[i].file);
    lc_arena_free(s->answers);
    pthread_mutex_destroy(&s->files_lock);
    pthread_mutex_destroy(&s->cache_lock);
    lc_free(s);
}

void lc_symbol_scope_init(lc_symbol_scope_t *scope, lc_symbolizer_t *sym,
                          const char *const *tenants, size_t n_tenants)
{
    uint64_t wait_ns = sym ? sym->opts.wait_ms * 1000000ULL : 0;
    *scope = (lc_symbol_scope_t){sym, tenants, n_tenants, uv_hrtime() + wait_ns};
}

void lc_symbolizer_stats(lc_symbolizer_t *s, lc_symbolizer_stats_t *out)
{
    pthread_mutex_lock(&s->cache_lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->cache_lock);
    if (s->fetch)
        symfetch_counts(s->fetch, &out->fetches, &out->fetch_failures);
}

/* The debug file a scope uses for build_id: an upload of one of its
 * tenants (local, else the shared store's), else debuginfod's (waiting
 * until the scope's deadline). */
static bool debug_file(const lc_symbol_scope_t *scope, const char *build_id,
                       char path[LC_DEBUGINFO_PATH_MAX])
{
    lc_symbolizer_t *s = scope->sym;
    for (size_t i = 0; s->opts.files && i < scope->n_tenants; i++)
        if (lc_debuginfo_path(s->opts.files, scope->tenants[i], build_id, path) == 0)
            return true;
    for (size_t i = 0; s->opts.find_upload && i < scope->n_tenants; i++)
        if (s->opts.find_upload(s->opts.find_upload_data, scope->tenants[i], build_id, path))
            return true;
    return s->fetch && symfetch_get(s->fetch, build_id, scope->deadline_ns, path);
}

static uint64_t answer_hash(const char *path, uint64_t offset)
{
    uint64_t h = offset;
    for (const char *p = path; *p; p++)
        h = lc_mix64(h ^ (uint8_t)*p);
    return lc_mix64(h);
}

static int symbols_copy(const lc_symbols_t *in, lc_arena_t *a, lc_symbols_t *out)
{
    out->n = 0;
    if (in->n == 0)
        return 0;
    out->frames = lc_arena_alloc(a, in->n * sizeof(*out->frames));
    if (!out->frames)
        return LC_ETOOBIG;
    memcpy(out->frames, in->frames, in->n * sizeof(*out->frames));
    for (size_t i = 0; i < in->n; i++) {
        out->frames[i].function = lc_arena_strdup(a, in->frames[i].function);
        out->frames[i].file = lc_arena_strdup(a, in->frames[i].file);
        if (!out->frames[i].function || !out->frames[i].file)
            return LC_ETOOBIG;
    }
    out->n = in->n;
    return 0;
}

/* Under cache_lock. */
static answer_t *answer_find(lc_symbolizer_t *s, uint64_t h, const char *path, uint64_t offset)
{
    for (answer_t *e = s->buckets[h % CACHE_BUCKETS]; e; e = e->next)
        if (e->hash == h && e->offset == offset && strcmp(e->path, path) == 0)
            return e;
    return NULL;
}

/* Under cache_lock: everything cached goes when the cache is full. */
static void answers_drop_if_full(lc_symbolizer_t *s)
{
    if (s->n_answers < s->opts.max_cached_addresses &&
        lc_arena_used(s->answers) < CACHE_ARENA_BYTES / 2)
        return;
    memset(s->buckets, 0, sizeof(s->buckets));
    s->n_answers = 0;
    lc_arena_reset(s->answers);
}

/* Under cache_lock. */
static void answer_add(lc_symbolizer_t *s, uint64_t h, const char *path, uint64_t offset,
                       const lc_symbols_t *symbols)
{
    answers_drop_if_full(s);
    answer_t *e = lc_arena_calloc(s->answers, 1, sizeof(*e));
    if (!e || !(e->path = lc_arena_strdup(s->answers, path)) ||
        symbols_copy(symbols, s->answers, &e->symbols) != 0)
        return; /* not cached: the next query resolves it again */
    e->hash = h;
    e->offset = offset;
    e->next = s->buckets[h % CACHE_BUCKETS];
    s->buckets[h % CACHE_BUCKETS] = e;
    s->n_answers++;
}

/* Under files_lock: the open file of path, opening it in the least recently
 * used slot. */
static open_file_t *file_get(lc_symbolizer_t *s, const char *path)
{
    open_file_t *victim = &s->files[0];
    for (size_t i = 0; i < MAX_OPEN_FILES; i++) {
        open_file_t *f = &s->files[i];
        if (f->path[0] && strcmp(f->path, path) == 0) {
            f->last_used = ++s->use_clock;
            return f;
        }
        if (f->last_used < victim->last_used)
            victim = f;
    }
    symfile_close(victim->file);
    snprintf(victim->path, sizeof(victim->path), "%s", path);
    victim->file = symfile_open(path);
    victim->last_used = ++s->use_clock;
    if (!victim->file)
        LC_LOG_WARN("symbolizer: not a usable ELF file path=%s", path);
    return victim;
}

/* The frames from the file itself, into a. */
static int read_frames(lc_symbolizer_t *s, const char *path, uint64_t offset, lc_arena_t *a,
                       lc_symbols_t *out)
{
    pthread_mutex_lock(&s->files_lock);
    open_file_t *f = file_get(s, path);
    int rc = f->file ? symfile_frames(f->file, offset, a, out) : 0;
    if (!f->file)
        out->n = 0;
    pthread_mutex_unlock(&s->files_lock);
    return rc;
}

int lc_symbolize(const lc_symbol_scope_t *scope, const char *build_id, size_t build_id_len,
                 uint64_t file_offset, lc_arena_t *a, lc_symbols_t *out)
{
    out->n = 0;
    lc_symbolizer_t *s = scope->sym;
    char raw[LC_BUILD_ID_HEX_MAX + 1], id[LC_BUILD_ID_HEX_MAX + 1], path[LC_DEBUGINFO_PATH_MAX];
    lc_status_t st;
    if (!s || build_id_len == 0 || build_id_len > LC_BUILD_ID_HEX_MAX)
        return 0;
    memcpy(raw, build_id, build_id_len);
    raw[build_id_len] = '\0';
    if (lc_build_id_normalize(raw, id, &st) != 0 || !debug_file(scope, id, path))
        return 0;
    uint64_t h = answer_hash(path, file_offset);
    pthread_mutex_lock(&s->cache_lock);
    answer_t *e = answer_find(s, h, path, file_offset);
    int rc = e ? symbols_copy(&e->symbols, a, out) : 0;
    s->stats.hits += e != NULL;
    s->stats.misses += e == NULL;
    pthread_mutex_unlock(&s->cache_lock);
    if (e)
        return rc;
    rc = read_frames(s, path, file_offset, a, out);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->cache_lock);
    answer_add(s, h, path, file_offset, out);
    s->stats.resolved += out->n > 0;
    s->stats.unresolved += out->n == 0;
    pthread_mutex_unlock(&s->cache_lock);
    return 0;
}
