/*
 * lc/ratelimit.h — per-tenant ingestion rate limits in the spirit of
 * Pyroscope's overrides (ingestion_rate_mb / ingestion_burst_size_mb): two
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

#endif
