/*
 * main.c — `ember`, the all-in-one server: the ingester node (receivers,
 * transport, writer, store, retention) and the querier on the same store;
 * with --scrape.config-file the scraper, with --agent the eBPF agent, both
 * publishing into the ingester's transport.
 */
#include "agent.h"
#include "ember_process.h"
#include "ingester.h"
#include "querier.h"
#include "scraper.h"
#include "ui.h"

static const lc_node_ops_t *const nodes[] = {&ing_node, &qry_local_node, &ui_node, &scr_node,
                                             &agt_node};

int main(int argc, char **argv)
{
    const ember_binary_t ember = {
        .bin = EMBER_BIN_EMBER,
        .name = "ember",
        .usage = "usage: ember [flags]\n"
                 "Runs the ingester, writer, store and querier in one process (Pyroscope API on "
                 ":4040).",
        .nodes = nodes,
        .n_nodes = LC_ARRAY_LEN(nodes),
    };
    return ember_main(&ember, argc, argv);
}
