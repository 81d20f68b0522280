/*
 * debuginfo_bucket.c — debuginfo_bucket.h: uploaded debug files in the
 * object store, read by every ingester through a local copy.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "debuginfo_bucket.h"
#include "lc/alloc.h"
#include "lc/labels.h"
#include "lc/log.h"

#define KEY_ROOT "debuginfo/"
#define KEY_SUFFIX ".debug"
/* (tenant, build id) answers remembered; when full, they are reused in
 * turn. Found through hash chains: the symbolizer asks once per frame. */
#define MAX_ANSWERS 4096
#define ANSWER_CHAINS 1024

typedef struct answer_s {
    struct answer_s *next; /* in its chain */
    uint64_t hash;
    char *tenant; /* NULL: unused */
    char build_id[LC_BUILD_ID_HEX_MAX + 1];
    bool found;
    uint64_t checked_ns;
} answer_t;

struct ing_dbucket_s {
    lc_objstore_t *os;
    lc_debuginfo_t *cache;
    uint64_t max_tenant_bytes, recheck_ns;
    pthread_mutex_t lock; /* os, answers */
    answer_t answers[MAX_ANSWERS];
    answer_t *chains[ANSWER_CHAINS];
    size_t n_answers, reuse_next;
};

int ing_dbucket_open(const ing_dbucket_opts_t *o, ing_dbucket_t **out)
{
    ing_dbucket_t *b = lc_xcalloc(1, sizeof(*b));
    int rc = lc_objstore_open(o->store, &b->os);
    if (rc) {
        lc_free(b);
        return rc;
    }
    b->cache = o->cache;
    b->max_tenant_bytes = o->max_tenant_bytes;
    b->recheck_ns = o->recheck_ns;
    pthread_mutex_init(&b->lock, NULL);
    *out = b;
    return 0;
}

void ing_dbucket_close(ing_dbucket_t *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_answers; i++)
        lc_free(b->answers[i].tenant);
    lc_objstore_close(b->os);
    pthread_mutex_destroy(&b->lock);
    lc_free(b);
}

/* ------------------------------------------------------------------ keys */

static bool key_byte(unsigned char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           (c == '.' && !first);
}

/* "debuginfo/<tenant, escaped>/" into out; false when it does not fit. */
static bool tenant_prefix(const char *tenant, char out[LC_OBJSTORE_KEY_MAX + 1])
{
    size_t n = strlen(KEY_ROOT);
    memcpy(out, KEY_ROOT, n);
    for (const unsigned char *p = (const unsigned char *)tenant; *p; p++) {
        if (n + 4 > LC_OBJSTORE_KEY_MAX)
            return false;
        if (key_byte(*p, p == (const unsigned char *)tenant))
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, 4, "_%02x", *p);
    }
    out[n++] = '/';
    out[n] = '\0';
    return true;
}

/* The object key of tenant's file of build_id; false when too long. */
static bool object_key(const char *tenant, const char *build_id, char out[LC_OBJSTORE_KEY_MAX + 1])
{
    if (!tenant_prefix(tenant, out))
        return false;
    size_t n = strlen(out);
    return (size_t)snprintf(out + n, LC_OBJSTORE_KEY_MAX + 1 - n, "%s%s", build_id, KEY_SUFFIX) <
           LC_OBJSTORE_KEY_MAX + 1 - n;
}

/* The build id of a key under a tenant's prefix; false for other keys. */
static bool key_build_id(const char *key, size_t prefix_len, char out[LC_BUILD_ID_HEX_MAX + 1])
{
    const char *name = key + prefix_len;
    size_t len = strlen(name), suffix = strlen(KEY_SUFFIX);
    if (len <= suffix || len - suffix > LC_BUILD_ID_HEX_MAX ||
        strcmp(name + len - suffix, KEY_SUFFIX) != 0 || strchr(name, '/'))
        return false;
    memcpy(out, name, len - suffix);
    out[len - suffix] = '\0';
    return true;
}

/* --------------------------------------------------------------- answers */

