/*
 * redis.c — one self-healing hiredis async connection on a libuv loop.
 *
 * Life of a connection attempt (state in lc_redis_t.state):
 *   WAITING --retry timer--> RESOLVING (uv_getaddrinfo) --> CONNECTING
 *   (hiredis non-blocking connect) --> HANDSHAKE (AUTH, SELECT, CLIENT
 *   SETNAME, PING) --PONG--> UP.
 * Any failure, a deadline (connect_timeout_ms for the whole attempt, the
 * command timeout once up) or a server-side close ends the attempt in
 * link_lost(), which arms the back-off timer; CLOSING is terminal.
 *
 * hiredis 0.14 facts this file relies on: every command callback is called
 * exactly once, with the reply or with NULL when the context is freed or
 * drops; a free requested inside a reply callback is deferred until that
 * callback returns; onConnect and onDisconnect run outside that protection,
 * so the context is never freed from them. A context we abandon is detached
 * (r->ac = NULL) before it is freed, so its late onDisconnect is recognised
 * and ignored.
 *
 * Event hooks: this file plugs hiredis into libuv itself instead of using
 * hiredis/adapters/libuv.h, because the 0.14 adapter ignores a failed poll
 * (libuv reports a reset socket as a poll error and stops the handle, so the
 * link would hang without ever reading the error) and frees its handle where
 * we cannot count it. Here a poll error becomes a read, which lets hiredis
 * see the error and disconnect, and the poll handle's close is counted before
 * lc_redis_t is freed.
 *
 * Timeouts: hiredis 0.14 has none for async commands. Each command carries
 * a deadline; a sweep timer answers overdue commands with LC_ETIMEOUT (their
 * late replies are then swallowed), and drops the link when the oldest
 * command is overdue, since replies come in order and nothing behind it can
 * arrive first.
 */
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <string.h>

#include <hiredis/async.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/redis.h"

#define REDIS_DEFAULT_CMD_TIMEOUT_MS 5000
#define REDIS_DEFAULT_CONNECT_TIMEOUT_MS 3000
#define REDIS_DEFAULT_BACKOFF_MIN_MS 100
#define REDIS_DEFAULT_BACKOFF_MAX_MS 5000
#define REDIS_SWEEP_MIN_MS 10
#define REDIS_SWEEP_MAX_MS 250
#define REDIS_HANDSHAKE_MAX 4

typedef enum {
    RS_WAITING,
    RS_RESOLVING,
    RS_CONNECTING,
    RS_HANDSHAKE,
    RS_UP,
    RS_CLOSING,
} redis_state_t;

typedef struct redis_cmd_s {
    struct redis_cmd_s *prev, *next; /* in flight, oldest first */
    lc_redis_t *r;
    lc_redis_reply_cb cb; /* NULL once answered early (timeout) */
    void *data;
    uint64_t deadline; /* uv_now() ms */
} redis_cmd_t;

struct lc_redis_s {
    uv_loop_t *loop;
    lc_redis_opts_t opts;
    lc_redis_url_t url;
    char *name;
    redis_state_t state;
    redisAsyncContext *ac; /* NULL unless CONNECTING, HANDSHAKE or UP */
    uv_getaddrinfo_t resolve;
    bool resolving;         /* resolve is owned by libuv until its callback */
    uv_timer_t retry_timer; /* back-off while WAITING, attempt deadline after */
    uv_timer_t sweep_timer; /* command deadlines */
    int open_handles;
    redis_cmd_t inflight; /* list sentinel */
    size_t n_inflight;
    uint32_t backoff_ms; /* next back-off delay */
    uint64_t rng;        /* jitter */
    bool was_up;         /* log the first failure after an up period at warn */
    void (*close_cb)(void *data);
    void *close_data;
};

static void attempt_start(lc_redis_t *r);

/* ---------------------------------------------------------------- commands */

static void cmd_unlink(redis_cmd_t *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->r->n_inflight--;
}

