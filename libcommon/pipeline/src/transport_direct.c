/*
 * transport_direct.c — the in-process transport of the all-in-one `ember`.
 *
 * Publishers (loop thread) append copies of messages to a queue; one consumer
 * thread takes batches and hands them to the consume function (the writer),
 * which returns once the batch is committed to disk. Completed items go back
 * to the loop through a uv_async_t, where each publish callback runs. A
 * client therefore hears "200" only after its profile is on disk.
 *
 * A batch that fails to apply is retried a few times with back-off; if it
 * still fails, its publishers get the error (their clients get 503 and know
 * nothing was acknowledged) rather than waiting forever. A message the
 * consumer set aside (reject_err) fails alone: its publisher gets that
 * error (a 4xx for its client), the rest of the batch is durable.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/transport.h"

#define DIRECT_RETRIES 3
#define DIRECT_RETRY_DELAY_MS 200

typedef struct direct_item_s {
    struct direct_item_s *next;
    uint8_t *data;
    size_t len;
    size_t weight;     /* what it counts in backlog_bytes (>= len) */
    const void *local; /* the publisher's attachment (lc_transport_publish_local) */
    int status;
    lc_transport_publish_cb cb;
    void *cb_data;
} direct_item_t;

typedef struct direct_queue_s {
    direct_item_t *head, *tail;
} direct_queue_t;

typedef struct direct_s {
    lc_transport_t base;
    uv_loop_t *loop;
    uv_async_t done_async;
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cond;
    direct_queue_t pending; /* guarded by mu */
    direct_queue_t done;    /* guarded by mu */
    size_t backlog_bytes;   /* guarded by mu: queued or being applied */
    size_t backlog_msgs;
    bool closing;       /* guarded by mu */
    bool thread_exited; /* guarded by mu */
    bool joined;        /* loop thread only */
    lc_direct_opts_t opts;
    lc_transport_consume_fn consume;
    void *consume_data;
    void (*close_cb)(void *data);
    void *close_data;
    atomic_uint_fast64_t published, consumed, failed;
} direct_t;

static void queue_push(direct_queue_t *q, direct_item_t *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
}

/* Detaches up to max items from the front of q. */
static direct_item_t *queue_take(direct_queue_t *q, size_t max, size_t *n)
{
    direct_item_t *first = q->head, *last = NULL, *it = q->head;
    size_t k = 0;
    while (it && k < max) {
        last = it;
        it = it->next;
        k++;
    }
    if (last) {
        q->head = last->next;
        if (!q->head)
            q->tail = NULL;
        last->next = NULL;
    }
    *n = k;
    return k ? first : NULL;
}

/* Applies a batch and sets each item's status; returns the batch's. */
static int apply_batch(direct_t *d, direct_item_t *batch, size_t n)
{
    lc_transport_msg_t *msgs = lc_xcalloc(n, sizeof(*msgs));
    size_t i = 0;
    for (direct_item_t *it = batch; it; it = it->next, i++)
        msgs[i] =
            (lc_transport_msg_t){.data = it->data, .len = it->len, .id = "", .local = it->local};
    int rc = -1;
    for (int attempt = 0; attempt < DIRECT_RETRIES; attempt++) {
        rc = d->consume(msgs, n, d->consume_data);
        if (rc == 0 || attempt + 1 == DIRECT_RETRIES)
            break;
        LC_LOG_WARN("applying a batch failed, retrying err=\"%s\" attempt=%d", lc_strerror(rc),
                    attempt + 1);
        uv_sleep(DIRECT_RETRY_DELAY_MS << attempt);
    }
    i = 0;
    for (direct_item_t *it = batch; it; it = it->next, i++)
        it->status = rc ? rc : msgs[i].reject_err;
    lc_free(msgs);
    return rc;
}

static void consumer_main(void *arg)
{
    direct_t *d = arg;
    uv_mutex_lock(&d->mu);
    for (;;) {
        while (!d->pending.head && !d->closing)
            uv_cond_wait(&d->cond, &d->mu);
        size_t n;
        direct_item_t *batch = queue_take(&d->pending, d->opts.max_batch, &n);
        if (!batch)
            break; /* closing and drained */
        uv_mutex_unlock(&d->mu);
        int rc = apply_batch(d, batch, n);
        atomic_fetch_add(rc == 0 ? &d->consumed : &d->failed, n);
        uv_mutex_lock(&d->mu);
        for (direct_item_t *it = batch, *next; it; it = next) {
            next = it->next;
            queue_push(&d->done, it);
        }
        uv_async_send(&d->done_async);
    }
    d->thread_exited = true;
    uv_mutex_unlock(&d->mu);
    uv_async_send(&d->done_async);
}

