/*
 * httpd_parse.c — turns a client byte stream into lc_http_req_t values with
 * llhttp, enforcing the header and body caps as bytes arrive (431 / 413
 * before anything big is buffered).
 *
 * llhttp hands out spans that point into the caller's read buffer and may be
 * split across reads, so URL, header names and values are pieced together in
 * p->scratch and copied into the request arena when llhttp reports them
 * complete. on_message_complete pauses the parser: the bytes after a request
 * are left to the caller, which feeds them again once the response is out
 * (pipelining without reordering).
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "httpd_int.h"
#include "lc/gz.h"

#define HEADER_LINE_OVERHEAD 4     /* ": " and CRLF, so empty headers still count */
#define KEEP_BUF_BYTES (64 * 1024) /* larger buffers are freed between requests */

static lc_httpd__parser_t *parser_of(llhttp_t *h)
{
    return h->data;
}

/* Records why the request failed; llhttp stops on the -1 that callers return. */
static int parse_fail(lc_httpd__parser_t *p, int status, const char *msg)
{
    if (p->error_status == 0) {
        p->error_status = status;
        p->error_msg = msg;
    }
    return -1;
}

static int count_header_bytes(lc_httpd__parser_t *p, size_t n)
{
    p->header_bytes += n;
    if (p->header_bytes > p->lim.max_header_bytes)
        return parse_fail(p, 431, "request header fields too large");
    return 0;
}

static int scratch_add(lc_httpd__parser_t *p, const char *at, size_t n)
{
    if (count_header_bytes(p, n) != 0)
        return -1;
    if (lc_buf_append(&p->scratch, at, n) != 0)
        return parse_fail(p, 431, "request header fields too large");
    return 0;
}

/* Copies the scratch text into the arena and empties it. */
static char *scratch_take(lc_httpd__parser_t *p)
{
    char *s = lc_arena_strndup(p->arena, (const char *)p->scratch.data, p->scratch.len);
    lc_buf_reset(&p->scratch);
    return s;
}

static int on_message_begin(llhttp_t *h)
{
    parser_of(h)->in_message = true;
    return 0;
}

static int on_url(llhttp_t *h, const char *at, size_t n)
{
    return scratch_add(parser_of(h), at, n);
}

static int on_url_complete(llhttp_t *h)
{
    lc_httpd__parser_t *p = parser_of(h);
    char *url = scratch_take(p);
    if (!url)
        return parse_fail(p, 431, "request too large for the arena");
    char *q = strchr(url, '?');
    p->req.query = q ? q + 1 : "";
    if (q)
        *q = '\0';
    p->req.path = url;
    return 0;
}

/* Trailers (headers after a chunked body) are counted but not kept. */
static bool in_trailers(const lc_httpd__parser_t *p)
{
    return p->headers_done;
}

static int on_header_field(llhttp_t *h, const char *at, size_t n)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (in_trailers(p))
        return count_header_bytes(p, n);
    return scratch_add(p, at, n);
}

static int on_header_field_complete(llhttp_t *h)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (count_header_bytes(p, HEADER_LINE_OVERHEAD) != 0)
        return -1;
    if (in_trailers(p))
        return 0;
    p->field = scratch_take(p);
    if (!p->field)
        return parse_fail(p, 431, "request too large for the arena");
    for (char *c = p->field; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return 0;
}

static int on_header_value(llhttp_t *h, const char *at, size_t n)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (in_trailers(p))
        return count_header_bytes(p, n);
    return scratch_add(p, at, n);
}

static int on_header_value_complete(llhttp_t *h)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (in_trailers(p))
        return 0;
    /* llhttp drops leading whitespace of a value but keeps trailing. */
    lc_buf_t *v = &p->scratch;
    while (v->len > 0 && (v->data[v->len - 1] == ' ' || v->data[v->len - 1] == '\t'))
        v->len--;
    char *value = scratch_take(p);
    if (!value || !p->field)
        return parse_fail(p, 431, "request too large for the arena");
    p->headers = lc_xgrow(p->headers, &p->cap_headers, p->n_headers + 1, sizeof(*p->headers));
    p->headers[p->n_headers++] = (lc_http_header_t){.name = p->field, .value = value};
    p->field = NULL;
    return 0;
}

/* Only gzip is decoded; identity is a no-op; anything else is refused with 501
 * unimplemented, as Connect answers an unknown request encoding (§6.1). */
static int check_content_encoding(lc_httpd__parser_t *p)
{
    const char *enc = lc_http_header(&p->req, "content-encoding");
    if (!enc || enc[0] == '\0' || strcasecmp(enc, "identity") == 0)
        return 0;
    if (strcasecmp(enc, "gzip") == 0 || strcasecmp(enc, "x-gzip") == 0) {
        p->gzip_body = true;
        return 0;
    }
    return parse_fail(p, 501, "unsupported content-encoding");
}

