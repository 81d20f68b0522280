/*
 * httpd_int.h — internals shared by httpd.c (sockets, routing, drain),
 * httpd_parse.c (llhttp -> lc_http_req_t assembly) and httpd_req.c (request
 * helpers, response head). The request parser knows nothing about sockets, so
 * the fuzz target drives it directly (tests/fuzz/fuzz_http.c).
 *
 * Lifetime: strings and headers of p->req live in p->arena; bodies and
 * response bytes live in the parser's buffers. All of it stays valid until
 * lc_httpd__parser_next() starts the next request.
 */
#ifndef LC_HTTPD_INT_H
#define LC_HTTPD_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <llhttp.h>

#include "lc/httpd.h"
#include "lc/metrics.h"

#define LC_HTTPD__MAX_RESP_HEAD (256 * 1024) /* status line + response headers */

typedef struct lc_httpd__limits_s {
    size_t max_header_bytes;
    size_t max_body_bytes;
    size_t max_decompressed_bytes;
    size_t max_response_bytes;
    size_t arena_cap_bytes;
} lc_httpd__limits_t;

typedef enum {
    LC_HTTPD__MORE,    /* every byte was consumed; the request is not complete */
    LC_HTTPD__REQUEST, /* a request is complete; the parser is paused after it */
    LC_HTTPD__ERROR,   /* unrecoverable: answer p->error_status and close */
} lc_httpd__parse_t;

typedef struct lc_httpd__parser_s {
    llhttp_t llhttp; /* llhttp.data == this parser */
    lc_httpd__limits_t lim;
    lc_arena_t *arena;         /* request strings; reset per request */
    lc_http_req_t req;         /* the request being assembled or handled */
    lc_buf_t scratch;          /* url / header name / value being pieced together */
    char *field;               /* completed header name awaiting its value */
    lc_http_header_t *headers; /* heap array, reused between requests */
    size_t n_headers, cap_headers;
    lc_buf_t body;       /* de-chunked body as received */
    lc_buf_t plain;      /* gunzipped body when Content-Encoding: gzip */
    lc_buf_t head;       /* serialized response head */
    size_t header_bytes; /* request line + headers so far, for 431 */
    size_t ext_bytes;    /* chunk extensions, counted with the body for 413 */
    int error_status;    /* 400 / 413 / 415 / 431 on LC_HTTPD__ERROR */
    const char *error_msg;
    bool in_message; /* a request has begun (first byte seen) */
    bool headers_done;
    bool gzip_body;
    bool want_continue; /* Expect: 100-continue and no answer yet */
    bool keep_alive;    /* valid once the request is complete */
} lc_httpd__parser_t;

void lc_httpd__parser_init(lc_httpd__parser_t *p, const lc_httpd__limits_t *lim);
void lc_httpd__parser_fini(lc_httpd__parser_t *p);
/* Parses data; *used is how much was consumed (less than len only after a
 * complete request: the rest belongs to the next, pipelined, request). */
lc_httpd__parse_t lc_httpd__parser_feed(lc_httpd__parser_t *p, const char *data, size_t len,
                                        size_t *used);
/* True when the body must be gunzipped before the handler sees it. */
bool lc_httpd__parser_body_gzipped(const lc_httpd__parser_t *p);
/* Gunzips a gzip body into place, never past max_out bytes (call on the
 * thread that runs the handler). Returns 0, or fills an error response
 * (413 / 400) and returns -1. */
int lc_httpd__parser_decode_body(lc_httpd__parser_t *p, size_t max_out);
/* Forgets the finished request and resumes parsing for the next one. */
void lc_httpd__parser_next(lc_httpd__parser_t *p);

/* ---- building a request from HTTP/2 fields (httpd_h2.c); each returns 0, or
 * -1 with error_status/error_msg set (the request is then answered with it). */
/* A regular header (name already lower-case in HTTP/2); counted against
 * max_header_bytes like an HTTP/1.1 header line; trailers are counted only. */
int lc_httpd__parser_add_header(lc_httpd__parser_t *p, const char *name, size_t nlen,
                                const char *value, size_t vlen);
/* :method and :path (the query string is split off). */
int lc_httpd__parser_set_start(lc_httpd__parser_t *p, const char *method, size_t mlen,
                               const char *target, size_t tlen);
/* End of the header block: the same checks as on_headers_complete (413 on a
 * declared length past the cap, Content-Encoding). content_length < 0: none. */
int lc_httpd__parser_end_headers(lc_httpd__parser_t *p, int64_t content_length);
/* A piece of the body, under max_body_bytes (413). */
int lc_httpd__parser_add_body(lc_httpd__parser_t *p, const uint8_t *data, size_t len);
/* The body is complete: req.body points at it. */
void lc_httpd__parser_end_body(lc_httpd__parser_t *p);

