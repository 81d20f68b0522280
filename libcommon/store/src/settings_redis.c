/*
 * settings_redis.c — the Redis backend of the settings store
 * (lc/settings_store.h), shared by every querier that names the same Redis.
 *
 * Layout: one hash per tenant, key "ember:settings:<tenant>", field = the
 * setting's name, value = its modified-at as 20 decimal digits, then the value
 * bytes. The digits are the stamp in offset binary (the int64 with its sign
 * bit flipped, as an unsigned number, zero-padded), so comparing two stamps
 * as strings compares them as numbers: the "older write loses" check and the
 * per-tenant count run inside one Lua script, atomically with the write, and
 * never go through Lua's doubles.
 *
 * Threading: the store's calls run on thread-pool threads (synchronous
 * hiredis, every command with a timeout). One connection, one call at a time
 * under a mutex: settings calls are rare and tiny. The connection is opened
 * on first use; after an I/O error it is dropped and the call retried once on
 * a fresh one (Redis restarted or closed an idle link), so the store heals
 * without restarting the process. Unreachable: -ENOTCONN.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/redis.h"
#include "lc/redis_cluster.h"
#include "lc/settings_store.h"

#define KEY_PREFIX "ember:settings:"
#define KEY_MAX (sizeof(KEY_PREFIX) + LC_SETTINGS_TENANT_MAX_BYTES)
#define STAMP_DIGITS 20
#define SETTINGS_MAX_REDIRECTS 5 /* a failover moves a slot once; more is a loop */
#define SET_NEWER_EXISTS 1
#define SET_FULL 2

/* KEYS[1] the tenant's hash; ARGV: name, stamped value, the per-tenant cap,
 * the condition (lc_settings_expect_t): "any", "absent" or "equal", and the
 * expected value. A stored value's first 20 bytes are its stamp. */
static const char set_script[] =
    "local cur = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "if ARGV[4] == 'absent' and cur then return 1 end\n"
    "if ARGV[4] == 'equal' and (not cur or string.sub(cur, 21) ~= ARGV[5]) then return 1 end\n"
    "if cur then\n"
    "  if string.sub(cur, 1, 20) > string.sub(ARGV[2], 1, 20) then return 1 end\n"
    "elseif redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then\n"
    "  return 2\n"
    "end\n"
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\n"
    "return 0\n";

/* KEYS[1] the tenant's hash; ARGV: name, the delete's stamp (20 digits). */
static const char del_script[] = "local cur = redis.call('HGET', KEYS[1], ARGV[1])\n"
                                 "if not cur then return 0 end\n"
                                 "if string.sub(cur, 1, 20) > ARGV[2] then return 1 end\n"
                                 "redis.call('HDEL', KEYS[1], ARGV[1])\n"
                                 "return 0\n";

typedef struct redis_settings_s {
    lc_settings_store_t base;
    lc_redis_url_t url;
    struct timeval timeout;
    pthread_mutex_t lock; /* guards ctx: one command at a time */
    redisContext *ctx;    /* NULL until first use and after an I/O error */
    /* Redis Cluster (a list of seed URLs): the tenant hashes live on
     * different masters; a MOVED reply names the right one (followed here,
     * synchronously), and a node that cannot be reached is replaced by the
     * next seed. */
    char *seeds; /* NULL on a single Redis */
    size_t next_seed;
} redis_settings_t;

/* ------------------------------------------------------------ encoding */

static void stamp_format(int64_t ms, char out[STAMP_DIGITS + 1])
{
    uint64_t u = (uint64_t)ms ^ (UINT64_C(1) << 63);
    snprintf(out, STAMP_DIGITS + 1, "%020" PRIu64, u);
}

static bool stamp_parse(const char *p, size_t len, int64_t *ms)
{
    if (len < STAMP_DIGITS)
        return false;
    uint64_t u = 0;
    for (size_t i = 0; i < STAMP_DIGITS; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        u = u * 10 + (uint64_t)(p[i] - '0'); /* 20 digits written by us never wrap */
    }
    *ms = (int64_t)(u ^ (UINT64_C(1) << 63));
    return true;
}

static size_t key_build(char out[KEY_MAX], const char *tenant)
{
    return (size_t)snprintf(out, KEY_MAX, KEY_PREFIX "%s", tenant); /* tenant checked */
}

/* ---------------------------------------------------------- connection */

static int send_setup(redisContext *c, const lc_redis_url_t *u)
{
    redisReply *r = NULL;
    if (u->password[0] && u->user[0])
        r = redisCommand(c, "AUTH %s %s", u->user, u->password);
    else if (u->password[0])
        r = redisCommand(c, "AUTH %s", u->password);
    bool ok = !r || r->type != REDIS_REPLY_ERROR;
    if (!ok)
        LC_LOG_ERROR("settings: redis refused AUTH err=\"%s\"", r->str);
    if (r)
        freeReplyObject(r);
    if (ok && u->db) {
        r = redisCommand(c, "SELECT %d", u->db);
        ok = r && r->type != REDIS_REPLY_ERROR;
        if (!ok)
            LC_LOG_ERROR("settings: redis refused SELECT %d", u->db);
        if (r)
            freeReplyObject(r);
    }
    return ok && !c->err ? 0 : -ENOTCONN;
}

