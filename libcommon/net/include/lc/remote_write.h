/*
 * lc/remote_write.h — a Prometheus remote write 1.0 sender (issue 29): the
 * series of recording rules leave ember this way.
 *
 * Callers queue samples (one series' labels, a time, a value); a worker
 * thread of this module takes up to LC_RW_BATCH of them, packs a
 * prometheus.WriteRequest (proto/prometheus/remote.proto), compresses it in
 * the snappy block format and POSTs it with libcurl with the headers the
 * protocol names (Content-Encoding: snappy, Content-Type:
 * application/x-protobuf, X-Prometheus-Remote-Write-Version: 0.1.0). Basic
 * auth: user:password in the URL. A 5xx, 429 or transport error is retried
 * with exponential backoff (1 s doubling to 30 s) for as long as the process
 * runs; a 4xx other than 429 drops the batch (the receiver will never take
 * it) and counts it. The queue is bounded: past max_queue samples the oldest
 * are dropped and counted, so a receiver that is down costs bounded memory.
 *
 * Metrics (on /metrics): ember_remote_write_samples_total{outcome="sent",
 * "dropped_queue_full","dropped_rejected"}, ember_remote_write_requests_total
 * {outcome="ok","retry","rejected"}, ember_remote_write_queue_samples.
 *
 * Ownership: the sender copies everything queued. Threading: push from any
 * thread; free from the thread that created it, which joins the worker
 * after one last attempt to send what is queued.
 */
#ifndef LC_REMOTE_WRITE_H
#define LC_REMOTE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"
#include "lc/metrics.h"

#define LC_RW_BATCH 2000               /* samples per request */
#define LC_RW_DEFAULT_MAX_QUEUE 100000 /* samples */
#define LC_RW_MAX_LABELS 64            /* per series */

typedef struct lc_rw_label_s {
    const char *name;
    const char *value;
} lc_rw_label_t;

typedef struct lc_remote_write_opts_s {
    const char *url;     /* http(s)://[user:password@]host[:port]/path */
    uint32_t timeout_ms; /* per request; 0: 10000 */
    size_t max_queue;    /* samples; 0: LC_RW_DEFAULT_MAX_QUEUE */
    lc_metrics_t *metrics;
} lc_remote_write_opts_t;

typedef struct lc_remote_write_s lc_remote_write_t;

/* Starts the worker. LC_EINPUT when url is not http(s). */
int lc_remote_write_new(const lc_remote_write_opts_t *opts, lc_remote_write_t **out) LC_MUST_CHECK;
/* Queues one sample of the series labels[0..n) (any order: sorted here, as
 * receivers require). LC_EINPUT for n of 0 or past LC_RW_MAX_LABELS. */
int lc_remote_write_push(lc_remote_write_t *rw, const lc_rw_label_t *labels, size_t n,
                         int64_t time_ms, double value) LC_MUST_CHECK;
void lc_remote_write_free(lc_remote_write_t *rw);

#endif
