/*
 * test_query_merge.c — the engine against a real store in a temporary dir:
 * testdata profiles are written one series per sample type, then the merged
 * name tree, flame graph, SelectSeries sum and merged pprof must all carry the
 * totals Go's pprof library computed (MANIFEST.jsonl), and `go tool pprof -raw`
 * must read the merged pprof. A hand-made profile checks inlined frames and
 * locations without lines ("module+0xoffset" frames), with the flame graph
 * worked out by hand.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/query.h"
#include "lc_test.h"
#include "lc_test_pprof.h"

#define T0_NS 1700000000000000000LL /* all profiles are written at this time */

static lc_store_t *store;
static char dir[] = "/tmp/ember-query-XXXXXX";

typedef struct fixture_s {
    const char *file; /* relative to LC_TESTDATA_DIR */
    const char *service;
} fixture_t;

static const fixture_t fixtures[] = {
    {"pprof/gopprof-sample.cpu", "gosample"},
    {"pprof/gopprof-large.cpu", "golarge"},
    {"pprof/pyroscope-heap", "goheap"},
    {"pprof/pyroscope-profile_java", "java"},
    {"pprof/pyroscope-go.cpu.labels.pprof", "golabels"},
    {"pprof/pyroscope-profile_nodejs", "nodejs"},
    {"pprof/pyroscope-no_addr_no_line.pb.gz", "noaddr"},
    {"pprof/gopprof-cppbench.cpu_no_samples_type", "cppbench"},
    {"pprof/pyroscope-cpu_go_truncated_1.pb.gz", "truncated"},
    {"ingest/req_3.pprof", "block"},
};

/* ------------------------------------------------------------- writing */

static char *profile_type_id(const lc_pprof_t *p, size_t i)
{
    const Google__V1__ValueType *st = p->sample_type[i], *pt = p->period_type;
    char buf[512];
    snprintf(buf, sizeof(buf), "test:%s:%s:%s:%s", lc_pprof_str(p, st->type),
             lc_pprof_str(p, st->unit), pt ? lc_pprof_str(p, pt->type) : "",
             pt ? lc_pprof_str(p, pt->unit) : "");
    return strdup(buf);
}

static void write_profile(lc_store_txn_t *txn, const lc_pprof_t *p, const char *service)
{
    lc_arena_t *a = lc_arena_new(256u << 20);
    lc_pprof_index_t *ix = NULL;
    LC_ASSERT_OK(lc_pprof_index_new(p, a, &ix));
    for (size_t i = 0; i < p->n_sample_type; i++) {
        char *pt = profile_type_id(p, i);
        lc_labels_t ls;
        lc_labels_init(&ls);
        lc_labels_add(&ls, "__name__", "test");
        lc_labels_add(&ls, "__profile_type__", pt);
        lc_labels_add(&ls, "service_name", service);
        lc_labels_sort(&ls);
        lc_store_write_t w = {.tenant = "anonymous",
                              .labels = &ls,
                              .time_ns = T0_NS,
                              .profile = p,
                              .index = ix,
                              .value_index = i};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
        lc_labels_fini(&ls);
        free(pt);
    }
    lc_arena_free(a);
}

static void write_fixture(lc_store_txn_t *txn, const fixture_t *f)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, f->file);
    size_t len = 0;
    uint8_t *data = lc_test_read_file(path, &len);
    LC_CHECK(data != NULL);
    if (!data)
        return;
    lc_arena_t *a = lc_arena_new(512u << 20);
    lc_pprof_t *p = lc_test_pprof_decode(data, len, a);
    if (p)
        write_profile(txn, p, f->service);
    lc_arena_free(a);
    free(data);
}

/*
 * The hand-made profile: functions main, outer, inner, leaf; locations
 * L1 [main], L2 [inner, outer] (inner inlined into outer), L3 [leaf], L4 (no
 * lines). Samples (leaf first): L3 L2 L1 = 5, L2 L1 = 2, L4 L1 = 3, L4 = 1.
 */
