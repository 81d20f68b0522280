/*
 * test_transport_redis.c — the redis transport against a real redis-server:
 * publish -> consume -> XACK; a publish callback only after Redis confirmed
 * the XADD (the server is frozen with SIGSTOP meanwhile); fail-fast while
 * Redis is down and recovery without recreating the transport across a
 * crash of an AOF (appendfsync always) server; a failed batch stays pending
 * and is claimed by another consumer; entries of a dead consumer are claimed;
 * trimming never drops a pending entry, nor one a slower group (zone) has
 * not read; the backlog limit (of the slowest group) gives LC_EFULL until
 * consumers catch up; a consumer paused between applying and acking whose
 * entries were claimed meanwhile forgets them (and one that restarts with a
 * claims record forgets it before reading); a message id is stored once
 * however often it is published; publishes in flight when Redis freezes or
 * crashes are retried after it is back and land exactly once, and fail (503)
 * only past publish_retry_ms, which also bounds close; an entry consume sets
 * aside goes to ember:dead:<p> with its reason before it is acked (never
 * acked while that XADD fails), is counted, and its stream trims as usual.
 * Every test ends with
 * uv_loop_close() == 0.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lc/redis.h"
#include "lc/transport.h"
#include "lc_test.h"
#include "test_redis_server.h"

#define MAX_MSGS 4096

/* ---- a consumer whose results the test controls (it runs on the consumer thread) */

typedef struct sink_s {
    atomic_int fail; /* consume returns this while non-zero */
    atomic_int calls, applied;
    atomic_int seen[MAX_MSGS]; /* applications per message number */
    atomic_int bad;            /* messages that did not parse or had no id */
    atomic_int hold_ms;        /* the next batch returns only after this (then 0) */
    atomic_int forgets, forgotten[MAX_MSGS];
    atomic_int calls_at_first_forget; /* consume calls before the first forget: -1 = none */
    atomic_int reject_plus1;          /* message number + 1 that consume sets aside; 0: none */
    char delivery[MAX_MSGS][64];      /* per message: its delivery id (consumer thread) */
} sink_t;

static int msg_number(const lc_transport_msg_t *m)
{
    char text[32];
    if (m->len >= sizeof(text) || !m->id || !m->id[0])
        return -1;
    memcpy(text, m->data, m->len);
    text[m->len] = 0;
    int n = -1;
    return sscanf(text, "msg-%d", &n) == 1 && n >= 0 && n < MAX_MSGS ? n : -1;
}

static int sink_consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    sink_t *s = data;
    atomic_fetch_add(&s->calls, 1);
    int fail = atomic_load(&s->fail);
    if (fail)
        return fail;
    for (size_t i = 0; i < n; i++) {
        int k = msg_number(&msgs[i]);
        if (k < 0)
            atomic_fetch_add(&s->bad, 1);
        else
            atomic_fetch_add(&s->seen[k], 1);
        bool reject = k >= 0 && k + 1 == atomic_load(&s->reject_plus1);
        msgs[i].reject_err = reject ? LC_EINPUT : 0;
        msgs[i].reject_reason = reject ? "test: a sum over int64" : NULL;
    }
    atomic_fetch_add(&s->applied, (int)n);
    for (size_t i = 0; i < n; i++) {
        int k = msg_number(&msgs[i]);
        if (k >= 0 && msgs[i].delivery)
            snprintf(s->delivery[k], sizeof(s->delivery[k]), "%s", msgs[i].delivery);
    }
    int hold = atomic_exchange(&s->hold_ms, 0);
    if (hold)
        uv_sleep((unsigned)hold); /* applied, not yet acked: a pause (GC, SIGSTOP) */
    return 0;
}

/* Marks the messages behind the deliveries forgotten (consumer thread). */
static int sink_forget(const char *const *deliveries, size_t n, void *data)
{
    sink_t *s = data;
    if (atomic_fetch_add(&s->forgets, 1) == 0)
        atomic_store(&s->calls_at_first_forget, atomic_load(&s->calls));
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < MAX_MSGS; k++)
            if (strcmp(s->delivery[k], deliveries[i]) == 0)
                atomic_fetch_add(&s->forgotten[k], 1);
    return 0;
}

/* ---- publishers */

typedef struct pubs_s {
    int ok, err, last_err;
    bool acked[MAX_MSGS];    /* callback reported 0 */
    const test_redis_t *srv; /* when set, check the entry exists at callback time */
    long long xlen_at_first_ack;
} pubs_t;

typedef struct pub_one_s {
    pubs_t *p;
    int n;
} pub_one_t;

static pub_one_t slots[MAX_MSGS];

static void on_published(int status, void *data)
{
    pub_one_t *one = data;
    pubs_t *p = one->p;
    if (status == 0) {
        if (p->srv && p->ok == 0)
            p->xlen_at_first_ack = test_redis_int(p->srv, "XLEN ember:ingest:0");
        p->ok++;
        p->acked[one->n] = true;
    } else {
        p->err++;
        p->last_err = status;
    }
}

/* Message n, published under the dedupe id "id-<id>". */
static int publish_id(lc_transport_t *t, pubs_t *p, int n, uint32_t partition, int id)
{
    char msg[32], idtext[32];
    int len = snprintf(msg, sizeof(msg), "msg-%d", n);
    int id_len = snprintf(idtext, sizeof(idtext), "id-%d", id);
    slots[n] = (pub_one_t){p, n};
    return lc_transport_publish(t, (const uint8_t *)msg, (size_t)len, partition,
                                (const uint8_t *)idtext, (size_t)id_len, on_published, &slots[n]);
}

static int publish_n(lc_transport_t *t, pubs_t *p, int n, uint32_t partition)
{
    return publish_id(t, p, n, partition, n);
}

/* ---- loop helpers */

typedef struct wait_s {
    pubs_t *p;
    sink_t *s;
    int want;
    lc_transport_t *t;
} wait_t;

static bool all_answered(void *arg)
{
    wait_t *w = arg;
    return w->p->ok + w->p->err >= w->want;
}
static bool all_applied(void *arg)
{
    wait_t *w = arg;
    return atomic_load(&w->s->applied) >= w->want;
}
static bool consume_called(void *arg)
{
    wait_t *w = arg;
    return atomic_load(&w->s->calls) >= w->want;
}
static bool link_up(void *arg)
{
    lc_redis_transport_stats_t st;
    return lc_transport_redis_stats(arg, &st) == 0 && st.up;
}
static bool links_up(void *arg)
{
    lc_redis_transport_stats_t st;
    return lc_transport_redis_stats(arg, &st) == 0 && st.up && st.consumer_up;
}
static bool link_down(void *arg)
{
    return !link_up(arg);
}

static bool closed_flag;
static void on_closed(void *data)
{
    LC_UNUSED(data);
    closed_flag = true;
}

static void close_transport(uv_loop_t *loop, lc_transport_t *t)
{
    closed_flag = false;
    lc_transport_close(t, on_closed, NULL);
    while (!closed_flag && uv_run(loop, UV_RUN_ONCE))
        ;
    LC_CHECK(closed_flag);
}

