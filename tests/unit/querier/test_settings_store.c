/*
 * test_settings_store.c — the per-tenant settings store (lc/settings_store.h)
 * with each backend: LMDB in a temporary directory, then Redis (a real
 * redis-server child). The same tests run against both: persistence across
 * reopen, order, tenant isolation (including tenants that are prefixes of
 * each other), the "older write loses" rule (negative and extreme stamps
 * too), deletes, and every cap. Redis only: two stores on one server see each
 * other's writes, the calls fail with -ENOTCONN while the server is down and
 * work again once it is back, without reopening the store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/settings_store.h"
#include "lc_test.h"
#include "test_redis_server.h"

static char dir[] = "/tmp/ember-settings-XXXXXX";
static char path[sizeof(dir) + 32];
static test_redis_t redis;
static bool use_redis; /* which backend open_store opens */

static lc_settings_store_t *open_store(void)
{
    lc_settings_store_t *s = NULL;
    if (use_redis)
        LC_ASSERT_OK(lc_settings_store_open_redis(redis.url, 2000, &s));
    else
        LC_ASSERT_OK(lc_settings_store_open_lmdb(path, &s));
    if (!s)
        exit(1);
    return s;
}

static int set(lc_settings_store_t *s, const char *tenant, const char *name, const char *value,
               int64_t at)
{
    lc_setting_t v = {.name = name, .value = value, .modified_at_ms = at};
    return lc_settings_store_set(s, tenant, &v);
}

/* Lists tenant's settings as "name=value@ms;" joined, for one-line checks. */
static void listing(lc_settings_store_t *s, const char *tenant, char *out, size_t cap)
{
    lc_arena_t *a = lc_arena_new(1u << 20);
    lc_setting_t *v = NULL;
    size_t n = 0;
    LC_ASSERT_OK(lc_settings_store_list(s, tenant, a, &v, &n));
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s=%s@%lld;", v[i].name, v[i].value,
                                 (long long)v[i].modified_at_ms);
    lc_arena_free(a);
}

static void test_setup(void)
{
    LC_CHECK(mkdtemp(dir) != NULL);
    /* a dir that does not exist yet: open creates it (and its parent) */
    snprintf(path, sizeof(path), "%s/data/settings", dir);
}

static void test_set_get_sorted_and_persisted(void)
{
    lc_settings_store_t *s = open_store();
    LC_ASSERT_OK(set(s, "t1", "pluginSettings", "{\"a\":1}", 100));
    LC_ASSERT_OK(set(s, "t1", "Zeta", "z", 101));   /* 'Z' (0x5a) sorts before 'a'..'p' */
    LC_ASSERT_OK(set(s, "t1", "alpha", "", 102));   /* empty values are values */
    LC_ASSERT_OK(set(s, "t1", "alpha2", "x", 103)); /* a name extending another */
    char got[512];
    listing(s, "t1", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "Zeta=z@101;alpha=@102;alpha2=x@103;pluginSettings={\"a\":1}@100;");
    lc_settings_store_free(s);

    s = open_store(); /* survives a reopen */
    listing(s, "t1", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "Zeta=z@101;alpha=@102;alpha2=x@103;pluginSettings={\"a\":1}@100;");
    listing(s, "nobody", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "");
    lc_settings_store_free(s);
}

static void test_tenants_isolated(void)
{
    lc_settings_store_t *s = open_store();
    /* "a" + "bx" must not be confused with "ab" + "x": the key has a NUL between */
    LC_ASSERT_OK(set(s, "a", "bx", "from-a", 1));
    LC_ASSERT_OK(set(s, "ab", "x", "from-ab", 2));
    LC_ASSERT_OK(set(s, "a", "shared", "A", 3));
    LC_ASSERT_OK(set(s, "ab", "shared", "AB", 4));
    char got[256];
    listing(s, "a", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "bx=from-a@1;shared=A@3;");
    listing(s, "ab", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "shared=AB@4;x=from-ab@2;");
    /* deleting in one tenant leaves the other's same-named setting */
    LC_ASSERT_OK(lc_settings_store_delete(s, "a", "shared", 10));
    listing(s, "a", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "bx=from-a@1;");
    listing(s, "ab", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "shared=AB@4;x=from-ab@2;");
    lc_settings_store_free(s);
}

