/*
 * ember_ingester.c — `ember-ingester`: receivers + transport + writer + store
 * + the shard query API (shard.c), and, with --redis.url, a heartbeat that
 * announces this ingester to the queriers (ARCHITECTURE.md §1-§2).
 *
 * Transport: standalone, receivers hand profiles to the writer in-process
 * (direct). With --redis.url they XADD them to ember:ingest:<p> and the
 * writer consumes its zone's group (`ingesters`, or `ingesters.<zone>` with
 * --ingester.zone: every zone stores every profile) as --ingester.id, so a profile pushed
 * to any ingester may be stored by any ingester; the writer is idempotent by
 * stream id, which makes redelivery after a crash (or an XAUTOCLAIM by a
 * peer) harmless. The id must be stable across restarts so a restarted
 * ingester finds its own pending entries first.
 *
 * Membership (lc/members.h): the ingester joins the group "ingester" under
 * its consumer id with its shard API URL as address, heartbeating an expiry
 * judged by Redis's clock; queriers watch the group. A killed ingester thus
 * drops out by itself after the TTL; a stopped one leaves (HDEL) first. /ready is false while the Redis
 * link is down, since queriers cannot see this ingester then.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "ingest_cfg.h"
#include "ingester.h"
#include "lc/cfg.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/members.h"
#include "lc/store.h"
#include "lc/transport.h"
#include "shard.h"

#define REDIS_CMD_TIMEOUT_MS 2000
#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

typedef struct ingester_cfg_s {
    char *config_file;
    char *http_address;
    char *data_dir;
    char *log_level;
    int64_t retention_ns;
    int64_t block_duration_ns;
    int64_t map_size_bytes;
    int64_t max_body_bytes;
    int64_t max_profile_bytes;
    int64_t max_samples;
    int64_t reject_older_than_ns;
    int64_t reject_newer_than_ns;
    int64_t max_backlog_bytes;
    bool multitenancy;
    char *redis_url;
    char *advertise_url;
    char *ingester_id;
    char *zone;
    int64_t partitions;
    int64_t redis_max_backlog;
    int64_t claim_idle_ns;
    int64_t publish_retry_ns;
} ingester_cfg_t;

#define CFG(name, type, field, def, help)                                                          \
    {name, type, offsetof(ingester_cfg_t, field), def, 0, 0, help}
#define CFG_RANGE(name, type, field, def, min, max, help)                                          \
    {name, type, offsetof(ingester_cfg_t, field), def, min, max, help}

/* The same names (and EMBER_* variables) as `ember`'s flags. */
static const lc_cfg_entry_t cfg_table[] = {
    ING_CFG_COMMON(CFG)
    CFG("redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port of the streams and the membership ('' = standalone)"),
    CFG("ingester.advertise-url", LC_CFG_STRING, advertise_url, "",
        "URL queriers reach this ingester at ('' = http://<http.address>)"),
    ING_CFG_STREAMS(CFG, CFG_RANGE)
};

typedef struct ingester_s {
    uv_loop_t loop;
    const ingester_cfg_t *cfg;
    lc_metrics_t *metrics;
    lc_store_t *store;
    ing_writer_t *writer;
    lc_transport_t *transport;
    lc_httpd_t *httpd;
    ing_t *ing;
    qry_shard_t *shard;
    lc_members_t *members; /* joined as "ingester"; NULL when standalone */
    char *advertise;
    char *consumer_id;
    char group[32 + ING_ZONE_MAX]; /* the zone's consumer group */
    bool registered;               /* seen live (so registered): consuming */
    lc_stop_signals_t signals;
    bool stopping;
    lc_metric_t *backlog_bytes, *backlog_msgs, *redis_up;
} ingester_t;

/* ------------------------------------------------------- /ready, /metrics */

/* Up only when every link works: membership (queriers see us), the publish
 * link (receivers can answer 200) and the consume link (the stream drains). */
static bool redis_links_up(ingester_t *g)
{
    lc_redis_transport_stats_t rs;
    if (!lc_members_is_up(g->members))
        return false;
    if (lc_transport_redis_stats(g->transport, &rs))
        return true; /* not a redis transport */
    return rs.up && rs.consumer_up;
}

static lc_http_result_t ready_handler(lc_http_req_t *req, void *data)
{
    ingester_t *g = data;
    bool clustered = g->cfg->redis_url && *g->cfg->redis_url;
    if (g->stopping)
        lc_http_reply(req, 503, "text/plain", "shutting down", 13);
    else if (clustered && !g->members)
        lc_http_reply(req, 503, "text/plain", "not joined yet", 14);
    else if (clustered && !redis_links_up(g))
        lc_http_reply(req, 503, "text/plain", "redis link down", 15);
    else
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    return LC_HTTP_DONE;
}

