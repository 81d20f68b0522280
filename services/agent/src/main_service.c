/*
 * main_service.c — `ember-agent` as a service: the configuration table, an
 * HTTP server for /metrics and /ready, the Redis transport the ingesters
 * consume, and the agent, on one libuv loop.
 *
 * Shutdown order on SIGTERM/SIGINT: the agent flushes its partial interval
 * and waits for those publishes, then the transport closes (everything it
 * accepted is in Redis), then the HTTP server.
 */
#include <stddef.h>
#include <string.h>

#include <uv.h>

#include "agent.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/transport.h"
#include "main.h"

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL
#define CFG(name, type, field, def, min, max, help)                                                \
    {                                                                                              \
        name, type, offsetof(agent_cfg_t, field), def, min, max, help                              \
    }

const lc_cfg_entry_t agent_cfg_table[] = {
    CFG("config.file", LC_CFG_STRING, config_file, NULL, 0, 0,
        "YAML file with any of these settings"),
    CFG("http.address", LC_CFG_STRING, http_address, "0.0.0.0:4041", 0, 0,
        "HTTP listen address (/metrics, /ready)"),
    CFG("log.level", LC_CFG_STRING, log_level, "info", 0, 0, "debug, info, warn or error"),
    CFG("redis.url", LC_CFG_STRING, redis_url, NULL, 0, 0,
        "Redis the ingesters consume: redis://HOST:PORT[/DB] (required)"),
    CFG("redis.publish-retry", LC_CFG_DURATION, publish_retry_ns, "0s", 0, 600 * NS_PER_S,
        "retry a publish whose outcome is unknown this long, stored once (0: fail at once)"),
    CFG("redis.partitions", LC_CFG_INT, redis_partitions, "16", 1, 4096,
        "stream partitions ember:ingest:<p>, as the ingesters are configured"),
    CFG("tenant", LC_CFG_STRING, tenant, "anonymous", 0, 0, "tenant the profiles belong to"),
    CFG("node", LC_CFG_STRING, node, NULL, 0, 0,
        "node label (default: $NODE_NAME, else the host name)"),
    CFG("agent.sample-rate", LC_CFG_INT, sample_rate, "19", AGT_MIN_SAMPLE_RATE_HZ,
        AGT_MAX_SAMPLE_RATE_HZ, "CPU samples per second on each CPU"),
    CFG("agent.interval", LC_CFG_DURATION, interval_ns, "10s", AGT_MIN_INTERVAL_NS, 3600 * NS_PER_S,
        "one profile per process (or container) per interval"),
    CFG("agent.group-by", LC_CFG_STRING, group_by, "process", 0, 0, "process or container"),
    CFG("agent.filter", LC_CFG_STRING, filter, NULL, 0, 0,
        "profile only processes whose labels match this selector, e.g. "
        "{comm=~\"nginx|redis\",cgroup!~\"/system.slice/.*\"}"),
    CFG("agent.max-stacks", LC_CFG_INT, max_stacks, "0", 0, 1 << 22,
        "distinct stacks one interval can hold (0 = sized from rate, interval and CPUs)"),
    CFG("agent.kubernetes-api", LC_CFG_STRING, kubernetes_api, NULL, 0, 0,
        "API server for pod labels (default: the in-cluster one when in a pod; \"off\")"),
};
const size_t agent_cfg_table_len = LC_ARRAY_LEN(agent_cfg_table);

typedef struct svc_s {
    uv_loop_t loop;
    const agent_cfg_t *cfg;
    lc_metrics_t *metrics;
    lc_httpd_t *httpd;
    lc_transport_t *tr;
    agt_t *agent;
    lc_stop_signals_t signals;
    bool stopping;
} svc_t;

/* ---------------------------------------------------------------- /ready, /metrics */

/* Ready: sampling on every CPU and the Redis link up (profiles publish). */
static lc_http_result_t svc_ready(lc_http_req_t *req, void *data)
{
    svc_t *s = data;
    lc_redis_transport_stats_t rs = {0};
    bool redis_up = s->tr && lc_transport_redis_stats(s->tr, &rs) == 0 && rs.up;
    if (!s->stopping && agt_ready(s->agent) && redis_up)
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    else
        lc_http_reply(req, 503, "text/plain", redis_up ? "not sampling" : "redis down",
                      redis_up ? 12 : 10);
    return LC_HTTP_DONE;
}

static lc_http_result_t svc_metrics(lc_http_req_t *req, void *data)
{
    svc_t *s = data;
    lc_http_reply_metrics(req, s->metrics);
    return LC_HTTP_DONE;
}

