/*
 * scraper_int.h — the scraper's runtime, shared between its files.
 *
 *   scr_t          one per process: the config, the pools, the HTTP client,
 *                  reload triggers and the member list
 *   scr_pool_t     one per job: its discoverers and its targets
 *   scr_disc_t     one per discovery entry (file, dns, kubernetes): the target
 *                  groups it currently sees
 *   scr_target_t   one per (discovered target, profile): a timer on its slot,
 *                  at most one scrape in flight, its delta baseline, health
 *
 * Ownership: the scraper owns pools, pools own discoverers and targets. A
 * target removed while a scrape is in flight is only marked; whoever finishes
 * last (the timer's close callback or the in-flight step) frees it, and
 * in-flight steps never touch the pool of a removed target.
 * Threading: loop thread only, except scr_process on the thread pool.
 */
#ifndef EMBER_SCRAPER_INT_H
#define EMBER_SCRAPER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "delta.h"
#include "http.h"
#include "lc/metrics.h"
#include "scraper.h"
#include "targets.h"

#define SCR_USER_AGENT "ember-scraper/0.1"
#define SCR_SYNC_DELAY_MS 200                /* discovery changes are applied in batches */
#define SCR_DISC_GRACE_NS (5 * SCR_NS_PER_S) /* wait for new discoverers' first report */
#define SCR_ERROR_MAX 256

/* ---------------------------------------------------------------- discoverers */

typedef struct scr_disc_s scr_disc_t;
typedef void (*scr_disc_changed_cb)(scr_disc_t *d, void *data);

typedef enum { SCR_DISC_FILE, SCR_DISC_DNS, SCR_DISC_KUBE } scr_disc_kind_t;

struct scr_disc_s {
    scr_disc_kind_t kind;
    uint64_t key;        /* the settings hash from the config */
    scr_group_t *groups; /* what it currently sees */
    size_t n_groups;
    bool reported; /* at least one complete answer so far */
    char last_error[SCR_ERROR_MAX];
    scr_disc_changed_cb changed;
    void *data;
    void (*close)(scr_disc_t *d); /* stops it; it frees itself when done */
};

/* Replaces the groups (takes ownership of the array) and notifies. */
void scr_disc_set_groups(scr_disc_t *d, scr_group_t *groups, size_t n);
/* Replaces the group with g's source, appends it, or (no targets) removes it;
 * takes g's contents. Does not notify (call scr_disc_notify). */
void scr_disc_upsert(scr_disc_t *d, scr_group_t *g);
void scr_disc_notify(scr_disc_t *d);
void scr_disc_fini(scr_disc_t *d);
void scr_disc_error(scr_disc_t *d, const char *fmt, ...) LC_PRINTF(2, 3);

int scr_disc_file_new(uv_loop_t *loop, const scr_file_sd_t *cfg, scr_disc_t **out) LC_MUST_CHECK;
int scr_disc_dns_new(uv_loop_t *loop, const scr_dns_sd_t *cfg, scr_disc_t **out) LC_MUST_CHECK;
int scr_disc_kube_new(uv_loop_t *loop, scr_http_t *http, const scr_kube_sd_t *cfg,
                      scr_disc_t **out) LC_MUST_CHECK;

/* Parses a file_sd file (JSON or YAML list of {targets, labels}); groups get
 * the source "<path>:<index>". Exposed for tests. */
int scr_file_sd_parse(const char *path, const char *text, size_t len, scr_group_t **groups,
                      size_t *n_groups, lc_status_t *st) LC_MUST_CHECK;

/* Reads the answers of a DNS response (SRV, MX or NS) into g's targets with
 * Prometheus's __meta_dns_* labels. Exposed for tests. */
int scr_dns_parse_answer(const uint8_t *msg, size_t len, scr_dns_type_t type, int port,
                         scr_group_t *g) LC_MUST_CHECK;

/* One Kubernetes pod (a decoded JSON object) as a target group with source
 * "pod/<namespace>/<name>" and Prometheus's pod-role labels. Exposed for tests. */
