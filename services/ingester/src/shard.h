/*
 * shard.h — an ingester's shard query API (shard.c): the querier role on this
 * ingester's store with nothing truncated, plus
 * /ember.v1.ShardService/SelectSeries (per-bucket sums and counts) and
 * /ember.v1.ShardService/AnalyzeQuery (figures and series keys), for the
 * distributed querier's fan-out (services/querier/src/fanout*.c).
 */
#ifndef EMBER_SHARD_H
#define EMBER_SHARD_H

#include <stdbool.h>

#include <uv.h>

#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/store.h"

typedef struct ing_shard_s ing_shard_t;

int ing_shard_new(uv_loop_t *loop, lc_httpd_t *srv, lc_store_t *store, lc_metrics_t *metrics,
                  bool multitenancy, ing_shard_t **out) LC_MUST_CHECK;
void ing_shard_free(ing_shard_t *sh);

/* The shard API as a node of the process shell, on the ingester node's store. */
extern const lc_node_ops_t ing_shard_node;

#endif
