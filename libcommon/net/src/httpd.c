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
#include "lc/log.h"
#include "lc/metrics.h"

#define READ_CHUNK_BYTES (64 * 1024)
#define PENDING_MAX_BYTES (2 * READ_CHUNK_BYTES) /* unparsed pipelined bytes */
#define LISTEN_BACKLOG 511
#define ADDRESS_MAX 256
#define METRIC_LABELS_MAX 512
#define DRAIN_READ_GRACE_MS 5000 /* a half-received request during lc_httpd_close */

#define DEFAULT_MAX_HEADER_BYTES (64u * 1024)
#define DEFAULT_MAX_BODY_BYTES (256u << 20)
#define DEFAULT_MAX_DECOMPRESSED_BYTES (256u << 20)
#define DEFAULT_MAX_RESPONSE_BYTES (512u << 20)
#define DEFAULT_ARENA_CAP_BYTES (1u << 30)
#define DEFAULT_MAX_CONNECTIONS 10000
#define TRIM_AFTER_CONNS 256 /* a drained peak this high is given back (malloc_trim) */
#define TRIM_LOW_CONNS 8
#define DEFAULT_MAX_INFLATING 2 /* of libuv's 4 pool threads: queries keep the others */
#define DEFAULT_IDLE_TIMEOUT_MS 120000
#define DEFAULT_READ_TIMEOUT_MS 60000

static const char continue_response[] = "HTTP/1.1 100 Continue\r\n\r\n";

typedef struct route_s {
    char *path; /* without the trailing '*' of a prefix route */
    size_t path_len;
    bool prefix;
    char *methods; /* NULL = any */
    char *metric_name;
    lc_http_handler_cb work, after;
    bool offload;
    void *data;
    size_t max_inflated;  /* effective gzip output cap (see lc_http_route_t) */
    lc_metric_t *latency; /* NULL without metrics */
} route_t;

typedef enum {
    CONN_IDLE,     /* between requests: idle timer */
    CONN_READING,  /* a request has begun: read deadline */
    CONN_HANDLING, /* a handler owns the request: not reading, no timer */
    CONN_WRITING,  /* the response is being written: write deadline */
    CONN_CLOSING,  /* handles are closing; freed by the last close callback */
} conn_state_t;

typedef struct conn_s conn_t;
struct conn_s {
    uv_tcp_t tcp;            /* tcp.data == this */
    uv_timer_t timer;        /* idle, read or write deadline by state */
    uv_write_t write_req;    /* the response */
    uv_write_t continue_req; /* an interim "100 Continue" */
    uv_shutdown_t shutdown_req;
    uv_work_t work_req;
    lc_httpd_t *srv;
    conn_t *prev, *next; /* srv->conns */
    conn_state_t state;
    int open_handles;
    bool reading;
    bool close_after_write; /* the response in progress ends the connection */
    bool in_handler;        /* a loop-side handler is on the stack */
    bool finish_called;     /* ... and it called lc_http_finish already */
    bool awaiting_finish;   /* a handler returned LC_HTTP_PENDING */
    bool work_failed;       /* set on the pool thread, read after it */
    const route_t *route;
    uint64_t started_ns;
    lc_httpd__parser_t parser;
    lc_buf_t pending; /* bytes after the current request */
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
    route_t *routes;
    size_t n_routes, cap_routes;
    conn_t *conns;
    size_t n_conns;
    atomic_uint inflating; /* gzip bodies being inflated now (any thread) */
    size_t max_conns;
    size_t peak_conns; /* since the last malloc_trim */
    uint64_t refused_conns;
    char *rbuf; /* READ_CHUNK_BYTES, shared by every connection */
    unsigned max_inflating;
    bool closing;
    bool listener_closed;
    void (*close_cb)(void *data);
    void *close_data;
};

static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out);
static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_on_timer(uv_timer_t *t);
static void conn_on_continue_written(uv_write_t *w, int status);
static void conn_on_work(uv_work_t *w);
static void conn_on_work_done(uv_work_t *w, int status);
static void conn_on_written(uv_write_t *w, int status);
static void conn_on_shutdown(uv_shutdown_t *s, int status);
static void conn_on_closed(uv_handle_t *h);
static void conn_close(conn_t *c);
static void conn_send_response(conn_t *c);
static void srv_maybe_finish(lc_httpd_t *srv);
static void srv_maybe_trim(lc_httpd_t *srv);

