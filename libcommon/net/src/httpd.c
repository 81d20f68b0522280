/*
 * httpd.c — the HTTP/1.1 server of lc/httpd.h: accepts TCP connections on a
 * uv loop, feeds their bytes to the request parser (httpd_parse.c), routes
 * each complete request to its handler (on the loop or the thread pool) and
 * writes the response built with httpd_req.c.
 *
 * One request per connection is in progress at a time: reading stops while a
 * request is handled and resumes once its response is written, so pipelined
 * requests are answered in order and a slow handler holds back its client
 * only. docs/internals/httpd.md describes the connection states and rules.
 */
#include <limits.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_int.h"
#include "lc/grpc.h"
#include "lc/log.h"
#include "lc/metrics.h"

#define READ_CHUNK_BYTES (64 * 1024)
#define PENDING_MAX_BYTES (2 * READ_CHUNK_BYTES) /* unparsed pipelined bytes */
#define LISTEN_BACKLOG 511
#define ADDRESS_MAX 256
#define DRAIN_READ_GRACE_MS 5000 /* a half-received request during lc_httpd_close */

#define DEFAULT_MAX_HEADER_BYTES (64u * 1024)
#define DEFAULT_MAX_BODY_BYTES (256u << 20)
#define DEFAULT_MAX_DECOMPRESSED_BYTES (256u << 20)
#define DEFAULT_MAX_RESPONSE_BYTES (512u << 20)
#define DEFAULT_ARENA_CAP_BYTES (1u << 30)
#define DEFAULT_MAX_CONNECTIONS 10000
#define TRIM_AFTER_CONNS 256 /* a drained peak this high is given back (malloc_trim) */
#define TRIM_LOW_CONNS 8
#define DEFAULT_MAX_INFLATING 2  /* of libuv's 4 pool threads: queries keep the others */
#define MAX_INFLATE_WAITING 1024 /* gzip bodies parked for a slot; past it -> 503 */
#define DEFAULT_IDLE_TIMEOUT_MS 120000
#define DEFAULT_READ_TIMEOUT_MS 60000

static const char continue_response[] = "HTTP/1.1 100 Continue\r\n\r\n";

typedef lc_httpd__route_t route_t;
typedef lc_httpd__xchg_t xchg_t;

typedef enum {
    CONN_IDLE,     /* between requests: idle timer */
    CONN_READING,  /* a request has begun: read deadline */
    CONN_HANDLING, /* a handler owns the request: not reading, no timer */
    CONN_WRITING,  /* the response is being written: write deadline */
    CONN_H2,       /* HTTP/2: always reading; streams carry the requests */
    CONN_CLOSING,  /* handles are closing; freed by the last close callback */
} conn_state_t;

typedef struct conn_s conn_t;
struct conn_s {
    uv_tcp_t tcp;            /* tcp.data == this */
    uv_timer_t timer;        /* idle, read or write deadline by state */
    uv_write_t write_req;    /* the response */
    uv_write_t continue_req; /* an interim "100 Continue" */
    uv_shutdown_t shutdown_req;
    lc_httpd_t *srv;
    conn_t *prev, *next; /* srv->conns */
    conn_state_t state;
    int open_handles;
    bool reading;
    bool close_after_write; /* the response in progress ends the connection */
    bool served;            /* a request has begun: no HTTP/2 preface any more */
    xchg_t x;               /* the HTTP/1.1 request; x.parser.req._conn == &x */
    lc_buf_t pending;       /* bytes after the current request */
    /* HTTP/2 (state CONN_H2) */
    lc_httpd__h2_t *h2;
    lc_buf_t h2_out; /* bytes in uv_write */
    bool h2_writing;
    bool h2_close_wanted; /* close once no handler runs */
    uint64_t h2_progress; /* lc_httpd__h2_progress at the last timer check */
    uint64_t h2_settings_due_ns;
};

struct lc_httpd_s {
    uv_loop_t *loop;
    uv_tcp_t listener;
    lc_httpd__limits_t lim;
    uint64_t idle_timeout_ms;
    uint64_t read_timeout_ms;
    lc_metrics_t *metrics;
    lc_metric_t *unrouted_latency;
    char address[ADDRESS_MAX];
    lc_httpd__routes_t routes;
    conn_t *conns;
    size_t n_conns;
    unsigned inflating; /* offloaded gzip bodies holding an inflate slot (loop only) */
    xchg_t *inflate_wait_head, *inflate_wait_tail; /* parked for a slot, FIFO */
    unsigned inflate_waiting;
    size_t max_conns;
    size_t peak_conns; /* since the last malloc_trim */
    uint64_t refused_conns;
    char *rbuf; /* READ_CHUNK_BYTES, shared by every connection */
    unsigned max_inflating;
    lc_httpd__h2_cfg_t h2cfg; /* on_request, respond, answered, user set per connection */
    bool h2_enabled;
    uint64_t h2_settings_timeout_ms;
    bool closing;
    bool listener_closed;
    void (*close_cb)(void *data);
    void *close_data;
    lc_http_guard_fn guard;
    bool no_offload; /* opts.no_offload */
};

static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out);
static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_on_timer(uv_timer_t *t);
static void conn_on_continue_written(uv_write_t *w, int status);
static void conn_on_written(uv_write_t *w, int status);
static void conn_on_shutdown(uv_shutdown_t *s, int status);
static void conn_on_closed(uv_handle_t *h);
static void conn_close(conn_t *c);
static void conn_send_response(conn_t *c);
static void srv_maybe_finish(lc_httpd_t *srv);
static void srv_maybe_trim(lc_httpd_t *srv);

/* ================================================================ routes */

