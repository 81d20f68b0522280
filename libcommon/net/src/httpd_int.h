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

/* httpd_req.c: resets the response part of req (status 200, no headers/body). */
void lc_httpd__resp_reset(lc_http_req_t *req, size_t max_response_bytes);
/* Replaces the response with a JSON error for an HTTP status (legacy shape). */
void lc_httpd__reply_status(lc_http_req_t *req, int status, const char *msg);
/* Serializes the status line and headers into head (reset first). */
int lc_httpd__format_head(const lc_http_req_t *req, bool keep_alive, lc_buf_t *head) LC_MUST_CHECK;
/* True if the response must not carry a body (HEAD requests, 1xx/204/304). */
bool lc_httpd__bodyless(const lc_http_req_t *req);

#endif
