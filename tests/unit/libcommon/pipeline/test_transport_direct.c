/*
 * test_transport_direct.c — the direct transport delivers every message to the
 * consumer once, reports durability only after the consumer returned, refuses
 * past the backlog cap, hands consumer failures back to publishers, gives a
 * message the consumer set aside its reject error (and only that message),
 * and drains on close.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "lc/transport.h"
#include "lc_test.h"

typedef struct harness_s {
    atomic_int consumed; /* messages the consumer applied */
    atomic_int fail;     /* consumer returns this while non-zero */
    int acks_ok, acks_err, last_err;
    int applied_at_ack; /* consumed count seen by the first ack */
    bool closed;
    char seen[64];         /* first byte of every message, in order */
    const void *local[64]; /* every message's local, in order */
    atomic_int n_seen;
} harness_t;

static int consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    harness_t *h = data;
    if (atomic_load(&h->fail))
        return atomic_load(&h->fail);
    for (size_t i = 0; i < n; i++) {
        int k = atomic_fetch_add(&h->n_seen, 1);
        if (k < 64) {
            h->seen[k] = (char)msgs[i].data[0];
            h->local[k] = msgs[i].local;
        }
        bool reject = msgs[i].data[0] == 'X'; /* "unappliable" */
        msgs[i].reject_err = reject ? LC_EINPUT : 0;
        msgs[i].reject_reason = reject ? "test: unappliable" : NULL;
    }
    atomic_fetch_add(&h->consumed, (int)n);
    return 0;
}

static void on_ack(int status, void *data)
{
    harness_t *h = data;
    if (h->acks_ok + h->acks_err == 0)
        h->applied_at_ack = atomic_load(&h->consumed);
    if (status == 0) {
        h->acks_ok++;
    } else {
        h->acks_err++;
        h->last_err = status;
    }
}

static void on_closed(void *data)
{
    ((harness_t *)data)->closed = true;
}

static void test_delivers_in_order_and_acks_after_apply(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, NULL, consume, &h, &t));
    for (int i = 0; i < 20; i++) {
        uint8_t msg[2] = {(uint8_t)('a' + i), 0};
        LC_ASSERT_OK(
            lc_transport_publish(t, msg, sizeof(msg), 0, (const uint8_t *)"id", 2, on_ack, &h));
    }
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_CHECK(h.closed);
    LC_ASSERT_EQ(h.acks_ok, 20);
    LC_ASSERT_EQ(h.acks_err, 0);
    LC_ASSERT_EQ(atomic_load(&h.consumed), 20);
    LC_CHECK(h.applied_at_ack >= 1);
    for (int i = 0; i < 20; i++)
        LC_ASSERT_EQ(h.seen[i], 'a' + i);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void test_backlog_cap(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    atomic_store(&h.fail, 0);
    lc_direct_opts_t opts = {.max_backlog_bytes = 100};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, &opts, consume, &h, &t));
    uint8_t big[60] = {'x'};
    LC_ASSERT_OK(
        lc_transport_publish(t, big, sizeof(big), 0, (const uint8_t *)"id", 2, on_ack, &h));
    /* The first item is still queued (the loop has not run): 120 > 100. */
    int rc = lc_transport_publish(t, big, sizeof(big), 0, (const uint8_t *)"id", 2, on_ack, &h);
    LC_CHECK(rc == 0 || rc == LC_EFULL);
    lc_transport_stats_t st;
    lc_transport_stats(t, &st);
    LC_CHECK(st.backlog_bytes <= 120);
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_CHECK(h.closed);
    LC_ASSERT_EQ(h.acks_ok, rc == 0 ? 2 : 1);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

/* A message published with an attachment counts its weight, not its length:
 * a 1-byte message standing for more than the cap is refused even when the
 * backlog is empty. */
