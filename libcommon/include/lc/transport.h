/*
 * lc/transport.h — how ingested profiles travel from receivers to the writer.
 *
 * One interface, two implementations: `direct` (an in-process queue feeding a
 * writer thread; the all-in-one default) and `redis` (Redis streams; the
 * distributed deployment). A message is an encoded ember.v1.IngestProfile.
 *
 * Delivery contract: a publish callback reporting 0 means the message is
 * durable — for `direct`, the consumer has applied and committed it; for
 * `redis`, XADD was confirmed. Only then may a client get its 200.
 *
 * Every message carries an id, unique per message (the receivers pass its
 * ingest id): `redis` adds a message at most once per id within its dedupe
 * window, which lets it retry a publish whose outcome is unknown; `direct`
 * ignores it.
 *
 * Threading: lc_transport_publish and every publish callback run on the loop
 * thread. The consume function runs on the transport's consumer thread, one
 * batch at a time, and must return only once the batch is durably applied.
 */
#ifndef LC_TRANSPORT_H
#define LC_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/err.h"
#include "lc/metrics.h"

typedef struct lc_transport_s lc_transport_t;

typedef struct lc_transport_msg_s {
    const uint8_t *data;            /* valid during the consume call */
    size_t len;
    const char *id;                 /* transport id (stream entry id; "" for direct) */
} lc_transport_msg_t;

/* Applies a batch; returns 0 when all are durable, <0 to have them redelivered. */
typedef int (*lc_transport_consume_fn)(const lc_transport_msg_t *msgs, size_t n, void *data);
/* status 0 = durable; LC_EFULL = backlog full (429); other <0 = failed (503). */
typedef void (*lc_transport_publish_cb)(int status, void *data);

typedef struct lc_transport_stats_s {
    uint64_t published, consumed, failed;
    uint64_t backlog_msgs, backlog_bytes;
} lc_transport_stats_t;

/* Longest message id accepted (bytes); ingest ids are 16. */
#define LC_TRANSPORT_ID_MAX 64

typedef struct lc_transport_ops_s {
    int (*publish)(lc_transport_t *t, const uint8_t *msg, size_t len, uint32_t partition,
                   const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data);
    void (*stats)(lc_transport_t *t, lc_transport_stats_t *out);
    void (*close)(lc_transport_t *t, void (*cb)(void *data), void *data);
} lc_transport_ops_t;

struct lc_transport_s {
    const lc_transport_ops_t *ops;
};

/* Copies msg and id (1..LC_TRANSPORT_ID_MAX bytes, else LC_EINPUT for `redis`);
 * the callback runs exactly once iff this returns 0. */
static inline int lc_transport_publish(lc_transport_t *t, const uint8_t *msg, size_t len,
                                       uint32_t partition, const uint8_t *id, size_t id_len,
                                       lc_transport_publish_cb cb, void *data)
{
    return t->ops->publish(t, msg, len, partition, id, id_len, cb, data);
}
static inline void lc_transport_stats(lc_transport_t *t, lc_transport_stats_t *out)
{
    t->ops->stats(t, out);
}
/* Finishes (applies) what is queued, then frees t and calls cb. */
static inline void lc_transport_close(lc_transport_t *t, void (*cb)(void *data), void *data)
{
    t->ops->close(t, cb, data);
}

typedef struct lc_direct_opts_s {
    size_t max_backlog_bytes;       /* publish fails with LC_EFULL past this; default 256 MiB */
    size_t max_batch;               /* messages per consume call; default 256 */
} lc_direct_opts_t;

int lc_transport_direct_new(uv_loop_t *loop, const lc_direct_opts_t *opts,
                            lc_transport_consume_fn consume, void *data,
                            lc_transport_t **out) LC_MUST_CHECK;

