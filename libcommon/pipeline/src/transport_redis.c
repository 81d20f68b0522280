/*
 * transport_redis.c — the `redis` transport: Redis streams between receivers
 * and writers (ARCHITECTURE.md §2; the contract is in lc/transport.h).
 *
 * Two lc_redis links. `pub` carries XADDs, creates the consumer group on
 * every (re)connect when consuming (XGROUP CREATE ... 0 MKSTREAM: id 0, so
 * entries added before the group existed are still delivered; a publisher
 * creates none, since it cannot know which groups — zones — will read) and
 * runs the monitor: every monitor_interval_ms, per stream, XINFO GROUPS +
 * XLEN (+ XPENDING per group when trimming) give the backlog of the slowest
 * group (pending + lag, or XLEN when Redis cannot tell the lag) and, on
 * consumers, the trim point. `rd` exists only when consuming, because its
 * XREADGROUP BLOCK would stall everything queued behind it.
 *
 * The consumer is a loop-thread state machine that does one step at a time
 * (cons_next): create groups after a reconnect, re-send acks that failed,
 * forget what others claimed from it (after a reconnect: its claims record;
 * after an ack: what that ack found claimed away), read its own pending
 * entries (recovery), claim idle entries of others, or block for new ones. A
 * batch goes to the consumer thread; the ack follows only a 0 from consume.
 * Steps are strictly sequential, so a batch is never read twice by the same
 * consumer while it is being applied, and a forget never overlaps a batch.
 * The one overlap: while a batch is applied, the next one is read ahead
 * (new entries only, into `ahead`, never BLOCK) and taken as a step once the
 * batch is acked (docs/internals/redis.md, "Read ahead").
 *
 * Claims and acks are Lua scripts (CLAIM_LUA, ACK_LUA; the protocol and why
 * XAUTOCLAIM cannot do it are in docs/internals/redis.md, "Claims"). They
 * are sent in full with EVAL each time: a few hundred bytes, and no NOSCRIPT
 * to handle after a Redis restart.
 *
 * Trimming (consumers, every trim_interval_ms): a group's oldest needed
 * entry is its oldest pending id, or the first id after last-delivered-id
 * when nothing is pending; the stream keeps everything from the oldest needed
 * entry of ANY group (every zone has its own group and a full copy), and
 * XTRIM MINID ~ that id only drops entries below it. XINFO GROUPS is read
 * before each group's XPENDING on one link: both only grow, so a delivery
 * between the reads can only make the point conservative.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/redis.h"
#include "lc/transport.h"
#include "transport_dead_int.h"

#define RT_DEFAULT_PARTITIONS 16
#define RT_DEFAULT_PREFIX "ember:ingest:"
#define RT_DEFAULT_GROUP "ingesters"
#define RT_DEFAULT_MAX_BACKLOG 100000
#define RT_DEFAULT_BATCH 256
#define RT_DEFAULT_PUB_LINKS 4
#define RT_DEFAULT_BLOCK_MS 1000
#define RT_DEFAULT_CLAIM_IDLE_MS 60000
#define RT_DEFAULT_CLAIM_INTERVAL_MS 5000
#define RT_DEFAULT_MONITOR_MS 1000
#define RT_DEFAULT_TRIM_MS 5000
#define RT_DEFAULT_CONSUME_RETRY_MS 1000
#define RT_ERROR_PAUSE_MS 200
#define RT_MIN_READ_COUNT 8
/* Bytes one XREADGROUP of new entries aims at: Redis spends about twice the
 * CPU per entry on a 16 MiB reply as on 1-2 MiB ones (measured, 65 KiB
 * entries), so a batch is filled by several moderate reads instead. */
#define RT_READ_BYTES ((uint64_t)2 << 20)
#define RT_MAX_GROUPS 64 /* zones on one stream; past this no trimming */
#define RT_FIELD "m"
#define RT_CLAIMED_PREFIX "ember:claimed:" /* + <group>:<consumer>: a hash of deliveries */

/* Claims, for ARGV[2], the entries of stream KEYS[1] pending in group
 * ARGV[1] for longer than ARGV[3] ms, scanning from after ARGV[4] ("0-0":
 * from the start) at most ARGV[5] of them. Each entry claimed from another
 * consumer is recorded in that consumer's hash (ARGV[6] .. owner) in the same
 * script, so a claim never exists without its record; one claimed back by
 * its old owner loses its record (it is that owner's again). XCLAIM's own
 * min-idle makes a race with the owner's activity harmless. Returns
 * {next cursor ("0-0" at the end), XCLAIM's entries}, like XAUTOCLAIM. */
static const char CLAIM_LUA[] =
    "local s,g,me,idle,n=KEYS[1],ARGV[1],ARGV[2],ARGV[3],tonumber(ARGV[5])\n"
    "local from=ARGV[4]=='0-0' and '-' or '('..ARGV[4]\n"
    "local p=redis.call('XPENDING',s,g,'IDLE',idle,from,'+',n)\n"
    "local got={}\n"
    "for _,e in ipairs(p) do\n"
    "  local c=redis.call('XCLAIM',s,g,me,idle,e[1])\n"
    "  if c[1] then\n"
    "    local f=s..'/'..e[1]\n"
    "    if e[2]~=me then redis.call('HSET',ARGV[6]..e[2],f,1) end\n"
    "    redis.call('HDEL',ARGV[6]..me,f)\n"
    "    got[#got+1]=c[1]\n"
    "  end\n"
    "end\n"
    "return {#p==n and p[#p][1] or '0-0',got}\n";

/* Acks, in stream KEYS[1] and group ARGV[1], the ids ARGV[4..] that are
 * still pending for ARGV[2]; returns those that were claimed away instead
 * (no longer ours and recorded in our claims hash ARGV[3]). An id that is
 * neither (the group was lost with Redis's data) is left alone. */
static const char ACK_LUA[] =
    "local s,g,me,h=KEYS[1],ARGV[1],ARGV[2],ARGV[3]\n"
    "local lost={}\n"
    "for i=4,#ARGV do\n"
    "  local id=ARGV[i]\n"
    "  local p=redis.call('XPENDING',s,g,id,id,1)\n"
    "  if p[1] and p[1][2]==me then redis.call('XACK',s,g,id)\n"
    "  elseif redis.call('HEXISTS',h,s..'/'..id)==1 then lost[#lost+1]=id end\n"
    "end\n"
    "return lost\n";

typedef struct rt_part_s {
    char *stream;
    uint64_t backlog;        /* pending + undelivered at the last sample */
    uint64_t xadd_sent;      /* XADDs sent on pub, ever */
    uint64_t sent_at_sample; /* xadd_sent when the last sample was taken */
    uint64_t pending, lag;
    char cursor[LC_REDIS_ID_MAX];       /* own-PEL recovery: last id read; "" once done */
    char claim_cursor[LC_REDIS_ID_MAX]; /* claim scan position: last id seen */
} rt_part_t;

typedef enum {
    CB_NONE,  /* free to take the next step */
    CB_CMD,   /* a short command is out on rd */
    CB_BLOCK, /* XREADGROUP BLOCK is out on rd */
    CB_APPLY, /* the consumer thread has the batch, or a forget */
    CB_PAUSE, /* retry_timer armed */
} cons_busy_t;

typedef struct rt_metrics_s {
    lc_metric_t *published, *rejected_full, *rejected_down, *publish_failed;
    lc_metric_t *consumed, *consume_failed, *claimed, *trimmed, *forgotten;
    lc_metric_t *pending, *lag, *up, *xadd_seconds;
    lc_metric_t *publish_retries, *publish_duplicates;
    lc_metric_t *phase[3], *batch; /* consumer: seconds by phase (rt_phase_t); batch sizes */
} rt_metrics_t;

/* Where a consumer's time goes: a read (waiting for an XREADGROUP, its
 * BLOCK wait included; a read ahead only once the batch is acked), apply
 * (the consume call), ack (the ack scripts' round trip; a read sent behind
 * them overlaps it). */
