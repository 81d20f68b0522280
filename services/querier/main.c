/*
 * main.c — `ember-querier`: the public query API answered by asking the live
 * ingesters of one complete zone and merging their answers.
 */
#include "ember_process.h"
#include "ingester.h"
#include "querier.h"
#include "ui.h"

/* The bucket's store first: the querier node reads it below the marks. */
static const lc_node_ops_t *const nodes[] = {&ing_bucket_store_node, &qry_fanout_node, &ui_node};

int main(int argc, char **argv)
{
    const ember_binary_t querier = {
        .bin = EMBER_BIN_QUERIER,
        .name = "ember-querier",
        .usage = "usage: ember-querier [flags]\n"
                 "Answers the Pyroscope query API by asking every live ingester and merging their "
                 "answers.",
        .nodes = nodes,
        .n_nodes = LC_ARRAY_LEN(nodes),
    };
    return ember_main(&querier, argc, argv);
}
