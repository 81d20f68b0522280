/*
 * objstore.c — the front of lc/objstore.h: option checks and defaults, key
 * the store prefix, and the dispatch to a backend (objstore_fs.c,
 * objstore_s3.c). Threading: as lc/objstore.h.
 */
#include "lc/objstore.h"

#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "objstore_int.h"

#define MIB ((size_t)1 << 20)
/* S3 refuses parts under 5 MiB (except the last) and more than 10,000 parts. */
#define S3_PART_MIN (5 * MIB)
#define S3_PARTS_MAX 10000

int lc_objstore_backend_parse(const char *s, lc_objstore_backend_t *out)
{
    if (!s || !*s)
        *out = LC_OBJSTORE_NONE;
    else if (strcmp(s, "filesystem") == 0)
        *out = LC_OBJSTORE_FILESYSTEM;
    else if (strcmp(s, "s3") == 0)
        *out = LC_OBJSTORE_S3;
    else
        return LC_EINPUT;
    return 0;
}

static void resolve_limits(lc_objstore_opts_t *o)
{
    if (!o->max_object_bytes)
        o->max_object_bytes = 1024 * MIB;
    if (!o->multipart_threshold)
        o->multipart_threshold = 16 * MIB;
    if (!o->part_bytes)
        o->part_bytes = 8 * MIB;
    if (!o->max_list_keys)
        o->max_list_keys = 1000000;
    if (!o->list_page_keys)
        o->list_page_keys = 1000;
    if (!o->timeout_ms)
        o->timeout_ms = 60000;
    if (!o->connect_timeout_ms)
        o->connect_timeout_ms = 5000;
    if (!o->retries)
        o->retries = 4;
    if (!o->backoff_ms)
        o->backoff_ms = 100;
    if (!o->region || !*o->region)
        o->region = "us-east-1";
}

static int why_fail(char *why, size_t why_len, const char *msg)
{
    snprintf(why, why_len, "%s", msg);
    return LC_EINPUT;
}

