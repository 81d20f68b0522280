/*
 * redis_cluster.c — slot routing for Redis Cluster (lc/redis_cluster.h):
 * key slots, the CLUSTER SLOTS map, MOVED replies, and the map link.
 * Ours because Debian ships no cluster-aware hiredis (see the header).
 */
#include "lc/redis_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"

/* ---------------------------------------------------------------- slots */

/* CRC16-CCITT in its XMODEM form (poly 0x1021, init 0), what Redis Cluster
 * hashes keys with; bitwise: a few hundred keys, not worth a table. */
static uint16_t crc16_xmodem(const char *s, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)s[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint16_t lc_redis_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) /* "{}" is no tag: the whole key counts */
            return crc16_xmodem(open + 1, (size_t)(close - open - 1)) % LC_REDIS_SLOTS;
    }
    return crc16_xmodem(key, len) % LC_REDIS_SLOTS;
}

/* ---------------------------------------------------------------- the map */

void lc_redis_slot_map_fini(lc_redis_slot_map_t *m)
{
    lc_free(m->nodes);
    memset(m, 0, sizeof(*m));
}

static bool reply_int(const redisReply *r, long long lo, long long hi, long long *out)
{
    if (r->type != REDIS_REPLY_INTEGER || r->integer < lo || r->integer > hi)
        return false;
    *out = r->integer;
    return true;
}

/* The index + 1 of node in m, added if new; 0 past the node limit. */
static uint16_t map_node(lc_redis_slot_map_t *m, const lc_redis_node_t *node)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].port == node->port && strcmp(m->nodes[i].host, node->host) == 0)
            return (uint16_t)(i + 1);
    if (m->n_nodes == LC_REDIS_CLUSTER_NODES_MAX)
        return 0;
    m->nodes = lc_xrealloc(m->nodes, (m->n_nodes + 1) * sizeof(*m->nodes));
    m->nodes[m->n_nodes++] = *node;
    return (uint16_t)m->n_nodes;
}

/* [host, port, id, ...] of a CLUSTER SLOTS entry; false if malformed, and
 * *usable false for a host Redis does not know ("" or "?"). */
static bool parse_endpoint(const redisReply *r, lc_redis_node_t *out, bool *usable)
{
    long long port;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || !reply_int(r->element[1], 0, 65535, &port))
        return false;
    const redisReply *host = r->element[0];
    if (host->len >= LC_REDIS_HOST_MAX || memchr(host->str, '\0', host->len))
        return false;
    memcpy(out->host, host->str, host->len);
    out->host[host->len] = '\0';
    out->port = (uint16_t)port;
    *usable = host->len > 0 && strcmp(out->host, "?") != 0 && port > 0;
    return true;
}

static bool parse_range(lc_redis_slot_map_t *m, const redisReply *e)
{
    long long lo, hi;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        !reply_int(e->element[0], 0, LC_REDIS_SLOTS - 1, &lo) ||
        !reply_int(e->element[1], lo, LC_REDIS_SLOTS - 1, &hi))
        return false;
    lc_redis_node_t node;
    bool usable;
    if (!parse_endpoint(e->element[2], &node, &usable))
        return false;
    uint16_t idx = usable ? map_node(m, &node) : 0;
    for (long long s = lo; s <= hi && idx; s++)
        m->owner[s] = idx;
    return true;
}

int lc_redis_slot_map_parse(lc_redis_slot_map_t *m, const redisReply *reply)
{
    lc_redis_slot_map_fini(m);
    if (!reply || reply->type != REDIS_REPLY_ARRAY)
        return LC_ECORRUPT;
    for (size_t i = 0; i < reply->elements; i++) {
        if (!parse_range(m, reply->element[i])) {
            lc_redis_slot_map_fini(m);
            return LC_ECORRUPT;
        }
    }
    return 0;
}

int lc_redis_redirect_parse(const char *s, size_t len, uint16_t *slot, lc_redis_node_t *to,
                            bool *ask)
{
    char buf[32 + LC_REDIS_HOST_MAX];
    if (len >= sizeof(buf) || memchr(s, '\0', len))
        return LC_EINPUT;
    memcpy(buf, s, len);
    buf[len] = '\0';
    size_t skip = strncmp(buf, "MOVED ", 6) == 0 ? 6 : strncmp(buf, "ASK ", 4) == 0 ? 4 : 0;
    if (!skip)
        return LC_EINPUT;
    *ask = skip == 4;
    char *end;
    long n = strtol(buf + skip, &end, 10);
    if (end == buf + skip || *end != ' ' || n < 0 || n >= LC_REDIS_SLOTS)
        return LC_EINPUT;
    char *addr = end + 1, *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= LC_REDIS_HOST_MAX)
        return LC_EINPUT;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port <= 0 || port > 65535)
        return LC_EINPUT;
    memcpy(to->host, addr, (size_t)(colon - addr));
    to->host[colon - addr] = '\0';
    to->port = (uint16_t)port;
    *slot = (uint16_t)n;
    return 0;
}

