/*
 * members.c — group membership in a Redis hash (contract in lc/members.h).
 *
 * Expiry times are Redis server milliseconds, computed inside Lua scripts
 * from TIME, so the hosts' clocks never meet. Heartbeat and list share one
 * link and one timer; each is in flight at most once. The list read returns
 * the server's now with the whole hash, so "expired" is judged on one clock
 * too. Lists are kept sorted by id, which makes the change check and the
 * join/leave log a single merge walk.
 *
 * The zone registry (<key>:registry, field id = zone) is written by the
 * heartbeat script itself, so a member is registered before it is ever seen
 * live, and never expires: only an operator's HDEL removes an id. The list
 * script returns it with the live hash, one consistent read.
 *
 * Notes (<key>:notes, field id = "<until ms>|<text>", until 0 = no end) say
 * what an id lacks: the heartbeat script records the member's lost_note only
 * when the id was registered before (a previous life existed), in the same
 * call that makes it live, so no watcher ever sees it live without its note.
 * Like the registry they outlive the member; a watcher prunes ended ones.
 *
 * Marks (<key>:marks, field id = "<generation>|<ms>"), issue 27: below its
 * mark a querier reads the member's blocks from the bucket. Written only by
 * the member (lc_members_set_mark), read with the registry; they outlive the
 * member too, so a dead ingester's history stays readable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/labels.h"
#include "lc/log.h"
#include "lc/members.h"
#include "lc/redis.h"
#include "lc/redis_cluster.h"

#define MEMBERS_DEFAULT_HEARTBEAT_MS 1000
#define MEMBERS_DEFAULT_TTL_MS 5000
#define MEMBERS_DEFAULT_TIMEOUT_MS 2000
#define MEMBERS_DEFAULT_PREFIX "ember:members:"
#define MEMBERS_REGISTRY_SUFFIX ":registry"
#define MEMBERS_NOTES_SUFFIX ":notes"
#define MEMBERS_MARKS_SUFFIX ":marks"

/* KEYS[1] hash, ARGV id, addr, ttl_ms: field = "addr|expiry" on Redis's clock.
 * With KEYS[2] (the registry), KEYS[3] (the notes) and ARGV[4] (the zone),
 * also registers id in the zone; ARGV[5] (a lost note, "" = none) is
 * recorded when id was registered before, standing ARGV[6] ms (0 = no end).
 * Returns {0, '', noted} (nothing new), {1, '', noted} (registered now) or
 * {2, old zone, noted} (moved from another zone); noted is 1 when the note
 * was recorded. Without a registry: {0, ''}. */
static const char HEARTBEAT_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local v = ARGV[2] .. '|' .. string.format('%.0f', now + tonumber(ARGV[3]))\n"
    "redis.call('HSET', KEYS[1], ARGV[1], v)\n"
    "if #KEYS < 2 then return {0, ''} end\n"
    "local old = redis.call('HGET', KEYS[2], ARGV[1])\n"
    "local noted = 0\n"
    "if old and ARGV[5] ~= '' then\n"
    "  local ttl = tonumber(ARGV[6])\n"
    "  local untl = ttl > 0 and string.format('%.0f', now + ttl) or '0'\n"
    "  redis.call('HSET', KEYS[3], ARGV[1], untl .. '|' .. ARGV[5])\n"
    "  noted = 1\n"
    "end\n"
    "if old == ARGV[4] then return {0, '', noted} end\n"
    "redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])\n"
    "if old then return {2, old, noted} end\n"
    "return {1, '', noted}\n";

/* KEYS[1] hash, KEYS[2] registry, KEYS[3] notes, KEYS[4] marks:
 * {now_ms, {field, value, ...}, {id, zone, ...}, {id, note, ...}, {id, mark, ...}}. */
static const char LIST_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "return {string.format('%.0f', now), redis.call('HGETALL', KEYS[1]),\n"
    "        redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]),\n"
    "        redis.call('HGETALL', KEYS[4])}\n";

/* KEYS[1] marks, ARGV id, ms, lower ("1"/"0"): sets id's mark to ms with the
 * next generation; lower only moves an existing mark down (without one the
 * id has none: queriers ask it for everything). Returns 1 when it wrote. The
 * ms are whole numbers well inside a double's 53 bits. */