static lc_http_result_t metrics_handler(lc_http_req_t *req, void *data)
{
    ingester_t *g = data;
    lc_transport_stats_t ts;
    lc_transport_stats(g->transport, &ts);
    lc_metric_set(g->backlog_bytes, (double)ts.backlog_bytes);
    lc_metric_set(g->backlog_msgs, (double)ts.backlog_msgs);
    if (g->redis_up) /* standalone only; the redis transport has its own */
        lc_metric_set(g->redis_up, 0);
    lc_http_reply_metrics(req, g->metrics);
    return LC_HTTP_DONE;
}

static int register_ops_routes(ingester_t *g)
{
    lc_http_route_t ready = {.path = "/ready", .methods = "GET", .work = ready_handler, .data = g};
    lc_http_route_t metrics = {
        .path = "/metrics", .methods = "GET", .work = metrics_handler, .data = g};
    int rc = lc_httpd_route(g->httpd, &ready);
    return rc ? rc : lc_httpd_route(g->httpd, &metrics);
}

/* ------------------------------------------------------------ membership */

static void on_members_state(bool up, void *data)
{
    ingester_t *g = data;
    if (up)
        LC_LOG_INFO("membership: joined as %s url=%s zone=\"%s\"", g->consumer_id, g->advertise,
                    g->cfg->zone);
    else
        LC_LOG_WARN("membership: redis link down; queriers will stop asking %s", g->advertise);
}

/* The first list that shows this ingester live comes after its first
 * heartbeat (same link, in order), which registered it in its zone: only
 * now may it store profiles, or a crash right after could lose some that
 * no registry knew this ingester held. */
static void on_members_change(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    ingester_t *g = data;
    LC_UNUSED(m);
    for (size_t i = 0; i < n && !g->registered; i++) {
        if (strcmp(live[i].id, g->consumer_id) != 0)
            continue;
        g->registered = true;
        LC_LOG_INFO("membership: registered, consuming now zone=\"%s\" group=%s", g->cfg->zone,
                    g->group);
        lc_transport_redis_release(g->transport);
    }
}

/* Joins the group "ingester" (lc/members.h) under the consumer id, with the
 * shard API URL as address, registered in its zone (the durable registry the
 * queriers judge a zone's completeness by); the heartbeat and expiry run
 * inside lc_members. */
static int start_redis(ingester_t *g)
{
    if (!g->cfg->redis_url || !*g->cfg->redis_url)
        return 0;
    lc_members_opts_t mo = {.url = g->cfg->redis_url,
                            .role = "ingester",
                            .self_id = g->consumer_id,
                            .self_addr = g->advertise,
                            .zone = g->cfg->zone,
                            .on_change = on_members_change,
                            .change_data = g,
                            .cmd_timeout_ms = REDIS_CMD_TIMEOUT_MS,
                            .on_state = on_members_state,
                            .state_data = g};
    int rc = lc_members_new(&g->loop, &mo, &g->members);
    if (rc)
        LC_LOG_ERROR("cannot join the ingesters url=%s err=\"%s\"", g->cfg->redis_url,
                     lc_strerror(rc));
    return rc;
}

/* ---------------------------------------------------------------- shutdown */

static void on_transport_closed(void *data)
{
    ingester_t *g = data;
    g->transport = NULL;
    LC_LOG_INFO("every accepted profile is on disk; stopped");
}

static void on_http_closed(void *data)
{
    ingester_t *g = data;
    g->httpd = NULL;
    lc_transport_close(g->transport, on_transport_closed, g);
}

static void on_left(void *data)
{
    ingester_t *g = data;
    g->members = NULL;
    LC_LOG_INFO("membership: left");
    lc_httpd_close(g->httpd, on_http_closed, g);
}

static void on_stop(int signum, void *data)
{
    ingester_t *g = data;
    g->stopping = true;
    LC_LOG_INFO("draining signal=%d", signum);
    /* Leave first so queriers stop asking a process that is going away. */
    if (g->members)
        lc_members_close(g->members, on_left, g);
    else
        lc_httpd_close(g->httpd, on_http_closed, g);
}

/* ---------------------------------------------------------------- assembly */

/* The claims record of a previous life is forgotten: nothing stored here is
 * also in another ingester's store, so the queriers may ask this one now.
 * Joining earlier would let them count such entries twice meanwhile. */
static void on_transport_settled(void *data)
{
    ingester_t *g = data;
    if (g->stopping || g->members)
        return;
    if (start_redis(g) != 0) {
        LC_LOG_ERROR("cannot join: stopping");
        lc_stop_signals_fire(&g->signals, SIGTERM);
    }
}

