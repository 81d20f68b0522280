/*
 * test_transport_redis_wait.c — wait_replicas against a real master and
 * replica (redis-server --replicaof): with the replica frozen (SIGSTOP) the
 * master holds every XADD but no publish is acknowledged; once the replica
 * thaws, every publish is acknowledged (each entry once: the resends find
 * their dedupe key), and after the master is killed (SIGKILL) the replica
 * holds every acknowledged message. Without retries, a WAIT that finds too
 * few replicas fails the publish. A consumer with wait_replicas applies a
 * batch only once a replica has its deliveries: nothing while the replica
 * is frozen, everything (once) after it thaws. The oracle is the replica's
 * own stream, read with a plain hiredis client.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lc/redis.h"
#include "lc/transport.h"
#include "lc_test.h"
#include "test_redis_server.h"

#define N_MSGS 40

typedef struct pubs_s {
    int ok, err, last_err;
    bool acked[N_MSGS];
} pubs_t;

typedef struct one_s {
    pubs_t *p;
    int n;
} one_t;

static one_t ones[N_MSGS];

static void on_published(int status, void *data)
{
    one_t *one = data;
    if (status == 0) {
        one->p->ok++;
        one->p->acked[one->n] = true;
    } else {
        one->p->err++;
        one->p->last_err = status;
    }
}

static int publish(lc_transport_t *t, pubs_t *p, int n)
{
    char msg[32], id[32];
    int len = snprintf(msg, sizeof(msg), "msg-%d", n);
    int id_len = snprintf(id, sizeof(id), "id-%d", n);
    ones[n] = (one_t){p, n};
    return lc_transport_publish(t, (const uint8_t *)msg, (size_t)len, 0, (const uint8_t *)id,
                                (size_t)id_len, on_published, &ones[n]);
}

typedef struct answered_s {
    pubs_t *p;
    int want;
} answered_t;

static bool all_answered(void *arg)
{
    answered_t *a = arg;
    return a->p->ok + a->p->err >= a->want;
}

static bool link_up(void *arg)
{
    lc_redis_transport_stats_t st;
    return lc_transport_redis_stats(arg, &st) == 0 && st.up;
}

static bool closed;
static void on_closed(void *data)
{
    (void)data;
    closed = true;
}

/* Closes t; the loop runs until its handles are gone only when it was the
 * last transport (others keep timers running). */
static void close_one(uv_loop_t *loop, lc_transport_t *t, bool last)
{
    closed = false;
    lc_transport_close(t, on_closed, NULL);
    while (!closed)
        uv_run(loop, UV_RUN_ONCE);
    if (last)
        uv_run(loop, UV_RUN_DEFAULT);
}

static void close_transport(uv_loop_t *loop, lc_transport_t *t)
{
    close_one(loop, t, true);
}

/* Whether the master counts one replica online (the handshake is done). */
static bool replica_attached(const test_redis_t *master)
{
    redisContext *c = test_redis_connect(master);
    redisReply *r = c ? redisCommand(c, "INFO replication") : NULL;
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "connected_slaves:1") &&
              strstr(r->str, "state=online");
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

static void start_pair(test_redis_t *master, test_redis_t *replica)
{
    LC_ASSERT_OK(test_redis_start(master, false));
    replica->replica_of = master->port;
    LC_ASSERT_OK(test_redis_start(replica, false));
    for (int i = 0; i < 1000 && !replica_attached(master); i++) /* up to 10 s */
        usleep(10000);
    LC_CHECK(replica_attached(master));
}

/* The messages of the replica's stream: how often each number appears. */
static void replica_counts(const test_redis_t *replica, int counts[N_MSGS])
{
    memset(counts, 0, sizeof(int) * N_MSGS);
    redisContext *c = test_redis_connect(replica);
    LC_CHECK(c != NULL);
    redisReply *r = redisCommand(c, "XRANGE ember:ingest:0 - +");
    LC_CHECK(r && r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; r && i < r->elements; i++) {
        const redisReply *fields = r->element[i]->element[1];
        int n = -1;
        if (fields->elements == 2 && sscanf(fields->element[1]->str, "msg-%d", &n) == 1 && n >= 0 &&
            n < N_MSGS)
            counts[n]++;
    }
    if (r)
        freeReplyObject(r);
    redisFree(c);
}

static lc_redis_transport_opts_t wait_opts(const test_redis_t *master)
{
    return (lc_redis_transport_opts_t){
        .url = master->url,
        .partitions = 1,
        .monitor_interval_ms = 50,
        .cmd_timeout_ms = 2000,
        .wait_replicas = 1,
        .wait_timeout_ms = 50,
    };
}

/* A frozen replica: the master has every entry, nothing is acknowledged;
 * thawed, everything is, once; the master dies and the replica has it all. */