int lc_httpd_route(lc_httpd_t *srv, const lc_http_route_t *route)
{
    size_t max_inflated = srv->lim.max_decompressed_bytes < srv->lim.max_body_bytes
                              ? srv->lim.max_decompressed_bytes
                              : srv->lim.max_body_bytes;
    lc_http_route_t r = *route;
    r.offload = r.offload && !srv->no_offload;
    return lc_httpd__routes_add(&srv->routes, &r, max_inflated, srv->metrics);
}

int lc_httpd_route_interim(lc_httpd_t *srv, const char *path, lc_http_interim_fn fn)
{
    for (size_t i = 0; i < srv->routes.n; i++) {
        route_t *r = &srv->routes.v[i];
        if (!r->prefix && strcmp(r->path, path) == 0) {
            r->interim = fn;
            return 0;
        }
    }
    return LC_ENOTFOUND;
}

int lc_httpd_routes_text(const lc_httpd_t *srv, lc_buf_t *out)
{
    return lc_httpd__routes_text(&srv->routes, out);
}

/* ================================================================ metrics */

void lc_httpd__xchg_record_metrics(xchg_t *x)
{
    lc_httpd_t *srv = x->srv;
    const lc_http_req_t *req = &x->parser.req;
    char labels[LC_HTTPD__METRIC_LABELS_MAX];
    if (!srv || !srv->metrics)
        return;
    const char *route = x->route ? x->route->metric_name : "none";
    snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\",status=\"%d\"", route, req->method,
             req->status);
    lc_metric_t *count = lc_metrics_counter(srv->metrics, "ember_http_requests_total",
                                            "HTTP requests by route, method and status.", labels);
    if (count)
        lc_metric_add(count, 1);
    lc_metric_t *latency = x->route ? x->route->latency : srv->unrouted_latency;
    if (latency && x->started_ns)
        lc_metric_observe(latency, (double)(uv_hrtime() - x->started_ns) / 1e9);
}

/* ================================================================ reading */

static void conn_read_start(conn_t *c)
{
    if (c->reading)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) != 0) {
        conn_close(c);
        return;
    }
    c->reading = true;
}

static void conn_read_stop(conn_t *c)
{
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

static void conn_arm_timer(conn_t *c, uint64_t timeout_ms)
{
    uv_timer_start(&c->timer, conn_on_timer, timeout_ms, 0);
}

/* A drain waits for half-received requests, but not for a whole read timeout:
 * the orchestrator's grace period is usually shorter. */
static void conn_shorten_deadline(conn_t *c, uint64_t max_ms)
{
    if (uv_timer_get_due_in(&c->timer) > max_ms)
        conn_arm_timer(c, max_ms);
}

static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    conn_t *c = h->data;
    /* Every byte is consumed or copied before the next read callback returns,
     * and reads run one at a time on the loop: one buffer per server serves
     * every connection, so an idle keep-alive connection holds none (it cost
     * 64 KiB each before). */
    LC_UNUSED(hint);
    *out = uv_buf_init(c->srv->rbuf, READ_CHUNK_BYTES);
}

static void conn_send_continue(conn_t *c)
{
    uv_buf_t buf = uv_buf_init((char *)continue_response, sizeof(continue_response) - 1);
    c->x.parser.want_continue = false;
    if (uv_write(&c->continue_req, (uv_stream_t *)&c->tcp, &buf, 1, conn_on_continue_written))
        conn_close(c);
}

static void conn_on_continue_written(uv_write_t *w, int status)
{
    conn_t *c = LC_CONTAINER_OF(w, conn_t, continue_req);
    if (status < 0 && status != UV_ECANCELED)
        conn_close(c);
}

/* The parser consumed everything and wants more: track the request deadline. */
static void conn_on_partial(conn_t *c)
{
    if (c->state == CONN_IDLE && c->x.parser.in_message) {
        c->state = CONN_READING;
        c->x.started_ns = uv_hrtime();
        conn_arm_timer(c, c->srv->read_timeout_ms);
    }
    if (c->x.parser.want_continue)
        conn_send_continue(c);
}

/* A request the parser refused: answer with its status and close. */
static void conn_reply_parse_error(conn_t *c, int status, const char *msg)
{
    conn_read_stop(c);
    if (c->state == CONN_IDLE)
        c->x.started_ns = uv_hrtime();
    c->close_after_write = true;
    lc_httpd__reply_status(&c->x.parser.req, status, msg);
    conn_send_response(c);
}

static void conn_dispatch(conn_t *c);

/* Feeds bytes to the parser; what follows a complete request waits in
 * c->pending until that request's response has been written. */
static void conn_ingest(conn_t *c, const char *data, size_t len)
{
    size_t used = 0;
    lc_httpd__parse_t r = lc_httpd__parser_feed(&c->x.parser, data, len, &used);
    if (r == LC_HTTPD__MORE) {
        conn_on_partial(c);
        return;
    }
    if (r == LC_HTTPD__ERROR) {
        conn_reply_parse_error(c, c->x.parser.error_status, c->x.parser.error_msg);
        return;
    }
    if (lc_buf_append(&c->pending, data + used, len - used) != 0)
        c->close_after_write = true; /* cannot happen with one read buffer; stay safe */
    conn_dispatch(c);
}

/* Parses bytes left over from a pipelined read, as if they had just arrived. */
static void conn_ingest_pending(conn_t *c)
{
    lc_buf_t in = c->pending;
    lc_buf_init(&c->pending, PENDING_MAX_BYTES);
    conn_ingest(c, (const char *)in.data, in.len);
    lc_buf_fini(&in);
}