static void write_handmade(lc_store_txn_t *txn)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10);
    uint64_t map = lc_pprof_builder_mapping(b, 0x1000, 0x2000, 0, "/bin/app", "", true);
    uint64_t fmain = lc_pprof_builder_function(b, "main", "main", "app.c", 1);
    uint64_t fouter = lc_pprof_builder_function(b, "outer", "outer", "app.c", 10);
    uint64_t finner = lc_pprof_builder_function(b, "inner", "inner", "app.c", 20);
    uint64_t fleaf = lc_pprof_builder_function(b, "leaf", "leaf", "app.c", 30);
    lc_pprof_line_t l1[] = {{fmain, 2}}, l2[] = {{finner, 21}, {fouter, 11}}, l3[] = {{fleaf, 31}};
    uint64_t L1 = lc_pprof_builder_location(b, map, 0x1100, l1, 1);
    uint64_t L2 = lc_pprof_builder_location(b, map, 0x1200, l2, 2);
    uint64_t L3 = lc_pprof_builder_location(b, map, 0x1300, l3, 1);
    uint64_t L4 = lc_pprof_builder_location(b, map, 0x1400, NULL, 0);
    const uint64_t s1[] = {L3, L2, L1}, s2[] = {L2, L1}, s3[] = {L4, L1}, s4[] = {L4};
    const int64_t v1 = 5, v2 = 2, v3 = 3, v4 = 1;
    lc_pprof_builder_sample(b, s1, 3, &v1, NULL, 0);
    lc_pprof_builder_sample(b, s2, 2, &v2, NULL, 0);
    lc_pprof_builder_sample(b, s3, 2, &v3, NULL, 0);
    lc_pprof_builder_sample(b, s4, 1, &v4, NULL, 0);
    lc_arena_t *a = lc_arena_new(16u << 20);
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    if (p)
        write_profile(txn, p, "handmade");
    lc_arena_free(a);
}

static void setup(void)
{
    LC_CHECK(mkdtemp(dir) != NULL);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    for (size_t i = 0; i < LC_ARRAY_LEN(fixtures); i++)
        write_fixture(txn, &fixtures[i]);
    write_handmade(txn);
    LC_ASSERT_OK(lc_store_write_commit(txn));
}

static void teardown(void)
{
    lc_store_close(store);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

/* ------------------------------------------------------------- querying */

typedef struct query_s {
    lc_selector_t sel;
    lc_query_t q;
    lc_store_reader_t *r;
} query_t;

static const char *const tenants[] = {"anonymous"};

static void query_begin(query_t *qq, const char *service, const char *profile_type)
{
    lc_status_t st = {0};
    memset(qq, 0, sizeof(*qq));
    char sel[256];
    snprintf(sel, sizeof(sel), "{service_name=\"%s\"}", service);
    LC_ASSERT_OK(lc_selector_parse(sel, strlen(sel), &qq->sel, &st));
    LC_ASSERT_OK(lc_selector_add(&qq->sel, "__profile_type__", LC_MATCH_EQ, profile_type, &st));
    qq->q = (lc_query_t){.tenants = tenants,
                         .n_tenants = 1,
                         .sel = &qq->sel,
                         .start_ns = T0_NS - 1000000,
                         .end_ns = T0_NS + 1000000};
    LC_ASSERT_OK(lc_store_read_begin(store, qq->q.start_ns, qq->q.end_ns, &qq->r));
}

static void query_end(query_t *qq)
{
    lc_store_read_end(qq->r);
    lc_selector_fini(&qq->sel);
}

static int64_t tree_total(const char *service, const char *pt, int64_t max_nodes)
{
    query_t qq;
    query_begin(&qq, service, pt);
    lc_ftree_t *t = lc_ftree_new(0);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_tree(qq.r, &qq.q, t, &st));
    query_end(&qq);
    lc_arena_t *a = lc_arena_new(256u << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, max_nodes, a, &fg));
    int64_t total = lc_ftree_total(t);
    if (fg) {
        LC_ASSERT_EQ(fg->total, total);
        /* The root row holds the whole total. */
        LC_ASSERT_EQ(fg->levels[0]->values[1], total);
    }
    lc_arena_free(a);
    lc_ftree_free(t);
    return total;
}

static double series_total(const char *service, const char *pt)
{
    query_t qq;
    query_begin(&qq, service, pt);
    /* The profile time is the first boundary itself (t <= start). */
    lc_query_series_opts_t o = {
        .start_ms = T0_NS / 1000000, .end_ms = T0_NS / 1000000 + 1000, .step_ms = 15000};
    lc_query_series_t *s = lc_query_series_new(&o);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_series_collect(qq.r, &qq.q, s, &st));
    query_end(&qq);
    lc_arena_t *a = lc_arena_new(1u << 20);
    Types__V1__Series **out = NULL;
    size_t n = 0;
    LC_ASSERT_OK(lc_query_series_emit(s, a, &out, &n));
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < out[i]->n_points; j++)
            sum += out[i]->points[j]->value;
    lc_arena_free(a);
    lc_query_series_free(s);
    return sum;
}