/* Cluster: aim the next connection at the seed after the last one tried. */
static void next_seed_locked(redis_settings_t *s)
{
    const char *at = s->seeds;
    for (size_t i = 0; i < s->next_seed && at; i++) {
        at = strchr(at, ',');
        at = at ? at + 1 : NULL;
    }
    if (!at) {
        at = s->seeds;
        s->next_seed = 0;
    }
    s->next_seed++;
    char one[1024];
    size_t len = strcspn(at, ",");
    snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) ? len : sizeof(one) - 1), at);
    lc_redis_url_t u;
    if (lc_redis_url_parse(one, &u) == 0) {
        memcpy(s->url.host, u.host, sizeof(u.host));
        s->url.port = u.port;
    }
}

/* Cluster: a MOVED reply retargets the connection (true: send again). */
static bool follow_moved_locked(redis_settings_t *s, redisReply *r)
{
    uint16_t slot;
    lc_redis_node_t to;
    bool ask;
    if (!s->seeds || r->type != REDIS_REPLY_ERROR ||
        lc_redis_redirect_parse(r->str, r->len, &slot, &to, &ask) != 0 || ask)
        return false;
    memcpy(s->url.host, to.host, sizeof(to.host));
    s->url.port = to.port;
    redisFree(s->ctx);
    s->ctx = NULL;
    return true;
}

