/*
 * test_scrape_delta.c — cumulative profiles to deltas (delta.c) and the
 * processing of a scraped body (process.c).
 *
 * Delta: the first scrape is only a baseline; later scrapes hold
 * current - previous per stack and labels (inuse_* pass through); samples left
 * all zero are removed; a stack scraped twice in one profile counts once; a
 * counter that went down resets the baseline; string-table order does not
 * matter. Process: gzip and raw bodies, validation errors by kind,
 * keep_sample_type, and the IngestProfile it packs (labels with
 * __delta__="false", delta_disabled, the profile time).
 */
#include "ember/v1/ingest.pb-c.h"
#include "lc/gz.h"
#include "lc_test.h"
#include "process.h"

typedef struct stack_s {
    const char *frames[3]; /* leaf first, NULL-terminated */
    int64_t v[4];
    const char *label; /* "k=v" or NULL */
} stack_t_;

/* Builds a memory-like profile; `reverse` interns the strings in another
 * order, so string-table indices differ between otherwise equal profiles. */
static void build(const stack_t_ *s, size_t n, bool reverse, bool block, lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    if (reverse)
        for (const char *const *w = (const char *const[]){"zz", "h", "g", "f", NULL}; *w; w++)
            (void)lc_pprof_builder_string(b, *w, strlen(*w));
    if (block) {
        lc_pprof_builder_sample_type(b, "contentions", "count");
        lc_pprof_builder_sample_type(b, "delay", "nanoseconds");
        lc_pprof_builder_period(b, "contentions", "count", 1);
    } else {
        lc_pprof_builder_sample_type(b, "alloc_objects", "count");
        lc_pprof_builder_sample_type(b, "alloc_space", "bytes");
        lc_pprof_builder_sample_type(b, "inuse_objects", "count");
        lc_pprof_builder_sample_type(b, "inuse_space", "bytes");
        lc_pprof_builder_period(b, "space", "bytes", 524288);
    }
    lc_pprof_builder_times(b, 1700000000000000000LL, 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t locs[3];
        size_t nl = 0;
        for (; nl < 3 && s[i].frames[nl]; nl++) {
            uint64_t fn = lc_pprof_builder_function(b, s[i].frames[nl], s[i].frames[nl], "x.go", 1);
            lc_pprof_line_t line = {fn, 10};
            locs[nl] =
                lc_pprof_builder_location(b, 0, 0x1000 + (uint64_t)s[i].frames[nl][0], &line, 1);
        }
        const char *kv[2];
        char key[8] = "", val[8] = "";
        if (s[i].label) {
            sscanf(s[i].label, "%7[^=]=%7s", key, val);
            kv[0] = key;
            kv[1] = val;
        }
        lc_pprof_builder_sample(b, locs, nl, s[i].v, s[i].label ? kv : NULL, s[i].label ? 1 : 0);
    }
    lc_buf_init(out, LC_BUF_UNLIMITED);
    if (lc_pprof_builder_encode(b, false, out))
        abort();
    lc_pprof_builder_free(b);
}

typedef struct run_s {
    lc_arena_t *arena;
    lc_pprof_t *p;
} run_t;

/* Decodes, optionally duplicates sample 0 (a stack twice in one profile), and
 * applies the delta. */
static scr_delta_result_t run(scr_delta_t *d, const stack_t_ *s, size_t n, bool reverse,
                              bool dup_first, run_t *r)
{
    lc_buf_t raw;
    build(s, n, reverse, false, &raw);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    r->arena = lc_arena_new((size_t)1 << 30);
    if (lc_pprof_decode(raw.data, raw.len, &lim, r->arena, &r->p, &st))
        abort();
    lc_buf_fini(&raw);
    if (dup_first && r->p->n_sample) {
        Google__V1__Sample **v = lc_arena_calloc(r->arena, r->p->n_sample + 1, sizeof(*v));
        memcpy(v, r->p->sample, r->p->n_sample * sizeof(*v));
        Google__V1__Sample *copy = lc_arena_alloc(r->arena, sizeof(*copy));
        *copy = *r->p->sample[0];
        copy->value = lc_arena_calloc(r->arena, copy->n_value, sizeof(int64_t));
        for (size_t t = 0; t < copy->n_value; t++)
            copy->value[t] = 1; /* the duplicate holds 1 of every count */
        v[r->p->n_sample++] = copy;
        r->p->sample = v;
    }
    lc_pprof_index_t *ix;
    if (lc_pprof_index_new(r->p, r->arena, &ix))
        abort();
    scr_delta_result_t res;
    LC_ASSERT_OK(scr_delta_apply(d, r->p, ix, r->arena, &res));
    return res;
}

