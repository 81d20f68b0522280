/*
 * test_validate.c — lc_store_check_profile, the one check the receivers and
 * the writer share (issue 25): values whose sums overflow int64 per sample
 * across types, per merged stack, per series and per profile are refused,
 * and so are folded uploads whose scaled values do; the extremes that sum
 * within int64 are accepted; references the store could not resolve, an
 * over-long tenant and an out-of-range time are refused, each naming why.
 */
#include "lc_test.h"
#include "receive_int.h"
#include "write_int.h"
#include "writer_fixture.h"

static lc_pprof_t *decoded(fixture_t *f, const uint8_t *pprof, size_t len)
{
    return lc_test_pprof_decode(pprof, len, f->arena);
}

/* The reason a check refuses p for, or NULL when it accepts. */
static const char *refusal(fixture_t *f, const lc_pprof_t *p, const char *tenant, int64_t time_ns)
{
    static lc_status_t st;
    st = (lc_status_t){0};
    if (lc_store_check_profile(p, tenant, time_ns, f->arena, NULL, &st) == 0)
        return NULL;
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    return st.msg;
}

static bool refused_for(fixture_t *f, const lc_pprof_t *p, const char *why)
{
    const char *msg = refusal(f, p, "anonymous", FX_TIME);
    if (msg && strstr(msg, why))
        return true;
    fprintf(stderr, "expected a refusal naming \"%s\", got \"%s\"\n", why, msg ? msg : "(none)");
    return false;
}

static lc_pprof_t *cpu_profile(fixture_t *f, const int64_t *values, const int *stacks,
                               const char *key, const char *const *labels, size_t n)
{
    size_t len;
    const uint8_t *pprof = fx_pprof(f, values, stacks, key, labels, n, &len);
    return decoded(f, pprof, len);
}

/* Two sample types, one sample with the given values. */
static lc_pprof_t *two_type_profile(fixture_t *f, int64_t first, int64_t second)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "alloc_objects", "count");
    lc_pprof_builder_sample_type(b, "alloc_space", "bytes");
    lc_pprof_line_t line = {lc_pprof_builder_function(b, "main", "main", "m.c", 1), 1};
    uint64_t loc = lc_pprof_builder_location(b, 0, 0, &line, 1);
    int64_t v[2] = {first, second};
    lc_pprof_builder_sample(b, &loc, 1, v, NULL, 0);
    return lc_test_pprof_built(b, f->arena);
}

static void test_sums_per_sample_across_types(void)
{
    fixture_t f;
    fx_open(&f);
    LC_CHECK(refused_for(&f, two_type_profile(&f, INT64_MAX, 1), "across sample types"));
    LC_CHECK(refused_for(&f, two_type_profile(&f, INT64_MIN, -1), "across sample types"));
    LC_CHECK(refusal(&f, two_type_profile(&f, INT64_MAX, 0), "t", FX_TIME) == NULL);
    LC_CHECK(refusal(&f, two_type_profile(&f, INT64_MAX, INT64_MIN), "t", FX_TIME) == NULL);
    fx_close(&f);
}

static void test_sums_per_series_and_stack(void)
{
    fixture_t f;
    fx_open(&f);
    const int64_t max2[] = {INT64_MAX, INT64_MAX}, min2[] = {INT64_MIN, -1};
    const int two_stacks[] = {0, 1}, one_stack[] = {0, 0};
    const char *const traces[] = {"1", "2"};
    /* The reproduction: two samples of 2^63-1 in one series. */
    LC_CHECK(refused_for(&f, cpu_profile(&f, max2, two_stacks, NULL, NULL, 2), "sum past int64"));
    LC_CHECK(refused_for(&f, cpu_profile(&f, min2, two_stacks, NULL, NULL, 2), "sum past int64"));
    /* One stack, samples the writer merges (trace_id does not split series). */
    LC_CHECK(
        refused_for(&f, cpu_profile(&f, max2, one_stack, "trace_id", traces, 2), "sum past int64"));
    fx_close(&f);
}

/* Series of their own (k=a, k=b) each within int64, the profile not. */
static void test_sums_per_profile(void)
{
    fixture_t f;
    fx_open(&f);
    const int64_t max2[] = {INT64_MAX, INT64_MAX};
    const int stacks[] = {0, 1};
    const char *const ks[] = {"a", "b"};
    LC_CHECK(refused_for(&f, cpu_profile(&f, max2, stacks, "k", ks, 2), "per profile"));
    fx_close(&f);
}

