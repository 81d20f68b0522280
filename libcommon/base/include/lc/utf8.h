/*
 * lc/utf8.h — UTF-8 validation as Go's unicode/utf8 judges it (the peers'
 * rule): no overlong forms, no surrogates, nothing past U+10FFFF.
 * Threading: pure functions.
 */
#ifndef LC_UTF8_H
#define LC_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid sequence at s, of at most avail bytes, or 0 if
 * none starts there. *cp (may be NULL) gets the code point. */
size_t lc_utf8_decode(const uint8_t *s, size_t avail, uint32_t *cp);

/* len bytes of s are valid UTF-8 (NUL bytes included as U+0000). */
bool lc_utf8_valid(const char *s, size_t len);

/* A NUL-terminated string is valid UTF-8. */
bool lc_utf8_valid_str(const char *s);

/* Makes a NUL-terminated string valid UTF-8 in place: every byte that does not
 * start a valid sequence becomes '?' (so "\xed\xa0\x80", a surrogate, is "???"). */
void lc_utf8_sanitize(char *s);

#endif