static void test_older_write_loses(void)
{
    lc_settings_store_t *s = open_store();
    LC_ASSERT_OK(set(s, "t2", "k", "v100", 100));
    LC_ASSERT_EQ(set(s, "t2", "k", "v99", 99), -EEXIST);
    LC_ASSERT_OK(set(s, "t2", "k", "v100b", 100)); /* same stamp: the later call wins */
    LC_ASSERT_OK(set(s, "t2", "k", "v101", 101));
    char got[128];
    listing(s, "t2", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "k=v101@101;");
    /* a delete "at" 100 is older than the stored 101 */
    LC_ASSERT_EQ(lc_settings_store_delete(s, "t2", "k", 100), -EEXIST);
    LC_ASSERT_OK(lc_settings_store_delete(s, "t2", "k", 101));
    LC_ASSERT_OK(lc_settings_store_delete(s, "t2", "k", 102)); /* already gone: fine */
    LC_ASSERT_OK(lc_settings_store_delete(s, "t2", "never-set", 1));
    listing(s, "t2", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "");
    lc_settings_store_free(s);
}

static int set_if(lc_settings_store_t *s, const char *name, const char *value, int64_t at,
                  bool absent, const char *expected)
{
    lc_setting_t v = {.name = name, .value = value, .modified_at_ms = at};
    lc_settings_expect_t e = {.absent = absent, .value = expected};
    return lc_settings_store_set_if(s, "t-cas", &v, &e);
}

/* A conditional write: done only when what is stored is what the caller
 * read, else -EEXIST and nothing changes (two writers of one generation:
 * exactly one wins). */
static void test_conditional_write(void)
{
    lc_settings_store_t *s = open_store();
    LC_ASSERT_OK(set_if(s, "r", "gen1", 10, true, NULL));
    LC_ASSERT_EQ(set_if(s, "r", "gen1-again", 11, true, NULL), -EEXIST); /* no longer absent */
    LC_ASSERT_OK(set_if(s, "r", "gen2", 12, false, "gen1"));
    LC_ASSERT_EQ(set_if(s, "r", "gen2-other", 13, false, "gen1"), -EEXIST); /* lost the race */
    LC_ASSERT_EQ(set_if(s, "r", "x", 14, false, "gen"), -EEXIST);        /* a prefix is not equal */
    LC_ASSERT_EQ(set_if(s, "missing", "x", 15, false, "gen1"), -EEXIST); /* nothing stored */
    char got[128];
    listing(s, "t-cas", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "r=gen2@12;");
    LC_ASSERT_OK(set_if(s, "r", "", 16, false, "gen2")); /* an empty value can be expected too */
    LC_ASSERT_OK(set_if(s, "r", "gen4", 17, false, ""));
    listing(s, "t-cas", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "r=gen4@17;");
    lc_settings_store_free(s);
}

