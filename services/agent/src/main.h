/*
 * main.h — the `ember-agent` binary: its configuration and the service that
 * composes the agent with an HTTP server (/metrics, /ready) and the Redis
 * transport.
 */
#ifndef EMBER_AGENT_MAIN_H
#define EMBER_AGENT_MAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "lc/cfg.h"

typedef struct agent_cfg_s {
    char *config_file;
    char *http_address;
    char *log_level;
    char *redis_url;
    int64_t redis_partitions;
    int64_t publish_retry_ns; /* --redis.publish-retry */
    char *tenant;
    char *node;
    int64_t sample_rate;
    int64_t interval_ns;
    char *group_by;
    char *filter;
    int64_t max_stacks;
    char *kubernetes_api;
} agent_cfg_t;

extern const lc_cfg_entry_t agent_cfg_table[];
extern const size_t agent_cfg_table_len;

/* Runs the agent service until SIGTERM/SIGINT; returns 0 after a clean drain. */
int agent_service_run(const agent_cfg_t *cfg);

#endif
