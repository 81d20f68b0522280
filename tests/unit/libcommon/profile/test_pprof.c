/*
 * test_pprof.c — pprof decode/validate/encode and the builder.
 *
 * The oracle for real files is testdata/MANIFEST.jsonl (counts and totals from
 * Go's own pprof library). Rejection rules are checked one by one on mutated
 * copies of a small valid profile. Builder output is checked by decoding it
 * again and, when Go is installed, by `go tool pprof -raw`.
 */
#include <jansson.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "lc/gz.h"
#include "lc/pprof.h"
#include "lc_test.h"

#define ARENA_CAP (512u << 20)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint8_t *read_testdata(const char *rel, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    uint8_t *d = lc_test_read_file(path, len);
    if (!d)
        fprintf(stderr, "cannot read %s\n", path);
    return d;
}

static int64_t sample_total(const lc_pprof_t *p, size_t type)
{
    int64_t sum = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        sum += p->sample[i]->value[type];
    return sum;
}

/* ---------------------------------------------------------------- MANIFEST oracle */

static void check_against_manifest(const lc_pprof_t *p, json_t *entry, const char *file)
{
    LC_ASSERT_EQ(p->n_sample, json_integer_value(json_object_get(entry, "samples")));
    LC_ASSERT_EQ(p->n_location, json_integer_value(json_object_get(entry, "locations")));
    LC_ASSERT_EQ(p->n_function, json_integer_value(json_object_get(entry, "functions")));
    LC_ASSERT_EQ(p->time_nanos, json_integer_value(json_object_get(entry, "time_nanos")));
    LC_ASSERT_EQ(p->duration_nanos, json_integer_value(json_object_get(entry, "duration_nanos")));
    LC_ASSERT_EQ(p->period, json_integer_value(json_object_get(entry, "period")));
    json_t *types = json_object_get(entry, "sample_types");
    LC_ASSERT_EQ(p->n_sample_type, json_array_size(types));
    for (size_t t = 0; t < p->n_sample_type && t < json_array_size(types); t++) {
        json_t *want = json_array_get(types, t);
        LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample_type[t]->type),
                         json_string_value(json_object_get(want, "type")));
        LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample_type[t]->unit),
                         json_string_value(json_object_get(want, "unit")));
        int64_t total = json_integer_value(json_object_get(want, "total"));
        if (sample_total(p, t) != total)
            fprintf(stderr, "%s: total of type %zu differs\n", file, t);
        LC_ASSERT_EQ(sample_total(p, t), total);
    }
}

static void check_manifest_entry(json_t *entry, lc_pprof_limits_t *lim)
{
    const char *file = json_string_value(json_object_get(entry, "file"));
    size_t len;
    uint8_t *data = read_testdata(file, &len);
    LC_CHECK(data != NULL);
    if (!data)
        return;
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    int rc = lc_pprof_decode(data, len, lim, a, &p, &st);
    if (rc == 0)
        rc = lc_pprof_validate(p, lim, &st);
    if (strstr(file, "invalid_utf8")) {
        LC_CHECK(rc != 0);
        LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
        LC_CHECK(strstr(st.msg, "UTF-8") != NULL);
    } else {
        if (rc)
            fprintf(stderr, "%s: %s\n", file, st.msg);
        LC_ASSERT_OK(rc);
        if (rc == 0)
            check_against_manifest(p, entry, file);
    }
    lc_arena_free(a);
    free(data);
}

static void test_every_manifest_file(void)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/MANIFEST.jsonl", LC_TESTDATA_DIR);
    FILE *f = fopen(path, "r");
    LC_CHECK(f != NULL);
    if (!f)
        return;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    char line[8192];
    int files = 0;
    bool saw_invalid = false;
    while (fgets(line, sizeof(line), f)) {
        json_error_t jerr;
        json_t *entry = json_loads(line, 0, &jerr);
        LC_CHECK(entry != NULL);
        if (!entry)
            continue;
        const char *file = json_string_value(json_object_get(entry, "file"));
        saw_invalid |= file && strstr(file, "invalid_utf8") != NULL;
        check_manifest_entry(entry, &lim);
        json_decref(entry);
        files++;
    }
    fclose(f);
    LC_CHECK(files >= 26);
    LC_CHECK(saw_invalid);
}

/* ---------------------------------------------------------------- a small valid profile */

/* Two sample types, one mapping, three functions, three locations (one with
 * an inlined frame), three samples (one labelled). */
static void build_base(lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "samples", "count");
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10000000);
    lc_pprof_builder_times(b, 1700000000000000000LL, 10000000000LL);
    uint64_t m = lc_pprof_builder_mapping(b, 0x1000, 0x9000, 0, "/bin/app", "abc123", true);
    uint64_t f_main = lc_pprof_builder_function(b, "main", "main", "main.go", 1);
    uint64_t f_foo = lc_pprof_builder_function(b, "foo", "foo", "foo.go", 10);
    uint64_t f_bar = lc_pprof_builder_function(b, "bar", "bar", "bar.go", 20);
    lc_pprof_line_t l_main = {f_main, 5}, l_foo = {f_foo, 12};
    lc_pprof_line_t l_inl[2] = {{f_bar, 22}, {f_foo, 14}};
    uint64_t loc_main = lc_pprof_builder_location(b, m, 0x1100, &l_main, 1);
    uint64_t loc_foo = lc_pprof_builder_location(b, m, 0x1200, &l_foo, 1);
    uint64_t loc_inl = lc_pprof_builder_location(b, m, 0x1300, l_inl, 2);
    uint64_t s1[] = {loc_inl, loc_main}, s2[] = {loc_foo, loc_main}, s3[] = {loc_main};
    int64_t v1[] = {3, 30000000}, v2[] = {1, 10000000}, v3[] = {2, 20000000};
    const char *labels[] = {"thread", "worker"};
    lc_pprof_builder_sample(b, s1, 2, v1, labels, 1);
    lc_pprof_builder_sample(b, s2, 2, v2, NULL, 0);
    lc_pprof_builder_sample(b, s3, 1, v3, NULL, 0);
    lc_buf_init(out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, out));
    lc_pprof_builder_free(b);
}

