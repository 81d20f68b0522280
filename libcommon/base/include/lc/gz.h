/*
 * lc/gz.h — gzip helpers on zlib. Decompression always has a cap on the output
 * size (gzip bombs end with LC_ETOOBIG, never with a big allocation).
 * Pure functions; thread-safe.
 */
#ifndef LC_GZ_H
#define LC_GZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"

/* True if data starts with the gzip magic 1f 8b. */
bool lc_gz_is_gzip(const uint8_t *data, size_t len);
/* Appends the decompressed bytes of a gzip stream (members concatenated are
 * accepted) to out. LC_ETOOBIG past max_out bytes, LC_ECORRUPT on bad data. */
int lc_gunzip(const uint8_t *in, size_t len, size_t max_out, lc_buf_t *out) LC_MUST_CHECK;
/* The uncompressed size a gzip stream states for its last member (modulo 2^32):
 * exact for the usual single member under 4 GiB, but only a hint, since the
 * sender writes it. 0 when in is not gzip. */
size_t lc_gz_size_hint(const uint8_t *in, size_t len);
/* Decompresses into out[0, cap) and sets *out_len, for a caller that sized out
 * from lc_gz_size_hint. LC_ETOOBIG when the stream holds more than cap bytes
 * (possibly at exactly cap: give one byte more than expected), LC_ECORRUPT on
 * bad data. */
int lc_gunzip_into(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                   size_t *out_len) LC_MUST_CHECK;
/* Appends a gzip stream of `in` to out (level: 1 fast .. 9 small; 0 = default 6).
 * LC_ETOOBIG when it does not fit under out's cap. */
int lc_gzip(const uint8_t *in, size_t len, int level, lc_buf_t *out) LC_MUST_CHECK;
/* The level of gzip'd HTTP responses: on query results 5x cheaper than level 6
 * for ~7% more bytes, and responses are on every query's path. */
#define LC_GZIP_REPLY_LEVEL 1

#endif