/* ================================================================ routes */

static bool route_path_matches(const route_t *r, const char *path)
{
    if (r->prefix)
        return strncmp(path, r->path, r->path_len) == 0;
    return strcmp(path, r->path) == 0;
}

/* methods is a comma-separated list such as "GET,POST" (spaces allowed). */
static bool method_listed(const char *methods, const char *method)
{
    if (!methods)
        return true;
    size_t mlen = strlen(method);
    for (const char *s = methods; *s;) {
        while (*s == ' ' || *s == ',')
            s++;
        size_t n = strcspn(s, ", ");
        if (n == mlen && n > 0 && strncmp(s, method, n) == 0)
            return true;
        s += n;
    }
    return false;
}

/* Exact routes win over prefixes, and longer prefixes over shorter ones.
 * *path_known tells a 405 (path served, other method) from a 404. */
static const route_t *srv_find_route(const lc_httpd_t *srv, const char *path, const char *method,
                                     bool *path_known)
{
    const route_t *best = NULL;
    *path_known = false;
    for (size_t i = 0; i < srv->n_routes; i++) {
        const route_t *r = &srv->routes[i];
        if (!route_path_matches(r, path))
            continue;
        *path_known = true;
        if (!method_listed(r->methods, method))
            continue;
        if (!r->prefix)
            return r;
        if (!best || r->path_len > best->path_len)
            best = r;
    }
    return best;
}

/* The Allow header of a 405: the methods of every route serving the path. */
static void srv_set_allow(const lc_httpd_t *srv, lc_http_req_t *req)
{
    lc_buf_t allow;
    lc_buf_init(&allow, 4096);
    for (size_t i = 0; i < srv->n_routes; i++) {
        const route_t *r = &srv->routes[i];
        if (!r->methods || !route_path_matches(r, req->path))
            continue;
        if ((allow.len && lc_buf_puts(&allow, ", ") != 0) || lc_buf_puts(&allow, r->methods) != 0)
            break;
    }
    if (lc_buf_putc(&allow, '\0') == 0)
        lc_http_set_header(req, "Allow", (const char *)allow.data);
    lc_buf_fini(&allow);
}

static lc_metric_t *srv_latency_metric(lc_httpd_t *srv, const char *route_label)
{
    char labels[METRIC_LABELS_MAX];
    if (!srv->metrics)
        return NULL;
    snprintf(labels, sizeof(labels), "route=\"%s\"", route_label);
    return lc_metrics_histogram(srv->metrics, "ember_http_request_duration_seconds",
                                "Time from the first byte of a request to its response.", labels,
                                NULL, 0);
}

/* Route names are chosen by the program, but keep the label text valid anyway. */
static bool label_value_ok(const char *s)
{
    return strpbrk(s, "\"\\\n") == NULL;
}

int lc_httpd_route(lc_httpd_t *srv, const lc_http_route_t *route)
{
    if (!route->path || !route->path[0] || !route->work)
        return LC_EINPUT;
    const char *label = route->metric_name ? route->metric_name : route->path;
    if (!label_value_ok(label))
        return LC_EINPUT;
    srv->routes = lc_xgrow(srv->routes, &srv->cap_routes, srv->n_routes + 1, sizeof(route_t));
    route_t *r = &srv->routes[srv->n_routes++];
    memset(r, 0, sizeof(*r));
    r->path_len = strlen(route->path);
    r->prefix = route->path[r->path_len - 1] == '*';
    if (r->prefix)
        r->path_len--;
    r->path = lc_xstrndup(route->path, r->path_len);
    r->methods = route->methods ? lc_xstrdup(route->methods) : NULL;
    r->metric_name = lc_xstrdup(label);
    r->work = route->work;
    r->after = route->after;
    r->offload = route->offload;
    r->max_inflated = srv->lim.max_decompressed_bytes < srv->lim.max_body_bytes
                          ? srv->lim.max_decompressed_bytes
                          : srv->lim.max_body_bytes;
    if (route->max_decompressed_bytes && route->max_decompressed_bytes < r->max_inflated)
        r->max_inflated = route->max_decompressed_bytes;
    r->data = route->data;
    r->latency = srv_latency_metric(srv, r->metric_name);
    return 0;
}

/* ================================================================ metrics */

