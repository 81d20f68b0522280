/*
 * test_folded.c — the folded and lines text formats (pyroscope-api.md §2.6).
 * Conversion to pprof (§2.10) is tested in test_convert.c.
 */
#include "lc_test.h"
#include "receive_int.h"

typedef struct collected_s {
    char stacks[16][128];
    int64_t values[16];
    size_t n;
} collected_t;

static int collect(const char *stack, size_t len, int64_t value, void *data)
{
    collected_t *c = data;
    if (c->n == 16)
        return -99;
    snprintf(c->stacks[c->n], sizeof(c->stacks[0]), "%.*s", (int)len, stack);
    c->values[c->n++] = value;
    return 0;
}

static int run(const char *body, bool lines, collected_t *c, lc_status_t *st)
{
    lc_arena_t *arena = lc_arena_new(1 << 24);
    *c = (collected_t){0};
    *st = (lc_status_t){0};
    int rc = lc_folded_parse((const uint8_t *)body, strlen(body), lines, arena, collect, c, st);
    lc_arena_free(arena);
    return rc;
}

static void test_folded_basic(void)
{
    collected_t c;
    lc_status_t st;
    LC_ASSERT_OK(
        run("a;b;c 12\na;b 3\nnospace\n\nframe with space;leaf x 5\r\nx;y +7", false, &c, &st));
    LC_ASSERT_EQ(c.n, 4);
    LC_ASSERT_STR_EQ(c.stacks[0], "a;b;c");
    LC_ASSERT_EQ(c.values[0], 12);
    LC_ASSERT_STR_EQ(c.stacks[1], "a;b");
    LC_ASSERT_EQ(c.values[1], 3);
    LC_ASSERT_STR_EQ(c.stacks[2], "frame with space;leaf x"); /* split at the LAST space */
    LC_ASSERT_EQ(c.values[2], 5);
    LC_ASSERT_STR_EQ(c.stacks[3], "x;y"); /* Atoi accepts a '+' sign */
    LC_ASSERT_EQ(c.values[3], 7);
}

static void test_folded_errors(void)
{
    static const char *const bad[] = {
        "a;b notanumber\n",         "a;b \n",   "a;b 1.5\n",     "a;b 0x10\n",
        "a 99999999999999999999\n", "a;b -1\n", "ok 1\na;b 2x\n"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        collected_t c;
        lc_status_t st;
        int rc = run(bad[i], false, &c, &st);
        if (rc == 0)
            fprintf(stderr, "  accepted: %s", bad[i]);
        LC_CHECK(rc < 0);
        LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    }
}

static void test_folded_long_line_ends_parsing(void)
{
    size_t n = LC_FOLDED_MAX_LINE + 10;
    char *body = malloc(n + 64);
    static const char head[] = "a;b 1\n", tail[] = " 2\nc;d 3\n";
    size_t at = sizeof(head) - 1;
    memcpy(body, head, at);
    memset(body + at, 'x', n);
    memcpy(body + at + n, tail, sizeof(tail));
    collected_t c;
    lc_status_t st;
    LC_ASSERT_OK(run(body, false, &c, &st));
    LC_ASSERT_EQ(c.n, 1);                   /* the long line and everything after it are dropped */
    LC_CHECK(run(body, true, &c, &st) < 0); /* lines: an error */
    free(body);
}

static void test_lines(void)
{
    collected_t c;
    lc_status_t st;
    LC_ASSERT_OK(run("a;b\na;b\nc\n\na;b\r\nd e;f\nc", true, &c, &st));
    LC_ASSERT_EQ(c.n, 3);
    LC_ASSERT_STR_EQ(c.stacks[0], "a;b");
    LC_ASSERT_EQ(c.values[0], 3);
    LC_ASSERT_STR_EQ(c.stacks[1], "c");
    LC_ASSERT_EQ(c.values[1], 2);
    LC_ASSERT_STR_EQ(c.stacks[2], "d e;f");
    LC_ASSERT_EQ(c.values[2], 1);
}

static void test_callback_stops(void)
{
    collected_t c;
    lc_status_t st;
    char body[16 * 20 + 64] = "";
    for (int i = 0; i < 20; i++)
        lc_test_appendf(body, sizeof(body), "s%d 1\n", i);
    LC_ASSERT_EQ(run(body, false, &c, &st), -99);
}

LC_TEST_MAIN(test_folded_basic, test_folded_errors, test_folded_long_line_ends_parsing, test_lines,
             test_callback_stops)
