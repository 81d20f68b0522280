/*
 * ember_querier.c — `ember-querier`: the public query API (querier.v1) with
 * no store of its own: every RPC fans out to the live ingesters of one
 * complete zone (fanout*.c, zones.h), whose set it watches in Redis
 * (lc/members.h: the hash ember:members:ingester, each field's expiry pushed
 * on by its ingester's heartbeat, and the durable zone registry
 * ember:members:ingester:registry) and/or takes from --querier.ingesters.
 * With no complete zone every query answers 503 naming the missing ids.
 *
 * Members unseen for the TTL are gone; each join and leave is logged, and so
 * is every change of the zone asked. /ready is false while the Redis link is
 * down (the member list would go stale), while no zone is complete, or when
 * no ingester is known.
 *
 * Next to querier.v1 it serves what the all-in-one serves beside it: the
 * legacy /pyroscope/render, render-diff and label-values (on the fan-out),
 * settings.v1 (kept in the same Redis, so every querier sees every setting;
 * without --redis.url the settings methods answer unimplemented), version.v1
 * and capabilities.v1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "fanout.h"
#include "lc/auth.h"
#include "lc/cfg.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/members.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "services_extra.h"
#include "zones.h"

#define MEMBER_TTL_MS 5000 /* five missed heartbeats: the ingester is gone */
#define REDIS_CMD_TIMEOUT_MS 2000
#define SEEN_MAX 4096 /* ids whose last address is remembered */

typedef struct querier_cfg_s {
    char *config_file;
    char *http_address;
    char *log_level;
    int64_t max_body_bytes;
    bool multitenancy;
    char *auth_tokens_file;
    char *redis_url;
    char *ingesters;
    int64_t shard_timeout_ns;
} querier_cfg_t;

#define CFG(name, type, field, def, help)                                                          \
    {                                                                                              \
        name, type, offsetof(querier_cfg_t, field), def, 0, 0, help                                \
    }

/* The same names (and EMBER_* variables) as `ember`'s flags. */
static const lc_cfg_entry_t cfg_table[] = {
    CFG("config.file", LC_CFG_STRING, config_file, NULL, "YAML file with any of these settings"),
    CFG("http.address", LC_CFG_STRING, http_address, "0.0.0.0:4040", "HTTP listen address"),
    CFG("log.level", LC_CFG_STRING, log_level, "info", "debug, info, warn or error"),
    CFG("http.max-body-bytes", LC_CFG_BYTES, max_body_bytes, "256MiB",
        "largest request body accepted (413 above)"),
    CFG("auth.multitenancy-enabled", LC_CFG_BOOL, multitenancy, "false",
        "require X-Scope-OrgID and keep tenants apart"),
    CFG("auth.tokens-file", LC_CFG_STRING, auth_tokens_file, "",
        "credentials bound to tenants (hashes; reloaded on SIGHUP); '' = no authentication"),
    CFG("redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port where ingesters announce themselves (and queriers keep settings)"),
    CFG("querier.ingesters", LC_CFG_STRING, ingesters, "",
        "comma-separated ingester URLs always asked, besides the announced ones"),
    CFG("querier.shard-timeout", LC_CFG_DURATION, shard_timeout_ns, "30s",
        "deadline of one call to an ingester"),
};

typedef struct querier_s {
    uv_loop_t loop;
    const querier_cfg_t *cfg;
    lc_metrics_t *metrics;
    lc_httpd_t *httpd;
    qry_fanout_t *fanout;
    qry_extra_t *extra;  /* settings (in Redis), version, feature flags */
    lc_members_t *watch; /* the ingester group; NULL without --redis.url */
    char **members;      /* the last discovered set, sorted, for change logs */
    size_t n_members;
    char *zone;        /* the zone asked now; NULL when none is complete */
    char *reason;      /* why none is complete, for change logs */
    lc_member_t *seen; /* id -> the address it was last live at (names the missing) */
    size_t n_seen, cap_seen;
    lc_stop_signals_t signals;
    bool stopping;
    lc_metric_t *members_gauge, *asked_gauge, *complete_gauge, *redis_up;
} querier_t;

/* ------------------------------------------------------- /ready, /metrics */

static lc_http_result_t ready_handler(lc_http_req_t *req, void *data)
{
    querier_t *q = data;
    if (q->stopping)
        lc_http_reply(req, 503, "text/plain", "shutting down", 13);
    else if (q->watch && !lc_members_is_up(q->watch))
        lc_http_reply(req, 503, "text/plain", "redis link down", 15);
    else if (q->reason)
        lc_http_reply(req, 503, "text/plain", "no complete zone", 16);
    else if (qry_fanout_count(q->fanout) == 0)
        lc_http_reply(req, 503, "text/plain", "no live ingester", 16);
    else
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    return LC_HTTP_DONE;
}

static lc_http_result_t metrics_handler(lc_http_req_t *req, void *data)
{
    querier_t *q = data;
    lc_metric_set(q->redis_up, q->watch && lc_members_is_up(q->watch) ? 1 : 0);
    lc_http_reply_metrics(req, q->metrics);
    return LC_HTTP_DONE;
}

