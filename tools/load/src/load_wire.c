/*
 * load_wire.c — request and response bytes (load_wire.h).
 */
#include <string.h>

#include <jansson.h>

#include "lc/err.h"
#include "lc/gz.h"
#include "lc/pbjson.h"
#include "load_wire.h"
#include "querier/v1/querier.pb-c.h"

#define PPROF_TIME_NANOS_FIELD 9

/* Skips one field's payload of wire type wt at *p. */
static int wire_skip(const uint8_t **p, const uint8_t *end, unsigned wt)
{
    uint64_t v;
    switch (wt) {
    case 0:
        return lc_uvarint_get(p, end, &v);
    case 1:
        if (end - *p < 8)
            return LC_ECORRUPT;
        *p += 8;
        return 0;
    case 2:
        if (lc_uvarint_get(p, end, &v) || v > (uint64_t)(end - *p))
            return LC_ECORRUPT;
        *p += v;
        return 0;
    case 5:
        if (end - *p < 4)
            return LC_ECORRUPT;
        *p += 4;
        return 0;
    default:
        return LC_ECORRUPT; /* groups are not used by pprof */
    }
}

static int copy_without_time(const uint8_t *p, const uint8_t *end, lc_buf_t *out)
{
    while (p < end) {
        const uint8_t *field = p;
        uint64_t tag;
        if (lc_uvarint_get(&p, end, &tag) || (tag >> 3) == 0)
            return LC_ECORRUPT;
        int rc = wire_skip(&p, end, (unsigned)(tag & 7));
        if (rc)
            return rc;
        if ((tag >> 3) != PPROF_TIME_NANOS_FIELD && lc_buf_append(out, field, (size_t)(p - field)))
            return LC_ETOOBIG;
    }
    return 0;
}

int ld_pprof_strip_time(const uint8_t *raw, size_t len, lc_buf_t *out)
{
    lc_buf_t plain;
    lc_buf_init(&plain, LD_MAX_PROFILE_BYTES);
    if (lc_gz_is_gzip(raw, len)) {
        int rc = lc_gunzip(raw, len, LD_MAX_PROFILE_BYTES, &plain);
        if (rc) {
            lc_buf_fini(&plain);
            return rc;
        }
        raw = plain.data;
        len = plain.len;
    } else if (len > LD_MAX_PROFILE_BYTES) {
        return LC_ETOOBIG;
    }
    int rc = len ? copy_without_time(raw, raw + len, out) : LC_ECORRUPT;
    lc_buf_fini(&plain);
    return rc;
}

int ld_pprof_stamp(const uint8_t *stripped, size_t len, int64_t time_ns, lc_buf_t *out)
{
    if (lc_buf_append(out, stripped, len) || lc_buf_putc(out, PPROF_TIME_NANOS_FIELD << 3) ||
        lc_buf_put_uvarint(out, (uint64_t)time_ns))
        return LC_ETOOBIG;
    return 0;
}

const char *ld_codec_content_type(ld_codec_t codec)
{
    return codec == LD_CODEC_JSON ? "application/json" : "application/proto";
}

int ld_encode(const ProtobufCMessage *msg, ld_codec_t codec, lc_buf_t *out)
{
    if (codec == LD_CODEC_JSON)
        return lc_pbjson_encode(msg, out);
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (lc_buf_reserve(out, n))
        return LC_ETOOBIG;
    protobuf_c_message_pack(msg, out->data + out->len);
    out->len += n;
    return 0;
}

int ld_encode_select(ld_method_t method, const char *type, const char *selector, int64_t start_ms,
                     int64_t end_ms, double step, ld_codec_t codec, lc_buf_t *out)
{
    char *t = (char *)type, *sel = (char *)(selector[0] ? selector : "{}");
    if (method == LD_SELECT_SERIES) {
        Querier__V1__SelectSeriesRequest m = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
        m.profile_typeid = t;
        m.label_selector = sel;
        m.start = start_ms;
        m.end = end_ms;
        m.step = step;
        return ld_encode(&m.base, codec, out);
    }
    if (method == LD_SELECT_MERGE_STACKTRACES) {
        Querier__V1__SelectMergeStacktracesRequest m =
            QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
        m.profile_typeid = t;
        m.label_selector = sel;
        m.start = start_ms;
        m.end = end_ms;
        return ld_encode(&m.base, codec, out);
    }
    if (method == LD_SELECT_MERGE_PROFILE) {
        Querier__V1__SelectMergeProfileRequest m = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
        m.profile_typeid = t;
        m.label_selector = sel;
        m.start = start_ms;
        m.end = end_ms;
        return ld_encode(&m.base, codec, out);
    }
    return LC_EINPUT;
}

int ld_decode(const ProtobufCMessageDescriptor *desc, ld_codec_t codec, const uint8_t *body,
              size_t len, lc_arena_t *arena, ProtobufCMessage **out)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(arena, &alloc);
    if (codec == LD_CODEC_JSON) {
        lc_status_t st;
        return lc_pbjson_decode(desc, body, len, &alloc, out, &st) ? -1 : 0;
    }
    *out = protobuf_c_message_unpack(desc, &alloc, len, body);
    return *out ? 0 : -1;
}

/* The "code" member of a Connect error body, copied into buf; NULL if none. */
static const char *error_body_code(const uint8_t *body, size_t len, char *buf, size_t buf_len)
{
    json_error_t jerr;
    json_t *root = len ? json_loadb((const char *)body, len, 0, &jerr) : NULL;
    const char *code = root ? json_string_value(json_object_get(root, "code")) : NULL;
    const char *res = NULL;
    /* "ok" is no error code: a failed call is never counted as a success */
    if (code && lc_code_from_name(code) > LC_CODE_OK) {
        snprintf(buf, buf_len, "%s", code);
        res = buf;
    }
    json_decref(root);
    return res;
}

const char *ld_result_code(long http_status, const char *transport_error, const uint8_t *body,
                           size_t len, char *buf, size_t buf_len)
{
    if (http_status == 0) {
        if (transport_error && strcmp(transport_error, "timeout") == 0)
            return "deadline_exceeded";
        return "unavailable";
    }
    if (http_status == 200)
        return "ok";
    const char *code = error_body_code(body, len, buf, buf_len);
    return code ? code : lc_code_name(lc_code_from_http((int)http_status));
}
