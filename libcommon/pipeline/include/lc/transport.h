/*
 * lc/transport.h — how ingested profiles travel from receivers to the writer.
 *
 * One interface, two implementations: `direct` (an in-process queue feeding a
 * writer thread; the all-in-one default) and `redis` (Redis streams; the
 * distributed deployment). A message is an encoded ember.v1.IngestProfile,
 * or (redis, from the receivers) its lean entry (lc/transport_entry.h): the
 * transports carry bytes and never look inside; consumers decode both.
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
#include "lc/labels.h"
#include "lc/metrics.h"

typedef struct lc_transport_s lc_transport_t;

typedef struct lc_transport_msg_s {
    const uint8_t *data; /* valid during the consume call */
    size_t len;
    const char *id; /* transport id (stream entry id; "" for direct) */
    /* Unique across the transport: "<stream>/<entry id>" for redis (entry ids
     * repeat across streams); NULL for direct. What forget names. */
    const char *delivery;
    /* Set by consume on every call (the transport passes 0/NULL): a message
     * it can never apply (malformed, refused by the store) is set aside alone
     * with an input-class error (LC_EINPUT, LC_ETOOBIG, LC_EUNSUPPORTED;
     * LC_ECORRUPT when it cannot even be decoded) and a static text naming the
     * check, while the rest of the batch is committed without it. When consume
     * returns 0 such a message is final: `direct` hands reject_err to its
     * publisher (a 4xx, never 200), `redis` writes it to the dead-letter
     * stream and acks it. */
    int reject_err;
    const char *reject_reason;
    /* What the publisher attached for a consumer in its own process
     * (lc_transport_publish_local): `direct` passes it, a transport that
     * crosses a wire passes NULL. Read-only, valid during the consume call;
     * it describes data, so the consumer may use it instead of decoding data
     * again (the writer: the receiver's decoded, checked pprof). */
    const void *local;
} lc_transport_msg_t;

/* Applies a batch; returns 0 when all are durable or set aside (reject_err),
 * <0 (a storage or infrastructure failure) to have them all redelivered. */
typedef int (*lc_transport_consume_fn)(lc_transport_msg_t *msgs, size_t n, void *data);
/* Removes what consume applied for these deliveries (another consumer took
 * them over); 0 once that is durable, <0 to be asked again. Deliveries never
 * applied here are no error. Same thread and data as consume. */
typedef int (*lc_transport_forget_fn)(const char *const *deliveries, size_t n, void *data);
/* status 0 = durable; LC_EFULL = backlog full (429); an input-class error
 * (lc_transport_rejected) = the consumer set the message aside, never to be
 * stored (4xx); other <0 = failed (503). */
typedef void (*lc_transport_publish_cb)(int status, void *data);

typedef struct lc_transport_stats_s {
    uint64_t published, consumed, failed;
    uint64_t backlog_msgs, backlog_bytes;
} lc_transport_stats_t;

/* Whether a publish status or reject_err says the message itself can never
 * be stored (as opposed to a failure worth retrying). */
static inline bool lc_transport_rejected(int status)
{
    return status == LC_EINPUT || status == LC_ETOOBIG || status == LC_EUNSUPPORTED ||
           status == LC_ECORRUPT;
}

/* What a reject error means for the message, for its client or an
 * operator: static text ("the store refused it: ..."). */
const char *lc_transport_reject_text(int reject_err);

/* Longest message id accepted (bytes); ingest ids are 16. */
#define LC_TRANSPORT_ID_MAX 64