typedef enum { RT_PHASE_READ, RT_PHASE_APPLY, RT_PHASE_ACK } rt_phase_t;

typedef struct rt_xadd_s rt_xadd_t;

typedef struct rt_s {
    lc_transport_t base;
    uv_loop_t *loop;
    lc_redis_transport_opts_t opts; /* strings point at the copies below */
    char *url, *prefix, *group, *consumer;
    char *claimed_prefix, *claimed_key; /* ember:claimed:<group>: and ...<consumer> */
    rt_part_t *parts;
    const char **names; /* parts[i].stream, for the decoder */
    lc_redis_t **pubs;  /* stream p publishes on pubs[p % n_pubs] (rt_pub_link) */
    bool *pubs_up;
    uint32_t n_pubs, n_pubs_up;
    lc_redis_t *rd;
    lc_transport_consume_fn consume;
    void *consume_data;

    /* publishes whose outcome is unknown, waiting to be sent again (pub link) */
    rt_xadd_t *parked, **parked_tail;
    uv_timer_t pub_retry_timer;

    /* monitor and trimming (pub link) */
    uv_timer_t monitor_timer;
    int probes_out;
    uint64_t trim_due;

    /* consumer state machine (loop thread; rd link) */
    bool held;    /* opts.hold_consume until lc_transport_redis_release */
    bool settled; /* the first claims record was forgotten (opts.on_settled called) */
    cons_busy_t busy;
    bool need_setup, recovering, ack_pending;
    bool read_behind;        /* an XREADGROUP was sent right behind the acks */
    bool stashed;            /* that read's batch waits for a forget to finish first */
    bool ahead_out;          /* a read ahead (into `ahead`) is in flight */
    bool ahead_wait;         /* the batch is acked: the consumer waits for that read */
    int ahead_rc;            /* how a read ahead failed, for the step that takes it */
    uint64_t phase_start[3]; /* uv_hrtime() when each phase began */
    int setup_out, acks_out;
    bool setup_failed, acks_failed;
    uint32_t claim_part;
    uint64_t claim_due;
    uint32_t read_count;      /* COUNT per stream: recovery, claims, and the cap below */
    uint64_t entry_bytes;     /* mean entry size of the last read that had entries */
    size_t read_from;         /* batch.n when the current read of new entries was sent */
    uint32_t read_count_sent; /* its COUNT */
    lc_redis_entries_t batch;
    lc_redis_entries_t ahead; /* new entries read while the batch is applied and acked */
    lc_transport_msg_t *msgs; /* the batch's applicable entries, for the thread */
    size_t n_msgs, cap_msgs;
    char *deliveries; /* msgs[i].delivery strings, delivery_stride bytes each */
    size_t delivery_stride, cap_deliveries;
    /* Forgetting: deliveries claimed away from this consumer, to be handed to
     * the forget callback, then deleted from the claims record. */
    bool need_claims_load, forget_pending, hdel_pending, job_forget;
    char **forget_ids;
    size_t n_forget, cap_forget;
    uv_timer_t retry_timer;
    lc_dead_t *dead;   /* what consume set aside goes there before the ack */
    bool dead_pending; /* the applied batch has dead letters to write */

    /* consumer thread */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_async_t done_async;
    bool job_ready, job_done, quit, thread_exited; /* guarded by mu */
    int job_rc;                                    /* guarded by mu */
    bool joined;

    /* closing */
    bool closing, finishing;
    size_t xadds_out;
    int refs; /* handles and links still closing */
    void (*close_cb)(void *data);
    void *close_data;

    /* stats: written on the loop thread, read from any */
    atomic_uint_fast64_t published, rejected_full, rejected_down, publish_failed;
    atomic_uint_fast64_t publish_retries, publish_duplicates;
    atomic_uint_fast64_t consumed, consume_failed, claimed, dropped, trimmed, forgotten;
    atomic_uint_fast64_t pending_sum, lag_sum, backlog_sum, xadd_count, xadd_ns_sum, xadd_ns_max;
    atomic_bool pub_up, rd_up;
    rt_metrics_t m;
} rt_t;

static const lc_transport_ops_t rt_ops;

static void cons_next(rt_t *t);
static void rt_close_step(rt_t *t);
static void xadd_retry_parked(rt_t *t);

static void count(atomic_uint_fast64_t *c, lc_metric_t *m, uint64_t n)
{
    atomic_fetch_add(c, n);
    if (m)
        lc_metric_add(m, (double)n);
}

/* ---------------------------------------------------------------- groups */

/* XGROUP CREATE <stream> <group> 0 MKSTREAM; BUSYGROUP means it exists. */
static int group_create(rt_t *t, lc_redis_t *r, uint32_t p, lc_redis_reply_cb cb)
{
    const char *argv[] = {"XGROUP", "CREATE", t->parts[p].stream, t->group, "0", "MKSTREAM"};
    return lc_redis_command(r, 0, cb, t, 6, argv, NULL);
}

static bool group_reply_ok(const redisReply *reply)
{
    return !lc_redis_reply_error(reply) || lc_redis_reply_is_error(reply, "BUSYGROUP");
}

static void pub_on_group(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    LC_UNUSED(data);
    if (status == 0 && !group_reply_ok(reply))
        LC_LOG_ERROR("redis: cannot create the consumer group link=%s err=\"%s\"", lc_redis_name(r),
                     lc_redis_reply_error(reply));
}

/* The link that carries stream p's XADDs and probes: always the same one,
 * so that one stream's XADDs reach Redis in publish order (a series lives
 * in one stream) and a probe's XLEN is ordered with them. */
static lc_redis_t *rt_pub_link(const rt_t *t, uint32_t p)
{
    return t->pubs[p % t->n_pubs];
}

/* Each publish link creates the groups of its own streams (before any
 * resend on it); the transport is up while every publish link is. */
static void pub_on_state(lc_redis_t *r, bool up, void *data)
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
    rt_close_step(t);
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

/* Waits for the link (pub_on_state) or the retry tick, whichever first. */
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

static void xadd_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_xadd_t *x = data;
    rt_t *t = x->t;
    LC_UNUSED(r);
    if (xadd_outcome_unknown(status)) {
        if (!t->opts.publish_retry_ms) {
            xadd_finish(x, LC_REDIS_EDOWN); /* no retries: 503, maybe for a stored message */
        } else if (uv_now(t->loop) < x->deadline_ms) {
            LC_LOG_DEBUG("redis: XADD outcome unknown, will retry err=\"%s\"", lc_strerror(status));
            x->last_status = status;
            xadd_park(t, x);
        } else {
            xadd_give_up(x, status);
        }
        return;
    }
    int rc = xadd_status(status, reply);
    if (rc == 0 && reply->type == REDIS_REPLY_ARRAY) {
        count(&t->publish_duplicates, t->m.publish_duplicates, 1);
        LC_LOG_DEBUG("redis: message already in the stream stream=%s entry=%s",
                     t->parts[x->part].stream, reply->element[0]->str);
    }
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
                     .msg = msg}; /* valid for the one send in rt_publish */
    if (!keep)
        return x;
    uint8_t *copy = (uint8_t *)(x + 1);
    memcpy(copy, msg, len);
    x->msg = copy;
    x->key = (char *)copy + len;
    dedupe_key(t->parts[p].stream, id, id_len, x->key, key_size);
    return x;
}