/* ------------------------------------------------------------- discovery */

static bool contains(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* Logs joins and leaves, then hands the new set to the fan-out. */
static void members_update(querier_t *q, char **v, size_t n, const char *reason)
{
    for (size_t i = 0; i < n; i++)
        if (!contains(q->members, q->n_members, v[i]))
            LC_LOG_INFO("membership: ingester joined url=%s", v[i]);
    for (size_t i = 0; i < q->n_members; i++)
        if (!contains(v, n, q->members[i]))
            LC_LOG_INFO("membership: ingester left url=%s", q->members[i]);
    /* A verdict of "no complete zone" goes first and is lifted last, so a
     * query between the two calls never asks an incomplete set. */
    if (reason)
        qry_fanout_set_unavailable(q->fanout, reason);
    qry_fanout_set_members(q->fanout, (const char *const *)v, n);
    if (!reason)
        qry_fanout_set_unavailable(q->fanout, NULL);
    for (size_t i = 0; i < q->n_members; i++)
        lc_free(q->members[i]);
    lc_free(q->members);
    q->members = v;
    q->n_members = n;
    lc_metric_set(q->asked_gauge, (double)n);
}

/* Remembers where each id was live, so a 503 can say where it was. */
static void seen_update(querier_t *q, const lc_member_t *live, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < q->n_seen && strcmp(q->seen[j].id, live[i].id) != 0)
            j++;
        if (j == q->n_seen) {
            if (q->n_seen >= SEEN_MAX)
                continue; /* bounded: ids beyond this are named without an address */
            q->seen = lc_xgrow(q->seen, &q->cap_seen, q->n_seen + 1, sizeof(*q->seen));
            q->seen[q->n_seen++] = (lc_member_t){.id = lc_xstrdup(live[i].id), .addr = NULL};
        }
        if (!q->seen[j].addr || strcmp(q->seen[j].addr, live[i].addr) != 0) {
            lc_free((char *)q->seen[j].addr);
            q->seen[j].addr = lc_xstrdup(live[i].addr);
        }
    }
}