/* The build id's hash seeded with the tenant's, so the two stay apart. */
static uint64_t tenant_id_hash(const char *tenant, const char *build_id)
{
    return lc_hash64(build_id, strlen(build_id), lc_hash64(tenant, strlen(tenant), 0));
}

/* Under lock: an entry for a new answer, the next one in turn when all are used. */
static answer_t *answer_slot(ing_dbucket_t *b)
{
    if (b->n_answers < MAX_ANSWERS)
        return &b->answers[b->n_answers++];
    answer_t *a = &b->answers[b->reuse_next];
    b->reuse_next = (b->reuse_next + 1) % MAX_ANSWERS;
    answer_t **p = &b->chains[a->hash % ANSWER_CHAINS];
    while (*p != a)
        p = &(*p)->next;
    *p = a->next;
    lc_free(a->tenant);
    return a;
}

/* Under lock: the remembered answer for (tenant, build_id), made if new
 * (checked_ns 0: ask the bucket). */
static answer_t *answer_of(ing_dbucket_t *b, const char *tenant, const char *build_id)
{
    uint64_t h = tenant_id_hash(tenant, build_id);
    for (answer_t *a = b->chains[h % ANSWER_CHAINS]; a; a = a->next)
        if (a->hash == h && strcmp(a->build_id, build_id) == 0 && strcmp(a->tenant, tenant) == 0)
            return a;
    answer_t *a = answer_slot(b);
    *a = (answer_t){.next = b->chains[h % ANSWER_CHAINS], .hash = h, .tenant = lc_xstrdup(tenant)};
    snprintf(a->build_id, sizeof(a->build_id), "%s", build_id);
    b->chains[h % ANSWER_CHAINS] = a;
    return a;
}

/* Under lock: what the bucket says now of tenant's file; the local copy
 * follows it (fetched when missing, removed when the object is gone). A
 * failing bucket changes nothing: the copy, if any, is used meanwhile. */
static bool bucket_check(ing_dbucket_t *b, const char *tenant, const char *build_id,
                         const char *key)
{
    bool have_copy = lc_debuginfo_has(b->cache, tenant, build_id, NULL);
    uint64_t size;
    int rc = have_copy ? lc_objstore_head(b->os, key, &size) : 0;
    if (rc == LC_ENOTFOUND)
        (void)lc_debuginfo_delete(b->cache, tenant, build_id);
    if (have_copy || rc)
        return rc == LC_ENOTFOUND ? false : have_copy;
    uint8_t *data;
    size_t len;
    rc = lc_objstore_get(b->os, key, &data, &len);
    if (rc) {
        if (rc != LC_ENOTFOUND)
            LC_LOG_WARN("debuginfo bucket: cannot read key=%s err=\"%s\"", key,
                        lc_objstore_last_error(b->os));
        return false;
    }
    /* Checked at upload and by its checksum now; the note is not checked
     * again because the key may be a file hash (Parca's), not a build id. */
    lc_status_t st = {0};
    bool ok = lc_debuginfo_put_file_hash(b->cache, tenant, build_id, data, len, &st) == 0;
    if (!ok)
        LC_LOG_WARN("debuginfo bucket: cannot keep a copy of key=%s err=\"%s\"", key, st.msg);
    lc_free(data);
    return ok;
}

bool ing_dbucket_find(void *data, const char *tenant, const char *build_id,
                      char path[LC_DEBUGINFO_PATH_MAX])
{
    ing_dbucket_t *b = data;
    char key[LC_OBJSTORE_KEY_MAX + 1];
    if (!object_key(tenant, build_id, key))
        return false;
    pthread_mutex_lock(&b->lock);
    answer_t *a = answer_of(b, tenant, build_id);
    uint64_t now = uv_hrtime();
    bool found = a->found && lc_debuginfo_path(b->cache, tenant, build_id, path) == 0;
    /* a copy removed under us (the cache's bound) is fetched again at once */
    if (a->checked_ns == 0 || now - a->checked_ns >= b->recheck_ns || (a->found && !found)) {
        a->found = bucket_check(b, tenant, build_id, key);
        a->checked_ns = now;
        found = a->found && lc_debuginfo_path(b->cache, tenant, build_id, path) == 0;
    }
    pthread_mutex_unlock(&b->lock);
    return found;
}

