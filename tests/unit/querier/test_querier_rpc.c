/*
 * test_querier_rpc.c — the querier's RPC handlers called directly (no HTTP)
 * against a real store in a temporary dir. Inputs are hand-made so every
 * expected answer is worked out in the comments; testdata only supplies one
 * Go CPU profile whose totals come from MANIFEST.jsonl.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc_test.h"
#include "querier_int.h"

#define T0_MS 1700000000000LL
#define MS 1000000LL
#define CPU_ID "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define SAMPLES_ID "process_cpu:samples:count:cpu:nanoseconds"

static lc_store_t *store;
static char dir[] = "/tmp/ember-querier-XXXXXX";
static qry_t qry;

/* ------------------------------------------------------------------ data */

static lc_pprof_t *decode(const uint8_t *data, size_t len, lc_arena_t *a)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    lc_pprof_t *p = NULL;
    LC_ASSERT_OK(lc_pprof_decode(data, len, &lim, a, &p, &st));
    if (p)
        LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    return p;
}

/* Writes every sample type of p as its own series; extra = name/value pairs. */
static void write_series(lc_store_txn_t *txn, const char *tenant, const lc_pprof_t *p, int64_t t_ms,
                         const char *const *extra, size_t n_extra, const uint64_t *spans)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    lc_pprof_index_t *ix = NULL;
    LC_ASSERT_OK(lc_pprof_index_new(p, a, &ix));
    uint32_t *idx = calloc(p->n_sample + 1, sizeof(uint32_t));
    for (size_t i = 0; i < p->n_sample; i++)
        idx[i] = (uint32_t)i;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        char pt[256];
        snprintf(pt, sizeof(pt), "process_cpu:%s:%s:cpu:nanoseconds",
                 lc_pprof_str(p, p->sample_type[i]->type),
                 lc_pprof_str(p, p->sample_type[i]->unit));
        lc_labels_t ls;
        lc_labels_init(&ls);
        lc_labels_add(&ls, "__name__", "process_cpu");
        lc_labels_add(&ls, "__profile_type__", pt);
        for (size_t k = 0; k < n_extra; k++)
            lc_labels_add(&ls, extra[2 * k], extra[2 * k + 1]);
        lc_labels_sort(&ls);
        lc_store_write_t w = {.tenant = tenant,
                              .labels = &ls,
                              .time_ns = t_ms * MS,
                              .profile = p,
                              .index = ix,
                              .value_index = i,
                              .samples = idx,
                              .n_samples = p->n_sample,
                              .span_ids = spans};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
        lc_labels_fini(&ls);
    }
    free(idx);
    lc_arena_free(a);
}

/*
 * The hand-made profile (see test_query_merge.c): main; outer -> inner (inlined,
 * one location); leaf; L4 without lines. Samples leaf first: L3 L2 L1 = 5
 * (span a), L2 L1 = 2 (span b), L4 L1 = 3, L4 = 1. Per profile: root self 1,
 * main self 3, inner self 2, leaf 5; total 11.
 */
static void build_handmade(lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10);
    uint64_t map = lc_pprof_builder_mapping(b, 0x1000, 0x2000, 0, "/bin/app", "", true);
    uint64_t fm = lc_pprof_builder_function(b, "main", "main", "app.c", 1);
    uint64_t fo = lc_pprof_builder_function(b, "outer", "outer", "app.c", 10);
    uint64_t fi = lc_pprof_builder_function(b, "inner", "inner", "app.c", 20);
    uint64_t fl = lc_pprof_builder_function(b, "leaf", "leaf", "app.c", 30);
    lc_pprof_line_t l1[] = {{fm, 2}}, l2[] = {{fi, 21}, {fo, 11}}, l3[] = {{fl, 31}};
    uint64_t L1 = lc_pprof_builder_location(b, map, 0x1100, l1, 1);
    uint64_t L2 = lc_pprof_builder_location(b, map, 0x1200, l2, 2);
    uint64_t L3 = lc_pprof_builder_location(b, map, 0x1300, l3, 1);
    uint64_t L4 = lc_pprof_builder_location(b, map, 0x1400, NULL, 0);
    const uint64_t s1[] = {L3, L2, L1}, s2[] = {L2, L1}, s3[] = {L4, L1}, s4[] = {L4};
    const int64_t v[] = {5, 2, 3, 1};
    lc_pprof_builder_sample(b, s1, 3, &v[0], NULL, 0);
    lc_pprof_builder_sample(b, s2, 2, &v[1], NULL, 0);
    lc_pprof_builder_sample(b, s3, 2, &v[2], NULL, 0);
    lc_pprof_builder_sample(b, s4, 1, &v[3], NULL, 0);
    lc_buf_init(out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, out));
    lc_pprof_builder_free(b);
}