static void conn_h2_recv(conn_t *c, const char *data, size_t len);
static void conn_start_h2(conn_t *c, const char *data, size_t len);

/* The first bytes of a connection: the HTTP/2 client preface switches it to
 * HTTP/2 (prior knowledge), anything else is HTTP/1.1. A preface cut short by
 * the network waits in c->pending (no request has begun, so it is free).
 * Returns true if it took the bytes. */
static bool conn_sniff_preface(conn_t *c, const char *data, size_t len)
{
    static const char preface[] = LC_HTTPD__H2_PREFACE;
    size_t have = c->pending.len;
    size_t n = have + len < LC_HTTPD__H2_PREFACE_LEN ? len : LC_HTTPD__H2_PREFACE_LEN - have;
    if (memcmp(data, preface + have, n) != 0) {
        c->served = true;
        if (have == 0)
            return false;
        if (lc_buf_append(&c->pending, data, len) != 0)
            c->close_after_write = true;
        conn_ingest_pending(c);
        return true;
    }
    if (lc_buf_append(&c->pending, data, len) != 0) {
        conn_close(c);
        return true;
    }
    if (c->pending.len < LC_HTTPD__H2_PREFACE_LEN)
        return true;
    lc_buf_t in = c->pending;
    lc_buf_init(&c->pending, PENDING_MAX_BYTES);
    conn_start_h2(c, (const char *)in.data, in.len);
    lc_buf_fini(&in);
    return true;
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread == 0)
        return; /* EAGAIN: nothing now */
    if (nread < 0) {
        conn_read_stop(c);
        conn_close(c); /* EOF or reset: a half-sent request is dropped */
        return;
    }
    if (c->state == CONN_H2) {
        conn_h2_recv(c, buf->base, (size_t)nread);
        return;
    }
    if (c->state != CONN_IDLE && c->state != CONN_READING)
        return;
    if (!c->served && c->srv->h2_enabled && conn_sniff_preface(c, buf->base, (size_t)nread))
        return;
    conn_ingest(c, buf->base, (size_t)nread);
}

/* ================================================================ HTTP/2 */

#define H2_WRITE_BATCH (256u * 1024) /* bytes pulled from nghttp2 per uv_write */
#define H2_OUT_MAX (4u << 20)        /* one batch plus the largest frame */
#define H2_HARD_CLOSE_MS 1000        /* after a GOAWAY the peer does not read */
#define DEFAULT_H2_MAX_STREAMS 100
#define DEFAULT_H2_STREAM_WINDOW (1u << 20)
#define DEFAULT_H2_CONNECTION_WINDOW (16u << 20)
#define DEFAULT_H2_MAX_FRAME_BYTES (16u * 1024)
#define DEFAULT_H2_SETTINGS_TIMEOUT_MS 10000

static const char switching_response[] = "HTTP/1.1 101 Switching Protocols\r\n"
                                         "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

static void conn_h2_flush(conn_t *c);

static void conn_h2_on_written(uv_write_t *w, int status)
{
    conn_t *c = LC_CONTAINER_OF(w, conn_t, write_req);
    c->h2_writing = false;
    if (c->state == CONN_CLOSING)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    conn_h2_flush(c);
}

/* Writes what nghttp2 has queued, one batch at a time: nothing more is pulled
 * while a write is in flight, so a peer that does not read holds at most one
 * batch here (nghttp2 caps its queued ACKs and cuts a flooding peer). */
static void conn_h2_flush(conn_t *c)
{
    if (c->h2_writing || c->state != CONN_H2)
        return;
    lc_buf_reset(&c->h2_out);
    if (lc_httpd__h2_pull(c->h2, &c->h2_out, H2_WRITE_BATCH) > 0) {
        uv_buf_t b = uv_buf_init((char *)c->h2_out.data, (unsigned)c->h2_out.len);
        c->h2_writing = true;
        if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, conn_h2_on_written) != 0) {
            c->h2_writing = false;
            conn_close(c);
        }
        return;
    }
    if (lc_httpd__h2_open_streams(c->h2) == 0 && c->h2_out.cap > H2_WRITE_BATCH)
        lc_buf_fini(&c->h2_out); /* an idle connection keeps no big buffer */
    if (!lc_httpd__h2_alive(c->h2) || c->h2_close_wanted)
        conn_close(c); /* everything queued has been written */
}

static void conn_h2_recv(conn_t *c, const char *data, size_t len)
{
    if (lc_httpd__h2_recv(c->h2, (const uint8_t *)data, len) != 0) {
        /* A fatal session error: flush what nghttp2 queued (GOAWAY), then close. */
        conn_read_stop(c);
        c->h2_close_wanted = true;
    }
    conn_h2_flush(c);
}

/* A stream's response is ready (x->respond of every stream). */
static void conn_h2_respond(xchg_t *x)
{
    conn_t *c = lc_httpd__h2_respond(x);
    conn_h2_flush(c);
}

static void conn_h2_on_request(void *user, xchg_t *x)
{
    LC_UNUSED(user);
    x->started_ns = uv_hrtime();
    lc_httpd__xchg_dispatch(x);
}

/* The first timer: the peer must acknowledge our SETTINGS in time; later the
 * idle period, checked against the progress counter. */
static void conn_h2_arm(conn_t *c)
{
    uint64_t ms = c->srv->idle_timeout_ms;
    if (!lc_httpd__h2_settings_acked(c->h2) && c->srv->h2_settings_timeout_ms < ms)
        ms = c->srv->h2_settings_timeout_ms;
    conn_arm_timer(c, ms);
}

/* No settings ACK in time, no progress for an idle period while streams are
 * open (zero windows, a stalled upload), or simply idle: GOAWAY, then close
 * (hard if the peer does not even take the GOAWAY). */
