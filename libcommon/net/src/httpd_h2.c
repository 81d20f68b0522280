/*
 * httpd_h2.c — HTTP/2 for lc_httpd: an nghttp2 server session that turns
 * streams into the same lc_http_req_t exchanges as HTTP/1.1 and sends their
 * responses (headers, body through a data provider, trailers).
 *
 * No sockets and no loop here: httpd.c feeds received bytes in
 * (lc_httpd__h2_recv), pulls bytes to write (lc_httpd__h2_pull) and runs the
 * handlers; tests/fuzz/fuzz_h2.c drives a session the same way.
 *
 * Limits, besides nghttp2's own (CONTINUATION count, RST_STREAM rate,
 * outbound ACK queue, SETTINGS entries):
 * - header bytes per request as on HTTP/1.1 (431), advertised as
 *   SETTINGS_MAX_HEADER_LIST_SIZE;
 * - body bytes per request (413), and per connection over all its streams,
 *   so concurrency does not multiply the body cap (503);
 * - handlers running per connection <= max_streams even when their streams
 *   were reset (rapid reset): a stream past it is refused (REFUSED_STREAM).
 *
 * Lifetime: a stream object lives until nghttp2 has closed the stream AND its
 * handler has finished; a reset stream whose handler is still running stays
 * as an orphan and is freed by lc_httpd__h2_respond.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "httpd_int.h"
#include "lc/base64.h"
#include "lc/log.h"

#define PULL_CHUNK_MAX (1u << 20) /* the biggest single mem_send chunk we accept */
#define RESET_BURST 1000          /* RST_STREAM tokens (nghttp2's default) */
#define RESET_RATE 100            /* ... regenerated per second */
#define MAX_CONTINUATIONS 8       /* CONTINUATION frames after one HEADERS */
#define MAX_SETTINGS_ENTRIES 32   /* in one SETTINGS frame */
#define MAX_OUTBOUND_ACKS 1000    /* queued PING/SETTINGS ACKs before the peer is cut */
#define HEADER_TABLE_BYTES 4096   /* HPACK dynamic table, both ways */
#define STATUS_TEXT_BYTES 8

typedef struct h2_stream_s h2_stream_t;
struct h2_stream_s {
    lc_httpd__xchg_t x; /* x.owner == this */
    lc_httpd__h2_t *h2;
    h2_stream_t *prev, *next;
    int32_t id;
    size_t sent;         /* response body bytes handed to nghttp2 */
    size_t body_counted; /* request body bytes counted in h2->body_bytes */
    bool closed;         /* nghttp2 closed the stream */
    bool busy;           /* a handler owns the exchange */
    bool answered;       /* a response was submitted */
    /* a bidirectional route (lc_http_route_t.interim): */
    const lc_httpd__route_t *interim; /* until the request is complete */
    lc_buf_t out;                     /* every byte of the response body, interim and final */
    bool streaming;                   /* response headers sent, body deferred while open */
    bool final;                       /* the handler's answer is in out: end after it */
};

struct lc_httpd__h2_s {
    nghttp2_session *session;
    lc_httpd__h2_cfg_t cfg;
    h2_stream_t *streams;
    size_t n_busy;
    size_t n_open;
    size_t body_bytes; /* request bodies held by this connection's streams */
    uint64_t progress;
    bool settings_acked;
    bool fatal;
    bool in_recv; /* nghttp2 forbids mem_send from inside mem_recv */
};

/* ================================================================ streams */

static h2_stream_t *h2_stream_alloc(lc_httpd__h2_t *h2, int32_t id)
{
    h2_stream_t *s = lc_xcalloc(1, sizeof(*s));
    s->h2 = h2;
    s->id = id;
    s->next = h2->streams;
    if (h2->streams)
        h2->streams->prev = s;
    h2->streams = s;
    h2->n_open++;
    return s;
}

static h2_stream_t *h2_stream_new(lc_httpd__h2_t *h2, int32_t id)
{
    h2_stream_t *s = h2_stream_alloc(h2, id);
    lc_httpd__xchg_init(&s->x, h2->cfg.srv, &h2->cfg.lim, h2->cfg.respond, s);
    return s;
}

