/*
 * ingester.c — the receiver side's lifecycle: registers /ingest,
 * /pyroscope/ingest and /push.v1.PusherService/Push on the HTTP server, and
 * owns the shared state the handlers use (options, metrics, limiters). The
 * checks they make before accepting a profile are in admit.c, the handlers in
 * ingest_http.c and push.c, publishing in publish.c, the error answers in
 * otlp_error.c. See docs/internals/ingest.md.
 */
#include <time.h>

#include "receive_int.h"

#define PUSH_PATH "/push.v1.PusherService/Push"
/* A series counts as active for --ingest.max-series-per-tenant while it had a
 * profile this recently: about the life of a head block in Pyroscope. */
#define SERIES_ACTIVE_WINDOW_NS (3600LL * 1000000000LL)

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
        {ING_PARCA_STORE "WriteArrow", NULL, ing_parca_write_arrow_work, ing_publish_after, true,
         ING_PARCA_STORE "WriteArrow", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {"/api" ING_PARCA_STORE "WriteArrow", NULL, ing_parca_write_arrow_work, ing_publish_after,
         true, ING_PARCA_STORE "WriteArrow", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        /* OTLP profiles: gRPC/gRPC-Web/Connect, and OTLP/HTTP */
        {ING_OTLP_EXPORT, NULL, ing_otlp_export_work, ing_publish_after, true, ING_OTLP_EXPORT, ing,
         cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {ING_OTLP_HTTP, "POST", ing_otlp_http_work, ing_publish_after, true, ING_OTLP_HTTP, ing,
         cap, LC_HTTP_SCOPE_WRITE, NULL},
        {ING_PARCA_STORE "Write", NULL, ing_parca_write_v1_work, ing_publish_after, true,
         ING_PARCA_STORE "Write", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {"/api" ING_PARCA_STORE "Write", NULL, ing_parca_write_v1_work, ing_publish_after, true,
         ING_PARCA_STORE "Write", ing, cap, LC_HTTP_SCOPE_WRITE, lc_connect_error},
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
    /* Parca's Write asks the agent for stack traces mid-call (parca_write_v1.c) */
    int rc = lc_httpd_route_interim(srv, ING_PARCA_STORE "Write", ing_parca_write_interim);
    return rc ? rc
              : lc_httpd_route_interim(srv, "/api" ING_PARCA_STORE "Write",
                                       ing_parca_write_interim);
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
