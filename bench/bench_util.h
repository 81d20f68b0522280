/*
 * bench_util.h — small helpers the C benchmark programs share (jfr_bench,
 * ingest_stages): a whole file into a buffer, and doubles ordered for qsort.
 * Static inline: each program is one translation unit.
 */
#ifndef EMBER_BENCH_UTIL_H
#define EMBER_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "lc/alloc.h"

/* Appends the file at path to out; 0, or -1 when it cannot be read. */
static inline int bench_read_file(const char *path, lc_buf_t *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t chunk[65536];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = lc_buf_append(out, chunk, n);
    fclose(f);
    return rc;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