/* Calls the owner's callback once; the struct lives on until hiredis lets go. */
static void cmd_answer(redis_cmd_t *c, int status, const redisReply *reply)
{
    lc_redis_reply_cb cb = c->cb;
    c->cb = NULL;
    if (cb)
        cb(c->r, status, reply, c->data);
}

static void link_lost(lc_redis_t *r, const char *why, const char *detail);

/* A Redis Cluster redirection: the key's slot is served elsewhere. */
static bool is_redirect(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR &&
           ((reply->len > 6 && strncmp(reply->str, "MOVED ", 6) == 0) ||
            (reply->len > 4 && strncmp(reply->str, "ASK ", 4) == 0));
}

/* hiredis callback: a reply, or NULL when the context is going away. */
static void cmd_on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    redis_cmd_t *c = privdata;
    lc_redis_t *r = c->r;
    if (!reply && ac == r->ac) {
        /* hiredis tears the context down after an error and answers us before
         * its onDisconnect: be down now, so this callback's owner sees it. */
        r->ac = NULL;
        link_lost(r, "disconnected", ac->errstr);
    }
    cmd_unlink(c);
    if (reply && r->opts.redirect && is_redirect(reply))
        r->opts.redirect(r, ((redisReply *)reply)->str, ((redisReply *)reply)->len,
                         r->opts.cluster_data);
    int status = 0;
    if (!reply)
        status = r->state == RS_CLOSING ? LC_ECLOSED : LC_REDIS_ELOST;
    cmd_answer(c, status, reply);
    lc_free(c);
}

static redis_cmd_t *cmd_new(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data)
{
    redis_cmd_t *c = lc_xcalloc(1, sizeof(*c));
    c->r = r;
    c->cb = cb;
    c->data = data;
    c->deadline = uv_now(r->loop) + (timeout_ms ? timeout_ms : r->opts.cmd_timeout_ms);
    return c;
}

static void cmd_link(lc_redis_t *r, redis_cmd_t *c)
{
    c->next = &r->inflight;
    c->prev = r->inflight.prev;
    r->inflight.prev->next = c;
    r->inflight.prev = c;
    r->n_inflight++;
}

/* Sends argv on the current context, whatever the state; LC_REDIS_EDOWN if hiredis refuses. */
static int cmd_send(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data, int argc,
                    const char **argv, const size_t *argvlen)
{
    if (!r->ac)
        return LC_REDIS_EDOWN;
    redis_cmd_t *c = cmd_new(r, timeout_ms, cb, data);
    if (redisAsyncCommandArgv(r->ac, cmd_on_reply, c, argc, argv, argvlen) != REDIS_OK) {
        lc_free(c);
        return LC_REDIS_EDOWN; /* the context is disconnecting */
    }
    cmd_link(r, c);
    return 0;
}

int lc_redis_command(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data, int argc,
                     const char **argv, const size_t *argvlen)
{
    if (r->state == RS_CLOSING)
        return LC_ECLOSED;
    if (r->state != RS_UP)
        return LC_REDIS_EDOWN;
    return cmd_send(r, timeout_ms, cb, data, argc, argv, argvlen);
}

int lc_redis_commandf(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data,
                      const char *fmt, ...)
{
    if (r->state == RS_CLOSING)
        return LC_ECLOSED;
    if (r->state != RS_UP || !r->ac)
        return LC_REDIS_EDOWN;
    redis_cmd_t *c = cmd_new(r, timeout_ms, cb, data);
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAsyncCommand(r->ac, cmd_on_reply, c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) {
        lc_free(c);
        return LC_REDIS_EDOWN;
    }
    cmd_link(r, c);
    return 0;
}

const char *lc_redis_reply_error(const redisReply *reply)
{
    return reply && reply->type == REDIS_REPLY_ERROR ? reply->str : NULL;
}

bool lc_redis_reply_is_error(const redisReply *reply, const char *prefix)
{
    const char *err = lc_redis_reply_error(reply);
    return err && strncmp(err, prefix, strlen(prefix)) == 0;
}

/* ---------------------------------------------------------------- deadlines */

