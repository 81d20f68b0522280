/*
 * test_pbjson.c — proto3 JSON codec. Expected JSON is written by hand from
 * pyroscope-api.md §6.3 (field names, int64 as strings, enums by name, base64
 * with padding, defaults omitted), never captured from the encoder.
 */
#include <math.h>

#include "google/v1/profile.pb-c.h"
#include "lc/alloc.h"
#include "lc/pbjson.h"
#include "lc_test.h"
#include "push/v1/push.pb-c.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

/* ---- helpers ---- */

static char encoded[8192];

/* Encodes msg and returns the JSON text (static storage, NUL-terminated). */
static const char *to_json(const void *msg)
{
    lc_buf_t b;
    lc_buf_init(&b, sizeof(encoded) - 1);
    int rc = lc_pbjson_encode(msg, &b);
    LC_ASSERT_OK(rc);
    memcpy(encoded, b.data, b.len);
    encoded[rc ? 0 : b.len] = '\0';
    lc_buf_fini(&b);
    return encoded;
}

typedef struct decoded_s {
    lc_arena_t *arena;
    ProtobufCAllocator alloc;
    lc_status_t st;
    ProtobufCMessage *msg;
    int rc;
} decoded_t;

static void decode(decoded_t *d, const ProtobufCMessageDescriptor *desc, const char *json)
{
    memset(d, 0, sizeof(*d));
    d->arena = lc_arena_new(1 << 20);
    lc_arena_pb_allocator(d->arena, &d->alloc);
    d->rc = lc_pbjson_decode(desc, (const uint8_t *)json, strlen(json), &d->alloc, &d->msg, &d->st);
}

static void decoded_fini(decoded_t *d)
{
    lc_arena_free(d->arena);
}

/* Asserts that json fails to decode as desc with invalid_argument whose message
 * contains `mention` (the field name). */
