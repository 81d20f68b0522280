/*
 * ember_process.h — what every ember binary is: one table of settings (each
 * declared once, taken by the binaries named in its mask, so a name means
 * the same thing wherever it is accepted) and the body of main(), which loads
 * the binary's settings, sets up logging and runs the chosen nodes in the
 * process shell (lc/service.h).
 *
 * A binary's main.c names itself and its nodes, nothing else:
 *
 *     static const lc_node_ops_t *const nodes[] = {&ing_node, &qry_shard_node};
 *     int main(int argc, char **argv)
 *     {
 *         return ember_main(&(ember_binary_t){.bin = EMBER_BIN_INGESTER, ...}, argc, argv);
 *     }
 *
 * Ownership: ember_main owns the settings for the life of the process; nodes
 * read them (const) from their start hook. Threading: main thread.
 */
#ifndef EMBER_EMBER_PROCESS_H
#define EMBER_EMBER_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/objstore.h"
#include "lc/service.h"

/* The binaries; an entry's mask says which of them take it. */
typedef enum {
    EMBER_BIN_EMBER = 1 << 0,
    EMBER_BIN_INGESTER = 1 << 1,
    EMBER_BIN_QUERIER = 1 << 2,
    EMBER_BIN_SCRAPER = 1 << 3,
    EMBER_BIN_AGENT = 1 << 4,
} ember_bin_t;

/* The agent's bounds: its settings' ranges, and agt_new checks them. */
#define EMBER_AGENT_MIN_RATE_HZ 1
#define EMBER_AGENT_MAX_RATE_HZ 1000
#define EMBER_AGENT_MIN_INTERVAL_NS 1000000000LL

#define EMBER_ZONE_MAX 64
#define EMBER_CONSUMER_ID_MAX 400

/* Every setting of every binary. A field a binary does not take keeps its
 * zero value there. */
typedef struct ember_settings_s {
    ember_bin_t bin; /* the binary running */
    char *config_file;
    char *http_address;
    char *data_dir;
    char *log_level;
    /* storage */
    int64_t retention_ns;
    int64_t block_duration_ns;
    int64_t map_size_bytes;
    int64_t max_open_blocks; /* 0: derived from RLIMIT_NOFILE by the store */
    /* object storage of closed blocks (issue 27): the ingester node's uploader */
    char *storage_backend;      /* "", "filesystem" or "s3" */
    int64_t local_retention_ns; /* uploaded blocks older than this leave the data dir */
    char *cache_dir;            /* blocks read back from the object store (ingester) */
    int64_t cache_size_bytes;   /* bound of cache_dir */
    char *storage_prefix;
    char *storage_fs_dir;
    char *s3_endpoint;
    char *s3_bucket;
    char *s3_region;
    char *s3_access_key_id;     /* else $AWS_ACCESS_KEY_ID */
    char *s3_secret_access_key; /* else $AWS_SECRET_ACCESS_KEY */
    bool s3_insecure;
    bool s3_force_path_style;
    /* receivers */
    int64_t max_body_bytes;
    int64_t max_connections;
    bool h2;
    int64_t h2_max_streams;
    int64_t max_profile_bytes;
    int64_t max_samples;
    int64_t reject_older_than_ns;
    int64_t reject_newer_than_ns;
    int64_t max_backlog_bytes;
    bool multitenancy;
    char *auth_tokens_file; /* credentials bound to tenants; "" = none */
    char *remote_write_url; /* recording-rule series go here (issue 29); "" = off */
    int64_t rate_bytes, rate_burst_bytes, rate_profiles, rate_burst_profiles;
    int64_t max_series_per_tenant;
    /* debug files and server-side symbols (issue 31) */
    int64_t debuginfo_max_file_bytes, debuginfo_max_tenant_bytes, debuginfo_max_inflated_bytes;
    char *debuginfod_urls; /* "" = $DEBUGINFOD_URLS, "none" = no server */
    int64_t symbolizer_cache_bytes;
    int64_t debuginfod_timeout_ns, symbolizer_wait_ns, symbolizer_negative_ttl_ns;
    /* querier */
    int64_t max_query_length_ns;
    int64_t max_query_lookback_ns;
    int64_t max_concurrent_queries;
    char *querier_ingesters;
    int64_t shard_timeout_ns;
    /* scraper: ember's --scrape.config-file, ember-scraper's --config.file */
    char *scrape_config_file;
    int64_t scrape_max_body_bytes;
    int64_t scrape_max_samples;
    int64_t handover_ns;
    char *member_id;
    char *member_address;
    int64_t heartbeat_ns;
    int64_t member_ttl_ns;
    /* agent */
    bool agent;
    int64_t agent_sample_rate;
    int64_t agent_interval_ns;
    char *agent_group_by;
    char *agent_symbolize; /* local, server, both (agt_symbolize_t) */
    char *agent_filter;
    int64_t agent_max_stacks;
    char *agent_kubernetes_api;
    char *node;
    char *tenant; /* the tenant a scraper or an agent publishes as */
    /* Redis streams */
    char *redis_url;
    bool redis_cluster; /* redis_url lists Redis Cluster seed nodes */
    char *advertise_url;
    char *ingester_id;
    char *zone;
    int64_t partitions;
    int64_t redis_max_backlog;
    int64_t claim_idle_ns;
    int64_t publish_retry_ns;
    int64_t wait_replicas; /* WAIT for this many Redis replicas before acknowledging */
    /* Not settings: the configuration as YAML (lc_cfg_yaml), written by ember_main
     * before the nodes start, for status.v1.StatusService. Never NULL while nodes run. */
    char *config_yaml;         /* the effective configuration */
    char *config_diff_yaml;    /* what differs from the defaults */
    char *config_default_yaml; /* the defaults */
} ember_settings_t;

typedef struct ember_binary_s {
    ember_bin_t bin;
    const char *name;  /* "ember-ingester" */
    const char *usage; /* the first lines of --help */
    const lc_node_ops_t *const *nodes;
    size_t n_nodes;
} ember_binary_t;

/* The whole of main(): 0 after a clean stop, 2 for bad settings, 1 when the
 * process could not start. */
int ember_main(const ember_binary_t *b, int argc, char **argv);

/* The object-store options of the --storage.* settings, with the AWS_*
 * variables filling empty credentials and region. The strings point into s
 * and the environment. */
void ember_objstore_opts(const ember_settings_t *s, lc_objstore_opts_t *o);

/* True when the settings name a Redis (the distributed path). */
bool ember_clustered(const ember_settings_t *s);

/* --ingester.id, or <hostname>:<port of http_address>: stable across
 * restarts of the same process on the same host and port, unique among
 * ingesters. An ephemeral port (0) is no identity: the pid is used then and
 * *stable is false (the caller warns: after a restart its pending entries
 * wait for a claim and its old id stays in the zone registry). */
void ember_consumer_id(const char *configured, const char *http_address, char *out, size_t size,
                       bool *stable);

/* The consumer group of a zone: "ingesters" for the default zone "" (what
 * every version before zones used), "ingesters.<zone>" otherwise. A zone is
 * 1..64 of [A-Za-z0-9_-], since it goes into Redis group and key names.
 * false for a bad zone. */
bool ember_zone_group(const char *zone, char *out, size_t size);

/* The publish-only Redis transport of ember-scraper and ember-agent (the
 * ingesters consume): sets p->transport. */
extern const lc_node_ops_t ember_publisher_node;

#endif