static int svc_start_http(svc_t *s)
{
    lc_httpd_opts_t ho = {.address = s->cfg->http_address, .metrics = s->metrics};
    int rc = lc_httpd_new(&s->loop, &ho, &s->httpd);
    lc_http_route_t ready = {.path = "/ready", .methods = "GET", .work = svc_ready, .data = s};
    lc_http_route_t metrics = {
        .path = "/metrics", .methods = "GET", .work = svc_metrics, .data = s};
    if (!rc)
        rc = lc_httpd_route(s->httpd, &ready);
    if (!rc)
        rc = lc_httpd_route(s->httpd, &metrics);
    if (!rc)
        rc = lc_httpd_listen(s->httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", s->cfg->http_address, lc_strerror(rc));
    else
        LC_LOG_INFO("serving /metrics and /ready port=%d", lc_httpd_port(s->httpd));
    return rc;
}

/* ---------------------------------------------------------------- transport */

/* Publish only: the ingesters consume. */
static int svc_open_transport(svc_t *s)
{
    if (!s->cfg->redis_url || !*s->cfg->redis_url) {
        LC_LOG_ERROR("--redis.url is required (ember --agent runs the agent without Redis)");
        return LC_EINPUT;
    }
    lc_redis_transport_opts_t ro = {
        .url = s->cfg->redis_url,
        .partitions = (uint32_t)s->cfg->redis_partitions,
        .publish_retry_ms = (uint32_t)(s->cfg->publish_retry_ns / NS_PER_MS),
        .metrics = s->metrics,
    };
    int rc = lc_transport_redis_new(&s->loop, &ro, NULL, NULL, &s->tr);
    if (rc)
        LC_LOG_ERROR("cannot use Redis url=%s err=\"%s\"", s->cfg->redis_url, lc_strerror(rc));
    return rc;
}

/* ---------------------------------------------------------------- agent */

static int svc_start_agent(svc_t *s)
{
    const agent_cfg_t *c = s->cfg;
    agt_opts_t o;
    agt_opts_default(&o);
    o.sample_rate_hz = (int)c->sample_rate;
    o.interval_ns = c->interval_ns;
    o.filter = c->filter;
    o.node = c->node;
    o.tenant = c->tenant;
    o.kubernetes_api = c->kubernetes_api;
    o.max_stacks = (size_t)c->max_stacks;
    o.partitions = (uint32_t)c->redis_partitions;
    if (strcmp(c->group_by, "container") == 0) {
        o.group_by = AGT_GROUP_CONTAINER;
    } else if (strcmp(c->group_by, "process") != 0) {
        LC_LOG_ERROR("--agent.group-by: want process or container");
        return LC_EINPUT;
    }
    return agt_new(&s->loop, &o, s->tr, s->metrics, &s->agent);
}

/* ---------------------------------------------------------------- shutdown */

static void svc_on_http_closed(void *data)
{
    svc_t *s = data;
    s->httpd = NULL;
}

static void svc_on_transport_closed(void *data)
{
    svc_t *s = data;
    s->tr = NULL;
    if (s->httpd)
        lc_httpd_close(s->httpd, svc_on_http_closed, s);
}

static void svc_on_agent_closed(void *data)
{
    svc_t *s = data;
    s->agent = NULL;
    if (s->tr)
        lc_transport_close(s->tr, svc_on_transport_closed, s);
    else
        svc_on_transport_closed(s);
}

static void svc_on_stop(int signum, void *data)
{
    svc_t *s = data;
    s->stopping = true;
    LC_LOG_INFO("draining signal=%d", signum);
    if (s->agent)
        agt_close(s->agent, true, svc_on_agent_closed, s);
    else
        svc_on_agent_closed(s);
}

static int svc_start_signals(svc_t *s)
{
    return lc_stop_signals_start(&s->loop, &s->signals, svc_on_stop, s);
}

/* After a failed start: close what opened, in the same order as a stop. */
static void svc_close_leftovers(svc_t *s)
{
    if (s->agent)
        agt_close(s->agent, false, NULL, NULL);
    s->agent = NULL;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    if (s->tr)
        lc_transport_close(s->tr, NULL, NULL);
    s->tr = NULL;
    if (s->httpd)
        lc_httpd_close(s->httpd, NULL, NULL);
    s->httpd = NULL;
    lc_loop_close_all(&s->loop);
}

int agent_service_run(const agent_cfg_t *cfg)
{
    svc_t s = {.cfg = cfg};
    int rc = uv_loop_init(&s.loop);
    if (rc)
        return rc;
    s.metrics = lc_metrics_new();
    rc = svc_open_transport(&s);
    if (!rc)
        rc = svc_start_agent(&s);
    if (!rc)
        rc = svc_start_http(&s);
    if (!rc)
        rc = svc_start_signals(&s);
    if (!rc)
        rc = uv_run(&s.loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
    else
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    svc_close_leftovers(&s);
    uv_loop_close(&s.loop);
    lc_metrics_free(s.metrics);
    return rc;
}
