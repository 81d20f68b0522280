/*
 * transport_redis.c — the `redis` transport: Redis streams between receivers
 * and writers (ARCHITECTURE.md §2; the contract is in lc/transport.h).
 *
 * Two lc_redis links. `pub` carries XADDs, creates the consumer group on
 * every (re)connect when consuming (XGROUP CREATE ... 0 MKSTREAM: id 0, so
 * entries added before the group existed are still delivered; a publisher
 * creates none, since it cannot know which groups — zones — will read) and
 * runs the monitor: every monitor_interval_ms, per stream, XINFO GROUPS +
 * XLEN (+ XPENDING per group when trimming) give the backlog of the slowest
 * group (pending + lag, or XLEN when Redis cannot tell the lag) and, on
 * consumers, the trim point. `rd` exists only when consuming, because its
 * XREADGROUP BLOCK would stall everything queued behind it.
 *
 * The consumer is a loop-thread state machine that does one step at a time
 * (lc_rt__cons_next): create groups after a reconnect, write the dead letters
 * of what consume set aside (transport_redis_dead.c), send or re-send acks,
 * forget what others claimed from it (after a reconnect: its claims record;
 * after an ack: what that ack found claimed away), read its own pending
 * entries (recovery), claim idle entries of others, or block for new ones. A
 * batch goes to the consumer thread; the ack follows only a 0 from consume.
 * Steps are strictly sequential, so a batch is never read twice by the same
 * consumer while it is being applied, and a forget never overlaps a batch.
 * The one overlap: while a batch is applied, the next one is read ahead
 * (new entries only, into `ahead`, never BLOCK) and taken as a step once the
 * batch is acked (docs/internals/redis.md, "Read ahead").
 *
 * Claims and acks are Lua scripts (CLAIM_LUA, ACK_LUA; the protocol and why
 * XAUTOCLAIM cannot do it are in docs/internals/redis.md, "Claims"). They
 * are sent in full with EVAL each time: a few hundred bytes, and no NOSCRIPT
 * to handle after a Redis restart.
 *
 * Trimming (consumers, every trim_interval_ms): a group's oldest needed
 * entry is its oldest pending id, or the first id after last-delivered-id
 * when nothing is pending; the stream keeps everything from the oldest needed
 * entry of ANY group (every zone has its own group and a full copy), and
 * XTRIM MINID ~ that id only drops entries below it. XINFO GROUPS is read
 * before each group's XPENDING on one link: both only grow, so a delivery
 * between the reads can only make the point conservative.
 *
 * This file builds the transport and answers its stats; each job has its own
 * file (publish, monitor, consumer, close: the map is in transport_redis_int.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

static const lc_transport_ops_t rt_ops;

/* Every entry is a buffer of about the body's size (often 0.1-1 MiB) several
 * times over: the packed message, hiredis's formatted command and output
 * buffer, its reader buffer and reply string. Their pages stay with the
 * process (lc_malloc_keep_heap_top; bench/README.md, "redis: pages kept").
 * Set by every redis transport, for the processes that open no store. */
static void rt_malloc_setup(void)
{
    if (!lc_malloc_keep_heap_top())
        LC_LOG_WARN("redis: mallopt(M_TRIM_THRESHOLD) failed; entries may fault their pages in");
}

void lc_rt__release_one(lc_transport_t *base)
{
    if (!base || base->ops != &rt_ops)
        return;
    rt_t *t = (rt_t *)base;
    if (!t->held)
        return;
    t->held = false;
    if (t->consume && !t->closing)
        lc_rt__cons_next(t);
}

/* ---------------------------------------------------------------- stats */

static void rt_stats(lc_transport_t *base, lc_transport_stats_t *out)
{
    rt_t *t = (rt_t *)base;
    out->published = atomic_load(&t->published);
    out->consumed = atomic_load(&t->consumed);
    out->failed = atomic_load(&t->publish_failed) + atomic_load(&t->consume_failed);
    out->backlog_msgs = atomic_load(&t->backlog_sum);
    out->backlog_bytes = 0; /* Redis does not tell cheaply */
}

