/*
 * test_labelset.c — the /ingest `name` syntax (pyroscope-api.md §2.3), with the
 * exact names the Go and Node SDKs send (real-clients.md §1, §2b).
 */
#include "lc_test.h"
#include "receive_int.h"

typedef struct ls_case_s {
    const char *input;
    const char *app;       /* NULL = must fail */
    const char *pairs[16]; /* name, value, ..., NULL */
} ls_case_t;

static const ls_case_t cases[] = {
    {"foo", "foo", {NULL}},
    {"foo{bar=1,baz=2}", "foo", {"bar", "1", "baz", "2", NULL}},
    {" foo { bar = 1 , baz = 2 } ", "foo", {"bar", "1", "baz", "2", NULL}},
    {"foo{}", "foo", {NULL}},
    {"foo{a=1,}", "foo", {"a", "1", NULL}},
    {"app.cpu{x=y}", "app.cpu", {"x", "y", NULL}},
    {"foo{__name__=bar}", "bar", {NULL}},
    {"foo{k=v,__name__=other app}", "other app", {"k", "v", NULL}},
    {"app{k=v} trailing{x=y}", "app", {"k", "v", NULL}},
    {"app{k=v}x=y}", "app", {"k", "v", NULL}},
    {"app{a=b", "app", {NULL}},
    {"app{a", "app", {NULL}},
    {"app{a=x/y{z=w}", "app", {"a", "x/y{z=w", NULL}},
    {"app{1abc=v}", "app", {"1abc", "v", NULL}},
    {"app{a=1,a=2}", "app", {"a", "2", NULL}},
    {"app{a=}", "app", {"a", "", NULL}},
    {"my-app/x_y.z", "my-app/x_y.z", {NULL}},
    {"app{__session_id__=abc}", "app", {"__session_id__", "abc", NULL}},
    /* pyroscope-go v1.2.1 (real-clients.md §2b) */
    {"demo-go-app{__session_id__=77e425ea48b3919f,env=test}",
     "demo-go-app",
     {"__session_id__", "77e425ea48b3919f", "env", "test", NULL}},
    /* pyroscope-api.md §2.2: the current Go SDK shape */
    {"my-app{__session_id__=0123456789abcdef,otel.scope.name=com.grafana.pyroscope/go,"
     "otel.scope.version=v1.2.1,process.runtime.name=go,process.runtime.version=go1.22.1,"
     "tag=val}",
     "my-app",
     {"__session_id__", "0123456789abcdef", "otel.scope.name", "com.grafana.pyroscope/go",
      "otel.scope.version", "v1.2.1", "process.runtime.name", "go", "process.runtime.version",
      "go1.22.1", "tag", "val", NULL}},
    /* @pyroscope/nodejs 0.6.4 (real-clients.md §1), URL-decoded */
    {"demo-node-app{otel.scope.name=com.grafana.pyroscope/nodejs,otel.scope.version=0.6.4,"
     "process.runtime.name=nodejs,process.runtime.version=20.20.2,region=local,env=test}",
     "demo-node-app",
     {"otel.scope.name", "com.grafana.pyroscope/nodejs", "otel.scope.version", "0.6.4",
      "process.runtime.name", "nodejs", "process.runtime.version", "20.20.2", "region", "local",
      "env", "test", NULL}},
    /* @pyroscope/nodejs <= 0.6.1 */
    {"demo-node-app{region=local,env=test}",
     "demo-node-app",
     {"region", "local", "env", "test", NULL}},
    /* invalid */
    {"", NULL, {NULL}},
    {"   ", NULL, {NULL}},
    {"{a=b}", NULL, {NULL}},
    {"my app", NULL, {NULL}},
    {"app!{}", NULL, {NULL}},
    {"\xc3\xa4pp", NULL, {NULL}},
    {"app{bad-key=v}", NULL, {NULL}},
    {"app{=v}", NULL, {NULL}},
    {"app{ =v}", NULL, {NULL}},
    {"app{k:x=v}", NULL, {NULL}},
    {"ap{p{a=b}", NULL, {NULL}},
    {"app{__name__=}", NULL, {NULL}},
};

static size_t count_pairs(const ls_case_t *c)
{
    size_t n = 0;
    while (c->pairs[2 * n])
        n++;
    return n;
}

static void check_case(const ls_case_t *c, lc_arena_t *arena)
{
    ing_labelset_t ls;
    lc_status_t st = {0};
    int rc = ing_labelset_parse(c->input, arena, &ls, &st);
    if (!c->app) {
        LC_CHECK(rc < 0);
        LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
        if (rc == 0)
            fprintf(stderr, "  accepted: \"%s\"\n", c->input);
        return;
    }
    if (rc < 0)
        fprintf(stderr, "  \"%s\": %s\n", c->input, st.msg);
    LC_ASSERT_OK(rc);
    if (rc < 0)
        return;
    LC_ASSERT_STR_EQ(ls.app_name, c->app);
    LC_ASSERT_EQ(ls.n, count_pairs(c));
    for (size_t i = 0; i < count_pairs(c) && i < ls.n; i++) {
        LC_ASSERT_STR_EQ(ls.v[i].name, c->pairs[2 * i]);
        LC_ASSERT_STR_EQ(ls.v[i].value, c->pairs[2 * i + 1]);
        LC_ASSERT_STR_EQ(ing_labelset_get(&ls, c->pairs[2 * i]), c->pairs[2 * i + 1]);
    }
}

static void test_table(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 20);
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        check_case(&cases[i], arena);
        lc_arena_reset(arena);
    }
    lc_arena_free(arena);
}

static void test_get_and_messages(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 20);
    ing_labelset_t ls;
    lc_status_t st = {0};
    LC_ASSERT_OK(ing_labelset_parse("app{x=1}", arena, &ls, &st));
    LC_ASSERT_STR_EQ(ing_labelset_get(&ls, "__name__"), "app");
    LC_CHECK(ing_labelset_get(&ls, "missing") == NULL);
    LC_CHECK(ing_labelset_parse("app{bad-key=v}", arena, &ls, &st) < 0);
    LC_CHECK(strstr(st.msg, "bad-key") != NULL);
    LC_CHECK(strstr(st.msg, "'-'") != NULL);
    lc_arena_free(arena);
}

static void test_pair_cap(void)
{
    lc_arena_t *arena = lc_arena_new(8 << 20);
    size_t cap = 64 * 1024;
    char *s = malloc(cap);
    snprintf(s, cap, "app{");
    for (int i = 0; i <= ING_LABELSET_MAX_PAIRS; i++)
        lc_test_appendf(s, cap, "k%d=v,", i);
    lc_test_appendf(s, cap, "}");
    ing_labelset_t ls;
    lc_status_t st = {0};
    LC_CHECK(ing_labelset_parse(s, arena, &ls, &st) < 0);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    free(s);
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_table, test_get_and_messages, test_pair_cap)
