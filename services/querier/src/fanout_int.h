/*
 * fanout_int.h — what the fan-out files share (not a public header).
 *
 *   fanout.c        the ingester set, qry_fanout_new: the front end (frontend.c)
 *                   over this back end
 *   fanout_call.c   the parallel shard calls (libcurl multi) and their answers
 *   fanout_rpc.c    the back end's merges and series: forward, merge, untruncated
 *   fanout_list.c   the listings and AnalyzeQuery: unions and sums
 *   fanout_merge.c  merging partial pprofs, series and listings
 */
#ifndef EMBER_FANOUT_INT_H
#define EMBER_FANOUT_INT_H

#include <pthread.h>

#include "fanout.h"
#include "lc/members.h"
#include "querier_int.h"

#define FO_SHARD_SERVICE "/ember.v1.ShardService/"
#define FO_PUBLIC_SERVICE "/querier.v1.QuerierService/"

struct qry_fanout_s {
    qry_front_t front; /* the public API over this back end (fo_backend) */
    qry_fanout_opts_t opts;
    lc_metrics_t *metrics;
    pthread_mutex_t lock; /* guards members: discovery writes while queries read */
    char **fixed;         /* --querier.ingesters */
    size_t n_fixed;
    char **members;    /* discovered through Redis */
    int64_t *marks_ms; /* each member's mark: it answers from it on (LC_MEMBER_NO_MARK: all) */
    size_t n_members;
    char *marks_spec;   /* the members' marks: the bucket shard reads below them; NULL: none */
    char **bucket_urls; /* this querier's shard on the bucket (qry_fanout_set_bucket) */
    size_t n_bucket_urls;
    size_t bucket_next;       /* the one the next query asks (under lock) */
    char *unavailable;        /* why no query can be answered now, or NULL */
    int64_t history_below_ms; /* ... except those that end below this (INT64_MIN: none) */
    lc_metric_t *shard_calls, *shard_errors;
};

/* The qry_fanout_t of a back-end function's fe (or data). */
static inline qry_fanout_t *fo_of(void *fe)
{
    return LC_CONTAINER_OF(fe, qry_fanout_t, front);
}

/* One ingester's answer to a shard call. */
typedef struct fo_answer_s {
    const char *url;     /* the ingester's base URL (arena copy) */
    const uint8_t *body; /* protobuf bytes of a 200 (arena copy) */
    size_t len;
} fo_answer_t;

/* POSTs the message `msg` to path on every ingester in parallel and returns
 * their 200 bodies in *out (request arena). Any failure sets st: unavailable
 * naming an unreachable ingester (or when there is none at all), or the
 * ingester's own Connect error (e.g. invalid_argument), prefixed by its URL. */
int fo_call_all(qry_fanout_t *f, lc_http_req_t *req, const char *path, const ProtobufCMessage *msg,
                fo_answer_t **out, size_t *n, lc_status_t *st) LC_MUST_CHECK;

/* Unpacks every answer as desc into the request arena. */
int fo_unpack_all(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                  const fo_answer_t *ans, size_t n, ProtobufCMessage ***out,
                  lc_status_t *st) LC_MUST_CHECK;

/* ---- merges (fanout_merge.c) ---- */
/* Adds every sample of a pprof (protobuf bytes) into b, remapping its ids;
 * the first one also gives b its sample type and period. */
int fo_pprof_add(lc_pprof_builder_t *b, lc_arena_t *a, const uint8_t *pb, size_t len, bool first,
                 int64_t *start_ns, int64_t *end_ns, lc_status_t *st) LC_MUST_CHECK;
/* p (a merge of partial pprofs, as a builder encoded it) into b in an order
 * that depends only on what it holds: samples by their stacks' content,
 * every table in order of first use. So the same profiles give the same
 * bytes however the shards split them (the bucket below the marks, one
 * ingester or two). LC_EINPUT when p's ids are not a builder's. */
int fo_pprof_canonical(lc_pprof_builder_t *b, lc_arena_t *a, const lc_pprof_t *p) LC_MUST_CHECK;
/* Union of sorted string lists, sorted byte-wise, into the arena. */
int fo_union_strings(lc_arena_t *a, char ***lists, const size_t *ns, size_t n_lists, char ***out,
                     size_t *n_out) LC_MUST_CHECK;

/* ---- the back end (qry_backend_t; fe is the qry_fanout_t's front) ---- */
extern const qry_backend_t fo_backend;
/* fanout_rpc.c */
int fo_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in, lc_ftree_t **out,
                  lc_status_t *st);
int fo_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in, lc_buf_t *out,
                   lc_status_t *st);
int fo_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                   const qry_merge_sink_t *sink, lc_status_t *st);
int fo_select_series(qry_front_t *fe, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     const lc_query_series_opts_t *o, lc_query_series_t **out, lc_status_t *st);
/* Every ingester's profile references (ShardService/SelectProfiles), joined. */
int fo_select_profiles(qry_front_t *fe, lc_http_req_t *req,
                       const Querier__V1__SelectSeriesRequest *r, const lc_query_series_opts_t *o,
                       Ember__V1__ProfileRefsResponse **out, lc_status_t *st);
/* fanout_list.c; data is fe */
int fo_rpc_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int fo_rpc_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data);
int fo_rpc_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data);
int fo_rpc_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                  lc_status_t *st, void *data);
int fo_rpc_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                             lc_status_t *st, void *data);
int fo_rpc_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);

#endif
