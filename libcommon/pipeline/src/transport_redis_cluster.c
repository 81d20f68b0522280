/*
 * transport_redis_cluster.c — the `redis` transport on Redis Cluster: one
 * ordinary redis transport (an rt_t, "shard") per partition, each with
 * partitions = 1, whose links follow the master owning its stream's slot
 * (lc/redis_cluster.h: the routing is ours, hiredis 0.14 has none), behind
 * one lc_transport_t.
 *
 * Why a shard per partition: every command a shard sends (XREADGROUP over
 * its streams, the claim and ack scripts with the claims record, dead
 * letters) then touches keys of one slot, so the consumer's state machine is
 * the same as on a single Redis, and a failover moves a shard as a whole.
 * The price: a publish link, a consumer link and a consumer thread per
 * partition (16 by default), and reads that cannot span partitions.
 *
 * The shards' consume (and forget) calls are serialized here, so the
 * consumer sees one call at a time as with a single Redis. The transport is
 * up when every shard's publish link is; settled (on_settled) once every
 * shard is. Loop thread, except rc_consume / rc_forget (the shards' consumer
 * threads) and the stats (any thread).
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

typedef struct rc_s rc_t;

typedef struct rc_shard_s {
    rc_t *rc;
    lc_transport_t *t;
    bool up, settled;
} rc_shard_t;

struct rc_s {
    lc_transport_t base;
    lc_redis_cluster_t *cl;
    rc_shard_t *shards;
    uint32_t n, n_up, n_settled;
    lc_transport_consume_fn consume;
    lc_transport_forget_fn forget;
    void *data;
    uv_mutex_t apply_mu; /* one consume or forget at a time, over every shard */
    void (*on_state)(bool up, void *data);
    void (*on_settled)(void *data);
    void *state_data;
    uint32_t closing_left;
    void (*close_cb)(void *data);
    void *close_data;
};

static const lc_transport_ops_t rc_ops;

static int rc_consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    rc_t *rc = data;
    uv_mutex_lock(&rc->apply_mu);
    int r = rc->consume(msgs, n, rc->data);
    uv_mutex_unlock(&rc->apply_mu);
    return r;
}

static int rc_forget(const char *const *deliveries, size_t n, void *data)
{
    rc_t *rc = data;
    uv_mutex_lock(&rc->apply_mu);
    int r = rc->forget(deliveries, n, rc->data);
    uv_mutex_unlock(&rc->apply_mu);
    return r;
}

static void rc_on_shard_state(bool up, void *data)
{
    rc_shard_t *s = data;
    rc_t *rc = s->rc;
    if (s->up == up)
        return;
    bool was_up = rc->n_up == rc->n;
    s->up = up;
    rc->n_up = up ? rc->n_up + 1 : rc->n_up - 1;
    bool all_up = rc->n_up == rc->n;
    if (all_up != was_up && rc->on_state)
        rc->on_state(all_up, rc->state_data);
}

static void rc_on_shard_settled(void *data)
{
    rc_shard_t *s = data;
    rc_t *rc = s->rc;
    if (s->settled)
        return;
    s->settled = true;
    if (++rc->n_settled == rc->n && rc->on_settled)
        rc->on_settled(rc->state_data);
}

static int rc_publish(lc_transport_t *base, const uint8_t *msg, size_t len, uint32_t partition,
                      const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data)
{
    rc_t *rc = (rc_t *)base;
    if (rc->closing_left)
        return LC_ECLOSED;
    return lc_transport_publish(rc->shards[partition % rc->n].t, msg, len, 0, id, id_len, cb, data);
}

static void rc_stats(lc_transport_t *base, lc_transport_stats_t *out)
{
    rc_t *rc = (rc_t *)base;
    *out = (lc_transport_stats_t){0};
    for (uint32_t i = 0; i < rc->n; i++) {
        lc_transport_stats_t one;
        lc_transport_stats(rc->shards[i].t, &one);
        out->published += one.published;
        out->consumed += one.consumed;
        out->failed += one.failed;
        out->backlog_msgs += one.backlog_msgs;
    }
}

static void rc_free(rc_t *rc)
{
    if (rc->consume || rc->forget)
        uv_mutex_destroy(&rc->apply_mu);
    lc_free(rc->shards);
    lc_free(rc);
}

static void rc_on_cluster_closed(void *data)
{
    rc_t *rc = data;
    void (*cb)(void *) = rc->close_cb;
    void *cb_data = rc->close_data;
    rc_free(rc);
    if (cb)
        cb(cb_data);
}

/* The shards use the cluster's map until they are closed: it goes last. */
static void rc_on_shard_closed(void *data)
{
    rc_t *rc = data;
    if (--rc->closing_left == 0)
        lc_redis_cluster_close(rc->cl, rc_on_cluster_closed, rc);
}

static void rc_close(lc_transport_t *base, void (*cb)(void *data), void *data)
{
    rc_t *rc = (rc_t *)base;
    rc->close_cb = cb;
    rc->close_data = data;
    rc->closing_left = rc->n;
    for (uint32_t i = 0; i < rc->n; i++)
        lc_transport_close(rc->shards[i].t, rc_on_shard_closed, rc);
}

static const lc_transport_ops_t rc_ops = {
    .publish = rc_publish,
    .stats = rc_stats,
    .close = rc_close,
    .lean_entries = true,
};

