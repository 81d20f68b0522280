/*
 * lc/redis.h — one asynchronous Redis connection on a libuv loop.
 *
 * Built on hiredis's async API and its libuv adapter (hiredis 0.14, RESP2).
 * An lc_redis_t keeps one TCP connection to redis://[[user]:password@]host
 * [:port][/db] alive for its whole life: it resolves the host with
 * uv_getaddrinfo (never blocking the loop), connects, authenticates, selects
 * the database, and declares the link "up" once a PING answers. After an
 * error or a disconnect it reconnects by itself with exponential back-off
 * (backoff_min_ms doubling to backoff_max_ms, with jitter).
 *
 * Commands. Every command has a timeout. The libuv rule holds: if
 * lc_redis_command returns non-zero its callback is never called; if it
 * returns 0 the callback is called exactly once, with
 *   status 0                and the server's reply (which may be an error
 *                           reply: check reply->type == REDIS_REPLY_ERROR),
 *   LC_ETIMEOUT             the command passed its deadline,
 *   LC_REDIS_ELOST          the link dropped with the command in flight
 *                           (the server may or may not have applied it),
 *   LC_ECLOSED              lc_redis_close was called.
 * While the link is not up, lc_redis_command fails at once with
 * LC_REDIS_EDOWN: callers fail fast (503) instead of queueing.
 *
 * Replies are borrowed: hiredis frees them when the callback returns, so copy
 * what you keep. Replies arrive in command order, so a command that times out
 * while it is the oldest in flight means the link is stuck: the connection is
 * then dropped (failing the others with LC_REDIS_ELOST) and re-established.
 * A blocking command (XREADGROUP BLOCK) stalls the commands queued behind it:
 * give blocking reads their own lc_redis_t, and a timeout above the block time.
 *
 * Threading: everything, callbacks included, runs on the loop thread.
 */
#ifndef LC_REDIS_H
#define LC_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "lc/err.h"

/* The link is down: nothing was sent (publishers answer 503). */
#define LC_REDIS_EDOWN UV_ENOTCONN
/* The link dropped while the command was in flight: its outcome is unknown. */
#define LC_REDIS_ELOST UV_ECONNRESET

#define LC_REDIS_HOST_MAX 256
#define LC_REDIS_SECRET_MAX 256

typedef struct lc_redis_s lc_redis_t;

/* A parsed redis:// URL. */
typedef struct lc_redis_url_s {
    char host[LC_REDIS_HOST_MAX];       /* name or address, without IPv6 brackets */
    uint16_t port;                      /* default 6379 */
    int db;                             /* default 0 */
    char user[LC_REDIS_SECRET_MAX];     /* "" = no ACL user (AUTH password) */
    char password[LC_REDIS_SECRET_MAX]; /* "" = no AUTH */
} lc_redis_url_t;

/* Called once per state change: up after the handshake, down when it is lost. */
typedef void (*lc_redis_state_cb)(lc_redis_t *r, bool up, void *data);
/* reply is NULL unless status == 0; it is freed when the callback returns. */
typedef void (*lc_redis_reply_cb)(lc_redis_t *r, int status, const redisReply *reply, void *data);

/* Where the next connection attempt goes (Redis Cluster: the current owner of
 * a slot, lc/redis_cluster.h): fills host and port, or returns non-zero when
 * there is no address yet (the attempt then fails and backs off). */
typedef int (*lc_redis_target_cb)(void *data, char host[LC_REDIS_HOST_MAX], uint16_t *port);
/* An error reply "MOVED <slot> <host>:<port>" or "ASK ..." arrived (before the
 * command's own callback sees it). */
typedef void (*lc_redis_redirect_cb)(lc_redis_t *r, const char *error, size_t len, void *data);

typedef struct lc_redis_opts_s {
    const char *url;             /* required: redis://host:port[/db] */
    const char *name;            /* for logs (and CLIENT SETNAME when it has no space) */
    uint32_t cmd_timeout_ms;     /* default deadline of a command; default 5000 */
    uint32_t connect_timeout_ms; /* resolve + connect + handshake; default 3000 */
    uint32_t backoff_min_ms;     /* first reconnect delay; default 100 */
    uint32_t backoff_max_ms;     /* cap of the doubling delay; default 5000 */
    lc_redis_state_cb on_state;  /* optional */
    void *state_data;
    lc_redis_target_cb target;     /* optional: overrides the URL's host and port */
    lc_redis_redirect_cb redirect; /* optional: MOVED / ASK replies */
    void *cluster_data;            /* for target and redirect */
} lc_redis_opts_t;