/*
 * Tenant anonymous: the hand-made profile at T0 (service app, region eu,
 * k8s.pod p1) and at T0+10 s (app, us, p2); gopprof-sample.cpu at T0+20 s
 * (service go). Tenant other: the hand-made profile as service secret.
 */
static void write_data(void)
{
    lc_buf_t hm;
    build_handmade(&hm);
    lc_arena_t *a = lc_arena_new(64u << 20);
    lc_pprof_t *p = decode(hm.data, hm.len, a);
    static const uint64_t spans[] = {0xa, 0xb, 0, 0};
    static const char *const eu[] = {"service_name", "app", "region", "eu", "k8s.pod", "p1"};
    static const char *const us[] = {"service_name", "app", "region", "us", "k8s.pod", "p2"};
    static const char *const secret[] = {"service_name", "secret"};
    static const char *const go[] = {"service_name", "go"};
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    write_series(txn, "anonymous", p, T0_MS, eu, 3, spans);
    write_series(txn, "anonymous", p, T0_MS + 10000, us, 3, spans);
    write_series(txn, "other", p, T0_MS, secret, 1, NULL);
    size_t len = 0;
    uint8_t *raw = lc_test_read_file(LC_TESTDATA_DIR "/pprof/gopprof-sample.cpu", &len);
    LC_CHECK(raw != NULL);
    lc_pprof_t *gp = raw ? decode(raw, len, a) : NULL;
    if (gp)
        write_series(txn, "anonymous", gp, T0_MS + 20000, go, 1, NULL);
    LC_ASSERT_OK(lc_store_write_commit(txn));
    free(raw);
    lc_arena_free(a);
    lc_buf_fini(&hm);
}

static void test_setup(void)
{
    LC_CHECK(mkdtemp(dir) != NULL);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    qry_opts_default(&qry.opts);
    qry.store = store;
    write_data();
}

static void test_teardown(void)
{
    lc_store_close(store);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

/* ------------------------------------------------------------- harness */

typedef struct call_s {
    lc_http_req_t req;
    lc_http_header_t headers[2];
    lc_status_t st;
    ProtobufCMessage *out;
    qry_reply_t reply; /* for qry_reply_fn methods */
    int rc;
} call_t;

static void call_init(call_t *c, const char *accept, const char *org)
{
    memset(c, 0, sizeof(*c));
    c->req.arena = lc_arena_new(64u << 20);
    c->req.headers = c->headers;
    if (accept)
        c->headers[c->req.n_headers++] = (lc_http_header_t){"accept", accept};
    if (org)
        c->headers[c->req.n_headers++] = (lc_http_header_t){"x-scope-orgid", org};
}

static void call_run(call_t *c, lc_connect_unary_fn fn, const void *msg, void *data)
{
    c->rc = fn(&c->req, msg, &c->out, &c->st, data ? data : &qry);
}

/* A method answering qry_reply_t: a message as is, bytes decoded here (the
 * server sends them as they are) so the checks below read one shape. */
static void call_run_reply(call_t *c, qry_reply_fn fn, const void *msg, void *data)
{
    c->rc = fn(&c->req, msg, &c->reply, &c->st, data ? data : &qry);
    if (c->rc != 0 || !c->reply.desc) {
        c->out = c->reply.msg;
        return;
    }
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(c->req.arena, &alloc);
    c->out = protobuf_c_message_unpack(c->reply.desc, &alloc, c->reply.buf.len,
                                       c->reply.buf.data ? c->reply.buf.data : (uint8_t *)"");
    LC_CHECK(c->out != NULL);
}

static void call_fini(call_t *c)
{
    qry_reply_fini(&c->reply);
    lc_arena_free(c->req.arena);
}

static void check_strings(char **got, size_t n, const char *const *want, size_t n_want)
{
    LC_ASSERT_EQ(n, n_want);
    for (size_t i = 0; i < n && i < n_want; i++)
        LC_ASSERT_STR_EQ(got[i], want[i]);
}

/* -------------------------------------------------------- listing RPCs */

static void test_profile_types(void)
{
    Querier__V1__ProfileTypesRequest r = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    r.start = T0_MS - 1000;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_profile_types, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__ProfileTypesResponse *resp = (void *)c.out;
    LC_ASSERT_EQ(resp->n_profile_types, 2);
    if (resp->n_profile_types == 2) {
        const Types__V1__ProfileType *pt = resp->profile_types[0];
        LC_ASSERT_STR_EQ(pt->id, CPU_ID);
        LC_ASSERT_STR_EQ(pt->name, "process_cpu");
        LC_ASSERT_STR_EQ(pt->sample_type, "cpu");
        LC_ASSERT_STR_EQ(pt->sample_unit, "nanoseconds");
        LC_ASSERT_STR_EQ(pt->period_type, "cpu");
        LC_ASSERT_STR_EQ(pt->period_unit, "nanoseconds");
        LC_ASSERT_STR_EQ(resp->profile_types[1]->id, SAMPLES_ID);
    }
    call_fini(&c);

    /* start = end = 0 means the last 24 h: the 2023 data is not in it. */
    r.start = r.end = 0;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_profile_types, &r, NULL);
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesResponse *)c.out)->n_profile_types, 0);
    call_fini(&c);
}

