/*
 * node_local.c — the querier node of `ember` (querier.h: qry_local_node):
 * querier.v1 and the legacy endpoints on the store the ingester node opened,
 * plus settings (kept beside the blocks), version and feature flags.
 */
#include "ember_process.h"
#include "lc/alloc.h"
#include "querier.h"
#include "services_extra.h"

typedef struct local_node_s {
    qry_t *qry;
    qry_extra_t *extra;
} local_node_t;

static int local_node_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    local_node_t *n = lc_xcalloc(1, sizeof(*n));
    *state = n;
    qry_opts_t qo;
    qry_opts_default(&qo);
    qo.multitenancy = s->multitenancy;
    qo.max_query_length_ms = s->max_query_length_ns / 1000000;
    qo.max_query_lookback_ms = s->max_query_lookback_ns / 1000000;
    qo.max_concurrent_per_tenant = s->max_concurrent_queries;
    int rc = qry_new(&p->loop, &qo, p->httpd, p->store, p->metrics, &n->qry);
    qry_extra_opts_t xo = {.multitenancy = s->multitenancy,
                           .data_dir = s->data_dir,
                           .config_yaml = s->config_yaml,
                           .config_diff_yaml = s->config_diff_yaml,
                           .config_default_yaml = s->config_default_yaml,
                           .settings_store = p->settings}; /* the ingester's, if it opened one */
    if (!rc)
        rc = qry_extra_new(&p->loop, &xo, p->httpd, &n->extra);
    return rc;
}

static void local_node_free(void *state)
{
    local_node_t *n = state;
    qry_free(n->qry);
    qry_extra_free(n->extra);
    lc_free(n);
}

const lc_node_ops_t qry_local_node = {
    .name = "querier", .start = local_node_start, .free = local_node_free};