static const char MARK_LUA[] =
    "local old = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "local gen, ms = 0, nil\n"
    "if old then\n"
    "  local bar = string.find(old, '|', 1, true)\n"
    "  if bar then gen = tonumber(string.sub(old, 1, bar - 1)) or 0;"
    " ms = tonumber(string.sub(old, bar + 1)) end\n"
    "end\n"
    "if ARGV[3] == '1' and (not ms or ms <= tonumber(ARGV[2])) then return 0 end\n"
    "redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', gen + 1) .. '|' .. ARGV[2])\n"
    "return 1\n";

/* KEYS[1] hash, ARGV id, value: delete the field only if it still holds value. */
static const char PRUNE_LUA[] = "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then\n"
                                "  return redis.call('HDEL', KEYS[1], ARGV[1])\n"
                                "end\n"
                                "return 0\n";

struct lc_members_s {
    uv_loop_t *loop;
    lc_members_opts_t opts; /* strings point at the copies below */
    char *role, *self_id, *self_addr, *zone, *key, *registry_key, *notes_key, *marks_key;
    char *lost_note; /* sent with every heartbeat until one succeeded; NULL after */
    lc_redis_t *redis;
    lc_redis_cluster_t *cluster; /* opts.cluster: routes redis to the key's master */
    uv_timer_t timer;
    uint64_t next_beat, next_list; /* uv_now() ms */
    bool beat_out, list_out, listed_once, beat_failing;
    lc_member_t *live; /* sorted by id; strings owned */
    size_t n_live;
    lc_member_t *registry; /* every registered id, sorted; addr ""; strings owned */
    size_t n_registry;
    bool closing;
    int refs; /* timer + link while closing */
    void (*close_cb)(void *data);
    void *close_data;
};

/* ---------------------------------------------------------------- lists */

static void list_free(lc_member_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        lc_free((char *)v[i].id);
        lc_free((char *)v[i].addr);
        lc_free((char *)v[i].zone);
        lc_free((char *)v[i].note);
    }
    lc_free(v);
}

static int member_cmp(const void *a, const void *b)
{
    return strcmp(((const lc_member_t *)a)->id, ((const lc_member_t *)b)->id);
}

static bool list_equal(const lc_member_t *a, size_t na, const lc_member_t *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].id, b[i].id) != 0 || strcmp(a[i].addr, b[i].addr) != 0 ||
            strcmp(a[i].zone, b[i].zone) != 0 || strcmp(a[i].note, b[i].note) != 0 ||
            a[i].mark_ms != b[i].mark_ms || a[i].mark_gen != b[i].mark_gen)
            return false;
    return true;
}

/* One merge walk over two sorted lists: log who joined, left or moved. */
static void list_log_changes(const lc_members_t *m, const lc_member_t *old, size_t n_old,
                             const lc_member_t *cur, size_t n_cur)
{
    size_t i = 0, j = 0;
    while (i < n_old || j < n_cur) {
        int c = i == n_old ? 1 : j == n_cur ? -1 : strcmp(old[i].id, cur[j].id);
        if (c < 0) {
            LC_LOG_INFO("member left role=%s id=%s addr=%s", m->role, old[i].id, old[i].addr);
            i++;
        } else if (c > 0) {
            LC_LOG_INFO("member joined role=%s id=%s addr=%s note=\"%s\"", m->role, cur[j].id,
                        cur[j].addr, cur[j].note);
            j++;
        } else {
            if (strcmp(old[i].addr, cur[j].addr) != 0)
                LC_LOG_INFO("member moved role=%s id=%s addr=%s", m->role, cur[j].id, cur[j].addr);
            if (strcmp(old[i].note, cur[j].note) != 0)
                LC_LOG_INFO("member note role=%s id=%s note=\"%s\"", m->role, cur[j].id,
                            cur[j].note);
            i++;
            j++;
        }
    }
}

/* One merge walk over two sorted registries: log who was registered,
 * removed (by an operator) or moved to another zone. */
