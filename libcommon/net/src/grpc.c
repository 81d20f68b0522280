/*
 * grpc.c — gRPC / gRPC-Web unary framing (lc/grpc.h): content types, base64
 * for -text, request unwrapping, frames, trailers, grpc-timeout, and the
 * replies (success and error) written onto an lc_http_req_t.
 *
 * Every length comes from the client, so each is checked against what is
 * actually there before it is used; the only allocation it drives is the
 * inflated message, capped at LC_GRPC_MAX_INFLATED.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lc/base64.h"
#include "lc/grpc.h"
#include "lc/gz.h"

/* ------------------------------------------------------------ content type */

lc_grpc_kind_t lc_grpc_kind_of(const char *content_type)
{
    static const struct {
        const char *name;
        lc_grpc_kind_t kind;
    } types[] = {
        {"application/grpc-web-text+proto", LC_GRPC_WEB_TEXT},
        {"application/grpc-web-text", LC_GRPC_WEB_TEXT},
        {"application/grpc-web+proto", LC_GRPC_WEB},
        {"application/grpc-web", LC_GRPC_WEB},
        {"application/grpc+proto", LC_GRPC_NATIVE},
        {"application/grpc", LC_GRPC_NATIVE},
    };
    if (!content_type)
        return LC_GRPC_NONE;
    while (*content_type == ' ' || *content_type == '\t')
        content_type++;
    size_t n = strcspn(content_type, "; \t");
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strlen(types[i].name) == n && strncasecmp(content_type, types[i].name, n) == 0)
            return types[i].kind;
    return LC_GRPC_NONE;
}

const char *lc_grpc_content_type(lc_grpc_kind_t kind)
{
    switch (kind) {
    case LC_GRPC_WEB_TEXT:
        return "application/grpc-web-text+proto";
    case LC_GRPC_NATIVE:
        return "application/grpc+proto";
    default:
        return "application/grpc-web+proto";
    }
}

/* ------------------------------------------------------------------ base64 */

/* One group of four characters (the last of a chunk may end in '='):
 * writes 1 to 3 bytes. Returns the bytes written, or -1. */
static int grpc_b64_group(const uint8_t g[4], uint8_t *dst)
{
    int v[4], pad = 0;
    for (int i = 0; i < 4; i++) {
        if (g[i] == '=') {
            if (i < 2)
                return -1;
            pad++;
            v[i] = 0;
            continue;
        }
        if (pad) /* data after padding inside a group */
            return -1;
        v[i] = lc_base64_digit(g[i], false);
        if (v[i] < 0)
            return -1;
    }
    uint32_t bits =
        (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    dst[0] = (uint8_t)(bits >> 16);
    dst[1] = (uint8_t)(bits >> 8);
    dst[2] = (uint8_t)bits;
    return 3 - pad;
}

int lc_grpc_base64_decode(const uint8_t *in, size_t len, lc_arena_t *a, uint8_t **out,
                          size_t *out_len, lc_status_t *st)
{
    if (len % 4 != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: grpc-web-text body of %zu bytes is not base64 "
                             "(length not a multiple of 4)",
                             len);
    uint8_t *dst = lc_arena_alloc(a, len / 4 * 3 + 1);
    if (!dst)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int got = grpc_b64_group(in + i, dst + n);
        if (got < 0)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "protocol error: invalid base64 in grpc-web-text body at byte %zu",
                                 i);
        n += (size_t)got;
    }
    *out = dst;
    *out_len = n;
    return 0;
}

/* ---------------------------------------------------------------- requests */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool encoding_is(const char *encoding, const char *name)
{
    return encoding && strcasecmp(encoding, name) == 0;
}