static void conn_record_metrics(conn_t *c)
{
    lc_httpd_t *srv = c->srv;
    const lc_http_req_t *req = &c->parser.req;
    char labels[METRIC_LABELS_MAX];
    if (!srv->metrics)
        return;
    const char *route = c->route ? c->route->metric_name : "none";
    snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\",status=\"%d\"", route, req->method,
             req->status);
    lc_metric_t *count = lc_metrics_counter(srv->metrics, "ember_http_requests_total",
                                            "HTTP requests by route, method and status.", labels);
    if (count)
        lc_metric_add(count, 1);
    lc_metric_t *latency = c->route ? c->route->latency : srv->unrouted_latency;
    if (latency)
        lc_metric_observe(latency, (double)(uv_hrtime() - c->started_ns) / 1e9);
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
    c->parser.want_continue = false;
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
    if (c->state == CONN_IDLE && c->parser.in_message) {
        c->state = CONN_READING;
        c->started_ns = uv_hrtime();
        conn_arm_timer(c, c->srv->read_timeout_ms);
    }
    if (c->parser.want_continue)
        conn_send_continue(c);
}

/* A request the parser refused: answer with its status and close. */
static void conn_reply_parse_error(conn_t *c, int status, const char *msg)
{
    conn_read_stop(c);
    if (c->state == CONN_IDLE)
        c->started_ns = uv_hrtime();
    c->close_after_write = true;
    lc_httpd__reply_status(&c->parser.req, status, msg);
    conn_send_response(c);
}

static void conn_dispatch(conn_t *c);

/* Feeds bytes to the parser; what follows a complete request waits in
 * c->pending until that request's response has been written. */
