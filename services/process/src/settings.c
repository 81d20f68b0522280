/*
 * settings.c — the one table of settings of every ember binary, and the rules
 * that tie them to a binary (ember_process.h). An entry is declared once with the
 * mask of the binaries that take it; where binaries print a different help
 * line or default for the same field (ember-scraper's --config.file is its
 * parca.yaml, the agent listens on :4041), the variants sit side by side and
 * fill the same field. The order is each binary's --help order (the golden
 * files under tests/golden/ check it).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings_int.h"

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

#define E EMBER_BIN_EMBER
#define I EMBER_BIN_INGESTER
#define Q EMBER_BIN_QUERIER
#define S EMBER_BIN_SCRAPER
#define A EMBER_BIN_AGENT

#define SET(mask, name, type, field, def, help)                                                    \
    {                                                                                              \
        mask,                                                                                      \
        {                                                                                          \
            name, type, offsetof(ember_settings_t, field), def, 0, 0, help, NULL                   \
        }                                                                                          \
    }
#define SET_RANGE(mask, name, type, field, def, min, max, help)                                    \
    SET_RANGE_ALIAS(mask, name, NULL, type, field, def, min, max, help)
/* alias: the setting's former name, still accepted with a warning (lc/cfg.h). */
#define SET_RANGE_ALIAS(mask, name, alias, type, field, def, min, max, help)                       \
    {                                                                                              \
        mask,                                                                                      \
        {                                                                                          \
            name, type, offsetof(ember_settings_t, field), def, min, max, help, alias              \
        }                                                                                          \
    }