/* ---- one request/response exchange (init/fini in httpd_xchg.c, the rest in
 * httpd.c): an HTTP/1.1 connection owns one, each HTTP/2 stream one.
 * req._conn points at it. dispatch routes the complete request and runs its
 * handlers (loop or pool); when the response is ready, `respond` is called on
 * the loop thread. */
typedef struct lc_httpd__route_s lc_httpd__route_t;
typedef struct lc_httpd__xchg_s lc_httpd__xchg_t;
struct lc_httpd__xchg_s {
    lc_httpd_t *srv;
    lc_httpd__parser_t parser;
    const lc_httpd__route_t *route;
    uv_work_t work_req;
    uint64_t started_ns;
    void (*respond)(lc_httpd__xchg_t *x);
    void *owner;                    /* the connection or stream */
    bool in_handler;                /* a loop-side handler is on the stack */
    bool finish_called;             /* ... and it called lc_http_finish already */
    bool awaiting_finish;           /* a handler returned LC_HTTP_PENDING */
    bool work_failed;               /* set on the pool thread, read after it */
    bool holds_inflate_slot;        /* an offloaded gzip body (loop only) */
    lc_httpd__xchg_t *next_waiting; /* parked for an inflate slot (loop only) */
};

/* srv may be NULL (the fuzz targets): no routes, no metrics. */
void lc_httpd__xchg_init(lc_httpd__xchg_t *x, lc_httpd_t *srv, const lc_httpd__limits_t *lim,
                         void (*respond)(lc_httpd__xchg_t *), void *owner);
void lc_httpd__xchg_fini(lc_httpd__xchg_t *x);
/* Routes x->parser.req and runs its handlers; x->respond follows (maybe at once). */
void lc_httpd__xchg_dispatch(lc_httpd__xchg_t *x);
/* The route of x's request (headers complete) when it has an interim hook
 * (a bidirectional route) and the guard passes; NULL otherwise, and the
 * request then goes the unary way (where a guard refusal is answered). */
const lc_httpd__route_t *lc_httpd__xchg_interim_route(lc_httpd__xchg_t *x);
/* Counts the response in the request metrics (call when it is handed over). */
void lc_httpd__xchg_record_metrics(lc_httpd__xchg_t *x);

/* ---- the route table (httpd_routes.c) of a server: what lc_httpd_route
 * registered, searched for each request. */
#define LC_HTTPD__METRIC_LABELS_MAX 512
struct lc_httpd__route_s {
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
    lc_http_scope_t scope;
    lc_http_deny_fn deny;
    lc_http_interim_fn interim; /* NULL: unary */
};

typedef struct lc_httpd__routes_s {
    lc_httpd__route_t *v;
    size_t n, cap;
} lc_httpd__routes_t;

/* Adds a route (LC_EINPUT without path, handler or scope, or with a label
 * that is not valid metric text); max_inflated is the server's gzip cap. */
int lc_httpd__routes_add(lc_httpd__routes_t *t, const lc_http_route_t *route, size_t max_inflated,
                         lc_metrics_t *metrics) LC_MUST_CHECK;
/* The route of a request, or NULL; *path_known tells a 405 from a 404. */
const lc_httpd__route_t *lc_httpd__routes_find(const lc_httpd__routes_t *t, const char *path,
                                               const char *method, bool *path_known);
/* Sets the Allow header of a 405: the methods of every route serving the path. */
void lc_httpd__routes_allow(const lc_httpd__routes_t *t, lc_http_req_t *req);
/* One line per route: path, methods, scope (tab-separated). */
int lc_httpd__routes_text(const lc_httpd__routes_t *t, lc_buf_t *out) LC_MUST_CHECK;
/* The request-latency histogram of a route label; NULL without metrics. */
lc_metric_t *lc_httpd__route_latency_metric(lc_metrics_t *metrics, const char *route_label);
void lc_httpd__routes_fini(lc_httpd__routes_t *t);

/* ---- HTTP/2 (httpd_h2.c): an nghttp2 server session with no sockets. Bytes
 * in go to lc_httpd__h2_recv; bytes out come from lc_httpd__h2_pull. A
 * complete request is handed to cfg.on_request with a ready exchange; the
 * owner answers with lc_httpd__h2_respond (from x->respond). */
#define LC_HTTPD__H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define LC_HTTPD__H2_PREFACE_LEN 24
#define LC_HTTPD__H2_NO_ERROR 0x0
#define LC_HTTPD__H2_SETTINGS_TIMEOUT 0x4