static void test_ack_waits_for_the_replica(void)
{
    test_redis_t master = {0}, replica = {0};
    start_pair(&master, &replica);
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_redis_transport_opts_t o = wait_opts(&master);
    o.publish_retry_ms = 60000; /* far beyond the test: only the replica decides */
    lc_transport_t *t = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(&loop, &o, NULL, NULL, &t));
    LC_CHECK(test_run_until(&loop, link_up, t, 3000));
    pubs_t pubs = {0};
    kill(replica.pid, SIGSTOP);
    for (int i = 0; i < N_MSGS; i++)
        LC_ASSERT_OK(publish(t, &pubs, i));
    /* Every XADD reaches the master; not one may be acknowledged meanwhile. */
    for (int i = 0; i < 1000 && test_redis_int(&master, "XLEN ember:ingest:0") < N_MSGS; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(10000);
    LC_ASSERT_EQ(test_redis_int(&master, "XLEN ember:ingest:0"), N_MSGS);
    uint64_t end = uv_hrtime() + 300 * 1000000ull;
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(pubs.ok + pubs.err, 0);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_CHECK(st.wait_short > 0);
    kill(replica.pid, SIGCONT);
    answered_t a = {&pubs, N_MSGS};
    LC_CHECK(test_run_until(&loop, all_answered, &a, 20000));
    LC_ASSERT_EQ(pubs.ok, N_MSGS);
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_CHECK(st.publish_duplicates > 0); /* resends found the entry, added nothing */
    test_redis_stop(&master, SIGKILL);
    int counts[N_MSGS];
    replica_counts(&replica, counts);
    for (int i = 0; i < N_MSGS; i++)
        LC_ASSERT_EQ(counts[i], pubs.acked[i] ? 1 : 0);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&replica);
    test_redis_finish(&master);
}

/* Without retries, a WAIT that finds too few replicas is a 503 at once. */
static void test_short_wait_without_retries_fails(void)
{
    test_redis_t master = {0};
    LC_ASSERT_OK(test_redis_start(&master, false)); /* no replica at all */
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_redis_transport_opts_t o = wait_opts(&master);
    lc_transport_t *t = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(&loop, &o, NULL, NULL, &t));
    LC_CHECK(test_run_until(&loop, link_up, t, 3000));
    pubs_t pubs = {0};
    LC_ASSERT_OK(publish(t, &pubs, 0));
    answered_t a = {&pubs, 1};
    LC_CHECK(test_run_until(&loop, all_answered, &a, 5000));
    LC_ASSERT_EQ(pubs.err, 1);
    LC_ASSERT_EQ(pubs.last_err, LC_REDIS_EDOWN);
    LC_ASSERT_EQ(test_redis_int(&master, "XLEN ember:ingest:0"), 1); /* what 503 cannot tell */
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&master);
}

static atomic_int applied[N_MSGS];

static int count_consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    (void)data;
    for (size_t i = 0; i < n; i++) {
        int k = -1;
        char text[16] = {0};
        memcpy(text, msgs[i].data, msgs[i].len < 15 ? msgs[i].len : 15);
        if (sscanf(text, "msg-%d", &k) == 1 && k >= 0 && k < N_MSGS)
            atomic_fetch_add(&applied[k], 1);
    }
    return 0;
}

static int applied_total(void)
{
    int sum = 0;
    for (int i = 0; i < N_MSGS; i++)
        sum += atomic_load(&applied[i]);
    return sum;
}

static bool all_applied(void *arg)
{
    (void)arg;
    return applied_total() >= N_MSGS;
}

/* Deliveries unknown to the replica are not applied: a failover would hand
 * them out again (maybe to another consumer) and they would be stored twice. */
static void test_consumer_applies_after_the_replica(void)
{
    test_redis_t master = {0}, replica = {0};
    start_pair(&master, &replica);
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_redis_transport_opts_t po = wait_opts(&master);
    po.wait_replicas = 0; /* publish while the replica is frozen */
    lc_transport_t *pub = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(&loop, &po, NULL, NULL, &pub));
    lc_redis_transport_opts_t co = wait_opts(&master);
    co.consumer_id = "c";
    co.block_ms = 50;
    lc_transport_t *cons = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(&loop, &co, count_consume, NULL, &cons));
    LC_CHECK(test_run_until(&loop, link_up, pub, 3000));
    LC_CHECK(test_run_until(&loop, link_up, cons, 3000));
    kill(replica.pid, SIGSTOP);
    pubs_t pubs = {0};
    for (int i = 0; i < N_MSGS; i++)
        LC_ASSERT_OK(publish(pub, &pubs, i));
    answered_t a = {&pubs, N_MSGS};
    LC_CHECK(test_run_until(&loop, all_answered, &a, 5000));
    LC_ASSERT_EQ(pubs.ok, N_MSGS);
    /* The consumer reads them (the master's group shows them pending) ... */
    for (int i = 0; i < 500 && test_redis_int(&master, "XPENDING ember:ingest:0 ingesters") >= 0;
         i++) {
        redisContext *c = test_redis_connect(&master);
        redisReply *r = redisCommand(c, "XPENDING ember:ingest:0 ingesters");
        long long pending = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                    r->element[0]->type == REDIS_REPLY_INTEGER
                                ? r->element[0]->integer
                                : 0;
        freeReplyObject(r);
        redisFree(c);
        if (pending > 0)
            break;
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(10000);
    }
    uint64_t end = uv_hrtime() + 300 * 1000000ull;
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(applied_total(), 0); /* ... but applies nothing */
    kill(replica.pid, SIGCONT);
    LC_CHECK(test_run_until(&loop, all_applied, NULL, 20000));
    for (int i = 0; i < N_MSGS; i++)
        LC_ASSERT_EQ(atomic_load(&applied[i]), 1);
    close_one(&loop, cons, false);
    close_transport(&loop, pub);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&replica);
    test_redis_finish(&master);
}

LC_TEST_MAIN(test_short_wait_without_retries_fails, test_ack_waits_for_the_replica,
             test_consumer_applies_after_the_replica)
