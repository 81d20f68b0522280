/*
 * lc/hash.h — the non-cryptographic hashing every hash table of ember uses.
 * Threading: pure functions.
 */
#ifndef LC_HASH_H
#define LC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define LC_FNV64_OFFSET 0xcbf29ce484222325ULL
#define LC_FNV64_PRIME 0x100000001b3ULL

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

/* The 128-bit product of a and b folded to 64 bits (low half xor high half):
 * one multiply mixes two 64-bit inputs, where lc_mix64 takes two multiplies
 * for one. A zero operand zeroes the result: a chain of it must keep each
 * operand out of the input's reach (see store_stacks.c's stack keys). */
static inline uint64_t lc_mum64(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* FNV-1a over len bytes, continuing from h (LC_FNV64_OFFSET to begin):
 * for keys hashed in pieces. Its low bits are weak; finish with lc_mix64
 * when they select a bucket. */
static inline uint64_t lc_fnv1a64(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * LC_FNV64_PRIME;
    return h;
}

/* The 64-bit hash used across ember: FNV-1a seeded and finished with the
 * mixer. Its values are stored (series fingerprints, symbol keys): never
 * change them. */
static inline uint64_t lc_hash64(const void *p, size_t len, uint64_t seed)
{
    return lc_mix64(lc_fnv1a64(LC_FNV64_OFFSET ^ lc_mix64(seed), p, len) ^ len);
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
