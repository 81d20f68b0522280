/*
 * settings_store.c — per-tenant settings (lc/settings_store.h): the checks
 * every backend shares, and the LMDB backend.
 *
 * LMDB layout: one unnamed database; key = tenant bytes, NUL, name bytes
 * (tenant ids cannot contain NUL, so one tenant's keys never interleave with
 * another's and a cursor range over "tenant\0" lists exactly its settings,
 * already sorted by name); value = modified-at ms as 8 little-endian bytes,
 * then the value bytes. Each call is one self-contained transaction, so the
 * "older write loses" check and the per-tenant count are atomic with the write.
 * Settings are few and small: the default (synchronous) commit keeps them
 * durable without measurable cost.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <lmdb.h>

#include "lc/log.h"
#include "lc/settings_store.h"

#define SETTINGS_MAP_BYTES ((size_t)1 << 30) /* sparse upper bound, not an allocation */
#define SETTINGS_MAX_READERS 512             /* thread-pool threads, with room */
#define SETTINGS_KEY_MAX (LC_SETTINGS_TENANT_MAX_BYTES + 1 + LC_SETTINGS_NAME_MAX_BYTES)
#define STAMP_BYTES 8

/* ------------------------------------------------------------ shared checks */

static int check_tenant(const char *tenant)
{
    size_t len = tenant ? strlen(tenant) : 0;
    return len == 0 || len > LC_SETTINGS_TENANT_MAX_BYTES ? LC_EINPUT : 0;
}

static int check_name(const char *name)
{
    if (!name || !*name)
        return LC_EINPUT;
    return strlen(name) > LC_SETTINGS_NAME_MAX_BYTES ? LC_ETOOBIG : 0;
}

int lc_settings_store_list(lc_settings_store_t *s, const char *tenant, lc_arena_t *a,
                           lc_setting_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = check_tenant(tenant);
    return rc ? rc : s->ops->list(s, tenant, a, out, n);
}

int lc_settings_store_set_if(lc_settings_store_t *s, const char *tenant,
                             const lc_setting_t *setting, const lc_settings_expect_t *expect)
{
    int rc = check_tenant(tenant);
    if (!rc)
        rc = check_name(setting->name);
    if (!rc && setting->value && strlen(setting->value) > LC_SETTINGS_VALUE_MAX_BYTES)
        rc = LC_ETOOBIG;
    return rc ? rc : s->ops->set(s, tenant, setting, expect);
}

int lc_settings_store_set(lc_settings_store_t *s, const char *tenant, const lc_setting_t *setting)
{
    return lc_settings_store_set_if(s, tenant, setting, NULL);
}

int lc_settings_store_delete(lc_settings_store_t *s, const char *tenant, const char *name,
                             int64_t now_ms)
{
    int rc = check_tenant(tenant);
    if (!rc)
        rc = check_name(name);
    return rc ? rc : s->ops->del(s, tenant, name, now_ms);
}

void lc_settings_store_free(lc_settings_store_t *s)
{
    if (s)
        s->ops->free(s);
}

/* ------------------------------------------------------------- LMDB backend */

typedef struct lmdb_settings_s {
    lc_settings_store_t base;
    MDB_env *env;
    MDB_dbi dbi;
} lmdb_settings_t;

/* Key bytes for (tenant, name); name "" gives the tenant's prefix. */
typedef struct settings_key_s {
    char bytes[SETTINGS_KEY_MAX];
    size_t len;
    size_t prefix_len; /* tenant + NUL */
} settings_key_t;

static void settings_store_key_build(settings_key_t *k, const char *tenant, const char *name)
{
    size_t t = strlen(tenant), n = strlen(name); /* both checked against the caps */
    memcpy(k->bytes, tenant, t);
    k->bytes[t] = '\0';
    memcpy(k->bytes + t + 1, name, n);
    k->prefix_len = t + 1;
    k->len = t + 1 + n;
}

static bool key_has_prefix(const MDB_val *key, const settings_key_t *k)
{
    return key->mv_size >= k->prefix_len && memcmp(key->mv_data, k->bytes, k->prefix_len) == 0;
}

