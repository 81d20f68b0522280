/*
 * alloc.c — the only place that calls malloc. Arenas are chained blocks; the cap
 * counts every byte handed out so a request cannot exceed its budget. Blocks an
 * arena lets go of are kept in a small shared pool for the next arena (see
 * "block pool" below).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"

static void oom(size_t n)
{
    fprintf(stderr, "level=error msg=\"out of memory\" bytes=%zu\n", n);
    abort();
}

void *lc_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *lc_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *lc_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

void *lc_xgrow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    *cap = c;
    return lc_xrealloc(p, c * size);
}

char *lc_xstrdup(const char *s)
{
    return lc_xstrndup(s, strlen(s));
}

char *lc_xstrndup(const char *s, size_t n)
{
    char *d = lc_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void lc_free(void *p)
{
    free(p);
}

#define KEEP_HEAP_TOP_BYTES (8 << 20)

bool lc_malloc_keep_heap_top(void)
{
    return mallopt(M_TRIM_THRESHOLD, KEEP_HEAP_TOP_BYTES) == 1;
}

/* ---------------------------------------------------------------- arena */

typedef struct arena_block_s {
    struct arena_block_s *next;
    size_t size;
    size_t used;
    uint8_t data[];
} arena_block_t;

struct lc_arena_s {
    arena_block_t *head;
    size_t cap_bytes;
    size_t used_bytes;
};

#define ARENA_BLOCK_MIN (16 * 1024)
#define ARENA_BLOCK_GROW_MAX (4u << 20) /* blocks double up to this size */

/* ---------------------------------------------------------------- arena: block pool */

/* Per request the ingest path puts megabytes in an arena (a decoded pprof is
 * several times its protobuf size), and glibc handed freed blocks that large
 * back to the kernel, so the next request page-faulted all of it in again:
 * ~15% of ember's CPU under the ingest benchmark. Blocks of the power-of-two
 * sizes arenas grow through (16 KiB .. 4 MiB) are therefore kept here, up to
 * POOL_MAX_BYTES in all, for whichever arena needs one next; larger blocks and
 * anything past the cap go back to malloc. Under AddressSanitizer nothing is
 * pooled, so that a use of arena memory after a reset is still caught. */
#define POOL_CLASSES 9 /* ARENA_BLOCK_MIN << 0 .. ARENA_BLOCK_GROW_MAX */
#define POOL_MAX_BYTES ((size_t)64 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ENABLED 0
#endif
#endif
#ifndef POOL_ENABLED
#define POOL_ENABLED 1
#endif

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static arena_block_t *pool_free[POOL_CLASSES];
static size_t pool_bytes;

/* The pool class of a block size, or -1 when blocks of that size are not kept. */
static int pool_class(size_t size)
{
    for (int c = 0; c < POOL_CLASSES; c++)
        if (size == (size_t)ARENA_BLOCK_MIN << c)
            return c;
    return -1;
}

static arena_block_t *pool_take(size_t size)
{
    int c = pool_class(size);
    if (!POOL_ENABLED || c < 0)
        return NULL;
    pthread_mutex_lock(&pool_lock);
    arena_block_t *b = pool_free[c];
    if (b) {
        pool_free[c] = b->next;
        pool_bytes -= size;
    }
    pthread_mutex_unlock(&pool_lock);
    return b;
}

/* Keeps the block for another arena, or frees it. */
static void pool_give(arena_block_t *b)
{
    int c = pool_class(b->size);
    if (POOL_ENABLED && c >= 0) {
        pthread_mutex_lock(&pool_lock);
        bool kept = pool_bytes + b->size <= POOL_MAX_BYTES;
        if (kept) {
            b->next = pool_free[c];
            pool_free[c] = b;
            pool_bytes += b->size;
        }
        pthread_mutex_unlock(&pool_lock);
        if (kept)
            return;
    }
    free(b);
}

/* The size of the block that must follow `prev` to hold n bytes: geometric
 * growth, and a pool class whenever the size is within the classes. */
