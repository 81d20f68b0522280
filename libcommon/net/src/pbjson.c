/*
 * pbjson.c — proto3 JSON for any protobuf-c message, driven by its descriptor
 * (pyroscope-api.md §6.3). protobuf-c has no JSON support and no json_name in
 * its descriptors, so the lowerCamelCase name is derived from the proto field
 * name with protoc's rule (drop '_', upper-case the next letter).
 *
 * Encoding writes straight into an lc_buf_t. Decoding parses with jansson
 * (integers stay json_int_t, so int64 keeps its precision) and then walks the
 * tree against the descriptor, allocating everything through the caller's
 * ProtobufCAllocator. Every allocation is linked into the message as soon as
 * it is made, so on error protobuf_c_message_free_unpacked releases the partial
 * message for allocators that really free (an arena ignores it).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lc/base64.h"
#include "lc/pbjson.h"
#include "lc/utf8.h"

#define PBJSON_PATH_MAX 160  /* field path kept for error messages */
#define PBJSON_SEEN_BITS 512 /* duplicate detection covers the first 512 fields */

/* ------------------------------------------------------------------ helpers */

static void *member_at(const void *msg, unsigned offset)
{
    return (char *)msg + offset;
}

/* Size of one element of a repeated field, as protobuf-c lays arrays out. */
static size_t pb_elem_size(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    default:
        return 4; /* int32 family, uint32 family, float, enum */
    }
}

/* proto3 json_name rule: "profile_typeID" -> "profileTypeID", "ID" -> "ID". */
static bool json_name_equals(const char *proto_name, const char *key)
{
    bool upper_next = false;

    for (const char *p = proto_name; *p; p++) {
        if (*p == '_') {
            upper_next = true;
            continue;
        }
        char c = upper_next ? (char)toupper((unsigned char)*p) : *p;
        upper_next = false;
        if (*key++ != c)
            return false;
    }
    return *key == '\0';
}

static int put_json_name(lc_buf_t *out, const char *proto_name)
{
    bool upper_next = false;
    int rc = lc_buf_putc(out, '"');

    for (const char *p = proto_name; *p && rc == 0; p++) {
        if (*p == '_') {
            upper_next = true;
            continue;
        }
        rc = lc_buf_putc(out, upper_next ? (char)toupper((unsigned char)*p) : *p);
        upper_next = false;
    }
    return rc ? rc : lc_buf_puts(out, "\":");
}

/* ------------------------------------------------------------------ base64 */

static int put_base64(lc_buf_t *out, const uint8_t *data, size_t len)
{
    int rc = lc_buf_putc(out, '"');
    if (rc == 0)
        rc = lc_base64_encode(data, len, out);
    return rc ? rc : lc_buf_putc(out, '"');
}

/* Decodes standard or URL-safe base64, padded or not, into out (which holds at
 * least len * 3 / 4 bytes). Returns the decoded length, or -1 if malformed. */