static int rt_publish(lc_transport_t *base, const uint8_t *msg, size_t len, uint32_t partition,
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
    rt_close_step(t);
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

static void monitor_on_tick(uv_timer_t *timer)
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

/* ---------------------------------------------------------------- consumer: steps */

static void cons_on_pause_end(uv_timer_t *timer)
{
    rt_t *t = LC_CONTAINER_OF(timer, rt_t, retry_timer);
    t->busy = CB_NONE;
    cons_next(t);
}

static void cons_pause(rt_t *t, uint32_t ms)
{
    t->busy = CB_PAUSE;
    uv_timer_start(&t->retry_timer, cons_on_pause_end, ms, 0);
}

/* A step's command failed. Pause before the next step, so that a failure
 * reported synchronously can never turn into a busy loop; while the link is
 * down the pause just ends in cons_next finding it down. */
static void cons_step_failed(rt_t *t, int status, const char *step)
{
    t->busy = CB_NONE;
    if (status == LC_ECLOSED) {
        cons_next(t);
        return;
    }
    if (status != LC_REDIS_ELOST && status != LC_REDIS_EDOWN)
        LC_LOG_WARN("redis consumer: %s failed err=\"%s\"", step, lc_strerror(status));
    cons_pause(t, RT_ERROR_PAUSE_MS);
}

static void cons_step_done(rt_t *t)
{
    t->busy = CB_NONE;
    cons_next(t);
}

static void cons_send(rt_t *t, cons_busy_t busy, uint32_t timeout_ms, lc_redis_reply_cb cb,
                      int argc, const char **argv)
{
    if (lc_redis_command(t->rd, timeout_ms, cb, t, argc, argv, NULL) == 0)
        t->busy = busy;
    /* else the link is going down: rd_on_state(up) calls cons_next again */
}

static void cons_on_group(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    if (status == 0 && !group_reply_ok(reply))
        LC_LOG_ERROR("redis: cannot create the consumer group link=%s err=\"%s\"", lc_redis_name(r),
                     lc_redis_reply_error(reply));
    if (status)
        t->setup_failed = true;
    if (--t->setup_out > 0)
        return;
    t->need_setup = t->setup_failed;
    if (t->setup_failed)
        cons_step_failed(t, status ? status : LC_REDIS_ELOST, "creating the group");
    else
        cons_step_done(t);
}

/* After every reconnect: the group may be gone (Redis restarted without its data). */
static void cons_setup(rt_t *t)
{
    t->setup_out = 0;
    t->setup_failed = false;
    for (uint32_t p = 0; p < t->opts.partitions; p++) {
        if (group_create(t, t->rd, p, cons_on_group) != 0) {
            t->setup_failed = true; /* link going down; what was sent still answers */
            break;
        }
        t->setup_out++;
        t->busy = CB_CMD;
    }
}

/* ---------------------------------------------------------------- consumer: apply and ack */

static void cons_on_dead(int status, void *data)
{
    rt_t *t = data;
    if (status) {
        cons_step_failed(t, status, "writing dead letters");
        return;
    }
    t->dead_pending = false;
    cons_step_done(t);
}

static void cons_dead(rt_t *t)
{
    t->busy = CB_CMD;
    lc_transport__dead_send(t->dead, t->rd, &t->batch, t->names, t->msgs, cons_on_dead, t);
}

static bool cons_may_read_behind(const rt_t *t);
static int cons_send_ahead(rt_t *t);

/* Whether entries read ahead are held or on their way. */
static bool cons_has_ahead(const rt_t *t)
{
    return t->ahead_out || t->ahead.n || t->ahead_rc;
}

/* Hands a batch (or the forget list) to the consumer thread. */
static void cons_post_job(rt_t *t, bool forget)
{
    t->busy = CB_APPLY;
    uv_mutex_lock(&t->mu);
    t->job_forget = forget;
    t->job_ready = true;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->mu);
}

/* Hands the applicable entries to the consumer thread; entries without a
 * message (deleted while pending, foreign writers) are only acked. */
static void cons_apply(rt_t *t)
{
    t->n_msgs = 0;
    t->deliveries = lc_xgrow(t->deliveries, &t->cap_deliveries,
                             (t->batch.n ? t->batch.n : 1) * t->delivery_stride, 1);
    for (size_t i = 0; i < t->batch.n; i++) {
        const lc_redis_entry_t *e = &t->batch.v[i];
        if (!e->data) {
            LC_LOG_WARN("redis consumer: entry without a message, acking it stream=%s id=%s",
                        t->parts[e->stream].stream, e->id);
            count(&t->dropped, NULL, 1);
            continue;
        }
        char *delivery = t->deliveries + t->n_msgs * t->delivery_stride;
        snprintf(delivery, t->delivery_stride, "%s/%s", t->parts[e->stream].stream, e->id);
        t->msgs = lc_xgrow(t->msgs, &t->cap_msgs, t->n_msgs + 1, sizeof(*t->msgs));
        t->msgs[t->n_msgs++] =
            (lc_transport_msg_t){.data = e->data, .len = e->len, .id = e->id, .delivery = delivery};
    }
    if (t->n_msgs == 0) {
        t->ack_pending = true;
        cons_step_done(t);
        return;
    }
    if (t->m.batch)
        lc_metric_observe(t->m.batch, (double)t->n_msgs);
    t->phase_start[RT_PHASE_APPLY] = uv_hrtime();
    cons_post_job(t, false);
    /* Read ahead: the next batch's entries come while this one is applied,
     * when a plain read of new entries would follow anyway. */
    if (!cons_has_ahead(t) && cons_may_read_behind(t))
        (void)cons_send_ahead(t); /* not sent: the link is going down */
}

/* Decoded entries of a read or claim: apply them, or take the next step. */
static void cons_take(rt_t *t)
{
    if (t->batch.n)
        cons_apply(t);
    else
        cons_step_done(t);
}

static void cons_forgot(rt_t *t, int rc);
static int cons_send_read_new(rt_t *t);

static void cons_phase_end(rt_t *t, rt_phase_t phase)
{
    if (t->m.phase[phase])
        lc_metric_add(t->m.phase[phase], (double)(uv_hrtime() - t->phase_start[phase]) / 1e9);
}

static void cons_applied(rt_t *t, int rc)
{
    if (t->job_forget) {
        cons_forgot(t, rc);
        return;
    }
    cons_phase_end(t, RT_PHASE_APPLY);
    if (rc == 0) {
        count(&t->consumed, t->m.consumed, t->n_msgs);
        t->dead_pending = lc_transport__dead_begin(t->dead, t->msgs, t->n_msgs) > 0;
        t->ack_pending = true;
        cons_step_done(t);
        return;
    }
    LC_LOG_ERROR("redis consumer: batch not applied, left pending for redelivery msgs=%zu "
                 "err=\"%s\"",
                 t->n_msgs, lc_strerror(rc));
    count(&t->consume_failed, t->m.consume_failed, t->n_msgs);
    lc_redis_entries_reset(&t->batch);
    cons_pause(t, t->opts.consume_retry_ms);
}

/* Queues a delivery claimed away from this consumer for forgetting. */
static void forget_add(rt_t *t, const char *stream, const char *id, size_t id_len)
{
    size_t len = strlen(stream) + 1 + id_len + 1;
    char *d = lc_xmalloc(len);
    snprintf(d, len, "%s/%.*s", stream, (int)id_len, id);
    t->forget_ids = lc_xgrow(t->forget_ids, &t->cap_forget, t->n_forget + 1, sizeof(char *));
    t->forget_ids[t->n_forget++] = d;
}

static void forget_clear(rt_t *t)
{
    for (size_t i = 0; i < t->n_forget; i++)
        lc_free(t->forget_ids[i]);
    t->n_forget = 0;
}

/* ACK_LUA's reply: the ids of stream p that were claimed away meanwhile. */
static void ack_collect_lost(rt_t *t, uint32_t p, const redisReply *reply)
{
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0)
        return;
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *id = reply->element[i];
        if (id->type == REDIS_REPLY_STRING && id->len < LC_REDIS_ID_MAX)
            forget_add(t, t->parts[p].stream, id->str, id->len);
    }
    LC_LOG_WARN("redis consumer: applied entries were claimed by another consumer meanwhile, "
                "forgetting them stream=%s count=%zu",
                t->parts[p].stream, reply->elements);
}

typedef struct rt_ack_s {
    rt_t *t;
    uint32_t part;
} rt_ack_t;

/* With a read sent behind the acks, the step goes on when that read
 * answers: its reply comes after theirs (one link, in order), and if an ack
 * failed the link dropped, so the read fails too and takes the error path. */