static void conn_h2_on_timer(conn_t *c)
{
    lc_httpd__h2_t *h2 = c->h2;
    uint64_t progress = lc_httpd__h2_progress(h2);
    if (c->h2_close_wanted) {
        conn_close(c);
        return;
    }
    if (!lc_httpd__h2_settings_acked(h2) && uv_hrtime() >= c->h2_settings_due_ns) {
        lc_httpd__h2_terminate(h2, LC_HTTPD__H2_SETTINGS_TIMEOUT);
    } else if (progress != c->h2_progress || lc_httpd__h2_busy(h2) > 0) {
        c->h2_progress = progress; /* working: a handler runs, or frames moved */
        conn_h2_arm(c);
        return;
    } else {
        lc_httpd__h2_terminate(h2, LC_HTTPD__H2_NO_ERROR);
    }
    c->h2_close_wanted = true;
    conn_read_stop(c);
    conn_h2_flush(c);
    if (c->state == CONN_H2)
        conn_arm_timer(c, H2_HARD_CLOSE_MS);
}

/* Graceful drain: GOAWAY; streams begun finish, then the session ends. */
static void conn_h2_drain(conn_t *c)
{
    lc_httpd__h2_shutdown(c->h2);
    conn_shorten_deadline(c, DRAIN_READ_GRACE_MS);
    conn_h2_flush(c);
}

static int conn_new_h2_session(conn_t *c)
{
    lc_httpd__h2_cfg_t cfg = c->srv->h2cfg;
    cfg.user = c;
    cfg.on_request = conn_h2_on_request;
    cfg.respond = conn_h2_respond;
    cfg.answered = lc_httpd__xchg_record_metrics;
    cfg.interim_route = lc_httpd__xchg_interim_route;
    int rc = lc_httpd__h2_new(&cfg, &c->h2);
    if (rc != 0)
        return rc;
    lc_buf_init(&c->h2_out, H2_OUT_MAX);
    c->state = CONN_H2;
    c->served = true;
    c->h2_settings_due_ns = uv_hrtime() + c->srv->h2_settings_timeout_ms * 1000000u;
    conn_h2_arm(c);
    return 0;
}

/* Prior knowledge: data starts with the client preface. */
static void conn_start_h2(conn_t *c, const char *data, size_t len)
{
    if (conn_new_h2_session(c) != 0) {
        conn_close(c);
        return;
    }
    conn_h2_recv(c, data, len);
}

static bool header_has_token(const char *value, const char *token)
{
    size_t tlen = strlen(token);
    for (const char *s = value; s && *s;) {
        while (*s == ' ' || *s == ',' || *s == '\t')
            s++;
        size_t n = strcspn(s, ", \t");
        if (n == tlen && strncasecmp(s, token, n) == 0)
            return true;
        s += n;
    }
    return false;
}

static bool h2c_upgrade_wanted(const lc_httpd_t *srv, const lc_http_req_t *req)
{
    if (!srv->h2_enabled || srv->closing)
        return false;
    const char *upgrade = lc_http_header(req, "upgrade");
    return upgrade && header_has_token(upgrade, "h2c") && lc_http_header(req, "http2-settings");
}

/* `Upgrade: h2c`: 101, then the request becomes stream 1 and is answered over
 * HTTP/2. A malformed HTTP2-Settings is ignored with the upgrade (RFC 7540
 * §3.2 lets a server stay on HTTP/1.1). */
static void conn_upgrade_h2(conn_t *c)
{
    uint8_t settings[512];
    size_t n = 0;
    const char *b64 = lc_http_header(&c->x.parser.req, "http2-settings");
    if (lc_httpd__b64url_decode(b64, settings, sizeof(settings), &n) != 0 || n % 6 != 0) {
        lc_httpd__xchg_dispatch(&c->x);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)switching_response, sizeof(switching_response) - 1);
    if (uv_write(&c->continue_req, (uv_stream_t *)&c->tcp, &b, 1, conn_on_continue_written) != 0 ||
        conn_new_h2_session(c) != 0) {
        c->state = CONN_WRITING; /* nothing owns a request now */
        conn_close(c);
        return;
    }
    int rc = lc_httpd__h2_upgrade(c->h2, settings, n, &c->x.parser);
    lc_httpd__parser_init(&c->x.parser, &c->srv->lim); /* its memory moved to stream 1 */
    c->x.parser.req._conn = &c->x;
    if (rc != 0) {
        c->h2_close_wanted = true;
        conn_h2_flush(c);
        return;
    }
    lc_buf_t in = c->pending; /* the client preface and frames after the request */
    lc_buf_init(&c->pending, PENDING_MAX_BYTES);
    if (in.len > 0)
        conn_h2_recv(c, (const char *)in.data, in.len);
    else
        conn_h2_flush(c);
    lc_buf_fini(&in);
    if (c->state == CONN_H2 && !c->h2_close_wanted)
        conn_read_start(c);
}

/* ================================================================ handling */

/* Runs a loop-side callback, then `next` (if any) or the response. A callback
 * returning LC_HTTP_PENDING ends the chain: lc_http_finish sends the reply. */
static void xchg_run_on_loop(xchg_t *x, lc_http_handler_cb cb, lc_http_handler_cb next)
{
    x->in_handler = true;
    x->finish_called = false;
    lc_http_result_t r = cb(&x->parser.req, x->route->data);
    x->in_handler = false;
    if (r == LC_HTTP_PENDING) {
        if (x->finish_called)
            x->respond(x);
        else
            x->awaiting_finish = true;
        return;
    }
    if (next)
        xchg_run_on_loop(x, next, NULL);
    else
        x->respond(x);
}

