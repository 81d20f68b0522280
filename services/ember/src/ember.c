/*
 * ember.c — composes the all-in-one process from the role libraries:
 * httpd -> receivers (ingester) -> direct transport -> writer -> store, and
 * the querier reading the same store. Also serves /ready and /metrics, runs
 * retention on a timer, and drains gracefully on SIGTERM/SIGINT.
 */
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "agent.h"
#include "ember.h"
#include "ingest_cfg.h"
#include "ingester.h"
#include "lc/auth.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/store.h"
#include "lc/transport.h"
#include "querier.h"
#include "scraper.h"
#include "services_extra.h"

#define RETENTION_INTERVAL_MS (60 * 1000)
#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

#define CFG(name, type, field, def, help)                                                          \
    {name, type, offsetof(ember_cfg_t, field), def, 0, 0, help}
#define CFG_RANGE(name, type, field, def, min, max, help)                                          \
    {name, type, offsetof(ember_cfg_t, field), def, min, max, help}

const lc_cfg_entry_t ember_cfg_table[] = {
    ING_CFG_COMMON(CFG)
    CFG("querier.max-query-length", LC_CFG_DURATION, max_query_length_ns, "0",
        "reject queries over a longer time range (0 = no limit; Pyroscope uses 24h)"),
    CFG("querier.max-query-lookback", LC_CFG_DURATION, max_query_lookback_ns, "0",
        "clip queries to start no earlier than now minus this (0 = no limit)"),
    CFG("querier.max-concurrent-queries", LC_CFG_INT, max_concurrent_queries, "0",
        "store queries running at once per tenant; more get 429 (0 = no limit)"),
    CFG("scrape.config-file", LC_CFG_STRING, scrape_config_file, NULL,
        "parca.yaml-style scrape_configs to pull pprof from (reloaded on SIGHUP and change)"),
    CFG("agent", LC_CFG_BOOL, agent, "false",
        "also profile every process on this host with eBPF (needs root)"),
    CFG("agent.sample-rate", LC_CFG_INT, agent_sample_rate, "19",
        "agent CPU samples per second on each CPU (1..1000)"),
    CFG("agent.interval", LC_CFG_DURATION, agent_interval_ns, "10s",
        "agent profile interval: one profile per process per interval"),
    CFG("redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port: profiles travel through Redis streams ('' = in-process)"),
    ING_CFG_STREAMS(CFG, CFG_RANGE)
};
const size_t ember_cfg_table_len = LC_ARRAY_LEN(ember_cfg_table);