static void expect_invalid(const ProtobufCMessageDescriptor *desc, const char *json,
                           const char *mention)
{
    decoded_t d;
    decode(&d, desc, json);
    LC_ASSERT_EQ(d.rc, -1);
    LC_ASSERT_EQ(d.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_CHECK(d.msg == NULL);
    if (!strstr(d.st.msg, mention))
        fprintf(stderr, "  input %s\n  message \"%s\" lacks \"%s\"\n", json, d.st.msg, mention);
    LC_CHECK(strstr(d.st.msg, mention) != NULL);
    decoded_fini(&d);
}

/* ---- a hand-built descriptor covering what the Pyroscope protos lack:
 * float, sint32, sfixed64, fixed32, a proto2-style optional with has_, a oneof,
 * repeated float and bool. ---- */

typedef struct scalars_s {
    ProtobufCMessage base;
    float f_float;
    int32_t f_sint32;
    int64_t f_sfixed64;
    uint32_t f_fixed32;
    uint64_t f_uint64;
    protobuf_c_boolean has_opt_int32;
    int32_t opt_int32;
    uint32_t choice_case;
    union {
        char *choice_a;
        int64_t choice_b;
    };
    size_t n_r_float;
    float *r_float;
    size_t n_r_bool;
    protobuf_c_boolean *r_bool;
} scalars_t;

#define SCALAR_FIELD(nm, id, label, type, q, member)                                               \
    {                                                                                              \
        nm, id, label, type, q, offsetof(scalars_t, member), NULL, NULL, 0, 0, NULL, NULL          \
    }

static const ProtobufCFieldDescriptor scalars_fields[] = {
    SCALAR_FIELD("f_float", 1, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_FLOAT, 0, f_float),
    SCALAR_FIELD("f_sint32", 2, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_SINT32, 0, f_sint32),
    SCALAR_FIELD("f_sfixed64", 3, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_SFIXED64, 0, f_sfixed64),
    SCALAR_FIELD("f_fixed32", 4, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_FIXED32, 0, f_fixed32),
    SCALAR_FIELD("f_uint64", 5, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_UINT64, 0, f_uint64),
    SCALAR_FIELD("opt_int32", 6, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_INT32,
                 offsetof(scalars_t, has_opt_int32), opt_int32),
    {"choice_a", 7, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_STRING, offsetof(scalars_t, choice_case),
     offsetof(scalars_t, choice_a), NULL, NULL, PROTOBUF_C_FIELD_FLAG_ONEOF, 0, NULL, NULL},
    {"choice_b", 8, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_INT64, offsetof(scalars_t, choice_case),
     offsetof(scalars_t, choice_b), NULL, NULL, PROTOBUF_C_FIELD_FLAG_ONEOF, 0, NULL, NULL},
    SCALAR_FIELD("r_float", 9, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_FLOAT,
                 offsetof(scalars_t, n_r_float), r_float),
    SCALAR_FIELD("r_bool", 10, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_BOOL,
                 offsetof(scalars_t, n_r_bool), r_bool),
};
/* Field indices sorted by name, as protoc-c emits them. */
static const unsigned scalars_by_name[] = {6, 7, 3, 0, 2, 1, 4, 5, 9, 8};
static const ProtobufCIntRange scalars_ranges[] = {{1, 0}, {0, 10}};

static void scalars_init(scalars_t *m);

static const ProtobufCMessageDescriptor scalars_descriptor = {PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
                                                              "test.Scalars",
                                                              "Scalars",
                                                              "Scalars",
                                                              "test",
                                                              sizeof(scalars_t),
                                                              10,
                                                              scalars_fields,
                                                              scalars_by_name,
                                                              1,
                                                              scalars_ranges,
                                                              (ProtobufCMessageInit)scalars_init,
                                                              NULL,
                                                              NULL,
                                                              NULL};

static void scalars_init(scalars_t *m)
{
    memset(m, 0, sizeof(*m));
    m->base.descriptor = &scalars_descriptor;
}

/* ---- encoding ---- */

static void test_encode_flamegraph_int64_as_strings(void)
{
    int64_t v0[] = {0, 100, 0, 0}, v1[] = {0, 100, 40, 1};
    Querier__V1__Level l0 = QUERIER__V1__LEVEL__INIT, l1 = QUERIER__V1__LEVEL__INIT;
    Querier__V1__Level *levels[] = {&l0, &l1};
    char *names[] = {"total", "main", "foo"};
    Querier__V1__FlameGraph fg = QUERIER__V1__FLAME_GRAPH__INIT;

    l0.n_values = 4, l0.values = v0;
    l1.n_values = 4, l1.values = v1;
    fg.n_names = 3, fg.names = names;
    fg.n_levels = 2, fg.levels = levels;
    fg.total = 100;
    fg.max_self = 60;
    LC_ASSERT_STR_EQ(to_json(&fg), "{\"names\":[\"total\",\"main\",\"foo\"],"
                                   "\"levels\":[{\"values\":[\"0\",\"100\",\"0\",\"0\"]},"
                                   "{\"values\":[\"0\",\"100\",\"40\",\"1\"]}],"
                                   "\"total\":\"100\",\"maxSelf\":\"60\"}");
}

static void test_encode_flamegraph_diff_camel_fields(void)
{
    Querier__V1__FlameGraphDiff fg = QUERIER__V1__FLAME_GRAPH_DIFF__INIT;
    fg.leftticks = 5;
    fg.rightticks = -7;
    LC_ASSERT_STR_EQ(to_json(&fg), "{\"leftTicks\":\"5\",\"rightTicks\":\"-7\"}");
}

static void test_encode_select_series_doubles_and_ms(void)
{
    Types__V1__LabelPair lp = TYPES__V1__LABEL_PAIR__INIT;
    Types__V1__LabelPair *labels[] = {&lp};
    Types__V1__Point p[4] = {TYPES__V1__POINT__INIT, TYPES__V1__POINT__INIT, TYPES__V1__POINT__INIT,
                             TYPES__V1__POINT__INIT};
    Types__V1__Point *points[] = {&p[0], &p[1], &p[2], &p[3]};
    Types__V1__Series s = TYPES__V1__SERIES__INIT;
    Types__V1__Series *series[] = {&s};
    Querier__V1__SelectSeriesResponse resp = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;

    lp.name = "service_name", lp.value = "app";
    p[0].value = 1.5, p[0].timestamp = 1676282400000;
    p[1].value = 0, p[1].timestamp = 1676282410000;
    p[2].value = 0.1, p[2].timestamp = 1676282420000;
    p[3].value = 1e21, p[3].timestamp = 1676282430000;
    s.n_labels = 1, s.labels = labels;
    s.n_points = 4, s.points = points;
    resp.n_series = 1, resp.series = series;
    LC_ASSERT_STR_EQ(to_json(&resp),
                     "{\"series\":[{\"labels\":[{\"name\":\"service_name\",\"value\":\"app\"}],"
                     "\"points\":[{\"value\":1.5,\"timestamp\":\"1676282400000\"},"
                     "{\"timestamp\":\"1676282410000\"},"
                     "{\"value\":0.1,\"timestamp\":\"1676282420000\"},"
                     "{\"value\":1e+21,\"timestamp\":\"1676282430000\"}]}]}");
}

static void test_encode_non_finite_doubles_as_strings(void)
{
    Types__V1__Point p = TYPES__V1__POINT__INIT;
    p.value = NAN;
    LC_ASSERT_STR_EQ(to_json(&p), "{\"value\":\"NaN\"}");
    p.value = INFINITY;
    LC_ASSERT_STR_EQ(to_json(&p), "{\"value\":\"Infinity\"}");
    p.value = -INFINITY;
    LC_ASSERT_STR_EQ(to_json(&p), "{\"value\":\"-Infinity\"}");
    p.value = 1.0 / 3.0;
    LC_ASSERT_STR_EQ(to_json(&p), "{\"value\":0.3333333333333333}");
}

static void test_encode_profile_type_id_and_names(void)
{
    Types__V1__ProfileType pt = TYPES__V1__PROFILE_TYPE__INIT;
    pt.id = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    pt.name = "process_cpu";
    pt.sample_type = "cpu";
    pt.sample_unit = "nanoseconds";
    pt.period_type = "cpu";
    pt.period_unit = "nanoseconds";
    LC_ASSERT_STR_EQ(to_json(&pt), "{\"ID\":\"process_cpu:cpu:nanoseconds:cpu:nanoseconds\","
                                   "\"name\":\"process_cpu\",\"sampleType\":\"cpu\","
                                   "\"sampleUnit\":\"nanoseconds\",\"periodType\":\"cpu\","
                                   "\"periodUnit\":\"nanoseconds\"}");
}

static void test_encode_defaults_omitted(void)
{
    Querier__V1__SelectMergeStacktracesRequest req =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Querier__V1__SelectMergeStacktracesResponse resp =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    Types__V1__GoPGO pgo = TYPES__V1__GO_PGO__INIT;

    LC_ASSERT_STR_EQ(to_json(&req), "{}");
    LC_ASSERT_STR_EQ(to_json(&resp), "{}");
    LC_ASSERT_STR_EQ(to_json(&pgo), "{}");
}

static void test_encode_enum_bool_uint(void)
{
    Querier__V1__SelectMergeStacktracesRequest req =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Types__V1__GoPGO pgo = TYPES__V1__GO_PGO__INIT;
    Querier__V1__QueryScope qs = QUERIER__V1__QUERY_SCOPE__INIT;
    Types__V1__BlockCompaction bc = TYPES__V1__BLOCK_COMPACTION__INIT;

    req.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE;
    req.max_nodes = 16;
    LC_ASSERT_STR_EQ(to_json(&req), "{\"maxNodes\":\"16\",\"format\":\"PROFILE_FORMAT_TREE\"}");
    req.max_nodes = 0;
    req.format = 99; /* unknown values of an open enum stay numbers */
    LC_ASSERT_STR_EQ(to_json(&req), "{\"format\":99}");

    pgo.keep_locations = 3;
    pgo.aggregate_callees = 1;
    LC_ASSERT_STR_EQ(to_json(&pgo), "{\"keepLocations\":3,\"aggregateCallees\":true}");

    qs.component_count = UINT64_MAX;
    LC_ASSERT_STR_EQ(to_json(&qs), "{\"componentCount\":\"18446744073709551615\"}");

    bc.level = -1;
    LC_ASSERT_STR_EQ(to_json(&bc), "{\"level\":-1}");
}

static void test_encode_bytes_base64_padded(void)
{
    uint8_t tree[] = {0x00, 0x01, 0xfe, 0xff};
    Querier__V1__SelectMergeStacktracesResponse resp =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;

    resp.tree.len = 4, resp.tree.data = tree;
    LC_ASSERT_STR_EQ(to_json(&resp), "{\"tree\":\"AAH+/w==\"}");
    resp.tree.len = 3;
    LC_ASSERT_STR_EQ(to_json(&resp), "{\"tree\":\"AAH+\"}");
    resp.tree.len = 2;
    LC_ASSERT_STR_EQ(to_json(&resp), "{\"tree\":\"AAE=\"}");
}

static void test_encode_string_escapes_and_bad_utf8(void)
{
    Types__V1__LabelPair lp = TYPES__V1__LABEL_PAIR__INIT;
    lp.name = "q\"b\\n\nt\t\x01";
    lp.value = "caf\xc3\xa9 \xff!";
    LC_ASSERT_STR_EQ(to_json(&lp), "{\"name\":\"q\\\"b\\\\n\\nt\\t\\u0001\","
                                   "\"value\":\"caf\xc3\xa9 \\ufffd!\"}");
}

static void test_encode_scalars_oneof_optional(void)
{
    scalars_t m;
    float rf[] = {0.1f, -2.5f};
    protobuf_c_boolean rb[] = {1, 0};

    scalars_init(&m);
    LC_ASSERT_STR_EQ(to_json(&m), "{}");
    m.has_opt_int32 = 1; /* explicitly set optional: emitted even when zero */
    m.choice_case = 8;   /* oneof member: emitted even when zero */
    LC_ASSERT_STR_EQ(to_json(&m), "{\"optInt32\":0,\"choiceB\":\"0\"}");

    m.f_float = 0.1f;
    m.f_sint32 = -3;
    m.f_sfixed64 = INT64_MIN;
    m.f_fixed32 = UINT32_MAX;
    m.f_uint64 = 7;
    m.choice_case = 7;
    m.choice_a = "x";
    m.n_r_float = 2, m.r_float = rf;
    m.n_r_bool = 2, m.r_bool = rb;
    LC_ASSERT_STR_EQ(to_json(&m),
                     "{\"fFloat\":0.1,\"fSint32\":-3,\"fSfixed64\":\"-9223372036854775808\","
                     "\"fFixed32\":4294967295,\"fUint64\":\"7\",\"optInt32\":0,"
                     "\"choiceA\":\"x\",\"rFloat\":[0.1,-2.5],\"rBool\":[true,false]}");
}

static void test_encode_respects_buffer_cap(void)
{
    char *names[] = {"total", "a-rather-long-function-name"};
    Querier__V1__FlameGraph fg = QUERIER__V1__FLAME_GRAPH__INIT;
    lc_buf_t b;

    fg.n_names = 2, fg.names = names;
    lc_buf_init(&b, 20);
    LC_ASSERT_EQ(lc_pbjson_encode(&fg.base, &b), LC_ETOOBIG);
    LC_ASSERT_EQ(b.len, 0);
    lc_buf_fini(&b);
}

/* ---- decoding ---- */

static void test_decode_mixed_case_names(void)
{
    decoded_t d;
    decode(&d, &querier__v1__select_merge_stacktraces_request__descriptor,
           "{\"profile_typeID\":\"a\",\"labelSelector\":\"{}\",\"start\":\"1\",\"end\":2,"
           "\"maxNodes\":\"16\",\"stackTraceSelector\":{\"call_site\":[{\"name\":\"main\"}]}}");
    LC_ASSERT_OK(d.rc);
    Querier__V1__SelectMergeStacktracesRequest *r = (void *)d.msg;
    LC_ASSERT_STR_EQ(r->profile_typeid, "a");
    LC_ASSERT_STR_EQ(r->label_selector, "{}");
    LC_ASSERT_EQ(r->start, 1);
    LC_ASSERT_EQ(r->end, 2);
    LC_ASSERT_EQ(r->max_nodes, 16);
    LC_CHECK(r->stack_trace_selector != NULL);
    if (r->stack_trace_selector) {
        LC_ASSERT_EQ(r->stack_trace_selector->n_call_site, 1);
        LC_ASSERT_STR_EQ(r->stack_trace_selector->call_site[0]->name, "main");
        LC_CHECK(r->stack_trace_selector->go_pgo == NULL);
    }
    LC_ASSERT_EQ(r->n_profile_id_selector, 0);
    decoded_fini(&d);
}

static void test_decode_camel_and_snake_for_every_word(void)
{
    decoded_t d;
    decode(
        &d, &querier__v1__select_series_request__descriptor,
        "{\"profileTypeID\":\"p\",\"label_selector\":\"{x=\\\"y\\\"}\",\"groupBy\":[\"a\",\"b\"],"
        "\"step\":15.5,\"aggregation\":\"TIME_SERIES_AGGREGATION_TYPE_AVERAGE\","
        "\"exemplar_type\":2,\"limit\":3}");
    LC_ASSERT_OK(d.rc);
    Querier__V1__SelectSeriesRequest *r = (void *)d.msg;
    LC_ASSERT_STR_EQ(r->profile_typeid, "p");
    LC_ASSERT_STR_EQ(r->label_selector, "{x=\"y\"}");
    LC_ASSERT_EQ(r->n_group_by, 2);
    LC_ASSERT_STR_EQ(r->group_by[1], "b");
    LC_CHECK(r->step == 15.5);
    LC_ASSERT_EQ(r->aggregation,
                 TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE);
    LC_ASSERT_EQ(r->exemplar_type, TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL);
    LC_ASSERT_EQ(r->limit, 3);
    decoded_fini(&d);

    decode(&d, &types__v1__profile_type__descriptor, "{\"ID\":\"x\",\"sample_type\":\"cpu\"}");
    LC_ASSERT_OK(d.rc);
    LC_ASSERT_STR_EQ(((Types__V1__ProfileType *)d.msg)->id, "x");
    LC_ASSERT_STR_EQ(((Types__V1__ProfileType *)d.msg)->sample_type, "cpu");
    decoded_fini(&d);
}

static int decode_format(const char *json)
{
    decoded_t d;
    decode(&d, &querier__v1__select_merge_stacktraces_request__descriptor, json);
    LC_ASSERT_OK(d.rc);
    int format = d.rc ? -1 : (int)((Querier__V1__SelectMergeStacktracesRequest *)d.msg)->format;
    decoded_fini(&d);
    return format;
}

static void test_decode_enum_by_name_and_number(void)
{
    LC_ASSERT_EQ(decode_format("{\"format\":\"PROFILE_FORMAT_TREE\"}"), 2);
    LC_ASSERT_EQ(decode_format("{\"format\":3}"), 3);
    LC_ASSERT_EQ(decode_format("{\"format\":4.0}"), 4);
    LC_ASSERT_EQ(decode_format("{\"format\":42}"), 42); /* open enum */
    /* Unknown names are discarded like unknown fields (connect-go). */
    LC_ASSERT_EQ(decode_format("{\"format\":\"PROFILE_FORMAT_NOPE\"}"), 0);
    expect_invalid(&querier__v1__select_merge_stacktraces_request__descriptor, "{\"format\":true}",
                   "format");
    expect_invalid(&querier__v1__select_merge_stacktraces_request__descriptor,
                   "{\"format\":4294967296}", "format");
}

static void expect_raw_profile(const char *b64, const uint8_t *want, size_t want_len)
{
    char json[256];
    decoded_t d;

    snprintf(json, sizeof(json),
             "{\"series\":[{\"labels\":[{\"name\":\"__name__\",\"value\":\"cpu\"}],"
             "\"samples\":[{\"rawProfile\":\"%s\",\"ID\":\"id1\"}]}]}",
             b64);
    decode(&d, &push__v1__push_request__descriptor, json);
    LC_ASSERT_OK(d.rc);
    if (d.rc == 0) {
        Push__V1__PushRequest *r = (void *)d.msg;
        LC_ASSERT_EQ(r->n_series, 1);
        LC_ASSERT_EQ(r->series[0]->n_samples, 1);
        Push__V1__RawSample *s = r->series[0]->samples[0];
        LC_ASSERT_STR_EQ(s->id, "id1");
        LC_ASSERT_EQ(s->raw_profile.len, want_len);
        if (want_len > 0 && s->raw_profile.len == want_len)
            LC_ASSERT_MEM_EQ(s->raw_profile.data, want, want_len);
    }
    decoded_fini(&d);
}

static void test_decode_bytes_all_base64_variants(void)
{
    static const uint8_t four[] = {0x00, 0x01, 0xfe, 0xff};
    static const uint8_t pprof_magic[] = {0x1f, 0x8b, 0x08};

    expect_raw_profile("AAH+/w==", four, 4); /* standard, padded */
    expect_raw_profile("AAH+/w", four, 4);   /* standard, raw */
    expect_raw_profile("AAH-_w==", four, 4); /* URL-safe, padded */
    expect_raw_profile("AAH-_w", four, 4);   /* URL-safe, raw */
    expect_raw_profile("H4sI", pprof_magic, 3);
    expect_raw_profile("", four, 0);
    expect_invalid(&push__v1__push_request__descriptor,
                   "{\"series\":[{\"samples\":[{\"raw_profile\":\"A\"}]}]}",
                   "series[0].samples[0].raw_profile");
    expect_invalid(&push__v1__push_request__descriptor,
                   "{\"series\":[{\"samples\":[{\"rawProfile\":\"AA*A\"}]}]}", "rawProfile");
    expect_invalid(&push__v1__push_request__descriptor,
                   "{\"series\":[{\"samples\":[{\"rawProfile\":\"AA=\"}]}]}", "base64");
    expect_invalid(&push__v1__push_request__descriptor,
                   "{\"series\":[{\"samples\":[{\"rawProfile\":5}]}]}", "rawProfile");
}

static void test_decode_null_means_default(void)
{
    decoded_t d;
    decode(&d, &querier__v1__select_merge_stacktraces_request__descriptor,
           "{\"labelSelector\":null,\"stackTraceSelector\":null,\"profileIdSelector\":null,"
           "\"start\":null,\"format\":null,\"async\":null}");
    LC_ASSERT_OK(d.rc);
    Querier__V1__SelectMergeStacktracesRequest *r = (void *)d.msg;
    LC_ASSERT_STR_EQ(r->label_selector, "");
    LC_CHECK(r->stack_trace_selector == NULL);
    LC_CHECK(r->async == NULL);
    LC_ASSERT_EQ(r->n_profile_id_selector, 0);
    LC_ASSERT_EQ(r->start, 0);
    LC_ASSERT_EQ(r->format, 0);
    decoded_fini(&d);
    expect_invalid(&querier__v1__select_merge_stacktraces_request__descriptor,
                   "{\"profileIdSelector\":[\"a\",null]}", "profileIdSelector[1]");
}

static void test_decode_unknown_fields_ignored(void)
{
    decoded_t d;
    decode(&d, &querier__v1__profile_types_request__descriptor,
           "{\"foo\":{\"bar\":[1,{\"x\":null}]},\"start\":\"5\",\"Start\":9,\"end\":\"6\"}");
    LC_ASSERT_OK(d.rc);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)d.msg)->start, 5);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)d.msg)->end, 6);
    decoded_fini(&d);
}

