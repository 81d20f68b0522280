/*
 * lc/metrics.h — a small Prometheus metrics registry (text exposition 0.0.4).
 *
 * Counters, gauges and histograms, each with a fixed label string chosen at
 * registration ("route=\"/ingest\",code=\"200\""). Registering the same name
 * and labels twice returns the same metric, so callers may look metrics up
 * lazily. Updates are lock-free atomics and safe from any thread; registration
 * takes a mutex.
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

void lc_metric_add(lc_metric_t *c, double v);       /* counter/gauge */
void lc_metric_set(lc_metric_t *g, double v);       /* gauge */
void lc_metric_observe(lc_metric_t *h, double v);   /* histogram */
double lc_metric_value(const lc_metric_t *c);       /* counter/gauge (tests) */

/* Appends the text exposition of every metric, grouped by name. */
int lc_metrics_render(lc_metrics_t *m, lc_buf_t *out) LC_MUST_CHECK;

#endif
