/*
 * base64.c — base64 decoding for every reader of base64 text (protobuf JSON
 * bytes fields, HTTP2-Settings): standard or URL-safe alphabet, padded or not.
 */
#include "lc/base64.h"

/* Value of one base64 digit in either alphabet, or -1. */
static int base64_digit(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Decodes standard or URL-safe base64, padded or not, into out (which holds at
 * least len * 3 / 4 bytes). Returns the decoded length, or -1 if malformed. */
ptrdiff_t lc_base64_decode(const char *in, size_t len, uint8_t *out)
{
    size_t pad = 0;
    while (len > 0 && in[len - 1] == '=' && pad < 2) {
        len--;
        pad++;
    }
    /* Padding, when present, must complete the last quantum exactly. */
    if (len % 4 == 1 || (pad && (len + pad) % 4 != 0))
        return -1;
    uint32_t acc = 0;
    size_t bits = 0, n = 0;
    for (size_t i = 0; i < len; i++) {
        int d = base64_digit((unsigned char)in[i]);
        if (d < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (ptrdiff_t)n;
}
