/*
 * folded_pprof.c — stacks (folded/lines text, tree, trie, speedscope)
 * become a single-sample-type pprof (pyroscope-api.md §2.10) through
 * lc_pprof_builder: one mapping, one function and one location per distinct
 * frame name (the builder de-duplicates), one sample per stack (the builder
 * sums repeats). The caller names the sample type (the ingester from the
 * app name's suffix, the ad-hoc view as samples:count); for
 * process_cpu and wall a non-zero sampleRate turns counts into nanoseconds:
 * period = 1e9 / sampleRate, every value x period, sample type cpu:nanoseconds
 * (wall:nanoseconds) and period type cpu:nanoseconds.
 *
 * One departure: a rate above 1e9 gives Pyroscope a period of 0, which zeroes
 * every value. Here such a rate multiplies by 1e9 / rate exactly (period 0 is
 * still written). Speedscope's nanoseconds unit reaches this case with its
 * default rate of 1e11 ticks per second (§2.9, docs/internals/ingest.md).
 */
#include <string.h>

#include "lc/folded.h"

#define NS_PER_S 1000000000LL

struct lc_cv_s {
    lc_pprof_builder_t *b;
    uint64_t mapping;
    int64_t mul, div; /* value x mul / div: 1/1, period/1, or 1e9/rate */
    uint64_t *locs;   /* scratch: one stack, leaf first */
    size_t cap_locs;
    uint64_t *split; /* scratch: one folded stack's locations, root first */
    size_t cap_split;
    char *name; /* scratch: one NUL-terminated frame name */
    size_t cap_name;
    size_t max_frames;
    lc_status_t *st;
};

/* Sample type, unit and period of the converted profile. */
static void cv_types(lc_cv_t *cv, const lc_cv_type_t *t, uint64_t sample_rate)
{
    cv->mul = cv->div = 1;
    if (!t->rate_scaled || sample_rate == 0) {
        lc_pprof_builder_sample_type(cv->b, t->sample_type, t->sample_unit);
        return;
    }
    int64_t period = 0;
    if (sample_rate > NS_PER_S) {
        cv->mul = NS_PER_S;
        cv->div = sample_rate > INT64_MAX ? INT64_MAX : (int64_t)sample_rate;
    } else {
        period = cv->mul = NS_PER_S / (int64_t)sample_rate;
    }
    bool wall = strcmp(t->metric, "wall") == 0;
    lc_pprof_builder_sample_type(cv->b, wall ? "wall" : "cpu", "nanoseconds");
    lc_pprof_builder_period(cv->b, "cpu", "nanoseconds", period);
}

lc_cv_t *lc_cv_new(const lc_cv_type_t *t, uint64_t sample_rate, int64_t time_ns,
                   const lc_pprof_limits_t *lim, lc_status_t *st)
{
    lc_cv_t *cv = lc_xcalloc(1, sizeof(*cv));
    cv->b = lc_pprof_builder_new();
    cv->st = st;
    cv->max_frames = lim->max_stack_depth ? lim->max_stack_depth : SIZE_MAX;
    cv_types(cv, t, sample_rate);
    lc_pprof_builder_times(cv->b, time_ns, 0);
    cv->mapping = lc_pprof_builder_mapping(cv->b, 0, 0, 0, "", "", true);
    return cv;
}

void lc_cv_free(lc_cv_t *cv)
{
    if (!cv)
        return;
    lc_free(cv->locs);
    lc_free(cv->split);
    lc_free(cv->name);
    lc_pprof_builder_free(cv->b);
    lc_free(cv);
}

uint64_t lc_cv_location(lc_cv_t *cv, const char *name, size_t len)
{
    cv->name = lc_xgrow(cv->name, &cv->cap_name, len + 1, 1);
    memcpy(cv->name, name, len);
    cv->name[len] = '\0';
    lc_pprof_line_t line = {lc_pprof_builder_function(cv->b, cv->name, cv->name, "", 0), 0};
    return lc_pprof_builder_location(cv->b, cv->mapping, 0, &line, 1);
}

static int cv_scale(lc_cv_t *cv, int64_t value, int64_t *out)
{
    if (cv->div != 1) { /* 1e9 / rate < 1: the product fits 128 bits, the quotient 64 */
        *out = (int64_t)((__int128)value * cv->mul / cv->div);
        return 0;
    }
    if (!__builtin_mul_overflow(value, cv->mul, out))
        return 0;
    return lc_status_set(cv->st, LC_CODE_INVALID_ARGUMENT,
                         "value %lld overflows when scaled by the period %lld", (long long)value,
                         (long long)cv->mul);
}

/* Stacks deeper than max_frames keep their root side, as lc_pprof_validate does. */
int lc_cv_sample(lc_cv_t *cv, const uint64_t *locs, size_t n, int64_t value)
{
    int64_t scaled;
    if (cv_scale(cv, value, &scaled) < 0)
        return -1;
    n = n < cv->max_frames ? n : cv->max_frames;
    cv->locs = lc_xgrow(cv->locs, &cv->cap_locs, n ? n : 1, sizeof(*cv->locs));
    for (size_t i = 0; i < n; i++)
        cv->locs[i] = locs[n - 1 - i];
    lc_pprof_builder_sample(cv->b, cv->locs, n, &scaled, NULL, 0);
    return 0;
}

/* lc_stack_cb: frames are root-first and ';'-separated. */
int lc_cv_stack(const char *stack, size_t len, int64_t value, void *data)
{
    lc_cv_t *cv = data;
    size_t n = 0;
    for (const char *f = stack, *end = stack + len; n < cv->max_frames;) {
        const char *semi = memchr(f, ';', (size_t)(end - f));
        const char *stop = semi ? semi : end;
        cv->split = lc_xgrow(cv->split, &cv->cap_split, n + 1, sizeof(*cv->split));
        cv->split[n++] = lc_cv_location(cv, f, (size_t)(stop - f));
        if (!semi)
            break;
        f = semi + 1;
    }
    return lc_cv_sample(cv, cv->split, n, value);
}

int lc_cv_encode(lc_cv_t *cv, lc_buf_t *out)
{
    if (lc_pprof_builder_sum_wrapped(cv->b))
        return lc_status_set(cv->st, LC_CODE_INVALID_ARGUMENT,
                             "the values of a repeated stack sum past int64");
    if (lc_pprof_builder_encode(cv->b, false, out) != 0)
        return lc_status_set(cv->st, LC_CODE_INVALID_ARGUMENT, "profile too large");
    return 0;
}

int lc_text_to_pprof(const uint8_t *body, size_t len, bool lines_format, const lc_cv_type_t *t,
                     uint32_t sample_rate, int64_t time_ns, const lc_pprof_limits_t *lim,
                     lc_arena_t *arena, lc_buf_t *out, lc_status_t *st)
{
    lc_cv_t *cv = lc_cv_new(t, sample_rate, time_ns, lim, st);
    int rc = lc_folded_parse(body, len, lines_format, arena, lc_cv_stack, cv, st);
    if (rc == 0)
        rc = lc_cv_encode(cv, out);
    lc_cv_free(cv);
    return rc < 0 ? -1 : rc;
}
