/*
 * shard.h — the shard query API (shard.c): what the distributed querier's
 * fan-out (fanout*.c) asks every ingester. It is the querier role mounted on
 * one ingester's store with nothing truncated, plus
 * /ember.v1.ShardService/SelectSeries (per-bucket sums and counts),
 * /ember.v1.ShardService/SelectProfiles (profile references for exemplars) and
 * /ember.v1.ShardService/AnalyzeQuery (figures and series keys).
 *
 * Ownership: the qry_shard_t borrows srv, store and metrics, which must
 * outlive it. Threading: constructed and freed on the loop thread; its
 * routes run on the thread pool (lc_httpd offload), each call on its own
 * store snapshot. Tenancy per lc/tenant.h.
 */
#ifndef EMBER_QRY_SHARD_H
#define EMBER_QRY_SHARD_H

#include <stdbool.h>

#include <uv.h>

#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/store.h"

typedef struct qry_shard_s qry_shard_t;

/* Registers the shard API on srv, answered from store. */
int qry_shard_new(uv_loop_t *loop, lc_httpd_t *srv, lc_store_t *store, lc_metrics_t *metrics,
                  bool multitenancy, qry_shard_t **out) LC_MUST_CHECK;
void qry_shard_free(qry_shard_t *sh); /* NULL-safe */

/* The shard API as a node of the process shell (node_shard.c; takes an
 * ember_settings_t), on the store the ingester node opened. */
extern const lc_node_ops_t qry_shard_node;

#endif