static void registry_log_changes(const lc_members_t *m, const lc_member_t *old, size_t n_old,
                                 const lc_member_t *cur, size_t n_cur)
{
    size_t i = 0, j = 0;
    while (i < n_old || j < n_cur) {
        int c = i == n_old ? 1 : j == n_cur ? -1 : strcmp(old[i].id, cur[j].id);
        if (c < 0) {
            LC_LOG_WARN("member removed from the registry role=%s id=%s zone=\"%s\"", m->role,
                        old[i].id, old[i].zone);
            i++;
        } else if (c > 0) {
            LC_LOG_INFO("member registered role=%s id=%s zone=\"%s\"", m->role, cur[j].id,
                        cur[j].zone);
            j++;
        } else {
            if (strcmp(old[i].zone, cur[j].zone) != 0)
                LC_LOG_WARN("member changed zone role=%s id=%s from=\"%s\" to=\"%s\"", m->role,
                            cur[j].id, old[i].zone, cur[j].zone);
            i++;
            j++;
        }
    }
}

/* The zone a live member is registered in ("" when it is not: a member
 * that registers nothing, e.g. an older version, counts in the default zone). */
static const char *registry_zone(const lc_member_t *reg, size_t n, const char *id)
{
    lc_member_t key = {.id = id};
    const lc_member_t *hit = bsearch(&key, reg, n, sizeof(*reg), member_cmp);
    return hit ? hit->zone : "";
}

/* Takes ownership of cur and reg; calls on_change on the first list and on
 * every change of either. */
static void list_install(lc_members_t *m, lc_member_t *cur, size_t n_cur, lc_member_t *reg,
                         size_t n_reg)
{
    qsort(cur, n_cur, sizeof(*cur), member_cmp);
    qsort(reg, n_reg, sizeof(*reg), member_cmp);
    for (size_t i = 0; i < n_cur; i++)
        cur[i].zone = lc_xstrdup(registry_zone(reg, n_reg, cur[i].id));
    bool first = !m->listed_once;
    if (!first && list_equal(m->live, m->n_live, cur, n_cur) &&
        list_equal(m->registry, m->n_registry, reg, n_reg)) {
        list_free(cur, n_cur);
        list_free(reg, n_reg);
        return;
    }
    list_log_changes(m, m->live, m->n_live, cur, n_cur);
    if (!first)
        registry_log_changes(m, m->registry, m->n_registry, reg, n_reg);
    list_free(m->live, m->n_live);
    list_free(m->registry, m->n_registry);
    m->live = cur;
    m->n_live = n_cur;
    m->registry = reg;
    m->n_registry = n_reg;
    m->listed_once = true;
    if (m->opts.on_change)
        m->opts.on_change(m, m->live, m->n_live, m->opts.change_data);
}

/* ---------------------------------------------------------------- redis replies */

static void prune_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    LC_UNUSED(r);
    LC_UNUSED(data);
    if (status == 0 && lc_redis_reply_error(reply))
        LC_LOG_WARN("members: prune refused err=\"%s\"", lc_redis_reply_error(reply));
}

static void prune(lc_members_t *m, const char *key, const redisReply *field,
                  const redisReply *value)
{
    const char *argv[] = {"EVAL", PRUNE_LUA, "1", key, field->str, value->str};
    const size_t lens[] = {4, strlen(PRUNE_LUA), 1, strlen(key), field->len, value->len};
    if (lc_redis_command(m->redis, 0, prune_on_reply, m, 6, argv, lens) != 0)
        LC_LOG_DEBUG("members: prune not sent (link down)");
}

