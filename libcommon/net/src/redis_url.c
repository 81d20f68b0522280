/*
 * redis_url.c — parses redis://[[user]:password@]host[:port][/db].
 *
 * Kept apart from the connection so config validation can use it without a
 * loop. User and password may be percent-encoded (a password holding '@' or
 * '/' must be); a lone userinfo token without ':' is taken as the password,
 * since AUTH with a user and no password means nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/hash.h"
#include "lc/redis.h"

#define REDIS_URL_SCHEME "redis://"
#define REDIS_DEFAULT_PORT 6379
#define REDIS_MAX_DB 1000000

/* Copies [s, s+n) into out (cap bytes with the NUL), undoing %XX escapes. */
static int url_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return LC_EINPUT;
            int hi = lc_hex_digit(s[i + 1]), lo = lc_hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0)
                return LC_EINPUT;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (c == '\0' || o + 1 >= cap)
            return LC_EINPUT;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int parse_userinfo(const char *s, size_t n, lc_redis_url_t *out)
{
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return url_decode(s, n, out->password, sizeof(out->password));
    int rc = url_decode(s, (size_t)(colon - s), out->user, sizeof(out->user));
    if (rc == 0)
        rc = url_decode(colon + 1, n - (size_t)(colon - s) - 1, out->password,
                        sizeof(out->password));
    return rc;
}

/* Parses a decimal in [lo, hi] filling exactly [s, s+n). */
static int parse_number(const char *s, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 9)
        return LC_EINPUT;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return LC_EINPUT;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return LC_EINPUT;
    *out = v;
    return 0;
}

static int copy_host(const char *s, size_t n, lc_redis_url_t *out)
{
    if (n == 0 || n >= sizeof(out->host))
        return LC_EINPUT;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '@' || s[i] == '[' || s[i] == ']' || s[i] == '%' || s[i] <= ' ')
            return LC_EINPUT;
    memcpy(out->host, s, n);
    out->host[n] = '\0';
    return 0;
}

/* host, [v6] host, each with an optional :port. */
static int parse_hostport(const char *s, size_t n, lc_redis_url_t *out)
{
    const char *end = s + n, *port = NULL;
    int rc;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || (close + 1 != end && close[1] != ':') || !memchr(s, ':', (size_t)(close - s)))
            return LC_EINPUT;
        rc = copy_host(s + 1, (size_t)(close - s - 1), out);
        port = close + 1 < end ? close + 2 : NULL;
    } else {
        const char *colon = memchr(s, ':', n);
        rc = copy_host(s, colon ? (size_t)(colon - s) : n, out);
        port = colon ? colon + 1 : NULL;
    }
    long v = REDIS_DEFAULT_PORT;
    if (rc == 0 && port)
        rc = parse_number(port, (size_t)(end - port), 1, 65535, &v);
    out->port = (uint16_t)v;
    return rc;
}

int lc_redis_url_parse(const char *url, lc_redis_url_t *out)
{
    memset(out, 0, sizeof(*out));
    size_t scheme = strlen(REDIS_URL_SCHEME);
    if (!url || strncmp(url, REDIS_URL_SCHEME, scheme) != 0)
        return LC_EINPUT;
    const char *auth = url + scheme;
    const char *path = auth + strcspn(auth, "/?#");
    if (*path == '?' || *path == '#')
        return LC_EINPUT;
    const char *at = NULL;
    for (const char *p = auth; p < path; p++)
        if (*p == '@')
            at = p;
    int rc = at ? parse_userinfo(auth, (size_t)(at - auth), out) : 0;
    const char *host = at ? at + 1 : auth;
    if (rc == 0)
        rc = parse_hostport(host, (size_t)(path - host), out);
    long db = 0;
    if (rc == 0 && *path == '/' && path[1])
        rc = parse_number(path + 1, strlen(path + 1), 0, REDIS_MAX_DB, &db);
    out->db = (int)db;
    return rc;
}