static void h2_stream_free(h2_stream_t *s)
{
    lc_httpd__h2_t *h2 = s->h2;
    if (s->prev)
        s->prev->next = s->next;
    else
        h2->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    h2->body_bytes -= s->body_counted;
    lc_buf_fini(&s->out);
    lc_httpd__xchg_fini(&s->x);
    lc_free(s);
}

static h2_stream_t *h2_stream_get(lc_httpd__h2_t *h2, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h2->session, id);
}

/* ================================================================ responses */

static bool h2_header_dropped(const char *name)
{
    /* Connection-specific fields are forbidden in HTTP/2 (RFC 9113 §8.2.2);
     * the length is the server's own. */
    static const char *const names[] = {"connection", "keep-alive",        "proxy-connection",
                                        "upgrade",    "transfer-encoding", "content-length"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(name, names[i]) == 0)
            return true;
    return name[0] == ':' || name[0] == '\0';
}

/* HTTP/2 field names are lower-case; handlers write "Content-Type". */
static char *h2_lower_dup(lc_arena_t *a, const char *s)
{
    char *d = lc_arena_strdup(a, s);
    for (char *c = d; c && *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return d;
}

static nghttp2_nv h2_nv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

/* Fields for nghttp2 (which copies them); skips the ones HTTP/2 forbids.
 * Returns the count, or -1 when the arena is full. */
static int h2_fields(lc_arena_t *a, const lc_http_header_t *in, size_t n, nghttp2_nv *out)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (h2_header_dropped(in[i].name))
            continue;
        char *name = h2_lower_dup(a, in[i].name);
        if (!name)
            return -1;
        out[k++] = h2_nv(name, in[i].value);
    }
    return k;
}

static bool h2_bodyless(const lc_http_req_t *req)
{
    return lc_httpd__bodyless(req);
}

static void h2_submit_trailers(h2_stream_t *s)
{
    lc_http_req_t *req = &s->x.parser.req;
    nghttp2_nv *nva = lc_arena_calloc(req->arena, req->_n_trailers, sizeof(*nva));
    int n = nva ? h2_fields(req->arena, req->_trailers, req->_n_trailers, nva) : -1;
    if (n < 0 || nghttp2_submit_trailer(s->h2->session, s->id, nva, (size_t)n) != 0)
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

static ssize_t h2_read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *flags, nghttp2_data_source *source, void *user)
{
    LC_UNUSED(session);
    LC_UNUSED(stream_id);
    LC_UNUSED(user);
    h2_stream_t *s = source->ptr;
    const lc_http_req_t *req = &s->x.parser.req;
    size_t total = h2_bodyless(req) ? 0 : req->resp_body.len;
    size_t n = total - s->sent < length ? total - s->sent : length;
    if (n > 0)
        memcpy(buf, req->resp_body.data + s->sent, n);
    s->sent += n;
    if (s->sent == total) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (req->_n_trailers > 0) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            h2_submit_trailers(s);
        }
    }
    return (ssize_t)n;
}

/* ---- bidirectional routes: the body is sent as it grows, then trailers */

static ssize_t h2_read_stream(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                              size_t length, uint32_t *flags, nghttp2_data_source *source,
                              void *user)
{
    LC_UNUSED(session);
    LC_UNUSED(stream_id);
    LC_UNUSED(user);
    h2_stream_t *s = source->ptr;
    size_t avail = s->out.len - s->sent;
    if (avail == 0 && !s->final)
        return NGHTTP2_ERR_DEFERRED; /* resumed by h2_stream_send */
    size_t n = avail < length ? avail : length;
    if (n > 0)
        memcpy(buf, s->out.data + s->sent, n);
    s->sent += n;
    if (s->final && s->sent == s->out.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        h2_submit_trailers(s);
    }
    return (ssize_t)n;
}

/* Sends what s->out holds beyond what was sent: the response headers
 * first, then the deferred body resumes. */