/* Merges into pprof bytes (caller frees buf). */
static void merged_pprof(const char *service, const char *pt, const char *type, const char *unit,
                         lc_buf_t *buf)
{
    query_t qq;
    query_begin(&qq, service, pt);
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, type, unit);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_pprof(qq.r, &qq.q, b, &st));
    query_end(&qq);
    lc_buf_init(buf, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, buf));
    lc_pprof_builder_free(b);
}

static int64_t pprof_total(const lc_buf_t *buf)
{
    lc_arena_t *a = lc_arena_new(512u << 20);
    lc_pprof_t *p = lc_test_pprof_decode(buf->data, buf->len, a);
    int64_t total = 0;
    for (size_t i = 0; p && i < p->n_sample; i++)
        total += p->sample[i]->value[0];
    lc_arena_free(a);
    return total;
}

/* Sums the sample values `go tool pprof -raw` prints; -1 if it failed. */
static int64_t go_pprof_total(const lc_buf_t *buf)
{
    char path[] = "/tmp/ember-query-pprof-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, buf->data, buf->len) != (ssize_t)buf->len)
        return -1;
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "go tool pprof -raw -symbolize=none '%s' 2>&1", path);
    FILE *f = popen(cmd, "r");
    int64_t total = 0;
    bool in_samples = false;
    char line[8192];
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Samples:", 8) == 0) {
            in_samples = true;
        } else if (in_samples && strchr(line, ':') && !strstr(line, "/")) {
            total += strtoll(line, NULL, 10);
        } else if (in_samples && strncmp(line, "Locations", 9) == 0) {
            in_samples = false;
        }
    }
    int rc = f ? pclose(f) : -1;
    unlink(path);
    return rc == 0 ? total : -1;
}

static bool have_go(void)
{
    return system("go version >/dev/null 2>&1") == 0;
}

/* For every fixture and sample type: tree, flame graph, series and pprof
 * totals equal the MANIFEST totals. */
static void check_manifest_entry(const fixture_t *f, json_t *entry)
{
    json_t *types = json_object_get(entry, "sample_types");
    const char *ptype = json_string_value(json_object_get(entry, "period_type"));
    char ptype_type[128] = "", ptype_unit[128] = "";
    if (ptype)
        sscanf(ptype, "%127[^/]/%127s", ptype_type, ptype_unit);
    if (ptype && ptype[0] == '/')
        snprintf(ptype_unit, sizeof(ptype_unit), "%s", ptype + 1);
    size_t i;
    json_t *t;
    json_array_foreach(types, i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *unit = json_string_value(json_object_get(t, "unit"));
        int64_t want = json_integer_value(json_object_get(t, "total"));
        char pt[512];
        snprintf(pt, sizeof(pt), "test:%s:%s:%s:%s", type, unit, ptype_type, ptype_unit);
        int64_t got = tree_total(f->service, pt, 8192);
        if (got != want)
            fprintf(stderr, "%s %s: tree total %lld want %lld\n", f->file, pt, (long long)got,
                    (long long)want);
        LC_ASSERT_EQ(got, want);
        LC_CHECK(series_total(f->service, pt) == (double)want);
        lc_buf_t buf;
        merged_pprof(f->service, pt, type, unit, &buf);
        LC_ASSERT_EQ(pprof_total(&buf), want);
        if (i == 0 && have_go())
            LC_ASSERT_EQ(go_pprof_total(&buf), want);
        lc_buf_fini(&buf);
    }
}

static void test_manifest_totals(void)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/MANIFEST.jsonl", LC_TESTDATA_DIR);
    FILE *mf = fopen(path, "r");
    LC_CHECK(mf != NULL);
    if (!have_go())
        fprintf(stderr, "note: go is missing; skipping the go tool pprof checks\n");
    char line[65536];
    size_t checked = 0;
    while (mf && fgets(line, sizeof(line), mf)) {
        json_t *entry = json_loads(line, 0, NULL);
        const char *file = json_string_value(json_object_get(entry, "file"));
        for (size_t i = 0; file && i < LC_ARRAY_LEN(fixtures); i++) {
            if (strcmp(fixtures[i].file, file) == 0) {
                check_manifest_entry(&fixtures[i], entry);
                checked++;
            }
        }
        json_decref(entry);
    }
    if (mf)
        fclose(mf);
    LC_ASSERT_EQ(checked, LC_ARRAY_LEN(fixtures));
}

