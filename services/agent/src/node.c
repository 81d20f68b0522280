/*
 * node.c — the agent node (agent.h: agt_node): the eBPF profiler of this
 * host, publishing into the process's transport (the ingester node's in
 * `ember --agent`, the publisher node's Redis transport in `ember-agent`).
 * It drains first on stop: its last partial interval is published while the
 * transport still accepts.
 */
#include <string.h>

#include "agent.h"
#include "ember_process.h"
#include "lc/log.h"

typedef struct agt_node_s {
    lc_proc_t *p;
    agt_t *agent;
    bool standalone; /* ember-agent: /ready waits for sampling */
} agt_node_t;

/* ember-agent's options; ember --agent takes the rate, interval and symbolize mode only. */
static int agt_fill_opts(const ember_settings_t *s, agt_opts_t *o)
{
    agt_opts_default(o);
    o->sample_rate_hz = (int)s->agent_sample_rate;
    o->interval_ns = s->agent_interval_ns;
    if (ember_clustered(s))
        o->partitions = (uint32_t)s->partitions;
    if (!agt_symbolize_parse(s->agent_symbolize, &o->symbolize)) {
        LC_LOG_ERROR("--agent.symbolize: want local, server or both");
        return LC_EINPUT;
    }
    if (s->bin != EMBER_BIN_AGENT)
        return 0;
    o->filter = s->agent_filter;
    o->node = s->node;
    o->tenant = s->tenant;
    o->kubernetes_api = s->agent_kubernetes_api;
    o->max_stacks = (size_t)s->agent_max_stacks;
    if (strcmp(s->agent_group_by, "container") == 0) {
        o->group_by = AGT_GROUP_CONTAINER;
    } else if (strcmp(s->agent_group_by, "process") != 0) {
        LC_LOG_ERROR("--agent.group-by: want process or container");
        return LC_EINPUT;
    }
    return 0;
}

static int agt_node_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    if (s->bin != EMBER_BIN_AGENT && !s->agent)
        return 0; /* ember without --agent */
    agt_opts_t o;
    int rc = agt_fill_opts(s, &o);
    if (rc)
        return rc;
    agt_node_t *n = lc_xcalloc(1, sizeof(*n));
    *state = n;
    n->p = p;
    n->standalone = s->bin == EMBER_BIN_AGENT;
    return agt_new(&p->loop, &o, p->transport, p->metrics, &n->agent);
}

static void agt_on_agent_closed(void *data)
{
    agt_node_t *n = data;
    n->agent = NULL;
    lc_proc_continue(n->p);
}

static void agt_node_drain(lc_proc_t *p, void *state)
{
    agt_node_t *n = state;
    if (n->agent)
        agt_close(n->agent, true, agt_on_agent_closed, n);
    else
        lc_proc_continue(p);
}

/* ember-agent is ready when sampling on every online CPU. */
static const char *agt_node_not_ready(void *state)
{
    agt_node_t *n = state;
    return !n->standalone || (n->agent && agt_ready(n->agent)) ? NULL : "not sampling";
}

static void agt_node_free(void *state)
{
    lc_free(state);
}

const lc_node_ops_t agt_node = {
    .name = "agent",
    .start = agt_node_start,
    .drain = agt_node_drain,
    .not_ready = agt_node_not_ready,
    .free = agt_node_free,
};