static ptrdiff_t base64_decode(const char *in, size_t len, uint8_t *out)
{
    size_t pad = 0;
    while (len > 0 && in[len - 1] == '=' && pad < 2) {
        len--;
        pad++;
    }
    /* Padding, when present, must complete the last quantum exactly. */
    if (len % 4 == 1 || (pad && (len + pad) % 4 != 0))
        return -1;
    uint32_t acc = 0;
    size_t bits = 0, n = 0;
    for (size_t i = 0; i < len; i++) {
        int d = lc_base64_digit((unsigned char)in[i], true);
        if (d < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (ptrdiff_t)n;
}

/* ------------------------------------------------------------------ strings */

static int put_escaped_byte(lc_buf_t *out, unsigned char c)
{
    switch (c) {
    case '"':
        return lc_buf_puts(out, "\\\"");
    case '\\':
        return lc_buf_puts(out, "\\\\");
    case '\n':
        return lc_buf_puts(out, "\\n");
    case '\r':
        return lc_buf_puts(out, "\\r");
    case '\t':
        return lc_buf_puts(out, "\\t");
    case '\b':
        return lc_buf_puts(out, "\\b");
    case '\f':
        return lc_buf_puts(out, "\\f");
    default:
        return lc_buf_printf(out, "\\u%04x", c);
    }
}

int lc_pbjson_append_string(lc_buf_t *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    int rc = lc_buf_putc(out, '"');

    while (rc == 0 && i < len) {
        size_t run = i;
        while (run < len && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        rc = lc_buf_append(out, p + i, run - i);
        i = run;
        if (rc || i == len)
            break;
        size_t n = lc_utf8_decode(p + i, len - i, NULL);
        if (n > 1)
            rc = lc_buf_append(out, p + i, n);
        else if (n == 1)
            rc = put_escaped_byte(out, p[i]);
        else
            rc = lc_buf_puts(out, "\\ufffd"); /* JSON must be UTF-8: repair */
        i += n ? n : 1;
    }
    return rc ? rc : lc_buf_putc(out, '"');
}

/* ------------------------------------------------------------------ encode */

static int put_message(lc_buf_t *out, const ProtobufCMessage *msg, int depth);

/* Shortest "%g" form that reads back to the same value; NaN/Inf as strings. */
static int put_float(lc_buf_t *out, double v, bool single)
{
    char tmp[40];

    if (isnan(v))
        return lc_buf_puts(out, "\"NaN\"");
    if (isinf(v))
        return lc_buf_puts(out, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    if (v == 0 && signbit(v))
        return lc_buf_puts(out, "-0.0"); /* "-0" would read back as the integer 0 */
    for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        double back = strtod(tmp, NULL);
        if (single ? (float)back == (float)v : back == v)
            break;
    }
    return lc_buf_puts(out, tmp);
}

/* Integers are most of a flame graph's JSON: format them without printf. */
static int put_integer(lc_buf_t *out, bool negative, uint64_t magnitude, bool quoted)
{
    char tmp[24]; /* quote, sign, 20 digits, quote */
    char *end = tmp + sizeof(tmp), *p = end;

    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    if (negative)
        *--p = '-';
    if (quoted)
        *--p = '"';
    return lc_buf_append(out, p, (size_t)(end - p));
}

static int put_signed(lc_buf_t *out, int64_t v, bool quoted)
{
    /* 0 - (uint64_t)v is |v| even for INT64_MIN. */
    return put_integer(out, v < 0, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, quoted);
}

static int put_enum(lc_buf_t *out, const ProtobufCFieldDescriptor *f, int value)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, value);
    if (ev)
        return lc_buf_printf(out, "\"%s\"", ev->name);
    return lc_buf_printf(out, "%d", value); /* open enum: unknown values as numbers */
}

static int put_value(lc_buf_t *out, const ProtobufCFieldDescriptor *f, const void *v, int depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return put_signed(out, *(const int32_t *)v, false);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return put_integer(out, false, *(const uint32_t *)v, false);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return put_signed(out, *(const int64_t *)v, true);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return put_integer(out, false, *(const uint64_t *)v, true);
    case PROTOBUF_C_TYPE_FLOAT:
        return put_float(out, *(const float *)v, true);
    case PROTOBUF_C_TYPE_DOUBLE:
        return put_float(out, *(const double *)v, false);
    case PROTOBUF_C_TYPE_BOOL:
        return lc_buf_puts(out, *(const protobuf_c_boolean *)v ? "true" : "false");
    case PROTOBUF_C_TYPE_ENUM:
        return put_enum(out, f, *(const int *)v);
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        return lc_pbjson_append_string(out, s ? s : "", s ? strlen(s) : 0);
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = v;
        return put_base64(out, b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)v;
        return m ? put_message(out, m, depth + 1) : lc_buf_puts(out, "{}");
    }
    }
    return LC_EINPUT;
}

/* proto3 "default value" test for a singular field without presence. */
static bool value_is_default(const ProtobufCFieldDescriptor *f, const void *v)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        return !s || !s[0];
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)v)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(ProtobufCMessage *const *)v == NULL;
    case PROTOBUF_C_TYPE_BOOL:
        return *(const protobuf_c_boolean *)v == 0;
    default:
        break;
    }
    /* Numbers compare by bits, so -0.0 counts as set (as in protobuf-go). */
    if (pb_elem_size(f->type) == 8)
        return *(const uint64_t *)v == 0;
    return *(const uint32_t *)v == 0;
}

/* True when the field must appear in the JSON output. */
static bool field_is_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    const void *v = member_at(msg, f->offset);

    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)member_at(msg, f->quantifier_offset) > 0;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)member_at(msg, f->quantifier_offset) == f->id;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return *(ProtobufCMessage *const *)v != NULL;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED)
        return true;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const void *s = *(const void *const *)v;
            return s != NULL && s != f->default_value;
        }
        return *(const protobuf_c_boolean *)member_at(msg, f->quantifier_offset);
    }
    return !value_is_default(f, v);
}

