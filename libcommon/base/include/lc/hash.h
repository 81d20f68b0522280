/*
 * lc/hash.h — the non-cryptographic hashing every hash table of ember uses.
 * Threading: pure functions.
 */
#ifndef LC_HASH_H
#define LC_HASH_H

#include <stdint.h>

/* The 64-bit finaliser of MurmurHash3 (public domain): spreads every input
 * bit over the low bits that select a bucket. */
static inline uint64_t lc_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The value of one hexadecimal digit, or -1. */
static inline int lc_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