/* A single extreme value is a valid total; so are extremes of both signs. */
static void test_extremes_within_int64_accepted(void)
{
    fixture_t f;
    fx_open(&f);
    const int64_t one_max[] = {INT64_MAX}, one_min[] = {INT64_MIN}, both[] = {INT64_MAX, INT64_MIN};
    const int stacks[] = {0, 1};
    LC_CHECK(refusal(&f, cpu_profile(&f, one_max, stacks, NULL, NULL, 1), "t", FX_TIME) == NULL);
    LC_CHECK(refusal(&f, cpu_profile(&f, one_min, stacks, NULL, NULL, 1), "t", FX_TIME) == NULL);
    LC_CHECK(refusal(&f, cpu_profile(&f, both, stacks, NULL, NULL, 2), "t", FX_TIME) == NULL);
    fx_close(&f);
}

/* folded text at sampleRate 100: every value x 1e7 ns. */
static int folded(fixture_t *f, const char *text, lc_pprof_t **out, lc_status_t *st)
{
    ing_app_type_t t;
    LC_ASSERT_OK(ing_app_type("app.cpu", f->arena, &t, st));
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    int rc = ing_text_to_pprof((const uint8_t *)text, strlen(text), false, &t, 100, FX_TIME, &lim,
                               f->arena, &buf, st);
    *out = rc == 0 ? decoded(f, buf.data, buf.len) : NULL;
    lc_buf_fini(&buf);
    return rc;
}

static void test_folded_scaling(void)
{
    fixture_t f;
    fx_open(&f);
    lc_status_t st = {0};
    lc_pprof_t *p;
    /* 5e11 x 1e7 = 5e18 per line: one line fits, a repeated stack's sum does not. */
    LC_CHECK(folded(&f, "main;work 500000000000\n", &p, &st) == 0);
    LC_CHECK(refusal(&f, p, "t", FX_TIME) == NULL);
    LC_CHECK(folded(&f, "main;work 500000000000\nmain;work 500000000000\n", &p, &st) < 0);
    LC_CHECK(strstr(st.msg, "sum past int64") != NULL);
    /* Two stacks: converted, then the shared check refuses the profile. */
    st = (lc_status_t){0};
    LC_CHECK(folded(&f, "main;a 500000000000\nmain;b 500000000000\n", &p, &st) == 0);
    LC_CHECK(refused_for(&f, p, "sum past int64"));
    /* One value whose scaling alone overflows. */
    LC_CHECK(folded(&f, "main 1000000000000\n", &p, &st) < 0);
    LC_CHECK(strstr(st.msg, "overflows") != NULL);
    fx_close(&f);
}

static void test_unresolvable_references_and_message_fields(void)
{
    fixture_t f;
    fx_open(&f);
    const int64_t v[] = {1, 2};
    const int stacks[] = {0, 1};
    lc_pprof_t *p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    LC_CHECK(refusal(&f, p, "anonymous", FX_TIME) == NULL);
    char tenant[1100];
    memset(tenant, 't', sizeof(tenant) - 1);
    tenant[sizeof(tenant) - 1] = '\0';
    LC_CHECK(strstr(refusal(&f, p, tenant, FX_TIME), "tenant") != NULL);
    LC_CHECK(strstr(refusal(&f, p, "t", (int64_t)1 << 62 | 1), "outside") != NULL);
    p->sample[0]->location_id[0] = 999;
    LC_CHECK(refused_for(&f, p, "unknown location"));
    p->sample[0]->location_id[0] = 0; /* no location has id 0 */
    LC_CHECK(refused_for(&f, p, "unknown location"));
    /* Ids not 1..n in order (looked up in the index, not by range). */
    p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    for (size_t i = 0; i < p->n_location; i++)
        p->location[i]->id += 100;
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
            p->sample[i]->location_id[k] += 100;
    LC_CHECK(refusal(&f, p, "anonymous", FX_TIME) == NULL);
    p->sample[1]->location_id[0] = 1; /* in 1..n, but no such id */
    LC_CHECK(refused_for(&f, p, "unknown location"));
    p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    p->location[0]->mapping_id = 999;
    LC_CHECK(refused_for(&f, p, "unknown mapping"));
    p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    p->location[0]->line[0]->function_id = 999;
    LC_CHECK(refused_for(&f, p, "unknown function"));
    p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    p->function[0]->name = (int64_t)p->n_string_table;
    LC_CHECK(refused_for(&f, p, "outside the string table"));
    p = cpu_profile(&f, v, stacks, NULL, NULL, 2);
    p->sample[1]->n_value = 0;
    LC_CHECK(refused_for(&f, p, "fewer values"));
    fx_close(&f);
}

LC_TEST_MAIN(test_sums_per_sample_across_types, test_sums_per_series_and_stack,
             test_sums_per_profile, test_extremes_within_int64_accepted, test_folded_scaling,
             test_unresolvable_references_and_message_fields)