bool lc_redis_url_is_list(const char *url)
{
    return url && strchr(url, ',') != NULL;
}

/* ---------------------------------------------------------------- the router */

typedef struct route_s {
    lc_redis_cluster_t *cl;
    uint16_t slot;
} route_t;

struct lc_redis_cluster_s {
    uv_loop_t *loop;
    char *first_url; /* user, password: every link authenticates with them */
    char *name;
    lc_redis_node_t seeds[LC_REDIS_CLUSTER_SEEDS_MAX];
    size_t n_seeds;
    size_t next_probe; /* the map link's next target: seeds, then map nodes */
    lc_redis_slot_map_t map;
    bool has_map;
    route_t routes[LC_REDIS_SLOTS];
    lc_redis_t *link;
    uv_timer_t timer;
    bool asking; /* a CLUSTER SLOTS is out */
    int closing_parts;
    void (*close_cb)(void *data);
    void *close_data;
};

/* The map link tries every known node in turn: a dead one is skipped at the
 * next attempt. */
static int map_link_target(void *data, char host[LC_REDIS_HOST_MAX], uint16_t *port)
{
    lc_redis_cluster_t *cl = data;
    size_t n = cl->n_seeds + cl->map.n_nodes;
    size_t i = cl->next_probe++ % n;
    const lc_redis_node_t *node = i < cl->n_seeds ? &cl->seeds[i] : &cl->map.nodes[i - cl->n_seeds];
    snprintf(host, LC_REDIS_HOST_MAX, "%s", node->host);
    *port = node->port;
    return 0;
}

static void map_on_slots(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    lc_redis_cluster_t *cl = data;
    LC_UNUSED(r);
    cl->asking = false;
    if (status) /* the link retries elsewhere */
        return;
    lc_redis_slot_map_t m = {0};
    if (lc_redis_slot_map_parse(&m, reply) != 0) {
        LC_LOG_WARN("redis cluster: bad CLUSTER SLOTS reply name=%s err=\"%s\"", cl->name,
                    lc_redis_reply_error(reply) ? lc_redis_reply_error(reply) : "malformed");
        lc_redis_reconnect(cl->link, "bad CLUSTER SLOTS reply"); /* ask another node */
        return;
    }
    if (!cl->has_map)
        LC_LOG_INFO("redis cluster: slot map known name=%s masters=%zu", cl->name, m.n_nodes);
    lc_redis_slot_map_fini(&cl->map);
    cl->map = m;
    cl->has_map = true;
}

static void map_ask(lc_redis_cluster_t *cl)
{
    if (cl->asking || !lc_redis_is_up(cl->link))
        return;
    const char *argv[] = {"CLUSTER", "SLOTS"};
    cl->asking = lc_redis_command(cl->link, 0, map_on_slots, cl, 2, argv, NULL) == 0;
}

static void map_on_tick(uv_timer_t *t)
{
    map_ask(t->data);
}

static void map_on_state(lc_redis_t *r, bool up, void *data)
{
    LC_UNUSED(r);
    if (up)
        map_ask(data);
}

/* A link's connection attempt: the owner of its slot, if known. */
static int route_target(void *data, char host[LC_REDIS_HOST_MAX], uint16_t *port)
{
    const route_t *rt = data;
    const lc_redis_cluster_t *cl = rt->cl;
    uint16_t idx = cl->has_map ? cl->map.owner[rt->slot] : 0;
    if (!idx)
        return LC_REDIS_EDOWN;
    snprintf(host, LC_REDIS_HOST_MAX, "%s", cl->map.nodes[idx - 1].host);
    *port = cl->map.nodes[idx - 1].port;
    return 0;
}

/* MOVED: the slot has a new owner (a failover, or a map older than the
 * link). Take it into the map now, reconnect there, and ask for the whole map. */
