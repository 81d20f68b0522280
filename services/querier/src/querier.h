/*
 * querier.h — the query role: querier.v1.QuerierService over Connect and the
 * legacy HTTP endpoints (/pyroscope/render, render-diff, label-values)
 * answered from the store.
 *
 * Every RPC runs on the thread pool, opens store readers for the blocks that
 * overlap its range, and ends them before returning. Tenancy per lc/tenant.h.
 */
#ifndef EMBER_QUERIER_H
#define EMBER_QUERIER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/store.h"

typedef struct qry_opts_s {
    bool multitenancy;
    int64_t max_nodes_default; /* default 8192 */
    int64_t max_nodes_max;     /* default 1048576 */
    /* Time-range rules (pyroscope-api.md §5.9), in ms; 0 disables each.
     * A longer range is invalid_argument. A range is clipped to start no
     * earlier than now - lookback, and one ending before that is answered
     * empty. Pyroscope's defaults are 24 h and 7 d; ember keeps history and
     * merges fast by design, so both default to 0 (unlimited). */
    int64_t max_query_length_ms;       /* default 0 */
    int64_t max_query_lookback_ms;     /* default 0 */
    int64_t max_concurrent_per_tenant; /* queries at once per tenant; 0 = no limit; more: 429 */
    /* The shard API: a request's QRY_READ_FROM_HEADER (ns, decimal) leaves
     * out the partitions that start before it (lc_read_scope_t.from_ns): the
     * distributed querier reads those from the bucket itself. */
    bool read_from_header;
    /* The querier's own shard on the bucket: a request's LC_MARKS_HEADER
     * names the objects it reads (lc_read_scope_t.bucket). */
    bool read_bucket_header;
} qry_opts_t;

#define QRY_READ_FROM_HEADER "x-ember-read-from"

void qry_opts_default(qry_opts_t *o);

typedef struct qry_s qry_t;

int qry_new(uv_loop_t *loop, const qry_opts_t *opts, lc_httpd_t *srv, lc_store_t *store,
            lc_metrics_t *metrics, qry_t **out) LC_MUST_CHECK;
void qry_free(qry_t *q);

/* The querier nodes of the process shell (take an ember_settings_t):
 * `ember`'s, on the local store (node_local.c), and `ember-querier`'s, the
 * fan-out to the live ingesters of one complete zone (node_fanout.c). */
extern const lc_node_ops_t qry_local_node;
extern const lc_node_ops_t qry_fanout_node;

#endif
