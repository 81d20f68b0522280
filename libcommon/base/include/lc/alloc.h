/*
 * lc/alloc.h — allocation wrappers, per-request arenas and capped buffers.
 *
 * OOM policy: lc_x* abort on allocation failure (a service under Kubernetes
 * restarts cheaply); input-driven sizes are bounded instead by hard caps, so an
 * attacker cannot drive memory use. Arena and buffer caps return LC_ETOOBIG.
 *
 * Threading: an arena or buffer belongs to one thread at a time; nothing here
 * locks. Only this module calls malloc/realloc directly.
 */
#ifndef LC_ALLOC_H
#define LC_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "lc/err.h"

void *lc_xmalloc(size_t n);
void *lc_xcalloc(size_t n, size_t size);
void *lc_xrealloc(void *p, size_t n);
/* Grows an array: returns p resized to hold at least `need` elements of `size`,
 * doubling *cap. */
void *lc_xgrow(void *p, size_t *cap, size_t need, size_t size);
char *lc_xstrdup(const char *s);
char *lc_xstrndup(const char *s, size_t n);
void lc_free(void *p);

/* Tells glibc to keep up to 8 MiB free at the top of each malloc heap instead
 * of giving it back past 128 KiB (its trim threshold, fixed at that default
 * once any threshold is set, as the store sets the mmap one): a process that
 * handles one profile-sized buffer after another (0.1-1 MiB bodies, entries,
 * the writer's arrays) otherwise faults their pages in again on nearly every
 * request — ~10% of ember's CPU over Redis and 3-8% of the all-in-one's on
 * issue 32's benchmarks (bench/README.md). Process-wide and idempotent: the
 * store and the Redis transport both call it; returns false when glibc
 * refused (then logged by the caller). */
bool lc_malloc_keep_heap_top(void);

/* ---- arena: bump allocator with a hard cap, freed all at once. ---- */
typedef struct lc_arena_s lc_arena_t;

lc_arena_t *lc_arena_new(size_t cap_bytes);
void lc_arena_free(lc_arena_t *a);
/* Returns 8-byte aligned memory, or NULL once the cap would be passed. */
void *lc_arena_alloc(lc_arena_t *a, size_t n);
void *lc_arena_calloc(lc_arena_t *a, size_t n, size_t size);
char *lc_arena_strndup(lc_arena_t *a, const char *s, size_t n);
char *lc_arena_strdup(lc_arena_t *a, const char *s);
char *lc_arena_sprintf(lc_arena_t *a, const char *fmt, ...) LC_PRINTF(2, 3);
void lc_arena_reset(lc_arena_t *a);
size_t lc_arena_used(const lc_arena_t *a);
/* A protobuf-c allocator backed by the arena; its free() does nothing, so
 * unpacked messages die with the arena. */
void lc_arena_pb_allocator(lc_arena_t *a, ProtobufCAllocator *out);

/* ---- buffer: growable bytes with a hard cap fixed at init. ---- */
typedef struct lc_buf_s {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t max; /* hard cap on len; appends past it fail with LC_ETOOBIG */
} lc_buf_t;

#define LC_BUF_UNLIMITED ((size_t)-1)

void lc_buf_init(lc_buf_t *b, size_t max);
void lc_buf_fini(lc_buf_t *b);
void lc_buf_reset(lc_buf_t *b);
int lc_buf_reserve(lc_buf_t *b, size_t extra) LC_MUST_CHECK;
int lc_buf_append(lc_buf_t *b, const void *p, size_t n) LC_MUST_CHECK;
int lc_buf_puts(lc_buf_t *b, const char *s) LC_MUST_CHECK;
int lc_buf_putc(lc_buf_t *b, char c) LC_MUST_CHECK;
int lc_buf_printf(lc_buf_t *b, const char *fmt, ...) LC_PRINTF(2, 3) LC_MUST_CHECK;
int lc_buf_put_uvarint(lc_buf_t *b, uint64_t v) LC_MUST_CHECK;
/* Hands the bytes to the caller (free with lc_free); the buffer is left empty. */
uint8_t *lc_buf_steal(lc_buf_t *b, size_t *len);

/* ---- varints (protobuf / Go binary.Uvarint encoding). ---- */
size_t lc_uvarint_put(uint8_t *dst, uint64_t v); /* dst needs 10 bytes */
/* Decodes one varint from [*p, end); advances *p. Returns 0 or LC_ECORRUPT. */
int lc_uvarint_get(const uint8_t **p, const uint8_t *end, uint64_t *out) LC_MUST_CHECK;

#endif