static void h2_stream_send(h2_stream_t *s)
{
    nghttp2_session *session = s->h2->session;
    if (s->streaming) {
        nghttp2_session_resume_data(session, s->id);
        return;
    }
    s->streaming = true;
    nghttp2_nv nva[] = {h2_nv(":status", "200"), h2_nv("content-type", "application/grpc")};
    nghttp2_data_provider body = {.source.ptr = s, .read_callback = h2_read_stream};
    if (nghttp2_submit_response(session, s->id, nva, 2, &body) != 0)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

static const char *h2_resp_header(const lc_http_req_t *req, const char *name)
{
    for (size_t i = 0; i < req->_n_resp_headers; i++)
        if (strcasecmp(req->_resp_headers[i].name, name) == 0)
            return req->_resp_headers[i].value;
    return NULL;
}

/* The handler's answer after interim messages: its body follows them, its
 * status goes in the trailers (headers were sent long ago). */
static void h2_finish_stream(h2_stream_t *s)
{
    lc_http_req_t *req = &s->x.parser.req;
    s->answered = true;
    const char *status = h2_resp_header(req, "grpc-status");
    bool grpc_body = req->_n_trailers > 0 || status;
    if (req->_n_trailers == 0) { /* a Trailers-Only answer, or a plain HTTP refusal (413) */
        const char *message = h2_resp_header(req, "grpc-message");
        char text[64];
        snprintf(text, sizeof(text), "HTTP %d during the call", req->status);
        lc_http_set_trailer(req, "grpc-status", status ? status : "13");
        if (message || !status)
            lc_http_set_trailer(req, "grpc-message", message ? message : text);
    }
    if (s->h2->cfg.answered)
        s->h2->cfg.answered(&s->x);
    /* a plain HTTP body (an error's JSON) is no gRPC message: not sent */
    if (grpc_body && lc_buf_append(&s->out, req->resp_body.data, req->resp_body.len) != 0) {
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    s->final = true;
    h2_stream_send(s);
}

static void h2_submit_response(h2_stream_t *s)
{
    if (s->streaming) {
        h2_finish_stream(s);
        return;
    }
    lc_http_req_t *req = &s->x.parser.req;
    lc_arena_t *a = req->arena;
    char status[STATUS_TEXT_BYTES], length[32];
    int code = req->status >= 200 && req->status <= 999 ? req->status : 500;
    snprintf(status, sizeof(status), "%d", code);
    req->status = code;
    bool bodyless = h2_bodyless(req);
    snprintf(length, sizeof(length), "%zu", bodyless ? 0 : req->resp_body.len);
    s->answered = true;
    nghttp2_nv *nva = lc_arena_calloc(a, req->_n_resp_headers + 2, sizeof(*nva));
    int n = nva ? h2_fields(a, req->_resp_headers, req->_n_resp_headers, nva + 1) : -1;
    if (n < 0) {
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    nva[0] = h2_nv(":status", status);
    size_t nv = (size_t)n + 1;
    if (code != 204 && code != 304)
        nva[nv++] = h2_nv("content-length", length);
    nghttp2_data_provider body = {.source.ptr = s, .read_callback = h2_read_body};
    bool has_data = (!bodyless && req->resp_body.len > 0) || req->_n_trailers > 0;
    if (s->h2->cfg.answered)
        s->h2->cfg.answered(&s->x);
    if (nghttp2_submit_response(s->h2->session, s->id, nva, nv, has_data ? &body : NULL) != 0)
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

/* A request refused while it arrives (431, 413, 415/501, 503): answer now;
 * nghttp2 resets the rest of the upload once the answer has ended the stream. */
static void h2_answer_early(h2_stream_t *s)
{
    if (s->answered)
        return;
    lc_httpd__parser_t *p = &s->x.parser;
    lc_httpd__reply_status(&p->req, p->error_status ? p->error_status : 400,
                           p->error_msg ? p->error_msg : "malformed HTTP/2 request");
    h2_submit_response(s);
}

/* ================================================================ requests */

static void h2_request_complete(lc_httpd__h2_t *h2, h2_stream_t *s)
{
    if (s->answered || s->busy)
        return;
    if (h2->n_busy >= h2->cfg.max_streams) {
        /* Streams that were reset still hold their handlers: without this cap
         * a client resetting each stream at once queues unbounded work. */
        s->answered = true;
        nghttp2_submit_rst_stream(h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    lc_httpd__parser_end_body(&s->x.parser);
    s->busy = true;
    h2->n_busy++;
    h2->cfg.on_request(h2->cfg.user, &s->x);
}

static int64_t h2_declared_length(const lc_httpd__parser_t *p)
{
    for (size_t i = 0; i < p->n_headers; i++) {
        if (strcmp(p->headers[i].name, "content-length") != 0)
            continue;
        char *end = NULL;
        long long v = strtoll(p->headers[i].value, &end, 10);
        return end && *end == '\0' && v >= 0 ? (int64_t)v : -1;
    }
    return -1;
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    LC_UNUSED(session);
    lc_httpd__h2_t *h2 = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream_t *s = h2_stream_new(h2, frame->hd.stream_id);
    if (nghttp2_session_set_stream_user_data(h2->session, s->id, s) != 0) {
        h2->n_open--;
        h2_stream_free(s);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user)
{
    LC_UNUSED(session);
    LC_UNUSED(flags);
    h2_stream_t *s = h2_stream_get(user, frame->hd.stream_id);
    if (!s || s->answered)
        return 0;
    lc_httpd__parser_t *p = &s->x.parser;
    const char *n = (const char *)name, *v = (const char *)value;
    if (p->error_status)
        return 0; /* refused already: answered at the end of the block */
    if (namelen == 7 && memcmp(n, ":method", 7) == 0)
        lc_httpd__parser_set_start(p, v, valuelen, NULL, 0);
    else if (namelen == 5 && memcmp(n, ":path", 5) == 0)
        lc_httpd__parser_set_start(p, NULL, 0, v, valuelen);
    else if (namelen == 10 && memcmp(n, ":authority", 10) == 0)
        lc_httpd__parser_add_header(p, "host", 4, v, valuelen);
    else if (namelen > 0 && n[0] == ':')
        lc_httpd__parser_set_start(p, NULL, 0, NULL, namelen + valuelen); /* counted only */
    else
        lc_httpd__parser_add_header(p, n, namelen, v, valuelen);
    return 0;
}

static void h2_on_request_headers(lc_httpd__h2_t *h2, h2_stream_t *s, bool end_stream)
{
    lc_httpd__parser_t *p = &s->x.parser;
    if (p->headers_done) {
        /* trailers: the request is complete if they end the stream */
    } else if (lc_httpd__parser_end_headers(p, h2_declared_length(p)) != 0) {
        h2_answer_early(s);
        return;
    } else if (!end_stream) {
        s->interim = h2->cfg.interim_route ? h2->cfg.interim_route(&s->x) : NULL;
        lc_buf_init(&s->out, h2->cfg.lim.max_body_bytes);
    }
    if (end_stream)
        h2_request_complete(h2, s);
}

/* A bidirectional route's hook on the body so far. */
static void h2_interim(lc_httpd__h2_t *h2, h2_stream_t *s)
{
    lc_http_req_t *req = &s->x.parser.req;
    lc_httpd__parser_end_body(&s->x.parser); /* req->body: what came so far */
    size_t before = s->out.len;
    lc_http_interim_t want = s->interim->interim(req, s->interim->data, &s->out);
    if (want == LC_HTTP_INTERIM_COMPLETE) {
        s->interim = NULL;
        h2_request_complete(h2, s);
    } else if (want == LC_HTTP_INTERIM_REPLY && s->out.len > before) {
        h2_stream_send(s);
    }
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    LC_UNUSED(session);
    lc_httpd__h2_t *h2 = user;
    bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK)
            h2->settings_acked = true;
        return 0;
    case NGHTTP2_HEADERS: {
        h2->progress++;
        h2_stream_t *s = h2_stream_get(h2, frame->hd.stream_id);
        if (s && !s->answered)
            h2_on_request_headers(h2, s, end_stream);
        return 0;
    }
    case NGHTTP2_DATA: {
        h2->progress++;
        h2_stream_t *s = h2_stream_get(h2, frame->hd.stream_id);
        if (s && end_stream && !s->answered)
            h2_request_complete(h2, s);
        return 0;
    }
    default:
        return 0;
    }
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user)
{
    LC_UNUSED(session);
    LC_UNUSED(flags);
    lc_httpd__h2_t *h2 = user;
    h2_stream_t *s = h2_stream_get(h2, stream_id);
    if (!s || s->answered || s->busy) /* busy: a bidirectional request completed early */
        return 0;
    lc_httpd__parser_t *p = &s->x.parser;
    if (lc_httpd__parser_add_body(p, data, len) != 0) {
        h2_answer_early(s); /* 413 as on HTTP/1.1 */
        return 0;
    }
    if (h2->body_bytes + len > h2->cfg.lim.max_body_bytes) {
        /* One connection holds no more body bytes than one HTTP/1.1 request. */
        p->error_status = 503;
        p->error_msg = "request bodies on this connection exceed the body cap; retry";
        h2_answer_early(s);
        return 0;
    }
    h2->body_bytes += len;
    s->body_counted += len;
    if (s->interim)
        h2_interim(h2, s);
    return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user)
{
    LC_UNUSED(session);
    LC_UNUSED(error_code);
    lc_httpd__h2_t *h2 = user;
    h2_stream_t *s = h2_stream_get(h2, stream_id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(h2->session, stream_id, NULL);
    h2->n_open--;
    s->closed = true;
    if (!s->busy)
        h2_stream_free(s); /* a busy one is freed when its handler finishes */
    return 0;
}

static int h2_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    LC_UNUSED(session);
    lc_httpd__h2_t *h2 = user;
    if (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS)
        h2->progress++;
    return 0;
}

/* ================================================================ session */

static int h2_session_new(lc_httpd__h2_t *h2)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int rc = nghttp2_session_callbacks_new(&cb);
    if (rc == 0)
        rc = nghttp2_option_new(&opt);
    if (rc != 0) {
        nghttp2_session_callbacks_del(cb);
        return UV_ENOMEM;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
    nghttp2_option_set_stream_reset_rate_limit(opt, RESET_BURST, RESET_RATE);
    nghttp2_option_set_max_continuations(opt, MAX_CONTINUATIONS);
    nghttp2_option_set_max_settings(opt, MAX_SETTINGS_ENTRIES);
    nghttp2_option_set_max_outbound_ack(opt, MAX_OUTBOUND_ACKS);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, HEADER_TABLE_BYTES);
    rc = nghttp2_session_server_new2(&h2->session, cb, h2, opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return rc == 0 ? 0 : UV_ENOMEM;
}

static int h2_send_settings(lc_httpd__h2_t *h2)
{
    const lc_httpd__h2_cfg_t *c = &h2->cfg;
    size_t max_list = c->lim.max_header_bytes > UINT32_MAX ? UINT32_MAX : c->lim.max_header_bytes;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, c->stream_window},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, c->max_frame_bytes},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)max_list},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, HEADER_TABLE_BYTES},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    int rc =
        nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
    if (rc == 0 && c->connection_window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE)
        rc = nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0,
                                                   (int32_t)c->connection_window);
    return rc == 0 ? 0 : LC_EINPUT;
}

