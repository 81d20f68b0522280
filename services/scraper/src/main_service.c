/*
 * main_service.c — `ember-scraper` as a service: the configuration table, an
 * HTTP server (/targets, /metrics, /ready), the Redis transport (publish
 * only; the ingesters consume), Redis membership in the group "scraper", and
 * the scraper, on one libuv loop.
 *
 * Splitting the work. Every replica joins the group and gets the live member
 * list (sorted ids); rendezvous hashing over it assigns each target to one
 * replica, so a join or a leave moves only that replica's share. A replica
 * that gains a target waits `scrape.handover` before its first scrape, long
 * enough for the previous owner to have read the same list (members are
 * re-read every heartbeat), so no target is scraped by two replicas at once.
 *
 * Shutdown on SIGTERM/SIGINT: HTTP first (it serves /targets from the
 * scraper), then the scraper (no scrape starts any more, the ones in flight
 * finish and are published), then the replica leaves the group (the others
 * take its targets over after their handover), then the transport closes once
 * every publish is confirmed.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "lc/alloc.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/members.h"
#include "lc/service.h"
#include "lc/metrics.h"
#include "lc/transport.h"
#include "main.h"
#include "scraper.h"

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL
#define CFG(name, type, field, def, min, max, help)                                                \
    {                                                                                              \
        name, type, offsetof(scraper_cfg_t, field), def, min, max, help                            \
    }

const lc_cfg_entry_t scraper_cfg_table[] = {
    CFG("config.file", LC_CFG_STRING, config_file, NULL, 0, 0,
        "the parca.yaml: scrape_configs (required; reloaded on SIGHUP and when it changes)"),
    CFG("http.address", LC_CFG_STRING, http_address, "0.0.0.0:4042", 0, 0,
        "HTTP listen address (/targets, /metrics, /ready)"),
    CFG("log.level", LC_CFG_STRING, log_level, "info", 0, 0, "debug, info, warn or error"),
    CFG("redis.url", LC_CFG_STRING, redis_url, NULL, 0, 0,
        "Redis the ingesters consume: redis://HOST:PORT[/DB] (required)"),
    CFG("redis.publish-retry", LC_CFG_DURATION, publish_retry_ns, "0s", 0, 600 * NS_PER_S,
        "retry a publish whose outcome is unknown this long, stored once (0: fail at once)"),
    CFG("redis.partitions", LC_CFG_INT, redis_partitions, "16", 1, 4096,
        "stream partitions ember:ingest:<p>, as the ingesters are configured"),
    CFG("tenant", LC_CFG_STRING, tenant, "anonymous", 0, 0, "tenant the profiles belong to"),
    CFG("member.id", LC_CFG_STRING, member_id, NULL, 0, 0,
        "this replica's id in the group (default: host name and HTTP port)"),
    CFG("member.address", LC_CFG_STRING, member_address, NULL, 0, 0,
        "how other processes reach this replica (default: host name and HTTP port)"),
    CFG("member.heartbeat", LC_CFG_DURATION, heartbeat_ns, "1s", 100 * NS_PER_MS, 60 * NS_PER_S,
        "how often this replica renews its membership and re-reads the group"),
    CFG("member.ttl", LC_CFG_DURATION, member_ttl_ns, "5s", 200 * NS_PER_MS, 600 * NS_PER_S,
        "a replica unseen this long is gone and its targets move"),
    CFG("scrape.handover", LC_CFG_DURATION, handover_ns, "2s", 0, 600 * NS_PER_S,
        "wait before scraping a target taken over from another replica"),
    CFG("scrape.max-body-bytes", LC_CFG_BYTES, max_body_bytes, "64MiB", 1024, 1LL << 32,
        "largest response body and decompressed profile accepted"),
    CFG("scrape.max-samples", LC_CFG_INT, max_samples, "1000000", 1, 100000000,
        "most samples accepted in one profile"),
};
const size_t scraper_cfg_table_len = LC_ARRAY_LEN(scraper_cfg_table);

typedef struct svc_s {
    uv_loop_t loop;
    const scraper_cfg_t *cfg;
    char member_id[256], member_addr[256];
    lc_metrics_t *metrics;
    lc_httpd_t *httpd;
    lc_transport_t *tr;
    lc_members_t *members;
    scr_t *scr;
    lc_stop_signals_t signals;
    bool stopping, members_seen;
} svc_t;

/* ---------------------------------------------------------------- /ready, /metrics */

