/*
 * attime.c — Graphite-style times for /ingest and /pyroscope/render*
 * (pyroscope-api.md §7.6), reproduced quirk for quirk because SDKs and
 * Grafana's apps rely on it:
 *  - '_', ',' and ' ' are removed first;
 *  - all digits: a valid YYYYMMDD (year > 1900) is midnight UTC; otherwise the
 *    digit count picks the unit: 13 ms, 16 µs, 19 ns, anything else seconds;
 *  - otherwise `<ref><offset>`: the ref is always "now"; the offset is a sign,
 *    a number and a unit named by its prefix; only the first pair counts,
 *    because the unit runs to the end of the string (`now-3h30m` = now-3h),
 *    and `ms` means minutes. Anything unparseable is "now".
 * Arithmetic saturates instead of overflowing.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "lc/attime.h"
#include "lc/err.h"

#define NS_PER_S 1000000000LL

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b < 0 ? INT64_MIN : INT64_MAX;
    return r;
}

/* Decimal digits to int64, saturating like Go's strconv on range errors. */
static int64_t digits_value(const char *s, size_t n)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = sat_add(sat_mul(v, 10), s[i] - '0');
    return v;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    return n > 0;
}

static bool leap_year(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* YYYYMMDD with a real calendar date and year > 1900 -> seconds; else false. */
static bool parse_date(const char *s, int64_t *secs)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y = (int)digits_value(s, 4), m = (int)digits_value(s + 4, 2),
        d = (int)digits_value(s + 6, 2);
    if (y <= 1900 || m < 1 || m > 12 || d < 1)
        return false;
    if (d > mdays[m - 1] + (m == 2 && leap_year(y)))
        return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d};
    *secs = (int64_t)timegm(&tm);
    return true;
}

static int64_t parse_unix(const char *s, size_t n)
{
    int64_t secs, v = digits_value(s, n);
    if (n == 8 && parse_date(s, &secs))
        return sat_mul(secs, NS_PER_S);
    switch (n) {
    case 13:
        return sat_mul(v, 1000000);
    case 16:
        return sat_mul(v, 1000);
    case 19:
        return v;
    default:
        return sat_mul(v, NS_PER_S);
    }
}

static int64_t unit_seconds(const char *u)
{
    static const struct {
        const char *prefix;
        int64_t secs;
    } units[] = {
        {"s", 1},    {"mon", 30 * 86400}, {"M", 30 * 86400}, {"min", 60},        {"m", 60},
        {"h", 3600}, {"d", 86400},        {"w", 7 * 86400},  {"y", 365 * 86400},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(units); i++) {
        if (strncmp(u, units[i].prefix, strlen(units[i].prefix)) == 0)
            return units[i].secs;
    }
    return 0;
}

/* "[+|-]<n><unit...>" -> nanoseconds. */
static int64_t parse_offset(const char *o)
{
    int64_t sign = 1;
    if (*o == '-' || *o == '+')
        sign = *o++ == '-' ? -1 : 1;
    size_t n = strspn(o, "0123456789");
    int64_t num = digits_value(o, n);
    return sat_mul(sat_mul(sat_mul(num, sign), unit_seconds(o + n)), NS_PER_S);
}

int64_t lc_attime_parse(const char *s, int64_t now_ns)
{
    char buf[LC_ATTIME_MAX_LEN + 1];
    size_t n = 0;
    for (; s && *s && n < LC_ATTIME_MAX_LEN; s++) {
        if (*s != '_' && *s != ',' && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            buf[n++] = *s;
    }
    buf[n] = 0;
    if (all_digits(buf, n))
        return parse_unix(buf, n);
    const char *off = strchr(buf, '+');
    if (!off)
        off = strchr(buf, '-');
    return off ? sat_add(now_ns, parse_offset(off)) : now_ns;
}