/*
 * Hand-made profile: root self 1 (L4 alone), main self 3 (L4 under main adds
 * no frame), outer -> inner (self 2) -> leaf (5). Root total 11 starts the
 * children at x = 1: level 1 main [1,10,3,1]; level 2 outer [4,7,0,2] (x =
 * 1 + 3); level 3 inner [4,7,2,3]; level 4 leaf [6,5,5,4] (x = 4 + 2).
 */
static void test_inlined_and_lineless(void)
{
    query_t qq;
    query_begin(&qq, "handmade", "test:cpu:nanoseconds:cpu:nanoseconds");
    lc_ftree_t *t = lc_ftree_new(0);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_tree(qq.r, &qq.q, t, &st));
    query_end(&qq);
    lc_arena_t *a = lc_arena_new(1u << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 0, a, &fg));
    /* L4 has no lines: it is the frame "app+0x400" (/bin/app mapped at
     * 0x1000 from file offset 0, address 0x1400), under main and at the root */
    static const char *const names[] = {"total", "main", "outer", "inner", "leaf", "app+0x400"};
    static const size_t level_values[] = {4, 8, 8, 4, 4};
    static const int64_t want[5][8] = {{0, 11, 0, 0},
                                       {0, 1, 1, 5, 0, 10, 0, 1},
                                       {1, 3, 3, 5, 0, 7, 0, 2},
                                       {4, 7, 2, 3},
                                       {6, 5, 5, 4}};
    LC_ASSERT_EQ(fg->n_names, 6);
    for (size_t i = 0; i < 6 && i < fg->n_names; i++)
        LC_ASSERT_STR_EQ(fg->names[i], names[i]);
    LC_ASSERT_EQ(fg->n_levels, 5);
    for (size_t l = 0; l < 5 && l < fg->n_levels; l++) {
        LC_ASSERT_EQ(fg->levels[l]->n_values, level_values[l]);
        for (size_t k = 0; k < level_values[l] && k < fg->levels[l]->n_values; k++)
            LC_ASSERT_EQ(fg->levels[l]->values[k], want[l][k]);
    }
    LC_ASSERT_EQ(fg->total, 11);
    LC_ASSERT_EQ(fg->max_self, 5);
    lc_arena_free(a);
    lc_ftree_free(t);
}

/* The merged pprof of the hand-made profile has its four stacks back, with
 * inlined lines intact (L2 keeps two lines, inner first). */
static void test_pprof_handmade(void)
{
    lc_buf_t buf;
    merged_pprof("handmade", "test:cpu:nanoseconds:cpu:nanoseconds", "cpu", "nanoseconds", &buf);
    lc_arena_t *a = lc_arena_new(1u << 20);
    lc_pprof_t *p = lc_test_pprof_decode(buf.data, buf.len, a);
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_EQ(p->n_sample, 4);
        LC_ASSERT_EQ(p->n_location, 4);
        LC_ASSERT_EQ(p->n_function, 4);
        size_t two_lines = 0, lineless = 0;
        for (size_t i = 0; i < p->n_location; i++) {
            const Google__V1__Location *l = p->location[i];
            if (l->n_line == 0) { /* kept as it is: mapping and address, no made-up name */
                lineless++;
                LC_ASSERT_EQ(l->address, 0x1400);
                LC_CHECK(l->mapping_id >= 1 && l->mapping_id <= p->n_mapping);
                if (l->mapping_id >= 1 && l->mapping_id <= p->n_mapping)
                    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->mapping[l->mapping_id - 1]->filename),
                                     "/bin/app");
            }
            if (p->location[i]->n_line == 2) {
                two_lines++;
                const Google__V1__Function *fn =
                    p->function[p->location[i]->line[0]->function_id - 1];
                LC_ASSERT_STR_EQ(lc_pprof_str(p, fn->name), "inner");
            }
        }
        LC_ASSERT_EQ(two_lines, 1);
        LC_ASSERT_EQ(lineless, 1);
    }
    LC_ASSERT_EQ(pprof_total(&buf), 11);
    lc_arena_free(a);
    lc_buf_fini(&buf);
}

/* A selector that matches nothing merges to the empty flame graph. */
static void test_no_match(void)
{
    LC_ASSERT_EQ(tree_total("nobody", "test:cpu:nanoseconds:cpu:nanoseconds", 0), 0);
}

static void test_setup(void)
{
    setup();
}
static void test_teardown(void)
{
    teardown();
}

LC_TEST_MAIN(test_setup, test_manifest_totals, test_inlined_and_lineless, test_pprof_handmade,
             test_no_match, test_teardown)
