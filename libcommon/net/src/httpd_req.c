/*
 * httpd_req.c — request helpers for handlers (headers, query parameters,
 * replies, JSON errors) and the serialization of a response head.
 *
 * None of this touches sockets or the loop, so handlers may call it from the
 * thread pool. Strings handed back live in req->arena; the response header
 * array is a heap array owned by the request parser and reused.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httpd_int.h"
#include "lc/hash.h"
#include "lc/log.h"
#include "lc/metrics.h"

#define RESP_BODY_KEEP_BYTES (64 * 1024)

/* ------------------------------------------------------------ request side */

const char *lc_http_header(const lc_http_req_t *req, const char *lname)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (strcasecmp(req->headers[i].name, lname) == 0)
            return req->headers[i].value;
    return NULL;
}

/* Decodes one form-encoded character at s[*i] (advancing *i): '+' is a space,
 * "%XX" a byte; a '%' without two hex digits stays literal. */
static char form_decode_char(const char *s, size_t n, size_t *i)
{
    char c = s[*i];
    (*i)++;
    if (c == '+')
        return ' ';
    if (c != '%' || *i + 2 > n)
        return c;
    int hi = lc_hex_digit(s[*i]), lo = lc_hex_digit(s[*i + 1]);
    if (hi < 0 || lo < 0)
        return c;
    *i += 2;
    return (char)(hi * 16 + lo);
}

/* Compares the decoded form of raw[0..n) with name, without allocating. */
static bool form_key_equals(const char *raw, size_t n, const char *name)
{
    size_t i = 0, j = 0;
    while (i < n) {
        if (name[j] == '\0' || form_decode_char(raw, n, &i) != name[j])
            return false;
        j++;
    }
    return name[j] == '\0';
}

static char *form_decode(lc_arena_t *a, const char *raw, size_t n)
{
    char *out = lc_arena_alloc(a, n + 1);
    if (!out)
        return NULL;
    size_t i = 0, j = 0;
    while (i < n)
        out[j++] = form_decode_char(raw, n, &i);
    out[j] = '\0';
    return out;
}

/* One "key=value" pair of a query string. */
typedef struct query_pair_s {
    const char *key, *value;
    size_t key_len, value_len;
} query_pair_t;

/* Splits the pair starting at *cursor and moves the cursor past it.
 * Returns false at the end of the string. */
static bool query_next(const char **cursor, query_pair_t *pair)
{
    const char *s = *cursor;
    if (*s == '\0')
        return false;
    const char *end = strchr(s, '&');
    if (!end)
        end = s + strlen(s);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    pair->key = s;
    pair->key_len = (size_t)((eq ? eq : end) - s);
    pair->value = eq ? eq + 1 : end;
    pair->value_len = (size_t)(end - pair->value);
    *cursor = *end ? end + 1 : end;
    return true;
}

const char *lc_http_query(lc_http_req_t *req, const char *name)
{
    const char *cursor = req->query ? req->query : "";
    query_pair_t pair;
    while (query_next(&cursor, &pair))
        if (form_key_equals(pair.key, pair.key_len, name))
            return form_decode(req->arena, pair.value, pair.value_len);
    return NULL;
}

size_t lc_http_query_all(lc_http_req_t *req, const char *name, const char ***out)
{
    const char *cursor = req->query ? req->query : "";
    query_pair_t pair;
    size_t n = 0;
    *out = NULL;
    while (query_next(&cursor, &pair))
        n += form_key_equals(pair.key, pair.key_len, name);
    if (n == 0)
        return 0;
    const char **values = lc_arena_calloc(req->arena, n, sizeof(*values));
    if (!values)
        return 0;
    size_t k = 0;
    cursor = req->query;
    while (query_next(&cursor, &pair) && k < n) {
        if (!form_key_equals(pair.key, pair.key_len, name))
            continue;
        values[k] = form_decode(req->arena, pair.value, pair.value_len);
        if (!values[k])
            return 0;
        k++;
    }
    *out = values;
    return n;
}

/* ----------------------------------------------------------- response side */