static lc_pprof_t *decode_ok(const lc_buf_t *bytes, lc_arena_t *a)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(bytes->data, bytes->len, &lim, a, &p, &st));
    return p;
}

static void test_base_profile_is_valid(void)
{
    lc_buf_t bytes;
    build_base(&bytes);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&bytes, a);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_EQ(p->n_sample, 3);
    LC_ASSERT_EQ(p->n_location, 3);
    LC_ASSERT_EQ(p->n_function, 3);
    LC_ASSERT_EQ(p->n_mapping, 1);
    LC_ASSERT_EQ(sample_total(p, 1), 60000000);
    LC_ASSERT_STR_EQ(lc_pprof_str(p, 0), "");
    LC_ASSERT_STR_EQ(lc_pprof_str(p, (int64_t)p->n_string_table), "");
    lc_arena_free(a);
    lc_buf_fini(&bytes);
}

/* ---------------------------------------------------------------- rejection rules */

typedef void (*mutate_fn)(lc_pprof_t *p, lc_arena_t *a);

static int64_t *arena_i64(lc_arena_t *a, int64_t v)
{
    int64_t *x = lc_arena_alloc(a, sizeof(*x));
    *x = v;
    return x;
}

static int64_t past_end(const lc_pprof_t *p)
{
    return (int64_t)p->n_string_table;
}

static void m_no_sample_types(lc_pprof_t *p, lc_arena_t *a)
{
    p->n_sample_type = 0;
}
static void m_string0(lc_pprof_t *p, lc_arena_t *a)
{
    p->string_table[0] = "x";
}
static void m_no_strings(lc_pprof_t *p, lc_arena_t *a)
{
    p->n_string_table = 0;
}
static void m_st_type(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample_type[1]->type = past_end(p);
}
static void m_st_unit(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample_type[0]->unit = -1;
}
static void m_period(lc_pprof_t *p, lc_arena_t *a)
{
    p->period_type->unit = past_end(p);
}
static void m_label_key(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[0]->label[0]->key = -5;
}
static void m_label_str(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[0]->label[0]->str = past_end(p);
}
static void m_label_unit(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[0]->label[0]->num_unit = 1 << 30;
}

static void m_map_file(lc_pprof_t *p, lc_arena_t *a)
{
    p->mapping[0]->filename = past_end(p);
}
static void m_map_build(lc_pprof_t *p, lc_arena_t *a)
{
    p->mapping[0]->build_id = -1;
}
static void m_fn_name(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[2]->name = past_end(p);
}
static void m_fn_sys(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[0]->system_name = -1;
}
static void m_fn_file(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[1]->filename = past_end(p);
}
static void m_drop(lc_pprof_t *p, lc_arena_t *a)
{
    p->drop_frames = past_end(p);
}
static void m_keep(lc_pprof_t *p, lc_arena_t *a)
{
    p->keep_frames = -1;
}
static void m_default_type(lc_pprof_t *p, lc_arena_t *a)
{
    p->default_sample_type = past_end(p);
}

static void m_comment(lc_pprof_t *p, lc_arena_t *a)
{
    p->n_comment = 1;
    p->comment = arena_i64(a, past_end(p));
}

static void m_values(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[1]->n_value = 1;
}
static void m_loc_id0(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[1]->id = 0;
}
static void m_fn_id0(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[0]->id = 0;
}
static void m_dup_loc(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[2]->id = 1;
}
static void m_dup_fn(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[0]->id = 3;
}

static void m_dup_mapping(lc_pprof_t *p, lc_arena_t *a)
{
    p->n_mapping = 2;
    Google__V1__Mapping **maps = lc_arena_calloc(a, 2, sizeof(*maps));
    maps[0] = maps[1] = p->mapping[0];
    p->mapping = maps;
}

static void m_unknown_loc(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[2]->location_id[0] = 4;
}
static void m_zero_loc_ref(lc_pprof_t *p, lc_arena_t *a)
{
    p->sample[2]->location_id[0] = 0;
}
static void m_unknown_fn(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[2]->line[1]->function_id = 9;
}
static void m_zero_fn_ref(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[0]->line[0]->function_id = 0;
}

static void m_unknown_map(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[1]->mapping_id = 2;
}

/* Sparse ids take the sorted-lookup path: a duplicate and a dangling
 * reference must still be seen there. */
static void m_sparse_dup(lc_pprof_t *p, lc_arena_t *a)
{
    p->location[0]->id = 70;
    p->location[1]->id = 50;
    p->location[2]->id = 70;
}

static void m_sparse_unknown(lc_pprof_t *p, lc_arena_t *a)
{
    p->function[0]->id = 100; /* location 1 still refers to function 1 */
    p->function[1]->id = 200;
    p->function[2]->id = 300;
}

static void set_string(lc_pprof_t *p, lc_arena_t *a, int64_t idx, const char *s)
{
    p->string_table[idx] = lc_arena_strdup(a, s);
}

static int64_t find_string(const lc_pprof_t *p, const char *s)
{
    for (size_t i = 0; i < p->n_string_table; i++)
        if (strcmp(p->string_table[i], s) == 0)
            return (int64_t)i;
    return -1;
}

