/*
 * node.c — the ingester node (ingester.h: ing_node): the store, the writer,
 * the transport between receivers and writer, the receivers, retention and
 * block summaries (lc_store_summarize) on timers and, in ember-ingester with --redis.url, the
 * announcement to the queriers. `ember` and `ember-ingester` run this same node.
 *
 * Transport: without --redis.url the receivers hand profiles to the writer
 * in-process (direct). With it they XADD them to ember:ingest:<p> and the
 * writer consumes its zone's group (`ingesters`, or `ingesters.<zone>`: every
 * zone stores every profile) under a consumer id that must survive restarts,
 * so that a restarted ingester finds its own pending entries first; the
 * writer is idempotent by stream id, so a redelivery (or a peer's claim) is
 * harmless.
 *
 * Announcement (ember-ingester only, lc/members.h): the node joins the group
 * "ingester" under its consumer id with its URL, registered in its zone. It
 * joins only once the transport has forgotten the claims record of a
 * previous life (no query may see a profile twice), and consumes only once
 * registered (a crash right after could otherwise lose profiles no registry
 * knew it held). On stop it leaves first, so queriers stop asking.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bucket.h"
#include "bucket_read.h"
#include "ember_process.h"
#include "floor.h"
#include "handover.h"
#include "ingester.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/members.h"
#include "lc/store.h"
#include "rules_export.h"
#include "symbols_int.h"

#define RETENTION_INTERVAL_MS (60 * 1000)
#define SUMMARY_INTERVAL_MS 2000
#define SUMMARY_QUIET_NS (5 * NS_PER_S) /* a closed block gets summaries once writes pause */
#define REDIS_CMD_TIMEOUT_MS 2000
#define NS_PER_S 1000000000LL
#define BUCKET_INTERVAL_MS 2000 /* between upload passes: a closed block goes up within it */
/* Decoded profiles held for the writer over Redis (handover.h): a heap
 * profile of 12k samples takes about 3 MiB; past this the writer decodes. */
#define ING_HANDOVER_MAX_BYTES ((size_t)96 << 20)

typedef struct ing_node_s {
    lc_proc_t *p;
    const ember_settings_t *s;
    lc_store_t *store;
    ing_writer_t *writer;
    lc_transport_t *transport;
    ing_t *receivers;
    ing_symbols_t *symbols;         /* debug files, symbolizer, upload APIs */
    bool announce;                  /* ember-ingester with --redis.url */
    lc_members_t *members;          /* joined as "ingester" */
    ing_bucket_t *bucket;           /* --storage.backend: the uploader */
    ing_bucket_read_t *bucket_read; /* ... and the reader of dropped blocks */
    ing_floor_t *floor;             /* ... whose floor is the mark queriers read below */
    ing_rules_export_t *rules;      /* --metrics-export.remote-write-url */
    ing_handover_t *handover;       /* over Redis: receivers to the writer, decoded */
    bool registered;                /* seen live (so registered): consuming */
    char lost_note[160];            /* a new volume: what to record if the id lived before */
    char *advertise;
    char consumer_id[EMBER_CONSUMER_ID_MAX];
    char group[32 + EMBER_ZONE_MAX];
    uv_timer_t retention_timer;
    uv_work_t retention_work;
    bool retention_started, retention_busy;
    uv_timer_t summary_timer;
    uv_work_t summary_work;
    bool summary_started, summary_busy;
    lc_metric_t *blocks_unsummarized;
    lc_metric_t *blocks_compacted, *blocks_uncompacted, *rollups_built;
    lc_metric_t *backlog_bytes, *backlog_msgs, *blocks_dropped, *redis_up;
} ing_node_t;

/* ---------------------------------------------------------------- retention */