static void route_redirect(lc_redis_t *r, const char *err, size_t len, void *data)
{
    route_t *rt = data;
    lc_redis_cluster_t *cl = rt->cl;
    uint16_t slot;
    lc_redis_node_t to;
    bool ask;
    if (lc_redis_redirect_parse(err, len, &slot, &to, &ask) != 0 || ask) {
        LC_LOG_WARN("redis cluster: redirection not followed link=%s reply=\"%.*s\"",
                    lc_redis_name(r), (int)(len < 200 ? len : 200), err);
        return;
    }
    uint16_t idx = map_node(&cl->map, &to);
    if (idx) {
        cl->map.owner[slot] = idx;
        cl->has_map = true;
    }
    LC_LOG_INFO("redis cluster: slot moved link=%s slot=%u to=%s:%u", lc_redis_name(r),
                (unsigned)slot, to.host, (unsigned)to.port);
    lc_redis_reconnect(r, "MOVED");
    map_ask(cl);
}

void lc_redis_cluster_route(lc_redis_cluster_t *cl, const char *key, lc_redis_opts_t *o)
{
    uint16_t slot = lc_redis_key_slot(key, strlen(key));
    cl->routes[slot] = (route_t){cl, slot};
    o->url = cl->first_url;
    o->target = route_target;
    o->redirect = route_redirect;
    o->cluster_data = &cl->routes[slot];
}

bool lc_redis_cluster_has_map(const lc_redis_cluster_t *cl)
{
    return cl->has_map;
}

/* Splits the seed list into cl->seeds; the first URL is kept whole. */
static int parse_seeds(lc_redis_cluster_t *cl, const char *seeds)
{
    const char *at = seeds;
    while (at) { /* an empty item (",," or a trailing comma) is refused below */
        const char *comma = strchr(at, ',');
        size_t len = comma ? (size_t)(comma - at) : strlen(at);
        char one[1024];
        lc_redis_url_t url;
        if (len == 0 || len >= sizeof(one) || cl->n_seeds == LC_REDIS_CLUSTER_SEEDS_MAX)
            return LC_EINPUT;
        memcpy(one, at, len);
        one[len] = '\0';
        if (lc_redis_url_parse(one, &url) != 0 || url.db != 0)
            return LC_EINPUT; /* Redis Cluster has only database 0 */
        if (!cl->first_url)
            cl->first_url = lc_xstrdup(one);
        snprintf(cl->seeds[cl->n_seeds].host, LC_REDIS_HOST_MAX, "%s", url.host);
        cl->seeds[cl->n_seeds++].port = url.port;
        at = comma ? comma + 1 : NULL;
    }
    return cl->n_seeds ? 0 : LC_EINPUT;
}

static void cluster_free(lc_redis_cluster_t *cl)
{
    lc_redis_slot_map_fini(&cl->map);
    lc_free(cl->first_url);
    lc_free(cl->name);
    lc_free(cl);
}

int lc_redis_cluster_new(uv_loop_t *loop, const lc_redis_cluster_opts_t *opts,
                         lc_redis_cluster_t **out)
{
    if (!opts || !opts->seeds)
        return LC_EINPUT;
    lc_redis_cluster_t *cl = lc_xcalloc(1, sizeof(*cl));
    cl->loop = loop;
    cl->name = lc_xstrdup(opts->name ? opts->name : "cluster");
    if (parse_seeds(cl, opts->seeds) != 0) {
        cluster_free(cl);
        return LC_EINPUT;
    }
    char name[160];
    snprintf(name, sizeof(name), "%s-slots", cl->name);
    lc_redis_opts_t ro = {.url = cl->first_url,
                          .name = name,
                          .cmd_timeout_ms = opts->cmd_timeout_ms,
                          .backoff_max_ms = 1000, /* the map is what every failover waits for */
                          .on_state = map_on_state,
                          .state_data = cl,
                          .target = map_link_target,
                          .cluster_data = cl};
    LC_ASSERT(lc_redis_new(loop, &ro, &cl->link) == 0); /* the URL was validated */
    uint32_t every = opts->refresh_ms ? opts->refresh_ms : 1000;
    uv_timer_init(loop, &cl->timer);
    cl->timer.data = cl;
    uv_timer_start(&cl->timer, map_on_tick, every, every);
    *out = cl;
    return 0;
}

static void close_part_done(lc_redis_cluster_t *cl)
{
    if (--cl->closing_parts > 0)
        return;
    void (*cb)(void *) = cl->close_cb;
    void *data = cl->close_data;
    cluster_free(cl);
    if (cb)
        cb(data);
}

static void close_on_link(void *data)
{
    close_part_done(data);
}

static void close_on_timer(uv_handle_t *h)
{
    close_part_done(h->data);
}

void lc_redis_cluster_close(lc_redis_cluster_t *cl, void (*cb)(void *data), void *data)
{
    cl->close_cb = cb;
    cl->close_data = data;
    cl->closing_parts = 2;
    uv_close((uv_handle_t *)&cl->timer, close_on_timer);
    lc_redis_close(cl->link, close_on_link, cl);
}