static void conn_ingest(conn_t *c, const char *data, size_t len)
{
    size_t used = 0;
    lc_httpd__parse_t r = lc_httpd__parser_feed(&c->parser, data, len, &used);
    if (r == LC_HTTPD__MORE) {
        conn_on_partial(c);
        return;
    }
    if (r == LC_HTTPD__ERROR) {
        conn_reply_parse_error(c, c->parser.error_status, c->parser.error_msg);
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
    if (c->state != CONN_IDLE && c->state != CONN_READING)
        return;
    conn_ingest(c, buf->base, (size_t)nread);
}

/* ================================================================ handling */

/* Runs a loop-side callback, then `next` (if any) or the response. A callback
 * returning LC_HTTP_PENDING ends the chain: lc_http_finish sends the reply. */
static void conn_run_on_loop(conn_t *c, lc_http_handler_cb cb, lc_http_handler_cb next)
{
    c->in_handler = true;
    c->finish_called = false;
    lc_http_result_t r = cb(&c->parser.req, c->route->data);
    c->in_handler = false;
    if (r == LC_HTTP_PENDING) {
        if (c->finish_called)
            conn_send_response(c);
        else
            c->awaiting_finish = true;
        return;
    }
    if (next)
        conn_run_on_loop(c, next, NULL);
    else
        conn_send_response(c);
}

/* Gunzips the body under the route's cap. At most srv->max_inflating bodies
 * inflate at once: the rest are refused at once (503 + Retry-After) rather
 * than queued, so compressed bombs cannot hold every pool thread while
 * queries wait behind them. */
static int conn_decode_body(conn_t *c)
{
    lc_httpd_t *srv = c->srv;
    if (!lc_httpd__parser_body_gzipped(&c->parser))
        return 0;
    if (atomic_fetch_add(&srv->inflating, 1) >= srv->max_inflating) {
        atomic_fetch_sub(&srv->inflating, 1);
        lc_httpd__reply_status(&c->parser.req, 503,
                               "too many compressed request bodies are being inflated; retry");
        lc_http_set_header(&c->parser.req, "Retry-After", "1");
        return -1;
    }
    int rc = lc_httpd__parser_decode_body(&c->parser, c->route->max_inflated);
    atomic_fetch_sub(&srv->inflating, 1);
    return rc;
}

static void conn_start_handler(conn_t *c)
{
    const route_t *r = c->route;
    if (r->offload) {
        c->work_req.data = c;
        if (uv_queue_work(c->srv->loop, &c->work_req, conn_on_work, conn_on_work_done) != 0) {
            lc_httpd__reply_status(&c->parser.req, 503, "cannot schedule the request");
            conn_send_response(c);
        }
        return;
    }
    if (conn_decode_body(c) != 0) {
        conn_send_response(c);
        return;
    }
    conn_run_on_loop(c, r->work, r->after);
}

/* Thread pool: the body is gunzipped here too, off the loop. */
static void conn_on_work(uv_work_t *w)
{
    conn_t *c = w->data;
    c->work_failed = conn_decode_body(c) != 0;
    if (c->work_failed)
        return;
    if (c->route->work(&c->parser.req, c->route->data) == LC_HTTP_PENDING) {
        /* Only the loop can finish a request later: a pool callback cannot pend. */
        lc_httpd__reply_status(&c->parser.req, 500, "handler returned PENDING off the loop");
        c->work_failed = true;
    }
}

static void conn_on_work_done(uv_work_t *w, int status)
{
    conn_t *c = w->data;
    if (status != 0) {
        lc_httpd__reply_status(&c->parser.req, 503, "request canceled");
        conn_send_response(c);
    } else if (c->work_failed || !c->route->after) {
        conn_send_response(c);
    } else {
        conn_run_on_loop(c, c->route->after, NULL);
    }
}

/* A complete request: stop reading (back-pressure) and route it. */
static void conn_dispatch(conn_t *c)
{
    lc_http_req_t *req = &c->parser.req;
    bool path_known = false;
    if (c->state == CONN_IDLE)
        c->started_ns = uv_hrtime(); /* the whole request came in one read */
    c->state = CONN_HANDLING;
    uv_timer_stop(&c->timer);
    conn_read_stop(c);
    c->route = srv_find_route(c->srv, req->path, req->method, &path_known);
    if (c->route) {
        conn_start_handler(c);
        return;
    }
    if (path_known) {
        srv_set_allow(c->srv, req);
        lc_httpd__reply_status(req, 405, "method not allowed");
    } else {
        lc_httpd__reply_status(req, 404, "not found");
    }
    conn_send_response(c);
}

void lc_http_finish(lc_http_req_t *req)
{
    conn_t *c = req->_conn;
    if (!c)
        return;
    if (c->in_handler) {
        c->finish_called = true; /* finished before returning PENDING */
        return;
    }
    if (!c->awaiting_finish) {
        LC_LOG_WARN("lc_http_finish on a request that is not pending path=%s", req->path);
        return;
    }
    c->awaiting_finish = false;
    conn_send_response(c);
}

/* ================================================================ writing */

static void conn_send_response(conn_t *c)
{
    lc_http_req_t *req = &c->parser.req;
    bool keep_alive = c->parser.keep_alive && !c->close_after_write && !c->srv->closing;
    c->close_after_write = !keep_alive;
    if (lc_httpd__format_head(req, keep_alive, &c->parser.head) != 0) {
        req->_n_resp_headers = 0; /* handler headers too big: say so, plainly */
        lc_httpd__reply_status(req, 500, "response headers too large");
        if (lc_httpd__format_head(req, keep_alive, &c->parser.head) != 0)
            LC_LOG_ERROR("cannot format a 500 response head");
    }
    uv_buf_t bufs[2];
    unsigned n = 0;
    bufs[n++] = uv_buf_init((char *)c->parser.head.data, (unsigned)c->parser.head.len);
    if (!lc_httpd__bodyless(req) && req->resp_body.len > 0)
        bufs[n++] = uv_buf_init((char *)req->resp_body.data, (unsigned)req->resp_body.len);
    conn_record_metrics(c);
    c->state = CONN_WRITING;
    conn_arm_timer(c, c->srv->idle_timeout_ms); /* a peer that stops reading is gone */
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, n, conn_on_written) != 0)
        conn_close(c);
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
    lc_httpd__parser_next(&c->parser);
    c->route = NULL;
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
    lc_httpd__parser_fini(&c->parser);
    lc_buf_fini(&c->pending);
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
    lc_httpd__parser_init(&c->parser, &srv->lim);
    c->parser.req._conn = c;
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
    srv->rbuf = lc_xmalloc(READ_CHUNK_BYTES);
    srv->metrics = opts->metrics;
    srv->unrouted_latency = srv_latency_metric(srv, "none");
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
    for (size_t i = 0; i < srv->n_routes; i++) {
        lc_free(srv->routes[i].path);
        lc_free(srv->routes[i].methods);
        lc_free(srv->routes[i].metric_name);
    }
    lc_free(srv->routes);
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
    }
}