const ember_setting_t ember_settings_table[] = {
    SET(E | I | Q | A, "config.file", LC_CFG_STRING, config_file, NULL,
        "YAML file with any of these settings"),
    SET(S, "config.file", LC_CFG_STRING, scrape_config_file, NULL,
        "the parca.yaml: scrape_configs (required; reloaded on SIGHUP and when it changes)"),
    SET(E | I | Q, "http.address", LC_CFG_STRING, http_address, "0.0.0.0:4040",
        "HTTP listen address"),
    SET(S, "http.address", LC_CFG_STRING, http_address, "0.0.0.0:4042",
        "HTTP listen address (/targets, /metrics, /ready)"),
    SET(A, "http.address", LC_CFG_STRING, http_address, "0.0.0.0:4041",
        "HTTP listen address (/metrics, /ready)"),
    SET(E | I | Q, "data.dir", LC_CFG_STRING, data_dir, "./data",
        "directory of the LMDB blocks (ember-querier: of its bucket cache)"),
    SET(E | I | Q | S | A, "log.level", LC_CFG_STRING, log_level, "info",
        "debug, info, warn or error"),
    SET(E | I, "retention", LC_CFG_DURATION, retention_ns, "0",
        "drop blocks older than this (0 keeps everything)"),
    SET(E | I | Q, "storage.block-duration", LC_CFG_DURATION, block_duration_ns, "1h",
        "time span of one storage block"),
    SET(E | I, "storage.map-size", LC_CFG_BYTES, map_size_bytes, "16GiB",
        "LMDB map size per block (sparse; an upper bound, not an allocation)"),
    SET_RANGE(E | I, "storage.max-open-blocks", LC_CFG_INT, max_open_blocks, "0", 0, 1000000,
              "block environments kept open between queries (0: a quarter of the open-file "
              "limit at 3 files each, 64..1024)"),
    /* Pyroscope's names (issue 27): ember and ember-ingester upload closed blocks and
     * restore them into an empty data dir (services/ingester/src/bucket.h). */
    SET(E | I | Q, "storage.backend", LC_CFG_STRING, storage_backend, "",
        "object store for closed blocks: filesystem or s3 ('' = local blocks only); "
        "ingesters upload every closed block and restore them into an empty data dir"),
    SET(E | I, "storage.local-retention", LC_CFG_DURATION, local_retention_ns, "6h",
        "with --storage.backend: delete a local block this long after its end once the "
        "object store is confirmed to hold its content; queries read it back from there "
        "(0 keeps blocks for --retention)"),
    SET(E | I | Q, "storage.cache-dir", LC_CFG_STRING, cache_dir, "",
        "with --storage.local-retention: where blocks read back from the object store are "
        "kept ('' = <data.dir>/bucket-cache; emptied at start; ember-querier: what it reads below "
        "the ingesters' marks)"),
    SET(E | I | Q, "storage.cache-size", LC_CFG_BYTES, cache_size_bytes, "4GiB",
        "bound of --storage.cache-dir (least recently used blocks go first)"),
    SET(E | I | Q, "storage.prefix", LC_CFG_STRING, storage_prefix, "",
        "key prefix of every object in the object store"),
    SET(E | I | Q, "storage.filesystem.dir", LC_CFG_STRING, storage_fs_dir, "",
        "directory of the filesystem object store"),
    SET(E | I | Q, "storage.s3.endpoint", LC_CFG_STRING, s3_endpoint, "",
        "S3 endpoint: host[:port] or a URL"),
    SET(E | I | Q, "storage.s3.bucket-name", LC_CFG_STRING, s3_bucket, "", "S3 bucket"),
    SET(E | I | Q, "storage.s3.region", LC_CFG_STRING, s3_region, "",
        "S3 region for request signing ('' = $AWS_REGION, else us-east-1)"),
    SET(E | I | Q, "storage.s3.access-key-id", LC_CFG_STRING, s3_access_key_id, "",
        "S3 access key ('' = $AWS_ACCESS_KEY_ID)"),
    SET(E | I | Q, "storage.s3.secret-access-key", LC_CFG_STRING, s3_secret_access_key, "",
        "S3 secret key ('' = $AWS_SECRET_ACCESS_KEY)"),
    SET(E | I | Q, "storage.s3.insecure", LC_CFG_BOOL, s3_insecure, "false",
        "plain HTTP to an endpoint given without a scheme"),
    SET(E | I | Q, "storage.s3.force-path-style", LC_CFG_BOOL, s3_force_path_style, "false",
        "address the bucket in the path (endpoint/bucket/key), not the host name"),
    SET(E | I | Q, "http.max-body-bytes", LC_CFG_BYTES, max_body_bytes, "256MiB",
        "largest request body accepted (413 above)"),
    SET(E | I | Q, "http.max-connections", LC_CFG_INT, max_connections, "10000",
        "open HTTP connections; past it new ones get a 503 and are closed"),
    SET(E | I | Q, "http.h2", LC_CFG_BOOL, h2, "true",
        "serve HTTP/2 cleartext (h2c: prior knowledge or Upgrade) on the HTTP port, for gRPC"),
    SET_RANGE(E | I | Q, "http.h2-max-streams", LC_CFG_INT, h2_max_streams, "100", 1, 100000,
              "concurrent HTTP/2 streams (and running handlers) per connection"),
    SET(E | I, "ingest.max-profile-bytes", LC_CFG_BYTES, max_profile_bytes, "64MiB",
        "largest decompressed profile accepted"),
    SET(E | I, "ingest.max-samples", LC_CFG_INT, max_samples, "1000000",
        "most samples accepted in one profile"),
    SET(E | I, "ingest.reject-older-than", LC_CFG_DURATION, reject_older_than_ns, "0",
        "reject profiles older than this (0 accepts any age: backfill works)"),
    SET(E | I, "ingest.reject-newer-than", LC_CFG_DURATION, reject_newer_than_ns, "0",
        "reject profiles further than this in the future (0 = no limit)"),
    SET(E | I, "ingest.max-backlog-bytes", LC_CFG_BYTES, max_backlog_bytes, "256MiB",
        "profiles waiting for the writer before receivers answer 429"),
    SET(E | I, "ingest.rate-limit-bytes", LC_CFG_BYTES, rate_bytes, "0",
        "per-tenant ingestion rate in bytes/s (429 + Retry-After above; 0 = no limit)"),
    SET(E | I, "ingest.rate-burst-bytes", LC_CFG_BYTES, rate_burst_bytes, "0",
        "per-tenant byte burst (0 = one second of the rate)"),
    SET(E | I, "ingest.rate-limit-profiles", LC_CFG_INT, rate_profiles, "0",
        "per-tenant ingestion rate in profiles/s (0 = no limit)"),
    SET(E | I, "ingest.rate-burst-profiles", LC_CFG_INT, rate_burst_profiles, "0",
        "per-tenant profile burst (0 = one second of the rate)"),
    SET(E | I, "ingest.max-series-per-tenant", LC_CFG_INT, max_series_per_tenant, "0",
        "active series (a profile in the last hour) per tenant in this receiver; "
        "requests adding more get 429 (0 = no limit)"),
    /* debug files and server-side symbols (issue 31) */
    SET(E | I, "debuginfo.max-file-bytes", LC_CFG_BYTES, debuginfo_max_file_bytes, "256MiB",
        "largest debug file one upload may store"),
    SET(E | I, "debuginfo.max-tenant-bytes", LC_CFG_BYTES, debuginfo_max_tenant_bytes, "4GiB",
        "all of one tenant's uploaded debug files"),
    SET(E | I, "debuginfo.max-inflated-bytes", LC_CFG_BYTES, debuginfo_max_inflated_bytes, "1GiB",
        "compressed sections of one debug file, inflated (a bigger file is refused)"),
    SET(E | I, "symbolizer.debuginfod-urls", LC_CFG_STRING, debuginfod_urls, "",
        "debuginfod servers, space-separated ('' = $DEBUGINFOD_URLS; 'none' = no server)"),
    SET(E | I, "symbolizer.cache-size", LC_CFG_BYTES, symbolizer_cache_bytes, "1GiB",
        "disk kept for debug files downloaded from debuginfod"),
    SET(E | I, "symbolizer.debuginfod-timeout", LC_CFG_DURATION, debuginfod_timeout_ns, "30s",
        "one debuginfod lookup, connect to last byte"),
    SET(E | I, "symbolizer.query-wait", LC_CFG_DURATION, symbolizer_wait_ns, "2s",
        "what one query waits for debuginfod lookups; frames not named by then show "
        "module+0xoffset"),
    SET(E | I, "symbolizer.negative-cache-ttl", LC_CFG_DURATION, symbolizer_negative_ttl_ns, "5m",
        "how long a build id no debuginfod server has is not asked for again"),
    SET(E | I | Q, "auth.multitenancy-enabled", LC_CFG_BOOL, multitenancy, "false",
        "require X-Scope-OrgID and keep tenants apart"),
    SET(E | I | Q, "auth.tokens-file", LC_CFG_STRING, auth_tokens_file, "",
        "credentials bound to tenants (hashes; reloaded on SIGHUP); '' = no authentication"),
    SET(E | I, "metrics-export.remote-write-url", LC_CFG_STRING, remote_write_url, "",
        "send recording-rule series by Prometheus remote write to this URL "
        "(http(s)://[user:password@]host[:port]/path; '' = rules are not evaluated)"),
    SET(E, "querier.max-query-length", LC_CFG_DURATION, max_query_length_ns, "0",
        "reject queries over a longer time range (0 = no limit; Pyroscope uses 24h)"),
    SET(E, "querier.max-query-lookback", LC_CFG_DURATION, max_query_lookback_ns, "0",
        "clip queries to start no earlier than now minus this (0 = no limit)"),
    SET(E | Q, "querier.max-concurrent-queries", LC_CFG_INT, max_concurrent_queries, "0",
        "queries running at once per tenant in this querier; more get 429 (0 = no limit)"),
    SET(E, "scrape.config-file", LC_CFG_STRING, scrape_config_file, NULL,
        "parca.yaml-style scrape_configs to pull pprof from (reloaded on SIGHUP and change)"),
    SET(E, "agent", LC_CFG_BOOL, agent, "false",
        "also profile every process on this host with eBPF (needs root)"),
    SET(E, "agent.sample-rate", LC_CFG_INT, agent_sample_rate, "19",
        "agent CPU samples per second on each CPU (1..1000)"),
    SET(E, "agent.interval", LC_CFG_DURATION, agent_interval_ns, "10s",
        "agent profile interval: one profile per process per interval"),
    SET(E | A, "agent.symbolize", LC_CFG_STRING, agent_symbolize, "local",
        "who names native frames: local (the agent, from ELF symbols), server (frames of binaries "
        "with a build id go unnamed: the server names them from debug files), both (local for "
        "binaries with their .symtab, server for stripped ones)"),
    SET(E, "redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port: profiles travel through Redis streams ('' = in-process)"),
    SET(I, "redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port of the streams and the membership ('' = standalone)"),
    SET(Q, "redis.url", LC_CFG_STRING, redis_url, "",
        "redis://host:port where ingesters announce themselves (and queriers keep settings)"),
    SET(S | A, "redis.url", LC_CFG_STRING, redis_url, NULL,
        "Redis the ingesters consume: redis://HOST:PORT[/DB] (required)"),
    SET(E | I | Q | S | A, "redis.cluster", LC_CFG_BOOL, redis_cluster, "false",
        "Redis Cluster: --redis.url lists seed nodes, comma-separated (each partition's keys "
        "in one slot)"),
    SET_RANGE(S | A, "redis.publish-retry", LC_CFG_DURATION, publish_retry_ns, "0s", 0,
              600 * NS_PER_S,
              "retry a publish whose outcome is unknown this long, stored once (0: fail at once)"),
    SET_RANGE(S | A, "redis.wait-replicas", LC_CFG_INT, wait_replicas, "0", 0, 64,
              "acknowledge a publish once this many Redis replicas have it (WAIT; 0: the "
              "master's answer)"),
    /* One name in every binary: ember and ember-ingester call it ingest.partitions too. */
    SET_RANGE_ALIAS(S | A, "ingest.partitions", "redis.partitions", LC_CFG_INT, partitions, "16", 1,
                    4096, "stream partitions ember:ingest:<p>, as the ingesters are configured"),
    SET(S | A, "tenant", LC_CFG_STRING, tenant, "anonymous", "tenant the profiles belong to"),
    SET(S, "member.id", LC_CFG_STRING, member_id, NULL,
        "this replica's id in the group (default: host name and HTTP port)"),
    SET(S, "member.address", LC_CFG_STRING, member_address, NULL,
        "how other processes reach this replica (default: host name and HTTP port)"),
    SET_RANGE(S, "member.heartbeat", LC_CFG_DURATION, heartbeat_ns, "1s", 100 * NS_PER_MS,
              60 * NS_PER_S, "how often this replica renews its membership and re-reads the group"),
    SET_RANGE(S, "member.ttl", LC_CFG_DURATION, member_ttl_ns, "5s", 200 * NS_PER_MS,
              600 * NS_PER_S, "a replica unseen this long is gone and its targets move"),
    SET_RANGE(S, "scrape.handover", LC_CFG_DURATION, handover_ns, "2s", 0, 600 * NS_PER_S,
              "wait before scraping a target taken over from another replica"),
    SET_RANGE(S, "scrape.max-body-bytes", LC_CFG_BYTES, scrape_max_body_bytes, "64MiB", 1024,
              1LL << 32, "largest response body and decompressed profile accepted"),
    SET_RANGE(S, "scrape.max-samples", LC_CFG_INT, scrape_max_samples, "1000000", 1, 100000000,
              "most samples accepted in one profile"),
    SET(A, "node", LC_CFG_STRING, node, NULL,
        "node label (default: $NODE_NAME, else the host name)"),
    SET_RANGE(A, "agent.sample-rate", LC_CFG_INT, agent_sample_rate, "19", EMBER_AGENT_MIN_RATE_HZ,
              EMBER_AGENT_MAX_RATE_HZ, "CPU samples per second on each CPU"),
    SET_RANGE(A, "agent.interval", LC_CFG_DURATION, agent_interval_ns, "10s",
              EMBER_AGENT_MIN_INTERVAL_NS, 3600 * NS_PER_S,
              "one profile per process (or container) per interval"),
    SET(A, "agent.group-by", LC_CFG_STRING, agent_group_by, "process", "process or container"),
    SET(A, "agent.filter", LC_CFG_STRING, agent_filter, NULL,
        "profile only processes whose labels match this selector, e.g. "
        "{comm=~\"nginx|redis\",cgroup!~\"/system.slice/.*\"}"),
    SET_RANGE(A, "agent.max-stacks", LC_CFG_INT, agent_max_stacks, "0", 0, 1 << 22,
              "distinct stacks one interval can hold (0 = sized from rate, interval and CPUs)"),
    SET(A, "agent.kubernetes-api", LC_CFG_STRING, agent_kubernetes_api, NULL,
        "API server for pod labels (default: the in-cluster one when in a pod; \"off\")"),
    SET(I, "ingester.advertise-url", LC_CFG_STRING, advertise_url, "",
        "URL queriers reach this ingester at ('' = http://<http.address>)"),
    SET(Q, "querier.ingesters", LC_CFG_STRING, querier_ingesters, "",
        "comma-separated ingester URLs always asked, besides the announced ones"),
    SET(Q, "querier.shard-timeout", LC_CFG_DURATION, shard_timeout_ns, "30s",
        "deadline of one call to an ingester"),
    SET(E | I, "ingester.id", LC_CFG_STRING, ingester_id, "",
        "stream consumer id, stable across restarts ('' = <hostname>:<http port>)"),
    SET(E | I, "ingester.zone", LC_CFG_STRING, zone, "",
        "replication zone: each zone stores a full copy ('' = the default zone)"),
    SET(E | I, "ingest.partitions", LC_CFG_INT, partitions, "16",
        "Redis streams ember:ingest:<p>; every process must agree"),
    SET(E | I, "redis.max-backlog", LC_CFG_INT, redis_max_backlog, "100000",
        "entries waiting in one stream before receivers answer 429"),
    SET(E | I, "redis.claim-idle", LC_CFG_DURATION, claim_idle_ns, "60s",
        "pending this long, a dead consumer's entries are claimed by another"),
    SET_RANGE(E | I, "redis.publish-retry", LC_CFG_DURATION, publish_retry_ns, "0s", 0,
              600 * NS_PER_S,
              "retry a publish whose outcome is unknown this long, stored once (0: answer 503 "
              "at once)"),
    SET_RANGE(E | I, "redis.wait-replicas", LC_CFG_INT, wait_replicas, "0", 0, 64,
              "answer 200 once this many Redis replicas have the profile (WAIT; 0: the "
              "master's answer; use with --redis.publish-retry)"),
};
const size_t ember_settings_table_len = LC_ARRAY_LEN(ember_settings_table);