struct json_t;
void scr_kube_pod_group(struct json_t *pod, scr_group_t *g);

/* Deep copy of HTTP client settings (discoverers outlive config reloads). */
void scr_client_copy(scr_client_t *dst, const scr_client_t *src);

/* ---------------------------------------------------------------- targets */

typedef enum { SCR_HEALTH_UNKNOWN, SCR_HEALTH_UP, SCR_HEALTH_DOWN } scr_health_t;

typedef struct scr_s scr_t;
typedef struct scr_pool_s scr_pool_t;
typedef struct scr_work_s scr_work_t;

typedef struct scr_target_s {
    scr_t *scr;             /* outlives every target */
    scr_pool_t *pool;       /* NULL once removed */
    scr_target_spec_t spec; /* key, profile index, labels, URL */
    uv_timer_t timer;
    int64_t interval_ns;  /* the schedule the timer runs on */
    int64_t next_slot_ns; /* wall-clock slot the timer is armed for */
    scr_http_req_t *req;  /* the scrape in flight */
    scr_work_t *work;     /* processing or publishing in flight */
    bool removed, timer_closed;
    bool owned;
    int64_t owned_since_ns;
    scr_delta_t *delta; /* cumulative profiles only */
    /* health, for /targets and metrics */
    scr_health_t health;
    char last_error[SCR_ERROR_MAX];
    int64_t last_scrape_ns; /* wall clock of the last scrape's start */
    double last_duration_s;
    size_t last_bytes, last_samples;
    uint64_t scrapes;
    lc_metric_t *m_up, *m_duration, *m_bytes, *m_samples;
} scr_target_t;

struct scr_pool_s {
    scr_t *scr;
    const scr_job_t *job; /* in scr->config */
    char *name;
    scr_disc_t **discs;
    size_t n_discs;
    scr_target_t **targets; /* sorted by spec.key */
    size_t n_targets;
    scr_dropped_t *dropped; /* from the last sync, for /targets */
    size_t n_dropped, n_dropped_total;
    bool dirty;
    int64_t waiting_since_ns; /* discoverers that have not reported yet */
    lc_metric_t *m_active, *m_dropped, *m_duration_hist;
};

struct scr_s {
    uv_loop_t *loop;
    scr_opts_t opts; /* strings copied */
    scr_config_t *config;
    scr_pool_t **pools;
    size_t n_pools;
    scr_http_t *http;
    uv_signal_t sighup;
    uv_fs_poll_t config_poll;
    uv_timer_t sync_timer;
    char **members; /* live replica ids, sorted */
    size_t n_members;
    struct lc_member_s *live; /* the same ids as lc_members_rendezvous wants them */
    bool closing;
    int pending; /* handles, targets and discoverers still closing */
    void (*close_cb)(void *data);
    void *close_data;
    lc_metrics_t *metrics;
    lc_metric_t *m_reload_ok, *m_reload_ts, *m_published;
};

/* scrape.c: target lifecycle and the scrape loop. */
scr_target_t *scr_target_new(scr_pool_t *pool, scr_target_spec_t *spec);
/* Takes the new spec (same key) after a sync; reschedules on interval change. */
void scr_target_update(scr_target_t *t, scr_target_spec_t *spec);
void scr_target_remove(scr_target_t *t);
/* Ownership changed (or not): stops scraping here, or starts after the handover. */
void scr_target_set_owned(scr_target_t *t, bool owned, int64_t now_ns);
bool scr_owns(const scr_t *s, uint64_t key);
/* Counts an error for the pool's job: ember_scrape_errors_total{job,kind}. */
void scr_count_error(scr_pool_t *pool, const char *kind);

/* pending.c: lets the scraper free itself once everything pending is done. */
void scr_pending_done(scr_t *s);

/* pages.c: GET /targets. */
int scr_pages_register(scr_t *s, lc_httpd_t *httpd) LC_MUST_CHECK;

/* Escapes a Prometheus label value into out (quotes, backslashes, newlines). */
void scr_metric_labels(char *out, size_t len, const char *job, const char *instance,
                       const char *profile);

#endif
