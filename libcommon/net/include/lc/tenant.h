/*
 * lc/tenant.h — which tenant(s) a request acts for (pyroscope-api.md §9).
 *
 * Multitenancy off: always "anonymous", X-Scope-OrgID ignored. On: the
 * X-Scope-OrgID header is required (401 unauthenticated otherwise); reads may
 * name several tenants as "a|b" (de-duplicated, sorted); writes take exactly
 * one. Tenant ids are 1..150 bytes of [a-zA-Z0-9!-_.*'()] like Pyroscope's.
 * With --auth.tokens-file (lc/auth.h) both also check the request's
 * credential against the tenants and the scope (read / write): 401 / 403.
 * Threading: pure; results live in req->arena.
 */
#ifndef LC_TENANT_H
#define LC_TENANT_H

#include <stdbool.h>
#include <stddef.h>

#include "lc/err.h"
#include "lc/httpd.h"

#define LC_TENANT_DEFAULT "anonymous"

/* For reads: one or more tenants. */
int lc_tenants_read(lc_http_req_t *req, bool multitenancy, const char *const **tenants, size_t *n,
                    lc_status_t *st) LC_MUST_CHECK;
/* For writes: exactly one tenant. */
int lc_tenant_write(lc_http_req_t *req, bool multitenancy, const char **tenant,
                    lc_status_t *st) LC_MUST_CHECK;

#endif