static void cons_acks_done(rt_t *t, int status)
{
    cons_phase_end(t, RT_PHASE_ACK);
    if (!t->acks_failed) {
        t->ack_pending = false;
        lc_redis_entries_reset(&t->batch);
        t->read_from = 0; /* a read behind appends to the emptied batch */
        t->forget_pending = t->n_forget > 0 && t->opts.forget;
        if (!t->opts.forget)
            forget_clear(t);
    }
    if (t->read_behind) {
        t->busy = CB_BLOCK;
        rt_close_step(t);
    } else if (t->acks_failed) {
        cons_step_failed(t, status ? status : LC_REDIS_ELOST, "ack");
        /* ack_pending stays: sent again once the link is up */
    } else {
        cons_step_done(t);
    }
}

/* Whether the step after this ack would be a plain read of new entries, so
 * the read can go out right behind the acks (one round trip saved per
 * batch). Anything cons_next would do first rules it out; what the acks
 * report claimed away is forgotten after the batch that read brings. */
static bool cons_may_read_behind(const rt_t *t)
{
    return !t->closing && !t->need_setup && !t->recovering && !t->held && t->settled &&
           !t->forget_pending && !t->hdel_pending && !t->need_claims_load &&
           uv_now(t->loop) < t->claim_due;
}

static void cons_on_ack(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_ack_t *a = data;
    rt_t *t = a->t;
    LC_UNUSED(r);
    if (status)
        t->acks_failed = true;
    else if (lc_redis_reply_error(reply)) /* NOGROUP: Redis lost the group, nothing to ack */
        LC_LOG_WARN("redis consumer: ack refused err=\"%s\"", lc_redis_reply_error(reply));
    else
        ack_collect_lost(t, a->part, reply);
    lc_free(a);
    if (--t->acks_out == 0)
        cons_acks_done(t, status);
}

/* ACK_LUA for the batch's entries in stream p: EVAL <script> 1 <stream>
 * <group> <consumer> <claims hash> <id>... */
static int cons_ack_stream(rt_t *t, uint32_t p, const char **argv)
{
    const int head = 7;
    int argc = head;
    for (size_t i = 0; i < t->batch.n; i++)
        if (t->batch.v[i].stream == p)
            argv[argc++] = t->batch.v[i].id;
    if (argc == head)
        return 0;
    const char *h[] = {"EVAL",   ACK_LUA,     "1",           t->parts[p].stream,
                       t->group, t->consumer, t->claimed_key};
    memcpy(argv, h, sizeof(h));
    rt_ack_t *a = lc_xmalloc(sizeof(*a));
    *a = (rt_ack_t){t, p};
    int rc = lc_redis_command(t->rd, 0, cons_on_ack, a, argc, argv, NULL);
    if (rc == 0)
        t->acks_out++;
    else
        lc_free(a);
    return rc;
}

static void cons_ack(rt_t *t)
{
    const char **argv = lc_xcalloc(t->batch.n + 7, sizeof(*argv));
    t->phase_start[RT_PHASE_ACK] = uv_hrtime();
    t->acks_out = 1; /* held while sending */
    t->acks_failed = false;
    t->busy = CB_CMD;
    /* A resend after a failure asks again about every entry: the lost ones
     * found by the first try are found again (still recorded). */
    forget_clear(t);
    for (uint32_t p = 0; p < t->opts.partitions; p++) {
        if (cons_ack_stream(t, p, argv) != 0) {
            t->acks_failed = true;
            break;
        }
    }
    lc_free(argv);
    t->read_behind = !t->acks_failed && !cons_has_ahead(t) && cons_may_read_behind(t) &&
                     cons_send_read_new(t) == 0;
    if (--t->acks_out == 0) /* releases the hold */
        cons_acks_done(t, 0);
}

/* ---------------------------------------------------------------- consumer: forgetting */

/* HKEYS of the claims record: everything claimed from this consumer that it
 * has not forgotten yet (a previous life may have applied any of it). */
static void cons_on_claims(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    if (status == 0 && (lc_redis_reply_error(reply) || reply->type != REDIS_REPLY_ARRAY))
        status = LC_ECORRUPT;
    if (status) {
        cons_step_failed(t, status, "reading the claims record");
        return;
    }
    forget_clear(t);
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *f = reply->element[i];
        if (f->type != REDIS_REPLY_STRING || f->len == 0 || f->len > 1024)
            continue;
        char *d = lc_xmalloc(f->len + 1);
        memcpy(d, f->str, f->len);
        d[f->len] = '\0';
        t->forget_ids = lc_xgrow(t->forget_ids, &t->cap_forget, t->n_forget + 1, sizeof(char *));
        t->forget_ids[t->n_forget++] = d;
    }
    if (t->n_forget)
        LC_LOG_INFO("redis consumer: entries were claimed from this consumer, forgetting them "
                    "count=%zu",
                    t->n_forget);
    t->need_claims_load = false;
    t->forget_pending = t->n_forget > 0;
    cons_step_done(t);
}

static void cons_load_claims(rt_t *t)
{
    const char *argv[] = {"HKEYS", t->claimed_key};
    cons_send(t, CB_CMD, 0, cons_on_claims, 2, argv);
}

/* The forget callback returned (consumer thread, via cons_applied). */
static void cons_forgot(rt_t *t, int rc)
{
    if (rc) {
        LC_LOG_ERROR("redis consumer: forgetting failed, will retry count=%zu err=\"%s\"",
                     t->n_forget, lc_strerror(rc));
        cons_pause(t, t->opts.consume_retry_ms); /* forget_pending stays */
        return;
    }
    count(&t->forgotten, t->m.forgotten, t->n_forget);
    t->forget_pending = false;
    t->hdel_pending = true;
    cons_step_done(t);
}

static void cons_on_hdel(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    if (status == 0 && lc_redis_reply_error(reply))
        status = LC_ECORRUPT;
    if (status) {
        cons_step_failed(t, status, "HDEL of the claims record"); /* hdel_pending stays */
        return;
    }
    t->hdel_pending = false;
    forget_clear(t);
    cons_step_done(t);
}

/* Forgotten for good: their fields go (a new claim of the same entry from
 * this consumer would write a new one). */
static void cons_hdel(rt_t *t)
{
    const char **argv = lc_xcalloc(t->n_forget + 2, sizeof(*argv));
    argv[0] = "HDEL";
    argv[1] = t->claimed_key;
    for (size_t i = 0; i < t->n_forget; i++)
        argv[2 + i] = t->forget_ids[i];
    cons_send(t, CB_CMD, 0, cons_on_hdel, (int)(t->n_forget + 2), argv);
    lc_free(argv);
}

/* ---------------------------------------------------------------- consumer: reads */

static int cons_decode_read(rt_t *t, lc_redis_entries_t *into, int status, const redisReply *reply)
{
    if (status)
        return status;
    const char *err = lc_redis_reply_error(reply);
    if (err) {
        /* NOGROUP: the group vanished (Redis lost its data); create it again. */
        LC_LOG_WARN("redis consumer: read refused err=\"%s\"", err);
        t->need_setup = true;
        return LC_ECORRUPT;
    }
    int rc = lc_redis_entries_from_read(into, reply, t->names, t->opts.partitions, RT_FIELD);
    if (rc) {
        LC_LOG_ERROR("redis consumer: malformed XREADGROUP reply");
        lc_redis_entries_reset(into);
    }
    return rc;
}

/* COUNT per stream for a read of new entries: about RT_READ_BYTES in all,
 * going by the last entries seen, at most read_count. */
static uint32_t cons_new_count(const rt_t *t)
{
    if (!t->entry_bytes)
        return t->read_count;
    uint64_t total = RT_READ_BYTES / t->entry_bytes, n = t->opts.partitions;
    uint64_t per = (total + n - 1) / n;
    return per < 1 ? 1 : per < t->read_count ? (uint32_t)per : t->read_count;
}

/* Whether the last read returned COUNT entries from some stream (each
 * stream's entries are contiguous in the reply): more may be waiting. */
