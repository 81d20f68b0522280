/*
 * jfr_int.h — the JFR reader shared by jfr.c and jfr_pprof.c (private to
 * the profile room; lc/jfr.h is the converter's public face).
 * Ownership and threading as lc/jfr.h: everything lives in the caller's
 * arena or in blocks the thread keeps; one call per thread, no shared state.
 */
#ifndef LC_JFR_INT_H
#define LC_JFR_INT_H

#include <string.h>

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

/* The converter's tables, kept with the thread between conversions (jfr.c,
 * "kept blocks"; lc/jfr.h): as lc_xmalloc, lc_xcalloc, lc_xgrow and lc_free,
 * and a block from one is freed only by jfr_keep_free, on its thread. */
void *jfr_keep_alloc(size_t n);
void *jfr_keep_calloc(size_t n, size_t size);
void *jfr_keep_grow(void *p, size_t *cap, size_t need, size_t size);
void jfr_keep_free(void *p);

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
/* How many places jfr_stack_order gives: every place is below it. */
uint32_t jfr_stack_places(const jfr_t *j);
/* The frames of the stack trace at that place (leaf first), or NULL when
 * there is none; valid until the next call (a lazily read stack is decoded
 * into scratch). */
const jfr_frame_t *jfr_stack_at(jfr_t *j, uint32_t order, size_t *n);
/* The frames of a located stack (see docs/internals/jfr.md), undecoded:
 * n frames of `fields` varints each from *p, method and lineNumber first;
 * every varint ends within the recording and at least 8 bytes follow the
 * last. False when the stack's frames are in the frame array (jfr_stack_at
 * gives them) or there is none at that place. */
bool jfr_stack_raw(const jfr_t *j, uint32_t order, const uint8_t **p, size_t *n, size_t *fields);
/* The frame at p of a located stack, decoded as jfr_stack_at would;
 * returns the frame's end. */
const uint8_t *jfr_frame_decode(const uint8_t *p, size_t fields, jfr_frame_t *out);

/* 8 bytes at p as a little-endian word: byte i at bits 8i..8i+7. */
static inline uint64_t jfr_le64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof(w));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* The bytes of a little-endian word that end a varint (those under 0x80),
 * as their top bits. */
static inline uint64_t jfr_varint_ends(uint64_t w)
{
    return ~w & 0x8080808080808080ull;
}

/* Past an unchecked LEB128 (9 bytes known to remain) without decoding it
 * (start times take 8 or 9 bytes, one per event). */
static inline const uint8_t *jfr_varint_skip(const uint8_t *p)
{
    uint64_t ends = jfr_varint_ends(jfr_le64(p));
    return ends ? p + __builtin_ctzll(ends) / 8 + 1 : p + 9;
}

/* A frame of a located stack (8 bytes readable at p, fields >= 2) as a key:
 * the bytes of its method and lineNumber varints, the bytes after them
 * cleared. A varint ends at its first byte under 0x80, so the bytes delimit
 * themselves and two keys are equal only when both varints' bytes are: one
 * (method, line) per key, whatever chunk it is read in (several keys may
 * name one pair when an encoding is not the shortest). Returns the frame's
 * end, or NULL when method and line do not both end within those 8 bytes
 * (jfr_frame_decode reads it then). No arithmetic on the values: the JDK's
 * frames are 4-10 bytes, and a key looked up replaces their decoding. */
static inline const uint8_t *jfr_frame_key(const uint8_t *p, size_t fields, uint64_t *key)
{
    uint64_t w = jfr_le64(p), ends = jfr_varint_ends(w);
    uint64_t rest = ends & (ends - 1); /* the ends after the method's */
    uint64_t line = rest & (0 - rest); /* the lineNumber's last byte, its top bit */
    if (!line)
        return NULL;
    *key = w & ((line << 1) - 1); /* line at bit 63: (0 - 1), every byte */
    for (size_t i = 2; i < fields; i++)
        rest &= rest - 1;
    if (rest)
        return p + __builtin_ctzll(rest) / 8 + 1;
    /* the fields after the line end past the word: skipped one by one
     * (each ends within the recording, 8 bytes readable at its start) */
    p += __builtin_ctzll(line) / 8 + 1;
    for (size_t i = 2; i < fields; i++)
        p = jfr_varint_skip(p);
    return p;
}

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
/* How many chunks so far gave a method whose name jfr_method_name had
 * returned a different one (counted when the chunk's pools are read, before
 * its events). While it stays the same, every name returned is still the
 * one jfr_method_name would return for that method, so what a caller made
 * of it (function and location ids) holds in the next chunk: method ids
 * are the chunk's, but the JDK keeps them, and this is checked by name. */
uint64_t jfr_renames(const jfr_t *j);

#endif
