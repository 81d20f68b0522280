/*
 * connect.c — the Connect unary protocol (pyroscope-api.md §6.1, §6.2) on top
 * of lc_httpd: request checks (method, content type, protocol headers), body
 * decoding with protobuf-c or lc/pbjson.h into the request arena, replies in
 * the request's codec (gzip when accepted) and Connect error JSON.
 *
 * The decisions are small pure functions (exported in lc/connect.h) so they
 * can be tested without a server. lc_connect_register glues them into an
 * offloaded route: decode -> handler -> reply, all on a thread-pool thread.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "lc/base64.h"
#include "lc/connect.h"
#include "lc/grpc.h"
#include "lc/gz.h"
#include "lc/pbjson.h"
#include "lc/pbstrings.h"

#define CONNECT_ACCEPT_POST "application/json, application/proto"
#define CONNECT_DEFAULT_MAX_RESPONSE ((size_t)512 << 20) /* when req->resp_body has no cap */

/* ------------------------------------------------------------- header text */

static const char *skip_ows(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

static const char *trim_ows_end(const char *start, const char *end)
{
    while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return end;
}

/* Case-insensitive comparison of s[0..end) with a lower-case literal. */
static bool span_equals(const char *s, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(end - s) == n && strncasecmp(s, lit, n) == 0;
}

/* Finds the next ';'- or ','-separated item of a header value. Returns false
 * at the end; otherwise [*item, *item_end) is the trimmed item and *cursor
 * points past its separator. */
static bool next_item(const char **cursor, const char *end, char sep, const char **item,
                      const char **item_end)
{
    if (*cursor >= end)
        return false;
    const char *s = skip_ows(*cursor, end);
    const char *stop = memchr(s, sep, (size_t)(end - s));
    if (!stop)
        stop = end;
    *item = s;
    *item_end = trim_ows_end(s, stop);
    *cursor = stop < end ? stop + 1 : end;
    return true;
}

/* ------------------------------------------------------------ content type */

/* One media-type parameter "charset=utf-8" (value maybe quoted, any case). */
static bool param_is_utf8_charset(const char *s, const char *end)
{
    const char *eq = memchr(s, '=', (size_t)(end - s));
    if (!eq || !span_equals(s, trim_ows_end(s, eq), "charset"))
        return false;
    const char *v = skip_ows(eq + 1, end);
    if (end - v >= 2 && *v == '"' && end[-1] == '"') {
        v++;
        end--;
    }
    return span_equals(v, end, "utf-8");
}

/* Parameters after the media type, as connect-go accepts them after Go's
 * canonicalisation: none, or one charset=utf-8 on JSON; empty items (a
 * trailing ';') are ignored. */
static bool params_acceptable(const char *s, const char *end, bool json)
{
    const char *item, *item_end;
    int charsets = 0;

    while (next_item(&s, end, ';', &item, &item_end)) {
        if (item == item_end)
            continue;
        if (!json || !param_is_utf8_charset(item, item_end) || ++charsets > 1)
            return false;
    }
    return true;
}

int lc_connect_codec_of(const char *content_type, lc_connect_codec_t *codec)
{
    if (!content_type)
        return -1;
    const char *end = content_type + strlen(content_type);
    const char *cursor = content_type, *type, *type_end;

    if (!next_item(&cursor, end, ';', &type, &type_end))
        return -1;
    if (span_equals(type, type_end, "application/proto"))
        *codec = LC_CONNECT_PROTO;
    else if (span_equals(type, type_end, "application/json"))
        *codec = LC_CONNECT_JSON;
    else
        return -1;
    return params_acceptable(cursor, end, *codec == LC_CONNECT_JSON) ? 0 : -1;
}

static const char *codec_content_type(lc_connect_codec_t codec)
{
    return codec == LC_CONNECT_JSON ? "application/json" : "application/proto";
}

/* -------------------------------------------------------- protocol headers */

static int parse_timeout(const char *v, uint64_t *timeout_ms, lc_status_t *st)
{
    size_t n = strlen(v);
    uint64_t ms = 0;

    if (n == 0 || n > LC_CONNECT_TIMEOUT_MAX_DIGITS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: connect-timeout-ms must have 1 to %d digits, got %zu",
                             LC_CONNECT_TIMEOUT_MAX_DIGITS, n);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "protocol error: invalid connect-timeout-ms \"%.16s\"", v);
        ms = ms * 10 + (uint64_t)(v[i] - '0');
    }
    if (ms == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: connect-timeout-ms must be positive");
    *timeout_ms = ms;
    return 0;
}

