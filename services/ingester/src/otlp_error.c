/*
 * otlp_error.c — the receivers' error answers, OTLP's beside the others:
 * ing_route_error picks the route's form (/ingest plain HTTP, OTLP/HTTP a
 * google.rpc.Status, Push and OTLP's Export a Connect/gRPC error). Below the
 * handlers (push.c, otlp.c) and the publisher (publish.c), which all answer
 * errors through it. Threading: the request's thread; no state.
 */
#include <strings.h>

#include "google/rpc/status.pb-c.h"
#include "lc/pbjson.h"
#include "receive_int.h"

void ing_route_error(lc_http_req_t *req, ing_route_t route, const lc_status_t *st)
{
    if (route == ING_ROUTE_INGEST)
        lc_http_error(req, st);
    else if (route == ING_ROUTE_OTLP_HTTP)
        ing_otlp_http_error(req, st);
    else
        lc_connect_error(req, st);
}

void ing_otlp_http_error(lc_http_req_t *req, const lc_status_t *st)
{
    const char *ct = lc_http_header(req, "content-type");
    lc_connect_codec_t codec =
        ct && !strncasecmp(ct, "application/json", 16) ? LC_CONNECT_JSON : LC_CONNECT_PROTO;
    Google__Rpc__Status status = GOOGLE__RPC__STATUS__INIT;
    status.code = (int32_t)st->code;
    status.message = (char *)st->msg;
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED);
    int rc;
    if (codec == LC_CONNECT_JSON) {
        rc = lc_pbjson_encode(&status.base, &body);
    } else {
        size_t n = protobuf_c_message_get_packed_size(&status.base);
        rc = lc_buf_reserve(&body, n ? n : 1);
        if (rc == 0)
            body.len = protobuf_c_message_pack(&status.base, body.data);
    }
    if (rc == 0)
        lc_http_reply(req, lc_connect_error_status(st),
                      codec == LC_CONNECT_JSON ? "application/json" : "application/x-protobuf",
                      body.data, body.len);
    else
        lc_connect_error(req, st);
    lc_buf_fini(&body);
}
