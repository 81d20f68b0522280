/*
 * lc/base64.h — base64 decoding: standard or URL-safe alphabet, padded or
 * not (protobuf JSON accepts both; HTTP2-Settings is URL-safe, unpadded).
 * Pure; any thread.
 */
#ifndef LC_BASE64_H
#define LC_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes len characters of in into out, which holds at least len * 3 / 4
 * bytes. Returns the decoded length, or -1 if malformed. */
ptrdiff_t lc_base64_decode(const char *in, size_t len, uint8_t *out);

#endif