static redis_cmd_t *first_overdue(lc_redis_t *r, uint64_t now)
{
    for (redis_cmd_t *c = r->inflight.next; c != &r->inflight; c = c->next)
        if (c->cb && now >= c->deadline)
            return c;
    return NULL;
}

/* Abandons the current context: its commands fail with LC_REDIS_ELOST. */
static void link_drop(lc_redis_t *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    if (!ac)
        return;
    r->ac = NULL;
    redisAsyncFree(ac); /* deferred by hiredis when inside its callback */
    link_lost(r, why, NULL);
}

void lc_redis_reconnect(lc_redis_t *r, const char *why)
{
    if (r->state == RS_UP || r->state == RS_CONNECTING || r->state == RS_HANDSHAKE)
        link_drop(r, why);
}

static void sweep_on_tick(uv_timer_t *t)
{
    lc_redis_t *r = LC_CONTAINER_OF(t, lc_redis_t, sweep_timer);
    uint64_t now = uv_now(r->loop);
    redis_cmd_t *head = r->inflight.next;
    if (head != &r->inflight && now >= head->deadline) {
        cmd_answer(head, LC_ETIMEOUT, NULL);
        if (r->state != RS_CLOSING)
            link_drop(r, "a command passed its deadline");
        return;
    }
    /* Rescan after each callback: it may have sent or closed anything. */
    redis_cmd_t *c;
    while (r->state != RS_CLOSING && (c = first_overdue(r, now)))
        cmd_answer(c, LC_ETIMEOUT, NULL);
}

/* ---------------------------------------------------------------- state */

static void set_up(lc_redis_t *r)
{
    r->state = RS_UP;
    r->backoff_ms = r->opts.backoff_min_ms;
    r->was_up = true;
    uv_timer_stop(&r->retry_timer);
    LC_LOG_INFO("redis link up name=%s host=%s port=%u db=%d", r->name, r->url.host,
                (unsigned)r->url.port, r->url.db);
    if (r->opts.on_state)
        r->opts.on_state(r, true, r->opts.state_data);
}

static uint32_t backoff_next(lc_redis_t *r)
{
    /* xorshift: jitter only, so peers that lost Redis together do not retry in step. */
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    uint32_t base = r->backoff_ms;
    uint32_t delay = base - base / 5 + (uint32_t)(r->rng % (base / 5 * 2 + 1));
    uint64_t next = (uint64_t)base * 2;
    r->backoff_ms = next > r->opts.backoff_max_ms ? r->opts.backoff_max_ms : (uint32_t)next;
    return delay;
}

static void retry_on_timer(uv_timer_t *t);

/* Ends the current attempt (or up period): back off, then try again. */
static void link_lost(lc_redis_t *r, const char *why, const char *detail)
{
    if (r->state == RS_CLOSING)
        return;
    bool was_up = r->state == RS_UP;
    uint32_t delay = backoff_next(r);
    r->state = RS_WAITING;
    if (was_up || r->was_up)
        LC_LOG_WARN("redis link down name=%s why=\"%s\" detail=\"%s\" retry_ms=%u", r->name, why,
                    detail ? detail : "", delay);
    else
        LC_LOG_DEBUG("redis connect failed name=%s why=\"%s\" detail=\"%s\" retry_ms=%u", r->name,
                     why, detail ? detail : "", delay);
    r->was_up = false;
    uv_timer_start(&r->retry_timer, retry_on_timer, delay, 0);
    if (was_up && r->opts.on_state)
        r->opts.on_state(r, false, r->opts.state_data);
}

/* ---------------------------------------------------------------- handshake */

static void handshake_on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    bool last = data != NULL;
    if (status != 0)
        return; /* the sweep or the attempt deadline ends the attempt */
    const char *err = lc_redis_reply_error(reply);
    if (err) {
        LC_LOG_ERROR("redis handshake refused name=%s err=\"%s\"", r->name, err);
        link_drop(r, "handshake refused");
        return;
    }
    if (last && r->state == RS_HANDSHAKE)
        set_up(r);
}

