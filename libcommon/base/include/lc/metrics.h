/*
 * lc/metrics.h — a small Prometheus metrics registry (text exposition 0.0.4).
 *
 * Counters, gauges and histograms, each with a fixed label string chosen at
 * registration ("route=\"/ingest\",code=\"200\""). Registering the same name
 * and labels twice returns the same metric, so callers may look metrics up
 * lazily. Updates are lock-free atomics and safe from any thread; registration
 * takes a mutex.
 *
 * Ownership: every registration takes a reference on the metric it returns;
 * lc_metrics_release drops one, and the metric leaves the exposition (and is
 * freed) when the last goes. A holder releases only after its last update
 * through the pointer. Metrics never released live as long as the registry:
 * that suits fixed metrics; per-object ones (a scrape target's) are released
 * with their object so that churn does not grow /metrics without bound.
 */
#ifndef LC_METRICS_H
#define LC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"

typedef struct lc_metrics_s lc_metrics_t;
typedef struct lc_metric_s lc_metric_t;

lc_metrics_t *lc_metrics_new(void);
void lc_metrics_free(lc_metrics_t *m);

/* name: "ember_ingest_profiles_total"; labels: "" or `k="v",...` (copied). */
lc_metric_t *lc_metrics_counter(lc_metrics_t *m, const char *name, const char *help,
                                const char *labels);
lc_metric_t *lc_metrics_gauge(lc_metrics_t *m, const char *name, const char *help,
                              const char *labels);
/* Default buckets (seconds) when bounds is NULL: .001 .. 60. */
lc_metric_t *lc_metrics_histogram(lc_metrics_t *m, const char *name, const char *help,
                                  const char *labels, const double *bounds, size_t n_bounds);

void lc_metric_add(lc_metric_t *c, double v);     /* counter/gauge */
void lc_metric_set(lc_metric_t *g, double v);     /* gauge */
void lc_metric_observe(lc_metric_t *h, double v); /* histogram */
double lc_metric_value(const lc_metric_t *c);     /* counter/gauge (tests) */

/* Drops the reference one registration took (NULL is ignored). */
void lc_metrics_release(lc_metrics_t *m, lc_metric_t *x);

/* Appends the text exposition of every metric, grouped by name. */
int lc_metrics_render(lc_metrics_t *m, lc_buf_t *out) LC_MUST_CHECK;

#endif
