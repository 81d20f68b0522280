/*
 * transport_redis_publish.c — the `redis` transport's publish job: XADDs on
 * the publish links (stream p always on link p % n), through the dedupe
 * script when retries are on, parking a message whose outcome is unknown and
 * sending it again until its deadline; and each publish link's state, which
 * (re)creates the consumer groups of its streams on a consumer. Loop thread
 * only. A finished XADD may be what a close waits for (lc_rt__close_step).
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

static void xadd_retry_parked(rt_t *t);

static void pub_on_group(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    LC_UNUSED(data);
    if (status == 0 && !group_reply_ok(reply))
        LC_LOG_ERROR("redis: cannot create the consumer group link=%s err=\"%s\"", lc_redis_name(r),
                     lc_redis_reply_error(reply));
}

/* Each publish link creates the groups of its own streams (before any
 * resend on it); the transport is up while every publish link is. */
void lc_rt__pub_on_state(lc_redis_t *r, bool up, void *data)
{
    rt_t *t = data;
    uint32_t i = 0;
    while (i < t->n_pubs && t->pubs[i] != r)
        i++;
    if (i == t->n_pubs || t->pubs_up[i] == up)
        return;
    t->pubs_up[i] = up;
    bool was_up = t->n_pubs_up == t->n_pubs;
    t->n_pubs_up = up ? t->n_pubs_up + 1 : t->n_pubs_up - 1;
    bool all_up = t->n_pubs_up == t->n_pubs;
    for (uint32_t p = i; up && t->consume && p < t->opts.partitions; p += t->n_pubs)
        if (group_create(t, r, p, pub_on_group) != 0)
            break;
    if (up && t->parked)
        xadd_retry_parked(t); /* after the groups: a stream it recreates keeps them */
    if (all_up == was_up)
        return;
    atomic_store(&t->pub_up, all_up);
    if (t->m.up)
        lc_metric_set(t->m.up, all_up ? 1 : 0);
    if (t->opts.on_state)
        t->opts.on_state(all_up, t->opts.state_data);
}

/* ---------------------------------------------------------------- publish */

/* KEYS[1] = dedupe key, KEYS[2] = stream; ARGV = ttl ms, field, message.
 * A known id answers {entry id} (an array: already in the stream); a new one
 * is XADDed and remembered, answering the entry id (a string). One script,
 * so no other client can slip between the check and the XADD. The XADD is
 * the first write: when Redis is out of memory it refuses it and nothing
 * changes. */
static const char PUBLISH_LUA[] = "local seen = redis.call('GET', KEYS[1])\n"
                                  "if seen then return {seen} end\n"
                                  "local id = redis.call('XADD', KEYS[2], '*', ARGV[2], ARGV[3])\n"
                                  "redis.call('SET', KEYS[1], id, 'PX', ARGV[1])\n"
                                  "return id\n";

/* One message from publish until its callback. With retries it keeps a
 * copy of the message and its dedupe key, so that an unknown outcome can be
 * sent again; without, it is sent once, from the caller's buffer. */
struct rt_xadd_s {
    rt_t *t;
    lc_transport_publish_cb cb;
    void *data;
    struct rt_xadd_s *next; /* in t->parked */
    uint64_t start_ns;
    uint64_t deadline_ms; /* loop time: past it an unknown outcome is a failure */
    uint32_t part;
    int last_status; /* why it was parked */
    size_t len;
    const uint8_t *msg; /* the copy after this struct, or (no retries) the caller's */
    char *key;          /* NUL-terminated, after the copy; NULL without retries */
};

/* Status of a definite answer. An error reply: OOM means Redis is full (back
 * off, 429); anything else 503. */
static int xadd_status(int status, const redisReply *reply)
{
    if (status)
        return status;
    if (lc_redis_reply_is_error(reply, "OOM"))
        return LC_EFULL;
    if (lc_redis_reply_error(reply))
        return LC_REDIS_EDOWN;
    if (reply->type == REDIS_REPLY_STRING)
        return 0;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
        reply->element[0]->type == REDIS_REPLY_STRING)
        return 0; /* a duplicate */
    return LC_ECORRUPT;
}

/* The link dropped or the command timed out in flight: Redis may or may not
 * have run the script. */
static bool xadd_outcome_unknown(int status)
{
    return status == LC_REDIS_ELOST || status == LC_ETIMEOUT;
}

static void xadd_observe(rt_t *t, uint64_t ns)
{
    atomic_fetch_add(&t->xadd_count, 1);
    atomic_fetch_add(&t->xadd_ns_sum, ns);
    uint_fast64_t max = atomic_load(&t->xadd_ns_max);
    while (ns > max && !atomic_compare_exchange_weak(&t->xadd_ns_max, &max, ns))
        ;
    if (t->m.xadd_seconds)
        lc_metric_observe(t->m.xadd_seconds, (double)ns / 1e9);
}