static int inflate_message(const uint8_t *data, size_t len, const char *encoding, lc_arena_t *a,
                           const uint8_t **msg, size_t *msg_len, lc_status_t *st)
{
    if (!encoding_is(encoding, "gzip"))
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "compressed message with grpc-encoding \"%.32s\": only gzip is "
                             "supported",
                             encoding ? encoding : "identity");
    lc_buf_t plain;
    lc_buf_init(&plain, LC_GRPC_MAX_INFLATED);
    int rc = lc_gunzip(data, len, LC_GRPC_MAX_INFLATED, &plain);
    uint8_t *copy = rc == 0 ? lc_arena_alloc(a, plain.len + 1) : NULL;
    if (copy)
        memcpy(copy, plain.data, plain.len);
    *msg = copy;
    *msg_len = plain.len;
    lc_buf_fini(&plain);
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "compressed message inflates past %zu bytes", LC_GRPC_MAX_INFLATED);
    if (rc != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: compressed message is not valid gzip");
    return copy ? 0 : lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
}

int lc_grpc_unwrap_request(lc_grpc_kind_t kind, const uint8_t *body, size_t len,
                           const char *encoding, lc_arena_t *a, const uint8_t **msg,
                           size_t *msg_len, lc_status_t *st)
{
    if (kind == LC_GRPC_WEB_TEXT) {
        uint8_t *raw;
        if (lc_grpc_base64_decode(body, len, a, &raw, &len, st))
            return -1;
        body = raw;
    }
    if (len < LC_GRPC_FRAME_HEADER)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: body of %zu bytes holds no complete message frame "
                             "(a unary call sends exactly one)",
                             len);
    uint8_t flags = body[0];
    uint32_t n = be32(body + 1);
    if (flags & ~LC_GRPC_FLAG_COMPRESSED)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: invalid frame flags 0x%02x in a request", flags);
    if (n > len - LC_GRPC_FRAME_HEADER)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: frame promises %u bytes, the body has %zu", n,
                             len - LC_GRPC_FRAME_HEADER);
    if (n != len - LC_GRPC_FRAME_HEADER)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: %zu bytes after the message: a unary call sends "
                             "exactly one frame",
                             len - LC_GRPC_FRAME_HEADER - n);
    if (flags & LC_GRPC_FLAG_COMPRESSED)
        return inflate_message(body + LC_GRPC_FRAME_HEADER, n, encoding, a, msg, msg_len, st);
    *msg = body + LC_GRPC_FRAME_HEADER;
    *msg_len = n;
    return 0;
}

/* --------------------------------------------------------------- responses */

int lc_grpc_append_frame(lc_buf_t *out, uint8_t flags, const uint8_t *data, size_t len)
{
    if (len > UINT32_MAX)
        return LC_ETOOBIG;
    uint8_t head[LC_GRPC_FRAME_HEADER] = {flags, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                                          (uint8_t)(len >> 8), (uint8_t)len};
    int rc = lc_buf_append(out, head, sizeof(head));
    return rc == 0 && len ? lc_buf_append(out, data, len) : rc;
}

int lc_grpc_percent_encode(const char *msg, lc_buf_t *out)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const uint8_t *c = (const uint8_t *)msg; rc == 0 && *c; c++) {
        if (*c >= 0x20 && *c <= 0x7e && *c != '%') {
            rc = lc_buf_putc(out, (char)*c);
        } else {
            char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
            rc = lc_buf_append(out, e, 3);
        }
    }
    return rc;
}

int lc_grpc_append_trailers(lc_buf_t *out, const lc_status_t *st)
{
    lc_buf_t t;
    lc_buf_init(&t, LC_BUF_UNLIMITED); /* bounded: a code and a 512-byte message */
    int rc = lc_buf_printf(&t, "grpc-status: %d\r\n", (int)st->code);
    if (rc == 0 && st->code != LC_CODE_OK && st->msg[0]) {
        rc = lc_buf_puts(&t, "grpc-message: ");
        if (rc == 0)
            rc = lc_grpc_percent_encode(st->msg, &t);
        if (rc == 0)
            rc = lc_buf_puts(&t, "\r\n");
    }
    if (rc == 0)
        rc = lc_grpc_append_frame(out, LC_GRPC_FLAG_TRAILERS, t.data, t.len);
    lc_buf_fini(&t);
    return rc;
}