/* The checks at the end of a header block, for HTTP/1.1 and HTTP/2 alike. */
static int headers_end(lc_httpd__parser_t *p, bool has_length, uint64_t content_length)
{
    p->headers_done = true;
    p->req.headers = p->headers;
    p->req.n_headers = p->n_headers;
    if (!p->req.path)
        return parse_fail(p, 400, "missing request target");
    if (has_length && content_length > p->lim.max_body_bytes)
        return parse_fail(p, 413, "request body too large");
    return check_content_encoding(p);
}

static int on_headers_complete(llhttp_t *h)
{
    lc_httpd__parser_t *p = parser_of(h);
    p->req.method = llhttp_method_name((llhttp_method_t)h->method);
    if (headers_end(p, (h->flags & F_CONTENT_LENGTH) != 0, h->content_length) != 0)
        return -1;
    const char *expect = lc_http_header(&p->req, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && h->http_major == 1 &&
        h->http_minor >= 1)
        p->want_continue = true;
    return 0;
}

static int body_check_cap(lc_httpd__parser_t *p, size_t more)
{
    size_t max = p->lim.max_body_bytes;
    if (more > max || p->body.len + p->ext_bytes > max - more)
        return parse_fail(p, 413, "request body too large");
    return 0;
}

static int on_body(llhttp_t *h, const char *at, size_t n)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (body_check_cap(p, n) != 0)
        return -1;
    if (lc_buf_append(&p->body, at, n) != 0)
        return parse_fail(p, 413, "request body too large");
    return 0;
}

/* Chunk extensions carry nothing we use, but an endless one must still end. */
static int on_chunk_extension(llhttp_t *h, const char *at, size_t n)
{
    lc_httpd__parser_t *p = parser_of(h);
    if (body_check_cap(p, n) != 0)
        return -1;
    p->ext_bytes += n;
    return 0;
}

static int on_message_complete(llhttp_t *h)
{
    lc_httpd__parser_t *p = parser_of(h);
    /* The request can no longer use an interim 100 response. */
    p->want_continue = false;
    p->keep_alive = llhttp_should_keep_alive(h) && !h->upgrade;
    p->req.body = p->body.data ? p->body.data : (const uint8_t *)"";
    p->req.body_len = p->body.len;
    return HPE_PAUSED;
}

/* ---- the same request built from HTTP/2 fields (httpd_h2.c) */

int lc_httpd__parser_add_header(lc_httpd__parser_t *p, const char *name, size_t nlen,
                                const char *value, size_t vlen)
{
    if (count_header_bytes(p, nlen + vlen + HEADER_LINE_OVERHEAD) != 0)
        return -1;
    if (in_trailers(p))
        return 0;
    char *n = lc_arena_strndup(p->arena, name, nlen);
    char *v = lc_arena_strndup(p->arena, value, vlen);
    if (!n || !v)
        return parse_fail(p, 431, "request too large for the arena");
    for (char *c = n; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    p->headers = lc_xgrow(p->headers, &p->cap_headers, p->n_headers + 1, sizeof(*p->headers));
    p->headers[p->n_headers++] = (lc_http_header_t){.name = n, .value = v};
    return 0;
}

int lc_httpd__parser_set_start(lc_httpd__parser_t *p, const char *method, size_t mlen,
                               const char *target, size_t tlen)
{
    if (count_header_bytes(p, mlen + tlen) != 0)
        return -1;
    p->in_message = true;
    if (method) {
        char *m = lc_arena_strndup(p->arena, method, mlen);
        if (!m)
            return parse_fail(p, 431, "request too large for the arena");
        p->req.method = m;
    }
    if (target) {
        if (lc_buf_append(&p->scratch, target, tlen) != 0)
            return parse_fail(p, 431, "request header fields too large");
        return on_url_complete(&p->llhttp);
    }
    return 0;
}

int lc_httpd__parser_end_headers(lc_httpd__parser_t *p, int64_t content_length)
{
    if (p->error_status)
        return -1;
    if (!p->req.method[0])
        return parse_fail(p, 400, "missing request method");
    return headers_end(p, content_length >= 0, (uint64_t)content_length);
}

int lc_httpd__parser_add_body(lc_httpd__parser_t *p, const uint8_t *data, size_t len)
{
    if (p->error_status)
        return -1;
    if (body_check_cap(p, len) != 0)
        return -1;
    if (lc_buf_append(&p->body, data, len) != 0)
        return parse_fail(p, 413, "request body too large");
    return 0;
}

void lc_httpd__parser_end_body(lc_httpd__parser_t *p)
{
    p->req.body = p->body.data ? p->body.data : (const uint8_t *)"";
    p->req.body_len = p->body.len;
}

static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_extension_name = on_chunk_extension,
    .on_chunk_extension_value = on_chunk_extension,
    .on_message_complete = on_message_complete,
};

