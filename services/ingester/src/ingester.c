/*
 * ingester.c — the receiver side's lifecycle: registers /ingest,
 * /pyroscope/ingest and /push.v1.PusherService/Push on the HTTP server, and
 * owns the shared pieces the handlers use (options, metrics, time, the
 * ingestion window). The handlers themselves are in ingest_http.c and push.c;
 * publishing is in publish.c. See docs/internals/ingest.md.
 */
#include <time.h>

#include "lc/clock.h"
#include "receive_int.h"

#define PUSH_PATH "/push.v1.PusherService/Push"
#define ING_MAX_TIME_NS ((int64_t)1 << 62) /* the store's limit, about year 2116 */
/* A series counts as active for --ingest.max-series-per-tenant while it had a
 * profile this recently: about the life of a head block in Pyroscope. */
#define SERIES_ACTIVE_WINDOW_NS (3600LL * 1000000000LL)

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

static void ing_register_metrics(ing_t *ing)
{
    static const char profiles_help[] = "Profiles accepted (durable), by receiver route";
    if (!ing->metrics)
        return;
    ing->m_profiles[ING_ROUTE_INGEST] = lc_metrics_counter(
        ing->metrics, "ember_ingest_profiles_total", profiles_help, "route=\"ingest\"");
    ing->m_profiles[ING_ROUTE_PUSH] = lc_metrics_counter(
        ing->metrics, "ember_ingest_profiles_total", profiles_help, "route=\"push\"");
    ing->m_profiles[ING_ROUTE_OTLP] = ing->m_profiles[ING_ROUTE_OTLP_HTTP] = lc_metrics_counter(
        ing->metrics, "ember_ingest_profiles_total", profiles_help, "route=\"otlp\"");
    ing->m_bytes = lc_metrics_counter(ing->metrics, "ember_ingest_bytes_total",
                                      "Request body bytes received by the ingest routes", "");
    ing->m_samples = lc_metrics_counter(ing->metrics, "ember_ingest_samples_total",
                                        "Samples in accepted profiles", "");
    static const char entry_help[] =
        "Bytes of the messages published (form=message) and of their stream entries "
        "(form=entry: zstd, or bare with the client's gzip pprof; only with --redis.url)";
    ing->m_entry_bytes[0] = lc_metrics_counter(ing->metrics, "ember_stream_entry_bytes_total",
                                               entry_help, "form=\"message\"");
    ing->m_entry_bytes[1] = lc_metrics_counter(ing->metrics, "ember_stream_entry_bytes_total",
                                               entry_help, "form=\"entry\"");
}

static int ing_routes(ing_t *ing, lc_httpd_t *srv)
{
    /* A gzip body inflates to at most one profile's cap (and the body cap):
     * the server's own 256 MiB default would let a 1 MB bomb cost 256 MiB. */
    const size_t cap = ing->opts.limits.max_decompressed_bytes;
    const lc_http_route_t routes[] = {
        {"/ingest", "POST", ing_ingest_work, ing_publish_after, true, "/ingest", ing, cap,
         LC_HTTP_SCOPE_WRITE, NULL},
        {"/pyroscope/ingest", "POST", ing_ingest_work, ing_publish_after, true, "/ingest", ing, cap,
         LC_HTTP_SCOPE_WRITE, NULL},
        /* methods NULL: the Connect layer answers 405 with its own headers. */
        {PUSH_PATH, NULL, ing_push_work, ing_publish_after, true, PUSH_PATH, ing, cap,
         LC_HTTP_SCOPE_WRITE, lc_connect_error},
        /* Parca's writers, at the root and under /api as Parca serves them */
        {ING_PARCA_STORE "WriteRaw", NULL, ing_parca_write_raw_work, ing_publish_after, true,
         ING_PARCA_STORE "WriteRaw", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {"/api" ING_PARCA_STORE "WriteRaw", NULL, ing_parca_write_raw_work, ing_publish_after, true,
         ING_PARCA_STORE "WriteRaw", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        /* OTLP profiles: gRPC/gRPC-Web/Connect, and OTLP/HTTP */
        {ING_OTLP_EXPORT, NULL, ing_otlp_export_work, ing_publish_after, true, ING_OTLP_EXPORT, ing,
         cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {ING_OTLP_HTTP, "POST", ing_otlp_http_work, ing_publish_after, true, ING_OTLP_HTTP, ing,
         cap, LC_HTTP_SCOPE_WRITE, NULL},
        {ING_PARCA_STORE "*", NULL, ing_parca_write_unimplemented, NULL, false, ING_PARCA_STORE "*",
         ing, 0, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {"/api" ING_PARCA_STORE "*", NULL, ing_parca_write_unimplemented, NULL, false,
         ING_PARCA_STORE "*", ing, 0, LC_HTTP_SCOPE_WRITE, lc_connect_error},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(routes); i++) {
        int rc = lc_httpd_route(srv, &routes[i]);
        if (rc)
            return rc;
    }
    return 0;
}

int ing_new(uv_loop_t *loop, const ing_opts_t *opts, lc_httpd_t *srv, lc_transport_t *tr,
            lc_metrics_t *metrics, ing_t **out)
{
    ing_t *ing = lc_xcalloc(1, sizeof(*ing));
    ing->loop = loop;
    ing->opts = *opts;
    ing->rate = lc_ratelimit_new(&opts->rate);
    ing->series = lc_serieslimit_new(opts->max_series, SERIES_ACTIVE_WINDOW_NS);
    if (ing->opts.partitions == 0)
        ing->opts.partitions = 1;
    ing->tr = tr;
    ing->metrics = metrics;
    ing_register_metrics(ing);
    int rc = ing_routes(ing, srv);
    if (rc) {
        lc_free(ing);
        return rc;
    }
    *out = ing;
    return 0;
}

void ing_free(ing_t *ing)
{
    if (ing) {
        lc_ratelimit_free(ing->rate);
        lc_serieslimit_free(ing->series);
    }
    lc_free(ing);
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
