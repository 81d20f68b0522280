/*
 * lc/httpd.h — HTTP/1.1 and HTTP/2 cleartext server on libuv + llhttp +
 * nghttp2. HTTP/2 (h2c, by prior knowledge or `Upgrade: h2c`) shares the port;
 * each stream is a request of its own, routed and handled exactly like an
 * HTTP/1.1 one (docs/internals/httpd.md).
 *
 * Features: keep-alive, chunked request bodies, chunked responses with
 * trailers (lc_http_set_trailer), gzip request bodies
 * (Content-Encoding: gzip, decompressed with a cap), header/body caps (431/413),
 * idle and read timeouts, graceful drain (lc_httpd_close stops accepting,
 * finishes in-flight requests, closes idle connections).
 *
 * Threading: the server lives on one uv loop. A route's `work` callback runs on
 * the libuv thread pool when `offload` is set (CPU work: decoding, merging,
 * LMDB reads), otherwise on the loop. `after`, if given, runs on the loop
 * after `work`. Only loop-thread callbacks may return LC_HTTP_PENDING; the
 * handler then calls lc_http_finish() later, on the loop thread.
 *
 * Ownership: everything reachable from lc_http_req_t (strings, headers, body,
 * response bytes) lives in req->arena and is valid until the response has been
 * written; copy what must outlive the request.
 */
#ifndef LC_HTTPD_H
#define LC_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/alloc.h"
#include "lc/err.h"

typedef struct lc_httpd_s lc_httpd_t;
typedef struct lc_metrics_s lc_metrics_t;

typedef struct lc_http_header_s {
    const char *name; /* lower-cased */
    const char *value;
} lc_http_header_t;

typedef struct lc_http_req_s {
    /* request (read-only for handlers) */
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query string; not percent-decoded */
    const char *query;  /* raw text after '?', "" if none */
    const lc_http_header_t *headers;
    size_t n_headers;
    const uint8_t *body; /* de-chunked and, if it was gzip-encoded, gunzipped */
    size_t body_len;
    lc_arena_t *arena; /* request-lifetime memory, capped */
    /* response (filled by handlers) */
    int status;         /* default 200 */
    lc_buf_t resp_body; /* capped by opts.max_response_bytes */
    void *user;         /* handler state carried from work to after */
    /* private */
    void *_conn;
    lc_http_header_t *_resp_headers;
    size_t _n_resp_headers, _cap_resp_headers;
    lc_http_header_t *_trailers; /* lc_http_set_trailer */
    size_t _n_trailers, _cap_trailers;
} lc_http_req_t;

typedef enum { LC_HTTP_DONE = 0, LC_HTTP_PENDING = 1 } lc_http_result_t;

typedef lc_http_result_t (*lc_http_handler_cb)(lc_http_req_t *req, void *data);

/* What a credential must allow before a route's handler runs (lc/auth.h).
 * Every route states one: lc_httpd_route refuses LC_HTTP_SCOPE_UNSET, so a
 * route cannot be added without deciding who may call it. */
typedef enum {
    LC_HTTP_SCOPE_UNSET = 0,
    LC_HTTP_SCOPE_PUBLIC = 1, /* probes, metrics, the UI's static pages: no credential */
    LC_HTTP_SCOPE_READ = 2,   /* reads: a credential with scope=read */
    LC_HTTP_SCOPE_WRITE = 3,  /* anything that changes state: scope=write */
} lc_http_scope_t;

/* "public", "read", "write" ("unset" for UNSET). */
const char *lc_http_scope_name(lc_http_scope_t scope);

/* Checks the request's credential against a route's scope before the body is
 * decoded or the handler runs (opts.guard). Returns 0, or -1 with st set
 * (401 / 403). */
typedef int (*lc_http_guard_fn)(lc_http_req_t *req, lc_http_scope_t scope, lc_status_t *st);
/* Writes a refusal in the route's protocol (e.g. lc_connect_error). */
typedef void (*lc_http_deny_fn)(lc_http_req_t *req, const lc_status_t *st);

/* What a bidirectional route's interim hook (lc_http_route_t.interim) wants. */
typedef enum {
    LC_HTTP_INTERIM_MORE = 0,     /* wait for more body bytes */
    LC_HTTP_INTERIM_REPLY = 1,    /* send the bytes appended to out now, keep the stream open */
    LC_HTTP_INTERIM_COMPLETE = 2, /* the request is whole: run the route's handlers now */
} lc_http_interim_t;
/* req->body / body_len hold the body received so far (read-only); out
 * collects everything sent before the final answer. Loop thread. */
typedef lc_http_interim_t (*lc_http_interim_fn)(const lc_http_req_t *req, void *data,
                                                lc_buf_t *out);

typedef struct lc_http_route_s {
    const char *path;    /* exact match, or a prefix when it ends with '*' */
    const char *methods; /* e.g. "POST" or "GET,POST"; NULL = any (handler checks) */
    lc_http_handler_cb work;
    lc_http_handler_cb after; /* optional, loop thread */
    bool offload;             /* run `work` on the thread pool */
    const char *metric_name;  /* route label in metrics; NULL = path */
    void *data;
    /* Cap on a gzip body's inflated size for this route (e.g. the profile cap
     * of the ingest routes); 0 = the server's. The effective cap is the
     * smallest of this, opts.max_decompressed_bytes and opts.max_body_bytes,
     * enforced while inflating. */
    size_t max_decompressed_bytes;
    lc_http_scope_t scope; /* required: see lc_http_scope_t */
    lc_http_deny_fn deny;  /* how a guard refusal is written; NULL = lc_http_error */
} lc_http_route_t;