void lc_httpd__resp_reset(lc_http_req_t *req, size_t max_response_bytes)
{
    req->status = 200;
    req->user = NULL;
    req->_n_resp_headers = 0;
    req->_n_trailers = 0;
    if (req->resp_body.cap > RESP_BODY_KEEP_BYTES)
        lc_buf_fini(&req->resp_body);
    lc_buf_reset(&req->resp_body);
    req->resp_body.max = max_response_bytes;
}

/* Copies a header text into the arena; CR and LF become spaces so a value
 * taken from client input cannot start a header of its own. */
static char *header_text_dup(lc_arena_t *a, const char *s)
{
    char *d = lc_arena_strdup(a, s);
    for (char *c = d; c && *c; c++)
        if (*c == '\r' || *c == '\n')
            *c = ' ';
    return d;
}

static void resp_header_put(lc_http_req_t *req, const char *name, const char *value, bool replace)
{
    char *v = header_text_dup(req->arena, value);
    if (!v) {
        LC_LOG_WARN("response header dropped: arena full name=%s", name);
        return;
    }
    for (size_t i = 0; replace && i < req->_n_resp_headers; i++) {
        if (strcasecmp(req->_resp_headers[i].name, name) == 0) {
            req->_resp_headers[i].value = v;
            return;
        }
    }
    char *n = header_text_dup(req->arena, name);
    if (!n) {
        LC_LOG_WARN("response header dropped: arena full name=%s", name);
        return;
    }
    req->_resp_headers = lc_xgrow(req->_resp_headers, &req->_cap_resp_headers,
                                  req->_n_resp_headers + 1, sizeof(*req->_resp_headers));
    req->_resp_headers[req->_n_resp_headers++] = (lc_http_header_t){.name = n, .value = v};
}

void lc_http_set_header(lc_http_req_t *req, const char *name, const char *value)
{
    /* A response has one Content-Type; other names may repeat. */
    resp_header_put(req, name, value, strcasecmp(name, "content-type") == 0);
}

void lc_http_set_trailer(lc_http_req_t *req, const char *name, const char *value)
{
    char *n = header_text_dup(req->arena, name), *v = header_text_dup(req->arena, value);
    if (!n || !v) {
        LC_LOG_WARN("response trailer dropped: arena full name=%s", name);
        return;
    }
    req->_trailers = lc_xgrow(req->_trailers, &req->_cap_trailers, req->_n_trailers + 1,
                              sizeof(*req->_trailers));
    req->_trailers[req->_n_trailers++] = (lc_http_header_t){.name = n, .value = v};
}

/* Appends s to b as the inside of a JSON string. */
static int json_escape(lc_buf_t *b, const char *s)
{
    int rc = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && rc == 0; c++) {
        if (*c == '"' || *c == '\\') {
            char esc[2] = {'\\', (char)*c};
            rc = lc_buf_append(b, esc, 2);
        } else if (*c < 0x20) {
            rc = lc_buf_printf(b, "\\u%04x", *c);
        } else {
            rc = lc_buf_putc(b, (char)*c);
        }
    }
    return rc;
}

static int error_body(lc_buf_t *b, lc_code_t code, const char *msg)
{
    int rc = lc_buf_printf(b, "{\"code\":\"%s\",\"message\":\"", lc_code_name(code));
    if (rc == 0)
        rc = json_escape(b, msg);
    if (rc == 0)
        rc = lc_buf_puts(b, "\"}");
    return rc;
}

static void reply_error(lc_http_req_t *req, int status, lc_code_t code, const char *msg)
{
    req->status = status;
    req->_n_trailers = 0; /* a JSON error is the whole answer */
    resp_header_put(req, "Content-Type", "application/json", true);
    lc_buf_reset(&req->resp_body);
    if (error_body(&req->resp_body, code, msg) != 0) {
        /* Even a cap too small for the message must not leave half a JSON. */
        lc_buf_reset(&req->resp_body);
        if (error_body(&req->resp_body, code, "") != 0)
            lc_buf_reset(&req->resp_body);
    }
}

void lc_http_error(lc_http_req_t *req, const lc_status_t *st)
{
    int status = st->http_status ? st->http_status : lc_code_http(st->code);
    reply_error(req, status, st->code, st->msg);
}

void lc_httpd__reply_status(lc_http_req_t *req, int status, const char *msg)
{
    reply_error(req, status, lc_code_from_http(status), msg);
}

