/*
 * lc/base64.h — standard base64 (RFC 4648 §4), the one alphabet table of
 * ember: gRPC-Web text bodies (lc/grpc.h), proto3 JSON bytes (lc/pbjson.h)
 * and Basic auth (lc/auth.h) all read and write through it; each keeps its
 * own rules on padding. Threading: pure functions.
 */
#ifndef LC_BASE64_H
#define LC_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"

/* Value of one base64 digit, or -1; url_too also accepts the URL-safe
 * alphabet's '-' (62) and '_' (63). */
static inline int lc_base64_digit(int c, bool url_too)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || (url_too && c == '-'))
        return 62;
    if (c == '/' || (url_too && c == '_'))
        return 63;
    return -1;
}

/* Appends the padded standard base64 of in to out. */
int lc_base64_encode(const uint8_t *in, size_t len, lc_buf_t *out) LC_MUST_CHECK;
/* Decodes padded standard base64 (len a multiple of 4, '=' only as the last
 * one or two characters; no whitespace) into out, which holds len / 4 * 3
 * bytes. Returns the decoded length, or -1 when in is not that. */
ptrdiff_t lc_base64_decode_padded(const char *in, size_t len, uint8_t *out);

#endif
