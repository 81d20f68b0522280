/*
 * jfr_bench.c — throughput of ember's JFR converter (services/ingester/src/
 * jfr.c, jfr_pprof.c) on one core: each file given is converted `iterations`
 * times (gunzipped once, outside the timing); prints one JSON line per file
 * with the median and fastest conversion (ms), MB/s of JFR at the median (as
 * bench/jfr/main.go reports the reference) and the per-profile-type totals
 * of the last conversion
 * (decoded back from the pprofs), so a driver can check them against another
 * converter, and a digest of every sample's content (stacks by name, labels,
 * values; not ids or order) to compare two builds of this one, and the
 * table memory the thread keeps after the file's conversions (lc/jfr.h).
 * JFR_BENCH_LAZY_MIN sets lazy_stacks_min_bytes (1: every stack trace pool
 * located, not copied). Usage: jfr_bench ITERATIONS FILE[.gz]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "lc/gz.h"
#include "lc/hash.h"
#include "lc/jfr.h"
#include "lc/pprof.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t fnv_str(uint64_t h, const lc_pprof_t *p, int64_t i)
{
    const char *s = i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "?";
    return lc_fnv1a64(h, s, strlen(s) + 1);
}

/* One sample by content: metric, every frame's function name and line
 * (leaf first), labels and values; ids and order left out. */
static uint64_t sample_digest(const lc_pprof_t *p, const char *metric, const Google__V1__Sample *s)
{
    uint64_t h = lc_fnv1a64(LC_FNV64_OFFSET, metric, strlen(metric) + 1);
    for (size_t k = 0; k < s->n_location_id; k++) {
        const Google__V1__Location *loc =
            s->location_id[k] - 1 < p->n_location ? p->location[s->location_id[k] - 1] : NULL;
        if (!loc || loc->id != s->location_id[k])
            return 0; /* ids are not 1..n: the builder's never are */
        for (size_t l = 0; l < loc->n_line; l++) {
            const Google__V1__Function *fn = loc->line[l]->function_id - 1 < p->n_function
                                                 ? p->function[loc->line[l]->function_id - 1]
                                                 : NULL;
            h = fnv_str(h, p, fn ? fn->name : -1);
            h = lc_fnv1a64(h, &loc->line[l]->line, sizeof(loc->line[l]->line));
        }
        h = lc_fnv1a64(h, "|", 1);
    }
    uint64_t labels = 0; /* summed: their order follows string ids */
    for (size_t l = 0; l < s->n_label; l++) {
        uint64_t lh = fnv_str(fnv_str(LC_FNV64_OFFSET, p, s->label[l]->key), p, s->label[l]->str);
        labels += lc_fnv1a64(lh, &s->label[l]->num, sizeof(s->label[l]->num));
    }
    h = lc_fnv1a64(h, &labels, sizeof(labels));
    return lc_fnv1a64(h, s->value, s->n_value * sizeof(*s->value));
}

/* Prints "metric:type:unit" = total, for every sample type of every
 * profile; returns every profile's samples by content, summed (order-free):
 * two converters (or two builds) that agree on it gave the same stacks,
 * labels and values, whatever their ids and order. */
static uint64_t print_totals(const lc_jfr_result_t *r)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = 0;
    const char *sep = "";
    uint64_t digest = 0;
    for (size_t i = 0; i < r->n; i++) {
        lc_arena_t *a = lc_arena_new((size_t)1 << 30);
        lc_status_t st = {0};
        lc_pprof_t *p;
        if (lc_pprof_decode(r->profiles[i].pprof.data, r->profiles[i].pprof.len, &lim, a, &p,
                            &st) == 0) {
            for (size_t t = 0; t < p->n_sample_type; t++) {
                long long sum = 0;
                for (size_t s = 0; s < p->n_sample; s++)
                    sum += p->sample[s]->value[t];
                printf("%s\"%s:%s:%s\": %lld", sep, r->profiles[i].metric,
                       lc_pprof_str(p, p->sample_type[t]->type),
                       lc_pprof_str(p, p->sample_type[t]->unit), sum);
                sep = ", ";
            }
            for (size_t k = 0; k < p->n_sample; k++)
                digest += sample_digest(p, r->profiles[i].metric, p->sample[k]);
        }
        lc_arena_free(a);
    }
    return digest;
}

static int bench_file(const char *path, int iterations)
{
    lc_buf_t raw, jfr;
    lc_buf_init(&raw, LC_BUF_UNLIMITED);
    lc_buf_init(&jfr, LC_BUF_UNLIMITED);
    if (bench_read_file(path, &raw) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    const lc_buf_t *in = &raw;
    if (lc_gz_is_gzip(raw.data, raw.len)) {
        if (lc_gunzip(raw.data, raw.len, LC_JFR_MAX_BYTES, &jfr) != 0)
            return 1;
        in = &jfr;
    }
    const char *lazy = getenv("JFR_BENCH_LAZY_MIN"); /* stack pools this large located */
    lc_jfr_params_t params = {.start_ns = 1,
                              .end_ns = 2,
                              .sample_rate = 100,
                              .lazy_stacks_min_bytes = lazy ? strtoull(lazy, NULL, 10) : 0};
    lc_jfr_result_t r = {0};
    double *ms = calloc((size_t)iterations, sizeof(*ms));
    if (!ms)
        return 1;
    for (int i = 0; i < iterations; i++) {
        double t0 = now_s();
        lc_arena_t *a = lc_arena_new((size_t)1 << 30);
        lc_status_t st = {0};
        lc_jfr_result_fini(&r);
        if (lc_jfr_to_pprof(in->data, in->len, NULL, 0, &params, a, &r, &st) != 0) {
            fprintf(stderr, "%s: %s\n", path, st.msg);
            return 1;
        }
        lc_arena_free(a);
        ms[i] = (now_s() - t0) * 1e3;
    }
    qsort(ms, (size_t)iterations, sizeof(*ms), bench_cmp_double);
    double median = ms[iterations / 2];
    printf("{\"file\": \"%s\", \"bytes\": %zu, \"iterations\": %d, \"median_ms\": %.4f, "
           "\"min_ms\": %.4f, \"mb_per_s\": %.2f, \"totals\": {",
           path, in->len, iterations, median, ms[0], (double)in->len / 1e3 / median);
    free(ms);
    uint64_t digest = print_totals(&r);
    printf("}, \"digest\": \"%016llx\", \"kept_bytes\": %zu}\n", (unsigned long long)digest,
           lc_jfr_kept_bytes());
    lc_jfr_result_fini(&r);
    lc_buf_fini(&raw);
    lc_buf_fini(&jfr);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s ITERATIONS FILE...\n", argv[0]);
        return 2;
    }
    int iterations = (int)strtol(argv[1], NULL, 10);
    for (int i = 2; i < argc; i++) {
        if (bench_file(argv[i], iterations > 0 ? iterations : 1) != 0)
            return 1;
    }
    return 0;
}