/* Whether the exposition of m has this text (a sample line and value). */
static bool metrics_show(lc_metrics_t *m, const char *text)
{
    lc_buf_t b;
    lc_buf_init(&b, 1 << 20);
    bool found = lc_metrics_render(m, &b) == 0 && lc_buf_putc(&b, '\0') == 0 &&
                 strstr((const char *)b.data, text) != NULL;
    lc_buf_fini(&b);
    return found;
}

static lc_redis_transport_opts_t fast_opts(const test_redis_t *srv, const char *consumer)
{
    return (lc_redis_transport_opts_t){
        .url = srv->url,
        .partitions = 4,
        .consumer_id = consumer,
        .batch = 64,
        .block_ms = 100,
        .claim_idle_ms = 300,
        .claim_interval_ms = 100,
        .monitor_interval_ms = 50,
        .trim_interval_ms = 100,
        .cmd_timeout_ms = 1000,
        .consume_retry_ms = 50,
    };
}

static lc_transport_t *open_transport(uv_loop_t *loop, const lc_redis_transport_opts_t *o,
                                      sink_t *s)
{
    lc_transport_t *t = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(loop, o, s ? sink_consume : NULL, s, &t));
    LC_CHECK(test_run_until(loop, s ? links_up : link_up, t, 3000));
    return t;
}

static long long pending_total(const test_redis_t *srv, int partitions)
{
    long long sum = 0;
    for (int p = 0; p < partitions; p++) {
        redisContext *c = test_redis_connect(srv);
        redisReply *r = redisCommand(c, "XPENDING ember:ingest:%d ingesters", p);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
            r->element[0]->type == REDIS_REPLY_INTEGER)
            sum += r->element[0]->integer;
        else
            sum = -1000000;
        if (r)
            freeReplyObject(r);
        redisFree(c);
    }
    return sum;
}

/* ---- tests */

static void test_publish_consume_ack(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t sink = {0};
    pubs_t pubs = {0};
    lc_metrics_t *metrics = lc_metrics_new();
    lc_redis_transport_opts_t o = fast_opts(&srv, "ingester-0");
    o.metrics = metrics;
    lc_transport_t *t = open_transport(&loop, &o, &sink);
    for (int i = 0; i < 200; i++)
        LC_ASSERT_OK(publish_n(t, &pubs, i, (uint32_t)i));
    wait_t w = {&pubs, &sink, 200, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 5000));
    LC_ASSERT_EQ(pubs.ok, 200);
    LC_CHECK(test_run_until(&loop, all_applied, &w, 5000));
    for (int i = 0; i < 200; i++)
        LC_ASSERT_EQ(atomic_load(&sink.seen[i]), 1);
    LC_ASSERT_EQ(atomic_load(&sink.bad), 0);
    uv_sleep(20);
    uv_run(&loop, UV_RUN_NOWAIT); /* the last XACKs */
    close_transport(&loop, t);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0); /* everything acked */
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:ingest:1"), 50);
    LC_ASSERT_OK(uv_loop_close(&loop));
    LC_CHECK(metrics_show(metrics, "ember_redis_published_total 200"));
    LC_CHECK(metrics_show(metrics, "ember_redis_consumed_total 200"));
    LC_CHECK(metrics_show(metrics, "ember_redis_xadd_duration_seconds_count 200"));
    lc_metrics_free(metrics);
    test_redis_finish(&srv);
}