static int check_s3(const lc_objstore_opts_t *o, char *why, size_t why_len)
{
    if (!o->endpoint || !*o->endpoint)
        return why_fail(why, why_len, "--storage.s3.endpoint is required for the s3 backend");
    if (!o->bucket || !*o->bucket)
        return why_fail(why, why_len, "--storage.s3.bucket-name is required for the s3 backend");
    for (const char *c = o->bucket; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
            return why_fail(why, why_len,
                            "--storage.s3.bucket-name: only lowercase letters, digits, '-', '.'");
    if (!o->access_key_id || !*o->access_key_id || !o->secret_access_key || !*o->secret_access_key)
        return why_fail(why, why_len,
                        "the s3 backend needs --storage.s3.access-key-id and "
                        "--storage.s3.secret-access-key (or AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY)");
    if (strchr(o->region, ':') || strchr(o->region, '/'))
        return why_fail(why, why_len, "--storage.s3.region: not a region name");
    return 0;
}

int lc_objstore_opts_check(const lc_objstore_opts_t *in, char *why, size_t why_len)
{
    lc_objstore_opts_t o = *in;
    resolve_limits(&o);
    if (o.prefix && *o.prefix && !lc_objstore_key_valid(o.prefix))
        return why_fail(why, why_len, "--storage.prefix: letters, digits, '.', '_', '-', '/' only");
    if (o.part_bytes < S3_PART_MIN)
        return why_fail(why, why_len, "part size under S3's 5 MiB minimum");
    if (o.max_object_bytes / o.part_bytes >= S3_PARTS_MAX)
        return why_fail(why, why_len, "object size cap needs more than 10,000 parts");
    if (o.list_page_keys < 0 || o.list_page_keys > 1000)
        return why_fail(why, why_len, "list page size outside 1..1000");
    if (o.timeout_ms < 0 || o.connect_timeout_ms < 0 || o.retries < 0 || o.backoff_ms < 0)
        return why_fail(why, why_len, "negative timeout, retry count or backoff");
    if (o.backend == LC_OBJSTORE_FILESYSTEM && (!o.fs_dir || !*o.fs_dir))
        return why_fail(why, why_len,
                        "--storage.filesystem.dir is required for the filesystem backend");
    if (o.backend == LC_OBJSTORE_S3)
        return check_s3(&o, why, why_len);
    return 0;
}

static char *opt_strdup(const char *s)
{
    return s ? lc_xstrdup(s) : NULL;
}

/* The store keeps its own copies so the caller's config may go away. */
static void objstore_copy_opts(lc_objstore_t *s, const lc_objstore_opts_t *o)
{
    s->o = *o;
    resolve_limits(&s->o);
    s->o.prefix = s->prefix = (o->prefix && *o->prefix) ? lc_xstrdup(o->prefix) : NULL;
    s->o.fs_dir = s->fs_dir = opt_strdup(o->fs_dir);
    s->o.endpoint = s->endpoint = opt_strdup(o->endpoint);
    s->o.bucket = s->bucket = opt_strdup(o->bucket);
    s->o.region = s->region = lc_xstrdup(s->o.region);
    s->o.access_key_id = s->access_key_id = opt_strdup(o->access_key_id);
    s->o.secret_access_key = s->secret_access_key = opt_strdup(o->secret_access_key);
}

static void free_store(lc_objstore_t *s)
{
    lc_free(s->prefix);
    lc_free(s->fs_dir);
    lc_free(s->endpoint);
    lc_free(s->bucket);
    lc_free(s->region);
    lc_free(s->access_key_id);
    lc_free(s->secret_access_key);
    lc_free(s);
}

int lc_objstore_open(const lc_objstore_opts_t *o, lc_objstore_t **out)
{
    char why[256];
    *out = NULL;
    if (o->backend == LC_OBJSTORE_NONE || lc_objstore_opts_check(o, why, sizeof why) != 0)
        return LC_EINPUT;
    lc_objstore_t *s = lc_xcalloc(1, sizeof *s);
    objstore_copy_opts(s, o);
    int rc = o->backend == LC_OBJSTORE_S3 ? objstore_s3_open(s) : objstore_fs_open(s);
    if (rc != 0) {
        free_store(s);
        return rc;
    }
    *out = s;
    return 0;
}

void lc_objstore_close(lc_objstore_t *s)
{
    if (!s)
        return;
    s->ops->close(s);
    free_store(s);
}

/* prefix + '/' + key into a fresh string, or NULL for a bad key. */
static char *full_key(const lc_objstore_t *s, const char *key)
{
    if (!lc_objstore_key_valid(key))
        return NULL;
    if (!s->prefix)
        return lc_xstrdup(key);
    size_t n = strlen(s->prefix) + 1 + strlen(key) + 1;
    char *k = lc_xmalloc(n);
    snprintf(k, n, "%s/%s", s->prefix, key);
    return k;
}

int lc_objstore_put(lc_objstore_t *s, const char *key, const void *data, size_t len)
{
    if (len > s->o.max_object_bytes)
        return LC_ETOOBIG;
    char *k = full_key(s, key);
    if (!k)
        return LC_EINPUT;
    int rc = s->ops->put(s, k, data, len);
    lc_free(k);
    return rc;
}

static int get_span(lc_objstore_t *s, const char *key, uint64_t off, uint64_t n, uint8_t **data,
                    size_t *len)
{
    *data = NULL;
    *len = 0;
    char *k = full_key(s, key);
    if (!k)
        return LC_EINPUT;
    int rc = s->ops->get(s, k, off, n, data, len);
    lc_free(k);
    return rc;
}

int lc_objstore_get(lc_objstore_t *s, const char *key, uint8_t **data, size_t *len)
{
    return get_span(s, key, 0, 0, data, len);
}

int lc_objstore_get_range_unverified(lc_objstore_t *s, const char *key, uint64_t off, uint64_t n,
                                     uint8_t **data, size_t *len)
{
    if (n == 0 || n > s->o.max_object_bytes || off > UINT64_MAX - n)
        return LC_EINPUT;
    return get_span(s, key, off, n, data, len);
}

int lc_objstore_head(lc_objstore_t *s, const char *key, uint64_t *size)
{
    char *k = full_key(s, key);
    if (!k)
        return LC_EINPUT;
    int rc = s->ops->head(s, k, size);
    lc_free(k);
    return rc;
}

int lc_objstore_delete(lc_objstore_t *s, const char *key)
{
    char *k = full_key(s, key);
    if (!k)
        return LC_EINPUT;
    int rc = s->ops->del(s, k);
    lc_free(k);
    return rc;
}

/* Drops the store prefix (and its '/') from every listed key. */
static void strip_prefix(const lc_objstore_t *s, lc_objstore_list_t *l)
{
    if (!s->prefix)
        return;
    size_t skip = strlen(s->prefix) + 1;
    for (size_t i = 0; i < l->n; i++)
        memmove(l->keys[i], l->keys[i] + skip, strlen(l->keys[i] + skip) + 1);
}

int lc_objstore_list(lc_objstore_t *s, const char *key_prefix, lc_objstore_list_t *out)
{
    memset(out, 0, sizeof *out);
    if (!key_prefix || strlen(key_prefix) > LC_OBJSTORE_KEY_MAX)
        return LC_EINPUT;
    for (const char *c = key_prefix; *c; c++)
        if (!objstore_key_char_ok(*c))
            return LC_EINPUT;
    size_t n = (s->prefix ? strlen(s->prefix) + 1 : 0) + strlen(key_prefix) + 1;
    char *p = lc_xmalloc(n);
    snprintf(p, n, "%s%s%s", s->prefix ? s->prefix : "", s->prefix ? "/" : "", key_prefix);
    int rc = s->ops->list(s, p, out);
    lc_free(p);
    if (rc != 0)
        lc_objstore_list_free(out);
    else
        strip_prefix(s, out);
    return rc;
}

void lc_objstore_list_free(lc_objstore_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        lc_free(l->keys[i]);
    lc_free(l->keys);
    lc_free(l->sizes);
    memset(l, 0, sizeof *l);
}

const char *lc_objstore_last_error(const lc_objstore_t *s)
{
    return s->last_error;
}
