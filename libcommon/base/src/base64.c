/*
 * base64.c — lc/base64.h's encoder.
 */
#include "lc/base64.h"

int lc_base64_encode(const uint8_t *in, size_t len, lc_buf_t *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
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
