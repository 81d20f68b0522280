/*
 * publisher.c — the publisher node (ember_process.h: ember_publisher_node): the
 * publish-only Redis transport of ember-scraper and ember-agent, which
 * produce profiles the ingesters consume. It closes last, once every publish
 * was confirmed.
 */
#include "ember_process.h"
#include "lc/alloc.h"
#include "lc/log.h"

#define NS_PER_MS 1000000LL

typedef struct publisher_s {
    lc_proc_t *p;
    lc_transport_t *transport;
} publisher_t;

static int publisher_node_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    if (!ember_clustered(s)) {
        LC_LOG_ERROR("--redis.url is required (ember --scrape.config-file and ember --agent "
                     "run without Redis)");
        return LC_EINPUT;
    }
    publisher_t *n = lc_xcalloc(1, sizeof(*n));
    *state = n;
    n->p = p;
    lc_redis_transport_opts_t ro = {
        .url = s->redis_url,
        .partitions = (uint32_t)s->partitions,
        .publish_retry_ms = (uint32_t)(s->publish_retry_ns / NS_PER_MS),
        .wait_replicas = (uint32_t)s->wait_replicas,
        .cluster = s->redis_cluster,
        .metrics = p->metrics,
    };
    int rc = lc_transport_redis_new(&p->loop, &ro, NULL, NULL, &n->transport);
    if (rc)
        LC_LOG_ERROR("cannot use Redis url=%s err=\"%s\"", s->redis_url, lc_strerror(rc));
    p->transport = n->transport;
    return rc;
}

static void publisher_on_closed(void *data)
{
    publisher_t *n = data;
    n->transport = n->p->transport = NULL;
    LC_LOG_INFO("every profile is in Redis; stopped");
    lc_proc_continue(n->p);
}

static void publisher_node_close(lc_proc_t *p, void *state)
{
    publisher_t *n = state;
    if (n->transport)
        lc_transport_close(n->transport, publisher_on_closed, n);
    else
        lc_proc_continue(p);
}

static const char *publisher_node_not_ready(void *state)
{
    publisher_t *n = state;
    lc_redis_transport_stats_t rs = {0};
    bool up = n->transport && lc_transport_redis_stats(n->transport, &rs) == 0 && rs.up;
    return up ? NULL : "redis down";
}

static void publisher_node_free(void *state)
{
    lc_free(state);
}

const lc_node_ops_t ember_publisher_node = {
    .name = "publisher",
    .start = publisher_node_start,
    .close = publisher_node_close,
    .not_ready = publisher_node_not_ready,
    .free = publisher_node_free,
};