typedef struct lc_httpd_opts_s {
    const char *address;           /* "HOST:PORT"; port 0 picks a free port */
    size_t max_header_bytes;       /* default 64 KiB -> 431 */
    size_t max_body_bytes;         /* as sent on the wire, default 256 MiB -> 413 */
    size_t max_decompressed_bytes; /* Content-Encoding: gzip output cap, default 256 MiB -> 413 */
    unsigned max_inflating;        /* offloaded gzip-body requests at once, default 2; more wait */
    size_t max_connections;        /* open connections, default 10000; past it -> 503 + close */
    size_t max_response_bytes;     /* default 512 MiB */
    size_t arena_cap_bytes;        /* per request, default 1 GiB */
    uint64_t idle_timeout_ms;      /* keep-alive idle, default 120 s */
    uint64_t read_timeout_ms;      /* a request must arrive within, default 60 s */
    lc_metrics_t *metrics;         /* optional: request counters and latency histograms */
    /* HTTP/2 cleartext (h2c) on the same port: prior knowledge or Upgrade. */
    bool h2_disable;                 /* HTTP/1.1 only */
    uint32_t h2_max_streams;         /* SETTINGS_MAX_CONCURRENT_STREAMS, default 100 */
    uint32_t h2_stream_window;       /* per-stream receive window, default 1 MiB */
    uint32_t h2_connection_window;   /* per-connection receive window, default 16 MiB */
    uint32_t h2_max_frame_bytes;     /* SETTINGS_MAX_FRAME_SIZE, default 16 KiB */
    uint64_t h2_settings_timeout_ms; /* our SETTINGS must be acknowledged within, default 10 s */
    /* Runs on the loop once a request is routed, before its body is gunzipped
     * or handed to the route: NULL = every scope passes. */
    lc_http_guard_fn guard;
    /* Every route's work runs on the loop thread, offloaded or not: for a
     * server on a loop thread of its own whose clients hold thread-pool
     * threads while they wait for it (ember-querier's shard on the bucket,
     * asked from the fan-out's jobs: on the shared pool it could starve). */
    bool no_offload;
} lc_httpd_opts_t;

int lc_httpd_new(uv_loop_t *loop, const lc_httpd_opts_t *opts, lc_httpd_t **out) LC_MUST_CHECK;
/* Registers a route (copied). Call before lc_httpd_listen. LC_EINPUT for a
 * route without a path, a handler or a scope. */
int lc_httpd_route(lc_httpd_t *srv, const lc_http_route_t *route) LC_MUST_CHECK;
/* Makes the registered route of exactly this path (and methods) bidirectional
 * gRPC (HTTP/2 only). Once the guard has passed, fn is called each time body
 * bytes arrive before the client ends the stream; its REPLY bytes go out at
 * once (response headers 200 application/grpc first), COMPLETE runs the
 * route's work/after on the body so far, whose answer then follows: its body
 * as more messages, its grpc-status (a Trailers-Only one too) in the
 * trailers. Over HTTP/1.1, with a gzip body, or when the client ends the
 * stream first, the route stays unary. A stalled stream ends with its
 * connection's idle timeout. LC_ENOTFOUND without such a route. */
int lc_httpd_route_interim(lc_httpd_t *srv, const char *path, lc_http_interim_fn fn) LC_MUST_CHECK;
/* Appends one line per registered route, in registration order:
 * "<path>\t<methods or *>\t<scope>\n" (a prefix route's path ends in '*').
 * What /debug/routes serves, so tests can walk every route. */
int lc_httpd_routes_text(const lc_httpd_t *srv, lc_buf_t *out) LC_MUST_CHECK;
/* Binds and starts accepting. */
int lc_httpd_listen(lc_httpd_t *srv) LC_MUST_CHECK;
/* The bound port (after listen). */
int lc_httpd_port(const lc_httpd_t *srv);
/* Graceful drain: stop accepting, let in-flight requests finish, close idle
 * connections; cb runs once everything is closed, then srv is freed. */
void lc_httpd_close(lc_httpd_t *srv, void (*cb)(void *data), void *data);

/* ---- request helpers (any thread that owns the request) ---- */
const char *lc_http_header(const lc_http_req_t *req, const char *lname);
/* First value of a query parameter, percent-decoded ('+' = space); NULL if absent. */
const char *lc_http_query(lc_http_req_t *req, const char *name);
/* All values of a repeated parameter; returns the count, *out in the arena. */
size_t lc_http_query_all(lc_http_req_t *req, const char *name, const char ***out);
/* Adds a response header (both strings copied into the arena). */
void lc_http_set_header(lc_http_req_t *req, const char *name, const char *value);
/* Adds a response trailer (both strings copied into the arena), kept like
 * the response headers and sent after the body: as HTTP/2 trailers, or over
 * HTTP/1.1 in the trailer section of a chunked body (a response with
 * trailers is sent chunked; to an HTTP/1.0 client, which cannot take chunks,
 * they are dropped). Native gRPC's grpc-status travels this way. */
void lc_http_set_trailer(lc_http_req_t *req, const char *name, const char *value);
/* Legacy JSON error: status from st (http_status or the code's), body
 * {"code":"...","message":"..."}. Replaces any body written so far. */
void lc_http_error(lc_http_req_t *req, const lc_status_t *st);
/* Sets status, Content-Type and body in one call. */
void lc_http_reply(lc_http_req_t *req, int status, const char *content_type, const void *body,
                   size_t len);
/* Answers with the Prometheus text exposition of every metric in m (the
 * /metrics endpoint of every ember binary); 500 if it passes 64 MiB. */
void lc_http_reply_metrics(lc_http_req_t *req, lc_metrics_t *m);
/* Completes a request whose handler returned LC_HTTP_PENDING (loop thread). */
void lc_http_finish(lc_http_req_t *req);

#endif
