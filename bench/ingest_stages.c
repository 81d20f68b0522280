/*
 * ingest_stages.c — the floors beside bench/perf_stages.py's table: each
 * stage of a receiver's work done alone, one core, caches warm, on the same
 * bodies the ingest bench sends (issue 32).
 *
 * usage: ingest_stages ITERATIONS FILE...
 *
 * Per round every file is gunzipped (lc_gunzip: libdeflate, as the
 * receivers), decoded from the raw bytes and validated as the receivers do
 * (lc_pprof_decode_apart, lc_pprof_validate_seen) and checked as they check
 * (lc_store_check_validated), each stage timed apart with the thread's CPU
 * clock. Printed: CPU ms per profile of each stage, the mean over the files
 * (the bench sends them in equal numbers), the median of ITERATIONS rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "lc/alloc.h"
#include "lc/gz.h"
#include "lc/pprof.h"
#include "lc/store.h"

enum { ST_INFLATE, ST_DECODE, ST_VALIDATE, ST_CHECK, ST_N };
static const char *const stage_names[ST_N] = {"inflate (libdeflate)", "decode", "validate",
                                              "check (validated)"};

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One pass over one body: adds each stage's CPU ms to t. */
static int one_profile(const lc_buf_t *body, double *t)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_buf_t raw;
    lc_buf_init(&raw, LC_BUF_UNLIMITED);
    lc_arena_t *arena = lc_arena_new((size_t)256 << 20);
    lc_status_t st = {0};
    lc_pprof_t *p;
    lc_pprof_index_t *ix;
    bool changed;
    double t0 = cpu_ms();
    int rc = lc_gz_is_gzip(body->data, body->len)
                 ? lc_gunzip(body->data, body->len, lim.max_decompressed_bytes, &raw)
                 : lc_buf_append(&raw, body->data, body->len);
    double t1 = cpu_ms();
    lc_pprof_seen_t seen;
    const uint8_t *pb;
    size_t pb_len;
    if (rc == 0)
        rc = lc_pprof_decode_apart(raw.data, raw.len, &lim, arena, arena, &p, &pb, &pb_len, &seen,
                                   &st);
    double t2 = cpu_ms();
    if (rc == 0)
        rc = lc_pprof_validate_seen(p, &lim, &seen, &changed, &st);
    double t3 = cpu_ms();
    if (rc == 0)
        rc = lc_store_check_validated(p, "bench", 1, arena, &ix, &st);
    double t4 = cpu_ms();
    t[ST_INFLATE] += t1 - t0;
    t[ST_DECODE] += t2 - t1;
    t[ST_VALIDATE] += t3 - t2;
    t[ST_CHECK] += t4 - t3;
    if (rc)
        fprintf(stderr, "ingest_stages: %s\n", st.msg[0] ? st.msg : "gunzip failed");
    lc_arena_free(arena);
    lc_buf_fini(&raw);
    return rc;
}

int main(int argc, char **argv)
{
    int iterations = argc > 2 ? (int)strtol(argv[1], NULL, 10) : 0;
    if (iterations < 1) {
        fprintf(stderr, "usage: %s ITERATIONS FILE...\n", argv[0]);
        return 2;
    }
    size_t n_files = (size_t)argc - 2;
    lc_buf_t *bodies = calloc(n_files, sizeof(*bodies));
    double *rounds = calloc((size_t)iterations * ST_N, sizeof(*rounds));
    if (!bodies || !rounds)
        return 1;
    for (size_t f = 0; f < n_files; f++) {
        lc_buf_init(&bodies[f], LC_BUF_UNLIMITED);
        if (bench_read_file(argv[f + 2], &bodies[f]) != 0) {
            fprintf(stderr, "cannot read %s\n", argv[f + 2]);
            return 1;
        }
    }
    for (int i = 0; i < iterations; i++) {
        double t[ST_N] = {0};
        for (size_t f = 0; f < n_files; f++)
            if (one_profile(&bodies[f], t) != 0)
                return 1;
        for (int s = 0; s < ST_N; s++)
            rounds[(size_t)s * (size_t)iterations + (size_t)i] = t[s] / (double)n_files;
    }
    printf("{");
    for (int s = 0; s < ST_N; s++) {
        double *r = &rounds[(size_t)s * (size_t)iterations];
        qsort(r, (size_t)iterations, sizeof(*r), bench_cmp_double);
        printf("%s\"%s\": %.4f", s ? ", " : "", stage_names[s], r[iterations / 2]);
    }
    printf("}\n");
    for (size_t f = 0; f < n_files; f++)
        lc_buf_fini(&bodies[f]);
    free(bodies);
    free(rounds);
    return 0;
}
