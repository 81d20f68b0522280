/*
 * main.h — the `ember-scraper` binary: its configuration and the service that
 * composes the scraper with an HTTP server (/targets, /metrics, /ready), the
 * Redis transport the ingesters consume, and Redis membership, through which
 * replicas split the targets.
 */
#ifndef EMBER_SCRAPER_MAIN_H
#define EMBER_SCRAPER_MAIN_H

#include <stdint.h>

#include "lc/cfg.h"

typedef struct scraper_cfg_s {
    char *config_file; /* the parca.yaml, not a settings file (see main.c) */
    char *http_address;
    char *log_level;
    char *redis_url;
    int64_t redis_partitions;
    int64_t publish_retry_ns; /* --redis.publish-retry */
    char *tenant;
    char *member_id;
    char *member_address;
    int64_t heartbeat_ns;
    int64_t member_ttl_ns;
    int64_t handover_ns;
    int64_t max_body_bytes;
    int64_t max_samples;
} scraper_cfg_t;

extern const lc_cfg_entry_t scraper_cfg_table[];
extern const size_t scraper_cfg_table_len;

/* Runs the scraper service until SIGTERM/SIGINT; returns 0 after a clean drain. */
int scraper_service_run(const scraper_cfg_t *cfg);

#endif
