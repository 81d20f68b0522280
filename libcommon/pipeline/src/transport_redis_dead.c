/*
 * transport_redis_dead.c — dead letters: the entries a consumer set aside,
 * kept in Redis for an operator instead of pending forever
 * (transport_dead_int.h; operations in docs/operations.md, "Dead letters").
 *
 * One XADD per set-aside entry, to <prefix><partition> with MAXLEN ~ so the
 * stream stays bounded (the oldest dead letters go first). Fields:
 *   m         the entry's bytes as read (a lean entry or a bare message;
 *             the same field as the ingest streams, so an operator can
 *             XADD it back once the cause is fixed)
 *   stream    source stream          id        source entry id
 *   reason    the consumer's text    error     the metric's reason label
 *   consumer  who set it aside       time_ms   when (Unix milliseconds)
 *
 * Order: the dead letters of a batch are written, and confirmed, before the
 * batch is acked. A crash between the two delivers the batch again (applied
 * messages are replays, the rejected one is rejected again) and writes a
 * second dead letter for it: a duplicate is acceptable, a lost one is not.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "transport_dead_int.h"

#define DEAD_DEFAULT_PREFIX "ember:dead:"
#define DEAD_DEFAULT_MAX_LEN 10000
#define DEAD_FIELDS 21   /* XADD key MAXLEN ~ n * + seven field/value pairs, + NULL */
#define DEAD_ARG_ENTRY 7 /* argv index of the entry's bytes: binary, given its length */

/* The metric's reason labels: a small fixed set, never free text. */
typedef enum {
    DEAD_UNDECODABLE,
    DEAD_INVALID,
    DEAD_TOO_BIG,
    DEAD_UNSUPPORTED,
    DEAD_OTHER,
    DEAD_REASONS,
} dead_reason_t;

static const char *const dead_labels[DEAD_REASONS] = {"undecodable", "invalid", "too_big",
                                                      "unsupported", "other"};

struct lc_dead_s {
    char *prefix, *consumer;
    char max_len[16];
    uint32_t first; /* the partition of stream 0 */
    bool tagged;    /* Redis Cluster: <prefix>{<stream>}, in the stream's slot */
    lc_metric_t *m_total[DEAD_REASONS];
    atomic_uint_fast64_t total;
    /* the current batch: which set-aside messages are in Redis already */
    bool *written;
    size_t cap_written;
    /* the send in progress */
    int out, status;
    void (*done)(int status, void *data);
    void *done_data;
};

/* One XADD in flight. */
typedef struct dead_xadd_s {
    lc_dead_t *d;
    size_t index; /* into the batch's messages */
    dead_reason_t reason;
    const char *why;                       /* reject_reason: static text */
    char stream[128], id[LC_REDIS_ID_MAX]; /* for the log line */
    char key[];                            /* <prefix><partition> or <prefix>{<stream>} */
} dead_xadd_t;

static dead_reason_t dead_reason_of(int err)
{
    switch (err) {
    case LC_ECORRUPT:
        return DEAD_UNDECODABLE;
    case LC_EINPUT:
        return DEAD_INVALID;
    case LC_ETOOBIG:
        return DEAD_TOO_BIG;
    case LC_EUNSUPPORTED:
        return DEAD_UNSUPPORTED;
    default:
        return DEAD_OTHER;
    }
}

lc_dead_t *lc_transport__dead_new(const char *prefix, uint32_t max_len, const char *consumer,
                                  lc_metrics_t *metrics)
{
    lc_dead_t *d = lc_xcalloc(1, sizeof(*d));
    d->prefix = lc_xstrdup(prefix && *prefix ? prefix : DEAD_DEFAULT_PREFIX);
    d->consumer = lc_xstrdup(consumer ? consumer : "");
    snprintf(d->max_len, sizeof(d->max_len), "%u", max_len ? max_len : DEAD_DEFAULT_MAX_LEN);
    for (int r = 0; metrics && r < DEAD_REASONS; r++) {
        char labels[48];
        snprintf(labels, sizeof(labels), "reason=\"%s\"", dead_labels[r]);
        d->m_total[r] = lc_metrics_counter(
            metrics, "ember_ingest_dead_letter_total",
            "Stream entries the writer could not apply, moved to ember:dead:<partition>", labels);
    }
    return d;
}

void lc_transport__dead_place(lc_dead_t *d, uint32_t first, bool tagged)
{
    d->first = first;
    d->tagged = tagged;
}

void lc_transport__dead_free(lc_dead_t *d)
{
    if (!d)
        return;
    lc_free(d->prefix);
    lc_free(d->consumer);
    lc_free(d->written);
    lc_free(d);
}