int lc_rt__stats_one(lc_transport_t *base, lc_redis_transport_stats_t *out)
{
    if (!base || base->ops != &rt_ops)
        return LC_EINPUT;
    rt_t *t = (rt_t *)base;
    *out = (lc_redis_transport_stats_t){
        .up = atomic_load(&t->pub_up),
        .consumer_up = atomic_load(&t->rd_up),
        .published = atomic_load(&t->published),
        .rejected_full = atomic_load(&t->rejected_full),
        .rejected_down = atomic_load(&t->rejected_down),
        .publish_failed = atomic_load(&t->publish_failed),
        .publish_retries = atomic_load(&t->publish_retries),
        .publish_duplicates = atomic_load(&t->publish_duplicates),
        .wait_short = atomic_load(&t->wait_short),
        .consumed = atomic_load(&t->consumed),
        .consume_failed = atomic_load(&t->consume_failed),
        .claimed = atomic_load(&t->claimed),
        .dropped = atomic_load(&t->dropped),
        .trimmed = atomic_load(&t->trimmed),
        .forgotten = atomic_load(&t->forgotten),
        .dead_letters = lc_transport__dead_count(t->dead),
        .pending = atomic_load(&t->pending_sum),
        .lag = atomic_load(&t->lag_sum),
        .backlog = atomic_load(&t->backlog_sum),
        .xadd_count = atomic_load(&t->xadd_count),
        .xadd_seconds_sum = (double)atomic_load(&t->xadd_ns_sum) / 1e9,
        .xadd_seconds_max = (double)atomic_load(&t->xadd_ns_max) / 1e9,
    };
    return 0;
}

static const lc_transport_ops_t rt_ops = {
    .publish = lc_rt__publish,
    .stats = rt_stats,
    .close = lc_rt__close,
    .lean_entries = true,
};

/* ---------------------------------------------------------------- construction */

static void rt_register_metrics(rt_t *t, lc_metrics_t *m)
{
    if (!m)
        return;
    t->m.published = lc_metrics_counter(m, "ember_redis_published_total",
                                        "Messages whose XADD Redis confirmed", "");
    t->m.rejected_full = lc_metrics_counter(m, "ember_redis_publish_rejected_total",
                                            "Publishes refused at once", "reason=\"backlog\"");
    t->m.rejected_down = lc_metrics_counter(m, "ember_redis_publish_rejected_total",
                                            "Publishes refused at once", "reason=\"redis_down\"");
    t->m.publish_failed = lc_metrics_counter(m, "ember_redis_publish_failed_total",
                                             "XADDs that failed or timed out", "");
    t->m.publish_retries =
        lc_metrics_counter(m, "ember_redis_publish_retries_total",
                           "XADD scripts sent again after an unknown outcome", "");
    t->m.publish_duplicates =
        lc_metrics_counter(m, "ember_redis_publish_duplicates_total",
                           "Publishes whose message id was already in the stream", "");
    if (t->opts.wait_replicas)
        t->m.wait_short =
            lc_metrics_counter(m, "ember_redis_wait_short_total",
                               "XADDs that WAIT found on fewer replicas than required", "");
    t->m.consumed = lc_metrics_counter(m, "ember_redis_consumed_total",
                                       "Messages applied and acknowledged", "");
    t->m.consume_failed = lc_metrics_counter(m, "ember_redis_consume_failed_total",
                                             "Messages of batches that failed to apply", "");
    t->m.claimed = lc_metrics_counter(m, "ember_redis_claimed_total",
                                      "Idle pending entries claimed (recorded per owner)", "");
    t->m.forgotten =
        lc_metrics_counter(m, "ember_redis_forgotten_total",
                           "Entries claimed from this consumer that it then forgot", "");
    t->m.trimmed = lc_metrics_counter(m, "ember_redis_trimmed_total",
                                      "Stream entries trimmed below the oldest needed", "");
    t->m.pending = lc_metrics_gauge(m, "ember_redis_stream_pending",
                                    "Entries delivered but not acknowledged (all streams)", "");
    t->m.lag = lc_metrics_gauge(m, "ember_redis_stream_lag",
                                "Entries not yet delivered to the group (all streams)", "");
    t->m.up = lc_metrics_gauge(m, "ember_redis_up", "1 while the Redis publish link is up", "");
    t->m.xadd_seconds = lc_metrics_histogram(m, "ember_redis_xadd_duration_seconds",
                                             "XADD round trip until Redis confirmed", "", NULL, 0);
    if (!t->consume)
        return;
    static const char *const phases[] = {"read", "apply", "ack"};
    for (size_t i = 0; i < LC_ARRAY_LEN(phases); i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "phase=\"%s\"", phases[i]);
        t->m.phase[i] = lc_metrics_counter(
            m, "ember_redis_consumer_phase_seconds_total",
            "Consumer time by phase: read (waiting for XREADGROUP, its BLOCK wait "
            "included; a read ahead counts only after the ack), apply (the consume call), "
            "ack (the ack scripts; a read sent behind them overlaps)",
            labels);
    }
    static const double bounds[] = {1, 4, 16, 64, 256, 1024};
    t->m.batch = lc_metrics_histogram(m, "ember_redis_consume_batch_entries",
                                      "Entries per batch handed to the consumer", "", bounds,
                                      LC_ARRAY_LEN(bounds));
}