static int put_repeated(lc_buf_t *out, const ProtobufCMessage *msg,
                        const ProtobufCFieldDescriptor *f, int depth)
{
    size_t n = *(const size_t *)member_at(msg, f->quantifier_offset);
    const char *elems = *(char *const *)member_at(msg, f->offset);
    size_t size = pb_elem_size(f->type);
    int rc = lc_buf_putc(out, '[');

    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i > 0)
            rc = lc_buf_putc(out, ',');
        if (rc == 0)
            rc = put_value(out, f, elems + i * size, depth);
    }
    return rc ? rc : lc_buf_putc(out, ']');
}

static int put_message(lc_buf_t *out, const ProtobufCMessage *msg, int depth)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    bool first = true;
    int rc;

    if (depth > LC_PBJSON_MAX_DEPTH)
        return LC_ETOOBIG;
    rc = lc_buf_putc(out, '{');
    for (unsigned i = 0; i < desc->n_fields && rc == 0; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (!field_is_present(msg, f))
            continue;
        if (!first)
            rc = lc_buf_putc(out, ',');
        first = false;
        if (rc == 0)
            rc = put_json_name(out, f->name);
        if (rc == 0 && f->label == PROTOBUF_C_LABEL_REPEATED)
            rc = put_repeated(out, msg, f, depth);
        else if (rc == 0)
            rc = put_value(out, f, member_at(msg, f->offset), depth);
    }
    return rc ? rc : lc_buf_putc(out, '}');
}

int lc_pbjson_encode(const ProtobufCMessage *msg, lc_buf_t *out)
{
    size_t start = out->len;
    int rc = put_message(out, msg, 1);
    if (rc)
        out->len = start; /* no half-written JSON on failure */
    return rc;
}

/* ------------------------------------------------------------------ decode */

typedef struct decoder_s {
    ProtobufCAllocator *alloc;
    lc_status_t *st;
    char path[PBJSON_PATH_MAX]; /* "stackTraceSelector.call_site[0].name", for errors */
    size_t path_len;
} decoder_t;

static int decode_message(decoder_t *d, const ProtobufCMessageDescriptor *desc, json_t *obj,
                          ProtobufCMessage **slot, int depth);

static int dec_fail(decoder_t *d, const char *fmt, ...) LC_PRINTF(2, 3);

/* Sets invalid_argument "field <path>: <why>". Returns -1. */
static int dec_fail(decoder_t *d, const char *fmt, ...)
{
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (d->path_len == 0)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT, "invalid JSON message: %s", why);
    return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT, "invalid JSON for field \"%s\": %s",
                         d->path, why);
}

/* Appends ".key" or "[i]" to the path; returns the length to restore. */
static size_t path_push(decoder_t *d, const char *key, size_t index, bool is_index)
{
    size_t old = d->path_len;
    size_t room = sizeof(d->path) - old;
    int n;

    if (is_index)
        n = snprintf(d->path + old, room, "[%zu]", index);
    else
        n = snprintf(d->path + old, room, "%s%s", old ? "." : "", key);
    d->path_len = n < 0 || (size_t)n >= room ? sizeof(d->path) - 1 : old + (size_t)n;
    return old;
}

static void path_pop(decoder_t *d, size_t old)
{
    d->path_len = old;
    d->path[old] = '\0';
}

/* Zeroed memory from the caller's allocator; NULL (status set) past its cap. */
static void *dec_alloc(decoder_t *d, size_t n, size_t size)
{
    void *p = NULL;
    size_t bytes = n * size;

    if (size == 0 || n <= SIZE_MAX / size)
        p = d->alloc->alloc(d->alloc->allocator_data, bytes > 0 ? bytes : 1);
    if (!p) {
        lc_status_set(d->st, LC_CODE_RESOURCE_EXHAUSTED, "decoded message exceeds memory limit");
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    case JSON_NULL:
        return "null";
    }
    return "value";
}

/* An integer-valued double inside [min, max] (both exactly representable ends). */
static bool double_to_int64(double x, int64_t min, int64_t max, int64_t *out)
{
    if (!isfinite(x) || x != floor(x) || x < (double)min || x >= 9223372036854775808.0 ||
        x > (double)max)
        return false;
    *out = (int64_t)x;
    return *out >= min && *out <= max;
}