/* Gunzips the body under the route's cap, on the thread that runs `work`. */
static int xchg_decode_body(xchg_t *x)
{
    if (!lc_httpd__parser_body_gzipped(&x->parser))
        return 0;
    return lc_httpd__parser_decode_body(&x->parser, x->route->max_inflated);
}

/* Thread pool: the body is gunzipped here too, off the loop. */
static void xchg_on_work(uv_work_t *w)
{
    xchg_t *x = w->data;
    x->work_failed = xchg_decode_body(x) != 0;
    if (x->work_failed)
        return;
    if (x->route->work(&x->parser.req, x->route->data) == LC_HTTP_PENDING) {
        /* Only the loop can finish a request later: a pool callback cannot pend. */
        lc_httpd__reply_status(&x->parser.req, 500, "handler returned PENDING off the loop");
        x->work_failed = true;
    }
}

static void xchg_release_inflate_slot(xchg_t *x);

static void xchg_on_work_done(uv_work_t *w, int status)
{
    xchg_t *x = w->data;
    xchg_release_inflate_slot(x);
    if (status != 0) {
        lc_httpd__reply_status(&x->parser.req, 503, "request canceled");
        x->respond(x);
    } else if (x->work_failed || !x->route->after) {
        x->respond(x);
    } else {
        xchg_run_on_loop(x, x->route->after, NULL);
    }
}

static void xchg_queue_work(xchg_t *x)
{
    x->work_req.data = x;
    if (uv_queue_work(x->srv->loop, &x->work_req, xchg_on_work, xchg_on_work_done) != 0) {
        xchg_release_inflate_slot(x);
        lc_httpd__reply_status(&x->parser.req, 503, "cannot schedule the request");
        x->respond(x);
    }
}

/* At most srv->max_inflating offloaded gzip bodies inflate at once, so
 * compressed bombs cannot hold every pool thread while queries wait behind
 * them. The rest wait here, on the loop, in arrival order (a pool thread is
 * not held while waiting); only past MAX_INFLATE_WAITING is one refused with
 * 503 + Retry-After. A parked exchange is owned by its handler like one in
 * the pool queue, so its connection or stream waits for it. */
static void xchg_park_or_queue(xchg_t *x)
{
    lc_httpd_t *srv = x->srv;
    if (!lc_httpd__parser_body_gzipped(&x->parser)) {
        xchg_queue_work(x);
        return;
    }
    if (srv->inflating < srv->max_inflating) {
        srv->inflating++;
        x->holds_inflate_slot = true;
        xchg_queue_work(x);
        return;
    }
    if (srv->inflate_waiting >= MAX_INFLATE_WAITING) {
        lc_httpd__reply_status(
            &x->parser.req, 503,
            "too many compressed request bodies are waiting to be inflated; retry");
        lc_http_set_header(&x->parser.req, "Retry-After", "1");
        x->respond(x);
        return;
    }
    x->next_waiting = NULL;
    if (srv->inflate_wait_tail)
        srv->inflate_wait_tail->next_waiting = x;
    else
        srv->inflate_wait_head = x;
    srv->inflate_wait_tail = x;
    srv->inflate_waiting++;
}

/* Hands a freed slot to the longest-waiting exchange, if any. */
static void xchg_release_inflate_slot(xchg_t *x)
{
    lc_httpd_t *srv = x->srv;
    if (!x->holds_inflate_slot)
        return;
    x->holds_inflate_slot = false;
    xchg_t *next = srv->inflate_wait_head;
    if (!next) {
        srv->inflating--;
        return;
    }
    srv->inflate_wait_head = next->next_waiting;
    if (!srv->inflate_wait_head)
        srv->inflate_wait_tail = NULL;
    srv->inflate_waiting--;
    next->holds_inflate_slot = true; /* the slot passes on: inflating is unchanged */
    xchg_queue_work(next);
}

static void xchg_start_handler(xchg_t *x)
{
    const route_t *r = x->route;
    if (r->offload) {
        xchg_park_or_queue(x);
        return;
    }
    /* On the loop, one body at a time: no slot needed. */
    if (xchg_decode_body(x) != 0) {
        x->respond(x);
        return;
    }
    xchg_run_on_loop(x, r->work, r->after);
}

/* The credential against the route's scope, before the body is gunzipped or
 * parsed: a caller without the scope costs no decoding. On a refusal the
 * response is written and sent. */
static bool xchg_guard_passes(xchg_t *x)
{
    const route_t *r = x->route;
    lc_status_t st = {0};
    if (!x->srv->guard || x->srv->guard(&x->parser.req, r->scope, &st) == 0)
        return true;
    if (r->deny)
        r->deny(&x->parser.req, &st);
    else
        lc_http_error(&x->parser.req, &st);
    x->respond(x);
    return false;
}

const route_t *lc_httpd__xchg_interim_route(xchg_t *x)
{
    lc_http_req_t *req = &x->parser.req;
    bool path_known = false;
    if (!x->srv || lc_httpd__parser_body_gzipped(&x->parser))
        return NULL;
    const route_t *r = lc_httpd__routes_find(&x->srv->routes, req->path, req->method, &path_known);
    if (!r || !r->interim)
        return NULL;
    lc_status_t st = {0};
    if (x->srv->guard && x->srv->guard(req, r->scope, &st) != 0)
        return NULL;
    return r;
}

/* A gRPC call (by its Content-Type) of a method nobody serves is answered
 * the way every gRPC client expects, HTTP 200 with grpc-status 12
 * (UNIMPLEMENTED), not a 404/405 with JSON, which gRPC clients misread as a
 * transport failure. Returns false for any other request. */