static void retention_work(uv_work_t *w)
{
    ing_node_t *n = LC_CONTAINER_OF(w, ing_node_t, retention_work);
    size_t dropped = 0;
    int rc = lc_store_retention(n->store, lc_realtime_ns(), &dropped);
    if (rc)
        LC_LOG_ERROR("retention failed err=\"%s\"", lc_strerror(rc));
    else if (dropped)
        LC_LOG_INFO("retention dropped blocks count=%zu", dropped);
    lc_metric_add(n->blocks_dropped, (double)dropped);
}

static void retention_after(uv_work_t *w, int status)
{
    ing_node_t *n = LC_CONTAINER_OF(w, ing_node_t, retention_work);
    LC_UNUSED(status);
    n->retention_busy = false;
}

static void retention_tick(uv_timer_t *t)
{
    ing_node_t *n = LC_CONTAINER_OF(t, ing_node_t, retention_timer);
    if (n->retention_busy || n->p->stopping)
        return;
    n->retention_busy = true;
    if (uv_queue_work(&n->p->loop, &n->retention_work, retention_work, retention_after))
        n->retention_busy = false;
}

/* Runs at once (a restart drops what expired meanwhile), then every minute. */
static int start_retention(ing_node_t *n)
{
    if (n->s->retention_ns <= 0)
        return 0;
    uv_timer_init(&n->p->loop, &n->retention_timer);
    n->retention_started = true;
    return uv_timer_start(&n->retention_timer, retention_tick, 0, RETENTION_INTERVAL_MS);
}

/* ---------------------------------------------------------------- summaries */

static void summary_work(uv_work_t *w)
{
    ing_node_t *n = LC_CONTAINER_OF(w, ing_node_t, summary_work);
    lc_store_summarize_stats_t st = {0};
    int rc = lc_store_summarize(n->store, lc_realtime_ns(), SUMMARY_QUIET_NS, &st);
    if (rc)
        LC_LOG_ERROR("block summaries failed err=\"%s\"", lc_strerror(rc));
    else if (st.blocks_done)
        LC_LOG_DEBUG("block summaries built blocks=%zu series=%zu", st.blocks_done, st.series_done);
    lc_metric_set(n->blocks_unsummarized, (double)st.blocks_pending);
    lc_metric_add(n->rollups_built, (double)st.rollups_done);
    /* Then the summarised ones are rewritten smaller (store_compact.c). */
    lc_store_compact_stats_t cs = {0};
    rc = lc_store_compact(n->store, lc_realtime_ns(), &cs);
    if (rc)
        LC_LOG_ERROR("block compaction failed err=\"%s\"", lc_strerror(rc));
    if (cs.blocks_done) {
        LC_LOG_INFO("blocks compacted blocks=%zu bytes_before=%llu bytes_after=%llu",
                    cs.blocks_done, (unsigned long long)cs.bytes_before,
                    (unsigned long long)cs.bytes_after);
        lc_metric_add(n->blocks_compacted, (double)cs.blocks_done);
    }
    lc_metric_set(n->blocks_uncompacted, (double)cs.blocks_pending);
}

static void summary_after(uv_work_t *w, int status)
{
    ing_node_t *n = LC_CONTAINER_OF(w, ing_node_t, summary_work);
    LC_UNUSED(status);
    n->summary_busy = false;
}

static void summary_tick(uv_timer_t *t)
{
    ing_node_t *n = LC_CONTAINER_OF(t, ing_node_t, summary_timer);
    if (n->summary_busy || n->p->stopping)
        return;
    n->summary_busy = true;
    if (uv_queue_work(&n->p->loop, &n->summary_work, summary_work, summary_after))
        n->summary_busy = false;
}

/* Closed blocks get per-series summaries (long-range merges read those):
 * at once after a start, then every SUMMARY_INTERVAL_MS. */
static int start_summaries(ing_node_t *n)
{
    uv_timer_init(&n->p->loop, &n->summary_timer);
    n->summary_started = true;
    return uv_timer_start(&n->summary_timer, summary_tick, 0, SUMMARY_INTERVAL_MS);
}

/* ---------------------------------------------------------------- announcement */