static void test_caps(void)
{
    lc_settings_store_t *s = open_store();
    char name[LC_SETTINGS_NAME_MAX_BYTES + 2];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    LC_ASSERT_EQ(set(s, "t3", name, "v", 1), LC_ETOOBIG); /* 257 bytes */
    name[LC_SETTINGS_NAME_MAX_BYTES] = '\0';
    LC_ASSERT_OK(set(s, "t3", name, "v", 1)); /* exactly 256 */

    char *value = malloc(LC_SETTINGS_VALUE_MAX_BYTES + 2);
    memset(value, 'v', LC_SETTINGS_VALUE_MAX_BYTES + 1);
    value[LC_SETTINGS_VALUE_MAX_BYTES + 1] = '\0';
    LC_ASSERT_EQ(set(s, "t3", "big", value, 1), LC_ETOOBIG);
    value[LC_SETTINGS_VALUE_MAX_BYTES] = '\0';
    LC_ASSERT_OK(set(s, "t3", "big", value, 1));
    free(value);

    LC_ASSERT_EQ(set(s, "t3", "", "v", 1), LC_EINPUT);
    LC_ASSERT_EQ(lc_settings_store_delete(s, "t3", "", 1), LC_EINPUT);
    char tenant[LC_SETTINGS_TENANT_MAX_BYTES + 2];
    memset(tenant, 't', sizeof(tenant) - 1);
    tenant[sizeof(tenant) - 1] = '\0';
    LC_ASSERT_EQ(set(s, tenant, "k", "v", 1), LC_EINPUT);
    tenant[LC_SETTINGS_TENANT_MAX_BYTES] = '\0';
    name[LC_SETTINGS_NAME_MAX_BYTES] = '\0';
    LC_ASSERT_OK(set(s, tenant, name, "v", 1)); /* the longest key LMDB must take */
    lc_settings_store_free(s);
}

static void test_count_cap_per_tenant(void)
{
    lc_settings_store_t *s = open_store();
    char name[32];
    for (int i = 0; i < LC_SETTINGS_MAX_PER_TENANT; i++) {
        snprintf(name, sizeof(name), "k%04d", i);
        LC_ASSERT_OK(set(s, "t4", name, "v", 1));
    }
    LC_ASSERT_EQ(set(s, "t4", "one-too-many", "v", 1), LC_EFULL);
    LC_ASSERT_OK(set(s, "t4", "k0000", "updated", 2)); /* updates still work when full */
    LC_ASSERT_OK(set(s, "t5", "k", "v", 1));           /* other tenants are unaffected */
    LC_ASSERT_OK(lc_settings_store_delete(s, "t4", "k0001", 5));
    LC_ASSERT_OK(set(s, "t4", "one-more", "v", 1)); /* room again */

    lc_arena_t *a = lc_arena_new(1u << 20);
    lc_setting_t *v;
    size_t n;
    LC_ASSERT_OK(lc_settings_store_list(s, "t4", a, &v, &n));
    LC_ASSERT_EQ(n, LC_SETTINGS_MAX_PER_TENANT);
    LC_ASSERT_STR_EQ(v[0].name, "k0000");
    LC_ASSERT_STR_EQ(v[0].value, "updated");
    LC_ASSERT_STR_EQ(v[1].name, "k0002");
    LC_ASSERT_STR_EQ(v[n - 1].name, "one-more");
    lc_arena_free(a);

    /* a listing that does not fit the caller's arena is reported, not truncated */
    a = lc_arena_new(4096);
    LC_ASSERT_EQ(lc_settings_store_list(s, "t4", a, &v, &n), LC_ETOOBIG);
    lc_arena_free(a);
    lc_settings_store_free(s);
}

/* Stamps compare as numbers across the whole int64 range (Redis keeps them
 * as text: order must not depend on the digits' count or the sign). */
static void test_stamp_order_extremes(void)
{
    lc_settings_store_t *s = open_store();
    LC_ASSERT_OK(set(s, "t6", "k", "min", INT64_MIN));
    LC_ASSERT_OK(set(s, "t6", "k", "neg", -1));
    LC_ASSERT_EQ(set(s, "t6", "k", "older", -2), -EEXIST);
    LC_ASSERT_OK(set(s, "t6", "k", "nine", 9));
    LC_ASSERT_EQ(set(s, "t6", "k", "eight", 8), -EEXIST);
    LC_ASSERT_OK(set(s, "t6", "k", "ten", 10)); /* one more digit */
    LC_ASSERT_OK(set(s, "t6", "k", "max", INT64_MAX));
    LC_ASSERT_EQ(set(s, "t6", "k", "big", INT64_MAX - 1), -EEXIST);
    char got[128];
    listing(s, "t6", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "k=max@9223372036854775807;");
    LC_ASSERT_EQ(lc_settings_store_delete(s, "t6", "k", INT64_MAX - 1), -EEXIST);
    LC_ASSERT_OK(lc_settings_store_delete(s, "t6", "k", INT64_MAX));
    listing(s, "t6", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "");
    lc_settings_store_free(s);
}