static void test_backlog_counts_weight(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    lc_direct_opts_t opts = {.max_backlog_bytes = 100};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, &opts, consume, &h, &t));
    static const int decoded;
    const uint8_t *id = (const uint8_t *)"id";
    LC_ASSERT_EQ(
        lc_transport_publish_local(t, (const uint8_t *)"a", 1, 101, 0, id, 2, &decoded, on_ack, &h),
        LC_EFULL);
    LC_ASSERT_OK(lc_transport_publish_local(t, (const uint8_t *)"a", 1, 100, 0, id, 2, &decoded,
                                            on_ack, &h));
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_ASSERT_EQ(h.acks_ok, 1);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void test_consumer_failure_reaches_publisher(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    atomic_store(&h.fail, LC_ESTORE);
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, NULL, consume, &h, &t));
    uint8_t msg[1] = {'z'};
    LC_ASSERT_OK(lc_transport_publish(t, msg, 1, 0, (const uint8_t *)"id", 2, on_ack, &h));
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_ASSERT_EQ(h.acks_ok, 0);
    LC_ASSERT_EQ(h.acks_err, 1);
    LC_ASSERT_EQ(h.last_err, LC_ESTORE);
    LC_ASSERT_EQ(atomic_load(&h.consumed), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void test_publish_after_close_is_refused(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, NULL, consume, &h, &t));
    lc_transport_close(t, on_closed, &h);
    uint8_t msg[1] = {'z'};
    LC_ASSERT_EQ(lc_transport_publish(t, msg, 1, 0, (const uint8_t *)"id", 2, on_ack, &h),
                 LC_ECLOSED);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_CHECK(h.closed);
    LC_ASSERT_EQ(h.acks_ok + h.acks_err, 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void on_status(int status, void *data)
{
    *(int *)data = status;
}

/* One batch: a, X, b. X's publisher learns its reject error, a's and b's
 * that they are durable. */
static void test_set_aside_message_fails_alone(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, NULL, consume, &h, &t));
    int status[3] = {1, 1, 1};
    const char *msgs = "aXb";
    for (int i = 0; i < 3; i++)
        LC_ASSERT_OK(lc_transport_publish(t, (const uint8_t *)&msgs[i], 1, 0, (const uint8_t *)"id",
                                          2, on_status, &status[i]));
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_CHECK(h.closed);
    LC_ASSERT_EQ(status[0], 0);
    LC_ASSERT_EQ(status[1], LC_EINPUT);
    LC_CHECK(lc_transport_rejected(status[1]));
    LC_ASSERT_EQ(status[2], 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

/* What a publisher attaches reaches the consumer with its message (the
 * writer then skips decoding); a plain publish attaches nothing. */
static void test_local_reaches_the_consumer(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    harness_t h = {0};
    lc_transport_t *t;
    LC_ASSERT_OK(lc_transport_direct_new(&loop, NULL, consume, &h, &t));
    static const int decoded[2];
    const uint8_t *id = (const uint8_t *)"id";
    LC_ASSERT_OK(lc_transport_publish_local(t, (const uint8_t *)"a", 1, 1, 0, id, 2, &decoded[0],
                                            on_ack, &h));
    LC_ASSERT_OK(lc_transport_publish(t, (const uint8_t *)"b", 1, 0, id, 2, on_ack, &h));
    LC_ASSERT_OK(lc_transport_publish_local(t, (const uint8_t *)"c", 1, 1, 0, id, 2, &decoded[1],
                                            on_ack, &h));
    lc_transport_close(t, on_closed, &h);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_ASSERT_EQ(h.acks_ok, 3);
    LC_CHECK(h.local[0] == &decoded[0]);
    LC_CHECK(h.local[1] == NULL);
    LC_CHECK(h.local[2] == &decoded[1]);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

LC_TEST_MAIN(test_delivers_in_order_and_acks_after_apply, test_backlog_cap,
             test_local_reaches_the_consumer, test_backlog_counts_weight,
             test_set_aside_message_fails_alone, test_consumer_failure_reaches_publisher,
             test_publish_after_close_is_refused)