static bool cons_read_was_full(const lc_redis_entries_t *e, size_t from, uint32_t count)
{
    size_t run = 0;
    for (size_t i = from; i < e->n; i++) {
        run = i > from && e->v[i].stream == e->v[i - 1].stream ? run + 1 : 1;
        if (run >= count)
            return true;
    }
    return false;
}

static int cons_send_read(rt_t *t, bool block);

/* A read of new entries answered. The batch is filled by further reads
 * (without BLOCK) while the last one came back full and the batch is below
 * opts.batch: moderate replies for Redis, large batches for the writer. */
static void cons_on_read_new(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    t->read_behind = false;
    cons_phase_end(t, RT_PHASE_READ);
    size_t from = t->read_from;
    size_t bytes_before = t->batch.bytes;
    int rc = cons_decode_read(t, &t->batch, status, reply);
    if (rc == 0 && t->batch.n > from)
        t->entry_bytes = (t->batch.bytes - bytes_before) / (t->batch.n - from);
    uint32_t count = (uint32_t)t->read_count_sent;
    if (rc == 0 && !t->closing && !t->ack_pending && t->batch.n < t->opts.batch &&
        cons_read_was_full(&t->batch, from, count) && cons_send_read(t, false) == 0)
        return; /* busy stays: the fill read answers here again */
    if (rc && t->batch.n && !t->ack_pending) {
        /* A fill read failed: apply what the earlier reads brought. */
        LC_LOG_WARN("redis consumer: XREADGROUP failed, applying the entries read so far "
                    "err=\"%s\"",
                    lc_strerror(rc));
        cons_take(t);
    } else if (rc) {
        cons_step_failed(t, rc, "XREADGROUP");
    } else if (t->batch.n && (t->forget_pending || t->hdel_pending)) {
        /* A read behind acks that found entries claimed away: forget those
         * first, as without the read ahead (cons_next applies it after). */
        t->stashed = true;
        cons_step_done(t);
    } else {
        cons_take(t);
    }
}

/* XREADGROUP [BLOCK] over every stream: new entries only (">"), appended to
 * `into` by cb. 0 when sent. */
static int cons_send_read_to(rt_t *t, bool block, lc_redis_reply_cb cb,
                             const lc_redis_entries_t *into)
{
    uint32_t n = t->opts.partitions;
    const char **argv = lc_xcalloc(9 + 2 * (size_t)n, sizeof(*argv));
    char count_s[16], block_s[16];
    uint32_t count = cons_new_count(t);
    snprintf(count_s, sizeof(count_s), "%u", count);
    snprintf(block_s, sizeof(block_s), "%u", t->opts.block_ms);
    const char *head[] = {"XREADGROUP", "GROUP", t->group, t->consumer, "COUNT",
                          count_s,      "BLOCK", block_s,  "STREAMS"};
    memcpy(argv, head, sizeof(head));
    int at = block ? 9 : 7;
    if (!block)
        argv[6] = "STREAMS";
    for (uint32_t p = 0; p < n; p++) {
        argv[at + p] = t->parts[p].stream;
        argv[at + n + p] = ">";
    }
    uint32_t timeout = block ? t->opts.block_ms + t->opts.cmd_timeout_ms : 0;
    int rc = lc_redis_command(t->rd, timeout, cb, t, (int)(at + 2 * n), argv, NULL);
    lc_free(argv);
    if (rc == 0) {
        t->read_from = into->n;
        t->read_count_sent = count;
    }
    return rc;
}

static int cons_send_read(rt_t *t, bool block)
{
    int rc = cons_send_read_to(t, block, cons_on_read_new, &t->batch);
    if (rc == 0)
        t->phase_start[RT_PHASE_READ] = uv_hrtime();
    return rc;
}

static void cons_on_read_ahead(lc_redis_t *r, int status, const redisReply *reply, void *data);

/* A read ahead, without BLOCK (an empty stream answers at once, so the acks
 * sent behind it on the link are not held up). Never out together with
 * another read: reads of the batch happen only while nothing is applied. */
static int cons_send_ahead(rt_t *t)
{
    int rc = cons_send_read_to(t, false, cons_on_read_ahead, &t->ahead);
    t->ahead_out = rc == 0;
    return rc;
}

/* A read ahead answered. Like a batch's reads, it is followed by fill reads
 * while it comes back full and `ahead` is below opts.batch. A failure is
 * kept for the step that takes the entries (cons_take_ahead), which applies
 * what earlier reads brought, as a failed fill read does. */
static void cons_on_read_ahead(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    t->ahead_out = false;
    size_t from = t->read_from;
    size_t bytes_before = t->ahead.bytes;
    int rc = cons_decode_read(t, &t->ahead, status, reply);
    if (rc == 0 && t->ahead.n > from)
        t->entry_bytes = (t->ahead.bytes - bytes_before) / (t->ahead.n - from);
    if (t->closing) {
        /* Abandoned like a blocking read: pending for this consumer id. */
        lc_redis_entries_reset(&t->ahead);
    } else if (rc == 0 && t->ahead.n < t->opts.batch &&
               cons_read_was_full(&t->ahead, from, t->read_count_sent) && cons_send_ahead(t) == 0) {
        return; /* the fill read answers here again */
    } else if (rc) {
        t->ahead_rc = rc;
    }
    if (t->ahead_wait) {
        t->ahead_wait = false;
        cons_phase_end(t, RT_PHASE_READ);
        cons_step_done(t); /* cons_next takes the entries (cons_take_ahead) */
    }
}

/* The batch is acked and a read ahead is still out: wait for it. The wait is
 * the consumer's read phase; like a blocking read, close does not wait. */
static void cons_wait_ahead(rt_t *t)
{
    t->ahead_wait = true;
    t->busy = CB_BLOCK;
    t->phase_start[RT_PHASE_READ] = uv_hrtime();
}

/* The entries read ahead become the batch (empty here: taken only once the
 * previous one is acked, or dropped after a failed apply). */
static void cons_take_ahead(rt_t *t)
{
    int rc = t->ahead_rc;
    t->ahead_rc = 0;
    lc_redis_entries_t next = t->ahead;
    t->ahead = t->batch;
    t->batch = next;
    if (rc && !t->batch.n) {
        cons_step_failed(t, rc, "XREADGROUP");
        return;
    }
    if (rc)
        LC_LOG_WARN("redis consumer: XREADGROUP failed, applying the entries read so far "
                    "err=\"%s\"",
                    lc_strerror(rc));
    cons_take(t);
}

static int cons_send_read_new(rt_t *t)
{
    return cons_send_read(t, true);
}

static void cons_read_new(rt_t *t)
{
    if (cons_send_read_new(t) == 0)
        t->busy = CB_BLOCK;
    /* else the link is going down: rd_on_state(up) calls cons_next again */
}

static void cons_on_read_own(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    int rc = cons_decode_read(t, &t->batch, status, reply);
    if (rc) {
        cons_step_failed(t, rc, "reading own pending entries");
        return;
    }
    /* A stream that returned nothing is recovered; the others continue after their last id. */
    bool *seen = lc_xcalloc(t->opts.partitions, sizeof(*seen));
    for (size_t i = 0; i < t->batch.n; i++) {
        rt_part_t *part = &t->parts[t->batch.v[i].stream];
        snprintf(part->cursor, sizeof(part->cursor), "%s", t->batch.v[i].id);
        seen[t->batch.v[i].stream] = true;
    }
    t->recovering = false;
    for (uint32_t p = 0; p < t->opts.partitions; p++) {
        if (!seen[p])
            t->parts[p].cursor[0] = '\0';
        t->recovering |= t->parts[p].cursor[0] != '\0';
    }
    lc_free(seen);
    cons_take(t);
}

