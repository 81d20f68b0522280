/*
 * fanout_int.h — what the fan-out files share (not a public header).
 *
 *   fanout.c        the ingester set and the parallel shard calls (libcurl multi)
 *   fanout_rpc.c    the querier.v1 methods: forward, merge, truncate once
 *   fanout_list.c   the listings and AnalyzeQuery: unions and sums
 *   fanout_merge.c  merging partial pprofs, series and listings
 */
#ifndef EMBER_FANOUT_INT_H
#define EMBER_FANOUT_INT_H

#include <pthread.h>

#include "fanout.h"
#include "querier_int.h"

#define FO_SHARD_SERVICE "/ember.v1.ShardService/"
#define FO_PUBLIC_SERVICE "/querier.v1.QuerierService/"

#define FO_METHODS 12 /* every querier.v1.QuerierService method */

struct qry_fanout_s {
    qry_fanout_opts_t opts;
    lc_metrics_t *metrics;
    pthread_mutex_t lock; /* guards members: discovery writes while queries read */
    char **fixed;         /* --querier.ingesters */
    size_t n_fixed;
    char **members; /* discovered through Redis */
    size_t n_members;
    char *unavailable;              /* why no query can be answered now, or NULL */
    qry_route_t routes[FO_METHODS]; /* tenant first, as the local querier's */
    qry_rpcs_t legacy;              /* the legacy endpoints' RPCs: the fo_rpc_* below */
    lc_metric_t *shard_calls, *shard_errors;
};

/* One ingester's answer to a shard call. */
typedef struct fo_answer_s {
    const char *url;      /* the ingester's base URL (arena copy) */
    const uint8_t *body;  /* protobuf bytes of a 200 (arena copy) */
    size_t len;
} fo_answer_t;

/* POSTs the message `msg` to path on every ingester in parallel and returns
 * their 200 bodies in *out (request arena). Any failure sets st: unavailable
 * naming an unreachable ingester (or when there is none at all), or the
 * ingester's own Connect error (e.g. invalid_argument), prefixed by its URL. */
int fo_call_all(qry_fanout_t *f, lc_http_req_t *req, const char *path,
                const ProtobufCMessage *msg, fo_answer_t **out, size_t *n,
                lc_status_t *st) LC_MUST_CHECK;

/* Unpacks every answer as desc into the request arena. */
int fo_unpack_all(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                  const fo_answer_t *ans, size_t n, ProtobufCMessage ***out,
                  lc_status_t *st) LC_MUST_CHECK;

/* ---- merges (fanout_merge.c) ---- */
/* Adds every sample of a pprof (protobuf bytes) into b, remapping its ids;
 * the first one also gives b its sample type and period. */
int fo_pprof_add(lc_pprof_builder_t *b, lc_arena_t *a, const uint8_t *pb, size_t len,
                 bool first, int64_t *start_ns, int64_t *end_ns, lc_status_t *st) LC_MUST_CHECK;
/* Union of sorted string lists, sorted byte-wise, into the arena. */
int fo_union_strings(lc_arena_t *a, char ***lists, const size_t *ns, size_t n_lists, char ***out,
                     size_t *n_out) LC_MUST_CHECK;

/* ---- the methods (fanout_rpc.c); data is the qry_fanout_t ---- */
int fo_rpc_select_merge_stacktraces(lc_http_req_t *req, const ProtobufCMessage *in,
                                    qry_reply_t *out, lc_status_t *st, void *data);
int fo_rpc_select_merge_profile(lc_http_req_t *req, const ProtobufCMessage *in, qry_reply_t *out,
                                lc_status_t *st, void *data);
int fo_rpc_select_merge_span_profile(lc_http_req_t *req, const ProtobufCMessage *in,
                                     ProtobufCMessage **out, lc_status_t *st, void *data);
int fo_rpc_diff(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                lc_status_t *st, void *data);
int fo_rpc_select_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int fo_rpc_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int fo_rpc_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data);
int fo_rpc_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data);
int fo_rpc_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                  lc_status_t *st, void *data);
int fo_rpc_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in,
                             ProtobufCMessage **out, lc_status_t *st, void *data);
int fo_rpc_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);

#endif
