/*
 * main.c — `ember-scraper`: pulls pprof from the targets of a parca.yaml and
 * publishes to the ingesters' Redis streams; replicas split the targets.
 */
#include "ember_process.h"
#include "scraper.h"

static const lc_node_ops_t *const nodes[] = {&ember_publisher_node, &scr_node};

int main(int argc, char **argv)
{
    const ember_binary_t scraper = {
        .bin = EMBER_BIN_SCRAPER,
        .name = "ember-scraper",
        .usage = "usage: ember-scraper --config.file=parca.yaml --redis.url=redis://HOST:PORT "
                 "[flags]\nScrapes pprof endpoints (Parca's scrape_configs) and publishes the "
                 "profiles to the ingesters' Redis streams.",
        .nodes = nodes,
        .n_nodes = LC_ARRAY_LEN(nodes),
    };
    return ember_main(&scraper, argc, argv);
}