/* XREADGROUP ... <id>: this consumer's own pending entries after each cursor. */
static void cons_read_own(rt_t *t)
{
    uint32_t n = t->opts.partitions, k = 0;
    const char **argv = lc_xcalloc(7 + 2 * (size_t)n, sizeof(*argv));
    char count_s[16];
    snprintf(count_s, sizeof(count_s), "%u", t->read_count);
    const char *head[] = {"XREADGROUP", "GROUP", t->group, t->consumer,
                          "COUNT",      count_s, "STREAMS"};
    memcpy(argv, head, sizeof(head));
    for (uint32_t p = 0; p < n; p++)
        if (t->parts[p].cursor[0])
            argv[7 + k++] = t->parts[p].stream;
    for (uint32_t p = 0, j = 0; p < n; p++)
        if (t->parts[p].cursor[0])
            argv[7 + k + j++] = t->parts[p].cursor;
    cons_send(t, CB_CMD, 0, cons_on_read_own, (int)(7 + 2 * k), argv);
    lc_free(argv);
}

/* Moves the claim scan on: next stream once a cursor wraps, and rest after a full round. */
static void cons_claim_advance(rt_t *t, const redisReply *next)
{
    rt_part_t *part = &t->parts[t->claim_part];
    lc_redis_id_t id = {0, 0};
    if (next->type == REDIS_REPLY_STRING && lc_redis_id_parse(next->str, next->len, &id) == 0 &&
        (id.ms || id.seq)) {
        snprintf(part->claim_cursor, sizeof(part->claim_cursor), "%.*s", (int)next->len, next->str);
        return;
    }
    snprintf(part->claim_cursor, sizeof(part->claim_cursor), "0-0");
    if (++t->claim_part == t->opts.partitions) {
        t->claim_part = 0;
        t->claim_due = uv_now(t->loop) + t->opts.claim_interval_ms;
    }
}

static void cons_on_claim(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    int rc = status;
    if (rc == 0 && (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2))
        rc = LC_ECORRUPT; /* also an error reply, e.g. NOGROUP */
    if (rc == 0)
        rc = lc_redis_entries_from_array(&t->batch, reply->element[1], t->claim_part, RT_FIELD);
    if (rc) {
        lc_redis_entries_reset(&t->batch);
        t->claim_due = uv_now(t->loop) + t->opts.claim_interval_ms;
        cons_step_failed(t, rc, "claiming");
        return;
    }
    if (t->batch.n) {
        LC_LOG_INFO("redis consumer: claimed idle entries stream=%s count=%zu",
                    t->parts[t->claim_part].stream, t->batch.n);
        count(&t->claimed, t->m.claimed, t->batch.n);
    }
    cons_claim_advance(t, reply->element[0]);
    cons_take(t);
}

/* CLAIM_LUA: entries any consumer (this one included: a batch that failed)
 * left pending too long, each recorded for the consumer it was taken from. */
static void cons_claim(rt_t *t)
{
    rt_part_t *part = &t->parts[t->claim_part];
    char idle_s[16], count_s[16];
    snprintf(idle_s, sizeof(idle_s), "%u", t->opts.claim_idle_ms);
    snprintf(count_s, sizeof(count_s), "%u", t->read_count);
    const char *argv[] = {"EVAL",   CLAIM_LUA,        "1",    part->stream,
                          t->group, t->consumer,      idle_s, part->claim_cursor,
                          count_s,  t->claimed_prefix};
    cons_send(t, CB_CMD, 0, cons_on_claim, 10, argv);
}

static void cons_apply_stashed(rt_t *t)
{
    t->stashed = false;
    cons_apply(t);
}

/* Nothing claimed away is left to forget: says so once (on_settled). The
 * callback may release the hold at once; that call's cons_next then runs
 * the next step, so this one must not. Returns false when it called it. */
static bool cons_settled(rt_t *t)
{
    if (t->settled)
        return true;
    t->settled = true;
    if (!t->opts.on_settled)
        return true;
    t->opts.on_settled(t->opts.state_data);
    return false;
}

/* The one place that decides what the consumer does next. Holding
 * (hold_consume) stops it before the reads, not before the claims record
 * of a previous life is forgotten. */
static void cons_next(rt_t *t)
{
    if (t->busy != CB_NONE)
        return;
    bool up = lc_redis_is_up(t->rd);
    if (t->closing && !(t->ack_pending && up)) {
        rt_close_step(t); /* the applied batch is acked before closing */
        return;
    }
    if (!up)
        return; /* rd_on_state(up) calls again */
    if (t->need_setup)
        cons_setup(t);
    else if (t->dead_pending) /* before the ack: see transport_redis_dead.c */
        cons_dead(t);
    else if (t->ack_pending)
        cons_ack(t);
    else if (t->forget_pending)
        cons_post_job(t, true);
    else if (t->hdel_pending)
        cons_hdel(t);
    else if (t->stashed)
        cons_apply_stashed(t);
    else if (t->ahead_out)
        cons_wait_ahead(t);
    else if (t->ahead.n || t->ahead_rc)
        cons_take_ahead(t);
    else if (t->need_claims_load)
        cons_load_claims(t);
    else if (!cons_settled(t) || t->held)
        return; /* lc_transport_redis_release calls again */
    else if (t->recovering)
        cons_read_own(t);
    else if (uv_now(t->loop) >= t->claim_due)
        cons_claim(t);
    else
        cons_read_new(t);
}

static void rd_on_state(lc_redis_t *r, bool up, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    atomic_store(&t->rd_up, up);
    if (!up)
        return;
    t->need_setup = true;
    t->recovering = true;
    if (t->stashed) { /* still pending for us: recovery reads them again */
        t->stashed = false;
        lc_redis_entries_reset(&t->batch);
    }
    lc_redis_entries_reset(&t->ahead); /* the same (a read ahead failed with the link) */
    t->ahead_rc = 0;
    t->need_claims_load = t->opts.forget != NULL; /* before reading anything */
    for (uint32_t p = 0; p < t->opts.partitions; p++) {
        snprintf(t->parts[p].cursor, sizeof(t->parts[p].cursor), "0");
        snprintf(t->parts[p].claim_cursor, sizeof(t->parts[p].claim_cursor), "0-0");
    }
    t->claim_part = 0;
    cons_next(t);
}

void lc_transport_redis_release(lc_transport_t *base)
{
    if (!base || base->ops != &rt_ops)
        return;
    rt_t *t = (rt_t *)base;
    if (!t->held)
        return;
    t->held = false;
    if (t->consume && !t->closing)
        cons_next(t);
}

/* ---------------------------------------------------------------- consumer thread */

static void cons_thread_main(void *arg)
{
    rt_t *t = arg;
    uv_mutex_lock(&t->mu);
    for (;;) {
        while (!t->job_ready && !t->quit)
            uv_cond_wait(&t->cond, &t->mu);
        if (!t->job_ready)
            break; /* quit, and nothing left to apply */
        t->job_ready = false;
        uv_mutex_unlock(&t->mu);
        int rc = t->job_forget ? t->opts.forget((const char *const *)t->forget_ids, t->n_forget,
                                                t->consume_data)
                               : t->consume(t->msgs, t->n_msgs, t->consume_data);
        uv_mutex_lock(&t->mu);
        t->job_rc = rc;
        t->job_done = true;
        uv_async_send(&t->done_async);
    }
    t->thread_exited = true;
    uv_mutex_unlock(&t->mu);
    uv_async_send(&t->done_async);
}

static void rt_unref(rt_t *t);

static void rt_on_handle_closed(uv_handle_t *h)
{
    rt_unref(h->data);
}

/* Loop thread: a batch came back from consume, or the thread ended. */
static void cons_on_done(uv_async_t *a)
{
    rt_t *t = a->data;
    uv_mutex_lock(&t->mu);
    bool done = t->job_done, exited = t->thread_exited;
    int rc = t->job_rc;
    t->job_done = false;
    uv_mutex_unlock(&t->mu);
    if (done)
        cons_applied(t, rc);
    if (exited && !t->joined) {
        uv_thread_join(&t->thread);
        t->joined = true;
        uv_close((uv_handle_t *)&t->done_async, rt_on_handle_closed);
    }
}

/* ---------------------------------------------------------------- closing */