static void ing_on_members_state(bool up, void *data)
{
    ing_node_t *n = data;
    if (up)
        LC_LOG_INFO("membership: joined as %s url=%s zone=\"%s\"", n->consumer_id, n->advertise,
                    n->s->zone);
    else
        LC_LOG_WARN("membership: redis link down; queriers will stop asking %s", n->advertise);
}

/* The first list that shows this ingester live comes after its first
 * heartbeat (same link, in order), which registered it in its zone. */
/* <data_dir>/new-volume: a new volume's verdict until the membership has
 * taken its note, so a start that fails on the way (a restore from the
 * bucket that errs, a kill) does not turn the volume into a known one. */
static void new_volume_marker(const ing_node_t *n, char *path, size_t size)
{
    snprintf(path, size, "%s/new-volume", n->s->data_dir);
}

static void ing_on_members_change(lc_members_t *m, const lc_member_t *live, size_t count,
                                  void *data)
{
    ing_node_t *n = data;
    LC_UNUSED(m);
    for (size_t i = 0; i < count && !n->registered; i++) {
        if (strcmp(live[i].id, n->consumer_id) != 0)
            continue;
        n->registered = true;
        LC_LOG_INFO("membership: registered, consuming now zone=\"%s\" group=%s", n->s->zone,
                    n->group);
        char marker[4096];
        new_volume_marker(n, marker, sizeof marker);
        if (n->lost_note[0] && unlink(marker) != 0)
            LC_LOG_WARN("cannot remove the new-volume mark path=%s", marker);
        /* Blocks leave for the bucket: below the mark, queriers read it there.
         * Before the writer's first write. */
        if (n->bucket_read && ing_floor_new(&n->p->loop, n->store, m, n->p->metrics, &n->floor))
            LC_LOG_WARN("floor: cannot start; queriers ask this ingester for everything");
        lc_transport_redis_release(n->transport);
    }
}

/* A data dir without blocks/ is a new volume (the store makes the directory
 * at its first open; the bucket's restore, which runs after this, too). If
 * the id lived before, whatever that life held only on its volume (the open
 * block, ended blocks not uploaded yet, everything without a bucket) is gone
 * from this zone for good: the note makes the queriers prefer another zone
 * (members.h, zones.h) until --retention has passed over what was lost. */
static void check_volume(ing_node_t *n)
{
    char blocks[4096], marker[4096];
    struct stat st;
    snprintf(blocks, sizeof blocks, "%s/blocks", n->s->data_dir);
    new_volume_marker(n, marker, sizeof marker);
    if (!n->announce || (stat(blocks, &st) == 0 && stat(marker, &st) != 0))
        return;
    int fd = mkdir(n->s->data_dir, 0755) == 0 || errno == EEXIST
                 ? open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)
                 : -1;
    if (fd < 0)
        LC_LOG_WARN("cannot mark the data dir as a new volume path=%s", marker);
    else
        close(fd);
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    snprintf(n->lost_note, sizeof n->lost_note,
             "started on a new volume at %s: what an earlier life held only locally is gone", when);
}

static uint64_t lost_note_ttl_ms(const ember_settings_t *s)
{
    if (s->retention_ns <= 0)
        return 0;
    return (uint64_t)((s->retention_ns + s->block_duration_ns) / 1000000);
}

static int ing_join(ing_node_t *n)
{
    lc_members_opts_t mo = {.url = n->s->redis_url,
                            .cluster = n->s->redis_cluster,
                            .role = "ingester",
                            .self_id = n->consumer_id,
                            .self_addr = n->advertise,
                            .zone = n->s->zone,
                            .on_change = ing_on_members_change,
                            .change_data = n,
                            .cmd_timeout_ms = REDIS_CMD_TIMEOUT_MS,
                            .on_state = ing_on_members_state,
                            .state_data = n,
                            .lost_note = n->lost_note[0] ? n->lost_note : NULL,
                            .lost_note_ttl_ms = lost_note_ttl_ms(n->s)};
    int rc = lc_members_new(&n->p->loop, &mo, &n->members);
    if (rc)
        LC_LOG_ERROR("cannot ing_join the ingesters url=%s err=\"%s\"", n->s->redis_url,
                     lc_strerror(rc));
    return rc;
}