static void on_transport_state(bool up, void *data)
{
    ingester_t *g = data;
    if (up)
        LC_LOG_INFO("redis transport up consumer=%s", g->consumer_id);
    else
        LC_LOG_WARN("redis transport down: receivers answer 503 until it is back");
}

static char *consumer_id(const ingester_cfg_t *cfg)
{
    char id[ING_CONSUMER_ID_MAX];
    bool stable;
    ing_consumer_id(cfg->ingester_id, cfg->http_address, id, sizeof(id), &stable);
    if (!stable)
        LC_LOG_WARN("no --ingester.id and no fixed port: the consumer id is not stable; after a "
                    "restart its zone waits for this id until it is removed from the registry "
                    "id=%s",
                    id);
    return lc_xstrdup(id);
}

static int start_redis_transport(ingester_t *g)
{
    const ingester_cfg_t *c = g->cfg;
    g->consumer_id = consumer_id(c);
    uint32_t idle_ms = (uint32_t)(c->claim_idle_ns / 1000000);
    lc_redis_transport_opts_t to = {
        .url = c->redis_url,
        .partitions = (uint32_t)c->partitions,
        .group = g->group,
        .consumer_id = g->consumer_id,
        .max_backlog = (size_t)c->redis_max_backlog,
        .claim_idle_ms = idle_ms,
        /* look for abandoned entries a few times per idle period */
        .claim_interval_ms = idle_ms / 4 > 250 ? (idle_ms / 4 < 5000 ? idle_ms / 4 : 5000) : 250,
        /* forget what others claimed after it was applied here */
        .forget = ing_writer_forget,
        .publish_retry_ms = (uint32_t)(c->publish_retry_ns / 1000000),
        .metrics = g->metrics,
        .hold_consume = true, /* until registered in the zone: on_members_change */
        .on_state = on_transport_state,
        .on_settled = on_transport_settled, /* joins the membership */
        .state_data = g,
    };
    int rc = lc_transport_redis_new(&g->loop, &to, ing_writer_consume, g->writer, &g->transport);
    if (rc)
        LC_LOG_ERROR("cannot start the redis transport url=%s err=\"%s\"", c->redis_url,
                     lc_strerror(rc));
    else
        LC_LOG_INFO("redis transport consumer=%s group=%s zone=\"%s\" partitions=%u",
                    g->consumer_id, g->group, c->zone, (unsigned)to.partitions);
    return rc;
}

static int start_storage(ingester_t *g)
{
    lc_store_opts_t so = {
        .dir = g->cfg->data_dir,
        .block_duration_ns = g->cfg->block_duration_ns,
        .retention_ns = g->cfg->retention_ns,
        .map_size_bytes = (size_t)g->cfg->map_size_bytes,
    };
    int rc = lc_store_open(&so, &g->store);
    if (rc) {
        LC_LOG_ERROR("cannot open the store dir=%s err=\"%s\"", g->cfg->data_dir, lc_strerror(rc));
        return rc;
    }
    rc = ing_writer_new(g->store, g->metrics, &g->writer);
    if (rc)
        return rc;
    if (g->cfg->redis_url && *g->cfg->redis_url)
        return start_redis_transport(g);
    lc_direct_opts_t dopts = {.max_backlog_bytes = (size_t)g->cfg->max_backlog_bytes};
    return lc_transport_direct_new(&g->loop, &dopts, ing_writer_consume, g->writer,
                                   &g->transport);
}

