/*
 * load_rpc.c — calls to the target and what every call records
 * (load_run_int.h): a Prometheus histogram and counter per (method, range,
 * code), byte counters per method, and the exact latency for the summary.
 */
#include <stdio.h>
#include <string.h>

#include "lc/log.h"
#include "load_run_int.h"
#include "load_wire.h"

/* Upper bounds (seconds) of the latency histogram: from a cached label query
 * to a 7-day merge on a busy store, past the default 10 s client timeout. */
static const double latency_bounds[] = {.001, .0025, .005, .01, .025, .05, .1,
                                        .25,  .5,    1,    2.5, 5,    10,  20};

typedef struct ld_rpc_s {
    ld_run_t *run;
    ld_method_t method;
    char *range;
    ld_codec_t codec;
    size_t sent_bytes;
    bool in_run; /* counts for the summary and the exit status */
    ld_rpc_done_cb cb;
    void *data;
} ld_rpc_t;

static void rpc_record(ld_run_t *run, const ld_rpc_t *rpc, const char *code, double seconds,
                       size_t received)
{
    const char *method = ld_method_name(rpc->method);
    char labels[256];
    snprintf(labels, sizeof(labels), "method=\"%s\",range=\"%s\",code=\"%s\"", method, rpc->range,
             code);
    lc_metric_observe(lc_metrics_histogram(run->metrics, "ember_load_request_duration_seconds",
                                           "Latency of ember-load's requests to the target.",
                                           labels, latency_bounds, LC_ARRAY_LEN(latency_bounds)),
                      seconds);
    lc_metric_add(lc_metrics_counter(run->metrics, "ember_load_requests_total",
                                     "Requests ember-load sent, by method, range and result code.",
                                     labels),
                  1);
    snprintf(labels, sizeof(labels), "method=\"%s\"", method);
    lc_metric_add(lc_metrics_counter(run->metrics, "ember_load_request_bytes_total",
                                     "Request body bytes sent, by method.", labels),
                  (double)rpc->sent_bytes);
    lc_metric_add(lc_metrics_counter(run->metrics, "ember_load_response_bytes_total",
                                     "Response body bytes received (decoded), by method.", labels),
                  (double)received);
    if (rpc->in_run)
        ld_stats_record(&run->stats, rpc->method, rpc->range, seconds, strcmp(code, "ok") == 0);
}

static void rpc_on_done(scr_http_req_t *req, void *data)
{
    ld_rpc_t *rpc = data;
    ld_run_t *run = rpc->run;
    const scr_http_result_t *res = scr_http_result(req);
    bool transport_failed = res->error_kind && strcmp(res->error_kind, SCR_HTTP_ERR_STATUS) != 0;
    char code_buf[32];
    const char *code =
        transport_failed && res->status == 200
            ? (strcmp(res->error_kind, SCR_HTTP_ERR_TIMEOUT) == 0 ? "deadline_exceeded" : "unknown")
            : ld_result_code(transport_failed ? 0 : res->status,
                             transport_failed ? res->error_kind : NULL, res->body.data,
                             res->body.len, code_buf, sizeof(code_buf));
    bool ok = strcmp(code, "ok") == 0;
    rpc_record(run, rpc, code, res->duration_s, res->body.len);
    if (!ok)
        LC_LOG_WARN("%s range=%s failed: code=%s %s %.*s", ld_method_name(rpc->method), rpc->range,
                    code, transport_failed ? res->error : "",
                    (int)(res->body.len < 300 ? res->body.len : 300),
                    res->body.data ? (const char *)res->body.data : "");
    rpc->cb(run, ok, code, res->body.data, res->body.len, rpc->data);
    scr_http_req_free(req);
    lc_free(rpc->range);
    lc_free(rpc);
}

static void rpc_url(const ld_run_t *run, ld_method_t method, char *url, size_t n)
{
    if (method == LD_PUSH)
        snprintf(url, n, "%s/push.v1.PusherService/Push",
                 run->cfg->write_target ? run->cfg->write_target : run->cfg->target);
    else
        snprintf(url, n, "%s/querier.v1.QuerierService/%s", run->cfg->target,
                 ld_method_name(method));
}

static int rpc_start(ld_run_t *run, ld_method_t method, const char *range_label, ld_codec_t codec,
                     const lc_buf_t *body, bool in_run, ld_rpc_done_cb cb, void *data)
{
    char url[2048], content_type[64];
    rpc_url(run, method, url, sizeof(url));
    snprintf(content_type, sizeof(content_type), "Content-Type: %s", ld_codec_content_type(codec));
    const char *headers[8];
    size_t n = 0;
    headers[n++] = content_type;
    headers[n++] = "Connect-Protocol-Version: 1";
    for (size_t i = 0; i < run->n_headers && n < LC_ARRAY_LEN(headers); i++)
        headers[n++] = run->headers[i];
    ld_rpc_t *rpc = lc_xcalloc(1, sizeof(*rpc));
    *rpc = (ld_rpc_t){run, method, lc_xstrdup(range_label), codec, body->len, in_run, cb, data};
    scr_http_opts_t o = {
        .url = url,
        .timeout_ns = run->cfg->timeout_ms * 1000000,
        .max_body_bytes = LD_MAX_RESPONSE_BYTES,
        .user_agent = "ember-load",
        .headers = headers,
        .n_headers = n,
        .post_body = body->data ? (const void *)body->data : "",
        .post_len = body->len,
        .on_done = rpc_on_done,
        .data = rpc,
    };
    scr_http_req_t *req;
    if (scr_http_start(run->http, &o, &req)) {
        LC_LOG_ERROR("%s: could not start a request to %s", ld_method_name(method), url);
        rpc_record(run, rpc, "internal", 0, 0);
        lc_free(rpc->range);
        lc_free(rpc);
        return -1;
    }
    return 0;
}

int ld_rpc_start(ld_run_t *run, ld_method_t method, const char *range_label, ld_codec_t codec,
                 const lc_buf_t *body, ld_rpc_done_cb cb, void *data)
{
    return rpc_start(run, method, range_label, codec, body, true, cb, data);
}

int ld_rpc_start_aside(ld_run_t *run, ld_method_t method, const char *range_label, ld_codec_t codec,
                       const lc_buf_t *body, ld_rpc_done_cb cb, void *data)
{
    return rpc_start(run, method, range_label, codec, body, false, cb, data);
}
