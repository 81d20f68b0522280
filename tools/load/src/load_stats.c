/*
 * load_stats.c — per (method, range) latencies and the summary table
 * (load_stats.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "load_stats.h"

void ld_stats_init(ld_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    s->rng = UINT64_C(0x9e3779b97f4a7c15);
}

/* xorshift64*: a uniform enough index for the reservoir. */
static uint64_t stats_random(ld_stats_t *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * UINT64_C(2685821657736338717);
}

void ld_stats_fini(ld_stats_t *s)
{
    for (size_t i = 0; i < s->n_rows; i++) {
        lc_free(s->rows[i].range);
        lc_free(s->rows[i].latencies_s);
    }
    lc_free(s->rows);
    memset(s, 0, sizeof(*s));
}

static ld_stat_row_t *stats_row(ld_stats_t *s, ld_method_t m, const char *range)
{
    for (size_t i = 0; i < s->n_rows; i++)
        if (s->rows[i].method == m && strcmp(s->rows[i].range, range) == 0)
            return &s->rows[i];
    s->rows = lc_xgrow(s->rows, &s->cap_rows, s->n_rows + 1, sizeof(*s->rows));
    ld_stat_row_t *row = &s->rows[s->n_rows++];
    memset(row, 0, sizeof(*row));
    row->method = m;
    row->range = lc_xstrdup(range);
    return row;
}

void ld_stats_record(ld_stats_t *s, ld_method_t m, const char *range, double seconds, bool ok)
{
    ld_stat_row_t *row = stats_row(s, m, range);
    row->count++;
    if (!ok)
        row->errors++;
    if (row->n < LD_STATS_MAX_SAMPLES) {
        row->latencies_s = lc_xgrow(row->latencies_s, &row->cap, row->n + 1, sizeof(double));
        row->latencies_s[row->n++] = seconds;
        return;
    }
    /* Algorithm R: the k-th request replaces a kept one with probability n/k. */
    uint64_t j = stats_random(s) % row->count;
    if (j < row->n)
        row->latencies_s[j] = seconds;
}

uint64_t ld_stats_total(const ld_stats_t *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_rows; i++)
        n += s->rows[i].count;
    return n;
}

uint64_t ld_stats_errors(const ld_stats_t *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_rows; i++)
        n += s->rows[i].errors;
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ld_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    double rank = ceil(q * (double)n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    return v[i < n ? i : n - 1];
}

void ld_stats_print(ld_stats_t *s, FILE *out)
{
    fprintf(out, "%-24s %-6s %8s %7s %10s %10s %10s\n", "method", "range", "count", "errors",
            "p50_ms", "p90_ms", "p99_ms");
    for (size_t i = 0; i < s->n_rows; i++) {
        ld_stat_row_t *r = &s->rows[i];
        double p50 = ld_quantile(r->latencies_s, r->n, 0.50) * 1e3;
        double p90 = ld_quantile(r->latencies_s, r->n, 0.90) * 1e3;
        double p99 = ld_quantile(r->latencies_s, r->n, 0.99) * 1e3;
        fprintf(out, "%-24s %-6s %8llu %7llu %10.2f %10.2f %10.2f\n", ld_method_name(r->method),
                r->range, (unsigned long long)r->count, (unsigned long long)r->errors, p50, p90,
                p99);
    }
    fprintf(out, "total requests %llu, errors %llu\n", (unsigned long long)ld_stats_total(s),
            (unsigned long long)ld_stats_errors(s));
}