static void test_decode_int_ranges(void)
{
    decoded_t d;
    decode(&d, &querier__v1__select_merge_stacktraces_request__descriptor,
           "{\"start\":\"-9223372036854775808\",\"end\":9223372036854775807,\"maxNodes\":\"1e3\"}");
    LC_ASSERT_OK(d.rc);
    Querier__V1__SelectMergeStacktracesRequest *r = (void *)d.msg;
    LC_CHECK(r->start == INT64_MIN);
    LC_CHECK(r->end == INT64_MAX);
    LC_ASSERT_EQ(r->max_nodes, 1000);
    decoded_fini(&d);

    decode(
        &d, &querier__v1__query_scope__descriptor,
        "{\"componentCount\":\"18446744073709551615\",\"blockCount\":12,\"series_count\":\"-0\"}");
    LC_ASSERT_OK(d.rc);
    LC_CHECK(((Querier__V1__QueryScope *)d.msg)->component_count == UINT64_MAX);
    LC_ASSERT_EQ(((Querier__V1__QueryScope *)d.msg)->block_count, 12);
    decoded_fini(&d);

    decode(&d, &types__v1__block_compaction__descriptor, "{\"level\":-2147483648}");
    LC_ASSERT_OK(d.rc);
    LC_ASSERT_EQ(((Types__V1__BlockCompaction *)d.msg)->level, INT32_MIN);
    decoded_fini(&d);
}