static void rt_free(rt_t *t)
{
    for (uint32_t p = 0; p < t->opts.partitions; p++)
        lc_free(t->parts[p].stream);
    lc_free(t->parts);
    lc_free(t->names);
    lc_free(t->pubs);
    lc_free(t->pubs_up);
    lc_redis_entries_fini(&t->batch);
    lc_redis_entries_fini(&t->ahead);
    lc_free(t->msgs);
    lc_free(t->deliveries);
    forget_clear(t);
    lc_free(t->forget_ids);
    lc_free(t->claimed_prefix);
    lc_free(t->claimed_key);
    lc_free(t->url);
    lc_free(t->prefix);
    lc_free(t->group);
    lc_free(t->consumer);
    lc_transport__dead_free(t->dead);
    if (t->consume) {
        uv_mutex_destroy(&t->mu);
        uv_cond_destroy(&t->cond);
    }
    lc_free(t);
}

static void rt_unref(rt_t *t)
{
    if (--t->refs > 0)
        return;
    void (*cb)(void *) = t->close_cb;
    void *data = t->close_data;
    rt_free(t);
    if (cb)
        cb(data);
}

static void rt_on_link_closed(void *data)
{
    rt_unref(data);
}

/* Everything that must end before the links close: XADDs in flight, monitor
 * probes, and a batch being applied or acked. A blocking read is abandoned:
 * what it delivered stays pending for this consumer id (or a claimer). */
static bool rt_quiet(const rt_t *t)
{
    return t->xadds_out == 0 && t->probes_out == 0 && t->acks_out == 0 &&
           (t->busy == CB_NONE || t->busy == CB_BLOCK || t->busy == CB_PAUSE);
}

static void rt_close_step(rt_t *t)
{
    if (!t->closing || t->finishing || !rt_quiet(t))
        return;
    t->finishing = true;
    t->refs = 2 + (int)t->n_pubs; /* monitor timer + publish retry timer + pub links */
    uv_close((uv_handle_t *)&t->monitor_timer, rt_on_handle_closed);
    uv_close((uv_handle_t *)&t->pub_retry_timer, rt_on_handle_closed);
    for (uint32_t i = 0; i < t->n_pubs; i++)
        lc_redis_close(t->pubs[i], rt_on_link_closed, t);
    if (!t->consume)
        return;
    t->refs += 3; /* rd link, retry timer, async (after the join) */
    uv_close((uv_handle_t *)&t->retry_timer, rt_on_handle_closed);
    lc_redis_close(t->rd, rt_on_link_closed, t);
    uv_mutex_lock(&t->mu);
    t->quit = true;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->mu);
}

static void rt_close(lc_transport_t *base, void (*cb)(void *data), void *data)
{
    rt_t *t = (rt_t *)base;
    if (t->closing)
        return;
    t->closing = true;
    t->close_cb = cb;
    t->close_data = data;
    rt_close_step(t);
}

/* ---------------------------------------------------------------- stats */

static void rt_stats(lc_transport_t *base, lc_transport_stats_t *out)
{
    rt_t *t = (rt_t *)base;
    out->published = atomic_load(&t->published);
    out->consumed = atomic_load(&t->consumed);
    out->failed = atomic_load(&t->publish_failed) + atomic_load(&t->consume_failed);
    out->backlog_msgs = atomic_load(&t->backlog_sum);
    out->backlog_bytes = 0; /* Redis does not tell cheaply */
}

int lc_transport_redis_stats(lc_transport_t *base, lc_redis_transport_stats_t *out)
{
    if (!base || base->ops != &rt_ops)
        return LC_EINPUT;
    rt_t *t = (rt_t *)base;
    *out = (lc_redis_transport_stats_t){
        .up = atomic_load(&t->pub_up),
        .consumer_up = atomic_load(&t->rd_up),
        .published = atomic_load(&t->published),
        .rejected_full = atomic_load(&t->rejected_full),
        .rejected_down = atomic_load(&t->rejected_down),
        .publish_failed = atomic_load(&t->publish_failed),
        .publish_retries = atomic_load(&t->publish_retries),
        .publish_duplicates = atomic_load(&t->publish_duplicates),
        .consumed = atomic_load(&t->consumed),
        .consume_failed = atomic_load(&t->consume_failed),
        .claimed = atomic_load(&t->claimed),
        .dropped = atomic_load(&t->dropped),
        .trimmed = atomic_load(&t->trimmed),
        .forgotten = atomic_load(&t->forgotten),
        .dead_letters = lc_transport__dead_count(t->dead),
        .pending = atomic_load(&t->pending_sum),
        .lag = atomic_load(&t->lag_sum),
        .backlog = atomic_load(&t->backlog_sum),
        .xadd_count = atomic_load(&t->xadd_count),
        .xadd_seconds_sum = (double)atomic_load(&t->xadd_ns_sum) / 1e9,
        .xadd_seconds_max = (double)atomic_load(&t->xadd_ns_max) / 1e9,
    };
    return 0;
}

static const lc_transport_ops_t rt_ops = {
    .publish = rt_publish,
    .stats = rt_stats,
    .close = rt_close,
    .lean_entries = true,
};

/* ---------------------------------------------------------------- construction */

static void rt_register_metrics(rt_t *t, lc_metrics_t *m)
{
    if (!m)
        return;
    t->m.published = lc_metrics_counter(m, "ember_redis_published_total",
                                        "Messages whose XADD Redis confirmed", "");
    t->m.rejected_full = lc_metrics_counter(m, "ember_redis_publish_rejected_total",
                                            "Publishes refused at once", "reason=\"backlog\"");
    t->m.rejected_down = lc_metrics_counter(m, "ember_redis_publish_rejected_total",
                                            "Publishes refused at once", "reason=\"redis_down\"");
    t->m.publish_failed = lc_metrics_counter(m, "ember_redis_publish_failed_total",
                                             "XADDs that failed or timed out", "");
    t->m.publish_retries =
        lc_metrics_counter(m, "ember_redis_publish_retries_total",
                           "XADD scripts sent again after an unknown outcome", "");
    t->m.publish_duplicates =
        lc_metrics_counter(m, "ember_redis_publish_duplicates_total",
                           "Publishes whose message id was already in the stream", "");
    t->m.consumed = lc_metrics_counter(m, "ember_redis_consumed_total",
                                       "Messages applied and acknowledged", "");
    t->m.consume_failed = lc_metrics_counter(m, "ember_redis_consume_failed_total",
                                             "Messages of batches that failed to apply", "");
    t->m.claimed = lc_metrics_counter(m, "ember_redis_claimed_total",
                                      "Idle pending entries claimed (recorded per owner)", "");
    t->m.forgotten =
        lc_metrics_counter(m, "ember_redis_forgotten_total",
                           "Entries claimed from this consumer that it then forgot", "");
    t->m.trimmed = lc_metrics_counter(m, "ember_redis_trimmed_total",
                                      "Stream entries trimmed below the oldest needed", "");
    t->m.pending = lc_metrics_gauge(m, "ember_redis_stream_pending",
                                    "Entries delivered but not acknowledged (all streams)", "");
    t->m.lag = lc_metrics_gauge(m, "ember_redis_stream_lag",
                                "Entries not yet delivered to the group (all streams)", "");
    t->m.up = lc_metrics_gauge(m, "ember_redis_up", "1 while the Redis publish link is up", "");
    t->m.xadd_seconds = lc_metrics_histogram(m, "ember_redis_xadd_duration_seconds",
                                             "XADD round trip until Redis confirmed", "", NULL, 0);
    if (!t->consume)
        return;
    static const char *const phases[] = {"read", "apply", "ack"};
    for (size_t i = 0; i < LC_ARRAY_LEN(phases); i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "phase=\"%s\"", phases[i]);
        t->m.phase[i] = lc_metrics_counter(
            m, "ember_redis_consumer_phase_seconds_total",
            "Consumer time by phase: read (waiting for XREADGROUP, its BLOCK wait "
            "included; a read ahead counts only after the ack), apply (the consume call), "
            "ack (the ack scripts; a read sent behind them overlaps)",
            labels);
    }
    static const double bounds[] = {1, 4, 16, 64, 256, 1024};
    t->m.batch = lc_metrics_histogram(m, "ember_redis_consume_batch_entries",
                                      "Entries per batch handed to the consumer", "", bounds,
                                      LC_ARRAY_LEN(bounds));
}

