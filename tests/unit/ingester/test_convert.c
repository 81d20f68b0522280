/*
 * test_convert.c — folded/lines uploads become single-sample-type pprofs
 * (pyroscope-api.md §2.10): totals and stacks survive, rate scaling gives
 * cpu/wall nanoseconds with period 1e9/sampleRate, other types are unscaled
 * and have no period type. The output is decoded and validated by lc/pprof.h.
 */
#include "lc_test.h"
#include "receive_int.h"

typedef struct conv_s {
    lc_arena_t *arena;
    lc_pprof_t *p;
    lc_status_t st;
} conv_t;

static int convert(conv_t *c, const char *body, bool lines, const char *app, uint32_t rate)
{
    c->arena = lc_arena_new((size_t)1 << 26);
    c->p = NULL;
    c->st = (lc_status_t){0};
    ing_app_type_t t;
    if (ing_app_type(app, c->arena, &t, &c->st) < 0)
        return -1;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    int rc = ing_text_to_pprof((const uint8_t *)body, strlen(body), lines, &t, rate,
                               1700000000000000000LL, &lim, c->arena, &out, &c->st);
    if (rc == 0)
        rc = lc_pprof_decode(out.data, out.len, &lim, c->arena, &c->p, &c->st);
    if (rc == 0)
        rc = lc_pprof_validate(c->p, &lim, &c->st);
    lc_buf_fini(&out);
    return rc;
}

static const char *fn_name(const lc_pprof_t *p, uint64_t loc_id)
{
    for (size_t i = 0; i < p->n_location; i++) {
        if (p->location[i]->id != loc_id || p->location[i]->n_line != 1)
            continue;
        for (size_t j = 0; j < p->n_function; j++) {
            if (p->function[j]->id == p->location[i]->line[0]->function_id)
                return ing_pprof_str(p, p->function[j]->name);
        }
    }
    return "?";
}

/* The value of the sample whose stack, root first, is `want` ("a;b;c"). */
static int64_t stack_value(const lc_pprof_t *p, const char *want)
{
    int64_t total = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        char buf[256] = "";
        const Google__V1__Sample *s = p->sample[i];
        for (size_t k = s->n_location_id; k > 0; k--) {
            lc_test_appendf(buf, sizeof(buf), "%s%s", fn_name(p, s->location_id[k - 1]),
                            k > 1 ? ";" : "");
        }
        if (strcmp(buf, want) == 0)
            total += s->value[0];
    }
    return total;
}

static int64_t total(const lc_pprof_t *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        t += p->sample[i]->value[0];
    return t;
}

static void check_types(const lc_pprof_t *p, const char *type, const char *unit, const char *ptype,
                        const char *punit, int64_t period)
{
    LC_ASSERT_EQ(p->n_sample_type, 1);
    LC_ASSERT_STR_EQ(ing_pprof_str(p, p->sample_type[0]->type), type);
    LC_ASSERT_STR_EQ(ing_pprof_str(p, p->sample_type[0]->unit), unit);
    if (!ptype) {
        LC_CHECK(p->period_type == NULL);
        return;
    }
    LC_CHECK(p->period_type != NULL);
    if (p->period_type) {
        LC_ASSERT_STR_EQ(ing_pprof_str(p, p->period_type->type), ptype);
        LC_ASSERT_STR_EQ(ing_pprof_str(p, p->period_type->unit), punit);
    }
    LC_ASSERT_EQ(p->period, period);
}

static const char folded[] = "a;b;c 12\na;b 3\nx 5\na;b 2\nfoo bar;baz qux 1\n";

static void test_cpu_rate_scaled(void)
{
    conv_t c;
    LC_ASSERT_OK(convert(&c, folded, false, "app", 100));
    if (c.p) {
        check_types(c.p, "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000);
        LC_ASSERT_EQ(total(c.p), 23LL * 10000000);
        LC_ASSERT_EQ(stack_value(c.p, "a;b;c"), 12LL * 10000000);
        LC_ASSERT_EQ(stack_value(c.p, "a;b"), 5LL * 10000000); /* identical stacks summed */
        LC_ASSERT_EQ(stack_value(c.p, "x"), 5LL * 10000000);
        LC_ASSERT_EQ(stack_value(c.p, "foo bar;baz qux"), 10000000);
        LC_ASSERT_EQ(c.p->n_function, 6); /* a b c x "foo bar" "baz qux" */
        LC_ASSERT_EQ(c.p->n_location, 6);
        LC_ASSERT_EQ(c.p->n_mapping, 1);
        LC_ASSERT_EQ(c.p->time_nanos, 1700000000000000000LL);
    }
    lc_arena_free(c.arena);
}

static void test_rates(void)
{
    conv_t c;
    LC_ASSERT_OK(convert(&c, folded, false, "app.cpu", 0)); /* sampleRate 0: counts */
    if (c.p) {
        check_types(c.p, "samples", "count", NULL, NULL, 0);
        LC_ASSERT_EQ(total(c.p), 23);
    }
    lc_arena_free(c.arena);
    LC_ASSERT_OK(convert(&c, folded, false, "app.wall", 100));
    if (c.p) {
        check_types(c.p, "wall", "nanoseconds", "cpu", "nanoseconds", 10000000);
        LC_ASSERT_EQ(total(c.p), 23LL * 10000000);
    }
    lc_arena_free(c.arena);
    LC_ASSERT_OK(convert(&c, folded, false, "app.itimer", 17)); /* 1e9/17, truncated */
    if (c.p) {
        check_types(c.p, "cpu", "nanoseconds", "cpu", "nanoseconds", 58823529);
        LC_ASSERT_EQ(total(c.p), 23LL * 58823529);
    }
    lc_arena_free(c.arena);
    LC_ASSERT_OK(convert(&c, folded, false, "app.inuse_space", 100)); /* never scaled */
    if (c.p) {
        check_types(c.p, "inuse_space", "bytes", NULL, NULL, 0);
        LC_ASSERT_EQ(total(c.p), 23);
    }
    lc_arena_free(c.arena);
    LC_ASSERT_OK(convert(&c, folded, false, "app.mutex_duration", 100));
    if (c.p)
        check_types(c.p, "delay", "nanoseconds", NULL, NULL, 0);
    lc_arena_free(c.arena);
}

static void test_lines_format(void)
{
    conv_t c;
    LC_ASSERT_OK(convert(&c, "a;b\na;b\nc\n\na;b;d\n", true, "app.cpu", 0));
    if (c.p) {
        LC_ASSERT_EQ(total(c.p), 4);
        LC_ASSERT_EQ(stack_value(c.p, "a;b"), 2);
        LC_ASSERT_EQ(stack_value(c.p, "c"), 1);
        LC_ASSERT_EQ(stack_value(c.p, "a;b;d"), 1);
    }
    lc_arena_free(c.arena);
}

static void test_errors(void)
{
    conv_t c;
    LC_CHECK(convert(&c, "a 9223372036854775807\n", false, "app", 1) < 0); /* x 1e9 overflows */
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    lc_arena_free(c.arena);
    LC_CHECK(convert(&c, "a;b x\n", false, "app", 100) < 0);
    lc_arena_free(c.arena);
    LC_CHECK(convert(&c, "a 1\n", false, "my.app", 100) < 0);
    LC_CHECK(strstr(c.st.msg, "unknown profile type") != NULL);
    lc_arena_free(c.arena);
}

LC_TEST_MAIN(test_cpu_rate_scaled, test_rates, test_lines_format, test_errors)
