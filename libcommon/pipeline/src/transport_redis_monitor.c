/*
 * transport_redis_monitor.c — the `redis` transport's monitor and trimming:
 * every monitor_interval_ms a probe per stream (XINFO GROUPS, XLEN, and
 * XPENDING per group when trimming) samples the backlog of the slowest group
 * for the stats and metrics, and on consumers, every trim_interval_ms, trims
 * below the oldest entry any group still needs (transport_redis.c's header
 * comment says why that point is safe). Loop thread only; probes go on the
 * publish links and a close waits for them (lc_rt__close_step).
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

/* ---------------------------------------------------------------- monitor + trim */

/* One consumer group of a stream, as XINFO GROUPS (and XPENDING) showed it. */
typedef struct rt_group_s {
    struct rt_probe_s *pr;
    char *name;
    uint64_t pending, lag;
    bool lag_known, has_min;
    lc_redis_id_t last_delivered, min_pending;
} rt_group_t;

typedef struct rt_probe_s {
    rt_t *t;
    uint32_t part;
    int out; /* replies still expected */
    bool failed, trim;
    bool groups_unknown; /* more groups than RT_MAX_GROUPS, or a malformed one: no trim */
    uint64_t sent_snapshot;
    uint64_t xlen;
    rt_group_t *groups;
    size_t n_groups;
} rt_probe_t;

static const redisReply *kv_get(const redisReply *flat, const char *key)
{
    for (size_t i = 0; flat->type == REDIS_REPLY_ARRAY && i + 1 < flat->elements; i += 2) {
        const redisReply *k = flat->element[i];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, key) == 0)
            return flat->element[i + 1];
    }
    return NULL;
}

/* One XINFO GROUPS element: name, pending, last-delivered-id and lag (nil when unknown). */
static bool probe_group_parse(const redisReply *g, rt_group_t *out)
{
    const redisReply *name = kv_get(g, "name"), *pending = kv_get(g, "pending");
    const redisReply *last = kv_get(g, "last-delivered-id"), *lag = kv_get(g, "lag");
    if (!name || name->type != REDIS_REPLY_STRING || !pending ||
        pending->type != REDIS_REPLY_INTEGER || !last || last->type != REDIS_REPLY_STRING ||
        lc_redis_id_parse(last->str, last->len, &out->last_delivered) != 0)
        return false;
    out->name = lc_xstrndup(name->str, name->len);
    out->pending = (uint64_t)pending->integer;
    out->lag_known = lag && lag->type == REDIS_REPLY_INTEGER;
    out->lag = out->lag_known ? (uint64_t)lag->integer : 0;
    return true;
}

/* XINFO GROUPS: every group of the stream (every zone has its own). */
static void probe_groups(rt_probe_t *pr, const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ARRAY)
        return; /* an error reply: no such stream, so no group */
    if (reply->elements > RT_MAX_GROUPS) {
        pr->groups_unknown = true;
        LC_LOG_WARN("redis: more than %d consumer groups on stream=%s: not trimming it",
                    RT_MAX_GROUPS, pr->t->parts[pr->part].stream);
    }
    size_t n = reply->elements < RT_MAX_GROUPS ? reply->elements : RT_MAX_GROUPS;
    pr->groups = lc_xcalloc(n + 1, sizeof(*pr->groups));
    for (size_t i = 0; i < n; i++) {
        rt_group_t *g = &pr->groups[pr->n_groups];
        *g = (rt_group_t){.pr = pr};
        if (probe_group_parse(reply->element[i], g))
            pr->n_groups++;
        else
            pr->groups_unknown = true;
    }
}

/* XPENDING summary: [count, min-id | nil, max-id | nil, consumers | nil]. */
static void probe_pending(rt_group_t *g, const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2)
        return;
    const redisReply *min = reply->element[1];
    g->has_min = min->type == REDIS_REPLY_STRING &&
                 lc_redis_id_parse(min->str, min->len, &g->min_pending) == 0;
}

static void trim_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    if (status == 0 && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
        count(&t->trimmed, t->m.trimmed, (uint64_t)reply->integer);
    else if (status == 0 && lc_redis_reply_error(reply))
        LC_LOG_WARN("redis: XTRIM refused err=\"%s\"", lc_redis_reply_error(reply));
}

/* The oldest entry any group still needs: its oldest pending entry, or the
 * first one it has not been delivered yet. false when that is unknown. */
static bool probe_keep_point(const rt_probe_t *pr, lc_redis_id_t *keep)
{
    if (pr->n_groups == 0 || pr->groups_unknown)
        return false;
    for (size_t i = 0; i < pr->n_groups; i++) {
        const rt_group_t *g = &pr->groups[i];
        if (g->pending > 0 && !g->has_min)
            return false; /* its XPENDING failed: we cannot tell */
        lc_redis_id_t need = lc_redis_id_next(g->last_delivered);
        if (g->has_min && lc_redis_id_cmp(g->min_pending, need) < 0)
            need = g->min_pending;
        if (i == 0 || lc_redis_id_cmp(need, *keep) < 0)
            *keep = need;
    }
    return true;
}

/* Drops entries below the oldest one any group still needs: a slow zone's
 * unread entries stay, whatever the other zones have done. */