static void m_dash_type(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, p->sample_type[0]->type, "alloc-space");
}

static void m_dash_unit(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, p->sample_type[1]->unit, "nano-seconds");
}

static void m_utf8_overlong(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 3, "a\xc0\x80");
}
static void m_utf8_surrogate(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 4, "\xed\xa0\x80");
}
static void m_utf8_too_big(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 5, "\xf4\x90\x80\x80");
}

static void m_utf8_cut(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 6, "ok\xe2\x82");
}
static void m_utf8_lone(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 7, "\x80");
}
static void m_utf8_f8(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, 8, "\xf8\x88\x80\x80\x80");
}

static void m_utf8_function(lc_pprof_t *p, lc_arena_t *a)
{
    set_string(p, a, find_string(p, "foo"), "f\xff");
}

static void m_many_labels(lc_pprof_t *p, lc_arena_t *a)
{
    Google__V1__Sample *s = p->sample[0];
    Google__V1__Label **labels = lc_arena_calloc(a, 4, sizeof(*labels));
    for (int i = 0; i < 4; i++)
        labels[i] = s->label[0];
    s->label = labels;
    s->n_label = 4; /* limit in the table below: 3 */
}

static int64_t append_string(lc_pprof_t *p, lc_arena_t *a, const char *str)
{
    char **t = lc_arena_calloc(a, p->n_string_table + 1, sizeof(*t));
    memcpy(t, p->string_table, p->n_string_table * sizeof(*t));
    t[p->n_string_table] = lc_arena_strdup(a, str);
    p->string_table = t;
    return (int64_t)p->n_string_table++;
}

/* Gives sample 1 (unlabelled) the one label key=str. */
static void label_sample_1(lc_pprof_t *p, lc_arena_t *a, int64_t key, int64_t str)
{
    Google__V1__Label *l = lc_arena_calloc(a, 1, sizeof(*l));
    google__v1__label__init(l);
    l->key = key;
    l->str = str;
    Google__V1__Label **labels = lc_arena_calloc(a, 1, sizeof(*labels));
    labels[0] = l;
    p->sample[1]->label = labels;
    p->sample[1]->n_label = 1;
}

/* Label text is checked once per string and role: a string that passed as
 * sample 0's value is still checked as sample 1's name, and a new value
 * beside a name that passed is checked too. */
static void m_label_name_after_value(lc_pprof_t *p, lc_arena_t *a)
{
    int64_t tab = find_string(p, "worker");
    set_string(p, a, tab, "a\tb"); /* a value may hold a tab, a name may not */
    label_sample_1(p, a, tab, tab);
}
static void m_label_value_after_name(lc_pprof_t *p, lc_arena_t *a)
{
    label_sample_1(p, a, find_string(p, "thread"), append_string(p, a, "x\xef\xbf\xbd"));
}

static void m_nothing(lc_pprof_t *p, lc_arena_t *a) {}

typedef struct reject_case_s {
    const char *what;
    mutate_fn mutate;
    const char *msg_part;
    size_t max_samples; /* 0: default limits */
    size_t max_labels;
} reject_case_t;

static const reject_case_t reject_cases[] = {
    {"no sample types", m_no_sample_types, "no sample types", 0, 0},
    {"string_table[0] not empty", m_string0, "string_table[0]", 0, 0},
    {"empty string table", m_no_strings, "string_table[0]", 0, 0},
    {"sample type index", m_st_type, "sample type 1: string index", 0, 0},
    {"sample unit index", m_st_unit, "string index -1 out of range", 0, 0},
    {"period type index", m_period, "period type", 0, 0},
    {"label key index", m_label_key, "label of sample 0", 0, 0},
    {"label str index", m_label_str, "label of sample 0", 0, 0},
    {"label num_unit index", m_label_unit, "label of sample 0", 0, 0},
    {"mapping filename index", m_map_file, "mapping 1: string index", 0, 0},
    {"mapping build_id index", m_map_build, "mapping 1: string index", 0, 0},
    {"function name index", m_fn_name, "function 3: string index", 0, 0},
    {"function system_name index", m_fn_sys, "function 1: string index", 0, 0},
    {"function filename index", m_fn_file, "function 2: string index", 0, 0},
    {"drop_frames index", m_drop, "profile field", 0, 0},
    {"keep_frames index", m_keep, "profile field", 0, 0},
    {"default_sample_type index", m_default_type, "profile field", 0, 0},
    {"comment index", m_comment, "comment", 0, 0},
    {"value count", m_values, "sample 1 has 1 values, expected 2", 0, 0},
    {"location id 0", m_loc_id0, "location 1 has id 0", 0, 0},
    {"function id 0", m_fn_id0, "function 0 has id 0", 0, 0},
    {"duplicate location id", m_dup_loc, "duplicate location id 1", 0, 0},
    {"duplicate function id", m_dup_fn, "duplicate function id 3", 0, 0},
    {"duplicate mapping id", m_dup_mapping, "duplicate mapping id 1", 0, 0},
    {"duplicate sparse location id", m_sparse_dup, "duplicate location id 70", 0, 0},
    {"unknown location", m_unknown_loc, "sample 2 references unknown location 4", 0, 0},
    {"location 0 in a sample", m_zero_loc_ref, "unknown location 0", 0, 0},
    {"unknown function", m_unknown_fn, "location 3 references unknown function 9", 0, 0},
    {"function 0 in a line", m_zero_fn_ref, "unknown function 0", 0, 0},
    {"unknown sparse function", m_sparse_unknown, "references unknown function 1", 0, 0},
    {"unknown mapping", m_unknown_map, "location 2 references unknown mapping 2", 0, 0},
    {"dash in sample type", m_dash_type, "contains '-'", 0, 0},
    {"dash in sample unit", m_dash_unit, "contains '-'", 0, 0},
    {"overlong UTF-8", m_utf8_overlong, "string_table[3] is not valid UTF-8", 0, 0},
    {"surrogate UTF-8", m_utf8_surrogate, "string_table[4] is not valid UTF-8", 0, 0},
    {"code point past U+10FFFF", m_utf8_too_big, "string_table[5] is not valid UTF-8", 0, 0},
    {"truncated UTF-8", m_utf8_cut, "string_table[6] is not valid UTF-8", 0, 0},
    {"lone continuation byte", m_utf8_lone, "string_table[7] is not valid UTF-8", 0, 0},
    {"5-byte form", m_utf8_f8, "string_table[8] is not valid UTF-8", 0, 0},
    {"bad UTF-8 in a function name", m_utf8_function, "not valid UTF-8", 0, 0},
    {"too many samples", m_nothing, "3 samples (limit 2)", 2, 0},
    {"too many labels", m_many_labels, "sample 0 has 4 labels (limit 3)", 0, 3},
    {"label name that passed as a value", m_label_name_after_value, "sample 1: label name", 0, 0},
    {"label value beside a name that passed", m_label_value_after_name, "sample 1: value of label",
     0, 0},
};

