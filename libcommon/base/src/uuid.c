/*
 * uuid.c — profile ids as text <-> 16 bytes (lc/uuid.h).
 */
#include <string.h>

#include "lc/hash.h"
#include "lc/uuid.h"

/* Whether position i of a canonical id holds a hyphen. */
static bool hyphen_at(size_t i)
{
    return i == 8 || i == 13 || i == 18 || i == 23;
}

bool lc_uuid_parse(const char *s, uint8_t out[LC_UUID_BYTES])
{
    size_t len = strnlen(s, LC_UUID_TEXT_LEN + 1);
    bool canonical = len == LC_UUID_TEXT_LEN;
    if (!canonical && len != 2 * LC_UUID_BYTES)
        return false;
    uint8_t v[LC_UUID_BYTES];
    size_t nibble = 0;
    for (size_t i = 0; i < len; i++) {
        if (canonical && hyphen_at(i)) {
            if (s[i] != '-')
                return false;
            continue;
        }
        int d = lc_hex_digit(s[i]);
        if (d < 0)
            return false;
        if (nibble % 2 == 0)
            v[nibble / 2] = (uint8_t)(d << 4);
        else
            v[nibble / 2] |= (uint8_t)d;
        nibble++;
    }
    memcpy(out, v, LC_UUID_BYTES);
    return true;
}

void lc_uuid_format(const uint8_t id[LC_UUID_BYTES], char out[LC_UUID_TEXT_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < LC_UUID_BYTES; i++) {
        if (hyphen_at(o))
            out[o++] = '-';
        out[o++] = digits[id[i] >> 4];
        out[o++] = digits[id[i] & 0xf];
    }
    out[o] = '\0';
}
