/*
 * jfr.h — Java Flight Recorder uploads (format=jfr, pyroscope-api.md §2.8)
 * turned into pprof at the edge, as Pyroscope's converter does.
 *
 * jfr.c reads the chunked file (header, metadata, constant pools, events);
 * jfr_pprof.c turns its events into one pprof per event kind, with the
 * contextual labels of the agent's `labels` part (LabelsSnapshot).
 * Ownership: everything returned lives in the caller's arena or in the
 * result's buffers, freed by ing_jfr_result_fini. Threading: pure; one call
 * per request thread, no shared state (the symbol regexes are compiled once).
 */
#ifndef EMBER_INGESTER_JFR_H
#define EMBER_INGESTER_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"

/* ---------------------------------------------------------------- caps
 * Every size driven by the upload is capped; past a cap the upload is a 413
 * ("profile too large: ..."), a malformed file a 422 naming what is wrong. */
#define ING_JFR_MAX_BYTES ((size_t)256 << 20)       /* decompressed recording */
#define ING_JFR_MAX_LABELS_BYTES ((size_t)16 << 20) /* decompressed LabelsSnapshot */
#define ING_JFR_MAX_EVENTS ((size_t)16 << 20)       /* converted events, whole file */
#define ING_JFR_MAX_STACK_DEPTH 8192                /* frames of one stack trace */
#define ING_JFR_MAX_FRAMES ((size_t)8 << 20)        /* frames of all stack traces held */
#define ING_JFR_MAX_POOL_ENTRIES ((size_t)4 << 20)  /* constant-pool entries held */
#define ING_JFR_MAX_META_STRINGS ((size_t)1 << 20)  /* strings of one metadata event */
#define ING_JFR_MAX_CLASSES 65536                   /* classes of one metadata event */
#define ING_JFR_MAX_FIELDS 256                      /* fields of one class */
#define ING_JFR_MAX_NESTING 32                      /* metadata elements, inline structs */
#define ING_JFR_MAX_CHUNKS 4096
#define ING_JFR_MAX_CONTEXTS ((size_t)1 << 20) /* LabelsSnapshot contexts + strings */
#define ING_JFR_MEMORY ((size_t)1 << 30)       /* the conversion's own arena */

/* The sample kinds Pyroscope's converter produces, one pprof each. */
typedef enum {
    ING_JFR_CPU = 0,
    ING_JFR_WALL,
    ING_JFR_ALLOC_IN_TLAB,
    ING_JFR_ALLOC_OUTSIDE_TLAB,
    ING_JFR_LOCK,
    ING_JFR_THREAD_PARK,
    ING_JFR_LIVE_OBJECT,
    ING_JFR_ALLOC_SAMPLE,
    ING_JFR_MALLOC,
    ING_JFR_KINDS_
} ing_jfr_kind_t;

typedef struct ing_jfr_params_s {
    int64_t start_ns, end_ns; /* `from` / `until`: time_nanos and duration */
    uint32_t sample_rate;     /* cpu/wall values x 1e9 / sample_rate (0: x 0) */
} ing_jfr_params_t;

typedef struct ing_jfr_profile_s {
    ing_jfr_kind_t kind;
    const char *metric; /* __name__: process_cpu, wall, memory, mutex, block */
    lc_buf_t pprof;     /* uncompressed pprof */
    size_t n_samples;
} ing_jfr_profile_t;

typedef struct ing_jfr_result_s {
    ing_jfr_profile_t profiles[ING_JFR_KINDS_]; /* kinds that had events, in kind order */
    size_t n;
    const char *event; /* the `event` ActiveSetting (jfr_event label), "" if none; arena */
    size_t n_events;   /* converted events */
} ing_jfr_result_t;

/* Statistics a test or benchmark may want (totals per kind, per sample type). */
typedef struct ing_jfr_totals_s {
    int64_t v[ING_JFR_KINDS_][2];
} ing_jfr_totals_t;

/* Converts a recording (raw or gzip) and an optional LabelsSnapshot (raw or
 * gzip; NULL/0 when absent) into out (initialised here). Strings live in
 * arena. Errors: st set, 422 invalid_argument "invalid jfr: <reason>" or
 * "invalid labels: <reason>", 413 "profile too large: ..." past a cap; out
 * then holds nothing. */
