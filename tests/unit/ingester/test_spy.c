/*
 * test_spy.c — function names of scripting-language profilers
 * (pyroscope-api.md §2.5): pyspy/rbspy/scripting get "<filename> <function>";
 * py-spy's absolute filenames are left alone; other spies change nothing.
 */
#include "lc_test.h"
#include "receive_int.h"

static lc_pprof_t *load_pyspy(lc_arena_t *arena)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/ingest/pyspy-1.pb.gz", LC_TESTDATA_DIR);
    size_t len;
    unsigned char *data = lc_test_read_file(path, &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    if (!data || lc_pprof_decode(data, len, &lim, arena, &p, &st) < 0)
        fprintf(stderr, "  cannot load pyspy-1.pb.gz: %s\n", st.msg);
    free(data);
    return p;
}

static void check_spy(const char *spy, bool rewrites, bool skip_absolute)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 26);
    lc_pprof_t *p = load_pyspy(arena);
    LC_CHECK(p != NULL);
    if (!p) {
        lc_arena_free(arena);
        return;
    }
    char want[64][512];
    size_t n = p->n_function < 64 ? p->n_function : 64;
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        const char *file = ing_pprof_str(p, p->function[i]->filename);
        const char *name = ing_pprof_str(p, p->function[i]->name);
        bool keep = !rewrites || !*file || (skip_absolute && file[0] == '/');
        snprintf(want[i], sizeof(want[i]), keep ? "%s%s" : "%s %s", keep ? "" : file, name);
        changed += !keep;
    }
    LC_ASSERT_OK(ing_spy_fix_names(p, spy, arena));
    for (size_t i = 0; i < n; i++)
        LC_ASSERT_STR_EQ(ing_pprof_str(p, p->function[i]->name), want[i]);
    if (rewrites)
        LC_CHECK(changed > 0); /* the fixture exercises the rewrite */
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st)); /* still a valid profile */
    lc_arena_free(arena);
}

static void test_pyspy(void)
{
    check_spy("pyspy", true, true);
}
static void test_rbspy(void)
{
    check_spy("rbspy", true, false);
}
static void test_scripting(void)
{
    check_spy("scripting", true, false);
}
static void test_others_untouched(void)
{
    check_spy("gospy", false, false);
    check_spy("unknown", false, false);
    LC_CHECK(!ing_spy_rewrites_names(NULL));
}

LC_TEST_MAIN(test_pyspy, test_rbspy, test_scripting, test_others_untouched)
