/*
 * jfr.h — Java Flight Recorder uploads (format=jfr, pyroscope-api.md §2.8)
 * turned into pprof at the edge, as Pyroscope's converter does.
 *
 * jfr.c reads the chunked file (header, metadata, constant pools, events);
 * jfr_pprof.c turns its events into one pprof per event kind, with the
 * contextual labels of the agent's `labels` part (LabelsSnapshot).
 * Ownership: everything returned lives in the caller's arena or in the
 * result's buffers, freed by lc_jfr_result_fini. Threading: one call per
 * request thread, nothing shared between threads (the symbol regexes are
 * compiled once). Each thread keeps the memory of its converter's tables
 * between its conversions, all threads together up to LC_JFR_KEPT_BYTES
 * (see lc_jfr_release):
 * a conversion's output does not depend on what ran before it.
 */
#ifndef LC_JFR_H
#define LC_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"

/* ---------------------------------------------------------------- caps
 * Every size driven by the upload is capped; past a cap the upload is a 413
 * ("profile too large: ..."), a malformed file a 422 naming what is wrong. */
#define LC_JFR_MAX_BYTES ((size_t)256 << 20)       /* decompressed recording */
#define LC_JFR_MAX_LABELS_BYTES ((size_t)16 << 20) /* decompressed LabelsSnapshot */
#define LC_JFR_MAX_EVENTS ((size_t)16 << 20)       /* converted events, whole file */
#define LC_JFR_MAX_STACK_DEPTH 8192                /* frames of one stack trace */
#define LC_JFR_MAX_FRAMES ((size_t)8 << 20)        /* frames of all stack traces held */
#define LC_JFR_MAX_POOL_ENTRIES ((size_t)4 << 20)  /* constant-pool entries held */
#define LC_JFR_MAX_META_STRINGS ((size_t)1 << 20)  /* strings of one metadata event */
#define LC_JFR_MAX_CLASSES 65536                   /* classes of one metadata event */
#define LC_JFR_MAX_FIELDS 256                      /* fields of one class */
#define LC_JFR_MAX_NESTING 32                      /* metadata elements, inline structs */
#define LC_JFR_MAX_CHUNKS 4096
#define LC_JFR_MAX_CONTEXTS ((size_t)1 << 20) /* LabelsSnapshot contexts + strings */
#define LC_JFR_MEMORY ((size_t)1 << 30)       /* the conversion's own arena */
/* Freed table memory the threads keep for their next conversions (their
 * largest tables' blocks, as far as they fit), over all of the process's
 * threads; docs/internals/jfr.md. */
#define LC_JFR_KEPT_BYTES ((size_t)128 << 20)

/* The sample kinds Pyroscope's converter produces, one pprof each. */
typedef enum {
    LC_JFR_CPU = 0,
    LC_JFR_WALL,
    LC_JFR_ALLOC_IN_TLAB,
    LC_JFR_ALLOC_OUTSIDE_TLAB,
    LC_JFR_LOCK,
    LC_JFR_THREAD_PARK,
    LC_JFR_LIVE_OBJECT,
    LC_JFR_ALLOC_SAMPLE,
    LC_JFR_MALLOC,
    LC_JFR_KINDS_
} lc_jfr_kind_t;

typedef struct lc_jfr_params_s {
    int64_t start_ns, end_ns; /* `from` / `until`: time_nanos and duration */
    uint32_t sample_rate;     /* cpu/wall values x 1e9 / sample_rate (0: x 0) */
    /* Stack-trace pools of this many bytes or more are located in the
     * recording and decoded when a sample names a stack, not copied (0: the
     * default, 2 MiB). Same results either way; the fuzz target sets 1 so
     * small inputs take that path too and compares both. */
    size_t lazy_stacks_min_bytes;
} lc_jfr_params_t;

typedef struct lc_jfr_profile_s {
    lc_jfr_kind_t kind;
    const char *metric; /* __name__: process_cpu, wall, memory, mutex, block */
    lc_buf_t pprof;     /* uncompressed pprof */
    size_t n_samples;
} lc_jfr_profile_t;

typedef struct lc_jfr_result_s {
    lc_jfr_profile_t profiles[LC_JFR_KINDS_]; /* kinds that had events, in kind order */
    size_t n;
    const char *event; /* the `event` ActiveSetting (jfr_event label), "" if none; arena */
    size_t n_events;   /* converted events */
} lc_jfr_result_t;

/* Statistics a test or benchmark may want (totals per kind, per sample type). */
typedef struct lc_jfr_totals_s {
    int64_t v[LC_JFR_KINDS_][2];
} lc_jfr_totals_t;

/* Converts a recording (raw or gzip) and an optional LabelsSnapshot (raw or
 * gzip; NULL/0 when absent) into out (initialised here). Strings live in
 * arena. Errors: st set, 422 invalid_argument "invalid jfr: <reason>" or
 * "invalid labels: <reason>", 413 "profile too large: ..." past a cap; out
 * then holds nothing. */
int lc_jfr_to_pprof(const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                    const lc_jfr_params_t *params, lc_arena_t *arena, lc_jfr_result_t *out,
                    lc_status_t *st) LC_MUST_CHECK;
void lc_jfr_result_fini(lc_jfr_result_t *r);

/* The memory the calling thread keeps between conversions: a conversion's
 * tables (id maps, frames, aggregates, the builders' arrays), freed at its
 * end, stay with the thread, at most LC_JFR_KEPT_BYTES of them, and serve
 * its next conversion, which so does not page-fault them in again.
 * lc_jfr_release frees them now (a thread done converting for a while may
 * call it); a thread's exit frees them too. lc_jfr_kept_bytes: how many
 * bytes the calling thread keeps. */
void lc_jfr_release(void);
size_t lc_jfr_kept_bytes(void);

/* A JVM-generated class or library name with its varying part replaced by
 * "_", as Pyroscope's converter does (lambda classes, reflection accessors,
 * CGLIB proxies, temporary native libraries). Returns s itself when nothing
 * changes, else an arena copy. */
const char *lc_jfr_merge_generated(const char *s, size_t len, lc_arena_t *arena, size_t *out_len);

#endif