static void xadd_finish(rt_xadd_t *x, int rc)
{
    rt_t *t = x->t;
    if (rc == 0) {
        xadd_observe(t, uv_hrtime() - x->start_ns);
        count(&t->published, t->m.published, 1);
    } else {
        count(&t->publish_failed, t->m.publish_failed, 1);
        LC_LOG_DEBUG("redis: XADD failed err=\"%s\"", lc_strerror(rc));
    }
    x->cb(rc, x->data);
    lc_free(x);
    t->xadds_out--;
    lc_rt__close_step(t);
}

static void xadd_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data);
static void pub_on_retry_tick(uv_timer_t *timer);

/* Still unknown at the deadline: the receiver answers 503, although Redis
 * may hold the message (the window docs/internals/redis.md describes). */
static void xadd_give_up(rt_xadd_t *x, int last_status)
{
    LC_LOG_WARN("redis: XADD outcome still unknown at the retry deadline stream=%s err=\"%s\"",
                x->t->parts[x->part].stream, lc_strerror(last_status));
    xadd_finish(x, LC_REDIS_EDOWN);
}

/* With retries, the dedupe script; without, a bare XADD (the script copies
 * the message into Lua and back: several times the Redis CPU). */
static int xadd_send(rt_xadd_t *x)
{
    rt_t *t = x->t;
    const char *stream = t->parts[x->part].stream;
    if (!t->opts.publish_retry_ms) {
        const char *argv[] = {"XADD", stream, "*", RT_FIELD, (const char *)x->msg};
        const size_t lens[] = {4, strlen(stream), 1, strlen(RT_FIELD), x->len};
        return lc_redis_command(rt_pub_link(t, x->part), 0, xadd_on_reply, x, 5, argv, lens);
    }
    char ttl[16];
    snprintf(ttl, sizeof(ttl), "%u", t->opts.dedupe_ttl_ms);
    const char *argv[] = {"EVAL", PUBLISH_LUA, "2",      x->key,
                          stream, ttl,         RT_FIELD, (const char *)x->msg};
    const size_t lens[] = {
        4,           sizeof(PUBLISH_LUA) - 1, 1,     strlen(x->key), strlen(stream),
        strlen(ttl), strlen(RT_FIELD),        x->len};
    return lc_redis_command(rt_pub_link(t, x->part), 0, xadd_on_reply, x, 8, argv, lens);
}

/* Waits for the link (lc_rt__pub_on_state) or the retry tick, whichever first. */
static void xadd_park(rt_t *t, rt_xadd_t *x)
{
    x->next = NULL;
    *t->parked_tail = x;
    t->parked_tail = &x->next;
    if (!uv_is_active((uv_handle_t *)&t->pub_retry_timer))
        uv_timer_start(&t->pub_retry_timer, pub_on_retry_tick, RT_ERROR_PAUSE_MS,
                       RT_ERROR_PAUSE_MS);
}

/* Sends the parked messages again, oldest first, and fails those past their
 * deadline. A send refused because the link went down again parks it anew. */
static void xadd_retry_parked(rt_t *t)
{
    rt_xadd_t *x = t->parked;
    t->parked = NULL;
    t->parked_tail = &t->parked;
    uint64_t now = uv_now(t->loop);
    while (x) {
        rt_xadd_t *next = x->next;
        if (now >= x->deadline_ms)
            xadd_give_up(x, x->last_status);
        else if (!lc_redis_is_up(rt_pub_link(t, x->part)) || xadd_send(x) != 0)
            xadd_park(t, x);
        else
            count(&t->publish_retries, t->m.publish_retries, 1);
        x = next;
    }
    if (!t->parked && !t->finishing)
        uv_timer_stop(&t->pub_retry_timer);
}

static void pub_on_retry_tick(uv_timer_t *timer)
{
    xadd_retry_parked(LC_CONTAINER_OF(timer, rt_t, pub_retry_timer));
}

/* The outcome is unknown: Redis may hold the message, or it is not yet on
 * enough replicas. With retries it is parked and sent again (the dedupe
 * script then finds it); without, the caller gets 503. */
static void xadd_unknown(rt_xadd_t *x, int status)
{
    rt_t *t = x->t;
    if (!t->opts.publish_retry_ms) {
        xadd_finish(x, LC_REDIS_EDOWN); /* no retries: 503, maybe for a stored message */
    } else if (uv_now(t->loop) < x->deadline_ms) {
        LC_LOG_DEBUG("redis: XADD outcome unknown, will retry err=\"%s\"", lc_strerror(status));
        x->last_status = status;
        xadd_park(t, x);
    } else {
        xadd_give_up(x, status);
    }
}

/* WAIT's answer: the number of replicas that have every write this link
 * sent before it, the XADD included. Fewer than asked for within the WAIT
 * timeout: a failover now could lose the entry, so it is not acknowledged. */
static void xadd_on_wait(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_xadd_t *x = data;
    LC_UNUSED(r);
    if (xadd_outcome_unknown(status)) {
        xadd_unknown(x, status);
    } else if (status || lc_redis_reply_error(reply) || reply->type != REDIS_REPLY_INTEGER) {
        xadd_finish(x, status ? status : LC_REDIS_EDOWN);
    } else if (reply->integer < (long long)x->t->opts.wait_replicas) {
        count(&x->t->wait_short, x->t->m.wait_short, 1);
        LC_LOG_DEBUG("redis: XADD confirmed by too few replicas stream=%s replicas=%lld",
                     x->t->parts[x->part].stream, reply->integer);
        xadd_unknown(x, LC_ETIMEOUT);
    } else {
        xadd_finish(x, 0);
    }
}