size_t lc_transport__dead_begin(lc_dead_t *d, const lc_transport_msg_t *msgs, size_t n)
{
    d->written = lc_xgrow(d->written, &d->cap_written, n ? n : 1, sizeof(*d->written));
    memset(d->written, 0, (n ? n : 1) * sizeof(*d->written));
    size_t rejected = 0;
    for (size_t i = 0; i < n; i++)
        rejected += msgs[i].reject_err != 0;
    return rejected;
}

uint64_t lc_transport__dead_count(const lc_dead_t *d)
{
    return d ? atomic_load(&d->total) : 0;
}

/* The send is over once nothing is in flight; done learns the first failure. */
static void dead_settle(lc_dead_t *d)
{
    if (--d->out > 0)
        return;
    void (*done)(int, void *) = d->done;
    d->done = NULL;
    done(d->status, d->done_data);
}

static void dead_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    dead_xadd_t *x = data;
    lc_dead_t *d = x->d;
    LC_UNUSED(r);
    const char *refused = status == 0 ? lc_redis_reply_error(reply) : NULL;
    if (status == 0 && !refused) {
        d->written[x->index] = true;
        atomic_fetch_add(&d->total, 1);
        lc_metric_add(d->m_total[x->reason], 1);
        LC_LOG_WARN("redis consumer: an entry the writer cannot apply was moved to a dead-letter "
                    "stream stream=%s id=%s dead=%s reason=%s why=\"%s\"",
                    x->stream, x->id, x->key, dead_labels[x->reason], x->why);
    } else if (d->status == 0) {
        d->status = status ? status : LC_REDIS_EDOWN;
        if (refused)
            LC_LOG_ERROR("redis consumer: dead letter refused dead=%s err=\"%s\"", x->key, refused);
    }
    lc_free(x);
    dead_settle(d);
}

/* XADD <prefix><p> MAXLEN ~ <max> * m <entry> stream .. id .. reason ..
 * error .. consumer .. time_ms .. */
static int dead_xadd(lc_dead_t *d, lc_redis_t *link, const lc_redis_entry_t *e, const char *stream,
                     const lc_transport_msg_t *msg, size_t index)
{
    size_t key_size = strlen(d->prefix) + strlen(stream) + 12;
    dead_xadd_t *x = lc_xmalloc(sizeof(*x) + key_size);
    *x = (dead_xadd_t){.d = d, .index = index, .reason = dead_reason_of(msg->reject_err)};
    if (d->tagged)
        snprintf(x->key, key_size, "%s{%s}", d->prefix, stream);
    else
        snprintf(x->key, key_size, "%s%u", d->prefix, d->first + e->stream);
    snprintf(x->stream, sizeof(x->stream), "%s", stream);
    snprintf(x->id, sizeof(x->id), "%s", e->id);
    x->why = msg->reject_reason ? msg->reject_reason : lc_transport_reject_text(msg->reject_err);
    char time_ms[24];
    snprintf(time_ms, sizeof(time_ms), "%lld", (long long)(lc_realtime_ns() / 1000000));
    const char *argv[DEAD_FIELDS] = {"XADD",     x->key,      "MAXLEN",  "~",
                                     d->max_len, "*",         "m",       (const char *)e->data,
                                     "stream",   stream,      "id",      e->id,
                                     "reason",   x->why,      "error",   dead_labels[x->reason],
                                     "consumer", d->consumer, "time_ms", time_ms,
                                     NULL};
    size_t argvlen[DEAD_FIELDS];
    for (int i = 0; i < DEAD_FIELDS - 1; i++)
        argvlen[i] = i == DEAD_ARG_ENTRY ? e->len : strlen(argv[i]);
    int rc = lc_redis_command(link, 0, dead_on_reply, x, DEAD_FIELDS - 1, argv, argvlen);
    if (rc != 0)
        lc_free(x);
    return rc;
}

void lc_transport__dead_send(lc_dead_t *d, lc_redis_t *link, const lc_redis_entries_t *batch,
                             const char *const *streams, const lc_transport_msg_t *msgs,
                             void (*done)(int status, void *data), void *data)
{
    d->done = done;
    d->done_data = data;
    d->status = 0;
    d->out = 1;   /* held while sending */
    size_t k = 0; /* msgs[k] is the k-th entry of the batch that has data */
    for (size_t i = 0; i < batch->n && d->status == 0; i++) {
        const lc_redis_entry_t *e = &batch->v[i];
        if (!e->data)
            continue;
        const lc_transport_msg_t *m = &msgs[k];
        LC_ASSERT(m->data == e->data);
        if (m->reject_err && !d->written[k]) {
            int rc = dead_xadd(d, link, e, streams[e->stream], m, k);
            if (rc == 0)
                d->out++;
            else
                d->status = rc; /* the link is going down: what was sent still answers */
        }
        k++;
    }
    dead_settle(d);
}