struct ember_s {
    uv_loop_t loop;
    const ember_cfg_t *cfg;
    lc_metrics_t *metrics;
    lc_store_t *store;
    ing_writer_t *writer;
    lc_transport_t *transport;
    lc_httpd_t *httpd;
    ing_t *ing;
    qry_t *qry;
    qry_extra_t *qry_extra; /* settings, version, feature flags */
    scr_t *scr;             /* --scrape.config-file: the scraper publishing into transport */
    agt_t *agent;           /* --agent: eBPF profiler publishing into transport */
    lc_stop_signals_t signals;
    uv_timer_t retention_timer;
    uv_work_t retention_work;
    bool retention_busy;
    bool stopping;
    lc_metric_t *backlog_bytes, *backlog_msgs, *blocks_dropped;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* ---------------------------------------------------------------- /ready, /metrics */

static lc_http_result_t ready_handler(lc_http_req_t *req, void *data)
{
    ember_t *e = data;
    lc_redis_transport_stats_t rs;
    if (e->stopping)
        lc_http_reply(req, 503, "text/plain", "shutting down", 13);
    else if (lc_transport_redis_stats(e->transport, &rs) == 0 && !(rs.up && rs.consumer_up))
        lc_http_reply(req, 503, "text/plain", "redis link down", 15);
    else
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    return LC_HTTP_DONE;
}

static lc_http_result_t metrics_handler(lc_http_req_t *req, void *data)
{
    ember_t *e = data;
    lc_transport_stats_t ts;
    lc_transport_stats(e->transport, &ts);
    lc_metric_set(e->backlog_bytes, (double)ts.backlog_bytes);
    lc_metric_set(e->backlog_msgs, (double)ts.backlog_msgs);
    lc_http_reply_metrics(req, e->metrics);
    return LC_HTTP_DONE;
}

static int register_ops_routes(ember_t *e)
{
    lc_http_route_t ready = {.path = "/ready", .methods = "GET", .work = ready_handler, .data = e};
    lc_http_route_t metrics = {
        .path = "/metrics", .methods = "GET", .work = metrics_handler, .data = e};
    int rc = lc_httpd_route(e->httpd, &ready);
    return rc ? rc : lc_httpd_route(e->httpd, &metrics);
}

/* ---------------------------------------------------------------- retention */

static void retention_work(uv_work_t *w)
{
    ember_t *e = LC_CONTAINER_OF(w, ember_t, retention_work);
    size_t dropped = 0;
    int rc = lc_store_retention(e->store, now_ns(), &dropped);
    if (rc)
        LC_LOG_ERROR("retention failed err=\"%s\"", lc_strerror(rc));
    else if (dropped)
        LC_LOG_INFO("retention dropped blocks count=%zu", dropped);
    lc_metric_add(e->blocks_dropped, (double)dropped);
}

static void retention_after(uv_work_t *w, int status)
{
    ember_t *e = LC_CONTAINER_OF(w, ember_t, retention_work);
    LC_UNUSED(status);
    e->retention_busy = false;
}

static void retention_tick(uv_timer_t *t)
{
    ember_t *e = LC_CONTAINER_OF(t, ember_t, retention_timer);
    if (e->retention_busy || e->stopping || e->cfg->retention_ns <= 0)
        return;
    e->retention_busy = true;
    if (uv_queue_work(&e->loop, &e->retention_work, retention_work, retention_after))
        e->retention_busy = false;
}

/* ---------------------------------------------------------------- shutdown */

static void on_transport_closed(void *data)
{
    ember_t *e = data;
    e->transport = NULL;
    LC_LOG_INFO("every accepted profile is on disk; stopped");
}

static void on_scraper_closed(void *data)
{
    ember_t *e = data;
    e->scr = NULL;
    lc_transport_close(e->transport, on_transport_closed, e);
}

/* The scraper stops after HTTP (it serves /targets) and before the transport
 * (its last publishes must still be applied). */
static void on_http_closed(void *data)
{
    ember_t *e = data;
    e->httpd = NULL;
    if (e->scr)
        scr_close(e->scr, on_scraper_closed, e);
    else
        lc_transport_close(e->transport, on_transport_closed, e);
}

/* The agent goes first: its last partial interval is published while the
 * transport still accepts. */
static void on_agent_closed(void *data)
{
    ember_t *e = data;
    e->agent = NULL;
    lc_httpd_close(e->httpd, on_http_closed, e);
}

static void on_stop(int signum, void *data)
{
    ember_t *e = data;
    e->stopping = true;
    LC_LOG_INFO("draining signal=%d", signum);
    uv_close((uv_handle_t *)&e->retention_timer, NULL);
    if (e->agent)
        agt_close(e->agent, true, on_agent_closed, e);
    else
        lc_httpd_close(e->httpd, on_http_closed, e);
}

/* ---------------------------------------------------------------- assembly */

static int open_store(ember_t *e)
{
    lc_store_opts_t so = {
        .dir = e->cfg->data_dir,
        .block_duration_ns = e->cfg->block_duration_ns,
        .retention_ns = e->cfg->retention_ns,
        .map_size_bytes = (size_t)e->cfg->map_size_bytes,
    };
    int rc = lc_store_open(&so, &e->store);
    if (rc)
        LC_LOG_ERROR("cannot open the store dir=%s err=\"%s\"", e->cfg->data_dir,
                     lc_strerror(rc));
    return rc;
}

/* --redis.url: the same path as ember-ingester (receivers XADD, the writer
 * consumes the group), in one process; the consumer id must survive restarts
 * so this process finds its own pending entries again. */
static int start_redis_transport(ember_t *e)
{
    const ember_cfg_t *c = e->cfg;
    char id[ING_CONSUMER_ID_MAX];
    bool stable;
    ing_consumer_id(c->ingester_id, c->http_address, id, sizeof(id), &stable);
    if (!stable)
        LC_LOG_WARN("no --ingester.id and no fixed port: the consumer id is not stable id=%s", id);
    char group[32 + ING_ZONE_MAX];
    if (!ing_zone_group(c->zone, group, sizeof(group)))
        return LC_EINPUT; /* main() checked it */
    lc_redis_transport_opts_t to = {
        .url = c->redis_url,
        .partitions = (uint32_t)c->partitions,
        .group = group,
        .consumer_id = id,
        .max_backlog = (size_t)c->redis_max_backlog,
        .claim_idle_ms = (uint32_t)(c->claim_idle_ns / 1000000),
        /* forget what others claimed after it was applied here */
        .forget = ing_writer_forget,
        .publish_retry_ms = (uint32_t)(c->publish_retry_ns / 1000000),
        .metrics = e->metrics,
    };
    int rc = lc_transport_redis_new(&e->loop, &to, ing_writer_consume, e->writer, &e->transport);
    if (rc)
        LC_LOG_ERROR("cannot start the redis transport err=\"%s\"", lc_strerror(rc));
    else
        LC_LOG_INFO("redis transport consumer=%s group=%s", id, group);
    return rc;
}

static int start_pipeline(ember_t *e)
{
    int rc = ing_writer_new(e->store, e->metrics, &e->writer);
    if (rc)
        return rc;
    if (e->cfg->redis_url && *e->cfg->redis_url)
        return start_redis_transport(e);
    lc_direct_opts_t dopts = {.max_backlog_bytes = (size_t)e->cfg->max_backlog_bytes};
    return lc_transport_direct_new(&e->loop, &dopts, ing_writer_consume, e->writer,
                                   &e->transport);
}

static int start_scraper(ember_t *e)
{
    if (!e->cfg->scrape_config_file || !e->cfg->scrape_config_file[0])
        return 0;
    scr_opts_t so;
    scr_opts_default(&so);
    so.config_file = e->cfg->scrape_config_file;
    so.transport = e->transport;
    so.metrics = e->metrics;
    so.httpd = e->httpd;
    so.max_body_bytes = (size_t)e->cfg->max_profile_bytes;
    so.max_samples = (size_t)e->cfg->max_samples;
    lc_status_t st = {0};
    int rc = scr_new(&e->loop, &so, &e->scr, &st);
    if (rc)
        LC_LOG_ERROR("cannot start the scraper err=\"%s\"", st.msg);
    return rc ? LC_EINPUT : 0;
}

static int start_http(ember_t *e)
{
    lc_httpd_opts_t ho = {
        .address = e->cfg->http_address,
        .max_body_bytes = (size_t)e->cfg->max_body_bytes,
        .max_connections = (size_t)e->cfg->max_connections,
        .metrics = e->metrics,
    };
    int rc = lc_auth_init(&e->loop, e->cfg->auth_tokens_file);
    if (rc == 0)
        rc = lc_httpd_new(&e->loop, &ho, &e->httpd);
    if (rc)
        return rc;
    ing_opts_t io;
    ing_opts_default(&io);
    io.limits.max_decompressed_bytes = (size_t)e->cfg->max_profile_bytes;
    io.rate = (lc_ratelimit_opts_t){(double)e->cfg->rate_bytes, (double)e->cfg->rate_burst_bytes,
                                    (double)e->cfg->rate_profiles,
                                    (double)e->cfg->rate_burst_profiles};
    io.limits.max_samples = (size_t)e->cfg->max_samples;
    io.reject_older_than_ns = e->cfg->reject_older_than_ns;
    io.reject_newer_than_ns = e->cfg->reject_newer_than_ns;
    io.multitenancy = e->cfg->multitenancy;
    if (e->cfg->redis_url && *e->cfg->redis_url)
        io.partitions = (uint32_t)e->cfg->partitions;
    qry_opts_t qo;
    qry_opts_default(&qo);
    qo.multitenancy = e->cfg->multitenancy;
    qo.max_query_length_ms = e->cfg->max_query_length_ns / 1000000;
    qo.max_query_lookback_ms = e->cfg->max_query_lookback_ns / 1000000;
    qo.max_concurrent_per_tenant = e->cfg->max_concurrent_queries;
    rc = ing_new(&e->loop, &io, e->httpd, e->transport, e->metrics, &e->ing);
    if (!rc)
        rc = qry_new(&e->loop, &qo, e->httpd, e->store, e->metrics, &e->qry);
    qry_extra_opts_t xo = {.multitenancy = e->cfg->multitenancy, .data_dir = e->cfg->data_dir};
    if (!rc)
        rc = qry_extra_new(&e->loop, &xo, e->httpd, &e->qry_extra);
    if (!rc)
        rc = start_scraper(e);
    if (!rc)
        rc = register_ops_routes(e);
    if (!rc)
        rc = lc_httpd_listen(e->httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", e->cfg->http_address,
                     lc_strerror(rc));
    return rc;
}

static int start_timers_and_signals(ember_t *e)
{
    uv_timer_init(&e->loop, &e->retention_timer);
    int rc = lc_stop_signals_start(&e->loop, &e->signals, on_stop, e);
    if (!rc)
        rc = uv_timer_start(&e->retention_timer, retention_tick, 0, RETENTION_INTERVAL_MS);
    return rc;
}

static int start_agent(ember_t *e)
{
    if (!e->cfg->agent)
        return 0;
    agt_opts_t ao;
    agt_opts_default(&ao);
    ao.sample_rate_hz = (int)e->cfg->agent_sample_rate;
    ao.interval_ns = e->cfg->agent_interval_ns;
    return agt_new(&e->loop, &ao, e->transport, e->metrics, &e->agent);
}

static void register_metrics(ember_t *e)
{
    e->metrics = lc_metrics_new();
    e->backlog_bytes = lc_metrics_gauge(e->metrics, "ember_ingest_backlog_bytes",
                                        "Bytes of accepted profiles waiting for the writer", "");
    e->backlog_msgs = lc_metrics_gauge(e->metrics, "ember_ingest_backlog_profiles",
                                       "Accepted profiles waiting for the writer", "");
    e->blocks_dropped = lc_metrics_counter(e->metrics, "ember_retention_blocks_dropped_total",
                                           "Storage blocks removed by retention", "");
}

int ember_new(const ember_cfg_t *cfg, ember_t **out)
{
    ember_t *e = lc_xcalloc(1, sizeof(*e));
    e->cfg = cfg;
    *out = e;
    int rc = uv_loop_init(&e->loop);
    if (rc)
        return rc;
    register_metrics(e);
    rc = open_store(e);
    if (!rc)
        rc = start_pipeline(e);
    if (!rc)
        rc = start_http(e);
    if (!rc)
        rc = start_timers_and_signals(e);
    if (!rc)
        rc = start_agent(e);
    if (!rc)
        LC_LOG_INFO("ember is ready addr=%s port=%d data=%s", cfg->http_address,
                    lc_httpd_port(e->httpd), cfg->data_dir);
    return rc;
}

int ember_run(ember_t *e)
{
    return uv_run(&e->loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
}

/* Closes whatever a failed start-up left open, so the loop can be closed. */
static void close_leftovers(ember_t *e)
{
    if (e->scr) {
        scr_close(e->scr, NULL, NULL);
        e->scr = NULL;
    }
    if (e->agent) {
        agt_close(e->agent, false, NULL, NULL);
        e->agent = NULL;
    }
    if (e->httpd) {
        lc_httpd_close(e->httpd, NULL, NULL);
        e->httpd = NULL;
    }
    if (e->transport) {
        lc_transport_close(e->transport, NULL, NULL);
        e->transport = NULL;
    }
    lc_loop_close_all(&e->loop);
}

void ember_free(ember_t *e)
{
    if (!e)
        return;
    close_leftovers(e);
    ing_free(e->ing);
    qry_free(e->qry);
    qry_extra_free(e->qry_extra);
    ing_writer_free(e->writer);
    lc_store_close(e->store);
    lc_metrics_free(e->metrics);
    uv_loop_close(&e->loop);
    lc_free(e);
}
