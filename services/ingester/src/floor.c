/*
 * floor.c — the store's floor published as the ingester's mark (floor.h).
 *
 * One request at a time: the store serialises publishes under its floor
 * lock, so a slot (the request's sequence number and value) is enough. The
 * waiting thread gives up after ING_FLOOR_WAIT_MS; a request it gave up on may
 * still reach Redis, which is safe because the store keeps its floor at the
 * higher of the two values until a publish is confirmed (lc/store.h).
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "floor.h"
#include "lc/alloc.h"
#include "lc/log.h"

struct ing_floor_s {
    uv_async_t async; /* the loop's wake-up: a request waits */
    lc_members_t *members;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    bool closed;
    uint64_t asked, sent, done; /* request sequence numbers */
    int64_t ms;                 /* the request */
    bool lower;
    int status; /* of request `done` */
    lc_metric_t *lowered, *mark_seconds;
};

/* ---------------------------------------------------------------- the loop */

static void floor_send(ing_floor_t *f);

static void on_mark(int status, void *data)
{
    ing_floor_t *f = data;
    pthread_mutex_lock(&f->mu);
    f->done = f->sent;
    f->status = status;
    pthread_cond_broadcast(&f->cv);
    bool more = f->asked > f->sent && !f->closed;
    pthread_mutex_unlock(&f->mu);
    if (status)
        LC_LOG_WARN("floor: publishing the mark failed err=\"%s\"", lc_strerror(status));
    if (more)
        floor_send(f);
}

/* Sends the latest request unless one is in flight (its answer sends the next). */
static void floor_send(ing_floor_t *f)
{
    pthread_mutex_lock(&f->mu);
    if (f->closed || f->sent > f->done || f->asked == f->sent) {
        pthread_mutex_unlock(&f->mu);
        return;
    }
    f->sent = f->asked;
    int64_t ms = f->ms;
    bool lower = f->lower;
    pthread_mutex_unlock(&f->mu);
    int rc = lc_members_set_mark(f->members, ms, lower, on_mark, f);
    if (rc)
        on_mark(rc, f); /* never called back: answer the waiter now */
}

static void on_async(uv_async_t *a)
{
    floor_send(a->data);
}

/* ---------------------------------------------------------------- the store's side */

/* Floor division: a partition start in ms (starts are whole seconds). */
static int64_t ns_to_ms(int64_t ns)
{
    int64_t ms = ns / 1000000;
    return ns % 1000000 < 0 ? ms - 1 : ms;
}

static int floor_publish(void *ctx, int64_t floor_ns, bool lower)
{
    ing_floor_t *f = ctx;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ING_FLOOR_WAIT_MS / 1000;
    pthread_mutex_lock(&f->mu);
    uint64_t seq = ++f->asked;
    f->ms = ns_to_ms(floor_ns);
    f->lower = lower;
    if (!f->closed)
        uv_async_send(&f->async);
    int rc = 0;
    while (!f->closed && f->done < seq && rc == 0)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &until);
    int status = f->done >= seq ? f->status : -EAGAIN;
    pthread_mutex_unlock(&f->mu);
    if (!status && lower)
        lc_metric_add(f->lowered, 1);
    else if (!status)
        lc_metric_set(f->mark_seconds, (double)ns_to_ms(floor_ns) / 1e3);
    if (status)
        LC_LOG_WARN("floor: the mark is not confirmed, the write below it waits mark_ms=%lld "
                    "lower=%d err=\"%s\"",
                    (long long)ns_to_ms(floor_ns), (int)lower, lc_strerror(status));
    return status ? -EAGAIN : 0; /* never an input error: the message is fine */
}

/* ---------------------------------------------------------------- life */

int ing_floor_new(uv_loop_t *loop, lc_store_t *store, lc_members_t *members, lc_metrics_t *metrics,
                  ing_floor_t **out)
{
    ing_floor_t *f = lc_xcalloc(1, sizeof(*f));
    f->members = members;
    f->lowered = lc_metrics_counter(
        metrics, "ember_ingester_mark_lowered_total",
        "Writes below this ingester's mark that lowered it first (late profiles)", "");
    f->mark_seconds = lc_metrics_gauge(
        metrics, "ember_ingester_mark_seconds",
        "This ingester's mark as last set by the uploader: queriers read the bucket below it", "");
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = uv_async_init(loop, &f->async, on_async);
    if (rc) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        lc_free(f);
        return rc;
    }
    f->async.data = f;
    lc_store_set_floor(store, floor_publish, f);
    *out = f;
    return 0;
}

void ing_floor_close(ing_floor_t *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    bool was = f->closed;
    f->closed = true;
    f->members = NULL;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (!was)
        uv_close((uv_handle_t *)&f->async, NULL);
}

void ing_floor_free(ing_floor_t *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    lc_free(f);
}