/* The claims record of a previous life is forgotten: nothing stored here is
 * also in another ingester's store, so the queriers may ask this one now. */
static void ing_on_transport_settled(void *data)
{
    ing_node_t *n = data;
    if (!n->announce || n->p->stopping || n->members)
        return;
    if (ing_join(n) != 0) {
        LC_LOG_ERROR("cannot ing_join: stopping");
        lc_proc_stop(n->p);
    }
}

static void ing_on_transport_state(bool up, void *data)
{
    ing_node_t *n = data;
    if (up)
        LC_LOG_INFO("redis transport up consumer=%s", n->consumer_id);
    else
        LC_LOG_WARN("redis transport down: receivers answer 503 until it is back");
}

/* ---------------------------------------------------------------- transport */

static void set_consumer_id(ing_node_t *n)
{
    bool stable;
    ember_consumer_id(n->s->ingester_id, n->s->http_address, n->consumer_id, sizeof(n->consumer_id),
                      &stable);
    if (!stable)
        LC_LOG_WARN("no --ingester.id and no fixed port: the consumer id is not stable; after a "
                    "restart its zone waits for this id until it is removed from the registry "
                    "id=%s",
                    n->consumer_id);
}

static int start_redis_transport(ing_node_t *n)
{
    const ember_settings_t *s = n->s;
    if (!ember_zone_group(s->zone, n->group, sizeof(n->group)))
        return LC_EINPUT; /* ember_main checked it */
    uint32_t idle_ms = (uint32_t)(s->claim_idle_ns / 1000000);
    lc_redis_transport_opts_t to = {
        .url = s->redis_url,
        .partitions = (uint32_t)s->partitions,
        .group = n->group,
        .consumer_id = n->consumer_id,
        .max_backlog = (size_t)s->redis_max_backlog,
        .claim_idle_ms = idle_ms,
        /* look for abandoned entries a few times per idle period */
        .claim_interval_ms = idle_ms / 4 > 250 ? (idle_ms / 4 < 5000 ? idle_ms / 4 : 5000) : 250,
        /* forget what others claimed after it was applied here */
        .forget = ing_writer_forget,
        .publish_retry_ms = (uint32_t)(s->publish_retry_ns / 1000000),
        .wait_replicas = (uint32_t)s->wait_replicas,
        .cluster = s->redis_cluster,
        .metrics = n->p->metrics,
        .hold_consume = n->announce, /* until registered in the zone: ing_on_members_change */
        .on_state = ing_on_transport_state,
        /* joins the membership; the transport waits for a release after it */
        .on_settled = n->announce ? ing_on_transport_settled : NULL,
        .state_data = n,
    };
    int rc = lc_transport_redis_new(&n->p->loop, &to, ing_writer_consume, n->writer, &n->transport);
    if (rc)
        LC_LOG_ERROR("cannot start the redis transport url=%s err=\"%s\"", s->redis_url,
                     lc_strerror(rc));
    else
        LC_LOG_INFO("redis transport consumer=%s group=%s zone=\"%s\" partitions=%u",
                    n->consumer_id, n->group, s->zone, (unsigned)to.partitions);
    return rc;
}

/* --storage.backend: what the uploader and the restore are told. */
static bool bucket_opts(ing_node_t *n, ing_bucket_opts_t *o)
{
    const ember_settings_t *s = n->s;
    *o = (ing_bucket_opts_t){.data_dir = s->data_dir,
                             .ingester_id = n->consumer_id,
                             .zone = s->zone,
                             .block_duration_ns = s->block_duration_ns,
                             .retention_ns = s->retention_ns,
                             .local_retention_ns = s->local_retention_ns,
                             .interval_ms = BUCKET_INTERVAL_MS,
                             .metrics = n->p->metrics};
    ember_objstore_opts(s, &o->store);
    return o->store.backend != LC_OBJSTORE_NONE;
}

