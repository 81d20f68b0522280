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
 * Threading: lc_transport_publish and every publish callback run on the loop
 * thread. The consume function runs on the transport's consumer thread, one
 * batch at a time, and must return only once the batch is durably applied.
 */
#ifndef LC_TRANSPORT_H
#define LC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/err.h"

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

typedef struct lc_transport_ops_s {
    int (*publish)(lc_transport_t *t, const uint8_t *msg, size_t len, uint32_t partition,
                   lc_transport_publish_cb cb, void *data);
    void (*stats)(lc_transport_t *t, lc_transport_stats_t *out);
    void (*close)(lc_transport_t *t, void (*cb)(void *data), void *data);
} lc_transport_ops_t;

struct lc_transport_s {
    const lc_transport_ops_t *ops;
};

/* Copies msg; the callback runs exactly once iff this returns 0. */
static inline int lc_transport_publish(lc_transport_t *t, const uint8_t *msg, size_t len,
                                       uint32_t partition, lc_transport_publish_cb cb, void *data)
{
    return t->ops->publish(t, msg, len, partition, cb, data);
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

#endif
