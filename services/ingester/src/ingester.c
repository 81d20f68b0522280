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
    ing->m_bytes = lc_metrics_counter(ing->metrics, "ember_ingest_bytes_total",
                                      "Request body bytes received by the ingest routes", "");
    ing->m_samples = lc_metrics_counter(ing->metrics, "ember_ingest_samples_total",
                                        "Samples in accepted profiles", "");
}

static int ing_routes(ing_t *ing, lc_httpd_t *srv)
{
    const lc_http_route_t routes[] = {
        {"/ingest", "POST", ing_ingest_work, ing_publish_after, true, "/ingest", ing},
        {"/pyroscope/ingest", "POST", ing_ingest_work, ing_publish_after, true, "/ingest", ing},
        /* methods NULL: the Connect layer answers 405 with its own headers. */
        {PUSH_PATH, NULL, ing_push_work, ing_publish_after, true, PUSH_PATH, ing},
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
    lc_free(ing);
}
