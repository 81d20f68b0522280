/*
 * load_stats.h — request latencies per (method, range), for the end-of-run
 * summary: count, errors, p50/p90/p99 by nearest rank over the samples (the
 * Prometheus histograms hold the bucketed view). Exact up to
 * LD_STATS_MAX_SAMPLES requests per row; past that a uniform reservoir
 * sample of that size, so a run of days stays in bounded memory.
 *
 * Threading: loop thread only. Ownership: the table owns its arrays.
 */
#ifndef EMBER_LOAD_STATS_H
#define EMBER_LOAD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load_matrix.h"

#define LD_STATS_MAX_SAMPLES 65536

typedef struct ld_stat_row_s {
    ld_method_t method;
    char *range;         /* "15m", or "none" */
    double *latencies_s; /* the kept samples */
    size_t n, cap;
    uint64_t count; /* requests recorded */
    uint64_t errors;
} ld_stat_row_t;

typedef struct ld_stats_s {
    ld_stat_row_t *rows;
    size_t n_rows, cap_rows;
    uint64_t rng; /* reservoir choices; fixed seed, so runs are reproducible */
} ld_stats_t;

void ld_stats_init(ld_stats_t *s);
void ld_stats_fini(ld_stats_t *s);
void ld_stats_record(ld_stats_t *s, ld_method_t m, const char *range, double seconds, bool ok);
uint64_t ld_stats_total(const ld_stats_t *s);
uint64_t ld_stats_errors(const ld_stats_t *s);
/* Nearest-rank quantile q (0..1] of v[0..n) (sorted in place); 0 if n == 0. */
double ld_quantile(double *v, size_t n, double q);
/* The table: one line per (method, range), in recording order, then totals. */
void ld_stats_print(ld_stats_t *s, FILE *out);

#endif