/* Milliseconds as Redis prints them: 1 to 20 digits. */
static bool parse_ms(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* "addr|expiry": alive at now? addr_len gets the address's length. */
static bool field_alive(const redisReply *value, uint64_t now, size_t *addr_len)
{
    const char *bar = NULL;
    for (size_t i = 0; i < value->len; i++)
        if (value->str[i] == '|')
            bar = value->str + i;
    uint64_t expiry;
    if (!bar || !parse_ms(bar + 1, value->len - (size_t)(bar - value->str) - 1, &expiry))
        return false;
    *addr_len = (size_t)(bar - value->str);
    return expiry > now;
}

/* The registry's flat [id, zone, ...] as members (addr ""). */
static lc_member_t *registry_parse(const redisReply *flat, size_t *n_out)
{
    lc_member_t *reg = lc_xcalloc(flat->elements / 2 + 1, sizeof(*reg));
    size_t n = 0;
    for (size_t i = 0; i + 1 < flat->elements; i += 2) {
        const redisReply *f = flat->element[i], *v = flat->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        reg[n].id = lc_xstrndup(f->str, f->len);
        reg[n].addr = lc_xstrdup("");
        reg[n].zone = lc_xstrndup(v->str, v->len);
        reg[n].note = lc_xstrdup("");
        n++;
    }
    *n_out = n;
    return reg;
}

/* "until|text": the text when the note stands at now (until 0 = no end). */
static bool note_standing(const redisReply *value, uint64_t now, const char **text,
                          size_t *text_len)
{
    const char *bar = memchr(value->str, '|', value->len);
    uint64_t until;
    if (!bar || !parse_ms(value->str, (size_t)(bar - value->str), &until))
        return false;
    *text = bar + 1;
    *text_len = value->len - (size_t)(bar - value->str) - 1;
    return until == 0 || until > now;
}

/* Each live member's standing note ("" without one); ended or malformed
 * notes are pruned. */
static void notes_apply(lc_members_t *m, const redisReply *flat, uint64_t now, lc_member_t *cur,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        cur[i].note = NULL;
    for (size_t i = 0; i + 1 < flat->elements; i += 2) {
        const redisReply *f = flat->element[i], *v = flat->element[i + 1];
        const char *text;
        size_t len;
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        if (!note_standing(v, now, &text, &len)) {
            prune(m, m->notes_key, f, v);
            continue;
        }
        for (size_t j = 0; j < n; j++)
            if (!cur[j].note && strlen(cur[j].id) == f->len &&
                memcmp(cur[j].id, f->str, f->len) == 0)
                cur[j].note = lc_xstrndup(text, len);
    }
    for (size_t i = 0; i < n; i++)
        if (!cur[i].note)
            cur[i].note = lc_xstrdup("");
}

/* "<generation>|<ms>" (ms may be negative). */
static bool mark_parse(const redisReply *v, uint64_t *gen, int64_t *ms)
{
    const char *bar = memchr(v->str, '|', v->len);
    if (!bar || !parse_ms(v->str, (size_t)(bar - v->str), gen))
        return false;
    const char *p = bar + 1;
    size_t len = v->len - (size_t)(p - v->str);
    bool neg = len > 0 && *p == '-';
    uint64_t mag;
    if (!parse_ms(p + neg, len - neg, &mag) || mag > (uint64_t)INT64_MAX)
        return false;
    *ms = neg ? -(int64_t)mag : (int64_t)mag;
    return true;
}

/* Each member's mark (LC_MEMBER_NO_MARK without one; a malformed one is none). */
static void marks_apply(const redisReply *flat, lc_member_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i].mark_ms = LC_MEMBER_NO_MARK;
    for (size_t i = 0; i + 1 < flat->elements; i += 2) {
        const redisReply *f = flat->element[i], *val = flat->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING)
            continue;
        for (size_t j = 0; j < n; j++)
            if (strlen(v[j].id) == f->len && memcmp(v[j].id, f->str, f->len) == 0 &&
                !mark_parse(val, &v[j].mark_gen, &v[j].mark_ms))
                v[j].mark_ms = LC_MEMBER_NO_MARK;
    }
}