static size_t block_size(const arena_block_t *prev, size_t n)
{
    size_t sz = n > ARENA_BLOCK_MIN ? n : ARENA_BLOCK_MIN;
    if (prev && prev->size * 2 > sz && prev->size < ARENA_BLOCK_GROW_MAX)
        sz = prev->size * 2;
    size_t class_size = ARENA_BLOCK_MIN;
    while (class_size < sz && class_size < ARENA_BLOCK_GROW_MAX)
        class_size *= 2;
    return class_size >= sz ? class_size : sz;
}

static arena_block_t *block_new(size_t size)
{
    arena_block_t *b = pool_take(size);
    if (!b) {
        b = lc_xmalloc(sizeof(*b) + size);
        b->size = size;
    }
    b->used = 0;
    return b;
}

/* ---------------------------------------------------------------- arena: allocation */

lc_arena_t *lc_arena_new(size_t cap_bytes)
{
    lc_arena_t *a = lc_xcalloc(1, sizeof(*a));
    a->cap_bytes = cap_bytes;
    return a;
}

void lc_arena_reset(lc_arena_t *a)
{
    arena_block_t *b = a->head;
    while (b) {
        arena_block_t *next = b->next;
        pool_give(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

void lc_arena_free(lc_arena_t *a)
{
    if (!a)
        return;
    lc_arena_reset(a);
    free(a);
}

void *lc_arena_alloc(lc_arena_t *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    if (a->used_bytes + n > a->cap_bytes || a->used_bytes + n < n)
        return NULL;
    arena_block_t *b = a->head;
    if (!b || b->size - b->used < n) {
        b = block_new(block_size(a->head, n));
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used_bytes += n;
    return p;
}

void *lc_arena_calloc(lc_arena_t *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = lc_arena_alloc(a, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *lc_arena_strndup(lc_arena_t *a, const char *s, size_t n)
{
    char *d = lc_arena_alloc(a, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *lc_arena_strdup(lc_arena_t *a, const char *s)
{
    return lc_arena_strndup(a, s, strlen(s));
}

char *lc_arena_sprintf(lc_arena_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *d = lc_arena_alloc(a, (size_t)n + 1);
    if (!d)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return d;
}

size_t lc_arena_used(const lc_arena_t *a)
{
    return a->used_bytes;
}

static void *arena_pb_alloc(void *data, size_t size)
{
    return lc_arena_alloc(data, size);
}
static void arena_pb_free(void *data, void *p)
{
    LC_UNUSED(data);
    LC_UNUSED(p);
}

void lc_arena_pb_allocator(lc_arena_t *a, ProtobufCAllocator *out)
{
    out->alloc = arena_pb_alloc;
    out->free = arena_pb_free;
    out->allocator_data = a;
}

/* ---------------------------------------------------------------- buffer */

void lc_buf_init(lc_buf_t *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void lc_buf_fini(lc_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void lc_buf_reset(lc_buf_t *b)
{
    b->len = 0;
}

int lc_buf_reserve(lc_buf_t *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return LC_ETOOBIG;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    size_t c = b->cap ? b->cap : 256;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    b->data = lc_xrealloc(b->data, c);
    b->cap = c;
    return 0;
}

int lc_buf_append(lc_buf_t *b, const void *p, size_t n)
{
    int rc = lc_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int lc_buf_puts(lc_buf_t *b, const char *s)
{
    return lc_buf_append(b, s, strlen(s));
}

int lc_buf_putc(lc_buf_t *b, char c)
{
    return lc_buf_append(b, &c, 1);
}

int lc_buf_printf(lc_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return LC_EINPUT;
    int rc = lc_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int lc_buf_put_uvarint(lc_buf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    return lc_buf_append(b, tmp, lc_uvarint_put(tmp, v));
}

uint8_t *lc_buf_steal(lc_buf_t *b, size_t *len)
{
    uint8_t *d = b->data ? b->data : lc_xmalloc(1);
    *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

size_t lc_uvarint_put(uint8_t *dst, uint64_t v)
{
    size_t i = 0;
    while (v >= 0x80) {
        dst[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[i++] = (uint8_t)v;
    return i;
}

int lc_uvarint_get(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *s = *p;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (s >= end)
            return LC_ECORRUPT;
        uint8_t c = *s++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *p = s;
            *out = v;
            return 0;
        }
    }
    return LC_ECORRUPT;
}
