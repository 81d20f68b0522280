/*
 * test_normalize.c — metric names of /ingest pprof uploads (pyroscope-api.md
 * §2.5) for every testdata/ingest req_N.pprof with and without its st.json,
 * the app-name suffix table of §2.10, and __profile_type__ ids of the
 * standard types of §4.3. Expected values are written from the spec.
 */
#include "lc_test.h"
#include "receive_int.h"
#include "write_int.h"

static lc_pprof_t *load(lc_arena_t *arena, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    size_t len;
    unsigned char *data = lc_test_read_file(path, &len);
    if (!data) {
        fprintf(stderr, "  cannot read %s\n", path);
        return NULL;
    }
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    if (lc_pprof_decode(data, len, &lim, arena, &p, &st) < 0)
        fprintf(stderr, "  %s: %s\n", rel, st.msg);
    free(data);
    return p;
}

static int load_config(lc_arena_t *arena, const char *rel, ing_stconfig_t *cfg)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    size_t len;
    unsigned char *data = lc_test_read_file(path, &len);
    if (!data)
        return -1;
    bool is_null;
    lc_status_t st = {0};
    int rc = ing_stconfig_parse(data, len, arena, cfg, &is_null, &st);
    free(data);
    return rc;
}

typedef struct mn_case_s {
    const char *file;
    const char *config; /* NULL = none sent: the built-in table */
    const char *metric;
} mn_case_t;

static const mn_case_t metric_cases[] = {
    {"ingest/req_2.pprof", "ingest/req_2.st.json", "goroutines"},
    {"ingest/req_3.pprof", "ingest/req_3.st.json", "block"},
    {"ingest/req_4.pprof", "ingest/req_4.st.json", "mutex"},
    {"ingest/req_5.pprof", "ingest/req_5.st.json", "memory"},
    {"ingest/req_2.pprof", NULL, "goroutines"},
    {"ingest/req_3.pprof", NULL, "mutex"}, /* a Go block profile without config */
    {"ingest/req_4.pprof", NULL, "mutex"},
    {"ingest/req_5.pprof", NULL, "memory"},
    {"ingest/pyspy-1.pb.gz", NULL, "process_cpu"}, /* samples -> display "cpu" */
    {"ingest/nodejs-wall.pb.gz", NULL, "wall"},
    {"ingest/cpu-js.pb.gz", NULL, "wall"},
    {"ingest/heap-js.pprof", NULL, "memory"}, /* "objects" */
    {"ingest/nodejs-heap.pb.gz", NULL, "memory"},
    {"ingest/heap.pb", NULL, "memory"},
    {"pprof/pyroscope-cpu.pprof", NULL, "process_cpu"},
    {"pprof/pyroscope-profile_java", NULL, "process_cpu"},
};

static void test_metric_names(void)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 30);
    for (size_t i = 0; i < LC_ARRAY_LEN(metric_cases); i++) {
        const mn_case_t *c = &metric_cases[i];
        lc_pprof_t *p = load(arena, c->file);
        LC_CHECK(p != NULL);
        if (!p)
            continue;
        ing_stconfig_t cfg;
        if (c->config)
            LC_ASSERT_OK(load_config(arena, c->config, &cfg));
        const char *got = ing_metric_name(p, c->config ? &cfg : ing_stconfig_builtin());
        if (strcmp(got, c->metric) != 0)
            fprintf(stderr, "  %s config=%s\n", c->file, c->config ? c->config : "builtin");
        LC_ASSERT_STR_EQ(got, c->metric);
        lc_arena_reset(arena);
    }
    lc_arena_free(arena);
}

/* A sent config replaces the built-in table: a sample type it leaves out is
 * classified by its raw string. */
