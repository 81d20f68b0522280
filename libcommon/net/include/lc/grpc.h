/*
 * lc/grpc.h — gRPC and gRPC-Web unary framing (parca.md §4.1), the wire
 * layer under lc/connect.h: lc_connect_decode / lc_connect_reply /
 * lc_connect_error pick Connect or gRPC by the request's Content-Type, so
 * every route registered through lc/connect.h answers all of them.
 *
 * Wire: a body is a sequence of frames, each a flag byte (0x01 compressed,
 * 0x80 trailers) and a 4-byte big-endian length. gRPC-Web ends its response
 * with a trailer frame holding "grpc-status" and "grpc-message" as HTTP/1
 * header lines; -text bodies are base64 of the same bytes. Native gRPC
 * (application/grpc) sends them as HTTP trailers (lc_http_set_trailer): HTTP/2
 * trailers, or over HTTP/1.1 the trailer section of a chunked body; its
 * errors are Trailers-Only (grpc-status in the headers, no body).
 *
 * The framing functions are pure (no server), exported for connect.c, the
 * unit tests and the fuzz target; the reply functions write onto a request
 * (connect.c's replies, and httpd's answer to a gRPC call of a path nobody
 * serves). Threading: none; memory in the caller's arena or buffer, or the
 * request's.
 */
#ifndef LC_GRPC_H
#define LC_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/httpd.h"

typedef enum {
    LC_GRPC_NONE = 0,     /* not a gRPC content type */
    LC_GRPC_WEB = 1,      /* application/grpc-web[+proto] */
    LC_GRPC_WEB_TEXT = 2, /* application/grpc-web-text[+proto]: base64 */
    LC_GRPC_NATIVE = 3,   /* application/grpc[+proto] */
} lc_grpc_kind_t;

#define LC_GRPC_FRAME_HEADER 5
#define LC_GRPC_FLAG_COMPRESSED 0x01
#define LC_GRPC_FLAG_TRAILERS 0x80
/* A request message's inflated size when it arrives gzip-compressed. */
#define LC_GRPC_MAX_INFLATED ((size_t)256 << 20)
/* grpc-timeout: at most 8 digits and a unit (the gRPC HTTP/2 spec). */
#define LC_GRPC_TIMEOUT_MAX_DIGITS 8

/* The kind of a Content-Type (media type case-insensitive, parameters
 * ignored). Only the proto codec is served: "+json" and other codecs are
 * LC_GRPC_NONE, so they get the 415 of an unknown content type. */
lc_grpc_kind_t lc_grpc_kind_of(const char *content_type);
/* The Content-Type a reply of kind carries. */
const char *lc_grpc_content_type(lc_grpc_kind_t kind);

/* Decodes standard base64 (with '=' padding; concatenated padded chunks, as
 * streaming gRPC-Web-text clients send, are accepted) into the arena.
 * Returns 0, or -1 with st invalid_argument. */
int lc_grpc_base64_decode(const uint8_t *in, size_t len, lc_arena_t *a, uint8_t **out,
                          size_t *out_len, lc_status_t *st) LC_MUST_CHECK;

/* The one message of a unary request body: base64-decoded first for
 * LC_GRPC_WEB_TEXT; exactly one data frame whose length fits the body; a
 * compressed frame inflated (at most LC_GRPC_MAX_INFLATED) when encoding
 * (grpc-encoding, NULL = identity) is gzip, else unimplemented. *msg may point
 * into body or the arena. Returns 0, or -1 with st (invalid_argument for a
 * malformed body). */
int lc_grpc_unwrap_request(lc_grpc_kind_t kind, const uint8_t *body, size_t len,
                           const char *encoding, lc_arena_t *a, const uint8_t **msg,
                           size_t *msg_len, lc_status_t *st) LC_MUST_CHECK;

/* Appends one frame (flag byte, big-endian length, data). */
int lc_grpc_append_frame(lc_buf_t *out, uint8_t flags, const uint8_t *data,
                         size_t len) LC_MUST_CHECK;
/* The grpc-message value of msg: percent-encoded as the spec asks (bytes
 * outside 0x20-0x7e, and '%'), appended to out. */
int lc_grpc_percent_encode(const char *msg, lc_buf_t *out) LC_MUST_CHECK;
/* Appends the gRPC-Web trailer frame for st ("grpc-status: N" and, when st
 * has a message, "grpc-message: ..."). */
int lc_grpc_append_trailers(lc_buf_t *out, const lc_status_t *st) LC_MUST_CHECK;

/* Parses a grpc-timeout value ("1-8 digits" and one of H M S m u n) into
 * milliseconds, rounded up, at least 1. Returns 0, or -1 with st. */
int lc_grpc_parse_timeout(const char *v, uint64_t *ms, lc_status_t *st) LC_MUST_CHECK;

/* ---- replies (on the thread that owns req) ---- */

/* Ends a gRPC-Web reply: the frames so far, then the trailer frame for st,
 * as an HTTP 200 body (base64 of the whole for LC_GRPC_WEB_TEXT). Returns 0,
 * or an lc_buf error when frames passed its cap (nothing is written then). */
int lc_grpc_web_reply(lc_http_req_t *req, lc_grpc_kind_t kind, lc_buf_t *frames,
                      const lc_status_t *st) LC_MUST_CHECK;
/* A gRPC error: HTTP 200, st's code as grpc-status (an OK code is sent as
 * UNKNOWN) and its message percent-encoded as grpc-message: the only
 * (trailer) frame of a gRPC-Web body, or headers of an empty Trailers-Only
 * answer for native gRPC. Replaces any reply written so far. */
void lc_grpc_reply_error(lc_http_req_t *req, lc_grpc_kind_t kind, const lc_status_t *st);

#endif