static int64_t stamp_get(const MDB_val *v)
{
    uint64_t u = 0;
    const unsigned char *p = v->mv_data;
    for (int i = STAMP_BYTES - 1; i >= 0; i--)
        u = u << 8 | p[i];
    return (int64_t)u;
}

static void stamp_put(unsigned char *p, int64_t ms)
{
    uint64_t u = (uint64_t)ms;
    for (int i = 0; i < STAMP_BYTES; i++, u >>= 8)
        p[i] = (unsigned char)u;
}

static int mdb_fail(int rc, const char *what)
{
    LC_LOG_ERROR("settings: %s failed err=\"%s\"", what, mdb_strerror(rc));
    return rc == MDB_MAP_FULL ? LC_EFULL : LC_ESTORE;
}

/* A stored value is at least its stamp; anything shorter was not written by us. */
static bool value_valid(const MDB_val *v)
{
    return v->mv_size >= STAMP_BYTES;
}

static int copy_setting(lc_arena_t *a, const MDB_val *key, const MDB_val *val, size_t prefix_len,
                        lc_setting_t *out)
{
    out->name =
        lc_arena_strndup(a, (const char *)key->mv_data + prefix_len, key->mv_size - prefix_len);
    out->value =
        lc_arena_strndup(a, (const char *)val->mv_data + STAMP_BYTES, val->mv_size - STAMP_BYTES);
    out->modified_at_ms = stamp_get(val);
    return out->name && out->value ? 0 : LC_ETOOBIG;
}

/* Walks the tenant's keys with cursor cur; calls fn for each (key, value). */
typedef int (*key_visit_fn)(const MDB_val *key, const MDB_val *val, void *data);

static int walk_tenant(MDB_cursor *cur, const settings_key_t *k, key_visit_fn fn, void *data)
{
    MDB_val key = {.mv_size = k->prefix_len, .mv_data = (void *)k->bytes}, val;
    int rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
    while (rc == 0 && key_has_prefix(&key, k)) {
        if (!value_valid(&val))
            return LC_ECORRUPT;
        rc = fn(&key, &val, data);
        if (rc)
            return rc;
        rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
    }
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : mdb_fail(rc, "cursor");
}

typedef struct list_ctx_s {
    lc_arena_t *arena;
    size_t prefix_len;
    lc_setting_t *v;
    size_t n;
} list_ctx_t;

static int count_one(const MDB_val *key, const MDB_val *val, void *data)
{
    LC_UNUSED(key);
    LC_UNUSED(val);
    ((list_ctx_t *)data)->n++;
    return 0;
}

static int copy_one(const MDB_val *key, const MDB_val *val, void *data)
{
    list_ctx_t *c = data;
    return copy_setting(c->arena, key, val, c->prefix_len, &c->v[c->n++]);
}

/* Counts, then copies: the listing is bounded by LC_SETTINGS_MAX_PER_TENANT
 * and one read transaction sees one snapshot, so the count holds. */
static int lmdb_list_in(MDB_txn *txn, MDB_dbi dbi, const settings_key_t *k, lc_arena_t *a,
                        lc_setting_t **out, size_t *n)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return mdb_fail(rc, "cursor open");
    list_ctx_t c = {.arena = a, .prefix_len = k->prefix_len};
    rc = walk_tenant(cur, k, count_one, &c);
    if (!rc && c.n) {
        c.v = lc_arena_calloc(a, c.n, sizeof(*c.v));
        c.n = 0;
        rc = c.v ? walk_tenant(cur, k, copy_one, &c) : LC_ETOOBIG;
    }
    mdb_cursor_close(cur);
    if (!rc) {
        *out = c.v;
        *n = c.n;
    }
    return rc;
}

static int lmdb_list(lc_settings_store_t *base, const char *tenant, lc_arena_t *a,
                     lc_setting_t **out, size_t *n)
{
    lmdb_settings_t *s = (lmdb_settings_t *)base;
    settings_key_t k;
    settings_store_key_build(&k, tenant, "");
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return mdb_fail(rc, "read txn begin");
    rc = lmdb_list_in(txn, s->dbi, &k, a, out, n);
    mdb_txn_abort(txn);
    return rc;
}

