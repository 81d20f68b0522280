/*
 * node_fanout.c — `ember-querier`'s querier node (querier.h: qry_fanout_node):
 * the public query API (querier.v1) with
 * no store of its own: every RPC fans out to the live ingesters of one
 * complete zone (fanout*.c, zones.h), whose set it watches in Redis
 * (lc/members.h: the hash ember:members:ingester, each field's expiry pushed
 * on by its ingester's heartbeat, and the durable zone registry
 * ember:members:ingester:registry) and/or takes from --querier.ingesters.
 * With no complete zone every query answers 503 naming the missing ids.
 * With --storage.backend (the bucket store node opened p->store) what lies
 * below the asked ingesters' marks is read by this querier's own shard on
 * the bucket (bucket_shard.h), asked beside them (fanout.h).
 *
 * Members unseen for the TTL are gone; each fanout_join and leave is logged, and so
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
#include <string.h>

#include "bucket_shard.h"
#include "ember_process.h"
#include "fanout.h"
#include "lc/log.h"
#include "lc/members.h"
#include "querier.h"
#include "services_extra.h"
#include "zones.h"

#define MEMBER_TTL_MS 5000 /* five missed heartbeats: the ingester is gone */
#define REDIS_CMD_TIMEOUT_MS 2000
#define SEEN_MAX 4096 /* ids whose last address is remembered */

typedef struct fanout_node_s {
    lc_proc_t *p;
    const ember_settings_t *s;
    qry_fanout_t *fanout;
    qry_bucket_shard_t *bucket; /* the shard on the bucket store (p->store), if any */
    qry_extra_t *extra;         /* settings (in Redis), version, feature flags */
    lc_members_t *watch;        /* the ingester group; NULL without --redis.url */
    char **members;             /* the last discovered set, sorted, for change logs */
    size_t n_members;
    char *zone;        /* the zone asked now; NULL when none is complete */
    char *reason;      /* why none is complete, for change logs */
    lc_member_t *seen; /* id -> the address it was last live at (names the missing) */
    size_t n_seen, cap_seen;
    lc_metric_t *members_gauge, *asked_gauge, *complete_gauge, *redis_up, *mark_gauge;
} fanout_node_t;

/* ------------------------------------------------------------- discovery */

