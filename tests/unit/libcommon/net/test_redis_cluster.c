/*
 * test_redis_cluster.c — Redis Cluster routing (lc/redis_cluster.h) against
 * a real redis-server in cluster mode: key slots agree with the server's own
 * CLUSTER KEYSLOT (tags, empty and nested braces, binary keys); the slot map
 * parsed from its CLUSTER SLOTS gives every assigned slot to it and no other;
 * a link routed by key comes up once the map is known and runs commands;
 * MOVED / ASK texts parse, and malformed ones and maps are refused.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lc/redis.h"
#include "lc/redis_cluster.h"
#include "lc_test.h"
#include "test_redis_server.h"

static long long server_slot(redisContext *c, const char *key, size_t len)
{
    redisReply *r = redisCommand(c, "CLUSTER KEYSLOT %b", key, len);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

static void test_key_slots_agree_with_redis(void)
{
    test_redis_t srv = {.cluster = true};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    redisContext *c = test_redis_connect(&srv);
    LC_CHECK(c != NULL);
    static const char *const keys[] = {"123456789",
                                       "foo",
                                       "{user1000}.following",
                                       "{user1000}.followers",
                                       "foo{}{bar}",
                                       "foo{{bar}}zap",
                                       "foo{bar}{zap}",
                                       "{bar",
                                       "}{",
                                       "{}",
                                       "",
                                       "ember:ingest:0",
                                       "ember:ingest:15",
                                       "ember:claimed:{ember:ingest:3}:ingesters:a",
                                       "ember:dead:{ember:ingest:3}",
                                       "{ember:members:ingester}:registry"};
    for (size_t i = 0; i < LC_ARRAY_LEN(keys); i++)
        LC_ASSERT_EQ((long long)lc_redis_key_slot(keys[i], strlen(keys[i])),
                     server_slot(c, keys[i], strlen(keys[i])));
    uint64_t x = 88172645463325252ull; /* xorshift: the same keys every run */
    for (int i = 0; i < 500; i++) {
        char key[24];
        size_t len = (size_t)(i % 23) + 1;
        for (size_t j = 0; j < len; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            key[j] = (char)(j % 5 == 2 ? '{' : j % 7 == 4 ? '}' : (char)(x & 0xff));
        }
        LC_ASSERT_EQ((long long)lc_redis_key_slot(key, len), server_slot(c, key, len));
    }
    redisFree(c);
    test_redis_finish(&srv);
}

static void test_slot_map_from_a_real_node(void)
{
    test_redis_t srv = {.cluster = true};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    LC_ASSERT_EQ(test_redis_int(&srv, "CLUSTER ADDSLOTSRANGE 100 8191"), -1); /* +OK */
    redisContext *c = test_redis_connect(&srv);
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    lc_redis_slot_map_t m = {0};
    LC_ASSERT_OK(lc_redis_slot_map_parse(&m, r));
    LC_ASSERT_EQ(m.n_nodes, 1);
    LC_ASSERT_EQ(m.nodes[0].port, srv.port);
    for (int s = 0; s < LC_REDIS_SLOTS; s++)
        LC_ASSERT_EQ(m.owner[s], s >= 100 && s <= 8191 ? 1 : 0);
    freeReplyObject(r);
    lc_redis_slot_map_fini(&m);
    redisFree(c);
    test_redis_finish(&srv);
}

typedef struct ping_s { /* one XADD's answer */
    int status;
    bool answered, pong;
} ping_t;

static void on_ping(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    ping_t *p = data;
    (void)r;
    p->answered = true;
    p->status = status;
    p->pong = status == 0 && reply->type == REDIS_REPLY_STRING;
}

static bool is_up(void *arg)
{
    return lc_redis_is_up(arg);
}

static bool answered(void *arg)
{
    return ((ping_t *)arg)->answered;
}

static bool closed;
static void on_closed(void *data)
{
    (void)data;
    closed = true;
}

static bool is_closed(void *arg)
{
    (void)arg;
    return closed;
}

