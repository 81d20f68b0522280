/*
 * ember.h — the all-in-one process: HTTP server, receivers, direct transport,
 * writer, store and querier in one libuv loop (plus the thread pool and the
 * writer thread). It composes the same role libraries the distributed
 * binaries use.
 *
 * Lifecycle: ember_new (opens the store, binds the port) -> ember_run (returns
 * after SIGTERM/SIGINT and a graceful drain: stop accepting, finish requests,
 * apply every queued profile, close the store) -> ember_free.
 */
#ifndef EMBER_EMBER_H
#define EMBER_EMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/cfg.h"
#include "lc/err.h"

typedef struct ember_cfg_s {
    char *config_file;
    char *http_address;
    char *data_dir;
    char *log_level;
    int64_t retention_ns;
    int64_t block_duration_ns;
    int64_t map_size_bytes;
    int64_t max_body_bytes;
    int64_t max_connections;
    int64_t max_concurrent_queries;
    int64_t rate_bytes, rate_burst_bytes, rate_profiles, rate_burst_profiles;
    int64_t max_profile_bytes;
    int64_t max_samples;
    int64_t reject_older_than_ns;
    int64_t reject_newer_than_ns;
    int64_t max_backlog_bytes;
    bool multitenancy;
    char *auth_tokens_file;
    int64_t max_query_length_ns;
    int64_t max_query_lookback_ns;
    char *scrape_config_file;       /* --scrape.config-file: run the scraper role */
    bool agent;
    int64_t agent_sample_rate;
    int64_t agent_interval_ns;
    char *redis_url;                /* --redis.url: the redis transport instead of direct */
    char *ingester_id;
    char *zone;                     /* --ingester.zone: its consumer group */
    int64_t partitions;
    int64_t redis_max_backlog;
    int64_t claim_idle_ns;
    int64_t publish_retry_ns; /* --redis.publish-retry */
} ember_cfg_t;

extern const lc_cfg_entry_t ember_cfg_table[];
extern const size_t ember_cfg_table_len;

typedef struct ember_s ember_t;

int ember_new(const ember_cfg_t *cfg, ember_t **out) LC_MUST_CHECK;
/* Runs until SIGTERM/SIGINT, then drains. Returns 0 on a clean stop. */
int ember_run(ember_t *e);
void ember_free(ember_t *e);

#endif
