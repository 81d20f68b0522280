/*
 * symbols.c — symbols_int.h: the debug-file store and the symbolizer of an
 * ingester node, from its settings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/log.h"
#include "symbols_int.h"

#define NS_PER_MS 1000000LL
/* Answers (build id, offset) kept in memory. */
#define SYMBOLIZER_MAX_ANSWERS 1000000

/* --symbolizer.debuginfod-urls, else $DEBUGINFOD_URLS; "none" turns both off. */
static const char *debuginfod_urls(const ember_settings_t *s)
{
    const char *urls =
        s->debuginfod_urls && *s->debuginfod_urls ? s->debuginfod_urls : getenv("DEBUGINFOD_URLS");
    if (!urls || strcmp(urls, "none") == 0)
        return "";
    return urls;
}

/* The local files: the uploads, or with a bucket the copies of its files
 * (apart, so uploads made before a backend was set are never taken for
 * copies of files the bucket lacks, and removed). */
static int open_files(const ember_settings_t *s, ing_symbols_t *y, bool bucket)
{
    char dir[LC_DEBUGINFO_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", s->data_dir,
             bucket ? "debuginfo-bucket-copies" : "debuginfo");
    lc_debuginfo_limits_t lim = {
        .max_file_bytes = (uint64_t)s->debuginfo_max_file_bytes,
        .max_tenant_bytes = (uint64_t)s->debuginfo_max_tenant_bytes,
        .max_inflated_bytes = (uint64_t)s->debuginfo_max_inflated_bytes,
    };
    return lc_debuginfo_open(dir, &lim, &y->files);
}

static int open_symbolizer(const ember_settings_t *s, ing_symbols_t *y)
{
    char cache[LC_DEBUGINFO_PATH_MAX];
    snprintf(cache, sizeof(cache), "%s/debuginfod-cache", s->data_dir);
    lc_symbolizer_opts_t o = {
        .files = y->bucket ? NULL : y->files, /* copies are only good while the bucket has them */
        .find_upload = y->bucket ? ing_dbucket_find : NULL,
        .find_upload_data = y->bucket,
        .debuginfod_urls = debuginfod_urls(s),
        .cache_dir = cache,
        .cache_max_bytes = (uint64_t)s->symbolizer_cache_bytes,
        .fetch_timeout_ms = (uint64_t)(s->debuginfod_timeout_ns / NS_PER_MS),
        .wait_ms = (uint64_t)(s->symbolizer_wait_ns / NS_PER_MS),
        .negative_ttl_ms = (uint64_t)(s->symbolizer_negative_ttl_ns / NS_PER_MS),
        .max_cached_addresses = SYMBOLIZER_MAX_ANSWERS,
    };
    int rc = lc_symbolizer_new(&o, &y->sym);
    if (rc == 0)
        LC_LOG_INFO("symbolizer debuginfod=\"%s\" cache=%s", o.debuginfod_urls, cache);
    return rc;
}

static int open_bucket(const ember_settings_t *s, const lc_objstore_opts_t *os, ing_symbols_t *y)
{
    ing_dbucket_opts_t o = {.store = os,
                            .cache = y->files,
                            .max_tenant_bytes = (uint64_t)s->debuginfo_max_tenant_bytes,
                            .recheck_ns = (uint64_t)s->symbolizer_negative_ttl_ns};
    int rc = ing_dbucket_open(&o, &y->bucket);
    if (rc)
        LC_LOG_ERROR("debuginfo: cannot open the object store err=\"%s\"", lc_strerror(rc));
    return rc;
}

int ing_symbols_start(const ember_settings_t *s, lc_httpd_t *srv, lc_store_t *store,
                      ing_symbols_t **out)
{
    ing_symbols_t *y = lc_xcalloc(1, sizeof(*y));
    y->multitenancy = s->multitenancy;
    *out = y;
    lc_objstore_opts_t os;
    ember_objstore_opts(s, &os);
    bool bucket = os.backend != LC_OBJSTORE_NONE;
    int rc = open_files(s, y, bucket);
    if (!rc && bucket)
        rc = open_bucket(s, &os, y);
    if (!rc)
        rc = open_symbolizer(s, y);
    if (!rc)
        rc = ing_debuginfo_routes(y, srv);
    if (!rc)
        lc_store_set_symbolizer(store, y->sym);
    return rc;
}

void ing_symbols_free(ing_symbols_t *y)
{
    if (!y)
        return;
    lc_symbolizer_free(y->sym);
    ing_dbucket_close(y->bucket);
    lc_debuginfo_close(y->files);
    lc_free(y);
}