static char *advertise_url(const ingester_cfg_t *cfg, int port)
{
    if (cfg->advertise_url && *cfg->advertise_url)
        return lc_xstrdup(cfg->advertise_url);
    char host[256];
    snprintf(host, sizeof(host), "%s", cfg->http_address);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    if (!*host || strcmp(host, "0.0.0.0") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    char url[300];
    snprintf(url, sizeof(url), "http://%s:%d", host, port);
    return lc_xstrdup(url);
}

static int start_http(ingester_t *g)
{
    lc_httpd_opts_t ho = {.address = g->cfg->http_address,
                          .max_body_bytes = (size_t)g->cfg->max_body_bytes,
                          .metrics = g->metrics};
    int rc = lc_httpd_new(&g->loop, &ho, &g->httpd);
    if (rc)
        return rc;
    ing_opts_t io;
    ing_opts_default(&io);
    io.limits.max_decompressed_bytes = (size_t)g->cfg->max_profile_bytes;
    io.limits.max_samples = (size_t)g->cfg->max_samples;
    io.reject_older_than_ns = g->cfg->reject_older_than_ns;
    io.reject_newer_than_ns = g->cfg->reject_newer_than_ns;
    io.multitenancy = g->cfg->multitenancy;
    if (g->cfg->redis_url && *g->cfg->redis_url)
        io.partitions = (uint32_t)g->cfg->partitions;
    rc = ing_new(&g->loop, &io, g->httpd, g->transport, g->metrics, &g->ing);
    if (!rc)
        rc = qry_shard_new(&g->loop, g->httpd, g->store, g->metrics, g->cfg->multitenancy,
                           &g->shard);
    if (!rc)
        rc = register_ops_routes(g);
    if (!rc)
        rc = lc_httpd_listen(g->httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", g->cfg->http_address,
                     lc_strerror(rc));
    else
        g->advertise = advertise_url(g->cfg, lc_httpd_port(g->httpd));
    return rc;
}

static int start_signals(ingester_t *g)
{
    return lc_stop_signals_start(&g->loop, &g->signals, on_stop, g);
}

static void register_metrics(ingester_t *g)
{
    g->metrics = lc_metrics_new();
    g->backlog_bytes = lc_metrics_gauge(g->metrics, "ember_ingest_backlog_bytes",
                                        "Bytes of accepted profiles waiting for the writer", "");
    g->backlog_msgs = lc_metrics_gauge(g->metrics, "ember_ingest_backlog_profiles",
                                       "Accepted profiles waiting for the writer", "");
    if (!g->cfg->redis_url || !*g->cfg->redis_url)
        g->redis_up = lc_metrics_gauge(g->metrics, "ember_redis_up",
                                       "1 while the Redis link is up (0 standalone)", "");
}

static void ingester_free(ingester_t *g)
{
    if (g->members)
        lc_members_close(g->members, NULL, NULL);
    if (g->httpd)
        lc_httpd_close(g->httpd, NULL, NULL);
    if (g->transport)
        lc_transport_close(g->transport, NULL, NULL);
    lc_loop_close_all(&g->loop);
    ing_free(g->ing);
    qry_shard_free(g->shard);
    ing_writer_free(g->writer);
    lc_store_close(g->store);
    lc_metrics_free(g->metrics);
    uv_loop_close(&g->loop);
    lc_free(g->advertise);
    lc_free(g->consumer_id);
}

static const char usage[] =
    "usage: ember-ingester [flags]\n"
    "Receives profiles (Pyroscope ingest API), writes them to its store and answers the\n"
    "queriers' shard calls; with --redis.url it announces itself to them.";

int main(int argc, char **argv)
{
    ingester_cfg_t cfg = {0};
    lc_status_t st = {0};
    size_t n = LC_ARRAY_LEN(cfg_table);
    int rc = lc_cfg_load(cfg_table, n, &cfg, argc, argv, usage, &st);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "ember-ingester: %s\n", st.msg);
        lc_cfg_free(cfg_table, n, &cfg);
        return rc < 0 ? 2 : 0;
    }
    lc_log_level_t level;
    if (lc_log_parse_level(cfg.log_level, &level)) {
        fprintf(stderr, "ember-ingester: --log.level: want debug, info, warn or error\n");
        return 2;
    }
    if (cfg.partitions < 1 || cfg.partitions > 4096 || cfg.redis_max_backlog < 1) {
        fprintf(stderr, "ember-ingester: --ingest.partitions wants 1..4096 and "
                        "--redis.max-backlog at least 1\n");
        lc_cfg_free(cfg_table, n, &cfg);
        return 2;
    }
    ingester_t g = {.cfg = &cfg};
    if (!ing_zone_group(cfg.zone, g.group, sizeof(g.group))) {
        fprintf(stderr, "ember-ingester: --ingester.zone wants up to %d of [A-Za-z0-9_-]\n",
                ING_ZONE_MAX);
        lc_cfg_free(cfg_table, n, &cfg);
        return 2;
    }
    lc_log_init("ember-ingester", level);
    lc_cfg_log(cfg_table, n, &cfg);

    rc = uv_loop_init(&g.loop);
    if (rc == 0) {
        register_metrics(&g);
        rc = start_storage(&g);
    }
    if (rc == 0)
        rc = start_http(&g);
    if (rc == 0)
        rc = start_signals(&g);
    /* With Redis, the membership starts once the transport settled. */
    if (rc == 0) {
        LC_LOG_INFO("ember-ingester is ready addr=%s url=%s data=%s", cfg.http_address,
                    g.advertise, cfg.data_dir);
        rc = uv_run(&g.loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
    } else {
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    }
    ingester_free(&g);
    lc_cfg_free(cfg_table, n, &cfg);
    return rc == 0 ? 0 : 1;
}
