/*
 * tenant.c — tenant resolution from X-Scope-OrgID (pyroscope-api.md §9).
 */
#include <stdlib.h>
#include <string.h>

#include "lc/auth.h"
#include "lc/tenant.h"

#define TENANT_MAX_BYTES 150
#define TENANTS_MAX 64

static bool tenant_char_ok(char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return strchr("!-_.*'()", c) != NULL;
}

static int tenant_check(const char *t, size_t len, lc_status_t *st)
{
    if (len == 0 || len > TENANT_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "tenant id must be 1 to %d bytes",
                             TENANT_MAX_BYTES);
    if ((len == 1 && t[0] == '.') || (len == 2 && t[0] == '.' && t[1] == '.'))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "tenant id must not be '.' or '..'");
    for (size_t i = 0; i < len; i++)
        if (!tenant_char_ok(t[i]))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "tenant id has an unsupported character at byte %zu", i);
    return 0;
}

static const char *org_header(lc_http_req_t *req, lc_status_t *st)
{
    const char *h = lc_http_header(req, "x-scope-orgid");
    if (!h || !*h)
        lc_status_set(st, LC_CODE_UNAUTHENTICATED, "no org id");
    return h && *h ? h : NULL;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int lc_tenants_read(lc_http_req_t *req, bool multitenancy, const char *const **tenants, size_t *n,
                    lc_status_t *st)
{
    static const char *const anonymous[] = {LC_TENANT_DEFAULT};
    if (!multitenancy) {
        *tenants = anonymous;
        *n = 1;
        return lc_auth_check(req, false, anonymous, 1, st);
    }
    const char *h = org_header(req, st);
    if (!h)
        return -1;
    const char **list = lc_arena_calloc(req->arena, TENANTS_MAX, sizeof(*list));
    if (!list)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request too large");
    size_t count = 0;
    for (const char *p = h;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (tenant_check(p, len, st))
            return -1;
        if (count == TENANTS_MAX)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "too many tenants (max %d)",
                                 TENANTS_MAX);
        list[count++] = lc_arena_strndup(req->arena, p, len);
        if (!bar)
            break;
        p = bar + 1;
    }
    qsort(list, count, sizeof(*list), str_cmp);
    size_t uniq = 0;
    for (size_t i = 0; i < count; i++)
        if (uniq == 0 || strcmp(list[uniq - 1], list[i]) != 0)
            list[uniq++] = list[i];
    *tenants = list;
    *n = uniq;
    return lc_auth_check(req, false, list, uniq, st);
}

int lc_tenant_write(lc_http_req_t *req, bool multitenancy, const char **tenant, lc_status_t *st)
{
    if (!multitenancy) {
        *tenant = LC_TENANT_DEFAULT;
        return lc_auth_check(req, true, tenant, 1, st);
    }
    const char *h = org_header(req, st);
    if (!h)
        return -1;
    if (strchr(h, '|'))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "writes take exactly one tenant");
    if (tenant_check(h, strlen(h), st))
        return -1;
    *tenant = h;
    return lc_auth_check(req, true, tenant, 1, st);
}
