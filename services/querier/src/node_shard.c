/*
 * node_shard.c — the shard node of ember-ingester (shard.h: qry_shard_node):
 * the queriers' query API on the store the ingester node opened.
 */
#include "ember_process.h"
#include "shard.h"

static int shard_node_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    qry_shard_t *sh = NULL;
    int rc = qry_shard_new(&p->loop, p->httpd, p->store, p->metrics, s->multitenancy, &sh);
    *state = sh;
    return rc;
}

static void shard_node_free(void *state)
{
    qry_shard_free(state);
}

const lc_node_ops_t qry_shard_node = {
    .name = "shard", .start = shard_node_start, .free = shard_node_free};