static void check_reject(const lc_buf_t *base, const reject_case_t *c)
{
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(base, a);
    if (!p) {
        lc_arena_free(a);
        return;
    }
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    if (c->max_samples)
        lim.max_samples = c->max_samples;
    if (c->max_labels)
        lim.max_labels_per_sample = c->max_labels;
    c->mutate(p, a);
    lc_buf_t mutated;
    lc_buf_init(&mutated, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_encode(p, false, &mutated));
    lc_status_t st = {0};
    int rc = lc_pprof_validate(p, &lim, &st);
    bool ok = rc != 0 && st.code == LC_CODE_INVALID_ARGUMENT && strstr(st.msg, c->msg_part);
    if (!ok)
        fprintf(stderr, "%s: rc=%d msg=\"%s\" (want \"%s\")\n", c->what, rc, st.msg, c->msg_part);
    LC_CHECK(ok);
    /* The receivers' way: the mutated bytes decoded, then validated with what
     * decoding saw of them, must be refused for the same reason. */
    lc_pprof_seen_t seen;
    const uint8_t *pb;
    size_t pb_len;
    bool changed;
    lc_status_t st2 = {0};
    rc =
        lc_pprof_decode_apart(mutated.data, mutated.len, &lim, a, a, &p, &pb, &pb_len, &seen, &st2);
    if (rc == 0)
        rc = lc_pprof_validate_seen(p, &lim, &seen, &changed, &st2);
    ok = rc != 0 && st2.code == LC_CODE_INVALID_ARGUMENT && strstr(st2.msg, c->msg_part);
    if (!ok)
        fprintf(stderr, "%s, decoded and validated with what decoding saw: rc=%d msg=\"%s\"\n",
                c->what, rc, st2.msg);
    LC_CHECK(ok);
    lc_buf_fini(&mutated);
    lc_arena_free(a);
}

static void test_rejection_rules(void)
{
    lc_buf_t base;
    build_base(&base);
    for (size_t i = 0; i < LC_ARRAY_LEN(reject_cases); i++)
        check_reject(&base, &reject_cases[i]);
    lc_buf_fini(&base);
}

/* Sparse but consistent ids are fine: every reference is rewritten. */
static void test_sparse_ids_are_valid(void)
{
    lc_buf_t base;
    build_base(&base);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&base, a);
    for (size_t i = 0; i < p->n_function; i++)
        p->function[i]->id *= 1000;
    for (size_t i = 0; i < p->n_location; i++) {
        p->location[i]->id = 1ULL << 40 | (p->n_location - i);
        for (size_t k = 0; k < p->location[i]->n_line; k++)
            p->location[i]->line[k]->function_id *= 1000;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        uint64_t *ids = p->sample[i]->location_id;
        for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
            ids[k] = 1ULL << 40 | (p->n_location - (ids[k] - 1));
    }
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    int rc = lc_pprof_validate(p, &lim, &st);
    if (rc)
        fprintf(stderr, "sparse: %s\n", st.msg);
    LC_ASSERT_OK(rc);
    lc_arena_free(a);
    lc_buf_fini(&base);
}

/* ---------------------------------------------------------------- normalisation */

static void test_deep_stacks_keep_the_root(void)
{
    lc_buf_t base;
    build_base(&base);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&base, a);
    /* sample 0: leaf first: 3 2 1 3 2 1 (six frames, root = 1) */
    uint64_t *ids = lc_arena_calloc(a, 6, sizeof(uint64_t));
    static const uint64_t stack[6] = {3, 2, 1, 3, 2, 1};
    memcpy(ids, stack, sizeof(stack));
    p->sample[0]->location_id = ids;
    p->sample[0]->n_location_id = 6;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_stack_depth = 4;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_EQ(p->sample[0]->n_location_id, 4);
    static const uint64_t want[4] = {1, 3, 2, 1};
    LC_ASSERT_MEM_EQ(p->sample[0]->location_id, want, sizeof(want));
    LC_ASSERT_EQ(p->sample[1]->n_location_id, 2); /* shallow stacks untouched */
    lc_arena_free(a);
    lc_buf_fini(&base);
}

