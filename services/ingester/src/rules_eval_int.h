/*
 * rules_eval_int.h — what rules_eval.c (rules, matching) and rules_sums.c
 * (pending points, sums per series and step, the flush worker) share.
 * Not for callers: see rules_eval.h.
 */
#ifndef EMBER_ING_RULES_EVAL_INT_H
#define EMBER_ING_RULES_EVAL_INT_H

#include <stdbool.h>

#include <uv.h>

#include "rules_eval.h"

typedef struct rule_s {
    char *id;
    char *metric;
    char *function; /* NULL: the whole total */
    lc_selector_t *selectors;
    size_t n_selectors;
    char **group_by;
    size_t n_group_by;
    lc_rw_label_t *external; /* owned strings (cast from const) */
    size_t n_external;
} rule_t;

typedef struct tenant_rules_s {
    char *tenant;
    int64_t loaded_ms;
    rule_t *rules;
    size_t n_rules;
} tenant_rules_t;

/* One sum: a series (its labels) at one step. */
typedef struct point_s {
    struct point_s *next;
    char *key; /* rule id, group values and step: the series × step identity */
    lc_rw_label_t *labels;
    size_t n_labels;
    int64_t bucket_ms;
    double value;
    int64_t last_ms; /* wall time of the last point added */
} point_t;

#define RULES_TABLE_HEADS 4096

struct ing_rules_s {
    lc_settings_store_t *settings;
    lc_remote_write_t *out;
    int64_t step_ms, flush_idle_ms, refresh_ms;
    size_t max_series;
    /* writer thread only */
    tenant_rules_t *tenants;
    size_t n_tenants;
    point_t *pending; /* made by the current transaction */
    /* under mu: the sums and the worker's stop flag */
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_thread_t worker;
    bool stopping;
    point_t *heads[RULES_TABLE_HEADS];
    size_t n_points;
    lc_metric_t *m_points, *m_dropped, *m_no_tenant, *m_flushed, *m_open;
};

void ing_rules_pending_add(ing_rules_t *r, const rule_t *rule, const lc_labels_t *ls,
                           int64_t bucket_ms, double value);
void ing_rules_tenants_free(ing_rules_t *r);
/* The flush thread (rules_sums.c): sends steps idle for flush_idle_ms, and all at a stop. */
void ing_rules_flush_main(void *arg);

#endif