static void list_parse(lc_members_t *m, const redisReply *reply)
{
    const redisReply *now_r = reply->element[0], *flat = reply->element[1];
    const redisReply *reg_flat = reply->element[2], *notes_flat = reply->element[3];
    const redisReply *marks_flat = reply->element[4];
    uint64_t now;
    if (now_r->type != REDIS_REPLY_STRING || !parse_ms(now_r->str, now_r->len, &now) ||
        flat->type != REDIS_REPLY_ARRAY || reg_flat->type != REDIS_REPLY_ARRAY ||
        notes_flat->type != REDIS_REPLY_ARRAY || marks_flat->type != REDIS_REPLY_ARRAY) {
        LC_LOG_WARN("members: malformed list reply role=%s", m->role);
        return;
    }
    lc_member_t *cur = lc_xcalloc(flat->elements / 2 + 1, sizeof(*cur));
    size_t n = 0, addr_len;
    for (size_t i = 0; i + 1 < flat->elements; i += 2) {
        const redisReply *f = flat->element[i], *v = flat->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        if (!field_alive(v, now, &addr_len)) {
            prune(m, m->key, f, v);
            continue;
        }
        cur[n].id = lc_xstrndup(f->str, f->len);
        cur[n].addr = lc_xstrndup(v->str, addr_len);
        n++;
    }
    notes_apply(m, notes_flat, now, cur, n);
    size_t n_reg;
    lc_member_t *reg = registry_parse(reg_flat, &n_reg);
    marks_apply(marks_flat, cur, n);
    marks_apply(marks_flat, reg, n_reg);
    list_install(m, cur, n, reg, n_reg);
}

static void list_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    lc_members_t *m = data;
    LC_UNUSED(r);
    m->list_out = false;
    if (status != 0 || m->closing)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 5) {
        LC_LOG_WARN("members: list failed role=%s err=\"%s\"", m->role,
                    lc_redis_reply_error(reply) ? lc_redis_reply_error(reply) : "bad reply");
        return;
    }
    list_parse(m, reply);
}

/* The heartbeat's registry outcome: {1, ''} registered now, {2, old} moved;
 * and whether a lost note was recorded. */
static void beat_log_registry(const lc_members_t *m, const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER)
        return;
    const redisReply *old = reply->element[1];
    if (reply->element[0]->integer == 1)
        LC_LOG_INFO("members: registered role=%s id=%s zone=\"%s\"", m->role, m->self_id, m->zone);
    else if (reply->element[0]->integer == 2 && old->type == REDIS_REPLY_STRING)
        LC_LOG_WARN("members: moved to another zone, the old one no longer waits for this id "
                    "role=%s id=%s from=\"%.*s\" to=\"%s\"",
                    m->role, m->self_id, (int)old->len, old->str, m->zone);
    if (reply->elements > 2 && reply->element[2]->type == REDIS_REPLY_INTEGER &&
        reply->element[2]->integer == 1)
        LC_LOG_WARN("members: recorded that this id lacks what an earlier life held role=%s "
                    "id=%s note=\"%s\"",
                    m->role, m->self_id, m->lost_note ? m->lost_note : "");
}

static void beat_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    lc_members_t *m = data;
    LC_UNUSED(r);
    m->beat_out = false;
    const char *err = status ? lc_strerror(status) : lc_redis_reply_error(reply);
    if (err && !m->beat_failing && status != LC_ECLOSED)
        LC_LOG_WARN("members: heartbeat failed role=%s id=%s err=\"%s\"", m->role, m->self_id, err);
    m->beat_failing = err != NULL;
    if (err)
        return;
    beat_log_registry(m, reply);
    lc_free(m->lost_note);
    m->lost_note = NULL;
}

/* ---------------------------------------------------------------- ticks */

static void beat_send(lc_members_t *m)
{
    char ttl[16];
    snprintf(ttl, sizeof(ttl), "%u", m->opts.ttl_ms);
    int rc;
    if (m->zone) {
        char note_ttl[24];
        snprintf(note_ttl, sizeof(note_ttl), "%" PRIu64, m->opts.lost_note_ttl_ms);
        const char *argv[] = {"EVAL",
                              HEARTBEAT_LUA,
                              "3",
                              m->key,
                              m->registry_key,
                              m->notes_key,
                              m->self_id,
                              m->self_addr,
                              ttl,
                              m->zone,
                              m->lost_note ? m->lost_note : "",
                              note_ttl};
        rc = lc_redis_command(m->redis, 0, beat_on_reply, m, 12, argv, NULL);
    } else {
        const char *argv[] = {"EVAL", HEARTBEAT_LUA, "1", m->key, m->self_id, m->self_addr, ttl};
        rc = lc_redis_command(m->redis, 0, beat_on_reply, m, 7, argv, NULL);
    }
    if (rc == 0)
        m->beat_out = true;
}