static void test_long_strings_cut_at_utf8_boundary(void)
{
    lc_buf_t base;
    build_base(&base);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&base, a);
    int64_t foo = find_string(p, "foo.go"), bar = find_string(p, "bar.go");
    int64_t main_go = find_string(p, "main.go");
    set_string(p, a, foo,
               "abc\xe2\x82\xac"
               "d"); /* a 3-byte char at bytes 3..5 */
    set_string(p, a, bar, "abcdef");
    set_string(p, a, main_go, "ab\xf0\x9f\x98\x80"); /* a 4-byte char at bytes 2..5 */
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_symbol_bytes = 5;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_STR_EQ(p->string_table[foo], "abc");
    LC_ASSERT_STR_EQ(p->string_table[bar], "abcde");
    LC_ASSERT_STR_EQ(p->string_table[main_go], "ab");
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample_type[0]->type), "sampl"); /* every string */
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample_type[0]->unit), "count"); /* exactly 5 */
    lc_arena_free(a);
    lc_buf_fini(&base);
}

static void test_zero_limits_mean_unlimited(void)
{
    lc_buf_t base;
    build_base(&base);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&base, a);
    lc_pprof_limits_t lim = {.max_decompressed_bytes = 1 << 20};
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_EQ(p->sample[0]->n_location_id, 2);
    lc_arena_free(a);
    lc_buf_fini(&base);
}

/* ---------------------------------------------------------------- decode errors */

static int decode_status(const uint8_t *d, size_t n, size_t max_bytes, lc_status_t *st)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = max_bytes;
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p;
    int rc = lc_pprof_decode(d, n, &lim, a, &p, st);
    lc_arena_free(a);
    return rc;
}

static void test_decode_errors(void)
{
    lc_status_t st = {0};
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01};
    LC_CHECK(decode_status(garbage, sizeof(garbage), 1 << 20, &st) != 0);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    LC_CHECK(strstr(st.msg, "failed to parse pprof") != NULL);

    /* A gzip bomb: 4 MiB of zeros against a 1 MiB limit. */
    uint8_t *zeros = calloc(4 << 20, 1);
    lc_buf_t gz;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(zeros, 4 << 20, 9, &gz));
    LC_CHECK(gz.len < 64 << 10);
    memset(&st, 0, sizeof(st));
    LC_CHECK(decode_status(gz.data, gz.len, 1 << 20, &st) != 0);
    LC_CHECK(strstr(st.msg, "profile too large") != NULL);
    LC_CHECK(strstr(st.msg, "(limit 1048576 bytes)") != NULL);

    /* The same limit applies to an uncompressed body. */
    memset(&st, 0, sizeof(st));
    LC_CHECK(decode_status(zeros, 2 << 20, 1 << 20, &st) != 0);
    LC_CHECK(strstr(st.msg, "(limit 1048576 bytes)") != NULL);

    /* A truncated gzip stream. */
    memset(&st, 0, sizeof(st));
    LC_CHECK(decode_status(gz.data, gz.len / 2, 8 << 20, &st) != 0);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    free(zeros);
    lc_buf_fini(&gz);

    /* A decode budget (arena cap) too small for the profile fails cleanly. */
    size_t len;
    uint8_t *d = read_testdata("pprof/pyroscope-heap", &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *small = lc_arena_new(64 << 10);
    lc_pprof_t *p;
    memset(&st, 0, sizeof(st));
    LC_CHECK(lc_pprof_decode(d, len, &lim, small, &p, &st) != 0);
    LC_CHECK(strstr(st.msg, "failed to parse pprof") != NULL);
    lc_arena_free(small);
    free(d);
}

/* Field number 0 (here behind a non-minimal tag varint, which protobuf-c lets
 * through) must be refused: protobuf-c could not read its own re-encoding. */
static void test_field_zero_rejected(void)
{
    static const uint8_t pb[] = {
        0x85, 0x00, 0x00, 0x00, 0x10, 0x02,            /* field 0, fixed32 */
        0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,            /* sample_type {1, 2} */
        0x32, 0x00, 0x32, 0x01, 'a',  0x32, 0x01, 'b', /* "", "a", "b" */
    };
    lc_status_t st = {0};
    LC_CHECK(decode_status(pb, sizeof(pb), 1 << 20, &st) != 0);
    LC_CHECK(strstr(st.msg, "field number 0") != NULL);
    LC_ASSERT_OK(decode_status(pb + 6, sizeof(pb) - 6, 1 << 20, &st));
    uint8_t nested[sizeof(pb) - 6 + 6]; /* the same inside a ValueType */
    memcpy(nested, pb + 6, sizeof(pb) - 6);
    nested[1] = 0x0a;
    memmove(nested + 6 + 6, nested + 6, sizeof(pb) - 6 - 6);
    memcpy(nested + 6, "\x85\x00\x00\x00\x10\x02", 6);
    memset(&st, 0, sizeof(st));
    LC_CHECK(decode_status(nested, sizeof(nested), 1 << 20, &st) != 0);
    LC_CHECK(strstr(st.msg, "field number 0") != NULL);
}

/* An empty body decodes (as an empty message) and then fails validation. */
static void test_empty_input(void)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(NULL, 0, &lim, a, &p, &st));
    LC_CHECK(lc_pprof_validate(p, &lim, &st) != 0);
    LC_CHECK(strstr(st.msg, "no sample types") != NULL);
    lc_arena_free(a);
}