/* WAIT <replicas> <timeout> on the XADD's link, right behind it. */
static void xadd_wait_replicas(rt_xadd_t *x)
{
    rt_t *t = x->t;
    char n[16], ms[16];
    snprintf(n, sizeof(n), "%u", t->opts.wait_replicas);
    snprintf(ms, sizeof(ms), "%u", t->opts.wait_timeout_ms);
    const char *argv[] = {"WAIT", n, ms};
    int rc =
        lc_redis_command(rt_pub_link(t, x->part), t->opts.wait_timeout_ms + t->opts.cmd_timeout_ms,
                         xadd_on_wait, x, 3, argv, NULL);
    if (rc)
        xadd_unknown(x, LC_REDIS_ELOST); /* the link went down after the XADD */
}

static void xadd_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_xadd_t *x = data;
    rt_t *t = x->t;
    LC_UNUSED(r);
    if (xadd_outcome_unknown(status)) {
        xadd_unknown(x, status);
        return;
    }
    int rc = xadd_status(status, reply);
    if (rc == 0 && reply->type == REDIS_REPLY_ARRAY) {
        count(&t->publish_duplicates, t->m.publish_duplicates, 1);
        LC_LOG_DEBUG("redis: message already in the stream stream=%s entry=%s",
                     t->parts[x->part].stream, reply->element[0]->str);
    }
    if (rc == 0 && t->opts.wait_replicas)
        xadd_wait_replicas(x);
    else
        xadd_finish(x, rc);
}

static bool part_full(const rt_t *t, const rt_part_t *part)
{
    return part->backlog + (part->xadd_sent - part->sent_at_sample) >= t->opts.max_backlog;
}

/* True when the stream name has a Redis Cluster hash tag ("{...}" with
 * something inside): then any key containing the same first tag shares its slot. */
static bool has_hash_tag(const char *s)
{
    const char *open = strchr(s, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    return close && close > open + 1;
}

/* {<stream>}:dedupe:<hex id> hashes like the stream itself (its whole name,
 * having no tag), so the script's two keys live in one cluster slot. */
static void dedupe_key(const char *stream, const uint8_t *id, size_t id_len, char *out, size_t size)
{
    int n = has_hash_tag(stream) ? snprintf(out, size, "%s:dedupe:", stream)
                                 : snprintf(out, size, "{%s}:dedupe:", stream);
    static const char hex[] = "0123456789abcdef";
    size_t at = (size_t)n;
    for (size_t i = 0; i < id_len && at + 2 < size; i++) {
        out[at++] = hex[id[i] >> 4];
        out[at++] = hex[id[i] & 15];
    }
    out[at] = 0;
}

static rt_xadd_t *xadd_new(rt_t *t, uint32_t p, const uint8_t *msg, size_t len, const uint8_t *id,
                           size_t id_len)
{
    bool keep = t->opts.publish_retry_ms > 0;
    size_t key_size = keep ? strlen(t->parts[p].stream) + sizeof("{}:dedupe:") + 2 * id_len : 0;
    rt_xadd_t *x = lc_xmalloc(sizeof(*x) + (keep ? len + key_size : 0));
    *x = (rt_xadd_t){.t = t,
                     .start_ns = uv_hrtime(),
                     .deadline_ms = uv_now(t->loop) + t->opts.publish_retry_ms,
                     .part = p,
                     .len = len,
                     .msg = msg}; /* valid for the one send in lc_rt__publish */
    if (!keep)
        return x;
    uint8_t *copy = (uint8_t *)(x + 1);
    memcpy(copy, msg, len);
    x->msg = copy;
    x->key = (char *)copy + len;
    dedupe_key(t->parts[p].stream, id, id_len, x->key, key_size);
    return x;
}

int lc_rt__publish(lc_transport_t *base, const uint8_t *msg, size_t len, uint32_t partition,
                   const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data)
{
    rt_t *t = (rt_t *)base;
    uint32_t p = partition % t->opts.partitions;
    if (!id || id_len == 0 || id_len > LC_TRANSPORT_ID_MAX)
        return LC_EINPUT;
    if (t->closing)
        return LC_ECLOSED;
    if (!lc_redis_is_up(rt_pub_link(t, p))) {
        count(&t->rejected_down, t->m.rejected_down, 1);
        return LC_REDIS_EDOWN;
    }
    if (part_full(t, &t->parts[p])) {
        count(&t->rejected_full, t->m.rejected_full, 1);
        return LC_EFULL;
    }
    rt_xadd_t *x = xadd_new(t, p, msg, len, id, id_len);
    x->cb = cb;
    x->data = data;
    int rc = xadd_send(x);
    if (rc) {
        lc_free(x);
        return rc;
    }
    t->parts[p].xadd_sent++;
    t->xadds_out++;
    return 0;
}
