/*
 * load_run_int.h — the run's state and its one way to call the target,
 * shared by load_run.c (rounds, writes), load_rpc.c (calls and their
 * metrics) and load_query.c (/emberquery). Loop thread only.
 */
#ifndef EMBER_LOAD_RUN_INT_H
#define EMBER_LOAD_RUN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "http.h"
#include "lc/alloc.h"
#include "lc/httpd.h"
#include "lc/metrics.h"
#include "load_config.h"
#include "load_matrix.h"
#include "load_stats.h"

#define LD_MAX_WRITES_IN_FLIGHT 16
#define LD_MAX_RESPONSE_BYTES (512u << 20)

typedef struct ld_run_s ld_run_t;

/* A finished call: ok means HTTP 200 with a complete body. body is valid only
 * during the callback. */
typedef void (*ld_rpc_done_cb)(ld_run_t *run, bool ok, const char *code, const uint8_t *body,
                               size_t len, void *data);

/* A pprof file of the write load, without its time_nanos. */
typedef struct ld_write_src_s {
    const char *metric_name;
    char *label; /* file name for the metric label (owned) */
    lc_buf_t stripped;
} ld_write_src_t;

typedef enum { LD_STAGE_WRITE_FIRST, LD_STAGE_DISCOVER, LD_STAGE_ROUNDS, LD_STAGE_DONE } ld_stage_t;

struct ld_run_s {
    const ld_config_t *cfg;
    uv_loop_t *loop;
    scr_http_t *http;
    lc_httpd_t *httpd;
    lc_metrics_t *metrics;
    ld_stats_t stats;
    char **headers; /* "Name: value" for every call */
    size_t n_headers;
    ld_stage_t stage;
    /* discovered or given */
    char **types;
    size_t n_types;
    char **labels;
    size_t n_labels;
    char **selectors; /* "" = all */
    size_t n_selectors;
    char *auto_label;
    unsigned type_polls; /* ProfileTypes asked again after an empty answer */
    /* rounds */
    ld_call_t *calls;
    size_t n_calls, next_call;
    unsigned queries_in_flight;
    unsigned rounds_done;
    int64_t round_start_ns;
    uv_timer_t round_timer, duration_timer, write_timer;
    uv_signal_t sigint, sigterm;
    bool stopping, finished, shut_down;
    /* writes */
    ld_write_src_t *srcs;
    size_t n_srcs;
    uint64_t writes_started;
    unsigned writes_in_flight;
    int exit_code;
};

/* Starts a Connect call of method (a querier method or LD_PUSH) with a body
 * already encoded in codec; range_label names the range in metrics.
 * Returns 0 (cb runs exactly once, later) or -1 (recorded as a failure). */
int ld_rpc_start(ld_run_t *run, ld_method_t method, const char *range_label, ld_codec_t codec,
                 const lc_buf_t *body, ld_rpc_done_cb cb, void *data);
/* The same for a call outside the run (/emberquery): in the metrics, but not
 * in the summary or the exit status. */
int ld_rpc_start_aside(ld_run_t *run, ld_method_t method, const char *range_label, ld_codec_t codec,
                       const lc_buf_t *body, ld_rpc_done_cb cb, void *data);
/* Registers GET /emberquery. */
int ld_query_register(ld_run_t *run) LC_MUST_CHECK;

#endif