int lc_httpd__h2_new(const lc_httpd__h2_cfg_t *cfg, lc_httpd__h2_t **out)
{
    *out = NULL;
    if (!cfg->on_request || !cfg->respond || cfg->max_streams == 0 ||
        cfg->stream_window > NGHTTP2_MAX_WINDOW_SIZE ||
        cfg->connection_window > NGHTTP2_MAX_WINDOW_SIZE || cfg->max_frame_bytes < 16384u ||
        cfg->max_frame_bytes > 16777215u)
        return LC_EINPUT;
    lc_httpd__h2_t *h2 = lc_xcalloc(1, sizeof(*h2));
    h2->cfg = *cfg;
    int rc = h2_session_new(h2);
    if (rc == 0)
        rc = h2_send_settings(h2);
    if (rc != 0) {
        lc_httpd__h2_free(h2);
        return rc;
    }
    *out = h2;
    return 0;
}

void lc_httpd__h2_free(lc_httpd__h2_t *h2)
{
    if (!h2)
        return;
    /* nghttp2_session_del calls no stream-close callbacks: free them here. */
    nghttp2_session_del(h2->session);
    while (h2->streams)
        h2_stream_free(h2->streams);
    lc_free(h2);
}

int lc_httpd__h2_recv(lc_httpd__h2_t *h2, const uint8_t *data, size_t len)
{
    if (h2->fatal)
        return -1;
    h2->in_recv = true;
    ssize_t n = nghttp2_session_mem_recv(h2->session, data, len);
    h2->in_recv = false;
    if (n < 0) {
        h2->fatal = true; /* e.g. a bad preface, a flood: the session is over */
        return -1;
    }
    return 0;
}