/* protobuf-c's C strings end at a NUL; decode keeps what follows it visible. */
static void test_embedded_nul_survives(void)
{
    static const uint8_t pb[] = {
        0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, /* sample_type {type 1, unit 2} */
        0x32, 0x00,                         /* string_table: "" */
        0x32, 0x03, 'c',  'p',  'u',        /* "cpu" */
        0x32, 0x02, 'n',  's',              /* "ns" */
        0x32, 0x04, 'a',  0x00, 'b',  0x00, /* "a\0b\0" */
        0x32, 0x03, 0x00, 0xc3, 0x28,       /* "\0" then invalid UTF-8 */
    };
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(pb, sizeof(pb) - 5, &lim, a, &p, &st));
    LC_ASSERT_EQ(p->n_string_table, 4);
    LC_ASSERT_STR_EQ(p->string_table[3], "a\xef\xbf\xbd"
                                         "b\xef\xbf\xbd");
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_OK(lc_pprof_decode(pb, sizeof(pb), &lim, a, &p, &st));
    LC_CHECK(lc_pprof_validate(p, &lim, &st) != 0);
    LC_CHECK(strstr(st.msg, "string_table[4] is not valid UTF-8") != NULL);
    lc_arena_free(a);
}

/* ---------------------------------------------------------------- encode */

static void test_encode_round_trip(void)
{
    size_t len;
    uint8_t *d = read_testdata("pprof/pyroscope-go.cpu.labels.pprof", &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL, *q = NULL, *r = NULL;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_decode(d, len, &lim, a, &p, &st));
    lc_buf_t plain, gz, again;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&again, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_encode(p, false, &plain));
    LC_ASSERT_OK(lc_pprof_encode(p, true, &gz));
    LC_CHECK(lc_gz_is_gzip(gz.data, gz.len));
    LC_CHECK(!lc_gz_is_gzip(plain.data, plain.len));
    LC_ASSERT_OK(lc_pprof_decode(plain.data, plain.len, &lim, a, &q, &st));
    LC_ASSERT_OK(lc_pprof_decode(gz.data, gz.len, &lim, a, &r, &st));
    LC_ASSERT_OK(lc_pprof_validate(r, &lim, &st));
    LC_ASSERT_EQ(r->n_sample, 480); /* MANIFEST */
    LC_ASSERT_EQ(sample_total(r, 1), 8730000000LL);
    LC_ASSERT_EQ(q->n_string_table, p->n_string_table);
    LC_ASSERT_OK(lc_pprof_encode(q, false, &again));
    LC_ASSERT_EQ(again.len, plain.len);
    LC_ASSERT_MEM_EQ(again.data, plain.data, plain.len);

    /* Appends, and a capped buffer fails with LC_ETOOBIG instead of growing. */
    size_t before = again.len;
    LC_ASSERT_OK(lc_pprof_encode(q, false, &again));
    LC_ASSERT_EQ(again.len, 2 * before);
    lc_buf_t tiny;
    lc_buf_init(&tiny, 100);
    LC_ASSERT_EQ(lc_pprof_encode(q, false, &tiny), LC_ETOOBIG);
    lc_buf_fini(&tiny);
    lc_buf_fini(&plain);
    lc_buf_fini(&gz);
    lc_buf_fini(&again);
    lc_arena_free(a);
    free(d);
}

/* ---------------------------------------------------------------- builder */

static void test_builder_dedup(void)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    LC_ASSERT_EQ(lc_pprof_builder_string(b, "", 0), 0);
    LC_ASSERT_EQ(lc_pprof_builder_string(b, NULL, 0), 0);
    int64_t s1 = lc_pprof_builder_string(b, "hello world", 5);
    LC_ASSERT_EQ(s1, 1);
    LC_ASSERT_EQ(lc_pprof_builder_string(b, "hello", 5), s1);
    LC_CHECK(lc_pprof_builder_string(b, "hello!", 6) != s1);

    uint64_t f1 = lc_pprof_builder_function(b, "main", "main", "m.go", 1);
    LC_ASSERT_EQ(f1, 1);
    LC_ASSERT_EQ(lc_pprof_builder_function(b, "main", "main", "m.go", 1), f1);
    LC_ASSERT_EQ(lc_pprof_builder_function(b, "main", "main", "m.go", 2), 2);
    LC_ASSERT_EQ(lc_pprof_builder_function(b, "main", NULL, "m.go", 1), 3);
    LC_ASSERT_EQ(lc_pprof_builder_function(b, "main", "", "m.go", 1), 3);

    uint64_t m1 = lc_pprof_builder_mapping(b, 1, 2, 3, "a.so", "id", true);
    LC_ASSERT_EQ(m1, 1);
    LC_ASSERT_EQ(lc_pprof_builder_mapping(b, 1, 2, 3, "a.so", "id", true), m1);
    LC_ASSERT_EQ(lc_pprof_builder_mapping(b, 1, 2, 3, "a.so", "id", false), 2);
    LC_ASSERT_EQ(lc_pprof_builder_mapping(b, 1, 2, 4, "a.so", "id", true), 3);

    lc_pprof_line_t ab[2] = {{1, 10}, {2, 20}}, ba[2] = {{2, 20}, {1, 10}};
    uint64_t l1 = lc_pprof_builder_location(b, m1, 0x10, ab, 2);
    LC_ASSERT_EQ(l1, 1);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x10, ab, 2), l1);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x10, ba, 2), 2);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x10, ab, 1), 3);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, 0, 0x10, ab, 2), 4);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x11, ab, 2), 5);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x11, NULL, 0), 6);
    LC_ASSERT_EQ(lc_pprof_builder_location(b, m1, 0x11, NULL, 0), 6);

    LC_ASSERT_EQ(lc_pprof_builder_sample_type(b, "cpu", "nanoseconds"), 0);
    LC_ASSERT_EQ(lc_pprof_builder_sample_type(b, "samples", "count"), 1);
    uint64_t st1[] = {1, 2}, st2[] = {2, 1};
    int64_t v[] = {1, 10};
    const char *kv1[] = {"a", "1", "b", "2"}, *kv2[] = {"b", "2", "a", "1"}, *kv3[] = {"a", "2"};
    lc_pprof_builder_sample(b, st1, 2, v, kv1, 2);
    lc_pprof_builder_sample(b, st1, 2, v, kv2, 2);  /* same labels, other order: summed */
    lc_pprof_builder_sample(b, st1, 2, v, kv3, 1);  /* other labels */
    lc_pprof_builder_sample(b, st2, 2, v, NULL, 0); /* other stack */
    lc_pprof_builder_sample(b, st2, 2, v, NULL, 0);
    lc_pprof_builder_sample(b, st2, 1, v, NULL, 0); /* prefix of a stack */

    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, true, &out));
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&out, a);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_EQ(p->n_sample, 4);
    LC_ASSERT_EQ(p->n_location, 6);
    LC_ASSERT_EQ(p->n_function, 3);
    LC_ASSERT_EQ(p->n_mapping, 3);
    LC_ASSERT_EQ(p->sample[0]->value[0], 2);
    LC_ASSERT_EQ(p->sample[0]->value[1], 20);
    LC_ASSERT_EQ(p->sample[0]->n_label, 2);
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample[0]->label[0]->key), "a");
    LC_ASSERT_EQ(p->sample[1]->value[0], 1);
    LC_ASSERT_EQ(p->sample[2]->value[1], 20);
    LC_ASSERT_EQ(p->sample[3]->n_location_id, 1);
    LC_ASSERT_EQ(sample_total(p, 0), 6);
    LC_ASSERT_STR_EQ(lc_pprof_str(p, 1), "hello");
    lc_arena_free(a);
    lc_buf_fini(&out);
    lc_pprof_builder_free(b);
}

