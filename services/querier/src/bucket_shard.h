/*
 * bucket_shard.h — ember-querier's own shard API on its store on the bucket
 * (issue 27): the history below the ingesters' marks (lc/members.h) is read
 * here, through the same shard API the fan-out asks the ingesters, so it
 * merges as one more shard's answer.
 *
 * It runs on BUCKET_SHARD_THREADS loop threads of its own, each a loopback
 * server (127.0.0.1, a free port) whose routes run on that loop thread
 * (lc_httpd_opts_t.no_offload): the fan-out's jobs wait for it on thread-pool
 * threads, and a shard on the same pool could starve behind them.
 *
 * Ownership: borrows the store (it must outlive qry_bucket_shard_stop).
 * Threading: start and stop on the loop thread (stop joins the threads).
 */
#ifndef EMBER_QRY_BUCKET_SHARD_H
#define EMBER_QRY_BUCKET_SHARD_H

#include <stdbool.h>
#include <stddef.h>

#include "lc/store.h"

#define BUCKET_SHARD_THREADS 2

typedef struct qry_bucket_shard_s qry_bucket_shard_t;

int qry_bucket_shard_start(lc_store_t *store, bool multitenancy,
                           qry_bucket_shard_t **out) LC_MUST_CHECK;
/* Base URLs ("http://127.0.0.1:PORT"), one per thread. */
size_t qry_bucket_shard_urls(const qry_bucket_shard_t *b, const char *const **out);
void qry_bucket_shard_stop(qry_bucket_shard_t *b); /* NULL-safe */

#endif