/* CLIENT SETNAME takes one word. */
static bool name_is_plain(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~')
            return false;
    return true;
}

static int handshake_cmd(lc_redis_t *r, bool last, int argc, const char *a0, const char *a1,
                         const char *a2)
{
    const char *argv[3] = {a0, a1, a2};
    return cmd_send(r, r->opts.connect_timeout_ms, handshake_on_reply, last ? r : NULL, argc, argv,
                    NULL);
}

/* Pipelined; PING last, so its PONG means every step before it succeeded. */
static void handshake_send(lc_redis_t *r)
{
    char db[16];
    snprintf(db, sizeof(db), "%d", r->url.db);
    int rc = 0;
    if (r->url.user[0])
        rc = handshake_cmd(r, false, 3, "AUTH", r->url.user, r->url.password);
    else if (r->url.password[0])
        rc = handshake_cmd(r, false, 2, "AUTH", r->url.password, NULL);
    if (rc == 0 && r->url.db)
        rc = handshake_cmd(r, false, 2, "SELECT", db, NULL);
    if (rc == 0 && name_is_plain(r->name))
        rc = handshake_cmd(r, false, 3, "CLIENT", "SETNAME", r->name);
    if (rc == 0)
        rc = handshake_cmd(r, true, 1, "PING", NULL, NULL);
    /* On failure do nothing here: we run inside hiredis's onConnect, where the
     * context must not be freed; the attempt deadline drops it. */
}

/* ---------------------------------------------------------------- event hooks */

typedef struct redis_watch_s {
    uv_poll_t poll;
    lc_redis_t *r;
    redisAsyncContext *ac; /* NULL once hiredis has cleaned up */
    int events;            /* UV_READABLE | UV_WRITABLE wanted by hiredis */
} redis_watch_t;

static void watch_on_poll(uv_poll_t *h, int status, int events)
{
    redis_watch_t *w = h->data;
    /* An error (e.g. a reset) stopped the poll: read, so hiredis meets it. */
    if (status < 0)
        events = UV_READABLE;
    if (w->ac && (events & UV_READABLE))
        redisAsyncHandleRead(w->ac);
    if (w->ac && (events & UV_WRITABLE))
        redisAsyncHandleWrite(w->ac);
}

static void watch_update(redis_watch_t *w, int add, int remove)
{
    w->events = (w->events | add) & ~remove;
    if (w->events)
        uv_poll_start(&w->poll, w->events, watch_on_poll);
    else
        uv_poll_stop(&w->poll);
}

static void watch_add_read(void *p)
{
    watch_update(p, UV_READABLE, 0);
}
static void watch_del_read(void *p)
{
    watch_update(p, 0, UV_READABLE);
}
static void watch_add_write(void *p)
{
    watch_update(p, UV_WRITABLE, 0);
}
static void watch_del_write(void *p)
{
    watch_update(p, 0, UV_WRITABLE);
}

static void maybe_free(lc_redis_t *r);

static void watch_on_closed(uv_handle_t *h)
{
    redis_watch_t *w = h->data;
    lc_redis_t *r = w->r;
    lc_free(w);
    r->open_handles--;
    maybe_free(r);
}

/* hiredis calls this from both its disconnect and free paths: act once. */
static void watch_cleanup(void *p)
{
    redis_watch_t *w = p;
    if (!w->ac)
        return;
    w->ac->ev.cleanup = NULL;
    w->ac = NULL;
    uv_close((uv_handle_t *)&w->poll, watch_on_closed);
}

static int watch_attach(lc_redis_t *r, redisAsyncContext *ac)
{
    redis_watch_t *w = lc_xcalloc(1, sizeof(*w));
    if (uv_poll_init(r->loop, &w->poll, ac->c.fd) != 0) {
        lc_free(w);
        return -1;
    }
    w->poll.data = w;
    w->r = r;
    w->ac = ac;
    r->open_handles++;
    ac->ev.data = w;
    ac->ev.addRead = watch_add_read;
    ac->ev.delRead = watch_del_read;
    ac->ev.addWrite = watch_add_write;
    ac->ev.delWrite = watch_del_write;
    ac->ev.cleanup = watch_cleanup;
    return 0;
}