int lc_connect_check_headers(const char *protocol_version, const char *timeout,
                             uint64_t *timeout_ms, lc_status_t *st)
{
    *timeout_ms = 0;
    if (protocol_version) {
        const char *end = protocol_version + strlen(protocol_version);
        const char *v = skip_ows(protocol_version, end);
        if (!span_equals(v, trim_ows_end(v, end), "1"))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "connect-protocol-version must be \"1\": got \"%.32s\"",
                                 protocol_version);
    }
    return timeout ? parse_timeout(timeout, timeout_ms, st) : 0;
}

uint64_t lc_connect_timeout_ms(const lc_http_req_t *req)
{
    lc_status_t ignored;
    uint64_t ms = 0;
    const char *v = lc_http_header(req, "connect-timeout-ms");

    if (v)
        return parse_timeout(v, &ms, &ignored) == 0 ? ms : 0;
    v = lc_http_header(req, "grpc-timeout");
    if (!v || lc_grpc_parse_timeout(v, &ms, &ignored) != 0)
        return 0;
    return ms;
}

/* A q parameter equal to zero ("q=0", "q=0.000") refuses the coding. */
static bool params_refuse(const char *s, const char *end)
{
    const char *item, *item_end;

    while (next_item(&s, end, ';', &item, &item_end)) {
        if (item_end - item < 2 || (item[0] != 'q' && item[0] != 'Q') || item[1] != '=')
            continue;
        const char *v = item + 2;
        if (v == item_end || *v != '0')
            return false;
        for (v++; v < item_end; v++)
            if (*v != '0' && *v != '.')
                return false;
        return true;
    }
    return false;
}

bool lc_connect_accepts_gzip(const char *accept_encoding)
{
    if (!accept_encoding)
        return false;
    const char *end = accept_encoding + strlen(accept_encoding);
    const char *cursor = accept_encoding, *item, *item_end;

    while (next_item(&cursor, end, ',', &item, &item_end)) {
        const char *name_end = memchr(item, ';', (size_t)(item_end - item));
        if (!name_end)
            name_end = item_end;
        if (span_equals(item, trim_ows_end(item, name_end), "gzip"))
            return !params_refuse(name_end, item_end);
    }
    return false;
}

/* ------------------------------------------------------------------ errors */

int lc_connect_error_body(const lc_status_t *st, lc_buf_t *out)
{
    lc_code_t code = st->code == LC_CODE_OK ? LC_CODE_UNKNOWN : st->code;
    int rc = lc_buf_printf(out, "{\"code\":\"%s\"", lc_code_name(code));

    if (rc == 0 && st->msg[0]) {
        size_t len = strnlen(st->msg, sizeof(st->msg));
        rc = lc_buf_puts(out, ",\"message\":");
        if (rc == 0)
            rc = lc_pbjson_append_string(out, st->msg, len);
    }
    return rc ? rc : lc_buf_putc(out, '}');
}

int lc_connect_error_status(const lc_status_t *st)
{
    /* st->http_status is otherwise a legacy-endpoint override: Connect clients
     * derive meaning from the code, so its table alone decides. */
    if (st->http_status == 405 || st->http_status == 415)
        return st->http_status;
    return lc_code_http(st->code == LC_CODE_OK ? LC_CODE_UNKNOWN : st->code);
}

/* The gRPC kind of a codec, LC_GRPC_NONE for Connect's. */
static lc_grpc_kind_t codec_grpc_kind(lc_connect_codec_t codec)
{
    switch (codec) {
    case LC_CONNECT_GRPC_WEB:
        return LC_GRPC_WEB;
    case LC_CONNECT_GRPC_WEB_TEXT:
        return LC_GRPC_WEB_TEXT;
    case LC_CONNECT_GRPC:
        return LC_GRPC_NATIVE;
    default:
        return LC_GRPC_NONE;
    }
}

void lc_connect_error(lc_http_req_t *req, const lc_status_t *st)
{
    lc_grpc_kind_t kind = lc_grpc_kind_of(lc_http_header(req, "content-type"));
    if (kind != LC_GRPC_NONE) {
        lc_grpc_reply_error(req, kind, st);
        return;
    }
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED); /* bounded: a code and a 512-byte message */
    if (lc_connect_error_body(st, &body) != 0)
        lc_buf_reset(&body);
    lc_http_reply(req, lc_connect_error_status(st), "application/json", body.data, body.len);
    lc_buf_fini(&body);
}

/* ---------------------------------------------------------------- decoding */

