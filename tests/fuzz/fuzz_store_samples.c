/*
 * fuzz_store_samples.c — arbitrary bytes as the encoded samples of a stored
 * profile (lc_stored_profile_t._data: flags varint, then per sample a node
 * delta, a zigzag value — times the scale when flagged — and, when flagged, a
 * span id), walked with
 * lc_sample_iter_*. This is the decoder every merge runs over LMDB bytes.
 *
 * Beyond "no crash, no over-read", it checks what the iterator promises:
 * results are 1, 0 or LC_ECORRUPT; node ids never decrease; every sample
 * consumes input, so the walk ends; the end and errors are sticky; and what
 * decoded cleanly re-encodes (minimal varints) to bytes that decode to the
 * same samples.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/store.h"

#define FZ_PF_PROFILE_ID 0x2u /* STORE_PF_PROFILE_ID in store_int.h */
#define FZ_PF_SCALED 0x4u     /* STORE_PF_SCALED: a varint scale follows the id */

typedef struct fz_sample_s {
    uint32_t node;
    int64_t value;
    uint64_t span;
} fz_sample_t;

static uint64_t fz_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Decodes everything; returns the final result and the samples seen. */
static int fz_walk(const uint8_t *data, size_t size, fz_sample_t *out, size_t *n)
{
    lc_stored_profile_t p = {._data = data, ._len = size};
    lc_sample_iter_t it;
    fz_sample_t s;
    int rc;
    *n = 0;
    lc_sample_iter_init(&it, &p);
    while ((rc = lc_sample_iter_next(&it, &s.node, &s.value, &s.span)) == 1) {
        if (*n > size / 2 || (*n && s.node < out[*n - 1].node) || it.p > it.end)
            abort(); /* a sample takes >= 2 bytes; nodes ascend; never past the end */
        out[(*n)++] = s;
    }
    if (rc != 0 && rc != LC_ECORRUPT)
        abort();
    if (lc_sample_iter_next(&it, &s.node, &s.value, NULL) != rc)
        abort(); /* sticky */
    return rc;
}

/* The writer's encoding of the same samples; with the profile-id flag (0x2)
 * the 16-byte id follows the flags, then with the scaled flag (0x4) the
 * scale, and values are stored divided by it, as lc_store writes them. */
static size_t fz_encode(uint8_t *dst, uint64_t flags, const uint8_t *id, uint64_t scale,
                        const fz_sample_t *v, size_t n)
{
    size_t len = lc_uvarint_put(dst, flags);
    if (flags & FZ_PF_PROFILE_ID) {
        memcpy(dst + len, id, LC_STORE_PROFILE_ID_BYTES);
        len += LC_STORE_PROFILE_ID_BYTES;
    }
    if (flags & FZ_PF_SCALED)
        len += lc_uvarint_put(dst + len, scale);
    uint32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        len += lc_uvarint_put(dst + len, v[i].node - prev);
        len += lc_uvarint_put(dst + len, fz_zigzag(v[i].value / (int64_t)scale));
        if (flags & 1)
            len += lc_uvarint_put(dst + len, v[i].span);
        prev = v[i].node;
    }
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n, n2;
    fz_sample_t *a = lc_xcalloc(size / 2 + 2, sizeof(*a));
    fz_sample_t *b = lc_xcalloc(size / 2 + 2, sizeof(*b));
    if (fz_walk(data, size, a, &n) == 0) {
        uint8_t *enc = lc_xmalloc(10 + LC_STORE_PROFILE_ID_BYTES + n * 30);
        const uint8_t *p = data;
        uint64_t flags;
        if (lc_uvarint_get(&p, data + size, &flags) != 0)
            abort();           /* the walk succeeded, so the flags decoded */
        const uint8_t *id = p; /* just past the flags */
        uint64_t scale = 1;
        const uint8_t *q = p + ((flags & FZ_PF_PROFILE_ID) ? LC_STORE_PROFILE_ID_BYTES : 0);
        if ((flags & FZ_PF_SCALED) && lc_uvarint_get(&q, data + size, &scale) != 0)
            abort(); /* the walk succeeded, so the scale decoded */
        size_t len = fz_encode(enc, flags, id, scale, a, n);
        if (len > size || fz_walk(enc, len, b, &n2) != 0 || n2 != n ||
            (n && memcmp(a, b, n * sizeof(*a)) != 0))
            abort();
        lc_free(enc);
    }
    lc_free(a);
    lc_free(b);
    return 0;
}
