/*
 * transport_redis_int.h — internals shared by the files of the `redis`
 * transport (not a public header: the contract is lc/transport.h; the
 * design is in transport_redis.c's header comment and
 * docs/internals/redis.md).
 *
 *   transport_redis.c           construction, options, metrics, stats, the ops table
 *   transport_redis_publish.c   publish: the dedupe script, retries, the publish links
 *   transport_redis_monitor.c   monitor + trim: backlog probes and XTRIM
 *   transport_redis_consumer.c  the consumer state machine and its thread
 *   transport_redis_close.c     closing and freeing
 *   transport_redis_dead.c      dead letters (transport_dead_int.h; the consumer's step
 *                               before an ack, with no access to rt_t)
 *
 * Calls only go down: transport_redis.c uses the three jobs, and every job
 * uses transport_redis_close.c (a step that ends may let a close go on).
 * Threading: all of it runs on the loop thread, except
 * lc_rt__cons_thread_main (the consumer thread), which shares only the
 * fields marked "guarded by mu" and the batch it was handed. Ownership: an
 * rt_t owns every string, array, link and handle it points at; lc_rt__free
 * releases them once lc_rt__close_step has closed the handles and links.
 */
#ifndef LC_TRANSPORT_REDIS_INT_H
#define LC_TRANSPORT_REDIS_INT_H

#include <stdatomic.h>

#include "lc/redis.h"
#include "lc/redis_cluster.h"
#include "lc/transport.h"
#include "transport_dead_int.h"

#define RT_DEFAULT_PARTITIONS 16
#define RT_DEFAULT_PREFIX "ember:ingest:"
#define RT_DEFAULT_GROUP "ingesters"
#define RT_DEFAULT_MAX_BACKLOG 100000
#define RT_DEFAULT_BATCH 256
#define RT_DEFAULT_PUB_LINKS 4
#define RT_DEFAULT_BLOCK_MS 1000
#define RT_DEFAULT_CLAIM_IDLE_MS 60000
#define RT_DEFAULT_CLAIM_INTERVAL_MS 5000
#define RT_DEFAULT_MONITOR_MS 1000
#define RT_DEFAULT_TRIM_MS 1000 /* small datasets: cheap AOF rewrites (docs/internals/redis.md) */
#define RT_DEFAULT_CONSUME_RETRY_MS 1000
#define RT_ERROR_PAUSE_MS 200
#define RT_MIN_READ_COUNT 8
/* Bytes one XREADGROUP of new entries aims at: Redis spends about twice the
 * CPU per entry on a 16 MiB reply as on 1-2 MiB ones (measured, 65 KiB
 * entries), so a batch is filled by several moderate reads instead. */
#define RT_READ_BYTES ((uint64_t)2 << 20)
#define RT_MAX_GROUPS 64 /* zones on one stream; past this no trimming */
#define RT_FIELD "m"
#define RT_CLAIMED_PREFIX "ember:claimed:" /* + <group>:<consumer>: a hash of deliveries */

typedef struct rt_part_s {
    char *stream;
    uint64_t backlog;        /* pending + undelivered at the last sample */
    uint64_t xadd_sent;      /* XADDs sent on pub, ever */
    uint64_t sent_at_sample; /* xadd_sent when the last sample was taken */
    uint64_t pending, lag;
    char cursor[LC_REDIS_ID_MAX];       /* own-PEL recovery: last id read; "" once done */
    char claim_cursor[LC_REDIS_ID_MAX]; /* claim scan position: last id seen */
} rt_part_t;

typedef enum {
    CB_NONE,  /* free to take the next step */
    CB_CMD,   /* a short command is out on rd */
    CB_BLOCK, /* XREADGROUP BLOCK is out on rd */
    CB_APPLY, /* the consumer thread has the batch, or a forget */
    CB_PAUSE, /* retry_timer armed */
} cons_busy_t;

typedef struct rt_metrics_s {
    lc_metric_t *published, *rejected_full, *rejected_down, *publish_failed;
    lc_metric_t *consumed, *consume_failed, *claimed, *trimmed, *forgotten;
    lc_metric_t *pending, *lag, *up, *xadd_seconds;
    lc_metric_t *publish_retries, *publish_duplicates, *wait_short;
    lc_metric_t *phase[3], *batch; /* consumer: seconds by phase (rt_phase_t); batch sizes */
} rt_metrics_t;

