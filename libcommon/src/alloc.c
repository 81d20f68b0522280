/*
 * alloc.c — the only place that calls malloc. Arenas are chained blocks; the cap
 * counts every byte handed out so a request cannot exceed its budget.
 */
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

char *lc_xstrdup(const char *s) { return lc_xstrndup(s, strlen(s)); }

char *lc_xstrndup(const char *s, size_t n)
{
    char *d = lc_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void lc_free(void *p) { free(p); }

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
        free(b);
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
        size_t sz = n > ARENA_BLOCK_MIN ? n : ARENA_BLOCK_MIN;
        if (b && b->size * 2 > sz && b->size < (4u << 20))
            sz = b->size * 2;  /* grow geometrically up to 4 MiB blocks */
        b = lc_xmalloc(sizeof(*b) + sz);
        b->size = sz;
        b->used = 0;
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

char *lc_arena_strdup(lc_arena_t *a, const char *s) { return lc_arena_strndup(a, s, strlen(s)); }

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

size_t lc_arena_used(const lc_arena_t *a) { return a->used_bytes; }

static void *arena_pb_alloc(void *data, size_t size) { return lc_arena_alloc(data, size); }
static void arena_pb_free(void *data, void *p) { LC_UNUSED(data); LC_UNUSED(p); }

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

void lc_buf_reset(lc_buf_t *b) { b->len = 0; }

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

int lc_buf_puts(lc_buf_t *b, const char *s) { return lc_buf_append(b, s, strlen(s)); }

int lc_buf_putc(lc_buf_t *b, char c) { return lc_buf_append(b, &c, 1); }

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
