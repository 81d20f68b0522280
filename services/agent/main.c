/*
 * main.c — `ember-agent`: the eBPF CPU profiler of one host, publishing to
 * the ingesters' Redis streams.
 */
#include "agent.h"
#include "ember_process.h"

static const lc_node_ops_t *const nodes[] = {&ember_publisher_node, &agt_node};

int main(int argc, char **argv)
{
    const ember_binary_t agent = {
        .bin = EMBER_BIN_AGENT,
        .name = "ember-agent",
        .usage = "usage: ember-agent --redis.url=redis://HOST:PORT [flags]\n"
                 "Profiles every process on this host with eBPF and publishes one pprof per "
                 "process per interval.",
        .nodes = nodes,
        .n_nodes = LC_ARRAY_LEN(nodes),
    };
    return ember_main(&agent, argc, argv);
}