/* Where a consumer's time goes: a read (waiting for an XREADGROUP, its
 * BLOCK wait included; a read ahead only once the batch is acked), apply
 * (the consume call), ack (the ack scripts' round trip; a read sent behind
 * them overlaps it). */
typedef enum { RT_PHASE_READ, RT_PHASE_APPLY, RT_PHASE_ACK } rt_phase_t;

typedef struct rt_xadd_s rt_xadd_t;

typedef struct rt_s {
    lc_transport_t base;
    uv_loop_t *loop;
    lc_redis_transport_opts_t opts; /* strings point at the copies below */
    char *url, *prefix, *group, *consumer;
    char *claimed_prefix, *claimed_key; /* ember:claimed:<group>: and ...<consumer> */
    uint32_t first;                     /* the partition of parts[0] (a cluster shard's) */
    lc_redis_cluster_t *cluster;        /* borrowed: a shard of transport_redis_cluster.c */
    rt_part_t *parts;
    const char **names; /* parts[i].stream, for the decoder */
    lc_redis_t **pubs;  /* stream p publishes on pubs[p % n_pubs] (rt_pub_link) */
    bool *pubs_up;
    uint32_t n_pubs, n_pubs_up;
    lc_redis_t *rd;
    lc_transport_consume_fn consume;
    void *consume_data;

    /* publishes whose outcome is unknown, waiting to be sent again (pub link) */
    rt_xadd_t *parked, **parked_tail;
    uv_timer_t pub_retry_timer;

    /* monitor and trimming (pub link) */
    uv_timer_t monitor_timer;
    int probes_out;
    uint64_t trim_due;

    /* consumer state machine (loop thread; rd link) */
    bool held;    /* opts.hold_consume until lc_transport_redis_release */
    bool settled; /* the first claims record was forgotten (opts.on_settled called) */
    cons_busy_t busy;
    bool need_setup, recovering, ack_pending;
    bool read_behind;        /* an XREADGROUP was sent right behind the acks */
    bool stashed;            /* that read's batch waits for a forget to finish first */
    bool wait_pending;       /* the batch waits for WAIT (wait_replicas) before it is applied */
    bool ahead_out;          /* a read ahead (into `ahead`) is in flight */
    bool ahead_wait;         /* the batch is acked: the consumer waits for that read */
    int ahead_rc;            /* how a read ahead failed, for the step that takes it */
    uint64_t phase_start[3]; /* uv_hrtime() when each phase began */
    int setup_out, acks_out;
    bool setup_failed, acks_failed;
    uint32_t claim_part;
    uint64_t claim_due;
    uint32_t read_count;      /* COUNT per stream: recovery, claims, and the cap below */
    uint64_t entry_bytes;     /* mean entry size of the last read that had entries */
    size_t read_from;         /* batch.n when the current read of new entries was sent */
    uint32_t read_count_sent; /* its COUNT */
    lc_redis_entries_t batch;
    lc_redis_entries_t ahead; /* new entries read while the batch is applied and acked */
    lc_transport_msg_t *msgs; /* the batch's applicable entries, for the thread */
    size_t n_msgs, cap_msgs;
    char *deliveries; /* msgs[i].delivery strings, delivery_stride bytes each */
    size_t delivery_stride, cap_deliveries;
    /* Forgetting: deliveries claimed away from this consumer, to be handed to
     * the forget callback, then deleted from the claims record. */
    bool need_claims_load, forget_pending, hdel_pending, job_forget;
    char **forget_ids;
    size_t n_forget, cap_forget;
    uv_timer_t retry_timer;
    lc_dead_t *dead;   /* what consume set aside goes there before the ack */
    bool dead_pending; /* the applied batch has dead letters to write */

    /* consumer thread */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_async_t done_async;
    bool job_ready, job_done, quit, thread_exited; /* guarded by mu */
    int job_rc;                                    /* guarded by mu */
    bool joined;

    /* closing */
    bool closing, finishing;
    size_t xadds_out;
    int refs; /* handles and links still closing */
    void (*close_cb)(void *data);
    void *close_data;

    /* stats: written on the loop thread, read from any */
    atomic_uint_fast64_t published, rejected_full, rejected_down, publish_failed;
    atomic_uint_fast64_t publish_retries, publish_duplicates, wait_short;
    atomic_uint_fast64_t consumed, consume_failed, claimed, dropped, trimmed, forgotten;
    atomic_uint_fast64_t pending_sum, lag_sum, backlog_sum, xadd_count, xadd_ns_sum, xadd_ns_max;
    atomic_bool pub_up, rd_up;
    rt_metrics_t m;
} rt_t;

