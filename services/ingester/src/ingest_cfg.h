/*
 * ingest_cfg.h — the settings every process that receives and stores profiles
 * shares (`ember` and `ember-ingester`): one list, so the two binaries cannot
 * drift apart in names, defaults or help. Each binary expands it with its own
 * X(name, type, field, default, help) macro over a config struct that has
 * these field names; the golden --help files check the result.
 */
#ifndef EMBER_INGEST_CFG_H
#define EMBER_INGEST_CFG_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ING_CFG_COMMON(X)                                                                          \
    X("config.file", LC_CFG_STRING, config_file, NULL, "YAML file with any of these settings"),    \
        X("http.address", LC_CFG_STRING, http_address, "0.0.0.0:4040", "HTTP listen address"),     \
        X("data.dir", LC_CFG_STRING, data_dir, "./data", "directory of the LMDB blocks"),          \
        X("log.level", LC_CFG_STRING, log_level, "info", "debug, info, warn or error"),            \
        X("retention", LC_CFG_DURATION, retention_ns, "0",                                         \
          "drop blocks older than this (0 keeps everything)"),                                     \
        X("storage.block-duration", LC_CFG_DURATION, block_duration_ns, "1h",                      \
          "time span of one storage block"),                                                       \
        X("storage.map-size", LC_CFG_BYTES, map_size_bytes, "16GiB",                               \
          "LMDB map size per block (sparse; an upper bound, not an allocation)"),                  \
        X("http.max-body-bytes", LC_CFG_BYTES, max_body_bytes, "256MiB",                           \
          "largest request body accepted (413 above)"),                                            \
        X("http.max-connections", LC_CFG_INT, max_connections, "10000",                          \
          "open HTTP connections; past it new ones get a 503 and are closed"),                     \
        X("ingest.max-profile-bytes", LC_CFG_BYTES, max_profile_bytes, "64MiB",                    \
          "largest decompressed profile accepted"),                                                \
        X("ingest.max-samples", LC_CFG_INT, max_samples, "1000000",                                \
          "most samples accepted in one profile"),                                                 \
        X("ingest.reject-older-than", LC_CFG_DURATION, reject_older_than_ns, "0",                  \
          "reject profiles older than this (0 accepts any age: backfill works)"),                  \
        X("ingest.reject-newer-than", LC_CFG_DURATION, reject_newer_than_ns, "0",                  \
          "reject profiles further than this in the future (0 = no limit)"),                       \
        X("ingest.max-backlog-bytes", LC_CFG_BYTES, max_backlog_bytes, "256MiB",                   \
          "profiles waiting for the writer before receivers answer 429"),                          \
        X("ingest.rate-limit-bytes", LC_CFG_BYTES, rate_bytes, "0",                                \
          "per-tenant ingestion rate in bytes/s (429 + Retry-After above; 0 = no limit)"),         \
        X("ingest.rate-burst-bytes", LC_CFG_BYTES, rate_burst_bytes, "0",                          \
          "per-tenant byte burst (0 = one second of the rate)"),                                   \
        X("ingest.rate-limit-profiles", LC_CFG_INT, rate_profiles, "0",                            \
          "per-tenant ingestion rate in profiles/s (0 = no limit)"),                               \
        X("ingest.rate-burst-profiles", LC_CFG_INT, rate_burst_profiles, "0",                      \
          "per-tenant profile burst (0 = one second of the rate)"),                                \
        X("auth.multitenancy-enabled", LC_CFG_BOOL, multitenancy, "false",                         \
          "require X-Scope-OrgID and keep tenants apart"),                                         \
        X("auth.tokens-file", LC_CFG_STRING, auth_tokens_file, "",                                 \
          "credentials bound to tenants (hashes; reloaded on SIGHUP); '' = no authentication"),

/* The settings of the Redis streams path, after each binary's own
 * --redis.url (their help differs). XR is X with a range (min, max). */
#define ING_CFG_STREAMS(X, XR)                                                                     \
    X("ingester.id", LC_CFG_STRING, ingester_id, "",                                               \
      "stream consumer id, stable across restarts ('' = <hostname>:<http port>)"),                 \
        X("ingester.zone", LC_CFG_STRING, zone, "",                                                \
          "replication zone: each zone stores a full copy ('' = the default zone)"),               \
        X("ingest.partitions", LC_CFG_INT, partitions, "16",                                       \
          "Redis streams ember:ingest:<p>; every process must agree"),                             \
        X("redis.max-backlog", LC_CFG_INT, redis_max_backlog, "100000",                            \
          "entries waiting in one stream before receivers answer 429"),                            \
        X("redis.claim-idle", LC_CFG_DURATION, claim_idle_ns, "60s",                               \
          "pending this long, a dead consumer's entries are claimed by another"),                  \
        XR("redis.publish-retry", LC_CFG_DURATION, publish_retry_ns, "0s", 0,                      \
           600 * 1000000000LL,                                                                     \
           "retry a publish whose outcome is unknown this long, stored once (0: answer 503 at "   \
           "once)"),

#define ING_ZONE_MAX 64
#define ING_CONSUMER_ID_MAX 400

/* --ingester.id, or <hostname>:<port of http_address>: stable across
 * restarts of the same process on the same host and port, unique among
 * ingesters. An ephemeral port (0) is no identity: the pid is used then and
 * *stable is false (the caller warns: after a restart its pending entries
 * wait for a claim and its old id stays in the zone registry). */
static inline void ing_consumer_id(const char *configured, const char *http_address, char *out,
                                   size_t size, bool *stable)
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

/* The consumer group of a zone: "ingesters" for the default zone "" (what
 * every version before zones used), "ingesters.<zone>" otherwise. A zone is
 * 1..64 of [A-Za-z0-9_-], since it goes into Redis group and key names.
 * false for a bad zone. */
static inline bool ing_zone_group(const char *zone, char *out, size_t size)
{
    size_t n = zone ? strlen(zone) : 0;
    if (n > ING_ZONE_MAX || n != strspn(zone ? zone : "", "abcdefghijklmnopqrstuvwxyz"
                                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                          "0123456789_-"))
        return false;
    int len = n ? snprintf(out, size, "ingesters.%s", zone) : snprintf(out, size, "ingesters");
    return len > 0 && (size_t)len < size;
}

#endif
