/*
 * base64.c — lc/base64.h's encoder and strict padded decoder.
 */
#include <string.h>

#include "lc/base64.h"

int lc_base64_encode(const uint8_t *in, size_t len, lc_buf_t *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len == 0)
        return 0; /* nothing to write, and out may have no buffer yet */
    int rc = lc_buf_reserve(out, (len + 2) / 3 * 4);
    if (rc)
        return rc;
    char *w = (char *)out->data + out->len;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        *w++ = alphabet[v >> 18];
        *w++ = alphabet[(v >> 12) & 63];
        *w++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *w++ = i + 2 < len ? alphabet[v & 63] : '=';
    }
    out->len = (size_t)(w - (char *)out->data);
    return 0;
}

/* One group of four characters into dst; the bytes written, or -1. Only the
 * input's last group (last) may end in one or two '='. */
static int decode_group(const char *g, bool last, uint8_t dst[3])
{
    int pad = g[3] == '=' ? (g[2] == '=' ? 2 : 1) : 0;
    if (pad && !last)
        return -1;
    uint32_t bits = 0;
    for (int k = 0; k < 4 - pad; k++) {
        int v = lc_base64_digit((unsigned char)g[k], false);
        if (v < 0)
            return -1;
        bits |= (uint32_t)v << (18 - 6 * k);
    }
    dst[0] = (uint8_t)(bits >> 16);
    dst[1] = (uint8_t)(bits >> 8);
    dst[2] = (uint8_t)bits;
    return 3 - pad;
}

ptrdiff_t lc_base64_decode_padded(const char *in, size_t len, uint8_t *out)
{
    if (len % 4)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint8_t b[3];
        int got = decode_group(in + i, i + 4 == len, b);
        if (got < 0)
            return -1;
        memcpy(out + n, b, (size_t)got);
        n += (size_t)got;
    }
    return (ptrdiff_t)n;
}