/* Values of the sample whose leaf function is `leaf` (summed), or -1s. */
static void values_of(const run_t *r, const char *leaf, int64_t out[4])
{
    for (int t = 0; t < 4; t++)
        out[t] = -1;
    lc_pprof_index_t *ix;
    if (lc_pprof_index_new(r->p, r->arena, &ix))
        abort();
    for (size_t i = 0; i < r->p->n_sample; i++) {
        const Google__V1__Sample *s = r->p->sample[i];
        const Google__V1__Location *loc = lc_pprof_location(ix, s->location_id[0]);
        const Google__V1__Function *fn = lc_pprof_function(ix, loc->line[0]->function_id);
        if (strcmp(lc_pprof_str(r->p, fn->name), leaf) != 0)
            continue;
        for (size_t t = 0; t < s->n_value && t < 4; t++)
            out[t] = (out[t] < 0 ? 0 : out[t]) + s->value[t];
    }
}

#define ASSERT_VALUES(r, leaf, a, b, c, e)                                                         \
    do {                                                                                           \
        int64_t v_[4];                                                                             \
        values_of((r), (leaf), v_);                                                                \
        LC_ASSERT_EQ(v_[0], a);                                                                    \
        LC_ASSERT_EQ(v_[1], b);                                                                    \
        LC_ASSERT_EQ(v_[2], c);                                                                    \
        LC_ASSERT_EQ(v_[3], e);                                                                    \
    } while (0)

static void test_sequence(void)
{
    scr_delta_t *d = scr_delta_new();
    run_t r;
    const stack_t_ p1[] = {{{"f", "main", NULL}, {10, 100, 1, 10}, NULL},
                           {{"h", "main", NULL}, {4, 40, 0, 0}, NULL}};
    LC_ASSERT_EQ(run(d, p1, 2, false, false, &r), SCR_DELTA_FIRST);
    lc_arena_free(r.arena);

    /* f grew, h unchanged (and no longer in use: dropped), g is new. Strings
     * are interned in another order this time. */
    const stack_t_ p2[] = {{{"f", "main", NULL}, {15, 150, 2, 20}, NULL},
                           {{"h", "main", NULL}, {4, 40, 0, 0}, NULL},
                           {{"g", "f", "main"}, {3, 30, 3, 30}, NULL}};
    LC_ASSERT_EQ(run(d, p2, 3, true, false, &r), SCR_DELTA_READY);
    LC_ASSERT_EQ(r.p->n_sample, 2);
    ASSERT_VALUES(&r, "f", 5, 50, 2, 20);
    ASSERT_VALUES(&r, "g", 3, 30, 3, 30);
    ASSERT_VALUES(&r, "h", -1, -1, -1, -1);
    lc_arena_free(r.arena);

    /* Nothing allocated, but f is still in use: kept with zero allocations. */
    LC_ASSERT_EQ(run(d, p2, 3, false, false, &r), SCR_DELTA_READY);
    ASSERT_VALUES(&r, "f", 0, 0, 2, 20);
    ASSERT_VALUES(&r, "g", 0, 0, 3, 30);
    lc_arena_free(r.arena);

    /* A stack twice in one profile: the sums are compared, the first copy
     * carries the difference. f = 16 + 1 (the duplicate) = 17 against 15. */
    const stack_t_ p3[] = {{{"f", "main", NULL}, {16, 160, 2, 20}, NULL},
                           {{"h", "main", NULL}, {4, 40, 0, 0}, NULL},
                           {{"g", "f", "main"}, {3, 30, 0, 0}, NULL}};
    LC_ASSERT_EQ(run(d, p3, 3, false, true, &r), SCR_DELTA_READY);
    ASSERT_VALUES(&r, "f", 2, 11, 2 + 1, 20 + 1); /* inuse of both copies pass through */
    lc_arena_free(r.arena);

    /* A counter went down: the process restarted. */
    const stack_t_ p4[] = {{{"f", "main", NULL}, {2, 20, 1, 10}, NULL}};
    LC_ASSERT_EQ(run(d, p4, 1, false, false, &r), SCR_DELTA_RESET);
    lc_arena_free(r.arena);
    const stack_t_ p5[] = {{{"f", "main", NULL}, {7, 70, 0, 0}, NULL}};
    LC_ASSERT_EQ(run(d, p5, 1, false, false, &r), SCR_DELTA_READY);
    ASSERT_VALUES(&r, "f", 5, 50, 0, 0);
    lc_arena_free(r.arena);

    /* Nothing changed at all. */
    LC_ASSERT_EQ(run(d, p5, 1, false, false, &r), SCR_DELTA_EMPTY);
    LC_ASSERT_EQ(r.p->n_sample, 0);
    lc_arena_free(r.arena);

    scr_delta_forget(d);
    LC_ASSERT_EQ(run(d, p5, 1, false, false, &r), SCR_DELTA_FIRST);
    lc_arena_free(r.arena);
    scr_delta_free(d);
}

