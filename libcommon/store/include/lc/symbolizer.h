/*
 * lc/symbolizer.h — names for frames stored unsymbolized (issue 31): an
 * address in a mapping with a build id, taken as its offset in the mapped
 * file, becomes the functions at that address (innermost first: inlined
 * functions, then the function they were inlined into), each with its source
 * file and line, read with libdw from the DWARF of a debug file, or from its
 * ELF symbol table when the address has no DWARF.
 *
 * Where debug files come from, in order: the query's tenants' uploads
 * (lc/debuginfo.h, then the find_upload hook's shared store), then debuginfod servers
 * (libdebuginfod), looked up on the symbolizer's own worker thread with a timeout; a query waits
 * for them at most `wait_ms` in total (its scope's deadline) and meanwhile shows the frame as
 * module+0xoffset. A build id no server has is remembered for negative_ttl_ms, so a down or empty
 * server costs one lookup, not one per query. Downloads are kept in cache_dir, at most
 * cache_max_bytes (the least recently used files go first).
 *
 * Answers are cached per (build id, offset), at most max_cached_addresses
 * (the whole cache is dropped when full: answers are copied out, so no
 * caller holds a pointer into it).
 *
 * Ownership: the symbolizer owns its caches, its thread and its libdw
 * handles; results are copied into the caller's arena.
 * Threading: lc_symbolize may run on any number of threads at once (libdw
 * handles are used under one lock); new and free on one thread.
 */
#ifndef LC_SYMBOLIZER_H
#define LC_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/debuginfo.h"

/* Uploads kept somewhere the symbolizer does not read itself (an
 * ingester's object store, shared by every ingester): tenant's file of
 * build_id (normalised hex), true with the path of a local copy. Asked for
 * each of a query's tenants when `files` has none, before debuginfod; on
 * query threads, any number at once. */
typedef bool (*lc_symbolizer_find_upload_fn)(void *data, const char *tenant, const char *build_id,
                                             char path[LC_DEBUGINFO_PATH_MAX]);

typedef struct lc_symbolizer_opts_s {
    lc_debuginfo_t *files;                    /* uploaded debug files; NULL = none */
    lc_symbolizer_find_upload_fn find_upload; /* NULL = none */
    void *find_upload_data;
    const char *debuginfod_urls; /* space-separated; NULL or "" = no debuginfod */
    const char *cache_dir;       /* debuginfod downloads (created) */
    uint64_t cache_max_bytes;
    uint64_t fetch_timeout_ms; /* one debuginfod lookup, connect to last byte */
    uint64_t wait_ms;          /* what one query waits for lookups, in total */
    uint64_t negative_ttl_ms;  /* how long "no server has it" is believed */
    size_t max_cached_addresses;
} lc_symbolizer_opts_t;

typedef struct lc_symbolizer_s lc_symbolizer_t;

int lc_symbolizer_new(const lc_symbolizer_opts_t *opts, lc_symbolizer_t **out) LC_MUST_CHECK;
/* Stops the worker (a lookup in flight is abandoned) and frees everything. */
void lc_symbolizer_free(lc_symbolizer_t *s);

/* One frame of a symbolized address. */
typedef struct lc_symbol_frame_s {
    const char *function; /* never empty */
    const char *file;     /* "" when unknown */
    int64_t line;         /* 0 when unknown */
} lc_symbol_frame_t;

typedef struct lc_symbols_s {
    size_t n;                  /* 0: not resolved */
    lc_symbol_frame_t *frames; /* frames[0] innermost, as pprof's lines */
} lc_symbols_t;

/* Whose files a query may use, and until when it waits for lookups. */
typedef struct lc_symbol_scope_s {
    lc_symbolizer_t *sym;
    const char *const *tenants;
    size_t n_tenants;
    uint64_t deadline_ns; /* uv_hrtime clock; past it, nothing waits */
} lc_symbol_scope_t;

/* A scope of the symbolizer's wait_ms from now. */
void lc_symbol_scope_init(lc_symbol_scope_t *scope, lc_symbolizer_t *sym,
                          const char *const *tenants, size_t n_tenants);

/* The frames at file_offset of the file with build_id (raw bytes of the
 * mapping's build id as stored: hex text, either case), copied into a.
 * out->n == 0 when they are not known (no file, no symbol there, or the
 * lookup is still running). Returns 0, or LC_ETOOBIG when a is full. */
int lc_symbolize(const lc_symbol_scope_t *scope, const char *build_id, size_t build_id_len,
                 uint64_t file_offset, lc_arena_t *a, lc_symbols_t *out) LC_MUST_CHECK;

/* Counters for /metrics and the benchmark. */
typedef struct lc_symbolizer_stats_s {
    uint64_t hits, misses, resolved, unresolved, fetches, fetch_failures;
} lc_symbolizer_stats_t;
void lc_symbolizer_stats(lc_symbolizer_t *s, lc_symbolizer_stats_t *out);

#endif