static void list_send(lc_members_t *m)
{
    const char *argv[] = {"EVAL",          LIST_LUA,     "4",         m->key,
                          m->registry_key, m->notes_key, m->marks_key};
    if (lc_redis_command(m->redis, 0, list_on_reply, m, 7, argv, NULL) == 0)
        m->list_out = true;
}

/* Heartbeat before list on the same link: a member sees itself in its first list. */
static void members_work(lc_members_t *m)
{
    uint64_t now = uv_now(m->loop);
    if (m->closing || !lc_redis_is_up(m->redis))
        return;
    if (m->self_id && !m->beat_out && now >= m->next_beat) {
        m->next_beat = now + m->opts.heartbeat_ms;
        beat_send(m);
    }
    if (!m->list_out && now >= m->next_list) {
        m->next_list = now + m->opts.refresh_ms;
        list_send(m);
    }
}

static void members_on_tick(uv_timer_t *t)
{
    members_work(t->data);
}

static void members_on_state(lc_redis_t *r, bool up, void *data)
{
    lc_members_t *m = data;
    LC_UNUSED(r);
    if (up) {
        m->next_beat = m->next_list = 0; /* at once: Redis may have lost the hash */
        members_work(m);
    }
    if (m->opts.on_state)
        m->opts.on_state(up, m->opts.state_data);
}

/* ---------------------------------------------------------------- lifecycle */

static void members_on_cluster_closed(void *data);

static void members_unref(lc_members_t *m)
{
    if (--m->refs > 0)
        return;
    if (m->cluster) { /* the link is closed: its router goes last */
        lc_redis_cluster_t *cl = m->cluster;
        m->cluster = NULL;
        m->refs = 1;
        lc_redis_cluster_close(cl, members_on_cluster_closed, m);
        return;
    }
    void (*cb)(void *) = m->close_cb;
    void *data = m->close_data;
    list_free(m->live, m->n_live);
    list_free(m->registry, m->n_registry);
    lc_free(m->role);
    lc_free(m->self_id);
    lc_free(m->self_addr);
    lc_free(m->zone);
    lc_free(m->key);
    lc_free(m->registry_key);
    lc_free(m->notes_key);
    lc_free(m->marks_key);
    lc_free(m->lost_note);
    lc_free(m);
    if (cb)
        cb(data);
}

static void members_on_cluster_closed(void *data)
{
    members_unref(data);
}

static void members_on_timer_closed(uv_handle_t *h)
{
    members_unref(h->data);
}
static void members_on_link_closed(void *data)
{
    members_unref(data);
}

static void leave_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    lc_members_t *m = data;
    LC_UNUSED(reply);
    if (status == 0)
        LC_LOG_INFO("member left on close role=%s id=%s", m->role, m->self_id);
    lc_redis_close(r, members_on_link_closed, m);
}

void lc_members_close(lc_members_t *m, void (*cb)(void *data), void *data)
{
    if (m->closing)
        return;
    m->closing = true;
    m->close_cb = cb;
    m->close_data = data;
    m->refs = 2;
    uv_close((uv_handle_t *)&m->timer, members_on_timer_closed);
    const char *argv[] = {"HDEL", m->key, m->self_id};
    if (!m->self_id || lc_redis_command(m->redis, 0, leave_on_reply, m, 3, argv, NULL) != 0)
        lc_redis_close(m->redis, members_on_link_closed, m);
}

typedef struct mark_call_s {
    lc_members_mark_cb cb;
    void *data;
} mark_call_t;

static void mark_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    mark_call_t *c = data;
    LC_UNUSED(r);
    const char *err = status ? NULL : lc_redis_reply_error(reply);
    if (err)
        LC_LOG_WARN("members: mark refused err=\"%s\"", err);
    c->cb(status ? status : err ? LC_EINPUT : 0, c->data);
    lc_free(c);
}