static void rt_defaults(lc_redis_transport_opts_t *o)
{
    o->partitions = o->partitions ? o->partitions : RT_DEFAULT_PARTITIONS;
    o->max_backlog = o->max_backlog ? o->max_backlog : RT_DEFAULT_MAX_BACKLOG;
    o->batch = o->batch ? o->batch : RT_DEFAULT_BATCH;
    o->publish_links = o->publish_links ? o->publish_links : RT_DEFAULT_PUB_LINKS;
    o->block_ms = o->block_ms ? o->block_ms : RT_DEFAULT_BLOCK_MS;
    o->claim_idle_ms = o->claim_idle_ms ? o->claim_idle_ms : RT_DEFAULT_CLAIM_IDLE_MS;
    o->claim_interval_ms =
        o->claim_interval_ms ? o->claim_interval_ms : RT_DEFAULT_CLAIM_INTERVAL_MS;
    o->monitor_interval_ms =
        o->monitor_interval_ms ? o->monitor_interval_ms : RT_DEFAULT_MONITOR_MS;
    o->trim_interval_ms = o->trim_interval_ms ? o->trim_interval_ms : RT_DEFAULT_TRIM_MS;
    o->consume_retry_ms = o->consume_retry_ms ? o->consume_retry_ms : RT_DEFAULT_CONSUME_RETRY_MS;
    o->cmd_timeout_ms = o->cmd_timeout_ms ? o->cmd_timeout_ms : 5000;
    /* WAIT holds the link's later replies: half a command timeout, so that a
     * missing replica shows as a short count, not a stuck link. */
    if (o->wait_replicas && !o->wait_timeout_ms)
        o->wait_timeout_ms = o->cmd_timeout_ms / 2 ? o->cmd_timeout_ms / 2 : 1;
    /* publish_retry_ms 0: bare XADDs, no retry, no dedupe key. */
    /* A retry runs at most publish_retry_ms + cmd_timeout_ms after the first
     * attempt (later, its caller was already told 503): twice that is ample. */
    uint64_t ttl = 2 * ((uint64_t)o->publish_retry_ms + o->cmd_timeout_ms);
    if (o->publish_retry_ms && !o->dedupe_ttl_ms)
        o->dedupe_ttl_ms = ttl > UINT32_MAX ? UINT32_MAX : (uint32_t)ttl;
}

static bool rt_opts_valid(const lc_redis_transport_opts_t *o, bool consuming)
{
    lc_redis_url_t url;
    if (!o || lc_redis_url_parse(o->url, &url) != 0)
        return false;
    if (consuming && (!o->consumer_id || !o->consumer_id[0]))
        return false;
    return o->partitions <= 4096;
}

static void rt_make_streams(rt_t *t)
{
    uint32_t n = t->opts.partitions;
    t->parts = lc_xcalloc(n, sizeof(*t->parts));
    t->names = lc_xcalloc(n, sizeof(*t->names));
    for (uint32_t p = 0; p < n; p++) {
        size_t len = strlen(t->prefix) + 12;
        t->parts[p].stream = lc_xmalloc(len);
        snprintf(t->parts[p].stream, len, "%s%u", t->prefix, t->first + p);
        t->names[p] = t->parts[p].stream;
    }
    /* COUNT is per stream in XREADGROUP: spread the batch over the streams. */
    uint32_t per = (t->opts.batch + n - 1) / n;
    t->read_count = per < RT_MIN_READ_COUNT ? RT_MIN_READ_COUNT : per;
}

/* Claims records are per group (zones have their own) and per consumer. */
static void rt_make_claim_keys(rt_t *t)
{
    size_t len = strlen(RT_CLAIMED_PREFIX) + strlen(t->group) + strlen(t->parts[0].stream) + 5;
    t->claimed_prefix = lc_xmalloc(len);
    if (t->cluster) /* the scripts touch it with the stream: one slot */
        snprintf(t->claimed_prefix, len, "%s{%s}:%s:", RT_CLAIMED_PREFIX, t->parts[0].stream,
                 t->group);
    else
        snprintf(t->claimed_prefix, len, "%s%s:", RT_CLAIMED_PREFIX, t->group);
    const char *me = t->consumer ? t->consumer : "";
    len += strlen(me);
    t->claimed_key = lc_xmalloc(len);
    snprintf(t->claimed_key, len, "%s%s", t->claimed_prefix, me);
    t->delivery_stride = strlen(t->prefix) + 12 + 1 + LC_REDIS_ID_MAX;
}