static bool str_changed(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* Logs a change of the zone asked, or of who is missing. */
static void zone_log(querier_t *q, const qz_choice_t *c)
{
    if (!str_changed(q->zone, c->zone) && !str_changed(q->reason, c->reason))
        return;
    if (c->zone)
        LC_LOG_INFO("zones: answering from one complete zone zone=\"%s\" ingesters=%zu "
                    "complete_zones=%zu zones=%zu",
                    c->zone, c->n_urls, c->n_complete, c->n_zones);
    else if (c->reason)
        LC_LOG_WARN("zones: no complete zone, queries answer 503: %s", c->reason);
    lc_free(q->zone);
    lc_free(q->reason);
    q->zone = c->zone ? lc_xstrdup(c->zone) : NULL;
    q->reason = c->reason ? lc_xstrdup(c->reason) : NULL;
}

/* lc_members: the live ingesters (their heartbeat not older than the TTL,
 * judged by Redis's clock) and the zone registry, on the first read and on
 * every change. The address each ingester joined with is its shard API URL.
 * Queries ask the first complete zone (zones.h). */
static void on_members(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    querier_t *q = data;
    const lc_member_t *reg;
    size_t n_reg = lc_members_registry(m, &reg);
    seen_update(q, live, n);
    qz_choice_t c;
    qz_choose(live, n, reg, n_reg, q->seen, q->n_seen, &c);
    zone_log(q, &c);
    lc_metric_set(q->members_gauge, (double)n);
    lc_metric_set(q->complete_gauge, (double)c.n_complete);
    members_update(q, c.urls, c.n_urls, c.reason);
    c.urls = NULL; /* members_update took them */
    c.n_urls = 0;
    qz_choice_fini(&c);
}

static void on_members_state(bool up, void *data)
{
    querier_t *q = data;
    if (up)
        LC_LOG_INFO("redis link up: watching ingesters");
    else
        LC_LOG_WARN("redis link down: keeping the last known ingesters count=%zu", q->n_members);
}

static int start_redis(querier_t *q)
{
    if (!q->cfg->redis_url || !*q->cfg->redis_url)
        return 0;
    lc_members_opts_t mo = {.url = q->cfg->redis_url,
                            .role = "ingester",
                            .ttl_ms = MEMBER_TTL_MS,
                            .cmd_timeout_ms = REDIS_CMD_TIMEOUT_MS,
                            .on_change = on_members,
                            .change_data = q,
                            .on_state = on_members_state,
                            .state_data = q};
    int rc = lc_members_new(&q->loop, &mo, &q->watch);
    if (rc)
        LC_LOG_ERROR("cannot watch the ingesters url=%s err=\"%s\"", q->cfg->redis_url,
                     lc_strerror(rc));
    return rc;
}

/* ---------------------------------------------------------------- shutdown */

static void on_http_closed(void *data)
{
    querier_t *q = data;
    q->httpd = NULL;
    if (q->watch) {
        lc_members_close(q->watch, NULL, NULL);
        q->watch = NULL;
    }
    LC_LOG_INFO("stopped");
}

static void on_stop(int signum, void *data)
{
    querier_t *q = data;
    q->stopping = true;
    LC_LOG_INFO("draining signal=%d", signum);
    lc_httpd_close(q->httpd, on_http_closed, q);
}

/* ---------------------------------------------------------------- assembly */

static int start_http(querier_t *q)
{
    lc_httpd_opts_t ho = {.address = q->cfg->http_address,
                          .max_body_bytes = (size_t)q->cfg->max_body_bytes,
                          .metrics = q->metrics};
    int rc = lc_auth_init(&q->loop, q->cfg->auth_tokens_file);
    if (rc == 0)
        rc = lc_httpd_new(&q->loop, &ho, &q->httpd);
    if (rc)
        return rc;
    qry_fanout_opts_t fo;
    qry_fanout_opts_default(&fo);
    fo.q.multitenancy = q->cfg->multitenancy;
    fo.ingesters = q->cfg->ingesters;
    if (q->cfg->shard_timeout_ns > 0)
        fo.timeout_ms = (uint32_t)(q->cfg->shard_timeout_ns / 1000000);
    rc = qry_fanout_new(&q->loop, &fo, q->httpd, q->metrics, &q->fanout);
    qry_extra_opts_t xo = {.multitenancy = q->cfg->multitenancy,
                           .settings_redis_url = q->cfg->redis_url,
                           .redis_timeout_ms = REDIS_CMD_TIMEOUT_MS};
    if (!rc)
        rc = qry_extra_new(&q->loop, &xo, q->httpd, &q->extra);
    lc_http_route_t ready = {.path = "/ready", .methods = "GET", .work = ready_handler, .data = q};
    lc_http_route_t metrics = {
        .path = "/metrics", .methods = "GET", .work = metrics_handler, .data = q};
    if (!rc)
        rc = lc_httpd_route(q->httpd, &ready);
    if (!rc)
        rc = lc_httpd_route(q->httpd, &metrics);
    if (!rc)
        rc = lc_httpd_listen(q->httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", q->cfg->http_address, lc_strerror(rc));
    return rc;
}

static int start_signals(querier_t *q)
{
    return lc_stop_signals_start(&q->loop, &q->signals, on_stop, q);
}

static void querier_free(querier_t *q)
{
    if (q->watch)
        lc_members_close(q->watch, NULL, NULL);
    if (q->httpd)
        lc_httpd_close(q->httpd, NULL, NULL);
    lc_loop_close_all(&q->loop);
    qry_fanout_free(q->fanout);
    qry_extra_free(q->extra);
    for (size_t i = 0; i < q->n_members; i++)
        lc_free(q->members[i]);
    lc_free(q->members);
    for (size_t i = 0; i < q->n_seen; i++) {
        lc_free((char *)q->seen[i].id);
        lc_free((char *)q->seen[i].addr);
    }
    lc_free(q->seen);
    lc_free(q->zone);
    lc_free(q->reason);
    lc_metrics_free(q->metrics);
    uv_loop_close(&q->loop);
}

static const char usage[] =
    "usage: ember-querier [flags]\n"
    "Answers the Pyroscope query API by asking every live ingester and merging their answers.";

int main(int argc, char **argv)
{
    querier_cfg_t cfg = {0};
    lc_status_t st = {0};
    size_t n = LC_ARRAY_LEN(cfg_table);
    int rc = lc_cfg_load(cfg_table, n, &cfg, argc, argv, usage, &st);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "ember-querier: %s\n", st.msg);
        lc_cfg_free(cfg_table, n, &cfg);
        return rc < 0 ? 2 : 0;
    }
    lc_log_level_t level;
    if (lc_log_parse_level(cfg.log_level, &level)) {
        fprintf(stderr, "ember-querier: --log.level: want debug, info, warn or error\n");
        return 2;
    }
    lc_log_init("ember-querier", level);
    lc_cfg_log(cfg_table, n, &cfg);

    querier_t q = {.cfg = &cfg};
    rc = uv_loop_init(&q.loop);
    if (rc == 0) {
        q.metrics = lc_metrics_new();
        q.members_gauge = lc_metrics_gauge(q.metrics, "ember_querier_live_ingesters",
                                           "Ingesters announced through Redis (all zones)", "");
        q.asked_gauge = lc_metrics_gauge(q.metrics, "ember_querier_asked_ingesters",
                                         "Announced ingesters queries ask: the chosen zone's",
                                         "");
        q.complete_gauge = lc_metrics_gauge(q.metrics, "ember_querier_complete_zones",
                                            "Zones whose registered ingesters are all live", "");
        q.redis_up = lc_metrics_gauge(q.metrics, "ember_redis_up", "1 while the Redis link is up",
                                      "");
        rc = start_http(&q);
    }
    if (rc == 0)
        rc = start_signals(&q);
    if (rc == 0)
        rc = start_redis(&q);
    if (rc == 0) {
        LC_LOG_INFO("ember-querier is ready addr=%s", cfg.http_address);
        rc = uv_run(&q.loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
    } else {
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    }
    querier_free(&q);
    lc_cfg_free(cfg_table, n, &cfg);
    return rc == 0 ? 0 : 1;
}