void lc_http_reply(lc_http_req_t *req, int status, const char *content_type, const void *body,
                   size_t len)
{
    req->status = status;
    if (content_type)
        resp_header_put(req, "Content-Type", content_type, true);
    lc_buf_reset(&req->resp_body);
    if (lc_buf_append(&req->resp_body, body, len) != 0)
        lc_httpd__reply_status(req, 500, "response too large");
}

/* ------------------------------------------------------------ serializing */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 499:
        return "Client Closed Request";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

bool lc_httpd__bodyless(const lc_http_req_t *req)
{
    int s = req->status;
    return (s >= 100 && s < 200) || s == 204 || s == 304 ||
           (req->method && strcmp(req->method, "HEAD") == 0);
}

/* Framing headers are the server's: a handler's copy would contradict them. */
static bool header_is_framing(const char *name)
{
    return strcasecmp(name, "content-length") == 0 || strcasecmp(name, "connection") == 0 ||
           strcasecmp(name, "transfer-encoding") == 0;
}

bool lc_httpd__chunked(const lc_http_req_t *req, bool client_http11)
{
    return req->_n_trailers > 0 && client_http11 && !lc_httpd__bodyless(req);
}

/* The status line and headers; the body is announced by Content-Length, or
 * by Transfer-Encoding: chunked when it carries trailers. */
static int format_head_lines(const lc_http_req_t *req, bool keep_alive, bool chunked,
                             lc_buf_t *head)
{
    int status = req->status >= 100 && req->status <= 999 ? req->status : 500;
    lc_buf_reset(head);
    int rc = lc_buf_printf(head, "HTTP/1.1 %d %s\r\n", status, reason_phrase(status));
    for (size_t i = 0; rc == 0 && i < req->_n_resp_headers; i++) {
        const lc_http_header_t *h = &req->_resp_headers[i];
        if (!header_is_framing(h->name))
            rc = lc_buf_printf(head, "%s: %s\r\n", h->name, h->value);
    }
    if (rc == 0 && chunked)
        rc = lc_buf_puts(head, "Transfer-Encoding: chunked\r\n");
    else if (rc == 0 && status != 204 && status != 304 && status >= 200)
        rc = lc_buf_printf(head, "Content-Length: %zu\r\n", req->resp_body.len);
    if (rc == 0)
        rc = lc_buf_printf(head, "Connection: %s\r\n\r\n", keep_alive ? "keep-alive" : "close");
    return rc;
}

int lc_httpd__format_head(const lc_http_req_t *req, bool keep_alive, lc_buf_t *head)
{
    return format_head_lines(req, keep_alive, false, head);
}

/* RFC 9112 §7.1: the body as one chunk (none when empty), the last chunk
 * "0", then the trailer fields and the empty line that ends the message. */
int lc_httpd__format_chunked(const lc_http_req_t *req, bool keep_alive, lc_buf_t *out,
                             size_t *body_at)
{
    size_t len = req->resp_body.len;
    int rc = format_head_lines(req, keep_alive, true, out);
    if (rc == 0 && len > 0)
        rc = lc_buf_printf(out, "%zx\r\n", len);
    *body_at = out->len;
    if (rc == 0)
        rc = lc_buf_puts(out, len > 0 ? "\r\n0\r\n" : "0\r\n");
    for (size_t i = 0; rc == 0 && i < req->_n_trailers; i++) {
        const lc_http_header_t *t = &req->_trailers[i];
        if (!header_is_framing(t->name))
            rc = lc_buf_printf(out, "%s: %s\r\n", t->name, t->value);
    }
    if (rc == 0)
        rc = lc_buf_puts(out, "\r\n");
    return rc;
}

#define METRICS_MAX_BYTES (64u << 20)

void lc_http_reply_metrics(lc_http_req_t *req, lc_metrics_t *m)
{
    lc_buf_t body;
    lc_buf_init(&body, METRICS_MAX_BYTES);
    if (lc_metrics_render(m, &body) == 0)
        lc_http_reply(req, 200, "text/plain; version=0.0.4", body.data, body.len);
    else
        lc_http_reply(req, 500, "text/plain", "metrics too large", 17);
    lc_buf_fini(&body);
}