/* ----------------------------------------------------------------- timeout */

int lc_grpc_parse_timeout(const char *v, uint64_t *ms, lc_status_t *st)
{
    size_t n = strlen(v);
    uint64_t value = 0;
    if (n < 2 || n > LC_GRPC_TIMEOUT_MAX_DIGITS + 1)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: grpc-timeout must be 1 to %d digits and a unit, "
                             "got \"%.16s\"",
                             LC_GRPC_TIMEOUT_MAX_DIGITS, v);
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "protocol error: invalid grpc-timeout \"%.16s\"", v);
        value = value * 10 + (uint64_t)(v[i] - '0');
    }
    /* nanoseconds per unit; at most 8 digits, so hours fit in 64 bits as ms */
    uint64_t per_ms_num, per_ms_den;
    switch (v[n - 1]) {
    case 'H':
        per_ms_num = 3600000, per_ms_den = 1;
        break;
    case 'M':
        per_ms_num = 60000, per_ms_den = 1;
        break;
    case 'S':
        per_ms_num = 1000, per_ms_den = 1;
        break;
    case 'm':
        per_ms_num = 1, per_ms_den = 1;
        break;
    case 'u':
        per_ms_num = 1, per_ms_den = 1000;
        break;
    case 'n':
        per_ms_num = 1, per_ms_den = 1000000;
        break;
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "protocol error: grpc-timeout unit must be one of H M S m u n, got "
                             "\"%.16s\"",
                             v);
    }
    uint64_t out = (value * per_ms_num + per_ms_den - 1) / per_ms_den;
    *ms = out ? out : 1;
    return 0;
}

/* --------------------------------------------------------------- responses */

int lc_grpc_web_reply(lc_http_req_t *req, lc_grpc_kind_t kind, lc_buf_t *frames,
                      const lc_status_t *st)
{
    int rc = lc_grpc_append_trailers(frames, st);
    if (rc == 0 && kind == LC_GRPC_WEB_TEXT) {
        lc_buf_t text;
        lc_buf_init(&text, frames->max);
        rc = lc_base64_encode(frames->data, frames->len, &text);
        if (rc == 0)
            lc_http_reply(req, 200, lc_grpc_content_type(kind), text.data, text.len);
        lc_buf_fini(&text);
        return rc;
    }
    if (rc == 0)
        lc_http_reply(req, 200, lc_grpc_content_type(kind), frames->data, frames->len);
    return rc;
}

/* Native gRPC's error is Trailers-Only: no message, grpc-status in the
 * headers, which HTTP/1.1 and HTTP/2 both deliver without trailers. */
void lc_grpc_reply_error(lc_http_req_t *req, lc_grpc_kind_t kind, const lc_status_t *st)
{
    lc_status_t s = *st;
    if (s.code == LC_CODE_OK)
        s.code = LC_CODE_UNKNOWN;
    if (kind != LC_GRPC_NATIVE) {
        lc_buf_t frames;
        lc_buf_init(&frames, LC_BUF_UNLIMITED); /* bounded: one trailer frame */
        if (lc_grpc_web_reply(req, kind, &frames, &s) != 0)
            lc_http_reply(req, 500, "text/plain", "", 0);
        lc_buf_fini(&frames);
        return;
    }
    char code[16];
    lc_buf_t msg;
    snprintf(code, sizeof(code), "%d", (int)s.code);
    lc_buf_init(&msg, LC_BUF_UNLIMITED);
    lc_http_reply(req, 200, lc_grpc_content_type(kind), "", 0);
    lc_http_set_header(req, "grpc-status", code);
    if (s.msg[0] && lc_grpc_percent_encode(s.msg, &msg) == 0 && lc_buf_putc(&msg, 0) == 0)
        lc_http_set_header(req, "grpc-message", (const char *)msg.data);
    lc_buf_fini(&msg);
}
