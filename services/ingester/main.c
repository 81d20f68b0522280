/*
 * main.c — `ember-ingester`: the ingester node (receivers, transport, writer,
 * store, retention; with --redis.url it announces itself to the queriers)
 * and the shard API the queriers ask.
 */
#include "ember_process.h"
#include "ingester.h"
#include "shard.h" /* the querier role's: qry_shard_node */

static const lc_node_ops_t *const nodes[] = {&ing_node, &qry_shard_node};

int main(int argc, char **argv)
{
    const ember_binary_t ingester = {
        .bin = EMBER_BIN_INGESTER,
        .name = "ember-ingester",
        .usage = "usage: ember-ingester [flags]\n"
                 "Receives profiles (Pyroscope ingest API), writes them to its store and answers "
                 "the\nqueriers' shard calls; with --redis.url it announces itself to them.",
        .nodes = nodes,
        .n_nodes = LC_ARRAY_LEN(nodes),
    };
    return ember_main(&ingester, argc, argv);
}