/* A frozen server (SIGSTOP) never confirms: no callback until it thaws. */
static void test_callback_only_after_xadd_confirmed(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {.srv = &srv};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.cmd_timeout_ms = 5000;
    lc_transport_t *t = open_transport(&loop, &o, NULL); /* publish only */
    kill(srv.pid, SIGSTOP);
    LC_ASSERT_OK(publish_n(t, &pubs, 0, 0));
    uint64_t end = uv_hrtime() + 300 * 1000000ull;
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(pubs.ok + pubs.err, 0);
    kill(srv.pid, SIGCONT);
    wait_t w = {&pubs, NULL, 1, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(pubs.ok, 1);
    LC_ASSERT_EQ(pubs.xlen_at_first_ack, 1); /* the entry was in Redis at callback time */
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* Consumer A fails every batch: nothing is acked, B claims the entries after claim_idle_ms. */
static void test_failed_batch_is_claimed_by_another(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t a = {0}, b = {0};
    atomic_store(&a.fail, LC_ESTORE);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t oa = fast_opts(&srv, "ingester-a");
    oa.claim_interval_ms = 60000; /* A never claims back: B must */
    lc_transport_t *ta = open_transport(&loop, &oa, &a);
    for (int i = 0; i < 40; i++)
        LC_ASSERT_OK(publish_n(ta, &pubs, i, (uint32_t)i));
    wait_t wa = {&pubs, &a, 1, ta};
    LC_CHECK(test_run_until(&loop, consume_called, &wa, 3000));
    LC_CHECK(pending_total(&srv, 4) > 0);
    lc_redis_transport_opts_t ob = fast_opts(&srv, "ingester-b");
    lc_transport_t *tb = open_transport(&loop, &ob, &b);
    wait_t wb = {&pubs, &b, 40, tb};
    LC_CHECK(test_run_until(&loop, all_applied, &wb, 8000));
    for (int i = 0; i < 40; i++)
        LC_ASSERT_EQ(atomic_load(&b.seen[i]), 1);
    LC_ASSERT_EQ(atomic_load(&a.applied), 0);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(tb, &st));
    LC_CHECK(st.claimed >= 1);
    LC_ASSERT_OK(lc_transport_redis_stats(ta, &st));
    LC_CHECK(st.consume_failed >= 1);
    close_transport(&loop, ta);
    close_transport(&loop, tb);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* Entries read but not acked across the 4 streams reach want. */
typedef struct pending_wait_s {
    const test_redis_t *srv;
    long long want;
} pending_wait_t;

static bool pending_reached(void *arg)
{
    const pending_wait_t *p = arg;
    return pending_total(p->srv, 4) == p->want;
}

/* A consumer stopped (transport closed) with entries it read but never acked:
 * another consumer claims them once they have been idle claim_idle_ms. */
static void test_stopped_consumer_entries_are_claimed(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t a = {0}, b = {0};
    atomic_store(&a.fail, LC_ESTORE);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t oa = fast_opts(&srv, "ingester-a");
    lc_transport_t *ta = open_transport(&loop, &oa, &a);
    for (int i = 0; i < 24; i++)
        LC_ASSERT_OK(publish_n(ta, &pubs, i, (uint32_t)i));
    wait_t wa = {&pubs, &a, 24, ta};
    LC_CHECK(test_run_until(&loop, all_answered, &wa, 3000));
    /* A's first read may hold only some (it raced the XADDs): wait for all. */
    LC_CHECK(test_run_until(&loop, pending_reached, &(pending_wait_t){&srv, 24}, 3000));
    close_transport(&loop, ta);
    LC_ASSERT_EQ(pending_total(&srv, 4), 24); /* all read by A, none acked */
    lc_redis_transport_opts_t ob = fast_opts(&srv, "ingester-b");
    lc_transport_t *tb = open_transport(&loop, &ob, &b);
    wait_t wb = {&pubs, &b, 24, tb};
    LC_CHECK(test_run_until(&loop, all_applied, &wb, 8000));
    for (int i = 0; i < 24; i++)
        LC_ASSERT_EQ(atomic_load(&b.seen[i]), 1);
    close_transport(&loop, tb);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* A consumer read entries and died without acking (a raw XREADGROUP stands for it). */
static void test_dead_consumer_entries_are_claimed(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    lc_transport_t *tp = open_transport(&loop, &o, NULL); /* receiver only */
    for (int i = 0; i < 30; i++)
        LC_ASSERT_OK(publish_n(tp, &pubs, i, (uint32_t)i));
    wait_t w = {&pubs, NULL, 30, tp};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    for (int p = 0; p < 4; p++) { /* a receiver creates no group: the dead consumer did */
        LC_CHECK(test_redis_int(&srv, "XGROUP CREATE ember:ingest:%d ingesters 0", p) == -1);
        LC_CHECK(test_redis_int(&srv,
                                "XREADGROUP GROUP ingesters dead COUNT 100 STREAMS "
                                "ember:ingest:%d >",
                                p) == 1);
    }
    LC_ASSERT_EQ(pending_total(&srv, 4), 30);
    sink_t s = {0};
    lc_redis_transport_opts_t oc = fast_opts(&srv, "ingester-1");
    lc_transport_t *tc = open_transport(&loop, &oc, &s);
    wait_t wc = {&pubs, &s, 30, tc};
    LC_CHECK(test_run_until(&loop, all_applied, &wc, 8000));
    for (int i = 0; i < 30; i++)
        LC_ASSERT_EQ(atomic_load(&s.seen[i]), 1);
    close_transport(&loop, tc);
    close_transport(&loop, tp);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* Applications minus forgets of message k over both consumers. */
static int kept(sink_t *a, sink_t *b, int k)
{
    return atomic_load(&a->seen[k]) - atomic_load(&a->forgotten[k]) + atomic_load(&b->seen[k]) -
           atomic_load(&b->forgotten[k]);
}

static bool forgot_and_kept_once(void *arg)
{
    wait_t *w = arg;
    sink_t *pair = (sink_t *)w->t; /* two sinks side by side */
    if (atomic_load(&pair[0].forgets) == 0)
        return false; /* A still holds its batch */
    for (int k = 0; k < w->want; k++)
        if (kept(&pair[0], &pair[1], k) != 1)
            return false;
    return true;
}

static bool claims_cleared(void *arg)
{
    return test_redis_int(arg, "EXISTS ember:claimed:ingesters:ingester-a") == 0;
}

/* A applies a batch and pauses before its ack, past claim_idle_ms: B claims
 * and applies the entries too (recording the claim); A's ack then finds them
 * not its own and A forgets them, so each message is kept exactly once. */
static void test_paused_consumer_forgets_what_was_claimed(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    static sink_t pair[2]; /* A, B */
    memset(pair, 0, sizeof(pair));
    atomic_store(&pair[0].hold_ms, 1200);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t oa = fast_opts(&srv, "ingester-a");
    oa.claim_interval_ms = 60000; /* A never claims: only B does */
    oa.forget = sink_forget;
    lc_transport_t *ta = open_transport(&loop, &oa, &pair[0]);
    for (int i = 0; i < 24; i++)
        LC_ASSERT_OK(publish_n(ta, &pubs, i, (uint32_t)i));
    wait_t wa = {&pubs, &pair[0], 1, ta};
    LC_CHECK(test_run_until(&loop, all_applied, &wa, 3000)); /* and now holding */
    lc_redis_transport_opts_t ob = fast_opts(&srv, "ingester-b");
    ob.forget = sink_forget;
    lc_transport_t *tb = open_transport(&loop, &ob, &pair[1]);
    wait_t w = {&pubs, NULL, 24, (lc_transport_t *)pair};
    LC_CHECK(test_run_until(&loop, forgot_and_kept_once, &w, 8000));
    for (int i = 0; i < 24; i++)
        LC_ASSERT_EQ(kept(&pair[0], &pair[1], i), 1);
    LC_CHECK(atomic_load(&pair[0].forgets) >= 1);
    LC_ASSERT_EQ(atomic_load(&pair[1].forgets), 0);
    int both = 0;
    for (int i = 0; i < 24; i++)
        both += atomic_load(&pair[0].seen[i]) && atomic_load(&pair[1].seen[i]);
    LC_CHECK(both >= 1);                                         /* the case at hand did happen */
    LC_CHECK(test_run_until(&loop, claims_cleared, &srv, 3000)); /* after the forget */
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(ta, &st));
    /* Every entry both applied was forgotten by A; under load A may also have
     * read (not yet applied) entries that B claimed, and forgets those too
     * (CI saw 24 forgotten, 1 applied by both): a bound, not an equality. */
    LC_CHECK(st.forgotten >= (uint64_t)both && st.forgotten <= 24);
    close_transport(&loop, ta);
    close_transport(&loop, tb);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS ember:claimed:ingesters:ingester-b"), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static bool claims_c_cleared(void *arg)
{
    return test_redis_int(arg, "EXISTS ember:claimed:ingesters:ingester-c") == 0;
}

/* A consumer that starts with a claims record forgets it before it reads
 * anything, then clears it. */
static void test_claims_record_forgotten_at_start(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    lc_transport_t *tp = open_transport(&loop, &o, NULL);
    for (int i = 0; i < 8; i++)
        LC_ASSERT_OK(publish_n(tp, &pubs, i, (uint32_t)i));
    wait_t w = {&pubs, NULL, 8, tp};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    static sink_t s;
    memset(&s, 0, sizeof(s));
    atomic_store(&s.calls_at_first_forget, -1);
    snprintf(s.delivery[100], sizeof(s.delivery[100]), "ember:ingest:2/1-0");
    LC_CHECK(test_redis_int(&srv, "HSET ember:claimed:ingesters:ingester-c ember:ingest:2/1-0 1") ==
             1);
    lc_redis_transport_opts_t oc = fast_opts(&srv, "ingester-c");
    oc.forget = sink_forget;
    lc_transport_t *tc = open_transport(&loop, &oc, &s);
    wait_t wc = {&pubs, &s, 8, tc};
    LC_CHECK(test_run_until(&loop, all_applied, &wc, 5000));
    LC_ASSERT_EQ(atomic_load(&s.forgets), 1);
    LC_ASSERT_EQ(atomic_load(&s.forgotten[100]), 1);
    LC_ASSERT_EQ(atomic_load(&s.calls_at_first_forget), 0);
    LC_CHECK(test_run_until(&loop, claims_c_cleared, &srv, 3000));
    close_transport(&loop, tc);
    close_transport(&loop, tp);
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS ember:claimed:ingesters:ingester-c"), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static bool claims_dead_recorded(void *arg)
{
    return test_redis_int(arg, "HLEN ember:claimed:ingesters:dead") == 6;
}

/* The claim script records each entry it takes under the consumer it took it
 * from, and deletes the claimer's own record of it: an entry claimed back
 * is the claimer's again and must not be forgotten by it later. */
static bool forgot_once(void *arg)
{
    return atomic_load(&((sink_t *)arg)->forgets) == 1;
}

static void test_claim_records_previous_owner(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    /* Six entries read by a consumer that then died ("dead"). */
    (void)test_redis_int(&srv, "XGROUP CREATE ember:ingest:0 ingesters 0 MKSTREAM"); /* OK */
    char first[64] = "";
    for (int i = 0; i < 6; i++) {
        redisContext *c = test_redis_connect(&srv);
        redisReply *r = redisCommand(c, "XADD ember:ingest:0 * m msg-%d", i);
        LC_CHECK(r && r->type == REDIS_REPLY_STRING);
        if (r && r->type == REDIS_REPLY_STRING && i == 0)
            snprintf(first, sizeof(first), "ember:ingest:0/%s", r->str);
        freeReplyObject(r);
        redisFree(c);
    }
    LC_CHECK(test_redis_int(
                 &srv, "XREADGROUP GROUP ingesters dead COUNT 100 STREAMS ember:ingest:0 >") == 1);
    /* C starts and forgets its (dummy) claims record; then it is told it had
     * held the first entry earlier and lost it. */
    LC_CHECK(test_redis_int(&srv, "HSET ember:claimed:ingesters:ingester-c x/0-1 1") == 1);
    static sink_t s;
    memset(&s, 0, sizeof(s));
    lc_redis_transport_opts_t oc = fast_opts(&srv, "ingester-c");
    oc.partitions = 1;
    oc.claim_idle_ms = 1000;
    oc.forget = sink_forget;
    lc_transport_t *tc = open_transport(&loop, &oc, &s);
    LC_CHECK(test_run_until(&loop, forgot_once, &s, 3000));
    LC_CHECK(test_run_until(&loop, claims_c_cleared, &srv, 3000));
    LC_CHECK(test_redis_int(&srv, "HSET ember:claimed:ingesters:ingester-c %s 1", first) == 1);
    wait_t w = {NULL, &s, 6, tc};
    LC_CHECK(test_run_until(&loop, all_applied, &w, 5000)); /* claimed past the idle time */
    LC_CHECK(test_run_until(&loop, claims_dead_recorded, &srv, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "HEXISTS ember:claimed:ingesters:dead %s", first), 1);
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS ember:claimed:ingesters:ingester-c"), 0);
    for (int i = 0; i < 6; i++)
        LC_ASSERT_EQ(atomic_load(&s.seen[i]), 1);
    close_transport(&loop, tc);
    LC_ASSERT_EQ(atomic_load(&s.forgets), 1); /* C owns them now: nothing more to forget */
    LC_ASSERT_EQ(pending_total(&srv, 1), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* A consumer restarted under the same id first re-reads what it had not acked. */
static void test_restart_recovers_own_pending(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t s1 = {0}, s2 = {0};
    atomic_store(&s1.fail, LC_ESTORE);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, "ingester-0");
    o.claim_interval_ms = 60000; /* no claiming: only recovery can bring them back */
    o.claim_idle_ms = 60000;
    lc_transport_t *t = open_transport(&loop, &o, &s1);
    for (int i = 0; i < 20; i++)
        LC_ASSERT_OK(publish_n(t, &pubs, i, (uint32_t)i));
    wait_t w = {&pubs, &s1, 20, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    /* The first read may hold only some of them (it raced the XADDs): wait
     * until every entry was read once and failed. */
    LC_CHECK(test_run_until(&loop, pending_reached, &(pending_wait_t){&srv, 20}, 3000));
    close_transport(&loop, t);
    LC_ASSERT_EQ(pending_total(&srv, 4), 20); /* read once, failed, never acked */
    t = open_transport(&loop, &o, &s2);
    wait_t w2 = {&pubs, &s2, 20, t};
    LC_CHECK(test_run_until(&loop, all_applied, &w2, 5000));
    for (int i = 0; i < 20; i++)
        LC_ASSERT_EQ(atomic_load(&s2.seen[i]), 1);
    close_transport(&loop, t);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- Redis crashes (kill -9) under load and comes back with its AOF (appendfsync always). */

typedef struct load_s {
    uv_timer_t timer;
    lc_transport_t *t;
    pubs_t *p;
    int next, refused_down, refused_other;
    bool stop;
} load_t;

static void load_on_tick(uv_timer_t *timer)
{
    load_t *l = timer->data;
    if (l->stop || l->next >= MAX_MSGS)
        return;
    int rc = publish_n(l->t, l->p, l->next, (uint32_t)l->next);
    if (rc == 0)
        l->next++;
    else if (rc == LC_REDIS_EDOWN)
        l->refused_down++;
    else
        l->refused_other++;
}

static bool some_refused(void *arg)
{
    return ((load_t *)arg)->refused_down >= 3;
}
static bool published_more(void *arg)
{
    load_t *l = arg;
    return l->p->ok >= 150;
}

static void test_redis_restart_under_load(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, true));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t sink = {0};
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, "ingester-0");
    o.publish_retry_ms = 5000; /* in flight at the crash: retried, not failed */
    lc_transport_t *t = open_transport(&loop, &o, &sink);
    load_t load = {.t = t, .p = &pubs};
    uv_timer_init(&loop, &load.timer);
    load.timer.data = &load;
    uv_timer_start(&load.timer, load_on_tick, 1, 2);
    LC_CHECK(test_run_until(&loop, published_more, &load, 5000));
    test_redis_stop(&srv, SIGKILL);
    LC_CHECK(test_run_until(&loop, link_down, t, 3000));
    LC_CHECK(test_run_until(&loop, some_refused, &load, 3000));
    int ok_before_restart = pubs.ok;
    LC_ASSERT_OK(test_redis_restart(&srv));
    LC_CHECK(test_run_until(&loop, links_up, t, 5000));
    int resumed_from = load.next;
    pubs_t *p = &pubs;
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (p->ok < ok_before_restart + 100 && uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    load.stop = true;
    LC_CHECK(pubs.ok >= ok_before_restart + 100); /* the same transport publishes again */
    wait_t w = {&pubs, &sink, load.next, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 5000));
    /* Every acknowledged message reached the consumer: the AOF kept what Redis confirmed. */
    bool all_seen = false;
    end = uv_hrtime() + 8000 * 1000000ull;
    while (!all_seen && uv_hrtime() < end) {
        uv_run(&loop, UV_RUN_ONCE);
        all_seen = true;
        for (int i = 0; i < load.next; i++)
            all_seen &= !pubs.acked[i] || atomic_load(&sink.seen[i]) >= 1;
    }
    LC_CHECK(all_seen);
    LC_ASSERT_EQ(pubs.err, 0); /* in flight at the crash: retried after the restart */
    LC_CHECK(load.refused_down >= 3);
    LC_ASSERT_EQ(load.refused_other, 0);
    LC_CHECK(resumed_from > 0);
    fprintf(stderr, "restart: acked=%d failed_in_flight=%d refused_while_down=%d\n", pubs.ok,
            pubs.err, load.refused_down);
    uv_close((uv_handle_t *)&load.timer, NULL);
    close_transport(&loop, t);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- at most once per message id: the dedupe script and retries of unknown outcomes */

/* How many entries of the stream carry each message number (-1 if one does not parse). */
static int stream_counts(const test_redis_t *srv, const char *stream, int *counts, int n)
{
    memset(counts, 0, (size_t)n * sizeof(*counts));
    redisContext *c = test_redis_connect(srv);
    redisReply *r = c ? redisCommand(c, "XRANGE %s - +", stream) : NULL;
    int total = r && r->type == REDIS_REPLY_ARRAY ? 0 : -1;
    for (size_t i = 0; total >= 0 && i < r->elements; i++) {
        const redisReply *fields = r->element[i]->element[1];
        int k = -1;
        if (fields->elements == 2 && sscanf(fields->element[1]->str, "msg-%d", &k) == 1 && k >= 0 &&
            k < n)
            counts[k]++;
        else
            total = -1;
        total += total >= 0;
    }
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return total;
}

static char *redis_string(const test_redis_t *srv, const char *cmd, const char *arg)
{
    redisContext *c = test_redis_connect(srv);
    redisReply *r = redisCommand(c, "%s %s", cmd, arg);
    char *out = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    redisFree(c);
    return out;
}

/* The same id twice (in flight together, then again later): one entry, both succeed. */
static void test_same_id_stored_once(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_metrics_t *metrics = lc_metrics_new();
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.publish_retry_ms = 2000;
    o.metrics = metrics;
    lc_transport_t *t = open_transport(&loop, &o, NULL);
    LC_ASSERT_OK(publish_id(t, &pubs, 0, 0, 7));
    LC_ASSERT_OK(publish_id(t, &pubs, 1, 0, 7)); /* both in flight at once */
    LC_ASSERT_OK(publish_id(t, &pubs, 2, 0, 8));
    wait_t w = {&pubs, NULL, 3, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_OK(publish_id(t, &pubs, 3, 0, 7)); /* and once more, after the first confirmed */
    w.want = 4;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(pubs.ok, 4);
    int counts[4];
    LC_ASSERT_EQ(stream_counts(&srv, "ember:ingest:0", counts, 4), 2);
    LC_ASSERT_EQ(counts[0], 1); /* the first of id 7 won; its repeats added nothing */
    LC_ASSERT_EQ(counts[1] + counts[3], 0);
    LC_ASSERT_EQ(counts[2], 1);
    /* The dedupe key ({stream}: the stream's cluster slot; hex of "id-7") names the entry. */
    char *entry = redis_string(&srv, "GET", "{ember:ingest:0}:dedupe:69642d37");
    LC_CHECK(entry != NULL);
    LC_ASSERT_EQ(test_redis_int(&srv, "XRANGE ember:ingest:0 %s %s", entry ? entry : "0",
                                entry ? entry : "0"),
                 1);
    free(entry);
    long long ttl = test_redis_int(&srv, "PTTL {ember:ingest:0}:dedupe:69642d37");
    LC_CHECK(ttl > 0 && ttl <= 2 * (10000 + 1000)); /* 2 * (publish_retry + cmd_timeout) */
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_ASSERT_EQ(st.published, 4);
    LC_ASSERT_EQ(st.publish_duplicates, 2);
    LC_ASSERT_EQ(st.publish_retries, 0);
    LC_ASSERT_OK(publish_id(t, &pubs, 4, 0, 0));
    uint8_t long_id[LC_TRANSPORT_ID_MAX + 1] = {0};
    LC_ASSERT_EQ(lc_transport_publish(t, (const uint8_t *)"x", 1, 0, long_id, sizeof(long_id),
                                      on_published, &slots[5]),
                 LC_EINPUT);
    LC_ASSERT_EQ(
        lc_transport_publish(t, (const uint8_t *)"x", 1, 0, long_id, 0, on_published, &slots[5]),
        LC_EINPUT);
    w.want = 5;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    LC_CHECK(metrics_show(metrics, "ember_redis_publish_duplicates_total 2"));
    LC_CHECK(metrics_show(metrics, "ember_redis_publish_retries_total 0"));
    lc_metrics_free(metrics);
    test_redis_finish(&srv);
}

/* An error reply is final: no retry, and the failed XADD left no dedupe key
 * (WRONGTYPE: 503; OOM: 429). */
static void test_error_reply_not_retried(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.publish_retry_ms = 2000;
    lc_transport_t *t = open_transport(&loop, &o, NULL);
    /* A publisher creates no group, so nothing makes the stream but this. */
    LC_ASSERT_EQ(test_redis_int(&srv, "SET ember:ingest:0 not-a-stream"), -1); /* +OK */
    LC_ASSERT_OK(publish_id(t, &pubs, 0, 0, 1));
    wait_t w = {&pubs, NULL, 1, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(pubs.err, 1);
    LC_ASSERT_EQ(pubs.last_err, LC_REDIS_EDOWN);
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS {ember:ingest:0}:dedupe:69642d31"), 0);
    /* At maxmemory the script's first write is refused: 429, nothing written. */
    LC_ASSERT_EQ(test_redis_int(&srv, "DEL ember:ingest:0"), 1);
    LC_ASSERT_EQ(test_redis_int(&srv, "CONFIG SET maxmemory 1"), -1); /* +OK */
    LC_ASSERT_OK(publish_id(t, &pubs, 1, 0, 2));
    w.want = 2;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "CONFIG SET maxmemory 0"), -1);
    LC_ASSERT_EQ(pubs.err, 2);
    LC_ASSERT_EQ(pubs.last_err, LC_EFULL);
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS ember:ingest:0 {ember:ingest:0}:dedupe:69642d32"), 0);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_ASSERT_EQ(st.publish_retries, 0);
    LC_ASSERT_EQ(st.publish_failed, 2);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* Redis freezes (SIGSTOP) with publishes in flight: they time out, the link
 * drops, and new publishes are refused at once. Redis thaws within the retry
 * window: the frozen originals and their retries both run, yet every message
 * is in the stream exactly once and every accepted publish succeeded. */
static void test_outage_in_flight_retried_once(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_metrics_t *metrics = lc_metrics_new();
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.cmd_timeout_ms = 300;
    o.publish_retry_ms = 8000;
    o.metrics = metrics;
    lc_transport_t *t = open_transport(&loop, &o, NULL);
    enum { BEFORE = 100, IN_FLIGHT = 50 };
    int n = 0;
    for (; n < BEFORE; n++)
        LC_ASSERT_OK(publish_n(t, &pubs, n, 0));
    wait_t w = {&pubs, NULL, BEFORE, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    for (; n < BEFORE + IN_FLIGHT; n++)
        LC_ASSERT_OK(publish_n(t, &pubs, n, 0)); /* written to the socket by the next loop turn */
    kill(srv.pid, SIGSTOP);
    LC_CHECK(test_run_until(&loop, link_down, t, 3000));
    LC_ASSERT_EQ(pubs.ok, BEFORE); /* the in-flight ones wait, neither acked nor failed */
    LC_ASSERT_EQ(pubs.err, 0);
    LC_ASSERT_EQ(publish_n(t, &pubs, n, 0), LC_REDIS_EDOWN); /* new ones: 503 at once */
    uint64_t end = uv_hrtime() + 700 * 1000000ull;
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_NOWAIT);
    kill(srv.pid, SIGCONT);
    w.want = BEFORE + IN_FLIGHT;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 8000));
    LC_ASSERT_EQ(pubs.ok, BEFORE + IN_FLIGHT);
    LC_ASSERT_EQ(pubs.err, 0);
    static int counts[BEFORE + IN_FLIGHT + 1];
    LC_ASSERT_EQ(stream_counts(&srv, "ember:ingest:0", counts, BEFORE + IN_FLIGHT + 1),
                 BEFORE + IN_FLIGHT);
    for (int i = 0; i < BEFORE + IN_FLIGHT; i++)
        LC_ASSERT_EQ(counts[i], 1);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_CHECK(st.publish_retries >= IN_FLIGHT);
    /* The frozen originals ran when Redis thawed, before the retries reached it. */
    LC_CHECK(st.publish_duplicates >= 1);
    fprintf(stderr, "outage: retries=%llu duplicates=%llu\n",
            (unsigned long long)st.publish_retries, (unsigned long long)st.publish_duplicates);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    char want[80];
    snprintf(want, sizeof(want), "ember_redis_publish_retries_total %llu",
             (unsigned long long)st.publish_retries);
    LC_CHECK(metrics_show(metrics, want));
    lc_metrics_free(metrics);
    test_redis_finish(&srv);
}

static uint64_t closed_at_ns;
static void on_closed_time(void *data)
{
    LC_UNUSED(data);
    closed_at_ns = uv_hrtime();
}

/* An outage longer than publish_retry_ms: the in-flight publishes fail then
 * (503), and a close meanwhile waits for that deadline, not longer. */
static void test_outage_past_deadline_fails_and_close_is_bounded(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.cmd_timeout_ms = 200;
    o.publish_retry_ms = 800;
    lc_transport_t *t = open_transport(&loop, &o, NULL);
    for (int i = 0; i < 5; i++)
        LC_ASSERT_OK(publish_n(t, &pubs, i, 0));
    kill(srv.pid, SIGSTOP);
    uint64_t start = uv_hrtime();
    closed_at_ns = 0;
    lc_transport_close(t, on_closed_time, NULL);
    while (!closed_at_ns && uv_hrtime() - start < 5000 * 1000000ull)
        uv_run(&loop, UV_RUN_ONCE);
    kill(srv.pid, SIGCONT);
    LC_CHECK(closed_at_ns != 0);
    double secs = (double)(closed_at_ns - start) / 1e9;
    LC_CHECK(secs >= 0.7 && secs < 0.8 + 0.2 + 0.5); /* deadline (+ a command timeout, a tick) */
    LC_ASSERT_EQ(pubs.ok, 0);
    LC_ASSERT_EQ(pubs.err, 5);
    LC_ASSERT_EQ(pubs.last_err, LC_REDIS_EDOWN);
    fprintf(stderr, "past deadline: closed after %.2f s\n", secs);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* Without publish_retry_ms (the default): a bare XADD, no dedupe key, and a
 * publish whose outcome a stall left unknown fails (503) after one command
 * timeout instead of waiting; a second publish of an id adds a second entry. */
static void test_without_retries_unknown_fails_at_once(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    o.cmd_timeout_ms = 300;
    lc_transport_t *t = open_transport(&loop, &o, NULL);
    LC_ASSERT_OK(publish_id(t, &pubs, 0, 0, 7));
    LC_ASSERT_OK(publish_id(t, &pubs, 1, 0, 7));
    wait_t w = {&pubs, NULL, 2, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:ingest:0"), 2);
    LC_ASSERT_EQ(test_redis_int(&srv, "DBSIZE"), 1); /* the stream, no dedupe key */
    for (int n = 2; n < 12; n++)
        LC_ASSERT_OK(publish_n(t, &pubs, n, 0));
    kill(srv.pid, SIGSTOP);
    uint64_t start = uv_hrtime();
    w.want = 12;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    double secs = (double)(uv_hrtime() - start) / 1e9;
    kill(srv.pid, SIGCONT);
    LC_ASSERT_EQ(pubs.ok, 2);
    LC_ASSERT_EQ(pubs.err, 10);
    LC_ASSERT_EQ(pubs.last_err, LC_REDIS_EDOWN);
    LC_CHECK(secs < 1.5); /* one command timeout, no retry window */
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_ASSERT_EQ(st.publish_retries, 0);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- trimming: acked entries go, pending ones (of a dead consumer) stay. */

static bool trimmed_some(void *arg)
{
    lc_redis_transport_stats_t st;
    return lc_transport_redis_stats(arg, &st) == 0 && st.trimmed > 0;
}

static void test_trim_keeps_unacked(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    LC_ASSERT_EQ(test_redis_int(&srv, "CONFIG SET stream-node-max-entries 10"), -1); /* +OK */
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    sink_t s = {0};
    lc_redis_transport_opts_t oc = fast_opts(&srv, "ingester-0");
    oc.partitions = 1;
    oc.claim_idle_ms = 600000; /* nobody claims: dead's entries stay pending */
    lc_transport_t *tc = open_transport(&loop, &oc, &s);
    for (int i = 0; i < 100; i++)
        LC_ASSERT_OK(publish_n(tc, &pubs, i, 0));
    wait_t wc = {&pubs, &s, 100, tc};
    LC_CHECK(test_run_until(&loop, all_applied, &wc, 5000));
    close_transport(&loop, tc);

    /* "dead" takes entries 100..109 and never acks them. */
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 1;
    lc_transport_t *tp = open_transport(&loop, &o, NULL);
    for (int i = 100; i < 110; i++)
        LC_ASSERT_OK(publish_n(tp, &pubs, i, 0));
    wait_t w = {&pubs, NULL, 110, tp};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "XREADGROUP GROUP ingesters dead COUNT 10 STREAMS "
                                      "ember:ingest:0 >"),
                 1);
    for (int i = 110; i < 300; i++)
        LC_ASSERT_OK(publish_n(tp, &pubs, i, 0));
    w.want = 300;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    tc = open_transport(&loop, &oc, &s);
    wc.want = 290;
    LC_CHECK(test_run_until(&loop, all_applied, &wc, 5000));
    LC_CHECK(test_run_until(&loop, trimmed_some, tc, 3000));
    uv_sleep(300); /* a few more trim rounds: they must not go further */
    for (int i = 0; i < 20; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:ingest:0"), 200); /* 0..99 trimmed */
    LC_ASSERT_EQ(pending_total(&srv, 1), 10);
    redisContext *c = test_redis_connect(&srv);
    redisReply *r = redisCommand(c, "XRANGE ember:ingest:0 - + COUNT 1");
    LC_ASSERT_EQ(r->elements, 1);
    if (r->elements == 1) /* the oldest entry left is dead's first */
        LC_ASSERT_STR_EQ(r->element[0]->element[1]->element[1]->str, "msg-100");
    freeReplyObject(r);

    /* Once dead's entries are acked, the stream shrinks to what is left. */
    r = redisCommand(c, "XRANGE ember:ingest:0 - + COUNT 10");
    for (size_t i = 0; i < r->elements; i++)
        freeReplyObject(
            redisCommand(c, "XACK ember:ingest:0 ingesters %s", r->element[i]->element[0]->str));
    freeReplyObject(r);
    redisFree(c);
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (test_redis_int(&srv, "XLEN ember:ingest:0") > 10 && uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    LC_CHECK(test_redis_int(&srv, "XLEN ember:ingest:0") <= 10); /* `~`: whole nodes only */
    close_transport(&loop, tc);
    close_transport(&loop, tp);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static bool nothing_pending(void *arg)
{
    return pending_total(arg, 1) == 0;
}

/* The one dead letter of ember:dead:0 has the entry, its origin and why. */
static void check_dead_letter(const test_redis_t *srv)
{
    redisContext *c = test_redis_connect(srv);
    redisReply *r = redisCommand(c, "XRANGE ember:dead:0 - +");
    LC_ASSERT_EQ(r->elements, 1);
    const redisReply *f = r->elements == 1 ? r->element[0]->element[1] : NULL;
    const char *want[][2] = {{"m", "msg-42"},
                             {"stream", "ember:ingest:0"},
                             {"reason", "test: a sum over int64"},
                             {"error", "invalid"},
                             {"consumer", "ingester-0"}};
    for (size_t k = 0; f && k < LC_ARRAY_LEN(want); k++) {
        bool found = false;
        for (size_t i = 0; i + 1 < f->elements; i += 2)
            if (strcmp(f->element[i]->str, want[k][0]) == 0) {
                LC_ASSERT_STR_EQ(f->element[i + 1]->str, want[k][1]);
                found = true;
            }
        LC_CHECK(found);
    }
    freeReplyObject(r);
    redisFree(c);
}

/* consume sets msg-42 aside. While its dead letter cannot be written (the
 * key holds a string: WRONGTYPE) nothing of the batch is acked; once it
 * can, the dead letter is there with its reason, nothing is pending, the
 * counter says 1 and the stream trims past it. */
static void test_set_aside_entry_goes_to_dead_letters(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    LC_ASSERT_EQ(test_redis_int(&srv, "CONFIG SET stream-node-max-entries 10"), -1); /* +OK */
    LC_ASSERT_EQ(test_redis_int(&srv, "SET ember:dead:0 blocked"), -1);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t s = {0};
    atomic_store(&s.reject_plus1, 43);
    pubs_t pubs = {0};
    lc_metrics_t *metrics = lc_metrics_new();
    lc_redis_transport_opts_t o = fast_opts(&srv, "ingester-0");
    o.partitions = 1;
    o.claim_idle_ms = 600000; /* the consumer's own retries, no claims */
    o.metrics = metrics;
    lc_transport_t *t = open_transport(&loop, &o, &s);
    for (int i = 0; i < 100; i++)
        LC_ASSERT_OK(publish_n(t, &pubs, i, 0));
    wait_t w = {&pubs, &s, 43, t};
    LC_CHECK(test_run_until(&loop, all_applied, &w, 5000));
    /* Its batch stays unacked, and the consumer on it: its dead letter is
     * retried (every 200 ms) meanwhile, never skipped. */
    uint64_t until = uv_hrtime() + 700 * 1000000ull;
    while (uv_hrtime() < until)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_CHECK(pending_total(&srv, 1) > 0);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_ASSERT_EQ(st.dead_letters, 0);

    LC_ASSERT_EQ(test_redis_int(&srv, "DEL ember:dead:0"), 1);
    w.want = 100;
    LC_CHECK(test_run_until(&loop, all_applied, &w, 5000));
    LC_CHECK(test_run_until(&loop, nothing_pending, &srv, 5000));
    check_dead_letter(&srv);
    LC_ASSERT_OK(lc_transport_redis_stats(t, &st));
    LC_ASSERT_EQ(st.dead_letters, 1);
    LC_CHECK(metrics_show(metrics, "ember_ingest_dead_letter_total{reason=\"invalid\"} 1"));
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (test_redis_int(&srv, "XLEN ember:ingest:0") > 10 && uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    LC_CHECK(test_redis_int(&srv, "XLEN ember:ingest:0") <= 10); /* `~`: whole nodes only */
    close_transport(&loop, t);
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:dead:0"), 1);
    LC_ASSERT_OK(uv_loop_close(&loop));
    lc_metrics_free(metrics);
    test_redis_finish(&srv);
}

/* hold_consume: nothing is read (so nothing pending) until released. */
static void test_hold_until_release(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    sink_t s = {0};
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, "ingester-0");
    o.hold_consume = true;
    lc_transport_t *t = open_transport(&loop, &o, &s);
    for (int i = 0; i < 20; i++)
        LC_ASSERT_OK(publish_n(t, &pubs, i, (uint32_t)i));
    wait_t w = {&pubs, &s, 20, t};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    uint64_t end = uv_hrtime() + 300 * 1000000ull;
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(atomic_load(&s.calls), 0);
    LC_ASSERT_EQ(pending_total(&srv, 4), 0); /* not even delivered */
    lc_transport_redis_release(t);
    LC_CHECK(test_run_until(&loop, all_applied, &w, 5000));
    for (int i = 0; i < 20; i++)
        LC_ASSERT_EQ(atomic_load(&s.seen[i]), 1);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- zones: every zone's group reads every entry; trimming and back-pressure
 * wait for the slowest group. */

static long long group_entries_read(const test_redis_t *srv, const char *group)
{
    redisContext *c = test_redis_connect(srv);
    redisReply *r = redisCommand(c, "XINFO GROUPS ember:ingest:0");
    long long read = -1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *g = r->element[i];
        bool ours = false;
        for (size_t k = 0; k + 1 < g->elements; k += 2) {
            const char *key = g->element[k]->str;
            const redisReply *v = g->element[k + 1];
            if (strcmp(key, "name") == 0)
                ours = strcmp(v->str, group) == 0;
            else if (ours && strcmp(key, "entries-read") == 0)
                read = v->type == REDIS_REPLY_INTEGER ? v->integer : 0;
        }
    }
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return read; /* -1 when there is no such group */
}

static bool backlog_is(void *arg)
{
    lc_redis_transport_stats_t st;
    void **v = arg;
    return lc_transport_redis_stats(v[0], &st) == 0 && st.backlog == *(uint64_t *)v[1];
}

static void test_trim_and_backlog_wait_for_every_zone(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    LC_ASSERT_EQ(test_redis_int(&srv, "CONFIG SET stream-node-max-entries 10"), -1); /* +OK */
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    sink_t a = {0}, b = {0};
    /* Zone b's consumer starts (creating its group at id 0) and stops before
     * anything is published: zone b is the slow zone. */
    lc_redis_transport_opts_t ob = fast_opts(&srv, "ingester-b0");
    ob.partitions = 1;
    ob.group = "ingesters.b";
    lc_transport_t *tb = open_transport(&loop, &ob, &b);
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (group_entries_read(&srv, "ingesters.b") != 0 && uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    close_transport(&loop, tb);
    LC_ASSERT_EQ(group_entries_read(&srv, "ingesters.b"), 0);

    lc_redis_transport_opts_t oa = fast_opts(&srv, "ingester-a0");
    oa.partitions = 1;
    oa.group = "ingesters.a";
    oa.max_backlog = 1000;
    lc_transport_t *ta = open_transport(&loop, &oa, &a);
    for (int i = 0; i < 300; i++)
        LC_ASSERT_OK(publish_n(ta, &pubs, i, 0));
    wait_t wa = {&pubs, &a, 300, ta};
    LC_CHECK(test_run_until(&loop, all_applied, &wa, 5000));
    /* Zone a is done; zone b has read nothing: its 300 are the backlog, and
     * trim rounds (every 100 ms) leave them all. */
    uint64_t want = 300;
    void *arg[] = {ta, &want};
    LC_CHECK(test_run_until(&loop, backlog_is, arg, 3000));
    uv_sleep(400);
    for (int i = 0; i < 40; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(test_redis_int(&srv, "XLEN ember:ingest:0"), 300);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(ta, &st));
    LC_ASSERT_EQ(st.trimmed, 0);
    LC_ASSERT_EQ(st.backlog, 300);
    LC_ASSERT_EQ(st.lag, 300); /* the slowest group's */

    /* A receiver that creates no group sees the same backlog: 429 past it. */
    lc_redis_transport_opts_t op = fast_opts(&srv, NULL);
    op.partitions = 1;
    op.max_backlog = 300;
    lc_transport_t *tp = open_transport(&loop, &op, NULL);
    void *parg[] = {tp, &want};
    LC_CHECK(test_run_until(&loop, backlog_is, parg, 3000));
    LC_ASSERT_EQ(publish_n(tp, &pubs, 300, 0), LC_EFULL);

    /* Zone b catches up: it gets all 300 exactly once, then the stream shrinks. */
    tb = open_transport(&loop, &ob, &b);
    wait_t wb = {&pubs, &b, 300, tb};
    LC_CHECK(test_run_until(&loop, all_applied, &wb, 5000));
    for (int i = 0; i < 300; i++) {
        LC_ASSERT_EQ(atomic_load(&a.seen[i]), 1);
        LC_ASSERT_EQ(atomic_load(&b.seen[i]), 1);
    }
    end = uv_hrtime() + 3000 * 1000000ull;
    while (test_redis_int(&srv, "XLEN ember:ingest:0") > 10 && uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    LC_CHECK(test_redis_int(&srv, "XLEN ember:ingest:0") <= 10);
    want = 0;
    LC_CHECK(test_run_until(&loop, backlog_is, parg, 3000));
    LC_ASSERT_OK(publish_n(tp, &pubs, 300, 0));
    wait_t wp = {&pubs, NULL, 301, tp};
    LC_CHECK(test_run_until(&loop, all_answered, &wp, 3000));
    close_transport(&loop, tp);
    close_transport(&loop, tb);
    close_transport(&loop, ta);
    LC_ASSERT_EQ(group_entries_read(&srv, "ingesters"), -1); /* nobody created the default group */
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- back-pressure */

static bool backlog_sampled(void *arg)
{
    lc_redis_transport_stats_t st;
    return lc_transport_redis_stats(arg, &st) == 0 && st.backlog == 0;
}

static void test_backlog_limit(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = fast_opts(&srv, NULL);
    o.partitions = 2;
    o.max_backlog = 20;
    lc_transport_t *tp = open_transport(&loop, &o, NULL);
    int n = 0;
    for (; n < 20; n++)
        LC_ASSERT_OK(publish_n(tp, &pubs, n, 0));
    LC_ASSERT_EQ(publish_n(tp, &pubs, n, 0), LC_EFULL); /* counted before any sample */
    LC_ASSERT_OK(publish_n(tp, &pubs, n++, 1));         /* the other stream is fine */
    wait_t w = {&pubs, NULL, n, tp};
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    uv_sleep(120);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(120);
    uv_run(&loop, UV_RUN_NOWAIT); /* sampled: still 20 waiting */
    LC_ASSERT_EQ(publish_n(tp, &pubs, n, 0), LC_EFULL);
    lc_redis_transport_stats_t st;
    LC_ASSERT_OK(lc_transport_redis_stats(tp, &st));
    LC_ASSERT_EQ(st.backlog, 21);
    LC_CHECK(st.rejected_full == 2);
    sink_t s = {0};
    lc_redis_transport_opts_t oc = fast_opts(&srv, "ingester-0");
    oc.partitions = 2;
    lc_transport_t *tc = open_transport(&loop, &oc, &s);
    wait_t wc = {&pubs, &s, n, tc};
    LC_CHECK(test_run_until(&loop, all_applied, &wc, 5000));
    LC_CHECK(test_run_until(&loop, backlog_sampled, tp, 3000)); /* drained back to normal */
    LC_ASSERT_OK(publish_n(tp, &pubs, n, 0));
    w.want = n + 1;
    LC_CHECK(test_run_until(&loop, all_answered, &w, 3000));
    LC_ASSERT_EQ(pubs.err, 0);
    close_transport(&loop, tc);
    close_transport(&loop, tp);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static void test_bad_options(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_transport_t *t = NULL;
    lc_redis_transport_opts_t o = {.url = "http://x"};
    LC_ASSERT_EQ(lc_transport_redis_new(&loop, &o, NULL, NULL, &t), LC_EINPUT);
    o.url = "redis://127.0.0.1:1";
    LC_ASSERT_EQ(lc_transport_redis_new(&loop, &o, sink_consume, NULL, &t), LC_EINPUT);
    LC_CHECK(t == NULL);
    lc_direct_opts_t d = {0};
    LC_ASSERT_OK(lc_transport_direct_new(&loop, &d, sink_consume, NULL, &t));
    lc_redis_transport_stats_t st;
    LC_ASSERT_EQ(lc_transport_redis_stats(t, &st), LC_EINPUT);
    close_transport(&loop, t);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

/* Publishing while Redis is down fails at once, and no callback follows. */
static void test_publish_while_down(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    pubs_t pubs = {0};
    lc_redis_transport_opts_t o = {.url = "redis://127.0.0.1:1"};
    lc_transport_t *t = NULL;
    LC_ASSERT_OK(lc_transport_redis_new(&loop, &o, NULL, NULL, &t));
    uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(publish_n(t, &pubs, 0, 0), LC_REDIS_EDOWN);
    close_transport(&loop, t);
    LC_ASSERT_EQ(pubs.ok + pubs.err, 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

LC_TEST_MAIN(test_bad_options, test_publish_while_down, test_publish_consume_ack,
             test_set_aside_entry_goes_to_dead_letters, test_callback_only_after_xadd_confirmed,
             test_failed_batch_is_claimed_by_another, test_stopped_consumer_entries_are_claimed,
             test_dead_consumer_entries_are_claimed, test_restart_recovers_own_pending,
             test_redis_restart_under_load, test_trim_keeps_unacked,
             test_trim_and_backlog_wait_for_every_zone, test_hold_until_release, test_backlog_limit,
             test_paused_consumer_forgets_what_was_claimed, test_claims_record_forgotten_at_start,
             test_claim_records_previous_owner, test_same_id_stored_once,
             test_error_reply_not_retried, test_outage_in_flight_retried_once,
             test_outage_past_deadline_fails_and_close_is_bounded,
             test_without_retries_unknown_fails_at_once)
