/*
 * admit.c — what every receiver asks before it accepts a profile: the
 * ingestion window, the label limits, the tenant's rate and series limits,
 * and the rejection counters. Below the handlers (ingest_http.c, push.c) and
 * the publisher (publish.c); ingester.c owns the state it reads (ing_t).
 * Threading: request threads; the limiters and metrics lock themselves.
 */
#include <stdio.h>

#include "lc/clock.h"
#include "receive_int.h"

#define ING_MAX_TIME_NS ((int64_t)1 << 62) /* the store's limit, about year 2116 */

void ing_count_rejected(ing_t *ing, const char *reason)
{
    if (!ing->metrics)
        return;
    char labels[96];
    snprintf(labels, sizeof(labels), "reason=\"%s\"", reason);
    lc_metric_add(lc_metrics_counter(ing->metrics, "ember_ingest_rejected_total",
                                     "Ingest requests or profiles rejected, by reason", labels),
                  1);
}

ing_label_limits_t ing_label_limits(const ing_t *ing)
{
    return (ing_label_limits_t){ing->opts.max_label_names, ing->opts.max_label_name_bytes,
                                ing->opts.max_label_value_bytes};
}

int ing_check_window(const ing_t *ing, int64_t time_ns, int64_t now_ns, lc_status_t *st)
{
    int64_t older = ing->opts.reject_older_than_ns, newer = ing->opts.reject_newer_than_ns;
    if (time_ns < 0 || time_ns >= ING_MAX_TIME_NS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile time %lld is out of range",
                             (long long)time_ns);
    if (older > 0 && time_ns < now_ns - older)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile time %lld is older than the ingestion window (%lld s)",
                             (long long)time_ns, (long long)(older / 1000000000LL));
    if (newer > 0 && time_ns > now_ns + newer)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile time %lld is too far in the future (limit %lld s ahead)",
                             (long long)time_ns, (long long)(newer / 1000000000LL));
    return 0;
}

/* Per-tenant counters (tenant ids are [a-zA-Z0-9!-_.*'()]: safe in a label). */
static void ing_tenant_count(ing_t *ing, const char *name, const char *help, const char *tenant,
                             double v)
{
    if (!ing->metrics)
        return;
    char labels[200];
    snprintf(labels, sizeof(labels), "tenant=\"%s\"", tenant);
    lc_metric_add(lc_metrics_counter(ing->metrics, name, help, labels), v);
}

int ing_series_check(ing_t *ing, const char *tenant, const uint64_t *series, size_t n,
                     lc_status_t *st)
{
    size_t active;
    if (!ing->series || n == 0)
        return 0;
    bool ok = lc_serieslimit_admit(ing->series, tenant, series, n, lc_realtime_ns(), &active);
    if (ing->metrics) {
        char labels[200];
        snprintf(labels, sizeof(labels), "tenant=\"%s\"", tenant);
        lc_metric_set(lc_metrics_gauge(ing->metrics, "ember_tenant_active_series",
                                       "Series with a profile in the last hour, by tenant", labels),
                      (double)active);
    }
    if (ok)
        return 0;
    ing_tenant_count(ing, "ember_tenant_series_limited_total",
                     "Ingest requests refused by the tenant's series limit, by tenant", tenant, 1);
    ing_count_rejected(ing, "series_limit");
    return lc_status_set_http(st, 429, LC_CODE_RESOURCE_EXHAUSTED,
                              "tenant %.150s would have more than %lld active series "
                              "(--ingest.max-series-per-tenant); nothing was stored",
                              tenant, (long long)ing->opts.max_series);
}

int ing_rate_check(ing_t *ing, lc_http_req_t *req, const char *tenant, double profiles,
                   lc_status_t *st)
{
    int64_t wait = ing->rate ? lc_ratelimit_take(ing->rate, tenant, (double)req->body_len, profiles,
                                                 lc_realtime_ns())
                             : 0;
    if (wait == 0) {
        ing_tenant_count(ing, "ember_tenant_ingest_bytes_total",
                         "Request body bytes admitted past the rate limit, by tenant", tenant,
                         (double)req->body_len);
        ing_tenant_count(ing, "ember_tenant_ingest_profiles_total",
                         "Profiles admitted past the rate limit, by tenant", tenant, profiles);
        return 0;
    }
    ing_tenant_count(ing, "ember_tenant_rate_limited_total",
                     "Ingest requests refused by the tenant's rate limit, by tenant", tenant, 1);
    char secs[24];
    snprintf(secs, sizeof(secs), "%lld", (long long)wait);
    lc_http_set_header(req, "Retry-After", secs);
    return lc_status_set_http(st, 429, LC_CODE_RESOURCE_EXHAUSTED,
                              "tenant %.150s is over its ingestion rate limit; retry in %llds",
                              tenant, (long long)wait);
}
