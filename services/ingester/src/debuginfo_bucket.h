/*
 * debuginfo_bucket.h — uploaded debug files in the object store of
 * --storage.backend (issue 31), so that a file any one ingester received
 * names the frames every ingester holds (other zones, other partitions):
 *
 *   debuginfo/<tenant, escaped>/<build id>.debug   (below --storage.prefix)
 *
 * The bucket is the truth: an upload is acknowledged once its object is
 * there, deleted by deleting it, listed by listing it, and each tenant's
 * objects are bounded by max_tenant_bytes (listed and summed at each put:
 * uploads are rare). Each ingester reads through a local copy (`cache`, a
 * debug-file store of its own, lc/debuginfo.h) and remembers per (tenant,
 * build id) what the bucket said for recheck_ns: a file nobody uploaded
 * costs one request per recheck, not one per query, and a file deleted
 * through another ingester stops naming frames here within recheck_ns (its
 * copy is removed when the bucket no longer has it).
 *
 * Tenant escaping: bytes of [A-Za-z0-9.-] stay (a leading '.' does not),
 * every other byte is "_" and two hex digits, so two tenants never share a
 * key.
 *
 * Ownership: the bucket owns its object store handle; the cache is
 * borrowed and must outlive it.
 * Threading: every function may run on any thread (upload handlers on the
 * pool, ing_dbucket_find on query threads); one lock serialises the object
 * store (one handle, one transfer at a time) and the remembered answers.
 */
#ifndef EMBER_ING_DEBUGINFO_BUCKET_H
#define EMBER_ING_DEBUGINFO_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

#include "lc/debuginfo.h"
#include "lc/err.h"
#include "lc/objstore.h"

typedef struct ing_dbucket_s ing_dbucket_t;

typedef struct ing_dbucket_opts_s {
    const lc_objstore_opts_t *store; /* backend != LC_OBJSTORE_NONE */
    lc_debuginfo_t *cache;           /* this ingester's copies */
    uint64_t max_tenant_bytes;       /* a tenant's objects in the bucket */
    uint64_t recheck_ns;             /* how long an answer of the bucket is believed */
} ing_dbucket_opts_t;

int ing_dbucket_open(const ing_dbucket_opts_t *o, ing_dbucket_t **out) LC_MUST_CHECK;
void ing_dbucket_close(ing_dbucket_t *b); /* NULL-safe */

/* Stores a file the caller validated (it is in the cache already) as
 * tenant's object of build_id. Returns 0, or -1 with st: resource_exhausted
 * over the tenant's bound, invalid_argument for a tenant id too long for a
 * key, unavailable when the object store fails. */
int ing_dbucket_put(ing_dbucket_t *b, const char *tenant, const char *build_id, const uint8_t *data,
                    size_t len, lc_status_t *st) LC_MUST_CHECK;
/* 0 with *size when the bucket has it, LC_ENOTFOUND, or another error. */
int ing_dbucket_has(ing_dbucket_t *b, const char *tenant, const char *build_id,
                    uint64_t *size) LC_MUST_CHECK;
/* Removes the object and this ingester's copy. 0, or an object store error. */
int ing_dbucket_delete(ing_dbucket_t *b, const char *tenant, const char *build_id) LC_MUST_CHECK;
/* Calls fn for each of tenant's objects (mtime_ns 0: the bucket does not
 * say); stops at fn's non-zero return and returns it. */
int ing_dbucket_list(ing_dbucket_t *b, const char *tenant, lc_debuginfo_list_fn fn,
                     void *data) LC_MUST_CHECK;
/* lc_symbolizer_find_upload_fn (data: the bucket): the local copy of
 * tenant's file, fetched from the bucket when missing or when the last
 * answer is older than recheck_ns. */
bool ing_dbucket_find(void *data, const char *tenant, const char *build_id,
                      char path[LC_DEBUGINFO_PATH_MAX]);

#endif