/* Request-scoped fields start empty; _conn (owned by the server) survives. */
static void parser_clear_request(lc_httpd__parser_t *p)
{
    void *conn = p->req._conn;
    lc_http_header_t *resp_headers = p->req._resp_headers;
    size_t resp_cap = p->req._cap_resp_headers;
    lc_http_header_t *trailers = p->req._trailers;
    size_t trailers_cap = p->req._cap_trailers;
    lc_buf_t resp_body = p->req.resp_body;
    memset(&p->req, 0, sizeof(p->req));
    p->req._conn = conn;
    p->req._resp_headers = resp_headers;
    p->req._cap_resp_headers = resp_cap;
    p->req._trailers = trailers;
    p->req._cap_trailers = trailers_cap;
    p->req.resp_body = resp_body;
    p->req.method = "";
    p->req.query = "";
    p->req.body = (const uint8_t *)"";
    p->req.arena = p->arena;
    lc_httpd__resp_reset(&p->req, p->lim.max_response_bytes);
}

void lc_httpd__parser_init(lc_httpd__parser_t *p, const lc_httpd__limits_t *lim)
{
    memset(p, 0, sizeof(*p));
    p->lim = *lim;
    p->arena = lc_arena_new(lim->arena_cap_bytes);
    lc_buf_init(&p->scratch, lim->max_header_bytes);
    lc_buf_init(&p->body, lim->max_body_bytes);
    lc_buf_init(&p->plain, lim->max_decompressed_bytes);
    lc_buf_init(&p->head, LC_HTTPD__MAX_RESP_HEAD);
    lc_buf_init(&p->req.resp_body, lim->max_response_bytes);
    parser_clear_request(p);
    llhttp_init(&p->llhttp, HTTP_REQUEST, &parser_settings);
    p->llhttp.data = p;
}

void lc_httpd__parser_fini(lc_httpd__parser_t *p)
{
    lc_arena_free(p->arena);
    lc_buf_fini(&p->scratch);
    lc_buf_fini(&p->body);
    lc_buf_fini(&p->plain);
    lc_buf_fini(&p->head);
    lc_buf_fini(&p->req.resp_body);
    lc_free(p->headers);
    lc_free(p->req._resp_headers);
    lc_free(p->req._trailers);
    memset(p, 0, sizeof(*p));
}

lc_httpd__parse_t lc_httpd__parser_feed(lc_httpd__parser_t *p, const char *data, size_t len,
                                        size_t *used)
{
    llhttp_errno_t err = llhttp_execute(&p->llhttp, data, len);
    *used = len;
    if (err == HPE_OK)
        return LC_HTTPD__MORE;
    if (p->error_status == 0 && (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE)) {
        const char *pos = llhttp_get_error_pos(&p->llhttp);
        if (pos && pos >= data && pos <= data + len)
            *used = (size_t)(pos - data);
        if (err == HPE_PAUSED_UPGRADE)
            p->keep_alive = false; /* no protocol switch: answer and close */
        return LC_HTTPD__REQUEST;
    }
    if (p->error_status == 0)
        parse_fail(p, 400, "malformed HTTP request");
    return LC_HTTPD__ERROR;
}

bool lc_httpd__parser_body_gzipped(const lc_httpd__parser_t *p)
{
    /* An empty body stays empty whatever its declared encoding. */
    return p->gzip_body && p->body.len > 0;
}

int lc_httpd__parser_decode_body(lc_httpd__parser_t *p, size_t max_out)
{
    if (!lc_httpd__parser_body_gzipped(p))
        return 0;
    /* lc_gunzip grows its output in steps capped at max_out: a bomb costs at
     * most max_out bytes (plus the compressed body) before it is refused. */
    int rc = lc_gunzip(p->body.data, p->body.len, max_out, &p->plain);
    if (rc == LC_ETOOBIG) {
        lc_httpd__reply_status(&p->req, 413, "decompressed request body too large");
        return -1;
    }
    if (rc != 0) {
        lc_httpd__reply_status(&p->req, 400, "corrupt gzip request body");
        return -1;
    }
    p->req.body = p->plain.data ? p->plain.data : (const uint8_t *)"";
    p->req.body_len = p->plain.len;
    return 0;
}

/* Keeps a modest buffer for the next request; a big one goes back to malloc. */
static void buf_recycle(lc_buf_t *b)
{
    if (b->cap > KEEP_BUF_BYTES)
        lc_buf_fini(b);
    lc_buf_reset(b);
}

void lc_httpd__parser_next(lc_httpd__parser_t *p)
{
    lc_arena_reset(p->arena);
    lc_buf_reset(&p->scratch);
    buf_recycle(&p->body);
    buf_recycle(&p->plain);
    buf_recycle(&p->head);
    buf_recycle(&p->req.resp_body);
    p->field = NULL;
    p->n_headers = 0;
    p->header_bytes = p->ext_bytes = 0;
    p->error_status = 0;
    p->error_msg = NULL;
    p->in_message = p->headers_done = p->gzip_body = false;
    p->want_continue = p->keep_alive = false;
    parser_clear_request(p);
    if (llhttp_get_errno(&p->llhttp) == HPE_PAUSED)
        llhttp_resume(&p->llhttp);
}