static void run_label_names(call_t *c, const char *accept, char **matchers, size_t n, int64_t start,
                            int64_t end)
{
    Types__V1__LabelNamesRequest r = TYPES__V1__LABEL_NAMES_REQUEST__INIT;
    r.matchers = matchers;
    r.n_matchers = n;
    r.start = start;
    r.end = end;
    call_init(c, accept, NULL);
    call_run(c, qry_rpc_label_names, &r, NULL);
}

/* k8s.pod is not a legacy name: listed only with allow-utf8-labelnames. */
static void test_label_names(void)
{
    call_t c;
    run_label_names(&c, NULL, NULL, 0, T0_MS, T0_MS + 60000);
    LC_ASSERT_OK(c.rc);
    static const char *const legacy[] = {"__name__", "__profile_type__", "region", "service_name"};
    const Types__V1__LabelNamesResponse *resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, legacy, 4);
    call_fini(&c);

    run_label_names(&c, "application/proto; allow-utf8-labelnames=true", NULL, 0, T0_MS,
                    T0_MS + 60000);
    static const char *const utf8[] = {"__name__", "__profile_type__", "k8s.pod", "region",
                                       "service_name"};
    resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, utf8, 5);
    call_fini(&c);

    char *go[] = {"{service_name=\"go\"}"};
    run_label_names(&c, NULL, go, 1, T0_MS, T0_MS + 60000);
    static const char *const go_names[] = {"__name__", "__profile_type__", "service_name"};
    resp = (void *)c.out;
    check_strings(resp->names, resp->n_names, go_names, 3);
    call_fini(&c);

    /* start > end and a bad matcher are invalid_argument. */
    run_label_names(&c, NULL, NULL, 0, T0_MS + 1, T0_MS);
    LC_CHECK(c.rc != 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    char *bad[] = {"{service_name="};
    run_label_names(&c, NULL, bad, 1, T0_MS, T0_MS + 1);
    LC_CHECK(c.rc != 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

static const Types__V1__LabelValuesResponse *
run_label_values(call_t *c, const char *name, char **matchers, size_t n, int64_t start, int64_t end)
{
    Types__V1__LabelValuesRequest r = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    r.name = (char *)name;
    r.matchers = matchers;
    r.n_matchers = n;
    r.start = start;
    r.end = end;
    call_init(c, NULL, NULL);
    call_run(c, qry_rpc_label_values, &r, NULL);
    return (const Types__V1__LabelValuesResponse *)c->out;
}

static void test_label_values(void)
{
    call_t c;
    const Types__V1__LabelValuesResponse *resp;
    static const char *const services[] = {"app", "go"};
    resp = run_label_values(&c, "service_name", NULL, 0, T0_MS, T0_MS + 60000);
    LC_ASSERT_OK(c.rc);
    check_strings(resp->names, resp->n_names, services, 2);
    call_fini(&c);

    /* Matchers are OR-ed: region=eu gives app, service_name=go gives go. */
    char *either[] = {"{region=\"eu\"}", "{service_name=\"go\"}"};
    resp = run_label_values(&c, "service_name", either, 2, T0_MS, T0_MS + 60000);
    check_strings(resp->names, resp->n_names, services, 2);
    call_fini(&c);

    /* Only series with a profile in range: from T0+5 s only the us profile. */
    static const char *const us[] = {"us"};
    resp = run_label_values(&c, "region", NULL, 0, T0_MS + 5000, T0_MS + 60000);
    check_strings(resp->names, resp->n_names, us, 1);
    call_fini(&c);

    run_label_values(&c, "", NULL, 0, T0_MS, T0_MS + 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* label_names service_name + __profile_type__: eu and us project to one set;
 * go has two profile types. Sorted by __profile_type__ first. */
static void test_series(void)
{
    Querier__V1__SeriesRequest r = QUERIER__V1__SERIES_REQUEST__INIT;
    char *names[] = {"service_name", "__profile_type__"};
    r.label_names = names;
    r.n_label_names = 2;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_series, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SeriesResponse *resp = (void *)c.out;
    static const char *const want[3][2] = {{CPU_ID, "app"}, {CPU_ID, "go"}, {SAMPLES_ID, "go"}};
    LC_ASSERT_EQ(resp->n_labels_set, 3);
    for (size_t i = 0; i < 3 && i < resp->n_labels_set; i++) {
        LC_ASSERT_EQ(resp->labels_set[i]->n_labels, 2);
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[0]->name, "__profile_type__");
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[0]->value, want[i][0]);
        LC_ASSERT_STR_EQ(resp->labels_set[i]->labels[1]->value, want[i][1]);
    }
    call_fini(&c);
}

/* ------------------------------------------------------------ merging */

static call_t merge_call;

static const Querier__V1__SelectMergeStacktracesResponse *
run_stacktraces(const char *sel, int64_t max_nodes, int format, char **spans, size_t n_spans)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = (char *)sel;
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.max_nodes = max_nodes;
    r.format = format;
    r.span_selector = spans;
    r.n_span_selector = n_spans;
    call_init(&merge_call, NULL, NULL);
    call_run_reply(&merge_call, qry_rpc_select_merge_stacktraces, &r, NULL);
    return (const void *)merge_call.out;
}

static void check_fg(const Querier__V1__FlameGraph *fg, const char *const *names,
                     const int64_t (*levels)[4], size_t n, int64_t total, int64_t max_self)
{
    LC_CHECK(fg != NULL);
    if (!fg)
        return;
    check_strings(fg->names, fg->n_names, names, n);
    LC_ASSERT_EQ(fg->n_levels, n);
    for (size_t l = 0; l < n && l < fg->n_levels; l++) {
        LC_ASSERT_EQ(fg->levels[l]->n_values, 4);
        for (size_t k = 0; k < 4 && k < fg->levels[l]->n_values; k++)
            LC_ASSERT_EQ(fg->levels[l]->values[k], levels[l][k]);
    }
    LC_ASSERT_EQ(fg->total, total);
    LC_ASSERT_EQ(fg->max_self, max_self);
}

/*
 * Both app profiles (eu + us) merge: root self 2, main 20 (self 6), outer 14,
 * inner 14 (self 4), leaf 10. x: main at 2, outer at 2+6 = 8, inner at 8,
 * leaf at 8+4 = 12.
 */
static void test_merge_flamegraph(void)
{
    static const char *const names[] = {"total", "main", "outer", "inner", "leaf"};
    static const int64_t levels[5][4] = {
        {0, 22, 2, 0}, {2, 20, 6, 1}, {8, 14, 0, 2}, {8, 14, 4, 3}, {12, 10, 10, 4}};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 0, 0, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp)
        check_fg(resp->flamegraph, names, levels, 5, 22, 10);
    call_fini(&merge_call);
}