int lc_httpd__h2_upgrade(lc_httpd__h2_t *h2, const uint8_t *settings, size_t len,
                         lc_httpd__parser_t *h1)
{
    h2_stream_t *s = h2_stream_alloc(h2, 1);
    lc_httpd__xchg_init(&s->x, h2->cfg.srv, &h2->cfg.lim, h2->cfg.respond, s);
    lc_httpd__parser_fini(&s->x.parser);
    /* The parser's memory moves as it is: arena, headers, body. */
    memcpy(&s->x.parser, h1, sizeof(*h1));
    memset(h1, 0, sizeof(*h1));
    s->x.parser.llhttp.data = &s->x.parser;
    s->x.parser.req._conn = &s->x;
    bool head = strcmp(s->x.parser.req.method, "HEAD") == 0;
    int rc = nghttp2_session_upgrade2(h2->session, settings, len, head, s);
    if (rc != 0) {
        h2->n_open--;
        h2_stream_free(s);
        return LC_EINPUT;
    }
    s->x.parser.headers_done = true;
    h2_request_complete(h2, s);
    return 0;
}

size_t lc_httpd__h2_pull(lc_httpd__h2_t *h2, lc_buf_t *out, size_t max)
{
    size_t before = out->len;
    if (h2->in_recv)
        return 0;
    while (out->len - before < max) {
        const uint8_t *data = NULL;
        ssize_t n = nghttp2_session_mem_send(h2->session, &data);
        if (n <= 0) {
            if (n < 0)
                h2->fatal = true;
            break;
        }
        if ((size_t)n > PULL_CHUNK_MAX || lc_buf_append(out, data, (size_t)n) != 0) {
            h2->fatal = true; /* cannot happen with the configured sizes; stay safe */
            break;
        }
    }
    return out->len - before;
}

