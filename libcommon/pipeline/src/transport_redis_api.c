/*
 * transport_redis_api.c — the Redis transport's public entry points
 * (lc/transport_redis.h): each picks the single-Redis transport
 * (transport_redis.c) or the Redis Cluster one (transport_redis_cluster.c,
 * built from single-Redis shards). Kept in a file of its own so those two do
 * not call each other. Threading: as the functions it calls.
 */
#include "transport_redis_int.h"

int lc_transport_redis_new(uv_loop_t *loop, const lc_redis_transport_opts_t *opts,
                           lc_transport_consume_fn consume, void *data, lc_transport_t **out)
{
    if (opts && opts->cluster)
        return lc_rt__cluster_new(loop, opts, consume, data, out);
    return lc_rt__new(loop, opts, 0, NULL, consume, data, out);
}

void lc_transport_redis_release(lc_transport_t *base)
{
    if (base && !lc_rt__cluster_release(base))
        lc_rt__release_one(base);
}

int lc_transport_redis_stats(lc_transport_t *base, lc_redis_transport_stats_t *out)
{
    if (base && lc_rt__cluster_stats(base, out) == 0)
        return 0;
    return lc_rt__stats_one(base, out);
}