/* ---- redis: streams <stream_prefix><p> for p in [0, partitions), one consumer group.
 *
 * Publish is XADD <stream> * m <message>, inside a Lua script that first
 * looks up the dedupe key of the message id ({<stream>}:dedupe:<hex id>, in
 * the stream's cluster slot) and adds nothing when it exists; otherwise it
 * XADDs and sets that key (value: the entry id) for dedupe_ttl_ms. The
 * callback reports 0 only once Redis confirmed the XADD, or answered that
 * the id is already in the stream (durable as far as Redis's AOF setting
 * goes). When the outcome is unknown (the link dropped or the command timed
 * out with it in flight), the transport keeps its copy and sends the same
 * script again once the link is up, until publish_retry_ms after the
 * publish; only then does the callback report LC_REDIS_EDOWN. An error
 * reply from Redis is final (OOM: LC_EFULL; others LC_REDIS_EDOWN).
 * While the Redis link is down, publish fails at once with LC_REDIS_EDOWN
 * (lc/redis.h; receivers answer 503); past max_backlog entries waiting in a
 * stream (pending + undelivered, sampled every monitor_interval_ms and
 * counted up between samples) it fails with LC_EFULL (429). A refused
 * publish never calls its callback. It resumes by itself when Redis is back.
 *
 * With a consume function the transport also consumes, as consumer_id of
 * the group: its own pending entries first (those of a previous life with
 * the same id), then new ones (XREADGROUP BLOCK), and every
 * claim_interval_ms the entries other consumers left pending longer than
 * claim_idle_ms (XAUTOCLAIM). Each batch goes to the consumer thread; it is
 * XACKed only after consume returned 0, else left pending (retried after
 * claim_idle_ms by whichever consumer claims it). Delivery is therefore at
 * least once: consume must be idempotent (the writer records stream ids).
 * claim_idle_ms must exceed the slowest consume call, or a slow batch is
 * applied twice. Consumers also trim each stream, only below the oldest
 * entry the group still needs (XTRIM MINID ~), never by length.
 *
 * Close: refuses new publishes, waits for the XADDs in flight (retries
 * included, so at most publish_retry_ms plus one command timeout) and for
 * the batch being applied (and its XACK), then closes both links.
 */
typedef struct lc_redis_transport_opts_s {
    const char *url;                /* required: redis://[[user]:password@]host:port[/db] */
    uint32_t partitions;            /* streams; default 16; every process must agree */
    const char *stream_prefix;      /* default "ember:ingest:" */
    const char *group;              /* default "ingesters" */
    const char *consumer_id;        /* required when consuming: stable per ingester */
    size_t max_backlog;             /* entries per stream; default 100000 */
    uint32_t batch;                 /* entries per consume call, about; default 256 */
    uint32_t block_ms;              /* XREADGROUP BLOCK; default 1000 */
    uint32_t claim_idle_ms;         /* default 60000 */
    uint32_t claim_interval_ms;     /* default 5000 */
    uint32_t monitor_interval_ms;   /* backlog sampling; default 1000 */
    uint32_t trim_interval_ms;      /* consumers only; default 5000 */
    uint32_t cmd_timeout_ms;        /* every Redis command; default 5000 */
    uint32_t consume_retry_ms;      /* pause after a failed batch; default 1000 */
    uint32_t publish_retry_ms;      /* retry unknown XADD outcomes this long; default 10000 */
    uint32_t dedupe_ttl_ms;         /* default 2 * (publish_retry_ms + cmd_timeout_ms) */
    lc_metrics_t *metrics;          /* optional: ember_redis_* metrics */
    void (*on_state)(bool up, void *data); /* optional: the publish link went up/down */
    void *state_data;
} lc_redis_transport_opts_t;

/* consume may be NULL (publish only). LC_EINPUT for bad opts (URL, no consumer_id). */
int lc_transport_redis_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                           lc_transport_consume_fn consume, void *data,
                           lc_transport_t **out) LC_MUST_CHECK;

typedef struct lc_redis_transport_stats_s {
    bool up, consumer_up;           /* publish link; consume link (false if not consuming) */
    uint64_t published, rejected_full, rejected_down, publish_failed;
    uint64_t publish_retries, publish_duplicates; /* scripts sent again; ids already there */
    uint64_t consumed, consume_failed, claimed, dropped, trimmed;
    uint64_t pending, lag, backlog; /* sums over the streams at the last sample */
    uint64_t xadd_count;
    double xadd_seconds_sum, xadd_seconds_max;
} lc_redis_transport_stats_t;

/* Any thread. LC_EINPUT if t is not a redis transport. */
int lc_transport_redis_stats(lc_transport_t *t, lc_redis_transport_stats_t *out) LC_MUST_CHECK;

#endif