/* Under lock: forgets the answer (the next find asks the bucket). */
static void answer_forget(ing_dbucket_t *b, const char *tenant, const char *build_id)
{
    answer_of(b, tenant, build_id)->checked_ns = 0;
}

/* ------------------------------------------------------------ the bucket */

/* Under lock: the bytes of tenant's objects but the one at key. */
static int tenant_bytes(ing_dbucket_t *b, const char *prefix, const char *key, uint64_t *total)
{
    lc_objstore_list_t l;
    int rc = lc_objstore_list(b->os, prefix, &l);
    *total = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (strcmp(l.keys[i], key) != 0)
            *total += l.sizes[i];
    lc_objstore_list_free(&l); /* zeroed by a failed list too */
    return rc;
}

static int store_failed(ing_dbucket_t *b, lc_status_t *st, const char *what)
{
    LC_LOG_WARN("debuginfo bucket: %s failed err=\"%s\"", what, lc_objstore_last_error(b->os));
    return lc_status_set(st, LC_CODE_UNAVAILABLE, "the object store failed: %s", what);
}

int ing_dbucket_put(ing_dbucket_t *b, const char *tenant, const char *build_id, const uint8_t *data,
                    size_t len, lc_status_t *st)
{
    char prefix[LC_OBJSTORE_KEY_MAX + 1], key[LC_OBJSTORE_KEY_MAX + 1];
    if (!tenant_prefix(tenant, prefix) || !object_key(tenant, build_id, key))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the tenant id is too long for an object store key");
    pthread_mutex_lock(&b->lock);
    uint64_t others = 0;
    int rc = tenant_bytes(b, prefix, key, &others);
    uint64_t would_take = others + (uint64_t)len;
    if (rc)
        rc = store_failed(b, st, "listing the tenant's debug files");
    else if (would_take > b->max_tenant_bytes)
        rc = lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                           "the tenant's debug files would take %llu bytes, over the limit of "
                           "%llu",
                           (unsigned long long)would_take, (unsigned long long)b->max_tenant_bytes);
    else if (lc_objstore_put(b->os, key, data, len) != 0)
        rc = store_failed(b, st, "storing the debug file");
    if (rc == 0)
        answer_forget(b, tenant, build_id);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int ing_dbucket_has(ing_dbucket_t *b, const char *tenant, const char *build_id, uint64_t *size)
{
    char key[LC_OBJSTORE_KEY_MAX + 1];
    if (!object_key(tenant, build_id, key))
        return LC_ENOTFOUND;
    pthread_mutex_lock(&b->lock);
    int rc = lc_objstore_head(b->os, key, size);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int ing_dbucket_delete(ing_dbucket_t *b, const char *tenant, const char *build_id)
{
    char key[LC_OBJSTORE_KEY_MAX + 1];
    if (!object_key(tenant, build_id, key))
        return 0;
    pthread_mutex_lock(&b->lock);
    int rc = lc_objstore_delete(b->os, key);
    if (rc == 0) {
        (void)lc_debuginfo_delete(b->cache, tenant, build_id);
        answer_forget(b, tenant, build_id);
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int ing_dbucket_list(ing_dbucket_t *b, const char *tenant, lc_debuginfo_list_fn fn, void *data)
{
    char prefix[LC_OBJSTORE_KEY_MAX + 1];
    if (!tenant_prefix(tenant, prefix))
        return 0;
    lc_objstore_list_t l;
    pthread_mutex_lock(&b->lock);
    int rc = lc_objstore_list(b->os, prefix, &l);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        lc_debuginfo_entry_t e = {0};
        if (!key_build_id(l.keys[i], strlen(prefix), e.build_id))
            continue;
        e.size = l.sizes[i];
        rc = fn(&e, data);
    }
    pthread_mutex_unlock(&b->lock);
    lc_objstore_list_free(&l);
    return rc;
}