static void test_config_replaces_builtin(void)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 28);
    lc_pprof_t *p = load(arena, "ingest/req_3.pprof"); /* contentions, delay */
    ing_stconfig_t cfg;
    bool is_null;
    lc_status_t st = {0};
    const char *json = "{\"goroutine\":{\"display-name\":\"goroutines\"}}";
    LC_ASSERT_OK(
        ing_stconfig_parse((const uint8_t *)json, strlen(json), arena, &cfg, &is_null, &st));
    LC_CHECK(p && !is_null && cfg.n == 1);
    if (p)
        LC_ASSERT_STR_EQ(ing_metric_name(p, &cfg), "delay"); /* fallback: last raw type */
    LC_ASSERT_OK(ing_stconfig_parse((const uint8_t *)"null", 4, arena, &cfg, &is_null, &st));
    LC_CHECK(is_null);
    static const char *const bad[] = {
        "[1]", "{\"a\":1}", "{\"a\":{\"display-name\":1}}", "{\"a\":{\"cumulative\":\"yes\"}}",
        "{",   ""};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++)
        LC_CHECK(ing_stconfig_parse((const uint8_t *)bad[i], strlen(bad[i]), arena, &cfg, &is_null,
                                    &st) < 0);
    const char *ok =
        "{\"a\":null,\"b\":{\"Display-Name\":\"x_cpu\",\"sampled\":true,\"other\":[]}}";
    LC_ASSERT_OK(ing_stconfig_parse((const uint8_t *)ok, strlen(ok), arena, &cfg, &is_null, &st));
    const Ember__V1__SampleTypeConfig *b = ing_stconfig_find(&cfg, "b");
    LC_CHECK(b && strcmp(b->display_name, "x_cpu") == 0); /* field names match any case */
    lc_arena_free(arena);
}

typedef struct app_case_s {
    const char *app;
    const char *metric, *type, *unit, *service;
    bool scaled;
} app_case_t;

static const app_case_t app_cases[] = {
    {"app", "process_cpu", "samples", "count", "app", true},
    {"app.cpu", "process_cpu", "samples", "count", "app", true},
    {"my.app.cpu", "process_cpu", "samples", "count", "my.app", true},
    {"app.itimer", "process_cpu", "samples", "count", "app", true},
    {"app.wall", "wall", "samples", "count", "app", true},
    {"app.seconds", "wall", "samples", "count", "app", true},
    {"app.nanoseconds", "wall", "samples", "count", "app", true},
    {"app.microseconds", "wall", "samples", "count", "app", true},
    {"app.milliseconds", "wall", "samples", "count", "app", true},
    {"app.inuse_objects", "memory", "inuse_objects", "count", "app", false},
    {"app.alloc_objects", "memory", "alloc_objects", "count", "app", false},
    {"app.inuse_space", "memory", "inuse_space", "bytes", "app", false},
    {"app.alloc_space", "memory", "alloc_space", "bytes", "app", false},
    {"app.goroutines", "goroutine", "goroutines", "count", "app", false},
    {"app.mutex_count", "mutex", "contentions", "count", "app", false},
    {"app.mutex_duration", "mutex", "delay", "nanoseconds", "app", false},
    {"app.block_count", "block", "contentions", "count", "app", false},
    {"app.block_duration", "block", "delay", "nanoseconds", "app", false},
    {"app.lock_count", "block", "contentions", "count", "app", false},
    {"app.lock_duration", "block", "delay", "nanoseconds", "app", false},
    {"app.alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count", "app", false},
    {"app.alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count", "app",
     false},
    {"app.alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes", "app", false},
    {"app.alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes", "app", false},
    {"app.live", "memory", "live", "count", "app", false},
    {"app.exceptions", "exceptions", "samples", "count", "app", false},
    {"app.bytes", "memory", "samples", "bytes", "app", false},
    {"my.app", NULL, NULL, NULL, NULL, false}, /* the documented pitfall */
    {"app.CPU", NULL, NULL, NULL, NULL, false},
    {"app.", NULL, NULL, NULL, NULL, false},
};