/* Parses redis://[[user]:password@]host[:port][/db]; host may be [v6]. LC_EINPUT if bad. */
int lc_redis_url_parse(const char *url, lc_redis_url_t *out) LC_MUST_CHECK;

/* Validates opts (LC_EINPUT for a bad URL) and starts connecting; never waits. */
int lc_redis_new(uv_loop_t *loop, const lc_redis_opts_t *opts, lc_redis_t **out) LC_MUST_CHECK;

/* Fails every command in flight with LC_ECLOSED, closes the connection and its
 * handles, then frees r and calls cb (optional). Safe inside any callback of r;
 * r must not be used afterwards. The state callback is not called for it. */
void lc_redis_close(lc_redis_t *r, void (*cb)(void *data), void *data);

bool lc_redis_is_up(const lc_redis_t *r);
/* Drops the connection (commands in flight fail with LC_REDIS_ELOST) and
 * connects again after the back-off: to opts.target's new answer. No-op
 * unless connected or connecting. */
void lc_redis_reconnect(lc_redis_t *r, const char *why);
const char *lc_redis_name(const lc_redis_t *r);

/* Sends one command given as argv (binary-safe; copied before this returns).
 * timeout_ms 0 = opts.cmd_timeout_ms. */
int lc_redis_command(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data, int argc,
                     const char **argv, const size_t *argvlen) LC_MUST_CHECK;
/* Same, with hiredis's format ("XACK %s %s %s", %b for binary with a size_t length). */
int lc_redis_commandf(lc_redis_t *r, uint32_t timeout_ms, lc_redis_reply_cb cb, void *data,
                      const char *fmt, ...) LC_MUST_CHECK;

/* ---- stream entries: decoding XREADGROUP / XAUTOCLAIM replies (redis_stream.c) ---- */

#define LC_REDIS_ID_MAX 48 /* "ms-seq": two 20-digit numbers, a dash and the NUL */

/* One stream entry, out of a reply (so it outlives the reply). */
typedef struct lc_redis_entry_s {
    uint32_t stream; /* index of its stream in the caller's list of names */
    char id[LC_REDIS_ID_MAX];
    uint8_t *data; /* value of the wanted field; NULL if the entry has none */
    size_t len;    /* (deleted entries, foreign writers): ack it, apply nothing */
} lc_redis_entry_t;

typedef struct lc_redis_entries_s {
    lc_redis_entry_t *v;
    size_t n, cap;
    size_t bytes; /* sum of len */
} lc_redis_entries_t;

/* Appends the entries of an XREAD/XREADGROUP reply ([[name, [[id, [f, v, ...]], ...]], ...]
 * or nil) whose stream is one of names[0..n_names); field names the value to keep.
 * Each kept value's bytes are taken out of the reply, not copied (its element becomes
 * nil; freeReplyObject then skips it), so decode a reply once.
 * LC_ECORRUPT for a malformed reply or an unknown stream (entries appended before stay). */
int lc_redis_entries_from_read(lc_redis_entries_t *out, const redisReply *reply,
                               const char *const *names, size_t n_names,
                               const char *field) LC_MUST_CHECK;
/* Appends an array of entries of one stream (XRANGE, XAUTOCLAIM's second element); values
 * taken out of the reply as above. */
int lc_redis_entries_from_array(lc_redis_entries_t *out, const redisReply *entries, uint32_t stream,
                                const char *field) LC_MUST_CHECK;
void lc_redis_entries_reset(lc_redis_entries_t *e); /* frees the data, keeps the array */
void lc_redis_entries_fini(lc_redis_entries_t *e);

/* Stream ids "ms-seq" (a bare "ms" means seq 0). */
typedef struct lc_redis_id_s {
    uint64_t ms, seq;
} lc_redis_id_t;
int lc_redis_id_parse(const char *s, size_t len, lc_redis_id_t *out) LC_MUST_CHECK;
int lc_redis_id_cmp(lc_redis_id_t a, lc_redis_id_t b);
lc_redis_id_t lc_redis_id_next(lc_redis_id_t id); /* the smallest id above id */
void lc_redis_id_format(lc_redis_id_t id, char out[LC_REDIS_ID_MAX]);

/* Helpers for reply callbacks. */
/* The error text of an error reply, else NULL. */
const char *lc_redis_reply_error(const redisReply *reply);
/* True when reply is an error reply whose text starts with prefix ("BUSYGROUP"). */
bool lc_redis_reply_is_error(const redisReply *reply, const char *prefix);

#endif
