/*
 * lc/redis_cluster.h — Redis Cluster slot routing for lc_redis links.
 *
 * Debian bookworm has no cluster-aware Redis client for C (hiredis 0.14;
 * hiredis-cluster and libvalkey are not packaged), so this small router is
 * ours, on hiredis. It does only what ember's keys need: every command of
 * one link touches keys of ONE slot (the transport keeps all keys of a
 * partition under one hash tag), so a link simply connects to the master
 * that owns its slot, and follows that owner:
 *
 *   - the slot of a key: CRC16 (XMODEM) of its hash tag ("{...}", the first
 *     non-empty one) or of the whole key, modulo 16384;
 *   - the slot map: CLUSTER SLOTS, asked of any reachable node every
 *     refresh_ms on a link of its own (it walks the seeds, then every node
 *     the map names, until one answers);
 *   - a link's target hook answers the current owner of its slot at every
 *     connection attempt, so after a failover the link's reconnects reach
 *     the promoted replica once the map says so;
 *   - a MOVED reply updates the map for that slot at once and makes the link
 *     reconnect (to the new owner); the command itself failed (its caller
 *     sees the error reply). ASK (a slot being migrated) is not followed:
 *     resharding a live system is not supported (docs/internals/redis.md).
 *
 * Threading: loop thread only, like lc_redis_t. The cluster must outlive the
 * links it routes (close them first).
 */
#ifndef LC_REDIS_CLUSTER_H
#define LC_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "lc/err.h"
#include "lc/redis.h"

#define LC_REDIS_SLOTS 16384
#define LC_REDIS_CLUSTER_NODES_MAX 1024 /* masters a slot map may name */
#define LC_REDIS_CLUSTER_SEEDS_MAX 64

/* The cluster slot of a key (its hash tag's, if it has one). */
uint16_t lc_redis_key_slot(const char *key, size_t len);

typedef struct lc_redis_node_s {
    char host[LC_REDIS_HOST_MAX];
    uint16_t port;
} lc_redis_node_t;

/* Which master serves each slot. */
typedef struct lc_redis_slot_map_s {
    uint16_t owner[LC_REDIS_SLOTS]; /* index into nodes + 1; 0 = nobody known */
    lc_redis_node_t *nodes;         /* masters, owned */
    size_t n_nodes;
} lc_redis_slot_map_t;

/* Fills m (empty or reset) from a CLUSTER SLOTS reply: [[start, end, [host,
 * port, ...], replicas...], ...]. LC_ECORRUPT for anything else (m is then
 * empty); entries with an empty or unknown ("?") host are skipped. */
int lc_redis_slot_map_parse(lc_redis_slot_map_t *m, const redisReply *reply) LC_MUST_CHECK;
void lc_redis_slot_map_fini(lc_redis_slot_map_t *m);

/* Parses "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" (the
 * host may be an IPv6 address, its last colon separates the port). */
int lc_redis_redirect_parse(const char *s, size_t len, uint16_t *slot, lc_redis_node_t *to,
                            bool *ask) LC_MUST_CHECK;

/* Whether url names several seeds ("redis://a:7000,redis://b:7001"). */
bool lc_redis_url_is_list(const char *url);

typedef struct lc_redis_cluster_s lc_redis_cluster_t;

typedef struct lc_redis_cluster_opts_s {
    const char *seeds;   /* comma-separated redis:// URLs; the first gives user,
                            password (the same on every node) and must have db 0 */
    const char *name;    /* for logs */
    uint32_t refresh_ms; /* CLUSTER SLOTS period; default 1000 */
    uint32_t cmd_timeout_ms;
} lc_redis_cluster_opts_t;

/* LC_EINPUT for a bad seed list (empty, a bad URL, a db other than 0, more
 * than LC_REDIS_CLUSTER_SEEDS_MAX). Starts asking for the map at once. */
int lc_redis_cluster_new(uv_loop_t *loop, const lc_redis_cluster_opts_t *opts,
                         lc_redis_cluster_t **out) LC_MUST_CHECK;
/* Closes the map link and frees cl, then calls cb (optional). */
void lc_redis_cluster_close(lc_redis_cluster_t *cl, void (*cb)(void *data), void *data);

/* Makes o (url, target, redirect, cluster_data) route a link to the owner of
 * key's slot; the URL string belongs to cl. */
void lc_redis_cluster_route(lc_redis_cluster_t *cl, const char *key, lc_redis_opts_t *o);

/* Whether the map is known (one CLUSTER SLOTS answered). */
bool lc_redis_cluster_has_map(const lc_redis_cluster_t *cl);

#endif