static void test_labels_distinguish_samples(void)
{
    scr_delta_t *d = scr_delta_new();
    run_t r;
    const stack_t_ a[] = {{{"f", NULL}, {1, 1, 0, 0}, "k=a"}, {{"f", NULL}, {5, 5, 0, 0}, "k=b"}};
    LC_ASSERT_EQ(run(d, a, 2, false, false, &r), SCR_DELTA_FIRST);
    lc_arena_free(r.arena);
    const stack_t_ b[] = {{{"f", NULL}, {3, 3, 0, 0}, "k=a"}, {{"f", NULL}, {5, 5, 0, 0}, "k=b"}};
    LC_ASSERT_EQ(run(d, b, 2, true, false, &r), SCR_DELTA_READY);
    LC_ASSERT_EQ(r.p->n_sample, 1);
    ASSERT_VALUES(&r, "f", 2, 2, 0, 0);
    lc_arena_free(r.arena);
    scr_delta_free(d);
}

/* ---------------------------------------------------------------- process */

static scr_process_in_t process_input(const lc_buf_t *body, const lc_labels_t *series)
{
    scr_process_in_t in = {
        .body = body->data,
        .len = body->len,
        .profile_name = "memory",
        .series = series,
        .tenant = "anonymous",
        .partitions = 1,
        .scrape_time_ns = 42,
    };
    lc_pprof_limits_default(&in.limits);
    return in;
}

static void test_process_message(void)
{
    const stack_t_ s[] = {{{"f", "main", NULL}, {10, 100, 1, 10}, NULL}};
    lc_buf_t raw, gz;
    build(s, 1, false, false, &raw);
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(raw.data, raw.len, 1, &gz));
    lc_labels_t series;
    lc_labels_init(&series);
    lc_labels_add(&series, "__name__", "memory");
    lc_labels_add(&series, "job", "api");
    lc_labels_add(&series, "service_name", "api");
    lc_labels_sort(&series);
    scr_value_type_t keep[] = {{"alloc_space", "bytes"}, {"inuse_space", ""}};
    scr_process_in_t in = process_input(&gz, &series);
    in.keep = keep;
    in.n_keep = 2;
    scr_process_out_t out;
    LC_ASSERT_OK(scr_process(&in, &out));
    LC_CHECK(out.msg != NULL);
    LC_ASSERT_EQ(out.n_samples, 1);
    Ember__V1__IngestProfile *m = ember__v1__ingest_profile__unpack(NULL, out.len, out.msg);
    LC_CHECK(m != NULL);
    if (m) {
        LC_ASSERT_STR_EQ(m->tenant, "anonymous");
        LC_CHECK(m->delta_disabled);
        LC_ASSERT_EQ(m->ingest_id.len, 16);
        LC_ASSERT_EQ(m->time_nanos, 1700000000000000000LL);
        LC_ASSERT_EQ(m->n_labels, 4);
        LC_ASSERT_STR_EQ(m->labels[0]->name, "__delta__");
        LC_ASSERT_STR_EQ(m->labels[0]->value, "false");
        LC_ASSERT_STR_EQ(m->labels[1]->name, "__name__");
        Google__V1__Profile *p = google__v1__profile__unpack(NULL, m->pprof.len, m->pprof.data);
        LC_CHECK(p != NULL);
        if (p) {
            LC_ASSERT_EQ(p->n_sample_type, 2);
            LC_ASSERT_STR_EQ(p->string_table[p->sample_type[0]->type], "alloc_space");
            LC_ASSERT_STR_EQ(p->string_table[p->sample_type[1]->type], "inuse_space");
            LC_ASSERT_EQ(p->sample[0]->n_value, 2);
            LC_ASSERT_EQ(p->sample[0]->value[0], 100);
            LC_ASSERT_EQ(p->sample[0]->value[1], 10);
            google__v1__profile__free_unpacked(p, NULL);
        }
        ember__v1__ingest_profile__free_unpacked(m, NULL);
    }
    lc_free(out.msg);

    /* Cumulative: the first scrape publishes nothing, the second a delta. */
    scr_delta_t *d = scr_delta_new();
    in = process_input(&raw, &series);
    in.cumulative = true;
    in.delta = d;
    LC_ASSERT_OK(scr_process(&in, &out));
    LC_ASSERT_EQ(out.delta, SCR_DELTA_FIRST);
    LC_CHECK(out.msg == NULL);
    LC_ASSERT_OK(scr_process(&in, &out));
    LC_ASSERT_EQ(out.delta, SCR_DELTA_READY); /* inuse still there */
    LC_CHECK(out.msg != NULL);
    lc_free(out.msg);
    scr_delta_free(d);

    lc_labels_fini(&series);
    lc_buf_fini(&raw);
    lc_buf_fini(&gz);
}

