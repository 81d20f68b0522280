/*
 * test_frontend.c — the query front end over a fake back end: what the front
 * end refuses never reaches a back end, and what a back end gathers whole is
 * truncated once, by the front end (max_nodes for trees, limit for series).
 * The store and the fan-out back ends are covered by test_querier_*.c and
 * the integration tests; here the back end only counts its calls.
 */
#include <string.h>

#include "lc_test.h"
#include "querier_int.h"

#define PT "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

static int backend_calls;
/* Set by the concurrency test: the tree back end then makes a second call on
 * this front end while it holds its slot, and keeps that call's status. */
static qry_front_t *nested_front;
static lc_status_t nested_status;
static int nested_rc;

static void nested_series_call(void);

/* root -> main -> f0..f9, each leaf with value i + 1. */
static int fake_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                           lc_ftree_t **out, lc_status_t *st)
{
    LC_UNUSED(fe);
    LC_UNUSED(req);
    LC_UNUSED(in);
    LC_UNUSED(st);
    backend_calls++;
    if (nested_front)
        nested_series_call();
    lc_ftree_t *t = lc_ftree_new(0);
    for (int i = 0; i < 10; i++) {
        char leaf[8];
        snprintf(leaf, sizeof(leaf), "f%d", i);
        const char *frames[] = {"main", leaf};
        LC_ASSERT_OK(lc_ftree_insert(t, frames, 2, i + 1));
    }
    *out = t;
    return 0;
}

/* Three series (service_name a, b, c) with totals 1, 2, 3 in one bucket. */
static int fake_select_series(qry_front_t *fe, lc_http_req_t *req,
                              const Querier__V1__SelectSeriesRequest *r,
                              const lc_query_series_opts_t *o, lc_query_series_t **out,
                              lc_status_t *st)
{
    LC_UNUSED(fe);
    LC_UNUSED(req);
    LC_UNUSED(st);
    backend_calls++;
    lc_query_series_t *s = lc_query_series_new(o);
    for (int i = 0; i < 3; i++) {
        lc_labels_t ls;
        uint32_t g;
        char name[2] = {(char)('a' + i), '\0'};
        lc_labels_init(&ls);
        lc_labels_add(&ls, "service_name", name);
        LC_ASSERT_OK(lc_query_series_group(s, &ls, &g));
        LC_ASSERT_OK(lc_query_series_add(s, g, r->start * 1000000, i + 1));
        lc_labels_fini(&ls);
    }
    *out = s;
    return 0;
}

static const qry_backend_t fake_backend = {
    .merge_tree = fake_merge_tree,
    .select_series = fake_select_series,
};

typedef struct call_s {
    lc_http_req_t req;
    lc_status_t st;
    ProtobufCMessage *out;
    qry_reply_t reply;
    int rc;
} call_t;

static void call_init(call_t *c)
{
    memset(c, 0, sizeof(*c));
    c->req.arena = lc_arena_new(16u << 20);
}

static void call_fini(call_t *c)
{
    qry_reply_fini(&c->reply);
    lc_free(c->req._resp_headers); /* a refusal sets Retry-After; httpd frees these */
    lc_arena_free(c->req.arena);
}

static qry_front_t front_limited(int64_t max_concurrent)
{
    qry_opts_t o;
    qry_front_t fe;
    qry_opts_default(&o);
    o.max_concurrent_per_tenant = max_concurrent;
    qry_front_init(&fe, &o, &fake_backend, NULL);
    return fe;
}

static qry_front_t front(void)
{
    return front_limited(0);
}

static void run_stacktraces(call_t *c, qry_front_t *fe, int64_t max_nodes, int format,
                            size_t n_trace_ids)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    static char trace[] = "t";
    static char *traces[] = {trace};
    r.profile_typeid = PT;
    r.max_nodes = max_nodes;
    r.format = format;
    r.trace_id_selector = n_trace_ids ? traces : NULL;
    r.n_trace_id_selector = n_trace_ids;
    call_init(c);
    c->rc = qry_rpc_select_merge_stacktraces(&c->req, &r.base, &c->reply, &c->st, fe);
}

static void test_refused_requests_never_reach_the_back_end(void)
{
    qry_front_t fe = front();
    call_t c;
    backend_calls = 0;
    run_stacktraces(&c, &fe, -1, 0, 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    run_stacktraces(&c, &fe, 0, 0, 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNIMPLEMENTED);
    call_fini(&c);
    run_stacktraces(&c, &fe, 0, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_DOT, 0);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNIMPLEMENTED);
    call_fini(&c);
    Querier__V1__SelectSeriesRequest s = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    s.profile_typeid = PT;
    s.step = 0.0001; /* below 1 ms */
    call_init(&c);
    c.rc = qry_rpc_select_series(&c.req, &s.base, &c.out, &c.st, &fe);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    LC_ASSERT_EQ(backend_calls, 0);
    qry_front_fini(&fe);
}