static int check_method(lc_http_req_t *req, lc_status_t *st)
{
    if (strcmp(req->method, "POST") == 0)
        return 0;
    lc_http_set_header(req, "Allow", "POST");
    return lc_status_set_http(st, 405, LC_CODE_UNIMPLEMENTED,
                              "method %.16s not allowed: Connect unary calls use POST",
                              req->method);
}

static int check_content_type(lc_http_req_t *req, lc_connect_codec_t *codec, lc_status_t *st)
{
    const char *ct = lc_http_header(req, "content-type");
    static const lc_connect_codec_t grpc_codecs[] = {
        [LC_GRPC_WEB] = LC_CONNECT_GRPC_WEB,
        [LC_GRPC_WEB_TEXT] = LC_CONNECT_GRPC_WEB_TEXT,
        [LC_GRPC_NATIVE] = LC_CONNECT_GRPC,
    };
    lc_grpc_kind_t kind = lc_grpc_kind_of(ct);
    if (kind != LC_GRPC_NONE) {
        *codec = grpc_codecs[kind];
        return 0;
    }
    if (lc_connect_codec_of(ct, codec) == 0)
        return 0;
    lc_http_set_header(req, "Accept-Post", CONNECT_ACCEPT_POST);
    return lc_status_set_http(st, 415, LC_CODE_UNIMPLEMENTED,
                              "unsupported content-type \"%.64s\": use " CONNECT_ACCEPT_POST,
                              ct ? ct : "");
}

static int unmarshal_body(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                          lc_connect_codec_t codec, ProtobufCMessage **out, lc_status_t *st)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(req->arena, &alloc);

    if (codec == LC_CONNECT_JSON)
        return lc_pbjson_decode(desc, req->body, req->body_len, &alloc, out, st);
    /* An empty body is a valid empty message; protobuf-c wants a non-NULL pointer. */
    const uint8_t *body = req->body ? req->body : (const uint8_t *)"";
    size_t len = req->body_len;
    lc_grpc_kind_t kind = codec_grpc_kind(codec);
    if (kind != LC_GRPC_NONE &&
        lc_grpc_unwrap_request(kind, body, len, lc_http_header(req, "grpc-encoding"), req->arena,
                               &body, &len, st) != 0)
        return -1;
    *out = protobuf_c_message_unpack(desc, &alloc, len, len ? body : (const uint8_t *)"");
    if (!*out)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "unmarshal into %s: invalid protobuf data", desc->name);
    /* the unpacked strings are C strings: one cut short at a NUL must not pass */
    return lc_pb_strings_check(desc, body, len, st);
}

int lc_connect_decode(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                      ProtobufCMessage **out, lc_connect_codec_t *codec, lc_status_t *st)
{
    uint64_t timeout_ms;

    *out = NULL;
    *codec = LC_CONNECT_PROTO;
    if (check_method(req, st) != 0 || check_content_type(req, codec, st) != 0)
        return -1;
    if (codec_grpc_kind(*codec) != LC_GRPC_NONE) {
        const char *grpc_timeout = lc_http_header(req, "grpc-timeout");
        if (grpc_timeout && lc_grpc_parse_timeout(grpc_timeout, &timeout_ms, st) != 0)
            return -1;
    } else if (lc_connect_check_headers(lc_http_header(req, "connect-protocol-version"),
                                        lc_http_header(req, "connect-timeout-ms"), &timeout_ms,
                                        st)) {
        return -1;
    }
    return unmarshal_body(req, desc, *codec, out, st);
}

/* ----------------------------------------------------------------- replies */

static int marshal(lc_connect_codec_t codec, const ProtobufCMessage *msg, lc_buf_t *out)
{
    if (codec == LC_CONNECT_JSON)
        return lc_pbjson_encode(msg, out);
    size_t len = protobuf_c_message_get_packed_size(msg);
    int rc = lc_buf_reserve(out, len);
    if (rc)
        return rc;
    out->len += protobuf_c_message_pack(msg, out->data + out->len);
    return 0;
}

/* Replaces body by its gzip form. */
static int gzip_in_place(lc_buf_t *body)
{
    lc_buf_t zipped;
    lc_buf_init(&zipped, body->max);
    int rc = lc_gzip(body->data, body->len, LC_GZIP_REPLY_LEVEL, &zipped);
    lc_buf_fini(body);
    *body = zipped;
    return rc;
}

/* Sends an encoded body (gzip if accepted), or resource_exhausted when
 * encoding or compressing it failed (rc != 0: it passed the response cap). */
/* A gRPC success: the message in one frame, then status 0 (a trailer frame
 * for gRPC-Web, HTTP trailers for native gRPC). */
