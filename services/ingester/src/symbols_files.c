/*
 * symbols_files.c — symbols_int.h: the debug files of the two upload APIs
 * (debuginfo_api.c, debuginfo_upload.c), kept in the data dir or, with an
 * object store, in the bucket through this ingester's copies. Apart from
 * symbols.c, which opens the node's symbols and registers those APIs'
 * routes, so the APIs sit between the two and nothing goes round in a
 * circle.
 */
#include "symbols_int.h"

int ing_symbols_put(ing_symbols_t *y, const char *tenant, const char *build_id, bool file_hash,
                    const uint8_t *data, size_t len, lc_status_t *st)
{
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (lc_build_id_normalize(build_id, id, st))
        return -1;
    /* validated and kept locally first: with a bucket, this ingester's copy */
    int rc = file_hash ? lc_debuginfo_put_file_hash(y->files, tenant, id, data, len, st)
                       : lc_debuginfo_put(y->files, tenant, id, data, len, st);
    if (rc == 0 && y->bucket && ing_dbucket_put(y->bucket, tenant, id, data, len, st) != 0) {
        (void)lc_debuginfo_delete(y->files, tenant, id);
        rc = -1;
    }
    return rc;
}

bool ing_symbols_has(ing_symbols_t *y, const char *tenant, const char *build_id)
{
    uint64_t size;
    if (!y->bucket)
        return lc_debuginfo_has(y->files, tenant, build_id, NULL);
    return ing_dbucket_has(y->bucket, tenant, build_id, &size) == 0;
}

int ing_symbols_delete(ing_symbols_t *y, const char *tenant, const char *build_id, lc_status_t *st)
{
    if (!y->bucket) {
        (void)lc_debuginfo_delete(y->files, tenant, build_id);
        return 0;
    }
    int rc = ing_dbucket_delete(y->bucket, tenant, build_id);
    if (rc)
        return lc_status_set(st, LC_CODE_UNAVAILABLE,
                             "the object store failed deleting the debug file: %s",
                             lc_strerror(rc));
    return 0;
}

int ing_symbols_list(ing_symbols_t *y, const char *tenant, lc_debuginfo_list_fn fn, void *data)
{
    return y->bucket ? ing_dbucket_list(y->bucket, tenant, fn, data)
                     : lc_debuginfo_list(y->files, tenant, fn, data);
}
