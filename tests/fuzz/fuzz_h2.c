/*
 * fuzz_h2.c — arbitrary bytes as a client's HTTP/2 stream into a server-side
 * session (httpd_h2.c over nghttp2), without sockets: the request caps, the
 * exchanges built from streams, responses with bodies and trailers, streams
 * reset while their handler still holds them, and `Upgrade: h2c`.
 *
 * Input layout: byte 0 is a control byte.
 *   bits 0-5: 63 = one read, otherwise reads of (bits + 1) * 7 bytes;
 *   bit 6: start as an HTTP/1.1 upgrade (stream 1 = a fixed GET) with the
 *          next 12 bytes as the HTTP2-Settings payload;
 *   bit 7: the stream carries its own client preface (otherwise one is
 *          prepended, so the fuzzer spends its time on frames).
 * Requests are answered in turns: even streams at once, odd ones after the
 * next read (so resets can reach a busy stream), the rest at the end. Output
 * is pulled after every read and dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "../../libcommon/net/src/httpd_int.h"

#define MAX_DEFERRED 8

static const lc_httpd__limits_t fuzz_limits = {
    .max_header_bytes = 8 * 1024,
    .max_body_bytes = 64 * 1024,
    .max_decompressed_bytes = 256 * 1024,
    .max_response_bytes = 64 * 1024,
    .arena_cap_bytes = 1 << 20,
};

static lc_httpd__xchg_t *deferred[MAX_DEFERRED];
static size_t n_deferred;

static void fuzz_h2_respond(lc_httpd__xchg_t *x)
{
    (void)lc_httpd__h2_respond(x);
}

/* What a handler might do: read headers, echo, set a header and a trailer. */
static void fuzz_h2_answer(lc_httpd__xchg_t *x)
{
    lc_http_req_t *req = &x->parser.req;
    if (lc_httpd__parser_decode_body(&x->parser, fuzz_limits.max_decompressed_bytes) == 0) {
        const char *ct = lc_http_header(req, "content-type");
        lc_http_reply(req, req->path[1] == 'e' ? 500 : 200, ct ? ct : "text/plain", req->body,
                      req->body_len);
        lc_http_set_header(req, "X-Echo", lc_http_query(req, "q") ? lc_http_query(req, "q") : "");
        lc_http_set_header(req, "Connection", "close"); /* must be dropped on HTTP/2 */
        if (strchr(req->path, 't'))
            lc_http_set_trailer(req, "Grpc-Status", "0");
    }
    x->respond(x);
}

static void fuzz_h2_on_request(void *user, lc_httpd__xchg_t *x)
{
    (void)user;
    if (x->parser.req.body_len % 2 == 1 && n_deferred < MAX_DEFERRED)
        deferred[n_deferred++] = x;
    else
        fuzz_h2_answer(x);
}

static void fuzz_h2_answer_deferred(void)
{
    size_t n = n_deferred;
    n_deferred = 0;
    for (size_t i = 0; i < n; i++)
        fuzz_h2_answer(deferred[i]);
}

static void fuzz_h2_pull(lc_httpd__h2_t *h2, lc_buf_t *out)
{
    lc_buf_reset(out);
    while (lc_httpd__h2_pull(h2, out, 64 * 1024) > 0)
        lc_buf_reset(out);
}

static void fuzz_h2_upgrade(lc_httpd__h2_t *h2, const uint8_t *settings, size_t len)
{
    static const char get[] = "GET /up?q=1 HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n";
    lc_httpd__parser_t p;
    size_t used = 0;
    lc_httpd__parser_init(&p, &fuzz_limits);
    if (lc_httpd__parser_feed(&p, get, sizeof(get) - 1, &used) != LC_HTTPD__REQUEST ||
        lc_httpd__h2_upgrade(h2, settings, len, &p) != 0) {
        lc_httpd__parser_fini(&p);
        return;
    }
    lc_httpd__parser_fini(&p); /* emptied by the move: frees nothing twice */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    data++, size--;
    lc_httpd__h2_cfg_t cfg = {
        .lim = fuzz_limits,
        .max_streams = 16,
        .stream_window = 65535,
        .connection_window = 1 << 20,
        .max_frame_bytes = 16384,
        .on_request = fuzz_h2_on_request,
        .respond = fuzz_h2_respond,
    };
    lc_httpd__h2_t *h2 = NULL;
    if (lc_httpd__h2_new(&cfg, &h2) != 0)
        abort();
    lc_buf_t out;
    lc_buf_init(&out, 8 << 20);
    if ((ctl & 0x40) && size >= 12) {
        fuzz_h2_upgrade(h2, data, 12);
        data += 12, size -= 12;
    }
    if (!(ctl & 0x80) &&
        lc_httpd__h2_recv(h2, (const uint8_t *)LC_HTTPD__H2_PREFACE, LC_HTTPD__H2_PREFACE_LEN) != 0)
        abort();
    size_t step = (ctl & 0x3f) == 0x3f ? size : ((size_t)(ctl & 0x3f) + 1) * 7;
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        int rc = lc_httpd__h2_recv(h2, data + off, n);
        fuzz_h2_pull(h2, &out);
        fuzz_h2_answer_deferred();
        fuzz_h2_pull(h2, &out);
        if (rc != 0)
            break;
    }
    fuzz_h2_answer_deferred();
    fuzz_h2_pull(h2, &out);
    if (lc_httpd__h2_busy(h2) != 0)
        abort(); /* every handler answered */
    lc_httpd__h2_free(h2);
    lc_buf_fini(&out);
    return 0;
}