typedef struct lc_httpd__h2_s lc_httpd__h2_t;
typedef struct lc_httpd__h2_cfg_s {
    lc_httpd__limits_t lim;
    uint32_t max_streams;       /* SETTINGS_MAX_CONCURRENT_STREAMS */
    uint32_t stream_window;     /* SETTINGS_INITIAL_WINDOW_SIZE */
    uint32_t connection_window; /* the connection's receive window */
    uint32_t max_frame_bytes;   /* SETTINGS_MAX_FRAME_SIZE */
    lc_httpd_t *srv;            /* for the exchanges (NULL in the fuzz target) */
    void (*on_request)(void *user, lc_httpd__xchg_t *x);
    void (*respond)(lc_httpd__xchg_t *x); /* x->respond of every stream */
    /* A response is handed to the session (NULL: nothing to do); the server
     * counts it in its metrics. */
    void (*answered)(lc_httpd__xchg_t *x);
    /* The interim route of a request whose body has not ended
     * (lc_httpd__xchg_interim_route; NULL: none is looked up), a callback so
     * the session does not reach back into httpd.c. */
    const lc_httpd__route_t *(*interim_route)(lc_httpd__xchg_t *x);
    void *user;
} lc_httpd__h2_cfg_t;

int lc_httpd__h2_new(const lc_httpd__h2_cfg_t *cfg, lc_httpd__h2_t **out) LC_MUST_CHECK;
/* Frees the session and every stream; no handler may be running (busy == 0). */
void lc_httpd__h2_free(lc_httpd__h2_t *h2);
/* Feeds received bytes; -1 = the connection must close (after a final pull). */
int lc_httpd__h2_recv(lc_httpd__h2_t *h2, const uint8_t *data, size_t len) LC_MUST_CHECK;
/* HTTP/1.1 `Upgrade: h2c`: settings is the decoded HTTP2-Settings payload;
 * the complete request in *h1 moves into stream 1 (h1 is left empty and must
 * be re-initialised) and is handed to on_request. */
int lc_httpd__h2_upgrade(lc_httpd__h2_t *h2, const uint8_t *settings, size_t len,
                         lc_httpd__parser_t *h1) LC_MUST_CHECK;
/* Appends up to max bytes to send to out; returns how many (0: nothing now). */
size_t lc_httpd__h2_pull(lc_httpd__h2_t *h2, lc_buf_t *out, size_t max);
/* The response in x is complete: send it (or drop it if the stream is gone).
 * Returns cfg.user, the owner of the session, which must then pull. */
void *lc_httpd__h2_respond(lc_httpd__xchg_t *x);
/* Handlers running now (the connection may not close while > 0). */
size_t lc_httpd__h2_busy(const lc_httpd__h2_t *h2);
/* False once the session is over (GOAWAY both ways or a fatal error) and
 * everything has been pulled. */
bool lc_httpd__h2_alive(const lc_httpd__h2_t *h2);
/* Graceful GOAWAY (drain): streams already begun finish, no new ones. */
void lc_httpd__h2_shutdown(lc_httpd__h2_t *h2);
/* Ends the session now with GOAWAY(code) (timeouts). */
void lc_httpd__h2_terminate(lc_httpd__h2_t *h2, uint32_t code);
bool lc_httpd__h2_settings_acked(const lc_httpd__h2_t *h2);
/* Open streams, and a counter that moves whenever a request or response
 * makes progress (HEADERS/DATA in or out): the idle/stall timer reads both. */
size_t lc_httpd__h2_open_streams(const lc_httpd__h2_t *h2);
uint64_t lc_httpd__h2_progress(const lc_httpd__h2_t *h2);
/* Base64url (HTTP2-Settings) -> bytes; -1 if malformed or past max. */
int lc_httpd__b64url_decode(const char *s, uint8_t *out, size_t max, size_t *len);

/* httpd_req.c: resets the response part of req (status 200, no headers/body). */
void lc_httpd__resp_reset(lc_http_req_t *req, size_t max_response_bytes);
/* Replaces the response with a JSON error for an HTTP status (legacy shape). */
void lc_httpd__reply_status(lc_http_req_t *req, int status, const char *msg);
/* Serializes the status line and headers into head (reset first), with
 * Content-Length; the body follows as it is. */
int lc_httpd__format_head(const lc_http_req_t *req, bool keep_alive, lc_buf_t *head) LC_MUST_CHECK;
/* True when an HTTP/1.1 response goes out chunked: only to carry its
 * trailers (native gRPC's grpc-status), and only to an HTTP/1.1 client (an
 * HTTP/1.0 one cannot take chunks: its trailers are dropped). */
bool lc_httpd__chunked(const lc_http_req_t *req, bool client_http11);
/* A chunked response without its body bytes, in out (reset first): the
 * status line, headers with Transfer-Encoding: chunked and the body's chunk
 * size line; then, from *body_at on, what follows the body: the end of its
 * chunk, the last chunk and the trailer section. The body goes at *body_at. */
int lc_httpd__format_chunked(const lc_http_req_t *req, bool keep_alive, lc_buf_t *out,
                             size_t *body_at) LC_MUST_CHECK;
/* True if the response must not carry a body (HEAD requests, 1xx/204/304). */
bool lc_httpd__bodyless(const lc_http_req_t *req);

#endif