/* Only plain JSON-number text: strtod would also take "inf", "nan", hex, spaces. */
static bool looks_numeric(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && !strchr("+-.eE", *p))
            return false;
    return isdigit((unsigned char)s[0]) || s[0] == '-';
}

/* int64-valued text ("123", "-5", "1e3"); false if not an integer in range. */
static bool string_to_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;

    if (!looks_numeric(s))
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end == '\0') {
        *out = v;
        return errno == 0 && v >= min && v <= max;
    }
    double x = strtod(s, &end);
    return *end == '\0' && double_to_int64(x, min, max, out);
}

static int read_signed(decoder_t *d, json_t *v, int64_t min, int64_t max, int64_t *out)
{
    bool ok = false;

    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        ok = *out >= min && *out <= max;
    } else if (json_is_real(v)) {
        ok = double_to_int64(json_real_value(v), min, max, out);
    } else if (json_is_string(v)) {
        ok = string_to_int64(json_string_value(v), min, max, out);
    } else {
        return dec_fail(d, "expected an integer, got %s", json_kind(v));
    }
    return ok ? 0 : dec_fail(d, "not an integer in range [%" PRId64 ", %" PRId64 "]", min, max);
}

static bool string_to_uint64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    int64_t zero;

    if (!looks_numeric(s))
        return false;
    if (s[0] == '-') { /* strtoull would wrap; only "-0" spells a valid value */
        *out = 0;
        return string_to_int64(s, 0, 0, &zero);
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == '\0') {
        *out = v;
        return errno == 0 && v <= max;
    }
    double x = strtod(s, &end);
    if (*end != '\0' || !isfinite(x) || x != floor(x) || x < 0 || x >= 18446744073709551616.0)
        return false;
    *out = (uint64_t)x;
    return *out <= max;
}

static int read_unsigned(decoder_t *d, json_t *v, uint64_t max, uint64_t *out)
{
    bool ok = false;
    int64_t i;

    if (json_is_integer(v)) {
        i = json_integer_value(v);
        *out = (uint64_t)i;
        ok = i >= 0 && (uint64_t)i <= max;
    } else if (json_is_real(v)) {
        ok = double_to_int64(json_real_value(v), 0, INT64_MAX, &i) && (uint64_t)i <= max;
        *out = ok ? (uint64_t)i : 0;
    } else if (json_is_string(v)) {
        ok = string_to_uint64(json_string_value(v), max, out);
    } else {
        return dec_fail(d, "expected an unsigned integer, got %s", json_kind(v));
    }
    return ok ? 0 : dec_fail(d, "not an integer in range [0, %" PRIu64 "]", max);
}

static bool string_to_double(const char *s, double *out)
{
    char *end;

    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
    } else if (strcmp(s, "Infinity") == 0) {
        *out = INFINITY;
    } else if (strcmp(s, "-Infinity") == 0) {
        *out = -INFINITY;
    } else {
        if (!looks_numeric(s))
            return false;
        errno = 0;
        *out = strtod(s, &end);
        return *end == '\0' && errno != ERANGE;
    }
    return true;
}

static int read_double(decoder_t *d, json_t *v, bool single, double *out)
{
    if (json_is_integer(v))
        *out = (double)json_integer_value(v);
    else if (json_is_real(v))
        *out = json_real_value(v);
    else if (!json_is_string(v))
        return dec_fail(d, "expected a number, got %s", json_kind(v));
    else if (!string_to_double(json_string_value(v), out))
        return dec_fail(d, "not a number: \"%.40s\"", json_string_value(v));
    /* Past FLT_MAX plus half an ulp a float would round to infinity. */
    if (single && isfinite(*out) && fabs(*out) >= 0x1.ffffffp+127)
        return dec_fail(d, "out of range for float");
    return 0;
}

static int read_bool(decoder_t *d, json_t *v, protobuf_c_boolean *out)
{
    if (!json_is_boolean(v))
        return dec_fail(d, "expected a bool, got %s", json_kind(v));
    *out = json_is_true(v);
    return 0;
}

/* Enums by name or number. Unknown names leave the default, as protobuf-go does
 * with DiscardUnknown (what connect-go servers use). */
