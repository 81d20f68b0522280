/*
 * load_matrix.h — the calls of one query round: profile types × ranges ×
 * selectors (× label names for LabelValues), in parca-load's order (per
 * method, then range, then type, then selector). Pure: indices only, the
 * runner resolves them against its discovered types and selectors.
 */
#ifndef EMBER_LOAD_MATRIX_H
#define EMBER_LOAD_MATRIX_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    LD_PROFILE_TYPES = 0,
    LD_LABEL_NAMES,
    LD_LABEL_VALUES,
    LD_SERIES,
    LD_SELECT_SERIES,
    LD_SELECT_MERGE_STACKTRACES,
    LD_SELECT_MERGE_PROFILE,
    LD_PUSH, /* the write load; never part of a round */
    LD_METHOD_COUNT
} ld_method_t;

#define LD_QUERY_METHODS ((1u << LD_PUSH) - 1u) /* every query method */
#define LD_NONE ((uint32_t)-1)                  /* index not used by this method */

typedef struct ld_call_s {
    ld_method_t method;
    uint32_t range, type, selector, label;
} ld_call_t;

typedef struct ld_matrix_dims_s {
    unsigned methods; /* bit per method */
    size_t ranges, types, selectors, labels;
} ld_matrix_dims_t;

/* "SelectMergeStacktraces"; the Connect method name. */
const char *ld_method_name(ld_method_t m);
/* The method named s (case-sensitive), or -1. */
int ld_method_from_name(const char *s);
/* Calls in one round for these dimensions. */
size_t ld_matrix_size(const ld_matrix_dims_t *d);
/* Fills out[0 .. ld_matrix_size(d)). */
void ld_matrix_build(const ld_matrix_dims_t *d, ld_call_t *out);
/* SelectSeries step for a range: range/7680 (parca-load's rule), in seconds,
 * at least one millisecond. */
double ld_step_seconds(int64_t range_ms);

#endif
