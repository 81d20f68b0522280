/*
 * lc/auth.h — optional authentication that binds a credential to tenants
 * (--auth.tokens-file). Off until lc_auth_init is given a file; then every
 * request that resolves a tenant (lc/tenant.h, which calls lc_auth_check)
 * must carry `Authorization: Bearer <token>` or `Authorization: Basic ...`
 * of a credential in the file, and may only name tenants that credential
 * holds, with the scope (read / write) the route needs: 401 without a valid
 * credential, 403 for a tenant or scope it lacks.
 *
 * The file holds hashes, never secrets, one credential per line:
 *
 *   # kind  name-or-hash                     tenants         scope
 *   token  sha256:<64 hex of the token>      tenants=a,b     scope=read,write
 *   basic  alice sha256:<64 hex of password> tenants=a       scope=read
 *
 * `tenants=*` allows any tenant. Without multitenancy the only tenant is
 * "anonymous", which the credential must hold (or *).
 *
 * Secrets are compared as SHA-256 digests, against every entry, with a
 * constant-time compare: the time a wrong token takes does not depend on how
 * much of it matches. SHA-256 is our own small implementation (lc_sha256):
 * ember links no crypto library, and a digest is all we need.
 *
 * Threading: the table is process-wide, read under a rwlock by any thread;
 * lc_auth_reload (SIGHUP, on the loop) swaps it whole. A reload that fails
 * keeps the table that was loaded before and logs why.
 */
#ifndef LC_AUTH_H
#define LC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"
#include "lc/httpd.h"

typedef struct uv_loop_s uv_loop_t;

#define LC_SHA256_BYTES 32

void lc_sha256(const void *data, size_t len, uint8_t out[LC_SHA256_BYTES]);

/* Loads path ("" or NULL: auth stays off) and, with a loop, reloads it on
 * SIGHUP. Returns LC_EINPUT (logged with the line) on a bad file. */
int lc_auth_init(uv_loop_t *loop, const char *path) LC_MUST_CHECK;
/* Re-reads the file given to lc_auth_init. */
int lc_auth_reload(void) LC_MUST_CHECK;
/* Loads a table from text (tests; lc_auth_init uses it too). */
int lc_auth_load_text(const char *text, lc_status_t *st) LC_MUST_CHECK;
/* Turns auth off and frees the table (tests, shutdown). */
void lc_auth_reset(void);
bool lc_auth_enabled(void);

/* May this request act for these tenants with this scope? 0, or st set to
 * UNAUTHENTICATED (401) / PERMISSION_DENIED (403) and -1. No-op when off. */
int lc_auth_check(lc_http_req_t *req, bool write, const char *const *tenants, size_t n,
                  lc_status_t *st) LC_MUST_CHECK;

/* The server's guard (lc_httpd_opts_t.guard): a credential with the route's
 * scope, whatever the tenant (the handler checks tenants as it resolves
 * them). Public routes and auth off always pass. */
int lc_auth_guard(lc_http_req_t *req, lc_http_scope_t scope, lc_status_t *st) LC_MUST_CHECK;

#endif