static void test_process_errors(void)
{
    lc_labels_t series;
    lc_labels_init(&series);
    lc_labels_add(&series, "__name__", "memory");
    scr_process_out_t out;

    lc_buf_t empty = {0};
    scr_process_in_t in = process_input(&empty, &series);
    LC_CHECK(scr_process(&in, &out) != 0);
    LC_ASSERT_STR_EQ(out.error_kind, SCR_ERR_EMPTY);

    lc_buf_t junk;
    lc_buf_init(&junk, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_buf_puts(&junk, "<html>404 page not found</html>"));
    in = process_input(&junk, &series);
    LC_CHECK(scr_process(&in, &out) != 0);
    LC_ASSERT_STR_EQ(out.error_kind, SCR_ERR_INVALID);
    LC_CHECK(out.msg == NULL);

    /* A body that inflates past the cap. */
    lc_buf_t zeros, bomb;
    lc_buf_init(&zeros, LC_BUF_UNLIMITED);
    lc_buf_init(&bomb, LC_BUF_UNLIMITED);
    for (int i = 0; i < 4096; i++)
        LC_ASSERT_OK(lc_buf_append(&zeros, (const char[256]){0}, 256));
    LC_ASSERT_OK(lc_gzip(zeros.data, zeros.len, 9, &bomb));
    in = process_input(&bomb, &series);
    in.limits.max_decompressed_bytes = 4096;
    LC_CHECK(scr_process(&in, &out) != 0);
    LC_ASSERT_STR_EQ(out.error_kind, SCR_ERR_TOO_LARGE);

    const stack_t_ s[] = {{{"f", NULL}, {1, 1, 1, 1}, NULL}};
    lc_buf_t raw;
    build(s, 1, false, true, &raw);
    scr_value_type_t keep[] = {{"alloc_space", "bytes"}};
    in = process_input(&raw, &series);
    in.keep = keep;
    in.n_keep = 1;
    LC_CHECK(scr_process(&in, &out) != 0);
    LC_CHECK(strstr(out.error, "keep_sample_type") != NULL);

    /* A target whose (discovered, relabelled) labels break the label rules
     * is refused whole, never published with the name cut or merged. */
    lc_labels_t bad;
    lc_labels_init(&bad);
    lc_labels_add(&bad, "__name__", "memory");
    lc_labels_add(&bad, "pod", "web-\xef\xbf\xbd");
    in = process_input(&raw, &bad);
    LC_CHECK(scr_process(&in, &out) != 0);
    LC_ASSERT_STR_EQ(out.error_kind, SCR_ERR_INVALID);
    LC_CHECK(strstr(out.error, "target labels") && strstr(out.error, "pod"));
    LC_CHECK(out.msg == NULL);
    lc_labels_fini(&bad);

    lc_buf_fini(&raw);
    lc_buf_fini(&junk);
    lc_buf_fini(&zeros);
    lc_buf_fini(&bomb);
    lc_labels_fini(&series);
}

LC_TEST_MAIN(test_sequence, test_labels_distinguish_samples, test_process_message,
             test_process_errors)