/* Before the store opens: what the bucket holds for this id and the data
 * dir lacks (a lost volume) comes back first, so no query and no writer
 * ever sees the store without it. */
static int restore_from_bucket(ing_node_t *n)
{
    ing_bucket_opts_t bo;
    if (!bucket_opts(n, &bo))
        return 0;
    size_t restored = 0;
    int rc = ing_bucket_restore(&bo, &restored);
    if (!rc)
        LC_LOG_INFO("bucket: restore done blocks=%zu ingester=%s", restored, n->consumer_id);
    return rc;
}

/* The uploader, and with --storage.local-retention the store's source of
 * the blocks it dropped (queries read them back through the cache). */
static int start_uploader(ing_node_t *n)
{
    ing_bucket_opts_t bo;
    if (!bucket_opts(n, &bo))
        return 0;
    int rc = ing_bucket_start(&bo, n->store, &n->bucket);
    if (rc || bo.local_retention_ns <= 0)
        return rc;
    char cache[4096];
    if (n->s->cache_dir && *n->s->cache_dir)
        snprintf(cache, sizeof cache, "%s", n->s->cache_dir);
    else
        snprintf(cache, sizeof cache, "%s/bucket-cache", n->s->data_dir);
    ing_bucket_read_opts_t ro = {
        .bucket = &bo, .cache_dir = cache, .cache_bytes = (uint64_t)n->s->cache_size_bytes};
    return ing_bucket_read_new(&ro, n->store, &n->bucket_read);
}

static int start_storage(ing_node_t *n)
{
    const ember_settings_t *s = n->s;
    ing_bucket_opts_t bo;
    if (ember_clustered(s) || bucket_opts(n, &bo))
        set_consumer_id(n); /* the id the streams and the bucket know it by */
    check_volume(n);
    int rc = restore_from_bucket(n);
    if (rc)
        return rc;
    lc_store_opts_t so = {
        .dir = s->data_dir,
        .block_duration_ns = s->block_duration_ns,
        .retention_ns = s->retention_ns,
        .map_size_bytes = (size_t)s->map_size_bytes,
        .max_open_blocks = (size_t)s->max_open_blocks,
        .compacts = true, /* summary_work */
    };
    rc = lc_store_open(&so, &n->store);
    if (rc) {
        LC_LOG_ERROR("cannot open the store dir=%s err=\"%s\"", s->data_dir, lc_strerror(rc));
        return rc;
    }
    rc = start_uploader(n);
    if (rc)
        return rc;
    rc = ing_writer_new(n->store, n->p->metrics, &n->writer);
    if (rc == 0)
        rc = ing_rules_export_start(n->p, s, n->writer, &n->rules);
    if (rc)
        return rc;
    if (ember_clustered(s)) {
        n->handover = ing_handover_new(ING_HANDOVER_MAX_BYTES, n->p->metrics);
        ing_writer_set_handover(n->writer, n->handover);
        return start_redis_transport(n);
    }
    lc_direct_opts_t dopts = {.max_backlog_bytes = (size_t)s->max_backlog_bytes};
    return lc_transport_direct_new(&n->p->loop, &dopts, ing_writer_consume, n->writer,
                                   &n->transport);
}

static int start_receivers(ing_node_t *n)
{
    const ember_settings_t *s = n->s;
    ing_opts_t io;
    ing_opts_default(&io);
    io.limits.max_decompressed_bytes = (size_t)s->max_profile_bytes;
    io.limits.max_samples = (size_t)s->max_samples;
    io.reject_older_than_ns = s->reject_older_than_ns;
    io.reject_newer_than_ns = s->reject_newer_than_ns;
    io.multitenancy = s->multitenancy;
    io.rate = (lc_ratelimit_opts_t){(double)s->rate_bytes, (double)s->rate_burst_bytes,
                                    (double)s->rate_profiles, (double)s->rate_burst_profiles};
    io.max_series = s->max_series_per_tenant;
    if (ember_clustered(s))
        io.partitions = (uint32_t)s->partitions;
    io.handover = n->handover;
    return ing_new(&n->p->loop, &io, n->p->httpd, n->transport, n->p->metrics, &n->receivers);
}