static void rt_defaults(lc_redis_transport_opts_t *o)
{
    o->partitions = o->partitions ? o->partitions : RT_DEFAULT_PARTITIONS;
    o->max_backlog = o->max_backlog ? o->max_backlog : RT_DEFAULT_MAX_BACKLOG;
    o->batch = o->batch ? o->batch : RT_DEFAULT_BATCH;
    o->publish_links = o->publish_links ? o->publish_links : RT_DEFAULT_PUB_LINKS;
    o->block_ms = o->block_ms ? o->block_ms : RT_DEFAULT_BLOCK_MS;
    o->claim_idle_ms = o->claim_idle_ms ? o->claim_idle_ms : RT_DEFAULT_CLAIM_IDLE_MS;
    o->claim_interval_ms =
        o->claim_interval_ms ? o->claim_interval_ms : RT_DEFAULT_CLAIM_INTERVAL_MS;
    o->monitor_interval_ms =
        o->monitor_interval_ms ? o->monitor_interval_ms : RT_DEFAULT_MONITOR_MS;
    o->trim_interval_ms = o->trim_interval_ms ? o->trim_interval_ms : RT_DEFAULT_TRIM_MS;
    o->consume_retry_ms = o->consume_retry_ms ? o->consume_retry_ms : RT_DEFAULT_CONSUME_RETRY_MS;
    o->cmd_timeout_ms = o->cmd_timeout_ms ? o->cmd_timeout_ms : 5000;
    /* publish_retry_ms 0: bare XADDs, no retry, no dedupe key. */
    /* A retry runs at most publish_retry_ms + cmd_timeout_ms after the first
     * attempt (later, its caller was already told 503): twice that is ample. */
    uint64_t ttl = 2 * ((uint64_t)o->publish_retry_ms + o->cmd_timeout_ms);
    if (o->publish_retry_ms && !o->dedupe_ttl_ms)
        o->dedupe_ttl_ms = ttl > UINT32_MAX ? UINT32_MAX : (uint32_t)ttl;
}

static bool rt_opts_valid(const lc_redis_transport_opts_t *o, bool consuming)
{
    lc_redis_url_t url;
    if (!o || lc_redis_url_parse(o->url, &url) != 0)
        return false;
    if (consuming && (!o->consumer_id || !o->consumer_id[0]))
        return false;
    return o->partitions <= 4096;
}

static void rt_make_streams(rt_t *t)
{
    uint32_t n = t->opts.partitions;
    t->parts = lc_xcalloc(n, sizeof(*t->parts));
    t->names = lc_xcalloc(n, sizeof(*t->names));
    for (uint32_t p = 0; p < n; p++) {
        size_t len = strlen(t->prefix) + 12;
        t->parts[p].stream = lc_xmalloc(len);
        snprintf(t->parts[p].stream, len, "%s%u", t->prefix, p);
        t->names[p] = t->parts[p].stream;
    }
    /* COUNT is per stream in XREADGROUP: spread the batch over the streams. */
    uint32_t per = (t->opts.batch + n - 1) / n;
    t->read_count = per < RT_MIN_READ_COUNT ? RT_MIN_READ_COUNT : per;
}

/* Claims records are per group (zones have their own) and per consumer. */
static void rt_make_claim_keys(rt_t *t)
{
    size_t len = strlen(RT_CLAIMED_PREFIX) + strlen(t->group) + 2;
    t->claimed_prefix = lc_xmalloc(len);
    snprintf(t->claimed_prefix, len, "%s%s:", RT_CLAIMED_PREFIX, t->group);
    const char *me = t->consumer ? t->consumer : "";
    len += strlen(me);
    t->claimed_key = lc_xmalloc(len);
    snprintf(t->claimed_key, len, "%s%s", t->claimed_prefix, me);
    t->delivery_stride = strlen(t->prefix) + 12 + 1 + LC_REDIS_ID_MAX;
}

static lc_redis_t *rt_link(rt_t *t, const char *role, lc_redis_state_cb on_state)
{
    char name[160];
    snprintf(name, sizeof(name), "ember-%s%s%s", role, t->consumer ? "-" : "",
             t->consumer ? t->consumer : "");
    lc_redis_opts_t ro = {.url = t->url,
                          .name = name,
                          .cmd_timeout_ms = t->opts.cmd_timeout_ms,
                          .on_state = on_state,
                          .state_data = t};
    lc_redis_t *r = NULL;
    LC_ASSERT(lc_redis_new(t->loop, &ro, &r) == 0); /* the URL was validated */
    return r;
}

/* The thread only waits until a batch or the quit flag is posted, so it may
 * start before the handles it will use exist. */
static int rt_start_thread(rt_t *t)
{
    int rc = uv_mutex_init(&t->mu);
    if (rc)
        return rc;
    rc = uv_cond_init(&t->cond);
    if (!rc)
        rc = uv_thread_create(&t->thread, cons_thread_main, t);
    if (rc) {
        uv_cond_destroy(&t->cond); /* harmless if its init failed: never waited on */
        uv_mutex_destroy(&t->mu);
    }
    return rc;
}

static void rt_start_consumer(rt_t *t)
{
    uv_timer_init(t->loop, &t->retry_timer);
    uv_async_init(t->loop, &t->done_async, cons_on_done);
    t->retry_timer.data = t->done_async.data = t;
    t->rd = rt_link(t, "consumer", rd_on_state);
}

int lc_transport_redis_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                           lc_transport_consume_fn consume, void *data, lc_transport_t **out)
{
    if (!rt_opts_valid(opts, consume != NULL))
        return LC_EINPUT;
    rt_t *t = lc_xcalloc(1, sizeof(*t));
    t->base.ops = &rt_ops;
    t->loop = loop;
    t->opts = *opts;
    rt_defaults(&t->opts);
    t->url = lc_xstrdup(opts->url);
    t->prefix = lc_xstrdup(opts->stream_prefix ? opts->stream_prefix : RT_DEFAULT_PREFIX);
    t->group = lc_xstrdup(opts->group ? opts->group : RT_DEFAULT_GROUP);
    t->consumer = consume ? lc_xstrdup(opts->consumer_id) : NULL;
    t->opts.url = t->opts.stream_prefix = t->opts.group = t->opts.consumer_id = NULL;
    t->consume = consume;
    t->consume_data = data;
    t->held = opts->hold_consume;
    rt_make_streams(t);
    rt_make_claim_keys(t);
    int rc = consume ? rt_start_thread(t) : 0;
    if (rc) {
        t->consume = NULL; /* rt_free must not destroy what failed to exist */
        rt_free(t);
        return rc;
    }
    rt_register_metrics(t, opts->metrics);
    if (consume)
        t->dead = lc_transport__dead_new(opts->dead_prefix, opts->dead_max_len, t->consumer,
                                         opts->metrics);
    uv_timer_init(loop, &t->monitor_timer);
    t->monitor_timer.data = t;
    uint32_t every = t->opts.monitor_interval_ms;
    uv_timer_start(&t->monitor_timer, monitor_on_tick, every, every);
    uv_timer_init(loop, &t->pub_retry_timer);
    t->pub_retry_timer.data = t;
    t->parked_tail = &t->parked;
    t->n_pubs =
        t->opts.publish_links < t->opts.partitions ? t->opts.publish_links : t->opts.partitions;
    t->pubs = lc_xcalloc(t->n_pubs, sizeof(*t->pubs));
    t->pubs_up = lc_xcalloc(t->n_pubs, sizeof(*t->pubs_up));
    for (uint32_t i = 0; i < t->n_pubs; i++)
        t->pubs[i] = rt_link(t, "publisher", pub_on_state);
    if (consume)
        rt_start_consumer(t);
    *out = &t->base;
    return 0;
}