/* The stored setting's stamp and value (past the stamp), or *found false. */
static int stored_get(MDB_txn *txn, MDB_dbi dbi, const settings_key_t *k, bool *found,
                      int64_t *stamp, MDB_val *value)
{
    MDB_val key = {.mv_size = k->len, .mv_data = (void *)k->bytes}, val;
    int rc = mdb_get(txn, dbi, &key, &val);
    *found = rc == 0;
    *stamp = 0;
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return mdb_fail(rc, "get");
    if (!value_valid(&val))
        return LC_ECORRUPT;
    *stamp = stamp_get(&val);
    value->mv_size = val.mv_size - STAMP_BYTES;
    value->mv_data = (char *)val.mv_data + STAMP_BYTES;
    return 0;
}

static bool expect_holds(const lc_settings_expect_t *e, bool found, const MDB_val *value)
{
    if (!e)
        return true;
    if (e->absent || !found)
        return e->absent && !found;
    return !e->value || (strlen(e->value) == value->mv_size &&
                         memcmp(e->value, value->mv_data, value->mv_size) == 0);
}

static int tenant_count(MDB_txn *txn, MDB_dbi dbi, const settings_key_t *k, size_t *n)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return mdb_fail(rc, "cursor open");
    list_ctx_t c = {0};
    rc = walk_tenant(cur, k, count_one, &c);
    mdb_cursor_close(cur);
    *n = c.n;
    return rc;
}

static int put_setting(MDB_txn *txn, MDB_dbi dbi, const settings_key_t *k, const lc_setting_t *in)
{
    size_t vlen = in->value ? strlen(in->value) : 0;
    MDB_val key = {.mv_size = k->len, .mv_data = (void *)k->bytes};
    MDB_val val = {.mv_size = STAMP_BYTES + vlen, .mv_data = NULL};
    int rc = mdb_put(txn, dbi, &key, &val, MDB_RESERVE);
    if (rc)
        return mdb_fail(rc, "put");
    stamp_put(val.mv_data, in->modified_at_ms);
    if (vlen)
        memcpy((char *)val.mv_data + STAMP_BYTES, in->value, vlen);
    return 0;
}

static int lmdb_set_in(MDB_txn *txn, MDB_dbi dbi, const char *tenant, const lc_setting_t *in,
                       const lc_settings_expect_t *expect)
{
    settings_key_t k;
    settings_store_key_build(&k, tenant, in->name);
    bool found;
    int64_t stamp;
    MDB_val value;
    int rc = stored_get(txn, dbi, &k, &found, &stamp, &value);
    if (rc)
        return rc;
    if (!expect_holds(expect, found, &value) || (found && stamp > in->modified_at_ms))
        return -EEXIST;
    if (!found) {
        size_t n;
        rc = tenant_count(txn, dbi, &k, &n);
        if (rc)
            return rc;
        if (n >= LC_SETTINGS_MAX_PER_TENANT)
            return LC_EFULL;
    }
    return put_setting(txn, dbi, &k, in);
}

static int lmdb_del_in(MDB_txn *txn, MDB_dbi dbi, const char *tenant, const char *name,
                       int64_t now_ms)
{
    settings_key_t k;
    settings_store_key_build(&k, tenant, name);
    bool found;
    int64_t stamp;
    MDB_val value;
    int rc = stored_get(txn, dbi, &k, &found, &stamp, &value);
    if (rc || !found)
        return rc;
    if (stamp > now_ms)
        return -EEXIST;
    MDB_val key = {.mv_size = k.len, .mv_data = k.bytes};
    rc = mdb_del(txn, dbi, &key, NULL);
    return rc ? mdb_fail(rc, "del") : 0;
}

/* Runs one write: begin, fn, commit (or abort when fn fails). */
typedef int (*write_fn)(MDB_txn *txn, MDB_dbi dbi, const void *arg);