static void ing_node_register_metrics(ing_node_t *n)
{
    lc_metrics_t *m = n->p->metrics;
    n->backlog_bytes = lc_metrics_gauge(m, "ember_ingest_backlog_bytes",
                                        "Bytes of accepted profiles waiting for the writer", "");
    n->backlog_msgs = lc_metrics_gauge(m, "ember_ingest_backlog_profiles",
                                       "Accepted profiles waiting for the writer", "");
    n->blocks_dropped = lc_metrics_counter(m, "ember_retention_blocks_dropped_total",
                                           "Storage blocks removed by retention", "");
    n->blocks_unsummarized =
        lc_metrics_gauge(m, "ember_store_blocks_unsummarized",
                         "Closed storage blocks whose per-series summaries are not built yet", "");
    n->blocks_compacted = lc_metrics_counter(m, "ember_store_blocks_compacted_total",
                                             "Closed storage blocks rewritten smaller", "");
    n->rollups_built = lc_metrics_counter(m, "ember_store_rollups_built_total",
                                          "Rollups of 6-hour and day windows (re)built", "");
    n->blocks_uncompacted = lc_metrics_gauge(m, "ember_store_blocks_uncompacted",
                                             "Closed storage blocks not rewritten smaller yet", "");
    if (n->s->bin == EMBER_BIN_INGESTER && !ember_clustered(n->s))
        n->redis_up = lc_metrics_gauge(m, "ember_redis_up",
                                       "1 while the Redis link is up (0 standalone)", "");
}

/* ---------------------------------------------------------------- the node */

static int ing_node_start(lc_proc_t *p, const void *settings, void **state)
{
    ing_node_t *n = lc_xcalloc(1, sizeof(*n));
    *state = n;
    n->p = p;
    n->s = settings;
    n->announce = n->s->bin == EMBER_BIN_INGESTER && ember_clustered(n->s);
    ing_node_register_metrics(n);
    int rc = start_storage(n);
    if (!rc)
        rc = start_receivers(n);
    if (!rc)
        rc = ing_symbols_start(n->s, p->httpd, n->store, &n->symbols);
    if (!rc)
        rc = start_retention(n);
    if (!rc)
        rc = start_summaries(n);
    p->store = n->store;
    p->transport = n->transport;
    return rc;
}