static lc_redis_t *rt_link(rt_t *t, const char *role, lc_redis_state_cb on_state)
{
    char name[160];
    snprintf(name, sizeof(name), "ember-%s%s%s", role, t->consumer ? "-" : "",
             t->consumer ? t->consumer : "");
    lc_redis_opts_t ro = {.url = t->url,
                          .name = name,
                          .cmd_timeout_ms = t->opts.cmd_timeout_ms,
                          .on_state = on_state,
                          .state_data = t};
    if (t->cluster)
        lc_redis_cluster_route(t->cluster, t->parts[0].stream, &ro);
    lc_redis_t *r = NULL;
    LC_ASSERT(lc_redis_new(t->loop, &ro, &r) == 0); /* the URL was validated */
    return r;
}

/* The thread only waits until a batch or the quit flag is posted, so it may
 * start before the handles it will use exist. */
static int rt_start_thread(rt_t *t)
{
    int rc = uv_mutex_init(&t->mu);
    if (rc)
        return rc;
    rc = uv_cond_init(&t->cond);
    if (!rc)
        rc = uv_thread_create(&t->thread, lc_rt__cons_thread_main, t);
    if (rc) {
        uv_cond_destroy(&t->cond); /* harmless if its init failed: never waited on */
        uv_mutex_destroy(&t->mu);
    }
    return rc;
}

static void rt_start_consumer(rt_t *t)
{
    uv_timer_init(t->loop, &t->retry_timer);
    uv_async_init(t->loop, &t->done_async, lc_rt__cons_on_done);
    t->retry_timer.data = t->done_async.data = t;
    t->rd = rt_link(t, "consumer", lc_rt__rd_on_state);
}

int lc_rt__new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts, uint32_t first,
               lc_redis_cluster_t *cluster, lc_transport_consume_fn consume, void *data,
               lc_transport_t **out)
{
    if (!rt_opts_valid(opts, consume != NULL) || (cluster && opts->partitions != 1))
        return LC_EINPUT;
    rt_malloc_setup();
    rt_t *t = lc_xcalloc(1, sizeof(*t));
    t->base.ops = &rt_ops;
    t->loop = loop;
    t->first = first;
    t->cluster = cluster;
    t->opts = *opts;
    rt_defaults(&t->opts);
    t->url = lc_xstrdup(opts->url);
    t->prefix = lc_xstrdup(opts->stream_prefix ? opts->stream_prefix : RT_DEFAULT_PREFIX);
    t->group = lc_xstrdup(opts->group ? opts->group : RT_DEFAULT_GROUP);
    t->consumer = consume ? lc_xstrdup(opts->consumer_id) : NULL;
    t->opts.url = t->opts.stream_prefix = t->opts.group = t->opts.consumer_id = NULL;
    t->consume = consume;
    t->consume_data = data;
    t->held = opts->hold_consume;
    rt_make_streams(t);
    rt_make_claim_keys(t);
    int rc = consume ? rt_start_thread(t) : 0;
    if (rc) {
        t->consume = NULL; /* lc_rt__free must not destroy what failed to exist */
        lc_rt__free(t);
        return rc;
    }
    rt_register_metrics(t, opts->metrics);
    if (consume)
        t->dead = lc_transport__dead_new(opts->dead_prefix, opts->dead_max_len, t->consumer,
                                         opts->metrics);
    if (t->dead)
        lc_transport__dead_place(t->dead, first, cluster != NULL);
    uv_timer_init(loop, &t->monitor_timer);
    t->monitor_timer.data = t;
    uint32_t every = t->opts.monitor_interval_ms;
    uv_timer_start(&t->monitor_timer, lc_rt__monitor_on_tick, every, every);
    uv_timer_init(loop, &t->pub_retry_timer);
    t->pub_retry_timer.data = t;
    t->parked_tail = &t->parked;
    t->n_pubs =
        t->opts.publish_links < t->opts.partitions ? t->opts.publish_links : t->opts.partitions;
    t->pubs = lc_xcalloc(t->n_pubs, sizeof(*t->pubs));
    t->pubs_up = lc_xcalloc(t->n_pubs, sizeof(*t->pubs_up));
    for (uint32_t i = 0; i < t->n_pubs; i++)
        t->pubs[i] = rt_link(t, "publisher", lc_rt__pub_on_state);
    if (consume)
        rt_start_consumer(t);
    *out = &t->base;
    return 0;
}