int lc_members_set_mark(lc_members_t *m, int64_t mark_ms, bool lower, lc_members_mark_cb cb,
                        void *data)
{
    if (!m->self_id)
        return LC_EINPUT;
    if (m->closing)
        return LC_ECLOSED;
    char ms[24];
    snprintf(ms, sizeof ms, "%" PRId64, mark_ms);
    mark_call_t *c = lc_xmalloc(sizeof(*c));
    *c = (mark_call_t){cb, data};
    const char *argv[] = {"EVAL", MARK_LUA, "1", m->marks_key, m->self_id, ms, lower ? "1" : "0"};
    int rc = lc_redis_command(m->redis, 0, mark_on_reply, c, 7, argv, NULL);
    if (rc)
        lc_free(c);
    return rc;
}

size_t lc_members_list(const lc_members_t *m, const lc_member_t **out)
{
    *out = m->live;
    return m->n_live;
}

size_t lc_members_registry(const lc_members_t *m, const lc_member_t **out)
{
    *out = m->registry;
    return m->n_registry;
}

bool lc_members_is_up(const lc_members_t *m)
{
    return lc_redis_is_up(m->redis);
}

size_t lc_members_rendezvous(const lc_member_t *live, size_t n, const void *key, size_t key_len)
{
    uint64_t seed = lc_hash64(key, key_len, 0x6d656d62657273ULL), best_score = 0;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t score = lc_hash64(live[i].id, strlen(live[i].id), seed);
        if (best == SIZE_MAX || score > best_score ||
            (score == best_score && strcmp(live[i].id, live[best].id) < 0)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

static bool members_opts_valid(const lc_members_opts_t *o)
{
    lc_redis_url_t url;
    if (!o || !o->role || !o->role[0])
        return false;
    if (!o->cluster && lc_redis_url_parse(o->url, &url) != 0)
        return false; /* a cluster's seeds are checked by lc_redis_cluster_new */
    if (o->self_id && (!o->self_id[0] || !o->self_addr || !o->self_addr[0]))
        return false;
    if (o->zone && (!o->self_id || strlen(o->zone) > LC_MEMBERS_ZONE_MAX))
        return false;
    uint32_t beat = o->heartbeat_ms ? o->heartbeat_ms : MEMBERS_DEFAULT_HEARTBEAT_MS;
    return !o->ttl_ms || o->ttl_ms > beat;
}

static void members_defaults(lc_members_opts_t *o)
{
    if (!o->heartbeat_ms)
        o->heartbeat_ms = MEMBERS_DEFAULT_HEARTBEAT_MS;
    if (!o->ttl_ms)
        o->ttl_ms = o->heartbeat_ms * 5 > MEMBERS_DEFAULT_TTL_MS ? o->heartbeat_ms * 5
                                                                 : MEMBERS_DEFAULT_TTL_MS;
    if (!o->refresh_ms)
        o->refresh_ms = o->heartbeat_ms;
    if (!o->cmd_timeout_ms)
        o->cmd_timeout_ms = MEMBERS_DEFAULT_TIMEOUT_MS;
}

int lc_members_new(uv_loop_t *loop, const lc_members_opts_t *opts, lc_members_t **out)
{
    if (!members_opts_valid(opts))
        return LC_EINPUT;
    lc_members_t *m = lc_xcalloc(1, sizeof(*m));
    m->loop = loop;
    m->opts = *opts;
    members_defaults(&m->opts);
    m->role = lc_xstrdup(opts->role);
    m->self_id = opts->self_id ? lc_xstrdup(opts->self_id) : NULL;
    m->self_addr = opts->self_id ? lc_xstrdup(opts->self_addr) : NULL;
    m->zone = opts->zone ? lc_xstrdup(opts->zone) : NULL;
    const char *prefix = opts->key_prefix ? opts->key_prefix : MEMBERS_DEFAULT_PREFIX;
    size_t klen = strlen(prefix) + strlen(opts->role) + sizeof(MEMBERS_REGISTRY_SUFFIX);
    m->key = lc_xmalloc(klen);
    snprintf(m->key, klen, "%s%s", prefix, opts->role);
    m->registry_key = lc_xmalloc(klen + 2);
    /* Redis Cluster: the scripts touch both keys, so the registry carries
     * the list's name as its hash tag (the same slot). */
    snprintf(m->registry_key, klen + 2,
             opts->cluster ? "{%s%s}" MEMBERS_REGISTRY_SUFFIX : "%s%s" MEMBERS_REGISTRY_SUFFIX,
             prefix, opts->role);
    m->notes_key = lc_xmalloc(klen + 2);
    snprintf(m->notes_key, klen + 2,
             opts->cluster ? "{%s%s}" MEMBERS_NOTES_SUFFIX : "%s%s" MEMBERS_NOTES_SUFFIX, prefix,
             opts->role);
    m->marks_key = lc_xmalloc(klen + 2);
    snprintf(m->marks_key, klen + 2,
             opts->cluster ? "{%s%s}" MEMBERS_MARKS_SUFFIX : "%s%s" MEMBERS_MARKS_SUFFIX, prefix,
             opts->role);
    m->lost_note = opts->lost_note && opts->lost_note[0] ? lc_xstrdup(opts->lost_note) : NULL;
    m->opts.url = m->opts.role = m->opts.self_id = m->opts.self_addr = m->opts.key_prefix = NULL;
    m->opts.zone = m->opts.lost_note = NULL;
    char name[128];
    snprintf(name, sizeof(name), "ember-members-%s", m->role);
    lc_redis_opts_t ro = {.url = opts->url,
                          .name = name,
                          .cmd_timeout_ms = m->opts.cmd_timeout_ms,
                          .on_state = members_on_state,
                          .state_data = m};
    if (opts->cluster) {
        lc_redis_cluster_opts_t co = {
            .seeds = opts->url, .name = name, .cmd_timeout_ms = m->opts.cmd_timeout_ms};
        if (lc_redis_cluster_new(loop, &co, &m->cluster) != 0) {
            m->refs = 1;
            members_unref(m);
            return LC_EINPUT;
        }
        lc_redis_cluster_route(m->cluster, m->key, &ro);
    }
    LC_ASSERT(lc_redis_new(loop, &ro, &m->redis) == 0); /* the URL was validated */
    uv_timer_init(loop, &m->timer);
    m->timer.data = m;
    uint32_t every =
        m->opts.heartbeat_ms < m->opts.refresh_ms ? m->opts.heartbeat_ms : m->opts.refresh_ms;
    uv_timer_start(&m->timer, members_on_tick, every, every);
    *out = m;
    return 0;
}

/* ---------------------------------------------------------------- the marks' spec */

bool lc_marks_spec_add(char **spec, size_t *len, const lc_member_t *m)
{
    size_t id_len = strlen(m->id);
    if (m->mark_ms == LC_MEMBER_NO_MARK || id_len == 0 || id_len > LC_MARKS_ID_MAX)
        return false;
    size_t need = *len + 1 + 20 + 1 + 21 + 1 + 2 * id_len + 1;
    *spec = lc_xrealloc(*spec, need);
    int n = snprintf(*spec + *len, need - *len, "%s%" PRIu64 ":%" PRId64 ":", *len ? "," : "",
                     m->mark_gen, m->mark_ms);
    *len += (size_t)n;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < id_len; i++) {
        (*spec)[(*len)++] = hex[(uint8_t)m->id[i] >> 4];
        (*spec)[(*len)++] = hex[(uint8_t)m->id[i] & 15];
    }
    (*spec)[*len] = '\0';
    return true;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int lc_marks_spec_next(const char **p, lc_marks_entry_t *out)
{
    const char *s = *p;
    if (!*s)
        return 1;
    char *end;
    if (*s < '0' || *s > '9')
        return LC_EINPUT;
    errno = 0;
    out->gen = strtoull(s, &end, 10);
    if (errno || *end != ':')
        return LC_EINPUT;
    s = end + 1;
    out->mark_ms = strtoll(s, &end, 10);
    if (errno || end == s || *end != ':')
        return LC_EINPUT;
    s = end + 1;
    size_t n = 0;
    for (; *s && *s != ','; s += 2) {
        int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
        if (lo < 0 || n == LC_MARKS_ID_MAX)
            return LC_EINPUT;
        out->id[n++] = (char)(hi << 4 | lo);
    }
    out->id[n] = '\0';
    if (n == 0 || memchr(out->id, '\0', n))
        return LC_EINPUT;
    *p = *s == ',' ? s + 1 : s;
    return 0;
}