size_t ember_settings_select(ember_bin_t bin, lc_cfg_entry_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < ember_settings_table_len && n < cap; i++)
        if (ember_settings_table[i].bins & bin)
            out[n++] = ember_settings_table[i].entry;
    return n;
}

/* ---------------------------------------------------------------- shared rules */

static const char *setting_or_env(const char *setting, const char *env)
{
    const char *v = setting && *setting ? setting : getenv(env);
    return v ? v : "";
}

void ember_objstore_opts(const ember_settings_t *s, lc_objstore_opts_t *o)
{
    memset(o, 0, sizeof *o);
    if (lc_objstore_backend_parse(s->storage_backend, &o->backend) != 0)
        o->backend = LC_OBJSTORE_NONE; /* main's check has refused it already */
    o->prefix = s->storage_prefix;
    o->fs_dir = s->storage_fs_dir;
    o->endpoint = s->s3_endpoint;
    o->bucket = s->s3_bucket;
    o->region = setting_or_env(s->s3_region, "AWS_REGION");
    o->access_key_id = setting_or_env(s->s3_access_key_id, "AWS_ACCESS_KEY_ID");
    o->secret_access_key = setting_or_env(s->s3_secret_access_key, "AWS_SECRET_ACCESS_KEY");
    o->insecure = s->s3_insecure;
    o->force_path_style = s->s3_force_path_style;
}

bool ember_clustered(const ember_settings_t *s)
{
    return s->redis_url && *s->redis_url;
}

void ember_consumer_id(const char *configured, const char *http_address, char *out, size_t size,
                       bool *stable)
{
    *stable = true;
    if (configured && *configured) {
        snprintf(out, size, "%s", configured);
        return;
    }
    char host[256] = "ingester";
    gethostname(host, sizeof(host) - 1);
    const char *colon = strrchr(http_address, ':');
    const char *port = colon ? colon + 1 : http_address;
    if (!*port || strcmp(port, "0") == 0) {
        snprintf(out, size, "%s:pid%ld", host, (long)getpid());
        *stable = false;
    } else {
        snprintf(out, size, "%s:%s", host, port);
    }
}

bool ember_zone_group(const char *zone, char *out, size_t size)
{
    size_t n = zone ? strlen(zone) : 0;
    if (n > EMBER_ZONE_MAX || n != strspn(zone ? zone : "", "abcdefghijklmnopqrstuvwxyz"
                                                            "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789_-"))
        return false;
    int len = n ? snprintf(out, size, "ingesters.%s", zone) : snprintf(out, size, "ingesters");
    return len > 0 && (size_t)len < size;
}