static int write_txn(lmdb_settings_t *s, write_fn fn, const void *arg)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc)
        return mdb_fail(rc, "write txn begin");
    rc = fn(txn, s->dbi, arg);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc ? mdb_fail(rc, "commit") : 0;
}

typedef struct set_arg_s {
    const char *tenant;
    const lc_setting_t *setting;
    const lc_settings_expect_t *expect;
} set_arg_t;

typedef struct del_arg_s {
    const char *tenant, *name;
    int64_t now_ms;
} del_arg_t;

static int set_write(MDB_txn *txn, MDB_dbi dbi, const void *arg)
{
    const set_arg_t *a = arg;
    return lmdb_set_in(txn, dbi, a->tenant, a->setting, a->expect);
}

static int del_write(MDB_txn *txn, MDB_dbi dbi, const void *arg)
{
    const del_arg_t *a = arg;
    return lmdb_del_in(txn, dbi, a->tenant, a->name, a->now_ms);
}

static int lmdb_set(lc_settings_store_t *base, const char *tenant, const lc_setting_t *setting,
                    const lc_settings_expect_t *expect)
{
    set_arg_t a = {.tenant = tenant, .setting = setting, .expect = expect};
    return write_txn((lmdb_settings_t *)base, set_write, &a);
}

static int lmdb_del(lc_settings_store_t *base, const char *tenant, const char *name, int64_t now_ms)
{
    del_arg_t a = {.tenant = tenant, .name = name, .now_ms = now_ms};
    return write_txn((lmdb_settings_t *)base, del_write, &a);
}

static void lmdb_free(lc_settings_store_t *base)
{
    lmdb_settings_t *s = (lmdb_settings_t *)base;
    mdb_env_close(s->env);
    lc_free(s);
}

static const lc_settings_ops_t lmdb_ops = {
    .list = lmdb_list, .set = lmdb_set, .del = lmdb_del, .free = lmdb_free};

/* mkdir -p: the settings dir sits under the data dir, which may not exist yet
 * when the store is opened on its own (tests, tools). */
static int make_dirs(const char *path)
{
    char *p = lc_xstrdup(path);
    int rc = 0;
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char saved = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            rc = -errno;
        *c = saved;
        if (rc || saved == '\0')
            break;
    }
    lc_free(p);
    return rc;
}

static int env_open(const char *dir, MDB_env **env, MDB_dbi *dbi)
{
    int rc = mdb_env_create(env);
    if (rc)
        return mdb_fail(rc, "env create");
    rc = mdb_env_set_mapsize(*env, SETTINGS_MAP_BYTES);
    if (!rc)
        rc = mdb_env_set_maxreaders(*env, SETTINGS_MAX_READERS);
    /* MDB_NOTLS: read transactions run on thread-pool threads that are reused. */
    if (!rc)
        rc = mdb_env_open(*env, dir, MDB_NOTLS, 0644);
    MDB_txn *txn = NULL;
    if (!rc)
        rc = mdb_txn_begin(*env, NULL, 0, &txn);
    if (!rc)
        rc = mdb_dbi_open(txn, NULL, 0, dbi);
    if (!rc) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn)
        mdb_txn_abort(txn);
    if (rc) {
        LC_LOG_ERROR("settings: cannot open path=%s err=\"%s\"", dir, mdb_strerror(rc));
        mdb_env_close(*env);
        return LC_ESTORE;
    }
    return 0;
}

int lc_settings_store_open_lmdb(const char *dir, lc_settings_store_t **out)
{
    int rc = make_dirs(dir);
    if (rc) {
        LC_LOG_ERROR("settings: cannot create path=%s err=\"%s\"", dir, lc_strerror(rc));
        return rc;
    }
    lmdb_settings_t *s = lc_xcalloc(1, sizeof(*s));
    s->base.ops = &lmdb_ops;
    rc = env_open(dir, &s->env, &s->dbi);
    if (rc) {
        lc_free(s);
        return rc;
    }
    *out = &s->base;
    return 0;
}
