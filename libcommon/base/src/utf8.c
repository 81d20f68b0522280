/*
 * utf8.c — UTF-8 validation and repair (lc/utf8.h).
 */
#include <string.h>

#include "lc/utf8.h"

size_t lc_utf8_decode(const uint8_t *s, size_t avail, uint32_t *cp)
{
    if (avail == 0)
        return 0;
    uint8_t c = s[0];
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (c < 0xc2 || c > 0xf4 || avail < n)
        return 0;
    uint32_t v = c & (0x7f >> n);
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[k] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[n] || v > 0x10ffff || (v >= 0xd800 && v < 0xe000))
        return 0;
    if (cp)
        *cp = v;
    return n;
}

bool lc_utf8_valid(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        /* Symbol names are nearly all ASCII: eight such bytes at a time (every
         * profile's strings are checked at ingest). */
        uint64_t w;
        while (len - i >= 8 && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ULL) == 0))
            i += 8;
        if (i == len)
            break;
        size_t n = lc_utf8_decode(p + i, len - i, NULL);
        if (!n)
            return false;
        i += n;
    }
    return true;
}

bool lc_utf8_valid_str(const char *s)
{
    return lc_utf8_valid(s, strlen(s));
}

void lc_utf8_sanitize(char *s)
{
    uint8_t *p = (uint8_t *)s;
    size_t left = strlen(s);
    while (left) {
        size_t n = lc_utf8_decode(p, left, NULL);
        if (!n) {
            *p = '?';
            n = 1;
        }
        p += n;
        left -= n;
    }
}