typedef struct lc_transport_ops_s {
    int (*publish)(lc_transport_t *t, const uint8_t *msg, size_t len, uint32_t partition,
                   const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data);
    void (*stats)(lc_transport_t *t, lc_transport_stats_t *out);
    void (*close)(lc_transport_t *t, void (*cb)(void *data), void *data);
    /* Messages cross a wire: producers should publish lean entries
     * (lc/transport_entry.h), which every consumer decodes. */
    bool lean_entries;
    /* Optional: publish with an in-process attachment (msg.local) that the
     * backlog counts as `weight` bytes; NULL when the transport cannot carry
     * one, and lc_transport_publish_local then publishes without it. */
    int (*publish_local)(lc_transport_t *t, const uint8_t *msg, size_t len, size_t weight,
                         uint32_t partition, const uint8_t *id, size_t id_len, const void *local,
                         lc_transport_publish_cb cb, void *data);
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
/* As lc_transport_publish, and hands `local` to a consumer in the same
 * process as lc_transport_msg_t.local; it must stay valid and unchanged until
 * cb runs. Transports that cross a wire drop it (their consumers decode).
 * `weight` (at least len) is what the message and its attachment count in the
 * backlog's bytes: the memory it stands for while it waits. */
static inline int lc_transport_publish_local(lc_transport_t *t, const uint8_t *msg, size_t len,
                                             size_t weight, uint32_t partition, const uint8_t *id,
                                             size_t id_len, const void *local,
                                             lc_transport_publish_cb cb, void *data)
{
    if (!t->ops->publish_local)
        return t->ops->publish(t, msg, len, partition, id, id_len, cb, data);
    return t->ops->publish_local(t, msg, len, weight < len ? len : weight, partition, id, id_len,
                                 local, cb, data);
}
/* Whether lc_transport_publish_local hands `local` to the consumer: then a
 * message may leave out what its attachment carries. */
static inline bool lc_transport_carries_local(const lc_transport_t *t)
{
    return t->ops->publish_local != NULL;
}
static inline void lc_transport_stats(lc_transport_t *t, lc_transport_stats_t *out)
{
    t->ops->stats(t, out);
}
/* Whether producers should encode their messages as lean entries (redis):
 * the consumer (the writer) accepts both forms from any transport. */
static inline bool lc_transport_wants_lean(const lc_transport_t *t)
{
    return t && t->ops->lean_entries;
}
/* Finishes (applies) what is queued, then frees t and calls cb. */
static inline void lc_transport_close(lc_transport_t *t, void (*cb)(void *data), void *data)
{
    t->ops->close(t, cb, data);
}

typedef struct lc_direct_opts_s {
    size_t max_backlog_bytes; /* publish fails with LC_EFULL past this; default 256 MiB */
    size_t max_batch;         /* messages per consume call; default 256 */
} lc_direct_opts_t;

int lc_transport_direct_new(uv_loop_t *loop, const lc_direct_opts_t *opts,
                            lc_transport_consume_fn consume, void *data,
                            lc_transport_t **out) LC_MUST_CHECK;

/* ---- redis: streams <stream_prefix><p> for p in [0, partitions), read by one
 * consumer group per zone (`group`; every zone's group gets every entry).
 *
 * Publish is XADD <stream> * m <message>; its callback reports 0 only once
 * Redis confirmed the XADD (durable as far as Redis's AOF setting goes). By
 * default (publish_retry_ms 0) an unknown outcome (the link dropped or the
 * command timed out with it in flight) fails at once with LC_REDIS_EDOWN,
 * although Redis may have applied it. With publish_retry_ms, the XADD runs
 * inside a Lua script that first looks up the dedupe key of the message id
 * ({<stream>}:dedupe:<hex id>, in the stream's cluster slot) and adds
 * nothing when it exists; otherwise it XADDs and sets that key (value: the
 * entry id) for dedupe_ttl_ms. The callback then also reports 0 when the id
 * is already in the stream, and an unknown outcome is sent again, the same
 * script, once the link is up, until publish_retry_ms after the publish;
 * only then does the callback report LC_REDIS_EDOWN. The script costs Redis
 * several times a bare XADD (its arguments are copied into Lua), hence off
 * by default. An error reply from Redis is final (OOM: LC_EFULL; others
 * LC_REDIS_EDOWN).
 * While the Redis link is down, publish fails at once with LC_REDIS_EDOWN
 * (lc/redis.h; receivers answer 503); past max_backlog entries waiting in a
 * stream (pending + undelivered of its slowest group, sampled every
 * monitor_interval_ms and counted up between samples) it fails with
 * LC_EFULL (429). A refused
 * publish never calls its callback. It resumes by itself when Redis is back.
 *
 * With a consume function the transport also consumes, as consumer_id of
 * the group: its own pending entries first (those of a previous life with
 * the same id), then new ones (XREADGROUP BLOCK), and every
 * claim_interval_ms the entries other consumers left pending longer than
 * claim_idle_ms (a Lua script that claims them and records, per previous
 * owner, what it took: ember:claimed:<group>:<consumer>). Each batch goes to
 * the consumer thread; it is acked only after consume returned 0, else left
 * pending (retried after claim_idle_ms by whichever consumer claims it). The
 * ack (a script too) acks only what is still this consumer's and reports
 * what was claimed away meanwhile. Delivery is therefore at least once:
 * consume must be idempotent (the writer records ingest ids). With a forget
 * function, a consumer that lost entries it applied forgets them (at start-up
 * for its claims record, and after such an ack), so that each entry counts
 * once in the stores together (docs/internals/redis.md, "Claims"); without
 * one, claim_idle_ms must exceed the slowest consume call plus any pause, or
 * a batch may be stored twice. Consumers also trim each stream, only below
 * the oldest entry ANY group still needs (XTRIM MINID ~), never by length.
 * Only a consuming transport creates its group (at id 0, on every
 * reconnect); a publish-only one creates none.
 *
 * A message consume set aside (reject_err) is first added to the
 * dead-letter stream <dead_prefix><p> of its partition (XADD MAXLEN ~
 * dead_max_len: the entry's bytes, its stream and id, the reason, the
 * consumer and the time), then acked with its batch, so it is never claimed
 * again and the stream trims past it; counted in
 * ember_ingest_dead_letter_total{reason} (transport_redis_dead.c).
 *
 * Claims stay inside the group: a dead consumer's entries go to another
 * consumer of the same group (zone), never across zones.
 *
 * Close: refuses new publishes, waits for the XADDs in flight (retries
 * included, so at most publish_retry_ms plus one command timeout) and for
 * the batch being applied (and its XACK), then closes both links.
 */
typedef struct lc_redis_transport_opts_s {
    const char *url;               /* required: redis://[[user]:password@]host:port[/db] */
    uint32_t partitions;           /* streams; default 16; every process must agree */
    const char *stream_prefix;     /* default "ember:ingest:" */
    const char *group;             /* consumers: default "ingesters" (zone ""), else
                                      "ingesters.<zone>"; unused when publishing only */
    const char *consumer_id;       /* required when consuming: stable per ingester */
    size_t max_backlog;            /* entries per stream; default 100000 */
    uint32_t batch;                /* entries per consume call, about; default 256 */
    uint32_t publish_links;        /* connections carrying XADDs; default 4 (see below) */
    uint32_t block_ms;             /* XREADGROUP BLOCK; default 1000 */
    uint32_t claim_idle_ms;        /* default 60000 */
    uint32_t claim_interval_ms;    /* default 5000 */
    uint32_t monitor_interval_ms;  /* backlog sampling; default 1000 */
    uint32_t trim_interval_ms;     /* consumers only; default 1000 */
    uint32_t cmd_timeout_ms;       /* every Redis command; default 5000 */
    uint32_t consume_retry_ms;     /* pause after a failed batch; default 1000 */
    lc_transport_forget_fn forget; /* optional, consumers: called with consume's data */
    uint32_t publish_retry_ms;     /* retry unknown XADD outcomes this long; 0 (default) off */
    uint32_t dedupe_ttl_ms; /* with retries: default 2 * (publish_retry_ms + cmd_timeout_ms) */
    lc_metrics_t *metrics;  /* optional: ember_redis_* metrics */
    bool hold_consume;      /* read nothing until lc_transport_redis_release() */
    void (*on_state)(bool up, void *data); /* optional: the publish link went up/down */
    /* Optional, consumers: called once, when the claims record of a previous
     * life has been forgotten (before the hold_consume hold, so that an
     * ingester announces itself only once it holds nothing that another
     * consumer also stored). Loop thread. */
    void (*on_settled)(void *data);
    void *state_data;
    const char *dead_prefix; /* consumers: dead letters; default "ember:dead:" (+ partition) */
    uint32_t dead_max_len;   /* consumers: entries per dead-letter stream, about; default 10000 */
    /* Publishers: acknowledge a message only once WAIT says this many
     * replicas have it (0, the default: the master's answer is enough). Fewer
     * within wait_timeout_ms is an unknown outcome: retried with
     * publish_retry_ms (the dedupe script finds the entry and WAITs again),
     * else LC_REDIS_EDOWN at once. */
    uint32_t wait_replicas;
    uint32_t wait_timeout_ms; /* WAIT's own timeout; default cmd_timeout_ms / 2 */
    /* Redis Cluster: url lists seed nodes ("redis://a:7000,redis://b:7001").
     * Each partition gets its own publish link, consumer link and consumer
     * thread, to the master owning its stream's slot (lc/redis_cluster.h);
     * the claims record and the dead letters of partition p are
     * ember:claimed:{<stream>}:<group>:<consumer> and <dead_prefix>{<stream>}
     * (the stream's slot, for the scripts); consume and forget are called
     * one at a time. docs/internals/redis.md, "Redis Cluster". */
    bool cluster;
} lc_redis_transport_opts_t;

/* consume may be NULL (publish only). LC_EINPUT for bad opts (URL, no consumer_id). */
int lc_transport_redis_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                           lc_transport_consume_fn consume, void *data,
                           lc_transport_t **out) LC_MUST_CHECK;

