/*
 * jfr_bench.c — throughput of ember's JFR converter (services/ingester/src/
 * jfr.c, jfr_pprof.c) on one core: each file given is converted `iterations`
 * times (gunzipped once, outside the timing); prints one JSON line per file
 * with MB/s of JFR and the per-profile-type totals of the last conversion
 * (decoded back from the pprofs), so a driver can check them against another
 * converter. Usage: jfr_bench ITERATIONS FILE[.gz]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lc/gz.h"
#include "lc/jfr.h"
#include "lc/pprof.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int read_file(const char *path, lc_buf_t *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t tmp[65536];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        rc = lc_buf_append(out, tmp, n);
    fclose(f);
    return rc;
}

/* "metric:type:unit" = total, for every sample type of every profile. */
static void print_totals(const lc_jfr_result_t *r)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = 0;
    const char *sep = "";
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
        }
        lc_arena_free(a);
    }
}

static int bench_file(const char *path, int iterations)
{
    lc_buf_t raw, jfr;
    lc_buf_init(&raw, LC_BUF_UNLIMITED);
    lc_buf_init(&jfr, LC_BUF_UNLIMITED);
    if (read_file(path, &raw) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    const lc_buf_t *in = &raw;
    if (lc_gz_is_gzip(raw.data, raw.len)) {
        if (lc_gunzip(raw.data, raw.len, LC_JFR_MAX_BYTES, &jfr) != 0)
            return 1;
        in = &jfr;
    }
    lc_jfr_params_t params = {.start_ns = 1, .end_ns = 2, .sample_rate = 100};
    lc_jfr_result_t r = {0};
    double t0 = now_s();
    for (int i = 0; i < iterations; i++) {
        lc_arena_t *a = lc_arena_new((size_t)1 << 30);
        lc_status_t st = {0};
        lc_jfr_result_fini(&r);
        if (lc_jfr_to_pprof(in->data, in->len, NULL, 0, &params, a, &r, &st) != 0) {
            fprintf(stderr, "%s: %s\n", path, st.msg);
            return 1;
        }
        lc_arena_free(a);
    }
    double secs = now_s() - t0;
    printf("{\"file\": \"%s\", \"bytes\": %zu, \"iterations\": %d, \"seconds\": %.6f, "
           "\"mb_per_s\": %.2f, \"totals\": {",
           path, in->len, iterations, secs, (double)in->len * iterations / secs / 1e6);
    print_totals(&r);
    printf("}}\n");
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
