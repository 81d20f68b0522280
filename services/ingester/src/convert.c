/*
 * convert.c — the sample type of an /ingest upload handed to lc/folded.h's
 * converter: the app name's suffix decides it (ing_app_type), so the
 * converter itself stays free of ingest's naming rules.
 */
#include "receive_int.h"

static lc_cv_type_t cv_type(const ing_app_type_t *t)
{
    return (lc_cv_type_t){.metric = t->metric,
                          .sample_type = t->sample_type,
                          .sample_unit = t->sample_unit,
                          .rate_scaled = t->rate_scaled};
}

lc_cv_t *ing_cv_new(const ing_app_type_t *t, uint64_t sample_rate, int64_t time_ns,
                    const lc_pprof_limits_t *lim, lc_status_t *st)
{
    lc_cv_type_t ct = cv_type(t);
    return lc_cv_new(&ct, sample_rate, time_ns, lim, st);
}

int ing_text_to_pprof(const uint8_t *body, size_t len, bool lines_format, const ing_app_type_t *t,
                      uint32_t sample_rate, int64_t time_ns, const lc_pprof_limits_t *lim,
                      lc_arena_t *arena, lc_buf_t *out, lc_status_t *st)
{
    lc_cv_type_t ct = cv_type(t);
    return lc_text_to_pprof(body, len, lines_format, &ct, sample_rate, time_ns, lim, arena, out,
                            st);
}
