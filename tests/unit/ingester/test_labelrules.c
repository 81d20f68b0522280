/*
 * test_labelrules.c — series labels at the edge: /ingest labels (§2.5, §2.10)
 * and Push label defaults, relabel rules and limits (§3.3 items 3-4).
 */
#include "lc_test.h"
#include "receive_int.h"

static const ing_label_limits_t lim = {30, 1024, 2048};

static void labels_of(lc_labels_t *ls, const char *const *kv)
{
    lc_labels_init(ls);
    for (size_t i = 0; kv[i]; i += 2)
        lc_labels_add(ls, kv[i], kv[i + 1]);
}

/* "k=v,k=v" of a sorted label set. */
static const char *render(const lc_labels_t *ls)
{
    static char buf[4096];
    buf[0] = 0;
    for (size_t i = 0; i < ls->n; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s=%s", i ? "," : "",
                 ls->v[i].name, ls->v[i].value);
    return buf;
}

static int push_case(const char *const *kv, const char *want)
{
    lc_labels_t ls;
    labels_of(&ls, kv);
    lc_status_t st = {0};
    int rc = ing_push_labels_normalize(&ls, &lim, &st);
    if (want && rc == 0)
        LC_ASSERT_STR_EQ(render(&ls), want);
    if (want && rc < 0)
        fprintf(stderr, "  unexpected error: %s\n", st.msg);
    if (rc < 0)
        LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    lc_labels_fini(&ls);
    return rc;
}

static void test_push_defaults_and_relabel(void)
{
    LC_ASSERT_OK(push_case((const char *[]){"__name__", "process_cpu", NULL},
                           "__name__=process_cpu,service_name=unknown_service"));
    LC_ASSERT_OK(
        push_case((const char *[]){"service_name", "svc", "__name__", "godeltaprof_memory", NULL},
                  "__delta__=false,__name__=memory,service_name=svc"));
    LC_ASSERT_OK(push_case(
        (const char *[]){"service_name", "svc", "__name__", "wall", "__type__", "cpu", NULL},
        "__name__=process_cpu,__type__=cpu,service_name=svc"));
    LC_ASSERT_OK(push_case((const char *[]){"service_name", "svc", "__name__", "wall", NULL},
                           "__name__=wall,service_name=svc"));
    LC_ASSERT_OK(
        push_case((const char *[]){"service_name", "svc", "__name__", "memory", "empty", "", NULL},
                  "__name__=memory,service_name=svc")); /* empty value = absent */
    /* godeltaprof_ alone leaves an empty __name__: rejected. */
    LC_CHECK(push_case((const char *[]){"__name__", "godeltaprof_", NULL}, NULL) < 0);
}

static void test_push_rejects(void)
{
    LC_CHECK(push_case((const char *[]){"service_name", "svc", NULL}, NULL) < 0);
    LC_CHECK(push_case((const char *[]){"__name__", "", "service_name", "svc", NULL}, NULL) < 0);
    LC_CHECK(push_case((const char *[]){"__name__", "cpu", "a", "1", "a", "2", NULL}, NULL) < 0);
    LC_CHECK(push_case((const char *[]){"__name__", "cpu", "bad", "\xff\xfe", NULL}, NULL) < 0);
    LC_CHECK(push_case((const char *[]){"__name__", "cpu", "\xc0\x80", "x", NULL}, NULL) < 0);
}

static void test_push_limits(void)
{
    /* 30 names including the added service_name pass; 31 do not. */
    const char *kv[80];
    char names[40][8];
    size_t n = 0;
    kv[n++] = "__name__", kv[n++] = "cpu";
    for (int i = 0; i < 28; i++) {
        snprintf(names[i], sizeof(names[i]), "k%02d", i);
        kv[n++] = names[i], kv[n++] = "v";
    }
    kv[n] = NULL;
    LC_ASSERT_OK(push_case(kv, NULL));
    kv[n++] = "k99", kv[n++] = "v", kv[n] = NULL;
    LC_CHECK(push_case(kv, NULL) < 0);

    char *long_name = malloc(1026), *long_value = malloc(2050);
    memset(long_name, 'n', 1025), long_name[1025] = 0;
    memset(long_value, 'v', 2049), long_value[2049] = 0;
    LC_CHECK(push_case((const char *[]){"__name__", "cpu", long_name, "v", NULL}, NULL) < 0);
    LC_CHECK(push_case((const char *[]){"__name__", "cpu", "k", long_value, NULL}, NULL) < 0);
    long_name[1024] = 0, long_value[2048] = 0; /* exactly at the limits */
    LC_ASSERT_OK(push_case((const char *[]){"__name__", "cpu", long_name, long_value, NULL}, NULL));
    free(long_name);
    free(long_value);
}

static void test_ingest_labels(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 20);
    ing_labelset_t set;
    lc_status_t st = {0};
    LC_ASSERT_OK(
        ing_labelset_parse("app{env=test,__session_id__=s1,__other__=x}", arena, &set, &st));
    lc_labels_t ls;
    ing_ingest_labels(&ls, "memory", "gospy", "app", &set, false);
    LC_ASSERT_OK(ing_labels_finish(&ls, &lim, &st));
    LC_ASSERT_STR_EQ(render(&ls), "__delta__=false,__name__=memory,__session_id__=s1,env=test,"
                                  "pyroscope_spy=gospy,service_name=app");
    lc_labels_fini(&ls);

    /* The labelset's service_name wins; text formats then keep the app as app_name. */
    LC_ASSERT_OK(ing_labelset_parse("app.cpu{service_name=svc}", arena, &set, &st));
    ing_ingest_labels(&ls, "process_cpu", "unknown", "app", &set, true);
    LC_ASSERT_OK(ing_labels_finish(&ls, &lim, &st));
    LC_ASSERT_STR_EQ(render(&ls), "__delta__=false,__name__=process_cpu,app_name=app,"
                                  "pyroscope_spy=unknown,service_name=svc");
    lc_labels_fini(&ls);
    ing_ingest_labels(&ls, "process_cpu", "unknown", "app", &set, false); /* pprof: no app_name */
    LC_ASSERT_OK(ing_labels_finish(&ls, &lim, &st));
    LC_CHECK(lc_labels_get(&ls, "app_name") == NULL);
    lc_labels_fini(&ls);
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_push_defaults_and_relabel, test_push_rejects, test_push_limits,
             test_ingest_labels)
