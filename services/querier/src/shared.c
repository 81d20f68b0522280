/*
 * shared.c — what the query front end (frontend.c, parca_*.c, legacy_*.c)
 * and the store back end (rpc_*.c) both use, so neither calls into the
 * other: the failure statuses (qry_fail, qry_fail_arena), the clock, ms to
 * ns, Go-style durations, the tenant check that comes first, and the §5.9
 * time-range rules (qry_front_range), which the front end owns and the store
 * back end applies where it opens its snapshot. No state; any thread.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lc/clock.h"
#include "lc/tenant.h"
#include "querier_int.h"

int qry_fail_arena(lc_status_t *st)
{
    return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                         "the response passes the per-request memory cap; narrow the query");
}

int qry_fail(lc_status_t *st, int rc, const char *what)
{
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "%s: the result passes ember's size caps; narrow the query", what);
    if (rc == LC_EREGEX) /* never a silent miss: say which part of the query to change */
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "%s: a regular expression in the selector needs more backtracking "
                             "than the match limit on a stored label value; simplify it",
                             what);
    return lc_status_set(st, LC_CODE_INTERNAL, "%s: %s", what, lc_strerror(rc));
}

int64_t qry_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ms -> ns, saturating at the int64 range; `last` picks the last ns of the ms. */
static int64_t ms_to_ns(int64_t ms, bool last)
{
    int64_t ns = lc_ms_to_ns(ms);
    if (ns == INT64_MAX || ns == INT64_MIN)
        return ns;
    return last && ns <= INT64_MAX - 999999 ? ns + 999999 : ns;
}

void qry_range_ns(int64_t start_ms, int64_t end_ms, int64_t *start_ns, int64_t *end_ns)
{
    *start_ns = ms_to_ns(start_ms, false);
    *end_ns = ms_to_ns(end_ms, true);
}

/* A duration as Go prints one (25h0m0s, 1m30s, 1.5s, 250ms), so the message
 * reads like Pyroscope's. */
void qry_format_duration(int64_t ms, char *out, size_t size)
{
    if (ms < 1000) {
        snprintf(out, size, ms == 0 ? "0s" : "%lldms", (long long)ms);
        return;
    }
    long long h = ms / 3600000, m = ms / 60000 % 60, sec = ms / 1000 % 60, frac = ms % 1000;
    char frac_text[8] = "";
    if (frac) {
        snprintf(frac_text, sizeof(frac_text), ".%03lld", frac);
        for (size_t n = strlen(frac_text); frac_text[n - 1] == '0'; n--)
            frac_text[n - 1] = '\0';
    }
    if (h)
        snprintf(out, size, "%lldh%lldm%lld%ss", h, m, sec, frac_text);
    else if (m)
        snprintf(out, size, "%lldm%lld%ss", m, sec, frac_text);
    else
        snprintf(out, size, "%lld%ss", sec, frac_text);
}

int qry_tenant_first(lc_http_req_t *req, bool multitenancy, lc_status_t *st)
{
    const char *const *tenants;
    size_t n;
    return lc_tenants_read(req, multitenancy, &tenants, &n, st);
}

/* ------------------------------------------------------ time-range rules */

/* The §5.9 rules in Pyroscope's order: clip to the look-back first, then
 * check the length of what is left. A range wholly before the look-back
 * sets *empty. */
static int apply_range_rules(const qry_opts_t *o, int64_t *start_ms, int64_t end_ms, bool *empty,
                             lc_status_t *st)
{
    if (o->max_query_lookback_ms > 0) {
        int64_t now = qry_now_ms();
        int64_t min_start =
            now > INT64_MIN + o->max_query_lookback_ms ? now - o->max_query_lookback_ms : INT64_MIN;
        if (end_ms < min_start) {
            *empty = true;
            return 0;
        }
        if (*start_ms < min_start)
            *start_ms = min_start;
    }
    __int128 len = (__int128)end_ms - *start_ms;
    if (o->max_query_length_ms > 0 && len > o->max_query_length_ms) {
        char actual[64], limit[64];
        qry_format_duration(len > INT64_MAX ? INT64_MAX : (int64_t)len, actual, sizeof(actual));
        qry_format_duration(o->max_query_length_ms, limit, sizeof(limit));
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the query time range exceeds the limit (max_query_length, actual: "
                             "%s, limit: %s); query a shorter range",
                             actual, limit);
    }
    return 0;
}

int qry_front_range(const qry_front_t *fe, int64_t *start_ms, int64_t end_ms,
                    qry_range_rules_t rules, bool *empty, lc_status_t *st)
{
    *empty = false;
    if (*start_ms > end_ms)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "start (%lld) must not be after end (%lld)", (long long)*start_ms,
                             (long long)end_ms);
    if (rules == QRY_RANGE_RULES && apply_range_rules(&fe->opts, start_ms, end_ms, empty, st))
        return -1;
    return 0;
}
