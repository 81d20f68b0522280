/*
 * lc/connect.h — Connect unary protocol over lc_httpd (pyroscope-api.md §6).
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

typedef enum { LC_CONNECT_PROTO = 0, LC_CONNECT_JSON = 1 } lc_connect_codec_t;

/* Checks method, content type and protocol version, then decodes the body into
 * a message allocated in req->arena. On failure fills st (code + message) and
 * the HTTP-level details (405/415 headers are set on req). */
int lc_connect_decode(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                      ProtobufCMessage **out, lc_connect_codec_t *codec,
                      lc_status_t *st) LC_MUST_CHECK;
/* Writes a success response in the request's codec (gzip if accepted). */
void lc_connect_reply(lc_http_req_t *req, lc_connect_codec_t codec, const ProtobufCMessage *msg);
/* Writes a Connect error: JSON {"code","message"} with the mapped HTTP status. */
void lc_connect_error(lc_http_req_t *req, const lc_status_t *st);

/* A unary method: decode -> fn -> reply/error, run on the thread pool.
 * fn returns 0 and sets *out (arena-allocated) or returns -1 with st filled. */
typedef int (*lc_connect_unary_fn)(lc_http_req_t *req, const ProtobufCMessage *in,
                                   ProtobufCMessage **out, lc_status_t *st, void *data);

/* Registers `/<package>.<Service>/<Method>` (path given whole). */
int lc_connect_register(lc_httpd_t *srv, const char *path, const ProtobufCMessageDescriptor *in,
                        lc_connect_unary_fn fn, void *data) LC_MUST_CHECK;

#endif