typedef struct lc_redis_transport_stats_s {
    bool up, consumer_up; /* publish link; consume link (false if not consuming) */
    uint64_t published, rejected_full, rejected_down, publish_failed;
    uint64_t publish_retries, publish_duplicates; /* scripts sent again; ids already there */
    uint64_t wait_short; /* WAITs that found fewer replicas than wait_replicas */
    uint64_t consumed, consume_failed, claimed, dropped, trimmed, forgotten;
    uint64_t dead_letters;          /* set aside by consume, written to the dead-letter streams */
    uint64_t pending, lag, backlog; /* sums over the streams of their slowest group's */
    uint64_t xadd_count;
    double xadd_seconds_sum, xadd_seconds_max;
} lc_redis_transport_stats_t;

/* Loop thread. Starts consuming when opened with hold_consume (an ingester
 * reads nothing before it is registered in its zone: what it stores must
 * never be unknown to the queriers). No-op otherwise, or for another transport. */
void lc_transport_redis_release(lc_transport_t *t);

/* Any thread. LC_EINPUT if t is not a redis transport. */
int lc_transport_redis_stats(lc_transport_t *t, lc_redis_transport_stats_t *out) LC_MUST_CHECK;

/* ---- what every producer (receivers, scraper, agent) stamps on a message */

#define LC_INGEST_ID_BYTES 16

/* A fresh random ingest id: the transport's dedupe key. 0 or -errno. */
int lc_ingest_id_new(uint8_t id[LC_INGEST_ID_BYTES]) LC_MUST_CHECK;

/* The partition of a series, the same in every producer: a hash of tenant and
 * series labels, so one series always lands in one partition (in order). */
uint32_t lc_transport_partition(const char *tenant, const lc_labels_t *ls, uint32_t partitions);

#endif