static bool xchg_reply_unrouted_grpc(lc_http_req_t *req)
{
    lc_grpc_kind_t kind = lc_grpc_kind_of(lc_http_header(req, "content-type"));
    if (kind == LC_GRPC_NONE)
        return false;
    lc_status_t st;
    lc_status_set(&st, LC_CODE_UNIMPLEMENTED, "%s %s is not served", req->method, req->path);
    lc_grpc_reply_error(req, kind, &st);
    return true;
}

void lc_httpd__xchg_dispatch(xchg_t *x)
{
    lc_http_req_t *req = &x->parser.req;
    bool path_known = false;
    if (!x->started_ns)
        x->started_ns = uv_hrtime(); /* the whole request came at once */
    x->route = lc_httpd__routes_find(&x->srv->routes, req->path, req->method, &path_known);
    if (x->route) {
        if (xchg_guard_passes(x))
            xchg_start_handler(x);
        return;
    }
    if (!xchg_reply_unrouted_grpc(req)) {
        if (path_known) {
            lc_httpd__routes_allow(&x->srv->routes, req);
            lc_httpd__reply_status(req, 405, "method not allowed");
        } else {
            lc_httpd__reply_status(req, 404, "not found");
        }
    }
    x->respond(x);
}

void lc_http_finish(lc_http_req_t *req)
{
    xchg_t *x = req->_conn;
    if (!x)
        return;
    if (x->in_handler) {
        x->finish_called = true; /* finished before returning PENDING */
        return;
    }
    if (!x->awaiting_finish) {
        LC_LOG_WARN("lc_http_finish on a request that is not pending path=%s", req->path);
        return;
    }
    x->awaiting_finish = false;
    x->respond(x);
}

static bool h2c_upgrade_wanted(const lc_httpd_t *srv, const lc_http_req_t *req);
static void conn_upgrade_h2(conn_t *c);

/* A complete HTTP/1.1 request: stop reading (back-pressure) and route it. */
static void conn_dispatch(conn_t *c)
{
    if (c->state == CONN_IDLE)
        c->x.started_ns = uv_hrtime(); /* the whole request came in one read */
    c->state = CONN_HANDLING;
    c->served = true;
    uv_timer_stop(&c->timer);
    conn_read_stop(c);
    if (h2c_upgrade_wanted(c->srv, &c->x.parser.req)) {
        conn_upgrade_h2(c);
        return;
    }
    lc_httpd__xchg_dispatch(&c->x);
}

/* ================================================================ writing */

/* Whether the client spoke HTTP/1.1 (or later): it can take a chunked body. */
static bool conn_client_http11(const conn_t *c)
{
    const llhttp_t *h = &c->x.parser.llhttp;
    return h->http_major > 1 || (h->http_major == 1 && h->http_minor >= 1);
}

/* Formats the response around its body into head; the body goes at
 * *body_at (the end of head unless the response is chunked). */
static int conn_format_response(conn_t *c, bool keep_alive, size_t *body_at)
{
    lc_http_req_t *req = &c->x.parser.req;
    lc_buf_t *head = &c->x.parser.head;
    if (lc_httpd__chunked(req, conn_client_http11(c)))
        return lc_httpd__format_chunked(req, keep_alive, head, body_at);
    int rc = lc_httpd__format_head(req, keep_alive, head);
    *body_at = head->len;
    return rc;
}

static void conn_send_response(conn_t *c)
{
    lc_http_req_t *req = &c->x.parser.req;
    lc_buf_t *head = &c->x.parser.head;
    bool keep_alive = c->x.parser.keep_alive && !c->close_after_write && !c->srv->closing;
    c->close_after_write = !keep_alive;
    size_t body_at = 0;
    if (conn_format_response(c, keep_alive, &body_at) != 0) {
        req->_n_resp_headers = 0; /* handler headers too big: say so, plainly */
        lc_httpd__reply_status(req, 500, "response headers too large");
        if (conn_format_response(c, keep_alive, &body_at) != 0)
            LC_LOG_ERROR("cannot format a 500 response head");
    }
    /* A chunked body's closing bytes sit in head after body_at. */
    uv_buf_t bufs[3];
    unsigned n = 0;
    bufs[n++] = uv_buf_init((char *)head->data, (unsigned)body_at);
    if (!lc_httpd__bodyless(req) && req->resp_body.len > 0)
        bufs[n++] = uv_buf_init((char *)req->resp_body.data, (unsigned)req->resp_body.len);
    if (head->len > body_at)
        bufs[n++] = uv_buf_init((char *)head->data + body_at, (unsigned)(head->len - body_at));
    lc_httpd__xchg_record_metrics(&c->x);
    c->state = CONN_WRITING;
    conn_arm_timer(c, c->srv->idle_timeout_ms); /* a peer that stops reading is gone */
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, n, conn_on_written) != 0)
        conn_close(c);
}

static void conn_respond(xchg_t *x)
{
    conn_send_response(x->owner);
}

/* Response bytes and request memory may be released only now (libuv owns
 * the buffers until this callback). */
static void conn_on_written(uv_write_t *w, int status)
{
    conn_t *c = LC_CONTAINER_OF(w, conn_t, write_req);
    if (c->state == CONN_CLOSING)
        return; /* canceled by conn_close; the close callbacks free c */
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->close_after_write || c->srv->closing) {
        if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) != 0)
            conn_close(c);
        return;
    }
    lc_httpd__parser_next(&c->x.parser);
    c->x.route = NULL;
    c->x.started_ns = 0;
    c->state = CONN_IDLE;
    conn_arm_timer(c, c->srv->idle_timeout_ms);
    if (c->pending.len > 0)
        conn_ingest_pending(c);
    if (c->state == CONN_IDLE || c->state == CONN_READING)
        conn_read_start(c);
}