static void test_app_suffix_table(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 16);
    for (size_t i = 0; i < LC_ARRAY_LEN(app_cases); i++) {
        const app_case_t *c = &app_cases[i];
        ing_app_type_t t;
        lc_status_t st = {0};
        int rc = ing_app_type(c->app, arena, &t, &st);
        if (!c->metric) {
            LC_CHECK(rc < 0);
            LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
            LC_CHECK(strstr(st.msg, "unknown profile type") != NULL);
            continue;
        }
        LC_ASSERT_OK(rc);
        if (rc < 0)
            continue;
        LC_ASSERT_STR_EQ(t.metric, c->metric);
        LC_ASSERT_STR_EQ(t.sample_type, c->type);
        LC_ASSERT_STR_EQ(t.sample_unit, c->unit);
        LC_ASSERT_STR_EQ(t.service, c->service);
        LC_ASSERT_EQ(t.rate_scaled, c->scaled);
    }
    lc_arena_free(arena);
}

typedef struct pt_case_s {
    const char *file;
    const char *metric;
    const char *ids[4];
} pt_case_t;

/* §4.3, with the /ingest metric names of §2.5 where the file came by /ingest. */
static const pt_case_t type_cases[] = {
    {"pprof/pyroscope-cpu.pprof",
     "process_cpu",
     {"process_cpu:samples:count:cpu:nanoseconds", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"}},
    {"pprof/pyroscope-heap",
     "memory",
     {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes",
      "memory:inuse_objects:count:space:bytes", "memory:inuse_space:bytes:space:bytes"}},
    {"ingest/req_2.pprof", "goroutines", {"goroutines:goroutine:count:goroutine:count"}},
    {"ingest/req_4.pprof",
     "mutex",
     {"mutex:contentions:count:contentions:count", "mutex:delay:nanoseconds:contentions:count"}},
    {"ingest/req_3.pprof",
     "block",
     {"block:contentions:count:contentions:count", "block:delay:nanoseconds:contentions:count"}},
    {"ingest/nodejs-wall.pb.gz",
     "wall",
     {"wall:samples:count:wall:microseconds", "wall:wall:microseconds:wall:microseconds"}},
    {"ingest/nodejs-heap.pb.gz",
     "memory",
     {"memory:inuse_objects:count:inuse_space:bytes",
      "memory:inuse_space:bytes:inuse_space:bytes"}},
    {"ingest/pyspy-1.pb.gz", "process_cpu", {"process_cpu:samples:count::milliseconds"}},
    {"pprof/pyroscope-profile_python", "process_cpu", {"process_cpu:samples:count::milliseconds"}},
    {"pprof/gopprof-go.nomappings.crash",
     "memory",
     {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes",
      "memory:inuse_objects:count:space:bytes", "memory:inuse_space:bytes:space:bytes"}},
};

static void test_profile_type_ids(void)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 30);
    for (size_t i = 0; i < LC_ARRAY_LEN(type_cases); i++) {
        const pt_case_t *c = &type_cases[i];
        lc_pprof_t *p = load(arena, c->file);
        LC_CHECK(p != NULL);
        if (!p)
            continue;
        size_t n = 0;
        while (n < 4 && c->ids[n])
            n++;
        LC_ASSERT_EQ(p->n_sample_type, n);
        for (size_t t = 0; t < n && t < p->n_sample_type; t++)
            LC_ASSERT_STR_EQ(ing_profile_type_id(p, c->metric, t, arena), c->ids[t]);
        lc_arena_reset(arena);
    }
    lc_arena_free(arena);
}

/* A profile without a period type: both period parts are empty. */
static void test_profile_type_without_period(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 20);
    char *strings[] = {"", "inuse_space", "bytes"};
    Google__V1__ValueType vt = GOOGLE__V1__VALUE_TYPE__INIT, *vts[] = {&vt};
    vt.type = 1;
    vt.unit = 2;
    Google__V1__Profile p = GOOGLE__V1__PROFILE__INIT;
    p.string_table = strings;
    p.n_string_table = 3;
    p.sample_type = vts;
    p.n_sample_type = 1;
    LC_ASSERT_STR_EQ(ing_profile_type_id(&p, "memory", 0, arena), "memory:inuse_space:bytes::");
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_metric_names, test_config_replaces_builtin, test_app_suffix_table,
             test_profile_type_ids, test_profile_type_without_period)
