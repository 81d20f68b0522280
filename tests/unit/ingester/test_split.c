/*
 * test_split.c — one series per distinct set of string sample labels
 * (pyroscope-api.md §3.3 item 6) on real profiles. The expected groups are
 * counted here independently (canonical "k=v;..." strings), and totals per
 * group must add up to the MANIFEST totals computed by Go.
 */
#include "lc_test.h"
#include "write_int.h"

static lc_pprof_t *load(lc_arena_t *arena, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    size_t len;
    unsigned char *data = lc_test_read_file(path, &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    if (!data || lc_pprof_decode(data, len, &lim, arena, &p, &st) < 0)
        fprintf(stderr, "  cannot load %s: %s\n", rel, st.msg);
    free(data);
    return p;
}

static bool is_span_key(const char *k)
{
    return !strcmp(k, "trace_id") || !strcmp(k, "span_id") || !strcmp(k, "profile_id");
}

/* "k1=v1;k2=v2" of a sample's string labels, keys sorted by selection. */
static void canonical(const lc_pprof_t *p, const Google__V1__Sample *s, char *out, size_t cap)
{
    bool used[64] = {false};
    out[0] = 0;
    for (;;) {
        int best = -1;
        for (size_t i = 0; i < s->n_label && i < 64; i++) {
            const char *k = ing_pprof_str(p, s->label[i]->key);
            if (used[i] || s->label[i]->str == 0 || is_span_key(k))
                continue;
            if (best < 0 || strcmp(k, ing_pprof_str(p, s->label[best]->key)) < 0)
                best = (int)i;
        }
        if (best < 0)
            return;
        used[best] = true;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s=%s;", ing_pprof_str(p, s->label[best]->key),
                 ing_pprof_str(p, s->label[best]->str));
    }
}

static size_t count_distinct(const lc_pprof_t *p)
{
    static char seen[4096][256];
    size_t n = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        char c[256];
        canonical(p, p->sample[i], c, sizeof(c));
        size_t j = 0;
        while (j < n && strcmp(seen[j], c) != 0)
            j++;
        if (j == n && n < 4096)
            snprintf(seen[n++], sizeof(seen[0]), "%s", c);
    }
    return n;
}

static void check_file(const char *rel, int64_t total0, int64_t total1, size_t min_groups)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 28);
    lc_pprof_t *p = load(arena, rel);
    LC_CHECK(p != NULL);
    if (!p) {
        lc_arena_free(arena);
        return;
    }
    ing_group_t *g;
    size_t n;
    LC_ASSERT_OK(ing_split_samples(p, arena, &g, &n));
    size_t want = count_distinct(p);
    LC_ASSERT_EQ(n, want);
    LC_CHECK(n >= min_groups);
    size_t samples = 0;
    int64_t sum0 = 0, sum1 = 0;
    for (size_t i = 0; i < n; i++) {
        char first[256];
        canonical(p, p->sample[g[i].samples[0]], first, sizeof(first));
        char mine[256] = "";
        for (size_t k = 0; k < g[i].n_labels; k++)
            lc_test_appendf(mine, sizeof(mine), "%s=%s;", g[i].labels[k].name,
                            g[i].labels[k].value);
        LC_ASSERT_STR_EQ(mine, first);
        for (size_t k = 0; k < g[i].n_samples; k++) {
            char c[256];
            canonical(p, p->sample[g[i].samples[k]], c, sizeof(c));
            LC_ASSERT_STR_EQ(c, first);
            sum0 += p->sample[g[i].samples[k]]->value[0];
            if (p->n_sample_type > 1)
                sum1 += p->sample[g[i].samples[k]]->value[1];
        }
        samples += g[i].n_samples;
    }
    LC_ASSERT_EQ(samples, p->n_sample);
    LC_ASSERT_EQ(sum0, total0);
    LC_ASSERT_EQ(sum1, total1);
    lc_arena_free(arena);
}

static void test_go_cpu_labels(void)
{
    /* MANIFEST: samples/count 873, cpu/nanoseconds 8730000000; labels foo, function, profile_id */
    check_file("pprof/pyroscope-go.cpu.labels.pprof", 873, 8730000000LL, 2);
}

static void test_span_ids(void)
{
    check_file("pprof/pyroscope-single_group_with_optional_span_id.pb.gz", 132, 1320000000LL, 1);
    lc_arena_t *arena = lc_arena_new((size_t)1 << 26);
    lc_pprof_t *p = load(arena, "pprof/pyroscope-go.cpu.labels.pprof");
    ing_group_t *g;
    size_t n;
    LC_ASSERT_OK(p ? ing_split_samples(p, arena, &g, &n) : -1);
    /* Samples with a 16-hex-digit profile_id carry it as their span id. */
    size_t with_id = 0, with_span = 0;
    for (size_t i = 0; p && i < p->n_sample; i++) {
        for (size_t k = 0; k < p->sample[i]->n_label; k++) {
            const char *key = ing_pprof_str(p, p->sample[i]->label[k]->key);
            const char *v = ing_pprof_str(p, p->sample[i]->label[k]->str);
            with_id += (!strcmp(key, "profile_id") || !strcmp(key, "span_id")) && strlen(v) == 16;
        }
    }
    for (size_t i = 0; p && i < n; i++) {
        for (size_t k = 0; k < g[i].n_samples; k++)
            with_span += g[i].span_ids[k] != 0;
    }
    LC_ASSERT_EQ(with_span, with_id);
    lc_arena_free(arena);
}