static void test_decode_type_errors_name_the_field(void)
{
    const ProtobufCMessageDescriptor *smr =
        &querier__v1__select_merge_stacktraces_request__descriptor;

    expect_invalid(smr, "{\"start\":true}", "\"start\"");
    expect_invalid(smr, "{\"labelSelector\":5}", "labelSelector");
    expect_invalid(smr, "{\"profileIdSelector\":\"x\"}", "profileIdSelector");
    expect_invalid(smr, "{\"stackTraceSelector\":[]}", "stackTraceSelector");
    expect_invalid(smr, "{\"stackTraceSelector\":{\"callSite\":[{\"name\":1}]}}",
                   "stackTraceSelector.callSite[0].name");
    expect_invalid(smr, "{\"maxNodes\":\"12abc\"}", "maxNodes");
    expect_invalid(smr, "{\"maxNodes\":\" 12\"}", "maxNodes");
    expect_invalid(smr, "{\"maxNodes\":1.5}", "maxNodes");
    expect_invalid(smr, "{\"maxNodes\":\"9223372036854775808\"}", "maxNodes");
    expect_invalid(smr, "{\"max_nodes\":1,\"maxNodes\":2}", "twice");
    expect_invalid(&types__v1__block_compaction__descriptor, "{\"level\":2147483648}", "level");
    expect_invalid(&types__v1__go_pgo__descriptor, "{\"keepLocations\":-1}", "keepLocations");
    expect_invalid(&types__v1__go_pgo__descriptor, "{\"aggregateCallees\":1}", "aggregateCallees");
    expect_invalid(&querier__v1__query_scope__descriptor, "{\"blockCount\":\"-1\"}", "blockCount");
    expect_invalid(&types__v1__point__descriptor, "{\"value\":\"inf\"}", "value");
    expect_invalid(&types__v1__point__descriptor, "{\"value\":\"0x10\"}", "value");
}

