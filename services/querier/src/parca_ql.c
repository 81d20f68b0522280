/*
 * parca_ql.c — Parca's query strings (parca.md §3) as Pyroscope's profile
 * type id plus label selector, and back.
 *
 * A Parca query is a PromQL metric selector whose metric name is the profile
 * type: `process_cpu:samples:count:cpu:nanoseconds:delta{job="api"}`. The
 * name part must have 5 or 6 ':'-separated parts, the 6th being "delta".
 * Pyroscope's id is the same 5 parts (it ignores `:delta` too), so the
 * mapping is the name without `:delta`; the braces go to the selector parser
 * of the back end as they are. One difference stays: Parca's regex matchers
 * are unanchored, ember's (as Pyroscope's and Prometheus's) are anchored.
 */
#include <string.h>

#include "parca_int.h"

static char *span_dup(lc_arena_t *a, const char *s, size_t n)
{
    return lc_arena_strndup(a, s, n);
}

/* Splits the type name into its parts; -1 unless 5 parts, or 6 with "delta". */
static bool type_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == ':' || c == '.' || c == '-';
}

static int split_type(const char *name, size_t len, lc_arena_t *a, parca_query_t *out)
{
    for (size_t i = 0; i < len; i++)
        if (!type_char_ok(name[i]))
            return -1;
    const char *parts[6];
    size_t lens[6], n = 0;
    const char *p = name, *end = name + len;
    while (n < 6) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        const char *stop = colon ? colon : end;
        parts[n] = p;
        lens[n++] = (size_t)(stop - p);
        if (!colon)
            break;
        p = colon + 1;
        if (n == 6)
            return -1; /* a 7th part */
    }
    if (n < 5 || (n == 6 && (lens[5] != 5 || memcmp(parts[5], "delta", 5) != 0)))
        return -1;
    for (size_t i = 0; i < 5; i++)
        if (lens[i] == 0)
            return -1;
    out->name = span_dup(a, parts[0], lens[0]);
    out->sample_type = span_dup(a, parts[1], lens[1]);
    out->sample_unit = span_dup(a, parts[2], lens[2]);
    out->period_type = span_dup(a, parts[3], lens[3]);
    out->period_unit = span_dup(a, parts[4], lens[4]);
    out->delta = n == 6;
    out->type_id = span_dup(a, name, (size_t)(parts[4] + lens[4] - name));
    return out->period_unit ? 0 : -1;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int parca_parse_query(const char *q, bool allow_no_type, lc_arena_t *a, parca_query_t *out,
                      lc_status_t *st)
{
    *out = (parca_query_t){.selector = "{}"};
    if (!q)
        q = "";
    while (is_space(*q))
        q++;
    size_t len = strlen(q);
    while (len && is_space(q[len - 1]))
        len--;
    const char *brace = memchr(q, '{', len);
    size_t name_len = brace ? (size_t)(brace - q) : len;
    while (name_len && is_space(q[name_len - 1]))
        name_len--;
    if (brace) {
        if (q[len - 1] != '}')
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "failed to parse query: selector must end with '}': \"%.200s\"",
                                 q);
        out->selector = span_dup(a, brace, (size_t)(q + len - brace));
    }
    if (name_len == 0) {
        if (allow_no_type)
            return out->selector ? 0 : qry_fail_arena(st);
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "query must contain a profile-type selection: \"%.200s\"", q);
    }
    if (split_type(q, name_len, a, out) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile-type selection must be of the form "
                             "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>"
                             "(:delta), got \"%.*s\"",
                             (int)(name_len > 200 ? 200 : name_len), q);
    return out->selector ? 0 : qry_fail_arena(st);
}

bool parca_type_is_delta(const char *name, const char *period_type)
{
    return strcmp(period_type, "cpu") == 0 || strcmp(period_type, "wall") == 0 ||
           strcmp(name, "process_cpu") == 0 || strcmp(name, "wall") == 0 ||
           strcmp(name, "fgprof") == 0;
}

const char *parca_selector_with_type(const char *type_id, const char *selector, lc_arena_t *a)
{
    if (!type_id)
        return selector;
    /* the selector's inside, without its braces */
    const char *inner = selector ? selector + 1 : "";
    size_t n = selector ? strlen(selector) - 2 : 0;
    while (n && is_space(*inner)) {
        inner++;
        n--;
    }
    return lc_arena_sprintf(a, "{__profile_type__=\"%s\"%s%.*s}", type_id, n ? ", " : "", (int)n,
                            inner);
}
