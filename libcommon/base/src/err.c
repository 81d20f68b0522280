/*
 * err.c — error names and the Connect code tables (pyroscope-api.md §6.2, §2.11).
 */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "lc/err.h"

const char *lc_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case LC_EINPUT:
        return "malformed input";
    case LC_ETOOBIG:
        return "size limit exceeded";
    case LC_ECORRUPT:
        return "corrupt data";
    case LC_ENOTFOUND:
        return "not found";
    case LC_EUNSUPPORTED:
        return "unsupported";
    case LC_ETIMEOUT:
        return "timed out";
    case LC_ESTORE:
        return "storage error";
    case LC_ECLOSED:
        return "closed";
    case LC_EFULL:
        return "queue full";
    case LC_EREGEX:
        return "regular expression match exceeded its limits";
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return uv_strerror(err);
    return "unknown error";
}

static const char *const code_names[] = {
    "ok",
    "canceled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
};

static const int code_http[] = {
    200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
};

const char *lc_code_name(lc_code_t code)
{
    if ((unsigned)code >= LC_ARRAY_LEN(code_names))
        return "unknown";
    return code_names[code];
}

int lc_code_from_name(const char *name)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(code_names); i++)
        if (strcmp(code_names[i], name) == 0)
            return (int)i;
    return -1;
}

int lc_code_http(lc_code_t code)
{
    if ((unsigned)code >= LC_ARRAY_LEN(code_http))
        return 500;
    return code_http[code];
}

lc_code_t lc_code_from_http(int s)
{
    switch (s) {
    case 400:
    case 413:
        return LC_CODE_INVALID_ARGUMENT;
    case 401:
        return LC_CODE_UNAUTHENTICATED;
    case 403:
        return LC_CODE_PERMISSION_DENIED;
    case 404:
    case 501:
        return LC_CODE_UNIMPLEMENTED;
    case 412:
        return LC_CODE_FAILED_PRECONDITION;
    case 429:
    case 431:
        return LC_CODE_RESOURCE_EXHAUSTED;
    case 499:
        return LC_CODE_CANCELED;
    case 502:
    case 503:
        return LC_CODE_UNAVAILABLE;
    case 504:
        return LC_CODE_DEADLINE_EXCEEDED;
    default:
        return LC_CODE_UNKNOWN;
    }
}

LC_PRINTF(4, 0)
static int status_vset(lc_status_t *st, int http, lc_code_t code, const char *fmt, va_list ap)
{
    if (!st)
        return -1;
    st->code = code;
    st->http_status = http;
    vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
    return -1;
}

int lc_status_set(lc_status_t *st, lc_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    status_vset(st, 0, code, fmt, ap);
    va_end(ap);
    return -1;
}

int lc_status_set_http(lc_status_t *st, int http_status, lc_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    status_vset(st, http_status, code, fmt, ap);
    va_end(ap);
    return -1;
}
