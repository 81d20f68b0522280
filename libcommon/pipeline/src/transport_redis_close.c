/*
 * transport_redis_close.c — closing and freeing the `redis` transport. A
 * close waits until the transport is quiet (no XADD, probe, ack or applied
 * batch in flight: every job calls lc_rt__close_step when one ends), then
 * closes the timers and links and stops the consumer thread; the last close
 * callback frees everything and calls the caller's. Loop thread only.
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

static void rt_unref(rt_t *t);

void lc_rt__on_handle_closed(uv_handle_t *h)
{
    rt_unref(h->data);
}

void lc_rt__forget_clear(rt_t *t)
{
    for (size_t i = 0; i < t->n_forget; i++)
        lc_free(t->forget_ids[i]);
    t->n_forget = 0;
}

/* ---------------------------------------------------------------- closing */

void lc_rt__free(rt_t *t)
{
    for (uint32_t p = 0; p < t->opts.partitions; p++)
        lc_free(t->parts[p].stream);
    lc_free(t->parts);
    lc_free(t->names);
    lc_free(t->pubs);
    lc_free(t->pubs_up);
    lc_redis_entries_fini(&t->batch);
    lc_redis_entries_fini(&t->ahead);
    lc_free(t->msgs);
    lc_free(t->deliveries);
    lc_rt__forget_clear(t);
    lc_free(t->forget_ids);
    lc_free(t->claimed_prefix);
    lc_free(t->claimed_key);
    lc_free(t->url);
    lc_free(t->prefix);
    lc_free(t->group);
    lc_free(t->consumer);
    lc_transport__dead_free(t->dead);
    if (t->consume) {
        uv_mutex_destroy(&t->mu);
        uv_cond_destroy(&t->cond);
    }
    lc_free(t);
}

static void rt_unref(rt_t *t)
{
    if (--t->refs > 0)
        return;
    void (*cb)(void *) = t->close_cb;
    void *data = t->close_data;
    lc_rt__free(t);
    if (cb)
        cb(data);
}

static void rt_on_link_closed(void *data)
{
    rt_unref(data);
}

/* Everything that must end before the links close: XADDs in flight, monitor
 * probes, and a batch being applied or acked. A blocking read is abandoned:
 * what it delivered stays pending for this consumer id (or a claimer). */
static bool rt_quiet(const rt_t *t)
{
    return t->xadds_out == 0 && t->probes_out == 0 && t->acks_out == 0 &&
           (t->busy == CB_NONE || t->busy == CB_BLOCK || t->busy == CB_PAUSE);
}

void lc_rt__close_step(rt_t *t)
{
    if (!t->closing || t->finishing || !rt_quiet(t))
        return;
    t->finishing = true;
    t->refs = 2 + (int)t->n_pubs; /* monitor timer + publish retry timer + pub links */
    uv_close((uv_handle_t *)&t->monitor_timer, lc_rt__on_handle_closed);
    uv_close((uv_handle_t *)&t->pub_retry_timer, lc_rt__on_handle_closed);
    for (uint32_t i = 0; i < t->n_pubs; i++)
        lc_redis_close(t->pubs[i], rt_on_link_closed, t);
    if (!t->consume)
        return;
    t->refs += 3; /* rd link, retry timer, async (after the join) */
    uv_close((uv_handle_t *)&t->retry_timer, lc_rt__on_handle_closed);
    lc_redis_close(t->rd, rt_on_link_closed, t);
    uv_mutex_lock(&t->mu);
    t->quit = true;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->mu);
}

void lc_rt__close(lc_transport_t *base, void (*cb)(void *data), void *data)
{
    rt_t *t = (rt_t *)base;
    if (t->closing)
        return;
    t->closing = true;
    t->close_cb = cb;
    t->close_data = data;
    lc_rt__close_step(t);
}
