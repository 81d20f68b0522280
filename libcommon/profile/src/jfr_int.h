/*
 * jfr_int.h — the JFR reader shared by jfr.c and jfr_pprof.c (private to
 * the profile room; lc/jfr.h is the converter's public face).
 * Ownership and threading as lc/jfr.h: everything lives in the caller's
 * arena; one call per thread, no shared state.
 */
#ifndef LC_JFR_INT_H
#define LC_JFR_INT_H

#include "lc/jfr.h"

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

/* buf must stay valid during the call. Callbacks return 0, or -1 with st set.
 * lazy_min: lc_jfr_params_t.lazy_stacks_min_bytes (0: the default). */
int jfr_read(const uint8_t *buf, size_t len, size_t lazy_min, lc_arena_t *arena,
             jfr_event_cb on_event, jfr_chunk_cb on_chunk_end, void *data,
             lc_status_t *st) LC_MUST_CHECK;
/* A stack trace id's place in its chunk's pool (the order the recording
 * holds them in), UINT32_MAX when the id is unknown. Stacks asked for in
 * this order are read front to back, not at random. */
uint32_t jfr_stack_order(const jfr_t *j, uint64_t id);
/* The frames of the stack trace at that place (leaf first), or NULL when
 * there is none; valid until the next call (a lazily read stack is decoded
 * into scratch). */
const jfr_frame_t *jfr_stack_at(jfr_t *j, uint32_t order, size_t *n);
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