int ing_jfr_to_pprof(const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                     const ing_jfr_params_t *params, lc_arena_t *arena, ing_jfr_result_t *out,
                     lc_status_t *st) LC_MUST_CHECK;
void ing_jfr_result_fini(ing_jfr_result_t *r);

/* pprof sample-type names of a kind (for documentation and tests). */
const char *ing_jfr_kind_metric(ing_jfr_kind_t k);

/* A JVM-generated class or library name with its varying part replaced by
 * "_", as Pyroscope's converter does (lambda classes, reflection accessors,
 * CGLIB proxies, temporary native libraries). Returns s itself when nothing
 * changes, else an arena copy. */
const char *ing_jfr_merge_generated(const char *s, size_t len, lc_arena_t *arena, size_t *out_len);

/* ---------------------------------------------------------------- reader (jfr.c)
 * Internal to jfr.c / jfr_pprof.c. The reader walks every chunk: metadata,
 * the chain of checkpoint events (constant pools, which accumulate across
 * checkpoints and chunks, a later entry replacing an earlier one of the same
 * id, as in Pyroscope's parser), then the events Pyroscope converts, each
 * handed to on_event; on_chunk_end runs while that chunk's pools are valid. */
typedef enum {
    JFR_EV_NONE = 0,
    JFR_EV_EXECUTION_SAMPLE,   /* jdk.ExecutionSample */
    JFR_EV_WALL_CLOCK_SAMPLE,  /* profiler.WallClockSample (async-profiler) */
    JFR_EV_ALLOC_IN_NEW_TLAB,  /* jdk.ObjectAllocationInNewTLAB */
    JFR_EV_ALLOC_OUTSIDE_TLAB, /* jdk.ObjectAllocationOutsideTLAB */
    JFR_EV_ALLOC_SAMPLE,       /* jdk.ObjectAllocationSample */
    JFR_EV_MONITOR_ENTER,      /* jdk.JavaMonitorEnter */
    JFR_EV_THREAD_PARK,        /* jdk.ThreadPark */
    JFR_EV_LIVE_OBJECT,        /* profiler.LiveObject */
    JFR_EV_MALLOC,             /* profiler.Malloc */
    JFR_EV_ACTIVE_SETTING,     /* jdk.ActiveSetting */
    JFR_EV_COUNT_
} jfr_event_kind_t;

typedef struct jfr_event_s {
    jfr_event_kind_t kind;
    uint64_t stack, state, context_id, span_id, span_name;
    int64_t value;              /* tlabSize, allocationSize, weight, duration, samples or size */
    const char *name, *setting; /* ActiveSetting name / value (arena) */
} jfr_event_t;

typedef struct jfr_frame_s {
    uint64_t method;
    int64_t line; /* as Pyroscope: the int seen as uint32 */
} jfr_frame_t;

typedef struct jfr_s jfr_t;
typedef int (*jfr_event_cb)(jfr_t *j, const jfr_event_t *ev, void *data);
typedef int (*jfr_chunk_cb)(jfr_t *j, void *data);

/* buf must stay valid during the call. Callbacks return 0, or -1 with st set. */
int jfr_read(const uint8_t *buf, size_t len, lc_arena_t *arena, jfr_event_cb on_event,
             jfr_chunk_cb on_chunk_end, void *data, lc_status_t *st) LC_MUST_CHECK;
/* The frames of a stack trace (leaf first), or NULL when the id is unknown. */
const jfr_frame_t *jfr_stack(jfr_t *j, uint64_t id, size_t *n);
/* "pkg/Class.method" (generated names merged) of a method, NUL-terminated,
 * or NULL when the method or its class is unknown (the frame is dropped). */
const char *jfr_method_name(jfr_t *j, uint64_t method);
/* What a thread state means to the converter: its name is STATE_RUNNABLE,
 * STATE_SLEEPING or another; UNKNOWN when no pool entry has the id. */
typedef enum {
    JFR_STATE_UNKNOWN = 0,
    JFR_STATE_RUNNABLE,
    JFR_STATE_SLEEPING,
    JFR_STATE_OTHER
} jfr_state_t;
jfr_state_t jfr_thread_state(jfr_t *j, uint64_t id);

#endif
