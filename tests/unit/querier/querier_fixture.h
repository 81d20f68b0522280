/*
 * querier_fixture.h — what the querier's RPC tests share: a real store in a
 * temporary dir with hand-made data (every expected answer is worked out in
 * the tests' comments; testdata only supplies one Go CPU profile whose totals
 * come from MANIFEST.jsonl), and a harness that calls the RPC handlers
 * directly on a fake request (no HTTP). Included by one test file each.
 */
#ifndef EMBER_TEST_QUERIER_FIXTURE_H
#define EMBER_TEST_QUERIER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc_test.h"
#include "lc_test_pprof.h"
#include "querier_int.h"

#define T0_MS 1700000000000LL
#define MS 1000000LL
#define CPU_ID "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define SAMPLES_ID "process_cpu:samples:count:cpu:nanoseconds"

static lc_store_t *store;
static char dir[] = "/tmp/ember-querier-XXXXXX";
static qry_t qry;

/* ------------------------------------------------------------------ data */

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
    lc_pprof_t *p = lc_test_pprof_decode(hm.data, hm.len, a);
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
    lc_pprof_t *gp = raw ? lc_test_pprof_decode(raw, len, a) : NULL;
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
    qry_opts_default(&qry.front.opts);
    qry.front.be = &qry_store_backend;
    qry.front.async = qry_async_new();                       /* as qry_front_init; freed at exit */
    LC_ASSERT_EQ(qry.front.opts.max_query_length_ms, 0);     /* ember's default: no limit */
    qry.front.opts.max_query_length_ms = 24LL * 3600 * 1000; /* the rule under test, as Pyroscope */
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
    lc_buf_fini(&c->req.resp_body);
    lc_free(c->req._resp_headers); /* owned by the httpd parser in a real server */
}

static void check_strings(char **got, size_t n, const char *const *want, size_t n_want)
{
    LC_ASSERT_EQ(n, n_want);
    for (size_t i = 0; i < n && i < n_want; i++)
        LC_ASSERT_STR_EQ(got[i], want[i]);
}

#endif