static void test_decode_rejects_bad_documents(void)
{
    const ProtobufCMessageDescriptor *desc = &querier__v1__profile_types_request__descriptor;
    decoded_t d;

    decode(&d, desc, "");
    LC_ASSERT_EQ(d.rc, -1);
    LC_ASSERT_EQ(d.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_CHECK(strstr(d.st.msg, "empty") != NULL);
    decoded_fini(&d);
    expect_invalid(desc, "   ", "invalid JSON");
    expect_invalid(desc, "[]", "object");
    expect_invalid(desc, "{\"start\":1", "invalid JSON");
    expect_invalid(desc, "{\"start\":1,\"start\":2}", "duplicate");
    expect_invalid(desc, "{\"start\":1} {}", "invalid JSON");

    decode(&d, desc, "{}");
    LC_ASSERT_OK(d.rc);
    LC_CHECK(d.msg != NULL && d.msg->descriptor == desc);
    decoded_fini(&d);
}

static void test_decode_doubles_and_specials(void)
{
    static const char *const inputs[] = {"1.5",          "\"2.5\"",       "3",   "\"NaN\"",
                                         "\"Infinity\"", "\"-Infinity\"", "-0.0"};
    static const double want[] = {1.5, 2.5, 3, NAN, INFINITY, -INFINITY, -0.0};
    char json[64];

    for (size_t i = 0; i < LC_ARRAY_LEN(inputs); i++) {
        decoded_t d;
        snprintf(json, sizeof(json), "{\"value\":%s}", inputs[i]);
        decode(&d, &types__v1__point__descriptor, json);
        LC_ASSERT_OK(d.rc);
        double v = d.rc ? 0 : ((Types__V1__Point *)d.msg)->value;
        LC_CHECK(isnan(want[i]) ? isnan(v) : v == want[i]);
        decoded_fini(&d);
    }
}

static void test_decode_scalars_oneof_optional(void)
{
    decoded_t d;
    decode(&d, &scalars_descriptor,
           "{\"fFloat\":\"0.25\",\"f_sint32\":-7,\"fSfixed64\":\"-9\",\"fFixed32\":4294967295,"
           "\"optInt32\":0,\"choice_b\":\"12\",\"rFloat\":[1,\"NaN\"],\"rBool\":[false,true]}");
    LC_ASSERT_OK(d.rc);
    scalars_t *m = (void *)d.msg;
    LC_CHECK(m->f_float == 0.25f);
    LC_ASSERT_EQ(m->f_sint32, -7);
    LC_ASSERT_EQ(m->f_sfixed64, -9);
    LC_ASSERT_EQ(m->f_fixed32, UINT32_MAX);
    LC_ASSERT_EQ(m->has_opt_int32, 1);
    LC_ASSERT_EQ(m->choice_case, 8);
    LC_ASSERT_EQ(m->choice_b, 12);
    LC_ASSERT_EQ(m->n_r_float, 2);
    LC_CHECK(m->r_float[0] == 1.0f && isnan(m->r_float[1]));
    LC_ASSERT_EQ(m->n_r_bool, 2);
    LC_ASSERT_EQ(m->r_bool[1], 1);
    decoded_fini(&d);

    expect_invalid(&scalars_descriptor, "{\"choiceA\":\"x\",\"choiceB\":1}", "oneof");
    expect_invalid(&scalars_descriptor, "{\"fFloat\":1e39}", "fFloat");
    expect_invalid(&scalars_descriptor, "{\"fFixed32\":4294967296}", "fFixed32");
}

/* 63 arrays inside the top object is depth 64: accepted. One more is not. */
static void test_decode_depth_cap(void)
{
    char json[256];
    size_t n = 0;
    decoded_t d;

    n += (size_t)snprintf(json + n, sizeof(json) - n, "{\"unknown\":");
    for (int i = 0; i < LC_PBJSON_MAX_DEPTH - 1; i++)
        json[n++] = '[';
    for (int i = 0; i < LC_PBJSON_MAX_DEPTH - 1; i++)
        json[n++] = ']';
    snprintf(json + n, sizeof(json) - n, "}");
    decode(&d, &querier__v1__profile_types_request__descriptor, json);
    LC_ASSERT_OK(d.rc);
    decoded_fini(&d);

    n = (size_t)snprintf(json, sizeof(json), "{\"unknown\":\"[[[\\\"\",\"x\":");
    for (int i = 0; i < LC_PBJSON_MAX_DEPTH; i++)
        json[n++] = '[';
    for (int i = 0; i < LC_PBJSON_MAX_DEPTH; i++)
        json[n++] = ']';
    snprintf(json + n, sizeof(json) - n, "}");
    expect_invalid(&querier__v1__profile_types_request__descriptor, json, "nested deeper");
}

/* ---- malloc-backed allocator: proves errors free partial messages ---- */

static int live_allocs;

static void *counting_alloc(void *data, size_t size)
{
    LC_UNUSED(data);
    live_allocs++;
    return lc_xmalloc(size);
}

static void counting_free(void *data, void *p)
{
    LC_UNUSED(data);
    if (p)
        live_allocs--;
    lc_free(p);
}

static void test_decode_with_freeing_allocator(void)
{
    ProtobufCAllocator alloc = {counting_alloc, counting_free, NULL};
    const char *good = "{\"series\":[{\"labels\":[{\"name\":\"a\",\"value\":\"b\"}],"
                       "\"samples\":[{\"rawProfile\":\"AAE=\",\"ID\":\"x\"}]}]}";
    const char *bad = "{\"series\":[{\"labels\":[{\"name\":\"a\",\"value\":\"b\"}],"
                      "\"samples\":[{\"rawProfile\":\"AAE=\",\"ID\":7}]}]}";
    ProtobufCMessage *msg;
    lc_status_t st = {0};

    LC_ASSERT_OK(lc_pbjson_decode(&push__v1__push_request__descriptor, (const uint8_t *)good,
                                  strlen(good), &alloc, &msg, &st));
    LC_CHECK(live_allocs > 0);
    protobuf_c_message_free_unpacked(msg, &alloc);
    LC_ASSERT_EQ(live_allocs, 0);

    LC_ASSERT_EQ(lc_pbjson_decode(&push__v1__push_request__descriptor, (const uint8_t *)bad,
                                  strlen(bad), &alloc, &msg, &st),
                 -1);
    LC_ASSERT_EQ(live_allocs, 0);
    LC_CHECK(strstr(st.msg, "series[0].samples[0].ID") != NULL);
}

/* ---- round trips: pack(msg) == pack(decode(encode(msg))) ---- */

static void expect_round_trip(const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *want = lc_xmalloc(len), *got = NULL;
    lc_buf_t json;
    decoded_t d = {0};

    protobuf_c_message_pack(msg, want);
    lc_buf_init(&json, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pbjson_encode(msg, &json));
    LC_ASSERT_OK(lc_buf_putc(&json, '\0'));
    decode(&d, msg->descriptor, (const char *)json.data);
    LC_ASSERT_OK(d.rc);
    if (d.rc)
        fprintf(stderr, "  %s\n  from %.300s\n", d.st.msg, (const char *)json.data);
    if (d.rc == 0) {
        LC_ASSERT_EQ(protobuf_c_message_get_packed_size(d.msg), len);
        got = lc_xmalloc(len);
        if (protobuf_c_message_pack(d.msg, got) == len)
            LC_ASSERT_MEM_EQ(got, want, len);
    }
    decoded_fini(&d);
    lc_buf_fini(&json);
    lc_free(want);
    lc_free(got);
}

static void test_round_trip_select_merge_stacktraces_request(void)
{
    Types__V1__Location loc = TYPES__V1__LOCATION__INIT;
    Types__V1__Location *locs[] = {&loc};
    Types__V1__GoPGO pgo = TYPES__V1__GO_PGO__INIT;
    Types__V1__StackTraceSelector sel = TYPES__V1__STACK_TRACE_SELECTOR__INIT;
    Querier__V1__AsyncQueryRequest async = QUERIER__V1__ASYNC_QUERY_REQUEST__INIT;
    char *ids[] = {"p1", "p\xc3\xa9"}, *traces[] = {"0123456789abcdef0123456789abcdef"};
    char *spans[] = {"0123456789abcdef", "fedcba9876543210"};
    Querier__V1__SelectMergeStacktracesRequest req =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;

    loc.name = "main.main";
    pgo.keep_locations = 5, pgo.aggregate_callees = 1;
    sel.n_call_site = 1, sel.call_site = locs, sel.go_pgo = &pgo;
    async.request_id = "r", async.type = QUERIER__V1__ASYNC_QUERY_TYPE__ASYNC_QUERY_TYPE_FORCE;
    req.profile_typeid = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    req.label_selector = "{service_name=\"app\"}";
    req.start = 1676282400000, req.end = -1;
    req.max_nodes = 8192;
    req.format = QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_DOT;
    req.stack_trace_selector = &sel;
    req.n_profile_id_selector = 2, req.profile_id_selector = ids;
    req.async = &async;
    req.n_trace_id_selector = 1, req.trace_id_selector = traces;
    req.n_span_selector = 2, req.span_selector = spans;
    expect_round_trip(&req.base);
}

static void test_round_trip_series_and_heatmap(void)
{
    double ymin[] = {0.5, -1e-300, 1.7976931348623157e308};
    int32_t counts[] = {1, -2, INT32_MAX};
    Types__V1__HeatmapSlot slot = TYPES__V1__HEATMAP_SLOT__INIT;
    Types__V1__HeatmapSlot *slots[] = {&slot};
    Types__V1__HeatmapSeries hs = TYPES__V1__HEATMAP_SERIES__INIT;

    slot.timestamp = 42;
    slot.n_y_min = 3, slot.y_min = ymin;
    slot.n_counts = 3, slot.counts = counts;
    hs.n_slots = 1, hs.slots = slots;
    expect_round_trip(&hs.base);

    scalars_t m;
    float rf[] = {3.4028235e38f, 1e-45f, 0.1f};
    scalars_init(&m);
    m.f_float = 1.17549435e-38f, m.f_sint32 = INT32_MIN, m.f_sfixed64 = INT64_MAX;
    m.f_uint64 = UINT64_MAX, m.has_opt_int32 = 1, m.choice_case = 7, m.choice_a = "";
    m.n_r_float = 3, m.r_float = rf;
    expect_round_trip(&m.base);
}

static void test_round_trip_real_pprof(void)
{
    size_t len = 0;
    unsigned char *raw = lc_test_read_file(LC_TESTDATA_DIR "/ingest/heap.pb", &len);
    LC_CHECK(raw != NULL);
    if (!raw)
        return;
    Google__V1__Profile *p = google__v1__profile__unpack(NULL, len, raw);
    LC_CHECK(p != NULL && p->n_sample > 0);
    if (p)
        expect_round_trip(&p->base);
    google__v1__profile__free_unpacked(p, NULL);
    free(raw);
}

LC_TEST_MAIN(test_encode_flamegraph_int64_as_strings, test_encode_flamegraph_diff_camel_fields,
             test_encode_select_series_doubles_and_ms, test_encode_non_finite_doubles_as_strings,
             test_encode_profile_type_id_and_names, test_encode_defaults_omitted,
             test_encode_enum_bool_uint, test_encode_bytes_base64_padded,
             test_encode_string_escapes_and_bad_utf8, test_encode_scalars_oneof_optional,
             test_encode_respects_buffer_cap, test_decode_mixed_case_names,
             test_decode_camel_and_snake_for_every_word, test_decode_enum_by_name_and_number,
             test_decode_bytes_all_base64_variants, test_decode_null_means_default,
             test_decode_unknown_fields_ignored, test_decode_int_ranges,
             test_decode_type_errors_name_the_field, test_decode_rejects_bad_documents,
             test_decode_doubles_and_specials, test_decode_scalars_oneof_optional,
             test_decode_depth_cap, test_decode_with_freeing_allocator,
             test_round_trip_select_merge_stacktraces_request, test_round_trip_series_and_heatmap,
             test_round_trip_real_pprof)