/* ---------------------------------------------------------------- helpers of every job */

static inline void count(atomic_uint_fast64_t *c, lc_metric_t *m, uint64_t n)
{
    atomic_fetch_add(c, n);
    if (m)
        lc_metric_add(m, (double)n);
}

/* XGROUP CREATE <stream> <group> 0 MKSTREAM; BUSYGROUP means it exists. */
static inline int group_create(rt_t *t, lc_redis_t *r, uint32_t p, lc_redis_reply_cb cb)
{
    const char *argv[] = {"XGROUP", "CREATE", t->parts[p].stream, t->group, "0", "MKSTREAM"};
    return lc_redis_command(r, 0, cb, t, 6, argv, NULL);
}

static inline bool group_reply_ok(const redisReply *reply)
{
    return !lc_redis_reply_error(reply) || lc_redis_reply_is_error(reply, "BUSYGROUP");
}

/* The link that carries stream p's XADDs and probes: always the same one,
 * so that one stream's XADDs reach Redis in publish order (a series lives
 * in one stream) and a probe's XLEN is ordered with them. */
static inline lc_redis_t *rt_pub_link(const rt_t *t, uint32_t p)
{
    return t->pubs[p % t->n_pubs];
}

/* ---------------------------------------------------------------- across files */

/* transport_redis_publish.c: the ops' publish; a publish link's state
 * callback (creates its streams' groups, resends what was parked). */
int lc_rt__publish(lc_transport_t *base, const uint8_t *msg, size_t len, uint32_t partition,
                   const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data);
void lc_rt__pub_on_state(lc_redis_t *r, bool up, void *data);

/* transport_redis_monitor.c: the monitor timer's callback (probes, trims). */
void lc_rt__monitor_on_tick(uv_timer_t *timer);

/* transport_redis_consumer.c: takes the consumer's next step (if none is
 * out); the rd link's state callback; the consumer thread's body; the loop
 * side of done_async. */
void lc_rt__cons_next(rt_t *t);
void lc_rt__rd_on_state(lc_redis_t *r, bool up, void *data);
void lc_rt__cons_thread_main(void *arg);
void lc_rt__cons_on_done(uv_async_t *a);

/* transport_redis.c: builds a transport over partitions [first, first +
 * opts->partitions); with cluster, every link goes to the owner of the first
 * stream's slot, and the claims and dead-letter keys carry that stream as
 * their hash tag (so opts->partitions must then be 1). */
int lc_rt__new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts, uint32_t first,
               lc_redis_cluster_t *cluster, lc_transport_consume_fn consume, void *data,
               lc_transport_t **out);

/* transport_redis.c: release (opts.hold_consume) and stats of one
 * single-Redis transport; a no-op / LC_EINPUT for anything else. */
void lc_rt__release_one(lc_transport_t *base);
int lc_rt__stats_one(lc_transport_t *base, lc_redis_transport_stats_t *out);

/* transport_redis_cluster.c: the transport over Redis Cluster (opts->cluster);
 * its release and stats (LC_EINPUT when base is not one). */
int lc_rt__cluster_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                       lc_transport_consume_fn consume, void *data, lc_transport_t **out);
bool lc_rt__cluster_release(lc_transport_t *base);
int lc_rt__cluster_stats(lc_transport_t *base, lc_redis_transport_stats_t *out);

/* transport_redis_close.c: the ops' close; goes on with a close once the
 * transport is quiet (a no-op otherwise; every job calls it when something
 * ends); the close callback of every handle; frees everything (also on a
 * failed construction); drops the queued forget ids (the consumer after a
 * forget, lc_rt__free at the end). */
void lc_rt__close(lc_transport_t *base, void (*cb)(void *data), void *data);
void lc_rt__close_step(rt_t *t);
void lc_rt__on_handle_closed(uv_handle_t *h);
void lc_rt__free(rt_t *t);
void lc_rt__forget_clear(rt_t *t);

#endif