/* The back end gives every node; the front end keeps max_nodes of them. */
static void test_tree_truncated_once_by_the_front_end(void)
{
    qry_front_t fe = front();
    call_t whole, cut;
    backend_calls = 0;
    run_stacktraces(&whole, &fe, 1000, 0, 0);
    run_stacktraces(&cut, &fe, 4, 0, 0);
    LC_ASSERT_OK(whole.rc);
    LC_ASSERT_OK(cut.rc);
    LC_ASSERT_EQ(backend_calls, 2);
    const Querier__V1__SelectMergeStacktracesResponse *w = (const void *)whole.reply.msg;
    const Querier__V1__SelectMergeStacktracesResponse *k = (const void *)cut.reply.msg;
    LC_CHECK(w && w->flamegraph && k && k->flamegraph);
    if (w && w->flamegraph && k && k->flamegraph) {
        LC_ASSERT_EQ(w->flamegraph->total, 55);
        LC_ASSERT_EQ(k->flamegraph->total, 55); /* truncation folds, never drops */
        LC_CHECK(k->flamegraph->n_names < w->flamegraph->n_names);
    }
    call_fini(&whole);
    call_fini(&cut);
    qry_front_fini(&fe);
}

/* The back end gives every series; the front end keeps the top `limit`. */
static void test_series_limit_applied_by_the_front_end(void)
{
    qry_front_t fe = front();
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    static char label[] = "service_name";
    static char *group_by[] = {label};
    call_t c;
    r.profile_typeid = PT;
    r.group_by = group_by;
    r.n_group_by = 1;
    r.start = 1000;
    r.end = 2000;
    r.step = 1;
    r.limit = 1;
    call_init(&c);
    c.rc = qry_rpc_select_series(&c.req, &r.base, &c.out, &c.st, &fe);
    LC_ASSERT_OK(c.rc);
    const Querier__V1__SelectSeriesResponse *resp = (const void *)c.out;
    LC_CHECK(resp != NULL);
    if (resp) {
        LC_ASSERT_EQ(resp->n_series, 1);
        if (resp->n_series == 1 && resp->series[0]->n_labels == 1)
            LC_ASSERT_STR_EQ(resp->series[0]->labels[0]->value, "c");
    }
    call_fini(&c);
    qry_front_fini(&fe);
}

static void nested_series_call(void)
{
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    call_t c;
    r.profile_typeid = PT;
    r.start = 1000;
    r.end = 2000;
    r.step = 1;
    call_init(&c);
    nested_rc = qry_rpc_select_series(&c.req, &r.base, &c.out, &c.st, nested_front);
    nested_status = c.st;
    call_fini(&c);
}

/* With --querier.max-concurrent-queries=1 a second query of the tenant while
 * the first is in its back end is a 429 that never reaches the back end, and
 * the slot is free again once the first returns; with 2 both run. */
static void test_concurrent_queries_limited_around_the_back_end(void)
{
    for (int64_t limit = 1; limit <= 2; limit++) {
        qry_front_t fe = front_limited(limit);
        call_t c;
        nested_front = &fe;
        nested_status = (lc_status_t){0};
        backend_calls = 0;
        run_stacktraces(&c, &fe, 0, 0, 0);
        nested_front = NULL;
        LC_ASSERT_OK(c.rc);
        call_fini(&c);
        if (limit == 1) {
            LC_ASSERT_EQ(nested_rc, -1);
            LC_ASSERT_EQ(nested_status.code, LC_CODE_RESOURCE_EXHAUSTED);
            LC_ASSERT_EQ(nested_status.http_status, 429);
            LC_ASSERT_EQ(backend_calls, 1);
        } else {
            LC_ASSERT_EQ(nested_rc, 0);
            LC_ASSERT_EQ(backend_calls, 2);
        }
        run_stacktraces(&c, &fe, 0, 0, 0); /* the slot was given back */
        LC_ASSERT_OK(c.rc);
        call_fini(&c);
        qry_front_fini(&fe);
    }
}

LC_TEST_MAIN(test_refused_requests_never_reach_the_back_end,
             test_tree_truncated_once_by_the_front_end, test_series_limit_applied_by_the_front_end,
             test_concurrent_queries_limited_around_the_back_end)
