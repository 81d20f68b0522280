/*
 * lc/md5.h — the MD5 digest (RFC 1321). Not for security: the scraper's
 * hashmod relabelling needs exactly Prometheus's hash of a label value.
 * Threading: a pure function.
 */
#ifndef LC_MD5_H
#define LC_MD5_H

#include <stddef.h>
#include <stdint.h>

#define LC_MD5_BYTES 16

/* The digest of len bytes at data. */
void lc_md5(const void *data, size_t len, uint8_t digest[LC_MD5_BYTES]);

#endif