/* Ready: the scraper runs, Redis takes profiles and the member list is known. */
static lc_http_result_t svc_ready(lc_http_req_t *req, void *data)
{
    svc_t *s = data;
    lc_redis_transport_stats_t rs = {0};
    bool redis_up = s->tr && lc_transport_redis_stats(s->tr, &rs) == 0 && rs.up;
    const char *why = s->stopping        ? "shutting down"
                      : !redis_up        ? "redis down"
                      : !s->members_seen ? "no member list yet"
                                         : NULL;
    if (why)
        lc_http_reply(req, 503, "text/plain", why, strlen(why));
    else
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    return LC_HTTP_DONE;
}

static lc_http_result_t svc_metrics(lc_http_req_t *req, void *data)
{
    svc_t *s = data;
    lc_http_reply_metrics(req, s->metrics);
    return LC_HTTP_DONE;
}

static int svc_new_http(svc_t *s)
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
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", s->cfg->http_address, lc_strerror(rc));
    return rc;
}

static int svc_listen(svc_t *s)
{
    int rc = lc_httpd_listen(s->httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", s->cfg->http_address, lc_strerror(rc));
    else
        LC_LOG_INFO("serving /targets, /metrics and /ready port=%d", lc_httpd_port(s->httpd));
    return rc;
}

/* ---------------------------------------------------------------- Redis */

static int svc_open_transport(svc_t *s)
{
    if (!s->cfg->redis_url || !*s->cfg->redis_url) {
        LC_LOG_ERROR("--redis.url is required (ember --scrape.config-file scrapes without "
                     "Redis)");
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

static void svc_on_members(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    svc_t *s = data;
    LC_UNUSED(m);
    const char **ids = lc_xcalloc(n + 1, sizeof(*ids));
    for (size_t i = 0; i < n; i++)
        ids[i] = live[i].id;
    s->members_seen = true;
    if (s->scr)
        scr_set_members(s->scr, ids, n);
    lc_free(ids);
}

/* Defaults: "<host name>:<HTTP port>", unique per host and stable across
 * restarts (in Kubernetes the host name is the pod name). */
static void svc_identity(svc_t *s)
{
    char host[128] = "localhost";
    gethostname(host, sizeof(host) - 1);
    const char *colon = strrchr(s->cfg->http_address, ':');
    const char *port = colon ? colon + 1 : "4042";
    snprintf(s->member_id, sizeof(s->member_id), "%s",
             s->cfg->member_id && *s->cfg->member_id ? s->cfg->member_id : "");
    if (!s->member_id[0])
        snprintf(s->member_id, sizeof(s->member_id), "%s:%s", host, port);
    snprintf(s->member_addr, sizeof(s->member_addr), "%s",
             s->cfg->member_address && *s->cfg->member_address ? s->cfg->member_address : "");
    if (!s->member_addr[0])
        snprintf(s->member_addr, sizeof(s->member_addr), "%s:%s", host, port);
}

static int svc_join(svc_t *s)
{
    lc_members_opts_t mo = {
        .url = s->cfg->redis_url,
        .role = "scraper",
        .self_id = s->member_id,
        .self_addr = s->member_addr,
        .heartbeat_ms = (uint32_t)(s->cfg->heartbeat_ns / NS_PER_MS),
        .ttl_ms = (uint32_t)(s->cfg->member_ttl_ns / NS_PER_MS),
        .on_change = svc_on_members,
        .change_data = s,
    };
    int rc = lc_members_new(&s->loop, &mo, &s->members);
    if (rc)
        LC_LOG_ERROR("cannot join the scraper group err=\"%s\" (member.ttl must exceed "
                     "member.heartbeat)",
                     lc_strerror(rc));
    return rc;
}

/* ---------------------------------------------------------------- the scraper */

static int svc_start_scraper(svc_t *s)
{
    const scraper_cfg_t *c = s->cfg;
    if (!c->config_file || !*c->config_file) {
        LC_LOG_ERROR("--config.file (the parca.yaml with scrape_configs) is required");
        return LC_EINPUT;
    }
    scr_opts_t o;
    scr_opts_default(&o);
    o.config_file = c->config_file;
    o.transport = s->tr;
    o.metrics = s->metrics;
    o.httpd = s->httpd;
    o.tenant = c->tenant;
    o.partitions = (uint32_t)c->redis_partitions;
    o.max_body_bytes = (size_t)c->max_body_bytes;
    o.max_samples = (size_t)c->max_samples;
    o.membership = true;
    o.replica_id = s->member_id;
    o.handover_ns = c->handover_ns;
    lc_status_t st = {0};
    int rc = scr_new(&s->loop, &o, &s->scr, &st);
    if (rc)
        LC_LOG_ERROR("cannot start the scraper err=\"%s\"", st.msg);
    return rc ? LC_EINPUT : 0;
}

/* ---------------------------------------------------------------- shutdown */

static void svc_on_transport_closed(void *data)
{
    svc_t *s = data;
    s->tr = NULL;
    LC_LOG_INFO("every scraped profile is in Redis; stopped");
}

static void svc_on_left(void *data)
{
    svc_t *s = data;
    s->members = NULL;
    if (s->tr)
        lc_transport_close(s->tr, svc_on_transport_closed, s);
}

static void svc_on_scraper_closed(void *data)
{
    svc_t *s = data;
    s->scr = NULL;
    if (s->members)
        lc_members_close(s->members, svc_on_left, s);
    else
        svc_on_left(s);
}

static void svc_on_http_closed(void *data)
{
    svc_t *s = data;
    s->httpd = NULL;
    if (s->scr)
        scr_close(s->scr, svc_on_scraper_closed, s);
    else
        svc_on_scraper_closed(s);
}

/* signum 0: not a signal (the loop ended, or start-up failed). */
static void svc_on_stop(int signum, void *data)
{
    svc_t *s = data;
    s->stopping = true;
    if (signum)
        LC_LOG_INFO("draining signal=%d", signum);
    if (s->httpd)
        lc_httpd_close(s->httpd, svc_on_http_closed, s);
    else
        svc_on_http_closed(s);
}

static int svc_start_signals(svc_t *s)
{
    return lc_stop_signals_start(&s->loop, &s->signals, svc_on_stop, s);
}

/* After the loop returned, or after a failed start: runs the stop sequence if
 * it has not run (the transport's reconnect timers would otherwise keep the
 * loop alive), then closes whatever is left. */
static void svc_close_leftovers(svc_t *s)
{
    if (!s->stopping && s->signals.started)
        lc_stop_signals_fire(&s->signals, 0);
    else if (!s->stopping)
        svc_on_stop(0, s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    lc_loop_close_all(&s->loop);
}

int scraper_service_run(const scraper_cfg_t *cfg)
{
    svc_t s = {.cfg = cfg};
    int rc = uv_loop_init(&s.loop);
    if (rc)
        return rc;
    s.metrics = lc_metrics_new();
    svc_identity(&s);
    rc = svc_open_transport(&s);
    if (!rc)
        rc = svc_new_http(&s);
    if (!rc)
        rc = svc_start_scraper(&s);
    if (!rc)
        rc = svc_listen(&s);
    if (!rc)
        rc = svc_join(&s);
    if (!rc)
        rc = svc_start_signals(&s);
    if (!rc) {
        LC_LOG_INFO("ember-scraper is running member=%s", s.member_id);
        rc = uv_run(&s.loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
    } else {
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    }
    svc_close_leftovers(&s);
    uv_loop_close(&s.loop);
    lc_metrics_free(s.metrics);
    return rc;
}