bool lc_rt__cluster_release(lc_transport_t *base)
{
    if (base->ops != &rc_ops)
        return false;
    rc_t *rc = (rc_t *)base;
    for (uint32_t i = 0; i < rc->n; i++)
        lc_rt__release_one(rc->shards[i].t);
    return true;
}

/* Sums of the shards' counters; up only while every shard is. */
static void stats_add(lc_redis_transport_stats_t *sum, const lc_redis_transport_stats_t *one)
{
    sum->up &= one->up;
    sum->consumer_up &= one->consumer_up;
    sum->published += one->published;
    sum->rejected_full += one->rejected_full;
    sum->rejected_down += one->rejected_down;
    sum->publish_failed += one->publish_failed;
    sum->publish_retries += one->publish_retries;
    sum->publish_duplicates += one->publish_duplicates;
    sum->wait_short += one->wait_short;
    sum->consumed += one->consumed;
    sum->consume_failed += one->consume_failed;
    sum->claimed += one->claimed;
    sum->dropped += one->dropped;
    sum->trimmed += one->trimmed;
    sum->forgotten += one->forgotten;
    sum->dead_letters += one->dead_letters;
    sum->pending += one->pending;
    sum->lag += one->lag;
    sum->backlog += one->backlog;
    sum->xadd_count += one->xadd_count;
    sum->xadd_seconds_sum += one->xadd_seconds_sum;
    if (one->xadd_seconds_max > sum->xadd_seconds_max)
        sum->xadd_seconds_max = one->xadd_seconds_max;
}

int lc_rt__cluster_stats(lc_transport_t *base, lc_redis_transport_stats_t *out)
{
    if (base->ops != &rc_ops)
        return LC_EINPUT;
    rc_t *rc = (rc_t *)base;
    *out = (lc_redis_transport_stats_t){.up = true, .consumer_up = true};
    for (uint32_t i = 0; i < rc->n; i++) {
        lc_redis_transport_stats_t one;
        if (lc_rt__stats_one(rc->shards[i].t, &one) == 0)
            stats_add(out, &one);
    }
    out->consumer_up &= rc->consume != NULL;
    return 0;
}

/* A shard's options: the caller's, for one partition, through the router. */
static lc_redis_transport_opts_t rc_shard_opts(const lc_redis_transport_opts_t *o, rc_shard_t *s)
{
    lc_redis_transport_opts_t so = *o;
    uint32_t parts = o->partitions ? o->partitions : 16;
    uint32_t batch = o->batch ? o->batch : 256;
    so.cluster = false;
    so.partitions = 1;
    so.publish_links = 1;
    so.batch = (batch + parts - 1) / parts; /* the batches of all shards together */
    so.forget = o->forget ? rc_forget : NULL;
    so.on_state = rc_on_shard_state;
    /* Only with the caller's: a shard that calls on_settled waits for a release. */
    so.on_settled = o->on_settled ? rc_on_shard_settled : NULL;
    so.state_data = s;
    return so;
}

static int rc_start_shards(rc_t *rc, uv_loop_t *loop, const lc_redis_transport_opts_t *o,
                           const char *url)
{
    for (uint32_t p = 0; p < rc->n; p++) {
        rc_shard_t *s = &rc->shards[p];
        s->rc = rc;
        lc_redis_transport_opts_t so = rc_shard_opts(o, s);
        so.url = url;
        int r = lc_rt__new(loop, &so, p, rc->cl, rc->consume ? rc_consume : NULL, rc, &s->t);
        if (r)
            return r;
    }
    return 0;
}

int lc_rt__cluster_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                       lc_transport_consume_fn consume, void *data, lc_transport_t **out)
{
    uint32_t parts = opts->partitions ? opts->partitions : 16;
    if (parts > 4096 || (consume && (!opts->consumer_id || !opts->consumer_id[0])))
        return LC_EINPUT;
    lc_redis_cluster_t *cl = NULL;
    lc_redis_cluster_opts_t co = {
        .seeds = opts->url, .name = "ember-cluster", .cmd_timeout_ms = opts->cmd_timeout_ms};
    int r = lc_redis_cluster_new(loop, &co, &cl);
    if (r)
        return r;
    rc_t *rc = lc_xcalloc(1, sizeof(*rc));
    rc->base.ops = &rc_ops;
    rc->cl = cl;
    rc->n = parts;
    rc->shards = lc_xcalloc(parts, sizeof(*rc->shards));
    rc->consume = consume;
    rc->forget = consume ? opts->forget : NULL;
    rc->data = data;
    rc->on_state = opts->on_state;
    rc->on_settled = opts->on_settled;
    rc->state_data = opts->state_data;
    if (consume)
        LC_ASSERT(uv_mutex_init(&rc->apply_mu) == 0);
    /* Every shard authenticates like the first seed (lc_redis_cluster_route sets the same). */
    char first[1024];
    const char *comma = strchr(opts->url, ',');
    size_t len = comma ? (size_t)(comma - opts->url) : strlen(opts->url);
    snprintf(first, sizeof(first), "%.*s", (int)len, opts->url);
    r = rc_start_shards(rc, loop, opts, first);
    /* The options were checked above and by the cluster; what is left is a
     * consumer thread that could not start, like a failed allocation. */
    LC_ASSERT(r == 0);
    *out = &rc->base;
    return 0;
}