void *lc_httpd__h2_respond(lc_httpd__xchg_t *x)
{
    h2_stream_t *s = x->owner;
    lc_httpd__h2_t *h2 = s->h2;
    s->busy = false;
    h2->n_busy--;
    if (s->closed)
        h2_stream_free(s); /* reset while its handler ran */
    else if (!h2->fatal)
        h2_submit_response(s);
    return h2->cfg.user;
}

size_t lc_httpd__h2_busy(const lc_httpd__h2_t *h2)
{
    return h2->n_busy;
}

bool lc_httpd__h2_alive(const lc_httpd__h2_t *h2)
{
    if (h2->fatal)
        return false;
    return nghttp2_session_want_read(h2->session) || nghttp2_session_want_write(h2->session);
}

void lc_httpd__h2_shutdown(lc_httpd__h2_t *h2)
{
    nghttp2_submit_goaway(h2->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h2->session), NGHTTP2_NO_ERROR,
                          NULL, 0);
}

void lc_httpd__h2_terminate(lc_httpd__h2_t *h2, uint32_t code)
{
    if (nghttp2_session_terminate_session(h2->session, code) != 0)
        h2->fatal = true;
}

bool lc_httpd__h2_settings_acked(const lc_httpd__h2_t *h2)
{
    return h2->settings_acked;
}

size_t lc_httpd__h2_open_streams(const lc_httpd__h2_t *h2)
{
    return h2->n_open;
}

uint64_t lc_httpd__h2_progress(const lc_httpd__h2_t *h2)
{
    return h2->progress;
}

/* ================================================================ base64url */

int lc_httpd__b64url_decode(const char *s, uint8_t *out, size_t max, size_t *len)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    *len = 0;
    for (; *s && *s != '='; s++) {
        int v = lc_base64_digit((unsigned char)*s, true);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == max)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    *len = n;
    return 0;
}