static void grpc_reply(lc_http_req_t *req, lc_grpc_kind_t kind, const lc_buf_t *msg)
{
    lc_buf_t frames;
    lc_status_t ok = {0};
    lc_buf_init(&frames, msg->max);
    int rc = lc_grpc_append_frame(&frames, 0, msg->data, msg->len);
    if (rc == 0 && kind == LC_GRPC_NATIVE) {
        lc_http_reply(req, 200, lc_grpc_content_type(kind), frames.data, frames.len);
        lc_http_set_trailer(req, "grpc-status", "0");
    } else if (rc == 0) {
        rc = lc_grpc_web_reply(req, kind, &frames, &ok);
    }
    lc_buf_fini(&frames);
    if (rc != 0) {
        lc_status_set(&ok, LC_CODE_RESOURCE_EXHAUSTED, "response exceeds %zu bytes", msg->max);
        lc_grpc_reply_error(req, kind, &ok);
    }
}

static void reply_body(lc_http_req_t *req, lc_connect_codec_t codec, lc_buf_t *body, int rc)
{
    lc_grpc_kind_t kind = codec_grpc_kind(codec);
    if (kind != LC_GRPC_NONE) {
        lc_status_t st;
        if (rc == 0) {
            grpc_reply(req, kind, body);
        } else {
            lc_status_set(&st, LC_CODE_RESOURCE_EXHAUSTED, "response exceeds %zu bytes", body->max);
            lc_grpc_reply_error(req, kind, &st);
        }
        return;
    }
    bool gzip = lc_connect_accepts_gzip(lc_http_header(req, "accept-encoding"));
    lc_status_t st;

    if (rc == 0 && gzip)
        rc = gzip_in_place(body);
    if (rc != 0) {
        lc_status_set(&st, LC_CODE_RESOURCE_EXHAUSTED, "response exceeds %zu bytes", body->max);
        lc_connect_error(req, &st);
        return;
    }
    lc_http_reply(req, 200, codec_content_type(codec), body->data, body->len);
    if (gzip)
        lc_http_set_header(req, "Content-Encoding", "gzip");
}

static size_t response_cap(const lc_http_req_t *req)
{
    return req->resp_body.max ? req->resp_body.max : CONNECT_DEFAULT_MAX_RESPONSE;
}

/* Binary gRPC(-Web): the frame is packed straight into the response body
 * (header, message, trailer frame), sparing large answers (Arrow records,
 * merged profiles) three copies. */
static void grpc_reply_direct(lc_http_req_t *req, lc_grpc_kind_t kind, const ProtobufCMessage *msg)
{
    lc_buf_t *out = &req->resp_body;
    lc_status_t ok = {0};
    size_t len = protobuf_c_message_get_packed_size(msg);
    lc_buf_reset(out);
    int rc = len > UINT32_MAX ? LC_ETOOBIG : lc_buf_reserve(out, len + LC_GRPC_FRAME_HEADER);
    if (rc == 0) {
        uint8_t *p = out->data;
        p[0] = 0;
        p[1] = (uint8_t)(len >> 24);
        p[2] = (uint8_t)(len >> 16);
        p[3] = (uint8_t)(len >> 8);
        p[4] = (uint8_t)len;
        out->len = LC_GRPC_FRAME_HEADER + protobuf_c_message_pack(msg, p + LC_GRPC_FRAME_HEADER);
        if (kind != LC_GRPC_NATIVE)
            rc = lc_grpc_append_trailers(out, &ok);
    }
    if (rc != 0) {
        lc_status_set(&ok, LC_CODE_RESOURCE_EXHAUSTED, "response exceeds %zu bytes", out->max);
        lc_grpc_reply_error(req, kind, &ok);
        return;
    }
    req->status = 200;
    lc_http_set_header(req, "Content-Type", lc_grpc_content_type(kind));
    if (kind == LC_GRPC_NATIVE)
        lc_http_set_trailer(req, "grpc-status", "0");
}

void lc_connect_reply(lc_http_req_t *req, lc_connect_codec_t codec, const ProtobufCMessage *msg)
{
    lc_grpc_kind_t kind = codec_grpc_kind(codec);
    if (kind == LC_GRPC_WEB || kind == LC_GRPC_NATIVE) {
        grpc_reply_direct(req, kind, msg);
        return;
    }
    lc_buf_t body;
    lc_buf_init(&body, response_cap(req));
    reply_body(req, codec, &body, marshal(codec, msg, &body));
    lc_buf_fini(&body);
}

