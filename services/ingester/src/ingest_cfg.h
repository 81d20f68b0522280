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
        X("auth.multitenancy-enabled", LC_CFG_BOOL, multitenancy, "false",                         \
          "require X-Scope-OrgID and keep tenants apart"),

/* --ingester.zone (both binaries): the same name, env and help. */
#define ING_CFG_ZONE_HELP "replication zone: each zone stores a full copy ('' = the default zone)"
#define ING_ZONE_MAX 64

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
