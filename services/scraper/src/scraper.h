/*
 * scraper.h — the scraper role: pulls pprof profiles from HTTP endpoints
 * described by a parca.yaml-style `scrape_configs` file and publishes them
 * through the transport, as the receivers do. Composed by `ember` (direct
 * transport) and by `ember-scraper` (Redis streams).
 *
 * Lifecycle: scr_new (loads and validates the file, starts discovery and the
 * scrape loops, registers GET /targets) -> scr_reload on SIGHUP or when the
 * file changes (a bad file is logged and the running config kept) ->
 * scr_close (stops scraping, waits for in-flight work and publishes, then
 * frees the scraper and calls back).
 *
 * Horizontal scaling: with `membership` set, a replica scrapes only the
 * targets that rendezvous hashing over the live replica ids (scr_set_members)
 * assigns to it, and none before the first member list arrives.
 *
 * Threading: loop thread only; decoding and deltas run on the thread pool.
 */
#ifndef EMBER_SCRAPER_H
#define EMBER_SCRAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/err.h"
#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/service.h"
#include "lc/transport.h"

typedef struct scr_opts_s {
    const char *config_file;   /* required */
    lc_transport_t *transport; /* required: where profiles go */
    lc_metrics_t *metrics;     /* optional */
    lc_httpd_t *httpd;         /* optional: GET /targets is registered (before listen) */
    const char *tenant;        /* default "anonymous" */
    uint32_t partitions;       /* transport partitions; default 1 */
    size_t max_body_bytes;     /* response and decompressed profile cap; default 64 MiB */
    size_t max_samples;        /* per profile; default 1,000,000 */
    bool handle_sighup;        /* reload on SIGHUP; default true */
    int64_t config_poll_ns;    /* how often the file is checked for changes; default 1s */
    bool membership;           /* scrape only what scr_set_members assigns */
    const char *replica_id;    /* this replica's member id; default the host name + pid */
    int64_t handover_ns;       /* wait before scraping a newly assigned target; default 0 */
} scr_opts_t;

void scr_opts_default(scr_opts_t *o);

typedef struct scr_s scr_t;

/* Errors: the config file's problem in st (invalid_argument), or a setup failure. */
int scr_new(uv_loop_t *loop, const scr_opts_t *opts, scr_t **out, lc_status_t *st) LC_MUST_CHECK;
/* Re-reads the config file. On error the running config stays and st says why. */
int scr_reload(scr_t *s, lc_status_t *st) LC_MUST_CHECK;
/* The live replicas (ids copied); targets move at once, new ones after handover_ns. */
void scr_set_members(scr_t *s, const char *const *ids, size_t n);
/* Stops everything; cb (may be NULL) runs once all is finished and s is freed. */
void scr_close(scr_t *s, void (*cb)(void *data), void *data);

/* The scraper node of the process shell (node.c; takes an ember_settings_t):
 * in `ember` with --scrape.config-file, and the whole of `ember-scraper`
 * beside the publisher node. */
extern const lc_node_ops_t scr_node;

/* The replica owning key among ids, by rendezvous (highest random weight)
 * hashing: index into ids, or -1 when n == 0. Exposed for tests. */
long scr_rendezvous_owner(const char *const *ids, size_t n, uint64_t key);

#endif