static int connect_locked(redis_settings_t *s)
{
    redisContext *c = redisConnectWithTimeout(s->url.host, s->url.port, s->timeout);
    if (!c || c->err) {
        LC_LOG_WARN("settings: cannot reach redis host=%s port=%u err=\"%s\"", s->url.host,
                    s->url.port, c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return -ENOTCONN;
    }
    if (redisSetTimeout(c, s->timeout) != REDIS_OK || send_setup(c, &s->url) != 0) {
        redisFree(c);
        return -ENOTCONN;
    }
    s->ctx = c;
    return 0;
}

/* Runs one command (binary-safe argv); *out is the reply to free. An I/O
 * error on a connection kept from an earlier call (Redis may have closed it
 * since) drops it and retries once on a new one; a fresh connection failing
 * is not retried, so a hung Redis costs one timeout, not two. */
static int command(redis_settings_t *s, int argc, const char **argv, const size_t *lens,
                   redisReply **out)
{
    *out = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    int redirects = 0;
    for (bool fresh = false; !*out && rc == 0;) {
        if (!s->ctx) {
            rc = connect_locked(s);
            fresh = true;
            if (rc && s->seeds)
                next_seed_locked(s); /* the next call tries another node */
            if (rc)
                break;
        }
        *out = redisCommandArgv(s->ctx, argc, argv, lens);
        if (*out && redirects < SETTINGS_MAX_REDIRECTS && follow_moved_locked(s, *out)) {
            freeReplyObject(*out);
            *out = NULL;
            redirects++;
            fresh = false;
            continue;
        }
        if (!*out) {
            LC_LOG_WARN("settings: redis command failed err=\"%s\"", s->ctx->errstr);
            redisFree(s->ctx);
            s->ctx = NULL;
            rc = fresh ? -ENOTCONN : 0;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* An integer reply of a script, or LC_ESTORE (logged) for anything else. */
static int script_result(redisReply *r, long long *v)
{
    int rc = 0;
    if (r->type == REDIS_REPLY_INTEGER)
        *v = r->integer;
    else {
        LC_LOG_ERROR("settings: unexpected redis reply type=%d err=\"%s\"", r->type,
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
        rc = LC_ESTORE;
    }
    freeReplyObject(r);
    return rc;
}

/* ------------------------------------------------------------ the calls */

/* The condition's two script arguments (set_script). */
static void expect_args(const lc_settings_expect_t *e, const char **mode, const char **value)
{
    *mode = !e ? "any" : e->absent ? "absent" : e->value ? "equal" : "any";
    *value = e && !e->absent && e->value ? e->value : "";
}

static int redis_set(lc_settings_store_t *base, const char *tenant, const lc_setting_t *in,
                     const lc_settings_expect_t *expect)
{
    redis_settings_t *s = (redis_settings_t *)base;
    char key[KEY_MAX], cap[24];
    size_t vlen = in->value ? strlen(in->value) : 0;
    char *stamped = lc_xmalloc(STAMP_DIGITS + vlen + 1);
    stamp_format(in->modified_at_ms, stamped);
    if (vlen)
        memcpy(stamped + STAMP_DIGITS, in->value, vlen);
    snprintf(cap, sizeof(cap), "%d", LC_SETTINGS_MAX_PER_TENANT);
    size_t key_len = key_build(key, tenant);
    const char *mode, *want;
    expect_args(expect, &mode, &want);
    const char *argv[] = {"EVAL", set_script, "1", key, in->name, stamped, cap, mode, want};
    size_t lens[] = {4,           strlen(set_script), 1,
                     key_len,     strlen(in->name),   STAMP_DIGITS + vlen,
                     strlen(cap), strlen(mode),       strlen(want)};
    redisReply *r;
    long long v = 0;
    int rc = command(s, (int)LC_ARRAY_LEN(argv), argv, lens, &r);
    lc_free(stamped);
    if (rc == 0)
        rc = script_result(r, &v);
    if (rc)
        return rc;
    return v == SET_NEWER_EXISTS ? -EEXIST : v == SET_FULL ? LC_EFULL : 0;
}

static int redis_del(lc_settings_store_t *base, const char *tenant, const char *name,
                     int64_t now_ms)
{
    redis_settings_t *s = (redis_settings_t *)base;
    char key[KEY_MAX], stamp[STAMP_DIGITS + 1];
    stamp_format(now_ms, stamp);
    size_t key_len = key_build(key, tenant);
    const char *argv[] = {"EVAL", del_script, "1", key, name, stamp};
    size_t lens[] = {4, strlen(del_script), 1, key_len, strlen(name), STAMP_DIGITS};
    redisReply *r;
    long long v = 0;
    int rc = command(s, (int)LC_ARRAY_LEN(argv), argv, lens, &r);
    if (rc == 0)
        rc = script_result(r, &v);
    return rc ? rc : v == SET_NEWER_EXISTS ? -EEXIST : 0;
}

static int setting_cmp(const void *a, const void *b)
{
    return strcmp(((const lc_setting_t *)a)->name, ((const lc_setting_t *)b)->name);
}

/* One field/value pair of HGETALL into out (arena copies). */
static int copy_pair(lc_arena_t *a, const redisReply *name, const redisReply *val,
                     lc_setting_t *out)
{
    if (name->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING ||
        memchr(name->str, '\0', name->len) ||
        !stamp_parse(val->str, val->len, &out->modified_at_ms))
        return LC_ECORRUPT; /* not written by us */
    out->name = lc_arena_strndup(a, name->str, name->len);
    out->value = lc_arena_strndup(a, val->str + STAMP_DIGITS, val->len - STAMP_DIGITS);
    return out->name && out->value ? 0 : LC_ETOOBIG;
}

static int list_reply(const redisReply *r, lc_arena_t *a, lc_setting_t **out, size_t *n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2)
        return LC_ECORRUPT;
    size_t count = r->elements / 2;
    lc_setting_t *v = count ? lc_arena_calloc(a, count, sizeof(*v)) : NULL;
    if (count && !v)
        return LC_ETOOBIG;
    for (size_t i = 0; i < count; i++) {
        int rc = copy_pair(a, r->element[2 * i], r->element[2 * i + 1], &v[i]);
        if (rc)
            return rc;
    }
    if (count)
        qsort(v, count, sizeof(*v), setting_cmp); /* names are unique: a total order */
    *out = v;
    *n = count;
    return 0;
}

static int redis_list(lc_settings_store_t *base, const char *tenant, lc_arena_t *a,
                      lc_setting_t **out, size_t *n)
{
    redis_settings_t *s = (redis_settings_t *)base;
    char key[KEY_MAX];
    const char *argv[] = {"HGETALL", key};
    size_t lens[] = {7, key_build(key, tenant)};
    redisReply *r;
    int rc = command(s, 2, argv, lens, &r);
    if (rc)
        return rc;
    rc = list_reply(r, a, out, n);
    if (rc == LC_ECORRUPT)
        LC_LOG_ERROR("settings: malformed hash in redis key=%s", key);
    freeReplyObject(r);
    return rc;
}

static void redis_free(lc_settings_store_t *base)
{
    redis_settings_t *s = (redis_settings_t *)base;
    if (s->ctx)
        redisFree(s->ctx);
    lc_free(s->seeds);
    pthread_mutex_destroy(&s->lock);
    lc_free(s);
}

static const lc_settings_ops_t redis_ops = {
    .list = redis_list, .set = redis_set, .del = redis_del, .free = redis_free};

int lc_settings_store_open_redis(const char *url, uint32_t timeout_ms, lc_settings_store_t **out)
{
    redis_settings_t *s = lc_xcalloc(1, sizeof(*s));
    char first[1024];
    size_t len = url ? strcspn(url, ",") : 0;
    if (!url || len >= sizeof(first)) {
        lc_free(s);
        return LC_EINPUT;
    }
    snprintf(first, sizeof(first), "%.*s", (int)len, url);
    if (lc_redis_url_parse(first, &s->url) != 0 || (url[len] && s->url.db != 0)) {
        lc_free(s);
        return LC_EINPUT;
    }
    if (url[len])
        s->seeds = lc_xstrdup(url);
    s->base.ops = &redis_ops;
    uint32_t ms = timeout_ms ? timeout_ms : 2000;
    s->timeout = (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    pthread_mutex_init(&s->lock, NULL);
    *out = &s->base;
    return 0;
}