static bool contains(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* Logs joins and leaves, then hands the new set to the fan-out. */
static void members_update(fanout_node_t *q, char **v, const int64_t *marks_ms, size_t n,
                           const char *marks_spec, int64_t history_below_ms, const char *reason)
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
    qry_fanout_set_members(q->fanout, (const char *const *)v, marks_ms, n, marks_spec);
    qry_fanout_set_history(q->fanout, history_below_ms);
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
static void seen_update(fanout_node_t *q, const lc_member_t *live, size_t n)
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
static void zone_log(fanout_node_t *q, const qz_choice_t *c)
{
    if (!str_changed(q->zone, c->zone) && !str_changed(q->reason, c->reason))
        return;
    if (c->zone && c->reason)
        LC_LOG_WARN("zones: no complete zone; queries that end before %lld ms are answered by "
                    "zone=\"%s\" and the bucket below its missing members' marks, the others "
                    "answer 503: %s",
                    (long long)c->history_below_ms, c->zone, c->reason);
    else if (c->zone && c->lacking)
        LC_LOG_WARN("zones: answering from a complete zone that lacks profiles zone=\"%s\" "
                    "ingesters=%zu complete_zones=%zu zones=%zu: %s",
                    c->zone, c->n_urls, c->n_complete, c->n_zones, c->lacking);
    else if (c->zone)
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
 * Queries ask the first complete zone whose members lack nothing (zones.h). */
static void fanout_on_members(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    fanout_node_t *q = data;
    const lc_member_t *reg;
    size_t n_reg = lc_members_registry(m, &reg);
    seen_update(q, live, n);
    qz_choice_t c;
    qz_choose(live, n, reg, n_reg, q->seen, q->n_seen, q->bucket != NULL, &c);
    zone_log(q, &c);
    lc_metric_set(q->members_gauge, (double)n);
    lc_metric_set(q->complete_gauge, (double)c.n_complete);
    int64_t lowest = INT64_MAX;
    for (size_t i = 0; i < c.n_urls; i++)
        if (c.marks_ms[i] != LC_MEMBER_NO_MARK && c.marks_ms[i] < lowest)
            lowest = c.marks_ms[i];
    lc_metric_set(q->mark_gauge, q->bucket && lowest != INT64_MAX ? (double)lowest / 1e3 : -1);
    members_update(q, c.urls, c.marks_ms, c.n_urls, c.marks_spec, c.history_below_ms, c.reason);
    c.urls = NULL; /* members_update took them */
    c.n_urls = 0;
    qz_choice_fini(&c);
}

static void fanout_on_members_state(bool up, void *data)
{
    fanout_node_t *q = data;
    if (up)
        LC_LOG_INFO("redis link up: watching ingesters");
    else
        LC_LOG_WARN("redis link down: keeping the last known ingesters count=%zu", q->n_members);
}

static int start_watch(fanout_node_t *q)
{
    if (!ember_clustered(q->s))
        return 0;
    lc_members_opts_t mo = {.url = q->s->redis_url,
                            .cluster = q->s->redis_cluster,
                            .role = "ingester",
                            .ttl_ms = MEMBER_TTL_MS,
                            .cmd_timeout_ms = REDIS_CMD_TIMEOUT_MS,
                            .on_change = fanout_on_members,
                            .change_data = q,
                            .on_state = fanout_on_members_state,
                            .state_data = q};
    int rc = lc_members_new(&q->p->loop, &mo, &q->watch);
    if (rc)
        LC_LOG_ERROR("cannot watch the ingesters url=%s err=\"%s\"", q->s->redis_url,
                     lc_strerror(rc));
    return rc;
}

static void fanout_register_metrics(fanout_node_t *q)
{
    lc_metrics_t *m = q->p->metrics;
    q->members_gauge = lc_metrics_gauge(m, "ember_querier_live_ingesters",
                                        "Ingesters announced through Redis (all zones)", "");
    q->asked_gauge = lc_metrics_gauge(m, "ember_querier_asked_ingesters",
                                      "Announced ingesters queries ask: the chosen zone's", "");
    q->complete_gauge = lc_metrics_gauge(m, "ember_querier_complete_zones",
                                         "Zones whose registered ingesters are all live", "");
    q->redis_up = lc_metrics_gauge(m, "ember_redis_up", "1 while the Redis link is up", "");
    q->mark_gauge = lc_metrics_gauge(
        m, "ember_querier_lowest_mark_seconds",
        "The lowest mark of the ingesters asked: what lies below each one's mark is read from "
        "the bucket by this querier (-1: none)",
        "");
}

/* ---------------------------------------------------------------- the node */

static int fanout_node_start(lc_proc_t *p, const void *settings, void **state)
{
    fanout_node_t *q = lc_xcalloc(1, sizeof(*q));
    *state = q;
    q->p = p;
    q->s = settings;
    fanout_register_metrics(q);
    qry_fanout_opts_t fo;
    qry_fanout_opts_default(&fo);
    fo.q.multitenancy = q->s->multitenancy;
    fo.q.max_concurrent_per_tenant = q->s->max_concurrent_queries;
    fo.ingesters = q->s->querier_ingesters;
    if (q->s->shard_timeout_ns > 0)
        fo.timeout_ms = (uint32_t)(q->s->shard_timeout_ns / 1000000);
    int rc = qry_fanout_new(&p->loop, &fo, p->httpd, p->metrics, &q->fanout);
    /* The bucket store node opened one: history below the marks is read here. */
    if (!rc && p->store)
        rc = qry_bucket_shard_start(p->store, q->s->multitenancy, &q->bucket);
    if (q->bucket) {
        const char *const *urls;
        size_t n = qry_bucket_shard_urls(q->bucket, &urls);
        qry_fanout_set_bucket(q->fanout, urls, n);
    }
    qry_extra_opts_t xo = {.multitenancy = q->s->multitenancy,
                           .settings_redis_url = q->s->redis_url,
                           .redis_timeout_ms = REDIS_CMD_TIMEOUT_MS,
                           .config_yaml = q->s->config_yaml,
                           .config_diff_yaml = q->s->config_diff_yaml,
                           .config_default_yaml = q->s->config_default_yaml};
    if (!rc)
        rc = qry_extra_new(&p->loop, &xo, p->httpd, &q->extra);
    if (!rc)
        rc = start_watch(q);
    return rc;
}

/* After the server closed: no query is left to need the member list. */
static void fanout_node_close(lc_proc_t *p, void *state)
{
    fanout_node_t *q = state;
    if (q->watch)
        lc_members_close(q->watch, NULL, NULL);
    q->watch = NULL;
    qry_bucket_shard_stop(q->bucket); /* no query left to ask it */
    q->bucket = NULL;
    LC_LOG_INFO("stopped");
    lc_proc_continue(p);
}

static const char *fanout_node_not_ready(void *state)
{
    fanout_node_t *q = state;
    if (q->watch && !lc_members_is_up(q->watch))
        return "redis link down";
    bool history = q->reason && q->zone; /* no complete zone, but its history answers */
    if (q->reason && !history)
        return "no complete zone";
    if (qry_fanout_count(q->fanout) == 0 && !history)
        return "no live ingester";
    return NULL;
}

static void fanout_node_collect(void *state)
{
    fanout_node_t *q = state;
    lc_metric_set(q->redis_up, q->watch && lc_members_is_up(q->watch) ? 1 : 0);
}

static void fanout_node_free(void *state)
{
    fanout_node_t *q = state;
    qry_bucket_shard_stop(q->bucket); /* when close did not run */
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
    lc_free(q);
}

const lc_node_ops_t qry_fanout_node = {
    .name = "querier",
    .start = fanout_node_start,
    .close = fanout_node_close,
    .not_ready = fanout_node_not_ready,
    .collect = fanout_node_collect,
    .free = fanout_node_free,
};
