/*
 * promname.c — Prometheus metric and label name syntax (lc/promname.h).
 */
#include "lc/promname.h"

static bool is_ascii_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_ascii_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Checks the length bound and that every byte is a letter, '_', a digit
 * (not first) or, when colons are allowed (metric names), ':'. */
static bool name_valid(const char *name, size_t len, bool colons_allowed)
{
    if (name == NULL || len == 0 || len > LC_PROMNAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = is_ascii_letter(c) || c == '_' || (colons_allowed && c == ':') ||
                  (i > 0 && is_ascii_digit(c));
        if (!ok)
            return false;
    }
    return true;
}

bool lc_promname_metric_valid(const char *name, size_t len)
{
    return name_valid(name, len, true);
}

bool lc_promname_label_valid(const char *name, size_t len)
{
    if (!name_valid(name, len, false))
        return false;
    return !(len >= 2 && name[0] == '_' && name[1] == '_');
}
