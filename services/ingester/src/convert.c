/*
 * convert.c — folded/lines uploads become a single-sample-type pprof
 * (pyroscope-api.md §2.10) through lc_pprof_builder: one mapping, one
 * function and one location per distinct frame name (the builder
 * de-duplicates), one sample per stack. The profile type comes from the app
 * name's suffix; for process_cpu and wall a non-zero sampleRate turns counts
 * into nanoseconds: period = 1e9 / sampleRate, every value x period, sample
 * type cpu:nanoseconds (wall:nanoseconds) and period type cpu:nanoseconds.
 */
#include <string.h>

#include "ingester_int.h"

#define NS_PER_S 1000000000LL

typedef struct cv_state_s {
    lc_pprof_builder_t *b;
    uint64_t mapping;
    int64_t scale;  /* 1, or the period when rate-scaled */
    uint64_t *locs; /* scratch: one stack, then reversed to leaf-first */
    size_t cap_locs;
    size_t max_frames;
    lc_status_t *st;
} cv_state_t;

static uint64_t cv_location(cv_state_t *s, const char *name, size_t len)
{
    char *z = lc_xstrndup(name, len);
    lc_pprof_line_t line = {lc_pprof_builder_function(s->b, z, z, "", 0), 0};
    lc_free(z);
    return lc_pprof_builder_location(s->b, s->mapping, 0, &line, 1);
}

/* ing_stack_cb: frames are root-first and ';'-separated. */
static int cv_stack(const char *stack, size_t len, int64_t value, void *data)
{
    cv_state_t *s = data;
    int64_t scaled;
    if (__builtin_mul_overflow(value, s->scale, &scaled))
        return lc_status_set(s->st, LC_CODE_INVALID_ARGUMENT,
                             "value %lld overflows when scaled by the period %lld",
                             (long long)value, (long long)s->scale);
    size_t n = 0;
    for (const char *f = stack, *end = stack + len; n < s->max_frames;) {
        const char *semi = memchr(f, ';', (size_t)(end - f));
        const char *stop = semi ? semi : end;
        s->locs = lc_xgrow(s->locs, &s->cap_locs, n + 1, sizeof(*s->locs));
        s->locs[n++] = cv_location(s, f, (size_t)(stop - f));
        if (!semi)
            break;
        f = semi + 1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        uint64_t t = s->locs[i];
        s->locs[i] = s->locs[n - 1 - i];
        s->locs[n - 1 - i] = t;
    }
    lc_pprof_builder_sample(s->b, s->locs, n, &scaled, NULL, 0);
    return 0;
}

/* Sample type, unit and period of the converted profile. */
static void cv_types(cv_state_t *s, const ing_app_type_t *t, uint32_t sample_rate)
{
    if (t->rate_scaled && sample_rate != 0) {
        s->scale = NS_PER_S / sample_rate;
        bool wall = strcmp(t->metric, "wall") == 0;
        lc_pprof_builder_sample_type(s->b, wall ? "wall" : "cpu", "nanoseconds");
        lc_pprof_builder_period(s->b, "cpu", "nanoseconds", s->scale);
        return;
    }
    s->scale = 1;
    lc_pprof_builder_sample_type(s->b, t->sample_type, t->sample_unit);
}

int ing_text_to_pprof(const uint8_t *body, size_t len, bool lines_format, const ing_app_type_t *t,
                      uint32_t sample_rate, int64_t time_ns, const lc_pprof_limits_t *lim,
                      lc_arena_t *arena, lc_buf_t *out, lc_status_t *st)
{
    cv_state_t s = {.b = lc_pprof_builder_new(), .st = st, .max_frames = lim->max_stack_depth};
    if (s.max_frames == 0)
        s.max_frames = SIZE_MAX;
    cv_types(&s, t, sample_rate);
    lc_pprof_builder_times(s.b, time_ns, 0);
    s.mapping = lc_pprof_builder_mapping(s.b, 0, 0, 0, "", "", true);
    int rc = ing_folded_parse(body, len, lines_format, arena, cv_stack, &s, st);
    if (rc == 0 && lc_pprof_builder_encode(s.b, false, out) != 0)
        rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile too large");
    lc_free(s.locs);
    lc_pprof_builder_free(s.b);
    return rc < 0 ? -1 : rc;
}