/* ---------------------------------------------------------------- connecting */

static void conn_on_connect(const redisAsyncContext *ac, int status)
{
    lc_redis_t *r = ac->data;
    if (ac != r->ac)
        return; /* abandoned */
    if (status != REDIS_OK) {
        r->ac = NULL; /* hiredis frees it when we return */
        link_lost(r, "connect failed", ac->errstr);
        return;
    }
    r->state = RS_HANDSHAKE;
    handshake_send(r);
}

static void conn_on_disconnect(const redisAsyncContext *ac, int status)
{
    lc_redis_t *r = ac->data;
    LC_UNUSED(status);
    if (ac != r->ac)
        return; /* we dropped it ourselves */
    r->ac = NULL;
    link_lost(r, "disconnected", ac->errstr);
}

static void connect_to(lc_redis_t *r, const char *ip)
{
    redisAsyncContext *ac = redisAsyncConnect(ip, r->url.port);
    if (!ac) {
        link_lost(r, "connect failed", "out of memory");
        return;
    }
    if (ac->err || watch_attach(r, ac) != 0) {
        link_lost(r, "connect failed", ac->err ? ac->errstr : "cannot watch the socket");
        redisAsyncFree(ac);
        return;
    }
    /* hiredis 0.14 opens sockets without CLOEXEC: keep them out of children. */
    (void)fcntl(ac->c.fd, F_SETFD, FD_CLOEXEC);
    ac->data = r;
    r->ac = ac;
    r->state = RS_CONNECTING;
    /* The deadline again: resolving may have used up the first one. */
    uv_timer_start(&r->retry_timer, retry_on_timer, r->opts.connect_timeout_ms, 0);
    redisAsyncSetConnectCallback(ac, conn_on_connect); /* after attaching: it polls */
    redisAsyncSetDisconnectCallback(ac, conn_on_disconnect);
}

static bool first_address(const struct addrinfo *res, char *ip, size_t cap)
{
    for (; res; res = res->ai_next) {
        if (res->ai_family == AF_INET &&
            uv_ip4_name((const struct sockaddr_in *)res->ai_addr, ip, cap) == 0)
            return true;
        if (res->ai_family == AF_INET6 &&
            uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr, ip, cap) == 0)
            return true;
    }
    return false;
}

static void resolve_on_done(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    lc_redis_t *r = LC_CONTAINER_OF(req, lc_redis_t, resolve);
    char ip[INET6_ADDRSTRLEN];
    bool found = status == 0 && first_address(res, ip, sizeof(ip));
    uv_freeaddrinfo(res);
    r->resolving = false;
    if (r->state == RS_CLOSING) {
        maybe_free(r);
        return;
    }
    if (!found)
        link_lost(r, "cannot resolve the host", status ? uv_strerror(status) : "no address");
    else
        connect_to(r, ip);
}

static void attempt_start(lc_redis_t *r)
{
    if (r->opts.target && r->opts.target(r->opts.cluster_data, r->url.host, &r->url.port) != 0) {
        r->state = RS_RESOLVING; /* link_lost backs off from any attempt state */
        link_lost(r, "no address for its slot yet", NULL);
        return;
    }
    r->state = RS_RESOLVING;
    uv_timer_start(&r->retry_timer, retry_on_timer, r->opts.connect_timeout_ms, 0);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(r->loop, &r->resolve, resolve_on_done, r->url.host, NULL, &hints);
    if (rc)
        link_lost(r, "cannot resolve the host", uv_strerror(rc));
    else
        r->resolving = true;
}

