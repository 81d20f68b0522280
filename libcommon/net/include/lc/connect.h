/*
 * lc/connect.h — Connect unary protocol over lc_httpd (pyroscope-api.md §6),
 * and gRPC / gRPC-Web unary on the same routes (lc/grpc.h): the request's
 * Content-Type picks the protocol in lc_connect_decode, and the reply and
 * error functions follow it, so every handler written against this header
 * answers Connect, gRPC-Web (binary and text) and native gRPC alike.
 *
 * Codecs application/proto and application/json (via lc/pbjson.h); gzip
 * request bodies (handled by httpd) and gzip responses when accepted; errors as
 * Connect JSON with the HTTP status of the code table; 415 with Accept-Post for
 * unknown content types; 405 with Allow: POST for other methods; a
 * Connect-Protocol-Version other than 1 is rejected; Connect-Timeout-Ms sets a
 * deadline. Threading: the helpers run on whichever thread owns the request.
 */
#ifndef LC_CONNECT_H
#define LC_CONNECT_H

#include <protobuf-c/protobuf-c.h>

#include "lc/httpd.h"

typedef enum {
    LC_CONNECT_PROTO = 0,
    LC_CONNECT_JSON = 1,
    LC_CONNECT_GRPC_WEB = 2,      /* protobuf in gRPC-Web frames */
    LC_CONNECT_GRPC_WEB_TEXT = 3, /* the same, base64 */
    LC_CONNECT_GRPC = 4,          /* native gRPC (status in HTTP trailers) */
} lc_connect_codec_t;

/* Checks method, content type and protocol version, then decodes the body into
 * a message allocated in req->arena. On failure fills st (code + message) and
 * the HTTP-level details (405/415 headers are set on req). */
int lc_connect_decode(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                      ProtobufCMessage **out, lc_connect_codec_t *codec,
                      lc_status_t *st) LC_MUST_CHECK;
/* Writes a success response in the request's codec (gzip if accepted). */
void lc_connect_reply(lc_http_req_t *req, lc_connect_codec_t codec, const ProtobufCMessage *msg);
/* Writes a success response of type desc whose protobuf encoding is already
 * at hand (e.g. a merged pprof built as bytes), so it is not decoded and
 * re-encoded: the proto codec sends the bytes as they are (gzip if accepted);
 * the JSON codec decodes them into req->arena and writes their JSON. */
void lc_connect_reply_raw(lc_http_req_t *req, lc_connect_codec_t codec,
                          const ProtobufCMessageDescriptor *desc, const uint8_t *proto_bytes,
                          size_t len);
/* Writes a Connect error: JSON {"code","message"} with the mapped HTTP status;
 * for a gRPC request (by its Content-Type) HTTP 200 with grpc-status and
 * grpc-message: a trailer frame for gRPC-Web, Trailers-Only headers for
 * native gRPC. */
void lc_connect_error(lc_http_req_t *req, const lc_status_t *st);

/* A unary method: decode -> fn -> reply/error, run on the thread pool.
 * fn returns 0 and sets *out (arena-allocated) or returns -1 with st filled. */
typedef int (*lc_connect_unary_fn)(lc_http_req_t *req, const ProtobufCMessage *in,
                                   ProtobufCMessage **out, lc_status_t *st, void *data);

/* Registers `/<package>.<Service>/<Method>` (path given whole), callable
 * with a credential of the given scope (lc/httpd.h).
 * @note The (in, fn, data) triple is kept for the life of the process. */
int lc_connect_register(lc_httpd_t *srv, const char *path, lc_http_scope_t scope,
                        const ProtobufCMessageDescriptor *in, lc_connect_unary_fn fn,
                        void *data) LC_MUST_CHECK;

/* ---- the protocol decisions, exposed for handlers and tests ---- */

/* Whether the request's Connect-Timeout-Ms has passed since started_ns
 * (uv_hrtime); then st is deadline_exceeded. For routes that run the
 * decode -> handler -> reply steps themselves (the query front end). */
bool lc_connect_deadline_passed(const lc_http_req_t *req, uint64_t started_ns, lc_status_t *st);

/* Maximum digits of Connect-Timeout-Ms (as connect-go). */
#define LC_CONNECT_TIMEOUT_MAX_DIGITS 10

/* Codec of a Content-Type: application/proto or application/json, media type
 * case-insensitive; the only parameter allowed is charset=utf-8 (any case) on
 * JSON. Returns 0, or -1 for anything else (including NULL): a 415. */
int lc_connect_codec_of(const char *content_type, lc_connect_codec_t *codec) LC_MUST_CHECK;
/* Validates the optional Connect headers (NULL = absent): the protocol version
 * must be "1"; the timeout 1 to 10 digits, > 0. Sets *timeout_ms (0 = none). */
int lc_connect_check_headers(const char *protocol_version, const char *timeout,
                             uint64_t *timeout_ms, lc_status_t *st) LC_MUST_CHECK;
/* The request's Connect-Timeout-Ms (or, without it, grpc-timeout) in
 * milliseconds, 0 if absent or invalid. */
uint64_t lc_connect_timeout_ms(const lc_http_req_t *req);
/* True if an Accept-Encoding value lists gzip (case-insensitive) with q > 0. */
bool lc_connect_accepts_gzip(const char *accept_encoding);
/* Appends the Connect error JSON for st: {"code":"...","message":"..."}, the
 * message omitted when empty; an OK code is written as "unknown". */
int lc_connect_error_body(const lc_status_t *st, lc_buf_t *out) LC_MUST_CHECK;
/* HTTP status of a Connect error: the code table, except the 405/415 that
 * lc_connect_decode pins in st->http_status for method and content type. */
int lc_connect_error_status(const lc_status_t *st);

#endif
