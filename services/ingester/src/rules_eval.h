/*
 * rules_eval.h — recording rules evaluated on ingest (issue 29;
 * docs/internals/recording-rules.md).
 *
 * The writer hands every series it writes (labels, time, the values of the
 * samples of one sample type) to ing_rules_observe. For each rule of the
 * tenant whose matchers all match the series labels, one point is made: the
 * total of the values, or of the values of samples whose stack holds a frame
 * of the rule's function name, labelled __name__=<metric_name>,
 * profiles_rule_id=<id>, the external labels and the group_by labels the
 * series has. Points are summed per series and per step (time rounded up to a
 * multiple of step_ms, the point's time, as SelectSeries does) and a step's sum is sent by remote
 * write once no point came for it for flush_idle_ms.
 *
 * Exactly once per profile: the writer's points wait in a pending list until
 * its transaction commits (ing_rules_commit) and are dropped when it aborts
 * (ing_rules_discard), so a redone batch does not count twice, and replayed
 * messages (already applied) are never observed.
 *
 * Rules are read from the settings store (LC_SETTINGS_RULE_PREFIX names),
 * per tenant, on the tenant's first profile and again at most every
 * refresh_ms: a rule applies to profiles written from refresh_ms after it
 * was stored.
 *
 * Bounds: at most max_series open (series × step) sums; a point for a new
 * one past it is dropped and counted (ember_recording_rule_points_total
 * {outcome="dropped_max_series"}); at most LC_RULES_MAX_TENANTS tenants are
 * evaluated. Threading: observe/commit/discard on the writer thread only; a
 * worker thread of this module flushes; free from the creating thread
 * (flushes everything open, then stops).
 */
#ifndef EMBER_ING_RULES_EVAL_H
#define EMBER_ING_RULES_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "lc/labels.h"
#include "lc/metrics.h"
#include "lc/pprof.h"
#include "lc/remote_write.h"
#include "lc/settings_store.h"

#define ING_RULES_DEFAULT_STEP_MS 15000
#define ING_RULES_DEFAULT_REFRESH_MS 5000
#define ING_RULES_DEFAULT_MAX_SERIES 10000
#define LC_RULES_MAX_TENANTS 1000

typedef struct ing_rules_opts_s {
    lc_settings_store_t *settings; /* borrowed */
    lc_remote_write_t *out;        /* borrowed */
    lc_metrics_t *metrics;
    int64_t step_ms;       /* 0: ING_RULES_DEFAULT_STEP_MS */
    int64_t flush_idle_ms; /* 0: step_ms */
    int64_t refresh_ms;    /* 0: ING_RULES_DEFAULT_REFRESH_MS */
    size_t max_series;     /* 0: ING_RULES_DEFAULT_MAX_SERIES */
} ing_rules_opts_t;

typedef struct ing_rules_s ing_rules_t;

/* One written series, as the writer has it. values NULL: the samples' own
 * values of sample type type_idx. */
typedef struct ing_rules_series_s {
    const char *tenant;
    const lc_labels_t *labels; /* sorted, __profile_type__ among them */
    int64_t time_ns;
    const lc_pprof_t *profile;
    const lc_pprof_index_t *index;
    size_t type_idx;
    const uint32_t *samples; /* indices into profile->sample */
    size_t n_samples;
    const int64_t *values; /* parallel to samples, or NULL */
} ing_rules_series_t;

int ing_rules_new(const ing_rules_opts_t *opts, ing_rules_t **out) LC_MUST_CHECK;
void ing_rules_free(ing_rules_t *r);

void ing_rules_observe(ing_rules_t *r, const ing_rules_series_t *s);
void ing_rules_commit(ing_rules_t *r);
void ing_rules_discard(ing_rules_t *r);

#endif