static char *advertise_url(const ember_settings_t *s, int port)
{
    if (s->advertise_url && *s->advertise_url)
        return lc_xstrdup(s->advertise_url);
    char host[256];
    snprintf(host, sizeof(host), "%s", s->http_address);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    if (!*host || strcmp(host, "0.0.0.0") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    char url[300];
    snprintf(url, sizeof(url), "http://%s:%d", host, port);
    return lc_xstrdup(url);
}

static int ing_node_listening(lc_proc_t *p, void *state)
{
    ing_node_t *n = state;
    n->advertise = advertise_url(n->s, lc_httpd_port(p->httpd));
    if (n->announce)
        LC_LOG_INFO("announcing as url=%s data=%s", n->advertise, n->s->data_dir);
    return 0;
}

static void ing_on_left(void *data)
{
    ing_node_t *n = data;
    n->members = NULL;
    LC_LOG_INFO("membership: left");
    lc_proc_continue(n->p);
}

/* Leave first, so queriers stop asking a process that is going away. The
 * retention timer stops here too: no new work once stopping. */
static void ing_node_drain(lc_proc_t *p, void *state)
{
    ing_node_t *n = state;
    ing_drain(n->receivers); /* nothing waits for the writer any more */
    if (n->retention_started)
        uv_close((uv_handle_t *)&n->retention_timer, NULL);
    n->retention_started = false;
    if (n->summary_started)
        uv_close((uv_handle_t *)&n->summary_timer, NULL);
    n->summary_started = false;
    ing_floor_close(n->floor); /* before the members it publishes through */
    if (n->members)
        lc_members_close(n->members, ing_on_left, n);
    else
        lc_proc_continue(p);
}

static void ing_on_transport_closed(void *data)
{
    ing_node_t *n = data;
    n->transport = NULL;
    n->p->transport = NULL;
    LC_LOG_INFO("every accepted profile is on disk; stopped");
    lc_proc_continue(n->p);
}

/* Last of all: every accepted profile reaches the store. */
static void ing_node_close(lc_proc_t *p, void *state)
{
    ing_node_t *n = state;
    if (n->transport)
        lc_transport_close(n->transport, ing_on_transport_closed, n);
    else
        lc_proc_continue(p);
}

/* Up only when every link works: membership (queriers see us), the publish
 * link (receivers can answer 200) and the consume link (the stream drains). */
static const char *ing_node_not_ready(void *state)
{
    ing_node_t *n = state;
    lc_redis_transport_stats_t rs;
    if (n->announce && !n->members)
        return "not joined yet";
    if (n->announce && !lc_members_is_up(n->members))
        return "redis link down";
    if (lc_transport_redis_stats(n->transport, &rs) == 0 && !(rs.up && rs.consumer_up))
        return "redis link down";
    return NULL;
}

static void ing_node_collect(void *state)
{
    ing_node_t *n = state;
    lc_transport_stats_t ts;
    lc_transport_stats(n->transport, &ts);
    lc_metric_set(n->backlog_bytes, (double)ts.backlog_bytes);
    lc_metric_set(n->backlog_msgs, (double)ts.backlog_msgs);
    if (n->redis_up) /* standalone ember-ingester; the redis transport has its own */
        lc_metric_set(n->redis_up, 0);
}

/* With an object store, a graceful stop settles every ended block at once
 * (no write comes any more, so no quiet period is waited for) and uploads
 * it, and the block still being written as it is: what a stopped ingester
 * acknowledged is then in the bucket, and its volume may go (issue 27). */
static void settle_and_upload(ing_node_t *n)
{
    if (!n->bucket || !n->store)
        return;
    lc_store_summarize_stats_t st = {0};
    lc_store_compact_stats_t cs = {0};
    int rc = lc_store_summarize(n->store, lc_realtime_ns(), 0, &st);
    if (rc == 0)
        rc = lc_store_compact(n->store, lc_realtime_ns(), &cs);
    if (rc)
        LC_LOG_ERROR("settling blocks before the last upload failed err=\"%s\"", lc_strerror(rc));
    ing_bucket_finish(n->bucket);
}

static void ing_node_free(void *state)
{
    ing_node_t *n = state;
    ing_free(n->receivers);
    ing_writer_free(n->writer);
    ing_handover_free(n->handover);       /* after both its ends */
    ing_rules_export_free(n->rules);      /* after the writer: nothing observes any more */
    ing_bucket_read_free(n->bucket_read); /* no query runs any more */
    settle_and_upload(n);                 /* every profile is in the store by now */
    ing_bucket_stop(n->bucket);           /* before the store it reads */
    lc_store_close(n->store);
    ing_floor_free(n->floor);     /* the store no longer calls it */
    ing_symbols_free(n->symbols); /* after the store: no query reads it any more */
    lc_free(n->advertise);
    lc_free(n);
}

const lc_node_ops_t ing_node = {
    .name = "ingester",
    .start = ing_node_start,
    .listening = ing_node_listening,
    .drain = ing_node_drain,
    .close = ing_node_close,
    .not_ready = ing_node_not_ready,
    .collect = ing_node_collect,
    .free = ing_node_free,
};