static void probe_trim(rt_probe_t *pr)
{
    lc_redis_id_t keep;
    if (!probe_keep_point(pr, &keep))
        return;
    char id[LC_REDIS_ID_MAX];
    lc_redis_id_format(keep, id);
    rt_t *t = pr->t;
    const char *argv[] = {"XTRIM", t->parts[pr->part].stream, "MINID", "~", id};
    if (lc_redis_command(rt_pub_link(t, pr->part), 0, trim_on_reply, t, 5, argv, NULL) != 0)
        LC_LOG_DEBUG("redis: XTRIM not sent (link down)");
}

static void monitor_publish_sums(rt_t *t)
{
    uint64_t pending = 0, lag = 0, backlog = 0;
    for (uint32_t p = 0; p < t->opts.partitions; p++) {
        pending += t->parts[p].pending;
        lag += t->parts[p].lag;
        backlog += t->parts[p].backlog;
    }
    atomic_store(&t->pending_sum, pending);
    atomic_store(&t->lag_sum, lag);
    atomic_store(&t->backlog_sum, backlog);
    if (t->m.pending)
        lc_metric_set(t->m.pending, (double)pending);
    if (t->m.lag)
        lc_metric_set(t->m.lag, (double)lag);
}

/* The stream's backlog is that of its slowest group (pending + lag, or XLEN
 * when Redis cannot tell the lag): back-pressure waits for every zone. With
 * no group yet, everything in the stream is waiting. */
static void probe_sample(const rt_probe_t *pr, rt_part_t *part)
{
    part->pending = 0;
    part->lag = part->backlog = pr->xlen;
    for (size_t i = 0; i < pr->n_groups; i++) {
        const rt_group_t *g = &pr->groups[i];
        uint64_t lag = g->lag_known ? g->lag : pr->xlen;
        uint64_t backlog = g->lag_known ? g->pending + g->lag : pr->xlen;
        if (i == 0 || backlog > part->backlog) {
            part->pending = g->pending;
            part->lag = lag;
            part->backlog = backlog;
        }
    }
}

static void probe_free(rt_probe_t *pr)
{
    for (size_t i = 0; i < pr->n_groups; i++)
        lc_free(pr->groups[i].name);
    lc_free(pr->groups);
    lc_free(pr);
}

static void probe_finish(rt_probe_t *pr)
{
    rt_t *t = pr->t;
    rt_part_t *part = &t->parts[pr->part];
    if (!pr->failed) {
        probe_sample(pr, part);
        part->sent_at_sample = pr->sent_snapshot;
        if (pr->trim)
            probe_trim(pr);
    }
    probe_free(pr);
    if (--t->probes_out == 0)
        monitor_publish_sums(t);
    lc_rt__close_step(t);
}

static void probe_release(rt_probe_t *pr, int status)
{
    if (status)
        pr->failed = true;
    if (--pr->out == 0)
        probe_finish(pr);
}

static void probe_send(rt_probe_t *pr, lc_redis_reply_cb cb, void *data, int argc,
                       const char **argv)
{
    if (lc_redis_command(rt_pub_link(pr->t, pr->part), 0, cb, data, argc, argv, NULL) == 0)
        pr->out++;
    else
        pr->failed = true;
}

static void probe_on_pending(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_group_t *g = data;
    LC_UNUSED(r);
    if (status == 0)
        probe_pending(g, reply);
    probe_release(g->pr, status);
}

/* Trimming needs each group's oldest pending id: XPENDING, sent only now,
 * after XINFO GROUPS answered. That order is what makes trimming safe. */
static void probe_on_groups(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_probe_t *pr = data;
    LC_UNUSED(r);
    if (status == 0)
        probe_groups(pr, reply);
    for (size_t i = 0; status == 0 && pr->trim && i < pr->n_groups; i++) {
        if (pr->groups[i].pending == 0)
            continue;
        const char *pending[] = {"XPENDING", pr->t->parts[pr->part].stream, pr->groups[i].name};
        probe_send(pr, probe_on_pending, &pr->groups[i], 3, pending);
    }
    probe_release(pr, status);
}

static void probe_on_xlen(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_probe_t *pr = data;
    LC_UNUSED(r);
    if (status == 0 && reply->type == REDIS_REPLY_INTEGER)
        pr->xlen = (uint64_t)reply->integer;
    probe_release(pr, status ? status : reply->type == REDIS_REPLY_INTEGER ? 0 : LC_ECORRUPT);
}

/* XINFO GROUPS, then (when trimming) XPENDING per group, and XLEN. */
static void probe_start(rt_t *t, uint32_t p, bool trim)
{
    rt_probe_t *pr = lc_xcalloc(1, sizeof(*pr));
    *pr = (rt_probe_t){.t = t, .part = p, .trim = trim, .sent_snapshot = t->parts[p].xadd_sent};
    const char *stream = t->parts[p].stream;
    const char *groups[] = {"XINFO", "GROUPS", stream};
    const char *xlen[] = {"XLEN", stream};
    t->probes_out++;
    pr->out = 1; /* held while sending */
    probe_send(pr, probe_on_groups, pr, 3, groups);
    probe_send(pr, probe_on_xlen, pr, 2, xlen);
    probe_release(pr, 0);
}

void lc_rt__monitor_on_tick(uv_timer_t *timer)
{
    rt_t *t = LC_CONTAINER_OF(timer, rt_t, monitor_timer);
    if (t->closing || t->probes_out)
        return;
    uint64_t now = uv_now(t->loop);
    bool trim = t->consume && now >= t->trim_due;
    if (trim)
        t->trim_due = now + t->opts.trim_interval_ms;
    for (uint32_t p = 0; p < t->opts.partitions; p++)
        if (lc_redis_is_up(rt_pub_link(t, p)))
            probe_start(t, p, trim);
}
