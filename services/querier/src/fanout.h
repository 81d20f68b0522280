/*
 * fanout.h — the distributed querier (ARCHITECTURE.md §2): the public
 * querier.v1 API answered by asking EVERY live ingester for its untruncated
 * partial result (the shard API, proto/ember/v1/shard.proto), merging them and
 * truncating once, at the end, so the answer equals an all-in-one's.
 *
 * The ingesters to ask are a set of base URLs (http://host:port) that the
 * caller keeps current: a static list (--querier.ingesters) and/or the
 * membership read from Redis (qry_fanout_set_members, on any thread), plus
 * this querier's own shard on the bucket for what lies below their marks.
 *
 * Every RPC runs on the thread pool; its shard calls go out in parallel on a
 * libcurl multi handle inside that job, each with a timeout. One unreachable
 * ingester makes the whole answer `unavailable`, naming it: a partial answer
 * would silently under-count.
 */
#ifndef EMBER_FANOUT_H
#define EMBER_FANOUT_H

#include <stdint.h>

#include <uv.h>

#include "lc/httpd.h"
#include "lc/metrics.h"
#include "querier.h"

typedef struct qry_fanout_opts_s {
    qry_opts_t q;                /* the same limits as the local querier, but the time-range
                                    rules (max_query_length_ms, max_query_lookback_ms) must
                                    be 0: the fan-out does not apply them (LC_EUNSUPPORTED) */
    const char *ingesters;       /* comma-separated base URLs, or NULL */
    uint32_t timeout_ms;         /* per shard call (capped by Connect-Timeout-Ms); 30000 */
    uint32_t connect_timeout_ms; /* TCP connect to an ingester; default 2000 */
} qry_fanout_opts_t;

void qry_fanout_opts_default(qry_fanout_opts_t *o);

typedef struct qry_fanout_s qry_fanout_t;

/* Registers querier.v1.QuerierService's methods and the legacy /pyroscope/render,
 * render-diff and label-values endpoints on srv, answered by fan-out. */
int qry_fanout_new(uv_loop_t *loop, const qry_fanout_opts_t *opts, lc_httpd_t *srv,
                   lc_metrics_t *metrics, qry_fanout_t **out) LC_MUST_CHECK;
/* Replaces the discovered ingesters (the static list is always kept) and
 * their marks (issue 27; marks_ms NULL or LC_MEMBER_NO_MARK: none): member i
 * is asked for the partitions from its mark on (QRY_READ_FROM_HEADER), and
 * the bucket shard, when one is set, for the rest (marks_spec,
 * LC_MARKS_HEADER). One call, so a query never mixes two snapshots. */
void qry_fanout_set_members(qry_fanout_t *f, const char *const *urls, const int64_t *marks_ms,
                            size_t n, const char *marks_spec);
/* While queries are unavailable (qry_fanout_set_unavailable), those that end
 * below history_below_ms are answered all the same (zones.h: a zone whose
 * missing members' history is in the bucket); INT64_MIN: none. */
void qry_fanout_set_history(qry_fanout_t *f, int64_t history_below_ms);
/* This querier's own shard API on its store on the bucket (base URLs of
 * equal servers: each query asks one, in turn); queries ask it whenever the
 * members have marks. Set once, before queries. */
void qry_fanout_set_bucket(qry_fanout_t *f, const char *const *urls, size_t n);
/* While reason is non-NULL every query fails `unavailable` with it (no
 * complete zone: any answer would under-count); NULL lifts it. Any thread. */
void qry_fanout_set_unavailable(qry_fanout_t *f, const char *reason);
/* How many ingesters a query asks now. */
size_t qry_fanout_count(qry_fanout_t *f);
void qry_fanout_free(qry_fanout_t *f);

#endif