static void run_backend_tests(void)
{
    test_set_get_sorted_and_persisted();
    test_tenants_isolated();
    test_older_write_loses();
    test_conditional_write();
    test_caps();
    test_count_cap_per_tenant();
    test_stamp_order_extremes();
}

static void test_lmdb(void)
{
    use_redis = false;
    run_backend_tests();
}

static void test_redis_backend(void)
{
    LC_ASSERT_OK(test_redis_start(&redis, false));
    if (redis.pid <= 0)
        return;
    use_redis = true;
    run_backend_tests();
}

/* Two stores (two queriers) on one server: each sees the other's writes. */
static void test_redis_shared(void)
{
    if (redis.pid <= 0)
        return;
    lc_settings_store_t *a = open_store(), *b = open_store();
    LC_ASSERT_OK(set(a, "shared", "k", "from-a", 10));
    char got[128];
    listing(b, "shared", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "k=from-a@10;");
    LC_ASSERT_EQ(set(b, "shared", "k", "stale", 9), -EEXIST); /* a's write is newer */
    LC_ASSERT_OK(lc_settings_store_delete(b, "shared", "k", 11));
    listing(a, "shared", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "");
    /* what the hash holds: the stamp as 20 digits, then the value */
    LC_ASSERT_OK(set(a, "shared", "k2", "v", 12));
    LC_ASSERT_EQ(test_redis_int(&redis, "HLEN ember:settings:shared"), 1);
    LC_ASSERT_EQ(test_redis_int(&redis, "HSTRLEN ember:settings:shared k2"), 21);
    lc_settings_store_free(a);
    lc_settings_store_free(b);
}

/* A hash not written by us is reported, not half-read. */
static void test_redis_malformed(void)
{
    if (redis.pid <= 0)
        return;
    LC_ASSERT_EQ(test_redis_int(&redis, "HSET ember:settings:bad k short"), 1);
    lc_settings_store_t *s = open_store();
    lc_arena_t *a = lc_arena_new(1u << 20);
    lc_setting_t *v;
    size_t n;
    LC_ASSERT_EQ(lc_settings_store_list(s, "bad", a, &v, &n), LC_ECORRUPT);
    lc_arena_free(a);
    lc_settings_store_free(s);
}

/* Redis down: -ENOTCONN at once (within the timeout); back: the same store
 * works again (it reconnects on its own). */
static void test_redis_down_and_back(void)
{
    if (redis.pid <= 0)
        return;
    lc_settings_store_t *s = open_store();
    LC_ASSERT_OK(set(s, "t7", "k", "before", 1));
    test_redis_stop(&redis, SIGKILL);
    LC_ASSERT_EQ(set(s, "t7", "k", "during", 2), -ENOTCONN);
    lc_arena_t *a = lc_arena_new(1u << 20);
    lc_setting_t *v;
    size_t n;
    LC_ASSERT_EQ(lc_settings_store_list(s, "t7", a, &v, &n), -ENOTCONN);
    LC_ASSERT_EQ(lc_settings_store_delete(s, "t7", "k", 3), -ENOTCONN);
    lc_arena_free(a);
    LC_ASSERT_OK(test_redis_restart(&redis)); /* no AOF: it comes back empty */
    LC_ASSERT_OK(set(s, "t7", "k", "after", 4));
    char got[128];
    listing(s, "t7", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "k=after@4;");
    lc_settings_store_free(s);
}

static void test_redis_bad_url(void)
{
    lc_settings_store_t *s = NULL;
    LC_ASSERT_EQ(lc_settings_store_open_redis("http://not-redis", 0, &s), LC_EINPUT);
    LC_CHECK(s == NULL);
}

static void test_teardown(void)
{
    test_redis_finish(&redis);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(test_setup, test_lmdb, test_redis_backend, test_redis_shared, test_redis_malformed,
             test_redis_down_and_back, test_redis_bad_url, test_teardown)
