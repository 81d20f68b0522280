/*
 * fuzz_http.c — arbitrary bytes as a client's request stream, through the
 * httpd request parser (llhttp + header/body caps + gzip decoding) and the
 * request helpers, without sockets.
 *
 * Input layout: the first byte picks how the stream is cut into reads ('*':
 * one read; otherwise reads of (byte % 32) + 1 bytes), so llhttp spans split
 * across reads are exercised; the rest is the stream. Pipelined requests are
 * handled one after another exactly as the server does. Beyond "no crash, no
 * sanitizer report" it checks that a response head, or the trailer section of
 * a chunked response, never gains lines from request data (header injection).
 */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "../../libcommon/net/src/httpd_int.h"

static const lc_httpd__limits_t fuzz_limits = {
    .max_header_bytes = 8 * 1024,
    .max_body_bytes = 64 * 1024,
    .max_decompressed_bytes = 256 * 1024,
    .max_response_bytes = 64 * 1024,
    .arena_cap_bytes = 1 << 20,
};

static size_t count_crlf(const lc_buf_t *b)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < b->len; i++)
        n += b->data[i] == '\r' && b->data[i + 1] == '\n';
    return n;
}

/* The chunked form of the same response with client text in a trailer (as
 * grpc-message carries it): the trailer must stay one line, and the chunk
 * size line must name the body's length. */
static void exercise_chunked(lc_httpd__parser_t *p, const char *echo)
{
    lc_http_req_t *req = &p->req;
    lc_http_set_trailer(req, "grpc-message", echo);
    if (req->status != 200 || !lc_httpd__chunked(req, true))
        return;
    size_t body_at = 0;
    if (lc_httpd__format_chunked(req, p->keep_alive, &p->head, &body_at) != 0)
        abort();
    size_t len = req->resp_body.len;
    /* head: 6 lines with Transfer-Encoding for Content-Length, plus the size
     * line; after the body: its CRLF, "0", the trailer, the blank line */
    if (count_crlf(&p->head) != 6 + 3 + (len > 0 ? 2 : 0))
        abort();
    const char *head = (const char *)p->head.data;
    const char *blank = memmem(head, body_at, "\r\n\r\n", 4);
    if (!blank || (len > 0 && strtoull(blank + 4, NULL, 16) != len))
        abort();
}

/* Does what a handler might: read headers and parameters, echo client text
 * into a response header, then serialize the head. */
static void exercise_request(lc_httpd__parser_t *p)
{
    lc_http_req_t *req = &p->req;
    if (strchr(req->path, '?'))
        abort();
    if (lc_httpd__parser_decode_body(p, p->lim.max_decompressed_bytes) != 0) {
        if (lc_httpd__format_head(req, false, &p->head) != 0)
            abort();
        return;
    }
    const char **all;
    size_t n = lc_http_query_all(req, "a", &all);
    for (size_t i = 0; i < n; i++)
        if (!all[i])
            abort();
    const char *q = lc_http_query(req, "q");
    const char *ua = lc_http_header(req, "user-agent");
    lc_http_reply(req, 200, "text/plain", req->body, req->body_len);
    lc_http_set_header(req, "X-Echo", q ? q : (ua ? ua : req->path));
    if (lc_httpd__format_head(req, p->keep_alive, &p->head) != 0)
        abort();
    /* status line, Content-Type, X-Echo, Content-Length, Connection, blank line */
    if (req->status == 200 && count_crlf(&p->head) != 6)
        abort();
    exercise_chunked(p, ua ? ua : req->path);
}

static void run_stream(lc_httpd__parser_t *p, const uint8_t *data, size_t size, size_t slice)
{
    size_t pos = 0;
    while (pos < size) {
        size_t n = size - pos < slice ? size - pos : slice;
        size_t used = 0;
        lc_httpd__parse_t r = lc_httpd__parser_feed(p, (const char *)data + pos, n, &used);
        if (used > n)
            abort();
        if (r == LC_HTTPD__ERROR) {
            lc_httpd__reply_status(&p->req, p->error_status, p->error_msg);
            if (lc_httpd__format_head(&p->req, false, &p->head) != 0)
                abort();
            return;
        }
        pos += used;
        if (r == LC_HTTPD__REQUEST) {
            exercise_request(p);
            if (!p->keep_alive)
                return;
            lc_httpd__parser_next(p);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t slice = data[0] == '*' ? size : (size_t)(data[0] % 32) + 1;
    lc_httpd__parser_t p;
    lc_httpd__parser_init(&p, &fuzz_limits);
    run_stream(&p, data + 1, size - 1, slice);
    lc_httpd__parser_fini(&p);
    return 0;
}