static void conn_on_shutdown(uv_shutdown_t *s, int status)
{
    conn_close(LC_CONTAINER_OF(s, conn_t, shutdown_req));
}

static void conn_on_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    switch (c->state) {
    case CONN_IDLE:
    case CONN_WRITING:
        conn_close(c);
        break;
    case CONN_READING:
        conn_reply_parse_error(c, 408, "request not received in time");
        break;
    case CONN_H2:
        conn_h2_on_timer(c);
        break;
    default:
        break;
    }
}

/* ================================================================ lifecycle */

/* A handler owns the request while HANDLING: closing then would pull the
 * connection from under it, so the close waits for the response. */
static void conn_close(conn_t *c)
{
    if (c->state == CONN_CLOSING)
        return;
    if (c->state == CONN_HANDLING) {
        c->close_after_write = true;
        return;
    }
    if (c->state == CONN_H2 && lc_httpd__h2_busy(c->h2) > 0) {
        /* Handlers own their streams' requests: the close waits for the last
         * of them (conn_h2_respond). */
        c->h2_close_wanted = true;
        conn_read_stop(c);
        return;
    }
    c->state = CONN_CLOSING;
    conn_read_stop(c);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_on_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
}

static void conn_on_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->open_handles > 0)
        return;
    lc_httpd_t *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->n_conns--;
    lc_httpd__xchg_fini(&c->x);
    lc_buf_fini(&c->pending);
    if (c->h2)
        lc_httpd__h2_free(c->h2);
    lc_buf_fini(&c->h2_out);
    lc_free(c);
    srv_maybe_trim(srv);
    srv_maybe_finish(srv);
}

/* After a flood of connections has drained, hand the freed heap back to the
 * system: glibc keeps freed small chunks in its arenas otherwise, and RSS
 * stays at the flood's peak. */
static void srv_maybe_trim(lc_httpd_t *srv)
{
    if (srv->n_conns > TRIM_LOW_CONNS || srv->peak_conns < TRIM_AFTER_CONNS)
        return;
    srv->peak_conns = srv->n_conns;
    malloc_trim(0);
}

static conn_t *conn_new(lc_httpd_t *srv)
{
    conn_t *c = lc_xcalloc(1, sizeof(*c));
    c->srv = srv;
    c->state = CONN_IDLE;
    c->tcp.data = c;
    c->timer.data = c;
    lc_httpd__xchg_init(&c->x, srv, &srv->lim, conn_respond, c);
    lc_buf_init(&c->pending, PENDING_MAX_BYTES);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    if (++srv->n_conns > srv->peak_conns)
        srv->peak_conns = srv->n_conns;
    return c;
}

/* ---- connections past --http.max-connections: a clear 503, then close */