static int read_enum(decoder_t *d, const ProtobufCFieldDescriptor *f, json_t *v, int *out)
{
    int64_t n;

    if (json_is_string(v)) {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
        if (ev)
            *out = ev->value;
        return 0;
    }
    if (!json_is_integer(v) && !json_is_real(v))
        return dec_fail(d, "expected an enum name or number, got %s", json_kind(v));
    if (read_signed(d, v, INT32_MIN, INT32_MAX, &n))
        return -1;
    *out = (int)n;
    return 0;
}

static int read_string(decoder_t *d, json_t *v, char **out)
{
    if (!json_is_string(v))
        return dec_fail(d, "expected a string, got %s", json_kind(v));
    size_t len = json_string_length(v);
    char *s = dec_alloc(d, len + 1, 1);
    if (!s)
        return -1;
    memcpy(s, json_string_value(v), len);
    *out = s;
    return 0;
}

static int read_bytes(decoder_t *d, json_t *v, ProtobufCBinaryData *out)
{
    if (!json_is_string(v))
        return dec_fail(d, "expected a base64 string, got %s", json_kind(v));
    size_t len = json_string_length(v);
    if (len == 0)
        return 0;
    uint8_t *data = dec_alloc(d, len / 4 * 3 + 3, 1);
    if (!data)
        return -1;
    out->data = data; /* linked before decoding so an error still frees it */
    ptrdiff_t n = base64_decode(json_string_value(v), len, data);
    if (n < 0)
        return dec_fail(d, "invalid base64");
    out->len = (size_t)n;
    return 0;
}

static int read_int_into(decoder_t *d, const ProtobufCFieldDescriptor *f, json_t *v, void *slot)
{
    int64_t i;
    uint64_t u;
    int rc;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        rc = read_signed(d, v, INT32_MIN, INT32_MAX, &i);
        if (rc == 0)
            *(int32_t *)slot = (int32_t)i;
        return rc;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        rc = read_unsigned(d, v, UINT32_MAX, &u);
        if (rc == 0)
            *(uint32_t *)slot = (uint32_t)u;
        return rc;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return read_unsigned(d, v, UINT64_MAX, (uint64_t *)slot);
    default:
        return read_signed(d, v, INT64_MIN, INT64_MAX, (int64_t *)slot);
    }
}

/* Decodes one (non-null) JSON value into the storage of a singular field or of
 * one element of a repeated field. */
static int read_value(decoder_t *d, const ProtobufCFieldDescriptor *f, json_t *v, void *slot,
                      int depth)
{
    double x;

    switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT:
        if (read_double(d, v, true, &x))
            return -1;
        *(float *)slot = (float)x;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return read_double(d, v, false, (double *)slot);
    case PROTOBUF_C_TYPE_BOOL:
        return read_bool(d, v, (protobuf_c_boolean *)slot);
    case PROTOBUF_C_TYPE_ENUM:
        return read_enum(d, f, v, (int *)slot);
    case PROTOBUF_C_TYPE_STRING:
        return read_string(d, v, (char **)slot);
    case PROTOBUF_C_TYPE_BYTES:
        return read_bytes(d, v, (ProtobufCBinaryData *)slot);
    case PROTOBUF_C_TYPE_MESSAGE:
        return decode_message(d, f->descriptor, v, (ProtobufCMessage **)slot, depth + 1);
    default:
        return read_int_into(d, f, v, slot);
    }
}

static int read_repeated(decoder_t *d, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                         json_t *arr, int depth)
{
    if (!json_is_array(arr))
        return dec_fail(d, "expected an array, got %s", json_kind(arr));
    size_t n = json_array_size(arr), size = pb_elem_size(f->type);
    if (n == 0)
        return 0;
    char *elems = dec_alloc(d, n, size);
    if (!elems)
        return -1;
    size_t *count = member_at(msg, f->quantifier_offset);
    *(void **)member_at(msg, f->offset) = elems;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        size_t mark = path_push(d, NULL, i, true);
        /* Counted before decoding: the zeroed slot is safe to free on error. */
        *count = i + 1;
        int rc = json_is_null(v) ? dec_fail(d, "null is not allowed in a list")
                                 : read_value(d, f, v, elems + i * size, depth);
        path_pop(d, mark);
        if (rc)
            return rc;
    }
    return 0;
}

