/*
 * lc/ratelimit.h — per-tenant limits in the spirit of Pyroscope's overrides:
 * ingestion rates, queries in flight and active series.
 *
 * Rates, as Pyroscope's
 * ingestion_rate_mb / ingestion_burst_size_mb: two
 * token buckets per tenant, bytes and profiles, each refilled at its rate
 * and holding at most its burst. A request takes from both or from neither.
 *
 * Ownership: lc_ratelimit_new returns a limiter the caller frees. Threading:
 * any thread; one mutex guards the tenant table (a take is a hash lookup and
 * a few multiplications). Tenants are never forgotten: their number is
 * bounded by the tenants that ever wrote, as in Pyroscope's limiter.
 */
#ifndef LC_RATELIMIT_H
#define LC_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"

typedef struct lc_ratelimit_s lc_ratelimit_t;

typedef struct lc_ratelimit_opts_s {
    double bytes_per_s;    /* 0 = no byte limit */
    double bytes_burst;    /* bucket size; 0 = one second of rate */
    double profiles_per_s; /* 0 = no profile limit */
    double profiles_burst; /* 0 = one second of rate */
} lc_ratelimit_opts_t;

/* NULL when both rates are 0 (no limit: callers skip the check). */
lc_ratelimit_t *lc_ratelimit_new(const lc_ratelimit_opts_t *opts);
void lc_ratelimit_free(lc_ratelimit_t *rl); /* NULL-safe */
/* Takes bytes and profiles from the tenant's buckets at now_ns. Returns 0
 * when allowed, else the whole seconds (>= 1) until it would be, for
 * Retry-After; then nothing is taken. A request larger than a burst is
 * refused with the time a full bucket needs (it can never pass). */
int64_t lc_ratelimit_take(lc_ratelimit_t *rl, const char *tenant, double bytes, double profiles,
                          int64_t now_ns);

/* ---- concurrent queries per tenant (same table, no rates) ---- */
typedef struct lc_ratelimit_s lc_inflight_t;

/* NULL when max_per_tenant is 0 (no limit). */
lc_inflight_t *lc_inflight_new(int64_t max_per_tenant);
void lc_inflight_free(lc_inflight_t *f); /* NULL-safe */
/* Takes one slot of every tenant, or none: false when one of them is full. */
bool lc_inflight_acquire(lc_inflight_t *f, const char *const *tenants, size_t n) LC_MUST_CHECK;
void lc_inflight_release(lc_inflight_t *f, const char *const *tenants, size_t n);

/* ---- active series per tenant (same table) ----
 * As Pyroscope's max_*_series_per_tenant: a series (a 64-bit hash of its
 * labels) is active while it received a profile within the window; a request
 * whose new series would take the tenant past its maximum is refused whole.
 * Memory: at most max_per_tenant series per tenant (16 bytes each, table at
 * most half full). */
typedef struct lc_ratelimit_s lc_serieslimit_t;

/* NULL when max_per_tenant is 0 (no limit). window_ns > 0. */
lc_serieslimit_t *lc_serieslimit_new(int64_t max_per_tenant, int64_t window_ns);
void lc_serieslimit_free(lc_serieslimit_t *s); /* NULL-safe */
/* Records series[0..n) (duplicates allowed) as seen at now_ns if the tenant's
 * active series, with the new ones, stay within the maximum; else records
 * nothing and returns false. *active is the tenant's active series after. */
bool lc_serieslimit_admit(lc_serieslimit_t *s, const char *tenant, const uint64_t *series, size_t n,
                          int64_t now_ns, size_t *active) LC_MUST_CHECK;

#endif