/* Every slot assigned: the node says cluster_state:ok (not at once). */
static bool cluster_ok(const test_redis_t *srv)
{
    redisContext *c = test_redis_connect(srv);
    redisReply *r = c ? redisCommand(c, "CLUSTER INFO") : NULL;
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

/* A link routed by key waits for the map, then reaches the slot's owner. */
static void test_routed_link_reaches_the_owner(void)
{
    test_redis_t srv = {.cluster = true};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    LC_ASSERT_EQ(test_redis_int(&srv, "CLUSTER ADDSLOTSRANGE 0 16383"), -1);
    for (int i = 0; i < 1000 && !cluster_ok(&srv); i++) /* up to 10 s */
        usleep(10000);
    LC_CHECK(cluster_ok(&srv));
    uv_loop_t loop;
    uv_loop_init(&loop);
    char seeds[300];
    snprintf(seeds, sizeof(seeds), "redis://127.0.0.1:1,%s", srv.url); /* the first is dead */
    lc_redis_cluster_opts_t co = {.seeds = seeds, .refresh_ms = 100, .cmd_timeout_ms = 1000};
    lc_redis_cluster_t *cl = NULL;
    LC_ASSERT_OK(lc_redis_cluster_new(&loop, &co, &cl));
    lc_redis_opts_t ro = {.name = "routed", .backoff_max_ms = 200};
    lc_redis_cluster_route(cl, "ember:ingest:7", &ro);
    lc_redis_t *r = NULL;
    LC_ASSERT_OK(lc_redis_new(&loop, &ro, &r));
    LC_CHECK(test_run_until(&loop, is_up, r, 10000));
    LC_CHECK(lc_redis_cluster_has_map(cl));
    ping_t p = {0};
    const char *argv[] = {"XADD", "ember:ingest:7", "*", "m", "x"};
    LC_ASSERT_OK(lc_redis_command(r, 0, on_ping, &p, 5, argv, NULL));
    LC_CHECK(test_run_until(&loop, answered, &p, 3000));
    LC_ASSERT_EQ(p.status, 0);
    LC_CHECK(p.pong); /* an entry id, not an error */
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:ingest:7"), 1);
    closed = false;
    lc_redis_close(r, NULL, NULL);
    lc_redis_cluster_close(cl, on_closed, NULL);
    LC_CHECK(test_run_until(&loop, is_closed, NULL, 3000));
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static void test_redirects_parse(void)
{
    uint16_t slot;
    lc_redis_node_t to;
    bool ask;
    const char *moved = "MOVED 3999 127.0.0.1:6381";
    LC_ASSERT_OK(lc_redis_redirect_parse(moved, strlen(moved), &slot, &to, &ask));
    LC_ASSERT_EQ(slot, 3999);
    LC_ASSERT_STR_EQ(to.host, "127.0.0.1");
    LC_ASSERT_EQ(to.port, 6381);
    LC_CHECK(!ask);
    const char *ask6 = "ASK 16383 ::1:7000";
    LC_ASSERT_OK(lc_redis_redirect_parse(ask6, strlen(ask6), &slot, &to, &ask));
    LC_ASSERT_STR_EQ(to.host, "::1");
    LC_CHECK(ask);
    static const char *const bad[] = {"MOVED 16384 a:1", "MOVED x a:1",  "MOVED 1 a",
                                      "MOVED 1 :1",      "MOVED 1 a:0",  "MOVED 1 a:70000",
                                      "ERR 1 a:1",       "MOVED 1 a:1x", "MOVED"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++)
        LC_ASSERT_EQ(lc_redis_redirect_parse(bad[i], strlen(bad[i]), &slot, &to, &ask), LC_EINPUT);
}

static void test_bad_maps_and_seeds_refused(void)
{
    redisReply num = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    lc_redis_slot_map_t m = {0};
    LC_ASSERT_EQ(lc_redis_slot_map_parse(&m, &num), LC_ECORRUPT);
    /* a range whose end is below its start */
    redisReply lo = {.type = REDIS_REPLY_INTEGER, .integer = 10};
    redisReply hi = {.type = REDIS_REPLY_INTEGER, .integer = 5};
    redisReply host = {.type = REDIS_REPLY_STRING, .str = "h", .len = 1};
    redisReply port = {.type = REDIS_REPLY_INTEGER, .integer = 7000};
    redisReply *ep_el[] = {&host, &port};
    redisReply ep = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = ep_el};
    redisReply *range_el[] = {&lo, &hi, &ep};
    redisReply range = {.type = REDIS_REPLY_ARRAY, .elements = 3, .element = range_el};
    redisReply *top_el[] = {&range};
    redisReply top = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = top_el};
    LC_ASSERT_EQ(lc_redis_slot_map_parse(&m, &top), LC_ECORRUPT);
    hi.integer = 10;
    LC_ASSERT_OK(lc_redis_slot_map_parse(&m, &top));
    LC_ASSERT_EQ(m.owner[10], 1);
    LC_ASSERT_EQ(m.owner[11], 0);
    lc_redis_slot_map_fini(&m);
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_redis_cluster_t *cl = NULL;
    static const char *const seeds[] = {"", "redis://a:1,", "redis://a:1/2", "http://a:1",
                                        "redis://a:1,,redis://b:2"};
    for (size_t i = 0; i < LC_ARRAY_LEN(seeds); i++) {
        lc_redis_cluster_opts_t co = {.seeds = seeds[i]};
        LC_ASSERT_EQ(lc_redis_cluster_new(&loop, &co, &cl), LC_EINPUT);
    }
    LC_ASSERT_OK(uv_loop_close(&loop));
}

LC_TEST_MAIN(test_redirects_parse, test_bad_maps_and_seeds_refused, test_key_slots_agree_with_redis,
             test_slot_map_from_a_real_node, test_routed_link_reaches_the_owner)