static void test_span_id_parse(void)
{
    LC_ASSERT_EQ(ing_parse_span_id("0123456789abcdef") == 0x0123456789abcdefULL, 1);
    LC_ASSERT_EQ(ing_parse_span_id("FFFFFFFFFFFFFFFF") == UINT64_MAX, 1);
    LC_ASSERT_EQ(ing_parse_span_id("0123456789abcde"), 0);   /* 15 digits */
    LC_ASSERT_EQ(ing_parse_span_id("0123456789abcdef0"), 0); /* 17 digits */
    LC_ASSERT_EQ(ing_parse_span_id("0123456789abcdeg"), 0);
    LC_ASSERT_EQ(ing_parse_span_id(""), 0);
}

static void test_no_samples(void)
{
    Google__V1__Profile p = GOOGLE__V1__PROFILE__INIT;
    lc_arena_t *arena = lc_arena_new(1 << 20);
    ing_group_t *g;
    size_t n;
    LC_ASSERT_OK(ing_split_samples(&p, arena, &g, &n));
    LC_ASSERT_EQ(n, 1); /* the series still exists */
    LC_ASSERT_EQ(g[0].n_samples, 0);
    lc_arena_free(arena);
}

/* By hand: labels sorted by name, a repeated name keeps its first value,
 * runs of samples with the same label fields share a group, numeric labels
 * and a label-less sample make the empty set. Strings: 0 "", 1 "b", 2 "1",
 * 3 "a", 4 "x", 5 "y", 6 "n". */
static void test_hand_labels(void)
{
    char *strs[] = {"", "b", "1", "a", "x", "y", "n"};
    Google__V1__Label l[5];
    for (size_t i = 0; i < 5; i++)
        google__v1__label__init(&l[i]);
    l[0].key = 1, l[0].str = 2; /* b=1 */
    l[1].key = 3, l[1].str = 4; /* a=x */
    l[2].key = 3, l[2].str = 5; /* a=y: dropped, a is taken */
    l[3].key = 6, l[3].num = 7; /* numeric: ignored */
    l[4].key = 3, l[4].str = 4; /* a=x again, a label of its own */
    Google__V1__Label *first[] = {&l[0], &l[1], &l[2]}, *numeric[] = {&l[3]};
    Google__V1__Label *again[] = {&l[4], &l[0]};
    Google__V1__Sample s[5];
    for (size_t i = 0; i < 5; i++)
        google__v1__sample__init(&s[i]);
    s[0].label = s[1].label = first; /* a run of the same fields */
    s[0].n_label = s[1].n_label = 3;
    s[2].label = numeric;
    s[2].n_label = 1;
    /* s[3]: no labels */
    s[4].label = again;
    s[4].n_label = 2;
    Google__V1__Sample *sp[] = {&s[0], &s[1], &s[2], &s[3], &s[4]};
    Google__V1__Profile p = GOOGLE__V1__PROFILE__INIT;
    p.string_table = strs;
    p.n_string_table = 7;
    p.sample = sp;
    p.n_sample = 5;
    lc_arena_t *arena = lc_arena_new(1 << 20);
    ing_group_t *g;
    size_t n;
    LC_ASSERT_OK(ing_split_samples(&p, arena, &g, &n));
    LC_ASSERT_EQ(n, 2);
    LC_ASSERT_EQ(g[0].n_labels, 2);
    LC_ASSERT_STR_EQ(g[0].labels[0].name, "a");
    LC_ASSERT_STR_EQ(g[0].labels[0].value, "x");
    LC_ASSERT_STR_EQ(g[0].labels[1].name, "b");
    LC_ASSERT_STR_EQ(g[0].labels[1].value, "1");
    LC_ASSERT_EQ(g[0].n_samples, 3); /* samples 0, 1 and 4 */
    LC_ASSERT_EQ(g[0].samples[2], 4);
    LC_ASSERT_EQ(g[1].n_labels, 0);
    LC_ASSERT_EQ(g[1].n_samples, 2); /* samples 2 and 3 */
    LC_ASSERT_EQ(g[1].samples[0], 2);
    LC_ASSERT_EQ(g[1].samples[1], 3);
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_go_cpu_labels, test_span_ids, test_span_id_parse, test_no_samples,
             test_hand_labels)