static void test_builder_misuse(void)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_EQ(lc_pprof_builder_encode(b, false, &out), LC_EINPUT); /* no sample types */
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    uint64_t loc = lc_pprof_builder_location(b, 0, 1, NULL, 0);
    int64_t v = 1;
    lc_pprof_builder_sample(b, &loc, 1, &v, NULL, 0);
    lc_pprof_builder_sample_type(b, "late", "count"); /* would misalign values */
    LC_ASSERT_EQ(lc_pprof_builder_encode(b, false, &out), LC_EINPUT);
    lc_pprof_builder_free(b);
    lc_buf_fini(&out);
    lc_pprof_builder_free(NULL);
}

/* Rebuilds a decoded profile through the builder the way a merge does: each
 * input location is translated once (functions resolved through the index),
 * then every sample's stack is mapped through that translation. */
typedef struct loc_xlat_s {
    uint64_t in_id, out_id;
} loc_xlat_t;

static int xlat_cmp(const void *a, const void *b)
{
    uint64_t x = ((const loc_xlat_t *)a)->in_id, y = ((const loc_xlat_t *)b)->in_id;
    return x < y ? -1 : x > y;
}

static uint64_t rebuild_location(const lc_pprof_t *p, const lc_pprof_index_t *ix,
                                 const Google__V1__Location *loc, lc_pprof_builder_t *b)
{
    lc_pprof_line_t lines[64];
    size_t n = loc->n_line < 64 ? loc->n_line : 64;
    for (size_t j = 0; j < n; j++) {
        const Google__V1__Function *f = lc_pprof_function(ix, loc->line[j]->function_id);
        lines[j].function_id =
            lc_pprof_builder_function(b, lc_pprof_str(p, f->name), lc_pprof_str(p, f->system_name),
                                      lc_pprof_str(p, f->filename), f->start_line);
        lines[j].line = loc->line[j]->line;
    }
    return lc_pprof_builder_location(b, 0, loc->address, lines, n);
}

static void rebuild_profile(const lc_pprof_t *p, const lc_pprof_index_t *ix, lc_pprof_builder_t *b)
{
    for (size_t t = 0; t < p->n_sample_type; t++)
        lc_pprof_builder_sample_type(b, lc_pprof_str(p, p->sample_type[t]->type),
                                     lc_pprof_str(p, p->sample_type[t]->unit));
    if (p->period_type)
        lc_pprof_builder_period(b, lc_pprof_str(p, p->period_type->type),
                                lc_pprof_str(p, p->period_type->unit), p->period);
    lc_pprof_builder_times(b, p->time_nanos, p->duration_nanos);
    loc_xlat_t *xlat = lc_xcalloc(p->n_location + 1, sizeof(*xlat));
    for (size_t i = 0; i < p->n_location; i++)
        xlat[i] = (loc_xlat_t){p->location[i]->id, rebuild_location(p, ix, p->location[i], b)};
    qsort(xlat, p->n_location, sizeof(*xlat), xlat_cmp);
    uint64_t *stack = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Google__V1__Sample *s = p->sample[i];
        stack = lc_xgrow(stack, &cap, s->n_location_id, sizeof(*stack));
        for (size_t k = 0; k < s->n_location_id; k++) {
            loc_xlat_t key = {s->location_id[k], 0};
            stack[k] =
                ((loc_xlat_t *)bsearch(&key, xlat, p->n_location, sizeof(key), xlat_cmp))->out_id;
        }
        lc_pprof_builder_sample(b, stack, s->n_location_id, s->value, NULL, 0);
    }
    lc_free(stack);
    lc_free(xlat);
}

static bool have_go(void)
{
    return system("command -v go >/dev/null 2>&1") == 0;
}

/* Runs `go tool pprof -raw` and sums the sample values it prints per type. */
static int go_pprof_totals(const char *path, int64_t *totals, size_t n_types)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "go tool pprof -raw '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[4096];
    bool in_samples = false;
    memset(totals, 0, n_types * sizeof(*totals));
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Samples:", 8) == 0) {
            in_samples = true;
            continue;
        }
        if (strncmp(line, "Locations", 9) == 0)
            in_samples = false;
        char *p = line, *end;
        int64_t v[8];
        size_t k = 0;
        while (in_samples && k < n_types && k < 8) {
            v[k] = strtoll(p, &end, 10);
            if (end == p)
                break;
            p = end;
            k++;
        }
        if (k == n_types && *p == ':')
            for (size_t t = 0; t < n_types; t++)
                totals[t] += v[t];
    }
    return pclose(f);
}