static void direct_free(uv_handle_t *h)
{
    direct_t *d = LC_CONTAINER_OF(h, direct_t, done_async);
    void (*cb)(void *) = d->close_cb;
    void *data = d->close_data;
    uv_mutex_destroy(&d->mu);
    uv_cond_destroy(&d->cond);
    lc_free(d);
    if (cb)
        cb(data);
}

/* Loop thread: run the callbacks of completed items; finish closing. */
static void direct_on_done(uv_async_t *a)
{
    direct_t *d = LC_CONTAINER_OF(a, direct_t, done_async);
    uv_mutex_lock(&d->mu);
    size_t n;
    direct_item_t *done = queue_take(&d->done, SIZE_MAX, &n);
    for (direct_item_t *it = done; it; it = it->next) {
        d->backlog_bytes -= it->weight;
        d->backlog_msgs--;
    }
    bool exited = d->thread_exited;
    uv_mutex_unlock(&d->mu);
    for (direct_item_t *it = done, *next; it; it = next) {
        next = it->next;
        it->cb(it->status, it->cb_data);
        lc_free(it->data);
        lc_free(it);
    }
    if (exited && !d->joined) {
        uv_thread_join(&d->thread);
        d->joined = true;
        uv_close((uv_handle_t *)&d->done_async, direct_free);
    }
}

/* The id is not needed: a message handed over in process is never retried.
 * `local` goes to the consumer beside the copy of msg. */
static int direct_publish_local(lc_transport_t *t, const uint8_t *msg, size_t len, size_t weight,
                                uint32_t partition, const uint8_t *id, size_t id_len,
                                const void *local, lc_transport_publish_cb cb, void *data)
{
    direct_t *d = (direct_t *)t;
    LC_UNUSED(partition);
    LC_UNUSED(id);
    LC_UNUSED(id_len);
    uv_mutex_lock(&d->mu);
    int rc = 0;
    if (d->closing)
        rc = LC_ECLOSED;
    else if (d->backlog_bytes + weight > d->opts.max_backlog_bytes)
        rc = LC_EFULL;
    if (rc) {
        uv_mutex_unlock(&d->mu);
        return rc;
    }
    direct_item_t *it = lc_xcalloc(1, sizeof(*it));
    it->data = lc_xmalloc(len);
    memcpy(it->data, msg, len);
    it->len = len;
    it->weight = weight;
    it->local = local;
    it->cb = cb;
    it->cb_data = data;
    queue_push(&d->pending, it);
    d->backlog_bytes += weight;
    d->backlog_msgs++;
    uv_cond_signal(&d->cond);
    uv_mutex_unlock(&d->mu);
    atomic_fetch_add(&d->published, 1);
    return 0;
}

static int direct_publish(lc_transport_t *t, const uint8_t *msg, size_t len, uint32_t partition,
                          const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data)
{
    return direct_publish_local(t, msg, len, len, partition, id, id_len, NULL, cb, data);
}

static void direct_stats(lc_transport_t *t, lc_transport_stats_t *out)
{
    direct_t *d = (direct_t *)t;
    uv_mutex_lock(&d->mu);
    out->backlog_bytes = d->backlog_bytes;
    out->backlog_msgs = d->backlog_msgs;
    uv_mutex_unlock(&d->mu);
    out->published = atomic_load(&d->published);
    out->consumed = atomic_load(&d->consumed);
    out->failed = atomic_load(&d->failed);
}

static void direct_close(lc_transport_t *t, void (*cb)(void *data), void *data)
{
    direct_t *d = (direct_t *)t;
    d->close_cb = cb;
    d->close_data = data;
    uv_mutex_lock(&d->mu);
    d->closing = true;
    uv_cond_signal(&d->cond);
    uv_mutex_unlock(&d->mu);
}

static const lc_transport_ops_t direct_ops = {
    .publish = direct_publish,
    .stats = direct_stats,
    .close = direct_close,
    .publish_local = direct_publish_local,
};

int lc_transport_direct_new(uv_loop_t *loop, const lc_direct_opts_t *opts,
                            lc_transport_consume_fn consume, void *data, lc_transport_t **out)
{
    direct_t *d = lc_xcalloc(1, sizeof(*d));
    d->base.ops = &direct_ops;
    d->loop = loop;
    d->opts = opts ? *opts : (lc_direct_opts_t){0};
    if (!d->opts.max_backlog_bytes)
        d->opts.max_backlog_bytes = 256u << 20;
    if (!d->opts.max_batch)
        d->opts.max_batch = 256;
    d->consume = consume;
    d->consume_data = data;
    int rc = uv_mutex_init(&d->mu);
    if (!rc)
        rc = uv_cond_init(&d->cond);
    if (!rc)
        rc = uv_async_init(loop, &d->done_async, direct_on_done);
    if (!rc)
        rc = uv_thread_create(&d->thread, consumer_main, d);
    if (rc) {
        lc_free(d); /* init failures only happen at start-up; handles leak is moot */
        return rc;
    }
    *out = &d->base;
    return 0;
}