static const char refuse_response[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    "Retry-After: 1\r\nConnection: close\r\nContent-Length: 73\r\n\r\n"
    "{\"code\":\"unavailable\",\"message\":\"too many open connections; retry later\"}";

typedef struct refused_s {
    uv_tcp_t tcp;
    uv_write_t w;
} refused_t;

static void refused_on_closed(uv_handle_t *h)
{
    lc_free(h->data);
}

static void refused_on_written(uv_write_t *w, int status)
{
    LC_UNUSED(status);
    refused_t *r = w->data;
    uv_close((uv_handle_t *)&r->tcp, refused_on_closed);
}

/* Accepts (so the peer is not left in the backlog), answers 503, closes. */
static void srv_refuse_connection(lc_httpd_t *srv, uv_stream_t *listener)
{
    refused_t *r = lc_xcalloc(1, sizeof(*r));
    r->tcp.data = r;
    r->w.data = r;
    uv_tcp_init(srv->loop, &r->tcp);
    srv->refused_conns++;
    if ((srv->refused_conns & (srv->refused_conns - 1)) == 0) /* 1, 2, 4, ...: no log flood */
        LC_LOG_WARN("connection refused: limit reached addr=%s max_connections=%zu refused=%llu",
                    srv->address, srv->max_conns, (unsigned long long)srv->refused_conns);
    uv_buf_t b = uv_buf_init((char *)refuse_response, sizeof(refuse_response) - 1);
    if (uv_accept(listener, (uv_stream_t *)&r->tcp) != 0 ||
        uv_write(&r->w, (uv_stream_t *)&r->tcp, &b, 1, refused_on_written) != 0)
        uv_close((uv_handle_t *)&r->tcp, refused_on_closed);
}

static void srv_on_connection(uv_stream_t *listener, int status)
{
    lc_httpd_t *srv = listener->data;
    if (status < 0) {
        LC_LOG_WARN("accept failed addr=%s err=\"%s\"", srv->address, uv_strerror(status));
        return;
    }
    if (srv->n_conns >= srv->max_conns) {
        srv_refuse_connection(srv, listener);
        return;
    }
    conn_t *c = conn_new(srv);
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->open_handles = 2;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    conn_arm_timer(c, srv->idle_timeout_ms);
    conn_read_start(c);
}

static size_t size_or_default(size_t v, size_t def)
{
    return v ? v : def;
}

static void srv_set_h2(lc_httpd_t *srv, const lc_httpd_opts_t *opts)
{
    srv->h2_enabled = !opts->h2_disable;
    srv->h2_settings_timeout_ms = opts->h2_settings_timeout_ms ? opts->h2_settings_timeout_ms
                                                               : DEFAULT_H2_SETTINGS_TIMEOUT_MS;
    srv->h2cfg = (lc_httpd__h2_cfg_t){
        .lim = srv->lim,
        .max_streams = opts->h2_max_streams ? opts->h2_max_streams : DEFAULT_H2_MAX_STREAMS,
        .stream_window = opts->h2_stream_window ? opts->h2_stream_window : DEFAULT_H2_STREAM_WINDOW,
        .connection_window =
            opts->h2_connection_window ? opts->h2_connection_window : DEFAULT_H2_CONNECTION_WINDOW,
        .max_frame_bytes =
            opts->h2_max_frame_bytes ? opts->h2_max_frame_bytes : DEFAULT_H2_MAX_FRAME_BYTES,
        .srv = srv,
    };
}

int lc_httpd_new(uv_loop_t *loop, const lc_httpd_opts_t *opts, lc_httpd_t **out)
{
    *out = NULL;
    if (!opts->address || strlen(opts->address) >= ADDRESS_MAX)
        return LC_EINPUT;
    lc_httpd_t *srv = lc_xcalloc(1, sizeof(*srv));
    int rc = uv_tcp_init(loop, &srv->listener);
    if (rc != 0) {
        lc_free(srv);
        return rc;
    }
    srv->loop = loop;
    srv->listener.data = srv;
    snprintf(srv->address, sizeof(srv->address), "%s", opts->address);
    srv->lim = (lc_httpd__limits_t){
        .max_header_bytes = size_or_default(opts->max_header_bytes, DEFAULT_MAX_HEADER_BYTES),
        .max_body_bytes = size_or_default(opts->max_body_bytes, DEFAULT_MAX_BODY_BYTES),
        .max_decompressed_bytes =
            size_or_default(opts->max_decompressed_bytes, DEFAULT_MAX_DECOMPRESSED_BYTES),
        .max_response_bytes = size_or_default(opts->max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES),
        .arena_cap_bytes = size_or_default(opts->arena_cap_bytes, DEFAULT_ARENA_CAP_BYTES),
    };
    if (srv->lim.max_response_bytes > UINT_MAX)
        srv->lim.max_response_bytes = UINT_MAX; /* one uv_buf_t carries the body */
    srv->idle_timeout_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS;
    srv->read_timeout_ms = opts->read_timeout_ms ? opts->read_timeout_ms : DEFAULT_READ_TIMEOUT_MS;
    srv->max_inflating = opts->max_inflating ? opts->max_inflating : DEFAULT_MAX_INFLATING;
    srv->max_conns = opts->max_connections ? opts->max_connections : DEFAULT_MAX_CONNECTIONS;
    srv_set_h2(srv, opts);
    srv->rbuf = lc_xmalloc(READ_CHUNK_BYTES);
    srv->metrics = opts->metrics;
    srv->unrouted_latency = lc_httpd__route_latency_metric(srv->metrics, "none");
    srv->guard = opts->guard;
    srv->no_offload = opts->no_offload;
    *out = srv;
    return 0;
}

/* "HOST:PORT" with a numeric or "localhost" host, "[V6]:PORT", or ":PORT"
 * (all IPv4 interfaces). */
static int parse_address(const char *address, struct sockaddr_storage *ss)
{
    char host[ADDRESS_MAX];
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address + strlen(address) - 1)
        return LC_EINPUT;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535)
        return LC_EINPUT;
    size_t hlen = (size_t)(colon - address);
    if (hlen >= 2 && address[0] == '[' && address[hlen - 1] == ']') {
        snprintf(host, sizeof(host), "%.*s", (int)(hlen - 2), address + 1);
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss);
    }
    snprintf(host, sizeof(host), "%.*s", (int)hlen, address);
    if (hlen == 0)
        snprintf(host, sizeof(host), "0.0.0.0");
    else if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss);
}

int lc_httpd_listen(lc_httpd_t *srv)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    int rc = parse_address(srv->address, &ss);
    if (rc != 0)
        return LC_EINPUT;
    rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, LISTEN_BACKLOG, srv_on_connection);
    if (rc != 0)
        LC_LOG_ERROR("listen failed addr=%s err=\"%s\"", srv->address, uv_strerror(rc));
    return rc;
}

int lc_httpd_port(const lc_httpd_t *srv)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    int rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
    if (rc != 0)
        return rc;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void srv_free(lc_httpd_t *srv)
{
    lc_httpd__routes_fini(&srv->routes);
    lc_free(srv->rbuf);
    lc_free(srv);
}

static void srv_maybe_finish(lc_httpd_t *srv)
{
    if (!srv->closing || !srv->listener_closed || srv->n_conns > 0)
        return;
    if (srv->close_cb)
        srv->close_cb(srv->close_data);
    srv_free(srv);
}

static void srv_on_listener_closed(uv_handle_t *h)
{
    lc_httpd_t *srv = h->data;
    srv->listener_closed = true;
    srv_maybe_finish(srv);
}

void lc_httpd_close(lc_httpd_t *srv, void (*cb)(void *data), void *data)
{
    if (!srv || srv->closing)
        return;
    srv->closing = true;
    srv->close_cb = cb;
    srv->close_data = data;
    uv_close((uv_handle_t *)&srv->listener, srv_on_listener_closed);
    /* Idle connections go now; the others close after their response, whose
     * Connection: close header tells the client (see conn_send_response). */
    for (conn_t *c = srv->conns; c; c = c->next) {
        if (c->state == CONN_IDLE)
            conn_close(c);
        else if (c->state == CONN_READING)
            conn_shorten_deadline(c, DRAIN_READ_GRACE_MS);
        else if (c->state == CONN_H2)
            conn_h2_drain(c);
    }
}
