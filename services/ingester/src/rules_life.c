/*
 * rules_life.c — a recording-rule evaluator's life: created with its flush
 * thread (rules_sums.c) and freed with its open sums and the tenants' rules
 * (rules_eval.c). Apart from both so that neither calls the other back.
 * Threading: the writer's thread creates and frees it (rules_eval.h).
 */
#include <errno.h>

#include "lc/alloc.h"
#include "rules_eval_int.h"

static void rules_register_metrics(ing_rules_t *r, lc_metrics_t *m)
{
    const char *pts = "ember_recording_rule_points_total";
    const char *help = "Recording-rule points made on ingest, by what became of them.";
    r->m_points = lc_metrics_counter(m, pts, help, "outcome=\"summed\"");
    r->m_dropped = lc_metrics_counter(m, pts, help, "outcome=\"dropped_max_series\"");
    r->m_no_tenant = lc_metrics_counter(m, pts, help, "outcome=\"dropped_max_tenants\"");
    r->m_flushed = lc_metrics_counter(m, "ember_recording_rule_samples_total",
                                      "Sums per series and step handed to remote write.", "");
    r->m_open = lc_metrics_gauge(m, "ember_recording_rule_open_series",
                                 "Sums per series and step not yet sent.", "");
}

int ing_rules_new(const ing_rules_opts_t *opts, ing_rules_t **out)
{
    ing_rules_t *r = lc_xcalloc(1, sizeof(*r));
    r->settings = opts->settings;
    r->out = opts->out;
    r->step_ms = opts->step_ms > 0 ? opts->step_ms : ING_RULES_DEFAULT_STEP_MS;
    r->flush_idle_ms = opts->flush_idle_ms > 0 ? opts->flush_idle_ms : r->step_ms;
    r->refresh_ms = opts->refresh_ms > 0 ? opts->refresh_ms : ING_RULES_DEFAULT_REFRESH_MS;
    r->max_series = opts->max_series ? opts->max_series : ING_RULES_DEFAULT_MAX_SERIES;
    r->tenants = lc_xcalloc(LC_RULES_MAX_TENANTS, sizeof(*r->tenants));
    rules_register_metrics(r, opts->metrics);
    uv_mutex_init(&r->mu);
    uv_cond_init(&r->cond);
    if (uv_thread_create(&r->worker, ing_rules_flush_main, r) != 0) {
        uv_cond_destroy(&r->cond);
        uv_mutex_destroy(&r->mu);
        lc_free(r->tenants);
        lc_free(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void ing_rules_free(ing_rules_t *r)
{
    if (!r)
        return;
    uv_mutex_lock(&r->mu);
    r->stopping = true;
    uv_cond_signal(&r->cond);
    uv_mutex_unlock(&r->mu);
    uv_thread_join(&r->worker); /* its last round sent every open sum */
    ing_rules_discard(r);
    ing_rules_tenants_free(r);
    uv_cond_destroy(&r->cond);
    uv_mutex_destroy(&r->mu);
    lc_free(r);
}
