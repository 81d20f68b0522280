/*
 * load_matrix.c — one round's calls (load_matrix.h). The counts follow
 * parca-load: per round R ProfileTypes, T·R LabelNames (and Series), L·T·R
 * LabelValues, and T·R·S of each select method.
 */
#include <string.h>

#include "load_matrix.h"

static const char *const method_names[LD_METHOD_COUNT] = {
    [LD_PROFILE_TYPES] = "ProfileTypes",
    [LD_LABEL_NAMES] = "LabelNames",
    [LD_LABEL_VALUES] = "LabelValues",
    [LD_SERIES] = "Series",
    [LD_SELECT_SERIES] = "SelectSeries",
    [LD_SELECT_MERGE_STACKTRACES] = "SelectMergeStacktraces",
    [LD_SELECT_MERGE_PROFILE] = "SelectMergeProfile",
    [LD_PUSH] = "Push",
};

const char *ld_method_name(ld_method_t m)
{
    return (unsigned)m < LD_METHOD_COUNT ? method_names[m] : "unknown";
}

int ld_method_from_name(const char *s)
{
    for (int i = 0; i < LD_METHOD_COUNT; i++)
        if (strcmp(s, method_names[i]) == 0)
            return i;
    return -1;
}

/* Calls of one method per range. */
static size_t calls_per_range(ld_method_t m, const ld_matrix_dims_t *d)
{
    switch (m) {
    case LD_PROFILE_TYPES:
        return 1;
    case LD_LABEL_NAMES:
    case LD_SERIES:
        return d->types;
    case LD_LABEL_VALUES:
        return d->types * d->labels;
    case LD_SELECT_SERIES:
    case LD_SELECT_MERGE_STACKTRACES:
    case LD_SELECT_MERGE_PROFILE:
        return d->types * d->selectors;
    default:
        return 0;
    }
}

size_t ld_matrix_size(const ld_matrix_dims_t *d)
{
    size_t n = 0;
    for (int m = 0; m < LD_PUSH; m++)
        if (d->methods & (1u << m))
            n += d->ranges * calls_per_range((ld_method_t)m, d);
    return n;
}

/* The calls of method m over range r, appended at out; returns how many. */
static size_t build_range(ld_method_t m, uint32_t r, const ld_matrix_dims_t *d, ld_call_t *out)
{
    size_t n = 0;
    if (m == LD_PROFILE_TYPES) {
        out[n++] = (ld_call_t){m, r, LD_NONE, LD_NONE, LD_NONE};
        return n;
    }
    for (uint32_t t = 0; t < d->types; t++) {
        if (m == LD_LABEL_NAMES || m == LD_SERIES) {
            out[n++] = (ld_call_t){m, r, t, LD_NONE, LD_NONE};
        } else if (m == LD_LABEL_VALUES) {
            for (uint32_t l = 0; l < d->labels; l++)
                out[n++] = (ld_call_t){m, r, t, LD_NONE, l};
        } else {
            for (uint32_t s = 0; s < d->selectors; s++)
                out[n++] = (ld_call_t){m, r, t, s, LD_NONE};
        }
    }
    return n;
}

void ld_matrix_build(const ld_matrix_dims_t *d, ld_call_t *out)
{
    size_t n = 0;
    for (int m = 0; m < LD_PUSH; m++) {
        if (!(d->methods & (1u << m)))
            continue;
        for (uint32_t r = 0; r < d->ranges; r++)
            n += build_range((ld_method_t)m, r, d, out + n);
    }
}

double ld_step_seconds(int64_t range_ms)
{
    double step = (double)range_ms / 7680.0 / 1000.0;
    return step < 0.001 ? 0.001 : step;
}