/*
 * max_nodes 2 (4 nodes): heap walk main(20), outer(14), inner(14) not > 14
 * -> minVal 14; leaf (10) becomes "other" at x 12.
 */
static void test_merge_truncated(void)
{
    static const char *const names[] = {"total", "main", "outer", "inner", "other"};
    static const int64_t levels[5][4] = {
        {0, 22, 2, 0}, {2, 20, 6, 1}, {8, 14, 0, 2}, {8, 14, 4, 3}, {12, 10, 10, 4}};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 2, 0, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp)
        check_fg(resp->flamegraph, names, levels, 5, 22, 10);
    call_fini(&merge_call);
}

static void test_merge_max_nodes_invalid(void)
{
    run_stacktraces("{}", -1, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
    run_stacktraces("{}", 1048577, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
    run_stacktraces("{a=", 0, 0, NULL, 0);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
}

/* Tree bytes: root "" self 2 with main; main 6; outer 0; inner 4; leaf 10. */
static void test_merge_tree_format(void)
{
    static const uint8_t want[] = {0,   2,   1,   4,   'm', 'a', 'i', 'n', 6,   1,   5,
                                   'o', 'u', 't', 'e', 'r', 0,   1,   5,   'i', 'n', 'n',
                                   'e', 'r', 4,   1,   4,   'l', 'e', 'a', 'f', 10,  0};
    const Querier__V1__SelectMergeStacktracesResponse *resp = run_stacktraces(
        "{service_name=\"app\"}", 0, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    if (resp) {
        LC_CHECK(resp->flamegraph == NULL);
        LC_ASSERT_EQ(resp->tree.len, sizeof(want));
        if (resp->tree.len == sizeof(want))
            LC_ASSERT_MEM_EQ(resp->tree.data, want, sizeof(want));
    }
    call_fini(&merge_call);
}

static int64_t profile_total(const Google__V1__Profile *p)
{
    int64_t total = 0;
    for (size_t i = 0; p && i < p->n_sample; i++)
        total += p->sample[i]->value[0];
    return total;
}

static void test_merge_pprof_format(void)
{
    const Querier__V1__SelectMergeStacktracesResponse *resp = run_stacktraces(
        "{service_name=\"app\"}", 0, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF, NULL, 0);
    LC_ASSERT_OK(merge_call.rc);
    LC_CHECK(resp && resp->pprof && resp->pprof->profile);
    if (resp && resp->pprof)
        LC_ASSERT_EQ(profile_total(resp->pprof->profile), 22);
    call_fini(&merge_call);
}

/* Span a marks only the leaf sample (5 per profile): root total 10. */
static void test_merge_span_selector(void)
{
    char *spans[] = {"000000000000000a"};
    const Querier__V1__SelectMergeStacktracesResponse *resp =
        run_stacktraces("{service_name=\"app\"}", 0, 0, spans, 1);
    LC_ASSERT_OK(merge_call.rc);
    if (resp && resp->flamegraph)
        LC_ASSERT_EQ(resp->flamegraph->total, 10);
    call_fini(&merge_call);
    char *bad[] = {"xyz"};
    run_stacktraces("{}", 0, 0, bad, 1);
    LC_ASSERT_EQ(merge_call.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&merge_call);
}

/* gopprof-sample.cpu: cpu/nanoseconds total 1760000000 (MANIFEST.jsonl). */
static void test_merge_profile(void)
{
    Querier__V1__SelectMergeProfileRequest r = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    r.profile_typeid = CPU_ID;
    r.label_selector = "{service_name=\"go\"}";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run_reply(&c, qry_rpc_select_merge_profile, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Google__V1__Profile *p = (const void *)c.out;
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_EQ(profile_total(p), 1760000000LL);
        LC_ASSERT_EQ(p->n_sample_type, 1);
        LC_ASSERT_STR_EQ(p->string_table[p->sample_type[0]->type], "cpu");
        LC_ASSERT_STR_EQ(p->string_table[p->sample_type[0]->unit], "nanoseconds");
        LC_CHECK(p->period_type != NULL);
    }
    call_fini(&c);

    r.profile_typeid = "not-a-type";
    call_init(&c, NULL, NULL);
    call_run_reply(&c, qry_rpc_select_merge_profile, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* ------------------------------------------------------------- series */

/* group_by region, step 15 s from T0: eu at T0 (t <= start) -> T0; us at
 * T0+10 s -> T0+15 s; each 11. */
static void test_select_series(void)
{
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    char *gb[] = {"region"};
    r.profile_typeid = CPU_ID;
    r.label_selector = "{service_name=\"app\"}";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    r.step = 15;
    r.group_by = gb;
    r.n_group_by = 1;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectSeriesResponse *resp = (const void *)c.out;
    LC_ASSERT_EQ(resp->n_series, 2);
    if (resp->n_series == 2) {
        LC_ASSERT_STR_EQ(resp->series[0]->labels[0]->value, "eu");
        LC_ASSERT_EQ(resp->series[0]->points[0]->timestamp, T0_MS);
        LC_CHECK(resp->series[0]->points[0]->value == 11.0);
        LC_ASSERT_STR_EQ(resp->series[1]->labels[0]->value, "us");
        LC_ASSERT_EQ(resp->series[1]->points[0]->timestamp, T0_MS + 15000);
    }
    call_fini(&c);

    r.step = 0.0001; /* 0.1 ms */
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_select_series, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

/* ------------------------------------------------------------ the rest */

static void test_profile_stats(void)
{
    Types__V1__GetProfileStatsRequest r = TYPES__V1__GET_PROFILE_STATS_REQUEST__INIT;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_get_profile_stats, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Types__V1__GetProfileStatsResponse *resp = (const void *)c.out;
    LC_CHECK(resp->data_ingested);
    LC_ASSERT_EQ(resp->oldest_profile_time, T0_MS);
    LC_ASSERT_EQ(resp->newest_profile_time, T0_MS + 20000);
    call_fini(&c);
}

/* With multitenancy, tenant other sees only its own service. */
static void test_tenancy(void)
{
    qry_t mt = qry;
    mt.opts.multitenancy = true;
    Types__V1__LabelValuesRequest r = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    r.name = "service_name";
    r.start = T0_MS;
    r.end = T0_MS + 60000;
    call_t c;
    call_init(&c, NULL, "other");
    call_run(&c, qry_rpc_label_values, &r, &mt);
    LC_ASSERT_OK(c.rc);
    static const char *const secret[] = {"secret"};
    const Types__V1__LabelValuesResponse *resp = (const void *)c.out;
    check_strings(resp->names, resp->n_names, secret, 1);
    call_fini(&c);

    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_label_values, &r, &mt);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);
}

/*
 * Diff: left = app/eu (11: root self 1, main 10 self 3, outer 7, inner 7 self
 * 2, leaf 5); right = app/us restricted to span a (leaf path only, 5). Same
 * shape; left x follows the root self (1), right x stays 0.
 */
static void test_diff(void)
{
    Querier__V1__SelectMergeStacktracesRequest left =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    Querier__V1__SelectMergeStacktracesRequest right =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    char *spans[] = {"000000000000000a"};
    left.profile_typeid = right.profile_typeid = CPU_ID;
    left.label_selector = "{region=\"eu\"}";
    right.label_selector = "{region=\"us\"}";
    right.span_selector = spans;
    right.n_span_selector = 1;
    left.start = right.start = T0_MS;
    left.end = right.end = T0_MS + 60000;
    Querier__V1__DiffRequest r = QUERIER__V1__DIFF_REQUEST__INIT;
    r.left = &left;
    r.right = &right;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_diff, &r, NULL);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__FlameGraphDiff *fg =
        c.out ? ((Querier__V1__DiffResponse *)c.out)->flamegraph : NULL;
    LC_CHECK(fg != NULL);
    static const int64_t want[5][7] = {{0, 11, 1, 0, 5, 0, 0},
                                       {1, 10, 3, 0, 5, 0, 1},
                                       {4, 7, 0, 0, 5, 0, 2},
                                       {4, 7, 2, 0, 5, 0, 3},
                                       {6, 5, 5, 0, 5, 5, 4}};
    if (fg) {
        LC_ASSERT_EQ(fg->n_levels, 5);
        for (size_t l = 0; l < 5 && l < fg->n_levels; l++) {
            LC_ASSERT_EQ(fg->levels[l]->n_values, 7);
            for (size_t k = 0; k < 7 && k < fg->levels[l]->n_values; k++)
                LC_ASSERT_EQ(fg->levels[l]->values[k], want[l][k]);
        }
        LC_ASSERT_EQ(fg->total, 16);
        LC_ASSERT_EQ(fg->leftticks, 11);
        LC_ASSERT_EQ(fg->rightticks, 5);
        LC_ASSERT_EQ(fg->max_self, 5);
    }
    call_fini(&c);

    r.right = NULL;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_diff, &r, NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

static void test_unimplemented(void)
{
    Querier__V1__SelectHeatmapRequest r = QUERIER__V1__SELECT_HEATMAP_REQUEST__INIT;
    call_t c;
    call_init(&c, NULL, NULL);
    call_run(&c, qry_rpc_unimplemented, &r, "SelectHeatmap");
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNIMPLEMENTED);
    LC_CHECK(strstr(c.st.msg, "SelectHeatmap") != NULL);
    call_fini(&c);
}

LC_TEST_MAIN(test_setup, test_profile_types, test_label_names, test_label_values, test_series,
             test_merge_flamegraph, test_merge_truncated, test_merge_max_nodes_invalid,
             test_merge_tree_format, test_merge_pprof_format, test_merge_span_selector,
             test_merge_profile, test_select_series, test_profile_stats, test_tenancy, test_diff,
             test_unimplemented, test_teardown)
