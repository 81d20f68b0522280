/*
 * transport_redis_consumer.c — the `redis` transport's consumer: the
 * loop-thread state machine on the rd link that takes one step at a time
 * (lc_rt__cons_next: groups, acks, forgetting, recovery, claims, reads and
 * reads ahead; transport_redis.c's header comment describes the steps) and
 * the consumer thread that applies a batch (or a forget) and posts the
 * result back through done_async. The two share only the fields of rt_t
 * "guarded by mu" and the batch between job_ready and job_done.
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "transport_redis_int.h"

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

/* ---------------------------------------------------------------- consumer: steps */

static void cons_on_pause_end(uv_timer_t *timer)
{
    rt_t *t = LC_CONTAINER_OF(timer, rt_t, retry_timer);
    t->busy = CB_NONE;
    lc_rt__cons_next(t);
}

static void cons_pause(rt_t *t, uint32_t ms)
{
    t->busy = CB_PAUSE;
    uv_timer_start(&t->retry_timer, cons_on_pause_end, ms, 0);
}

/* A step's command failed. Pause before the next step, so that a failure
 * reported synchronously can never turn into a busy loop; while the link is
 * down the pause just ends in lc_rt__cons_next finding it down. */
static void cons_step_failed(rt_t *t, int status, const char *step)
{
    t->busy = CB_NONE;
    if (status == LC_ECLOSED) {
        lc_rt__cons_next(t);
        return;
    }
    if (status != LC_REDIS_ELOST && status != LC_REDIS_EDOWN)
        LC_LOG_WARN("redis consumer: %s failed err=\"%s\"", step, lc_strerror(status));
    cons_pause(t, RT_ERROR_PAUSE_MS);
}

static void cons_step_done(rt_t *t)
{
    t->busy = CB_NONE;
    lc_rt__cons_next(t);
}

static void cons_send(rt_t *t, cons_busy_t busy, uint32_t timeout_ms, lc_redis_reply_cb cb,
                      int argc, const char **argv)
{
    if (lc_redis_command(t->rd, timeout_ms, cb, t, argc, argv, NULL) == 0)
        t->busy = busy;
    /* else the link is going down: lc_rt__rd_on_state(up) calls lc_rt__cons_next again */
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

static void cons_wait_replicas(rt_t *t);

/* Decoded entries of a read or claim: apply them, or take the next step.
 * With wait_replicas, the deliveries must reach a replica first. */
static void cons_take(rt_t *t)
{
    if (!t->batch.n) {
        cons_step_done(t);
    } else if (t->opts.wait_replicas) {
        t->wait_pending = true;
        cons_wait_replicas(t);
    } else {
        cons_apply(t);
    }
}

/* WAIT's answer for a batch read (or claimed) but not applied yet. */
static void cons_on_wait(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_t *t = data;
    LC_UNUSED(r);
    if (status == 0 && reply->type == REDIS_REPLY_INTEGER &&
        reply->integer >= (long long)t->opts.wait_replicas) {
        t->wait_pending = false;
        t->busy = CB_NONE;
        cons_apply(t);
        return;
    }
    /* Too few replicas, or the link dropped: retried after a pause; after a
     * reconnect the batch is dropped and read again (lc_rt__rd_on_state). */
    count(&t->wait_short, t->m.wait_short, 1);
    cons_step_failed(t, status ? status : LC_ETIMEOUT, "waiting for replicas");
}

/* The deliveries of the batch (XREADGROUP's or the claim script's writes to
 * the group) must be on a replica before it is applied: a failover that lost
 * them would deliver the entries again, maybe to another consumer, and the
 * profile would be stored twice. The link's earlier writes are all covered. */
static void cons_wait_replicas(rt_t *t)
{
    char n[16], ms[16];
    snprintf(n, sizeof(n), "%u", t->opts.wait_replicas);
    snprintf(ms, sizeof(ms), "%u", t->opts.wait_timeout_ms);
    const char *argv[] = {"WAIT", n, ms};
    cons_send(t, CB_CMD, t->opts.wait_timeout_ms + t->opts.cmd_timeout_ms, cons_on_wait, 3, argv);
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
            lc_rt__forget_clear(t);
    }
    if (t->read_behind) {
        t->busy = CB_BLOCK;
        lc_rt__close_step(t);
    } else if (t->acks_failed) {
        cons_step_failed(t, status ? status : LC_REDIS_ELOST, "ack");
        /* ack_pending stays: sent again once the link is up */
    } else {
        cons_step_done(t);
    }
}

/* Whether the step after this ack would be a plain read of new entries, so
 * the read can go out right behind the acks (one round trip saved per
 * batch). Anything lc_rt__cons_next would do first rules it out; what the acks
 * report claimed away is forgotten after the batch that read brings. */
static bool cons_may_read_behind(const rt_t *t)
{
    return !t->closing && !t->need_setup && !t->recovering && !t->held && t->settled &&
           !t->forget_pending && !t->hdel_pending && !t->need_claims_load &&
           uv_now(t->loop) < t->claim_due;
}

/* Redis Cluster refuses commands while a master is being failed over
 * (CLUSTERDOWN, TRYAGAIN) or when the link reached a node that no longer
 * owns the slot (MOVED; the link reconnects), and any Redis while it loads
 * its data (LOADING): the ack did not run and must be sent again, or the
 * entries would be claimed by another consumer and applied twice. */
static bool ack_refused_for_now(const redisReply *reply)
{
    static const char *const transient[] = {"CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "LOADING"};
    for (size_t i = 0; i < LC_ARRAY_LEN(transient); i++)
        if (lc_redis_reply_is_error(reply, transient[i]))
            return true;
    return false;
}

static void cons_on_ack(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    rt_ack_t *a = data;
    rt_t *t = a->t;
    LC_UNUSED(r);
    if (status || ack_refused_for_now(reply))
        t->acks_failed = true;            /* sent again: the entries are still ours */
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
    lc_rt__forget_clear(t);
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
    lc_rt__forget_clear(t);
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
    lc_rt__forget_clear(t);
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
         * first, as without the read ahead (lc_rt__cons_next applies it after). */
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
        cons_step_done(t); /* lc_rt__cons_next takes the entries (cons_take_ahead) */
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
    /* else the link is going down: lc_rt__rd_on_state(up) calls lc_rt__cons_next again */
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
 * callback may release the hold at once; that call's lc_rt__cons_next then runs
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
void lc_rt__cons_next(rt_t *t)
{
    if (t->busy != CB_NONE)
        return;
    bool up = lc_redis_is_up(t->rd);
    if (t->closing && !(t->ack_pending && up)) {
        lc_rt__close_step(t); /* the applied batch is acked before closing */
        return;
    }
    if (!up)
        return; /* lc_rt__rd_on_state(up) calls again */
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
    else if (t->wait_pending)
        cons_wait_replicas(t);
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

void lc_rt__rd_on_state(lc_redis_t *r, bool up, void *data)
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
    if (t->wait_pending) { /* the same: a batch not applied yet */
        t->wait_pending = false;
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
    lc_rt__cons_next(t);
}

/* ---------------------------------------------------------------- consumer thread */

void lc_rt__cons_thread_main(void *arg)
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

/* Loop thread: a batch came back from consume, or the thread ended. */
void lc_rt__cons_on_done(uv_async_t *a)
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
        uv_close((uv_handle_t *)&t->done_async, lc_rt__on_handle_closed);
    }
}