static void retry_on_timer(uv_timer_t *t)
{
    lc_redis_t *r = LC_CONTAINER_OF(t, lc_redis_t, retry_timer);
    switch (r->state) {
    case RS_WAITING:
        attempt_start(r);
        break;
    case RS_RESOLVING:
        uv_cancel((uv_req_t *)&r->resolve); /* resolve_on_done concludes */
        break;
    case RS_CONNECTING:
    case RS_HANDSHAKE:
        link_drop(r, "connect timed out");
        break;
    case RS_UP:
    case RS_CLOSING:
        break;
    }
}

/* ---------------------------------------------------------------- lifecycle */

static void maybe_free(lc_redis_t *r)
{
    if (r->open_handles > 0 || r->resolving)
        return;
    LC_ASSERT(r->n_inflight == 0);
    void (*cb)(void *) = r->close_cb;
    void *data = r->close_data;
    lc_free(r->name);
    lc_free(r);
    if (cb)
        cb(data);
}

static void handle_on_closed(uv_handle_t *h)
{
    lc_redis_t *r = h->data;
    r->open_handles--;
    maybe_free(r);
}

void lc_redis_close(lc_redis_t *r, void (*cb)(void *data), void *data)
{
    if (r->state == RS_CLOSING)
        return;
    r->state = RS_CLOSING;
    r->close_cb = cb;
    r->close_data = data;
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    if (ac)
        redisAsyncFree(ac); /* fails what is in flight with LC_ECLOSED */
    if (r->resolving)
        uv_cancel((uv_req_t *)&r->resolve);
    uv_close((uv_handle_t *)&r->retry_timer, handle_on_closed);
    uv_close((uv_handle_t *)&r->sweep_timer, handle_on_closed);
}

bool lc_redis_is_up(const lc_redis_t *r)
{
    return r->state == RS_UP;
}

const char *lc_redis_name(const lc_redis_t *r)
{
    return r->name;
}

static void opts_defaults(lc_redis_opts_t *o)
{
    if (!o->cmd_timeout_ms)
        o->cmd_timeout_ms = REDIS_DEFAULT_CMD_TIMEOUT_MS;
    if (!o->connect_timeout_ms)
        o->connect_timeout_ms = REDIS_DEFAULT_CONNECT_TIMEOUT_MS;
    if (!o->backoff_min_ms)
        o->backoff_min_ms = REDIS_DEFAULT_BACKOFF_MIN_MS;
    if (!o->backoff_max_ms)
        o->backoff_max_ms = REDIS_DEFAULT_BACKOFF_MAX_MS;
    if (o->backoff_max_ms < o->backoff_min_ms)
        o->backoff_max_ms = o->backoff_min_ms;
}

static uint32_t sweep_period(uint32_t cmd_timeout_ms)
{
    uint32_t p = cmd_timeout_ms / 10;
    return p < REDIS_SWEEP_MIN_MS   ? REDIS_SWEEP_MIN_MS
           : p > REDIS_SWEEP_MAX_MS ? REDIS_SWEEP_MAX_MS
                                    : p;
}

int lc_redis_new(uv_loop_t *loop, const lc_redis_opts_t *opts, lc_redis_t **out)
{
    lc_redis_url_t url;
    if (!opts || lc_redis_url_parse(opts->url, &url) != 0)
        return LC_EINPUT;
    lc_redis_t *r = lc_xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->opts = *opts;
    r->opts.url = r->opts.name = NULL; /* borrowed: kept as r->url and r->name */
    opts_defaults(&r->opts);
    r->url = url;
    r->name = lc_xstrdup(opts->name ? opts->name : "redis");
    r->inflight.next = r->inflight.prev = &r->inflight;
    r->backoff_ms = r->opts.backoff_min_ms;
    r->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)r) | 1;
    uv_timer_init(loop, &r->retry_timer);
    uv_timer_init(loop, &r->sweep_timer);
    r->retry_timer.data = r->sweep_timer.data = r;
    r->open_handles = 2;
    uint32_t period = sweep_period(r->opts.cmd_timeout_ms);
    uv_timer_start(&r->sweep_timer, sweep_on_tick, period, period);
    attempt_start(r);
    *out = r;
    return 0;
}
