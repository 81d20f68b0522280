/*
 * test_analyze.c — AnalyzeQuery reports what a query would read, counted by
 * hand from the fixture's data (querier_fixture.h):
 *  - the hand-made profile has 4 samples on 4 distinct stacks
 *    (main>outer/inner>leaf, main>outer/inner, main>L4, L4), so each stored
 *    copy holds 4 (node, value) pairs;
 *  - tenant anonymous has it as service app twice (regions eu and us, T0 and
 *    T0+10 s), tenant other once (service secret, T0); all in one 1 h block.
 */
#include "querier_fixture.h"

static Querier__V1__AnalyzeQueryResponse *analyze(call_t *c, const char *query, int64_t start,
                                                  int64_t end, const char *org)
{
    Querier__V1__AnalyzeQueryRequest r = QUERIER__V1__ANALYZE_QUERY_REQUEST__INIT;
    r.query = (char *)query;
    r.start = start;
    r.end = end;
    call_init(c, NULL, org);
    call_run(c, qry_rpc_analyze_query, &r, NULL);
    return c->rc == 0 ? (Querier__V1__AnalyzeQueryResponse *)c->out : NULL;
}

static void check_scope(const Querier__V1__AnalyzeQueryResponse *r, uint64_t series,
                        uint64_t profiles, uint64_t samples)
{
    LC_CHECK(r != NULL);
    if (!r)
        return;
    LC_ASSERT_EQ(r->n_query_scopes, 1);
    const Querier__V1__QueryScope *s = r->query_scopes[0];
    LC_ASSERT_EQ(s->block_count, 1);
    LC_ASSERT_EQ(s->series_count, series);
    LC_ASSERT_EQ(s->profile_count, profiles);
    LC_ASSERT_EQ(s->sample_count, samples);
    LC_CHECK((s->profile_bytes > 0) == (profiles > 0));
    LC_ASSERT_EQ(r->query_impact->total_queried_series, series);
    LC_CHECK(r->query_impact->total_bytes_in_time_range >= s->profile_bytes);
}

static void test_counts_by_selector_and_range(void)
{
    call_t c;
    const int64_t from = T0_MS - 1000, to = T0_MS + 30000;
    check_scope(analyze(&c, CPU_ID "{service_name=\"app\"}", from, to, NULL), 2, 2, 8);
    call_fini(&c);
    check_scope(analyze(&c, CPU_ID "{service_name=\"app\",region=\"eu\"}", from, to, NULL), 1, 1,
                4);
    call_fini(&c);
    /* Only the T0 copy lies in [T0 - 1 s, T0 + 5 s]. */
    check_scope(analyze(&c, CPU_ID "{service_name=\"app\"}", from, T0_MS + 5000, NULL), 1, 1, 4);
    call_fini(&c);
    /* Another profile type matches nothing, but the block is still in range. */
    check_scope(analyze(&c, "memory:alloc_space:bytes:space:bytes{}", from, to, NULL), 0, 0, 0);
    call_fini(&c);
}

static void test_tenants_are_separate(void)
{
    call_t c;
    qry_t mt = qry;
    mt.front.opts.multitenancy = true;
    Querier__V1__AnalyzeQueryRequest r = QUERIER__V1__ANALYZE_QUERY_REQUEST__INIT;
    r.query = CPU_ID "{}";
    r.start = T0_MS - 1000;
    r.end = T0_MS + 30000;
    call_init(&c, NULL, "other");
    call_run(&c, qry_rpc_analyze_query, &r, &mt);
    LC_ASSERT_OK(c.rc);
    check_scope((Querier__V1__AnalyzeQueryResponse *)c.out, 1, 1, 4);
    call_fini(&c);
}

static void test_bad_query_is_invalid_argument(void)
{
    call_t c;
    LC_CHECK(analyze(&c, "{service_name=\"app\"", T0_MS, T0_MS + 1000, NULL) == NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    LC_CHECK(analyze(&c, CPU_ID "{}", T0_MS + 1000, T0_MS, NULL) == NULL);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

LC_TEST_MAIN(test_setup, test_counts_by_selector_and_range, test_tenants_are_separate,
             test_bad_query_is_invalid_argument, test_teardown)