/* Marks presence for proto2-style optional scalars and for oneof members. */
static int mark_present(decoder_t *d, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    void *q = member_at(msg, f->quantifier_offset);

    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = q;
        if (*which != 0 && *which != f->id)
            return dec_fail(d, "another member of its oneof is already set");
        *which = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
               f->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)q = 1;
    }
    return 0;
}

static int read_field(decoder_t *d, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                      json_t *v, int depth)
{
    if (json_is_null(v))
        return 0; /* null means "default" */
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return read_repeated(d, msg, f, v, depth);
    if (mark_present(d, msg, f))
        return -1;
    return read_value(d, f, v, member_at(msg, f->offset), depth);
}

/* The field a JSON key names: its json_name first, then its proto name. */
static int find_field(const ProtobufCMessageDescriptor *desc, const char *key)
{
    for (unsigned i = 0; i < desc->n_fields; i++)
        if (json_name_equals(desc->fields[i].name, key))
            return (int)i;
    for (unsigned i = 0; i < desc->n_fields; i++)
        if (strcmp(desc->fields[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* Proto name and json name of one field must not both appear (protobuf-go
 * rejects that too; for repeated fields the result would be ambiguous). */
static bool seen_before(uint64_t *seen, int idx)
{
    if (idx >= PBJSON_SEEN_BITS)
        return false;
    uint64_t bit = (uint64_t)1 << (idx % 64);
    bool was = (seen[idx / 64] & bit) != 0;
    seen[idx / 64] |= bit;
    return was;
}

static int read_fields(decoder_t *d, ProtobufCMessage *msg, json_t *obj, int depth)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    uint64_t seen[PBJSON_SEEN_BITS / 64] = {0};
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v)
    {
        int idx = find_field(desc, key);
        if (idx < 0)
            continue; /* unknown fields are ignored (connect-go DiscardUnknown) */
        size_t mark = path_push(d, key, 0, false);
        int rc = seen_before(seen, idx) ? dec_fail(d, "field given twice")
                                        : read_field(d, msg, &desc->fields[idx], v, depth);
        path_pop(d, mark);
        if (rc)
            return rc;
    }
    return 0;
}

/* Allocates a message, links it into *slot, then fills it from obj. */
static int decode_message(decoder_t *d, const ProtobufCMessageDescriptor *desc, json_t *obj,
                          ProtobufCMessage **slot, int depth)
{
    if (depth > LC_PBJSON_MAX_DEPTH)
        return dec_fail(d, "nesting deeper than %d", LC_PBJSON_MAX_DEPTH);
    if (!json_is_object(obj))
        return dec_fail(d, "expected an object, got %s", json_kind(obj));
    ProtobufCMessage *msg = dec_alloc(d, 1, desc->sizeof_message);
    if (!msg)
        return -1;
    desc->message_init(msg);
    *slot = msg;
    return read_fields(d, msg, obj, depth);
}

/* Rejects JSON nested deeper than max before jansson (whose own limit is 2048)
 * builds it: caps the work an attacker can cause with unknown, deep fields. */
static bool json_depth_within(const uint8_t *s, size_t len, int max)
{
    int depth = 0;
    bool in_string = false;

    for (size_t i = 0; i < len; i++) {
        uint8_t c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > max)
                return false;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return true;
}

static json_t *parse_json(const uint8_t *json, size_t len, lc_status_t *st)
{
    json_error_t jerr;

    if (len == 0) {
        lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "empty JSON body (send {} for no fields)");
        return NULL;
    }
    if (!json_depth_within(json, len, LC_PBJSON_MAX_DEPTH)) {
        lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "JSON nested deeper than %d",
                      LC_PBJSON_MAX_DEPTH);
        return NULL;
    }
    json_t *root = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid JSON at line %d column %d: %s",
                      jerr.line, jerr.column, jerr.text);
    return root;
}

int lc_pbjson_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *json, size_t len,
                     ProtobufCAllocator *alloc, ProtobufCMessage **out, lc_status_t *st)
{
    decoder_t d = {.alloc = alloc, .st = st};
    ProtobufCMessage *msg = NULL;

    *out = NULL;
    json_t *root = parse_json(json, len, st);
    if (!root)
        return -1;
    int rc = decode_message(&d, desc, root, &msg, 1);
    json_decref(root);
    if (rc) {
        protobuf_c_message_free_unpacked(msg, alloc);
        return -1;
    }
    *out = msg;
    return 0;
}