static void check_with_go_pprof(const lc_buf_t *bytes, const int64_t *want, size_t n_types)
{
    if (!have_go()) {
        printf("note: go not on PATH; skipping go tool pprof acceptance\n");
        return;
    }
    char path[] = "/tmp/ember_test_pprof_XXXXXX";
    int fd = mkstemp(path);
    LC_CHECK(fd >= 0);
    if (fd < 0)
        return;
    LC_ASSERT_EQ(write(fd, bytes->data, bytes->len), (long long)bytes->len);
    close(fd);
    int64_t got[8];
    int status = go_pprof_totals(path, got, n_types);
    LC_ASSERT_EQ(status, 0);
    for (size_t t = 0; t < n_types; t++)
        LC_ASSERT_EQ(got[t], want[t]);
    unlink(path);
}

static void test_builder_output_accepted_by_go(void)
{
    lc_buf_t base;
    build_base(&base);
    int64_t want[2] = {6, 60000000};
    check_with_go_pprof(&base, want, 2);
    lc_buf_fini(&base);
}

static void test_builder_rebuilds_large_profile(void)
{
    size_t len;
    uint8_t *d = read_testdata("pprof/gopprof-large.cpu", &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_pprof_index_t *ix = NULL;
    lc_status_t st = {0};
    double t0 = now_ms();
    LC_ASSERT_OK(lc_pprof_decode(d, len, &lim, a, &p, &st));
    double t1 = now_ms();
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    double t2 = now_ms();
    LC_ASSERT_OK(lc_pprof_index_new(p, a, &ix));

    lc_pprof_builder_t *b = lc_pprof_builder_new();
    rebuild_profile(p, ix, b);
    double t3 = now_ms();
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, true, &out));
    double t4 = now_ms();
    size_t frames = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        frames += p->sample[i]->n_location_id;
    printf("gopprof-large.cpu: decode %.1f ms, validate %.1f ms; builder: %zu frames added "
           "in %.1f ms, encode+gzip %.1f ms (%zu bytes)\n",
           t1 - t0, t2 - t1, frames, t3 - t2, t4 - t3, out.len);

    lc_pprof_t *q = decode_ok(&out, a);
    LC_ASSERT_OK(lc_pprof_validate(q, &lim, &st));
    /* MANIFEST: 20430 samples, 23038 functions; totals 24029 / 240290000000. The
     * rebuild drops mappings, so locations only de-duplicate further. */
    LC_CHECK(q->n_sample <= 20430 && q->n_sample > 0);
    LC_CHECK(q->n_location <= 23355);
    LC_ASSERT_EQ(q->n_function, 23038);
    LC_ASSERT_EQ(sample_total(q, 0), 24029);
    LC_ASSERT_EQ(sample_total(q, 1), 240290000000LL);
    int64_t want[2] = {24029, 240290000000LL};
    check_with_go_pprof(&out, want, 2);
    lc_buf_fini(&out);
    lc_pprof_builder_free(b);
    lc_arena_free(a);
    free(d);
}

/* Labeled samples past the first are compared by their own labels: an
 * equal one is summed into them, and one whose labels merely equal the
 * bytes at a wrong offset (the first sample's value string and the
 * second's key string, read as a pair) is not. */
static void test_builder_dedup_later_labeled_samples(void)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "samples", "count");
    uint64_t loc1 = lc_pprof_builder_location(b, 0, 0x1, NULL, 0);
    uint64_t loc2 = lc_pprof_builder_location(b, 0, 0x2, NULL, 0);
    const char *k_v0[] = {"k", "v0"}, *k_v1[] = {"k", "v1"}, *v0_k[] = {"v0", "k"};
    int64_t one = 1, ten = 10, hundred = 100;
    lc_pprof_builder_sample(b, &loc1, 1, &one, k_v0, 1);
    lc_pprof_builder_sample(b, &loc2, 1, &one, k_v1, 1);
    lc_pprof_builder_sample(b, &loc2, 1, &ten, k_v1, 1);     /* summed into the second */
    lc_pprof_builder_sample(b, &loc2, 1, &hundred, v0_k, 1); /* a sample of its own */

    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, true, &out));
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = decode_ok(&out, a);
    LC_ASSERT_EQ(p->n_sample, 3);
    LC_ASSERT_EQ(p->sample[1]->value[0], 11);
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample[1]->label[0]->str), "v1");
    LC_ASSERT_EQ(p->sample[2]->value[0], 100);
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample[2]->label[0]->key), "v0");
    LC_ASSERT_STR_EQ(lc_pprof_str(p, p->sample[2]->label[0]->str), "k");
    lc_arena_free(a);
    lc_buf_fini(&out);
    lc_pprof_builder_free(b);
}

LC_TEST_MAIN(test_every_manifest_file, test_base_profile_is_valid, test_rejection_rules,
             test_sparse_ids_are_valid, test_deep_stacks_keep_the_root,
             test_long_strings_cut_at_utf8_boundary, test_zero_limits_mean_unlimited,
             test_decode_errors, test_field_zero_rejected, test_empty_input,
             test_embedded_nul_survives, test_encode_round_trip, test_builder_dedup,
             test_builder_dedup_later_labeled_samples, test_builder_misuse,
             test_builder_output_accepted_by_go, test_builder_rebuilds_large_profile)