/* JSON of a message given as protobuf bytes: decoded into the request arena
 * (freed with it), then encoded. */
static int bytes_to_json(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                         const uint8_t *bytes, size_t len, lc_buf_t *out, lc_status_t *st)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(req->arena, &alloc);
    ProtobufCMessage *msg =
        protobuf_c_message_unpack(desc, &alloc, len, bytes ? bytes : (const uint8_t *)"");
    if (!msg)
        return lc_status_set(st, LC_CODE_INTERNAL, "the %s reply does not decode", desc->name);
    return lc_pbjson_encode(msg, out) ? lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                                                      "response exceeds %zu bytes", out->max)
                                      : 0;
}

void lc_connect_reply_raw(lc_http_req_t *req, lc_connect_codec_t codec,
                          const ProtobufCMessageDescriptor *desc, const uint8_t *proto_bytes,
                          size_t len)
{
    lc_buf_t body;
    lc_status_t st = {0};

    lc_buf_init(&body, response_cap(req));
    if (codec == LC_CONNECT_JSON) {
        if (bytes_to_json(req, desc, proto_bytes, len, &body, &st) != 0)
            lc_connect_error(req, &st);
        else
            reply_body(req, codec, &body, 0);
    } else {
        reply_body(req, codec, &body, lc_buf_append(&body, proto_bytes, len));
    }
    lc_buf_fini(&body);
}

/* ------------------------------------------------------------ registration */

typedef struct connect_method_s {
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn;
    void *data;
    struct connect_method_s *next;
} connect_method_t;

/* Routes keep a pointer to their method for as long as the server may run,
 * and lc_httpd has no hook to release it, so methods live for the process:
 * a list of distinct (in, fn, data) triples, reachable (no leak reports) and
 * bounded by the number of distinct registrations. */
static pthread_mutex_t connect_methods_lock = PTHREAD_MUTEX_INITIALIZER;
static connect_method_t *connect_methods;

static connect_method_t *method_intern(const ProtobufCMessageDescriptor *in, lc_connect_unary_fn fn,
                                       void *data)
{
    connect_method_t *m;

    pthread_mutex_lock(&connect_methods_lock);
    for (m = connect_methods; m; m = m->next)
        if (m->in == in && m->fn == fn && m->data == data)
            break;
    if (!m) {
        m = lc_xcalloc(1, sizeof(*m));
        *m = (connect_method_t){.in = in, .fn = fn, .data = data, .next = connect_methods};
        connect_methods = m;
    }
    pthread_mutex_unlock(&connect_methods_lock);
    return m;
}

/* Connect-Timeout-Ms: a handler that ran past the client's deadline reports
 * deadline_exceeded instead of a reply the client has stopped waiting for. */
bool lc_connect_deadline_passed(const lc_http_req_t *req, uint64_t started_ns, lc_status_t *st)
{
    uint64_t timeout_ms = lc_connect_timeout_ms(req);
    if (timeout_ms == 0 || (uv_hrtime() - started_ns) / 1000000 <= timeout_ms)
        return false;
    lc_status_set(st, LC_CODE_DEADLINE_EXCEEDED, "deadline of %" PRIu64 " ms exceeded", timeout_ms);
    return true;
}

static lc_http_result_t connect_on_work(lc_http_req_t *req, void *data)
{
    const connect_method_t *m = data;
    uint64_t started = uv_hrtime();
    lc_status_t st = {0};
    ProtobufCMessage *in = NULL, *out = NULL;
    lc_connect_codec_t codec;

    if (lc_connect_decode(req, m->in, &in, &codec, &st) != 0 ||
        m->fn(req, in, &out, &st, m->data) != 0 || lc_connect_deadline_passed(req, started, &st)) {
        lc_connect_error(req, &st);
    } else if (!out) {
        lc_status_set(&st, LC_CODE_INTERNAL, "handler returned no message");
        lc_connect_error(req, &st);
    } else {
        lc_connect_reply(req, codec, out);
    }
    return LC_HTTP_DONE;
}

int lc_connect_register(lc_httpd_t *srv, const char *path, lc_http_scope_t scope,
                        const ProtobufCMessageDescriptor *in, lc_connect_unary_fn fn, void *data)
{
    lc_http_route_t route = {
        .path = path,
        .scope = scope,
        .deny = lc_connect_error,
        .methods = NULL, /* any: lc_connect_decode answers 405 itself, with Allow */
        .work = connect_on_work,
        .offload = true,
        .data = method_intern(in, fn, data),
    };
    return lc_httpd_route(srv, &route);
}
