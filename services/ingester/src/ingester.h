/*
 * ingester.h — the ingester role: receivers and the writer.
 *
 * Receivers (loop + thread pool): POST /ingest, /pyroscope/ingest and
 * /push.v1.PusherService/Push parse and fully validate what clients send,
 * convert every format to pprof, and publish one ember.v1.IngestProfile per
 * profile through the transport. The client gets 200 only after the
 * transport reported the message durable.
 *
 * Writer (the transport's consumer thread): decodes IngestProfile, splits the
 * pprof into series (one per sample type and per distinct set of string
 * sample labels, pyroscope-api.md §3.3), applies the server-side delta rule
 * (§4.5), and writes a batch to the store in one transaction per block,
 * recording each ingest id so replays are idempotent.
 */
#ifndef EMBER_INGESTER_H
#define EMBER_INGESTER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "google/v1/profile.pb-c.h"
#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/pprof.h"
#include "lc/ratelimit.h"
#include "lc/service.h"
#include "lc/store.h"
#include "lc/transport.h"

typedef struct ing_opts_s {
    lc_pprof_limits_t limits;
    int64_t reject_older_than_ns; /* 0 = profiles of any age are accepted */
    int64_t reject_newer_than_ns; /* 0 = no limit on future timestamps */
    bool multitenancy;
    size_t max_label_names;       /* default 30 */
    size_t max_label_name_bytes;  /* default 1024 */
    size_t max_label_value_bytes; /* default 2048 */
    uint32_t partitions;          /* transport partitions; default 1 */
    lc_ratelimit_opts_t rate;     /* per-tenant ingestion rate; zero = no limit */
    int64_t max_series;           /* active series per tenant; 0 = no limit */
    /* Over Redis, where the receivers leave decoded profiles for the writer of
     * this process (handover.h); NULL: nowhere, it decodes the entries. Not owned. */
    struct ing_handover_s *handover;
} ing_opts_t;

void ing_opts_default(ing_opts_t *o);

typedef struct ing_s ing_t;

/* A label as the receive and write rooms' pure pieces pass it around
 * (borrowed strings). */
typedef struct ing_kv_s {
    const char *name;
    const char *value;
} ing_kv_t;

/* The string at idx of p's string table, "" when out of range (both rooms). */
const char *ing_pprof_str(const Google__V1__Profile *p, int64_t idx);

/* The ingester node of the process shell (node.c): store, writer,
 * transport, receivers, retention, and ember-ingester's announcement.
 * Takes an ember_settings_t (process.h). */
extern const lc_node_ops_t ing_node;
/* ember-querier's store on the bucket (node_bucket.c): with --storage.backend
 * it sets the process's store, which the querier node's own shard reads. */
extern const lc_node_ops_t ing_bucket_store_node;

/* Registers the receiver routes on srv. Publishes through tr. */
int ing_new(uv_loop_t *loop, const ing_opts_t *opts, lc_httpd_t *srv, lc_transport_t *tr,
            lc_metrics_t *metrics, ing_t **out) LC_MUST_CHECK;
void ing_free(ing_t *ing);
/* On stop (loop thread): publishes every profile waiting for room in the
 * handover now, and waits no more (publish.c). NULL is fine. */
void ing_drain(ing_t *ing);

typedef struct ing_writer_s ing_writer_t;

/* What a receiver hands the writer of its own process with a message
 * (lc_transport_msg_t.local, the `direct` transport only): the pprof it
 * decoded and checked with lc_store_check_profile, and that check's index,
 * so that the writer neither decodes nor checks it again (issue 32). Both
 * live in the request's arena, which outlives the publish; the message's
 * pprof bytes decode to this same profile. */
typedef struct ing_decoded_s {
    const lc_pprof_t *profile;
    const lc_pprof_index_t *index;
} ing_decoded_t;

/* Reads EMBER_FAILPOINT once (test-only, docs/internals/redis.md):
 * "exit-after-commit" _exit()s, "stop-after-commit" raises SIGSTOP, right
 * after the first batch that wrote a profile is durable (before its ack). */
int ing_writer_new(lc_store_t *store, lc_metrics_t *metrics, ing_writer_t **out) LC_MUST_CHECK;
void ing_writer_free(ing_writer_t *w);
/* Recording rules (rules_eval.h) see every series the writer writes from
 * now on, counted when its transaction commits. Set before consuming starts. */
struct ing_rules_s;
void ing_writer_set_rules(ing_writer_t *w, struct ing_rules_s *rules);
/* Over Redis: where this process's receivers leave the profiles they decoded
 * (handover.h); the writer takes a message's from there instead of decoding
 * its bytes when it is there. Set before consuming starts; not owned. */
struct ing_handover_s;
void ing_writer_set_handover(ing_writer_t *w, struct ing_handover_s *h);
/* An lc_transport_consume_fn; data is the ing_writer_t. A message's local,
 * when set, is its ing_decoded_t. Records each
 * message's delivery id with its ingest id and what it wrote. Sets aside
 * (reject_err, reject_reason) each message it can never apply and commits
 * the others; <0 only for storage failures. */
int ing_writer_consume(lc_transport_msg_t *msgs, size_t n, void *data);
/* An lc_transport_forget_fn: removes what the given deliveries wrote, in
 * one committed batch (lc_store_write_forget). data is the ing_writer_t. */
int ing_writer_forget(const char *const *deliveries, size_t n, void *data);

#endif
