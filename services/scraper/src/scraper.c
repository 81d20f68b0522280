/*
 * scraper.c — the scraper role (scraper.h): config loading and reloads, one
 * pool per job, discovery wiring, target syncs, membership and shutdown.
 *
 * Reloads keep what did not change. A job keeps its pool (matched by name); a
 * discovery entry whose settings hash (`key`) is unchanged keeps its running
 * discoverer and the groups it found; a new discoverer inherits the groups of
 * the one it replaces until it reports; and targets are matched by key (job,
 * URL and labels), so a healthy target keeps its schedule, its health and its
 * delta baseline. All pools are synced before the old config is freed, since
 * targets point into it.
 *
 * Discovery changes are applied in batches (SCR_SYNC_DELAY_MS), and a pool
 * whose discoverers have not all reported yet waits for them (at most
 * SCR_DISC_GRACE_NS) so that a restart does not flap targets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/members.h"
#include "scraper_int.h"

#define DEFAULT_MAX_BODY_BYTES ((size_t)64 << 20)
#define DEFAULT_MAX_SAMPLES 1000000
#define DEFAULT_CONFIG_POLL_NS SCR_NS_PER_S

void scr_opts_default(scr_opts_t *o)
{
    *o = (scr_opts_t){0};
    o->tenant = "anonymous";
    o->partitions = 1;
    o->max_body_bytes = DEFAULT_MAX_BODY_BYTES;
    o->max_samples = DEFAULT_MAX_SAMPLES;
    o->handle_sighup = true;
    o->config_poll_ns = DEFAULT_CONFIG_POLL_NS;
}

/* ---------------------------------------------------------------- pending work */

static void scr_on_handle_closed(uv_handle_t *h)
{
    scr_pending_done(h->data);
}

static void scr_on_http_closed(void *data)
{
    scr_pending_done(data);
}

/* ---------------------------------------------------------------- syncing a pool */

static int target_key_cmp(const void *a, const void *b)
{
    uint64_t x = (*(scr_target_t *const *)a)->spec.key;
    uint64_t y = (*(scr_target_t *const *)b)->spec.key;
    return x < y ? -1 : x > y;
}

static scr_target_t *find_target(scr_pool_t *p, uint64_t key)
{
    size_t lo = 0, hi = p->n_targets;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k = p->targets[mid]->spec.key;
        if (k == key)
            return p->targets[mid];
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void pool_set_dropped(scr_pool_t *p, scr_target_set_t *set)
{
    for (size_t i = 0; i < p->n_dropped; i++) {
        lc_labels_fini(&p->dropped[i].discovered);
        lc_free(p->dropped[i].reason);
    }
    lc_free(p->dropped);
    p->dropped = set->dropped;
    p->n_dropped = set->n_dropped;
    p->n_dropped_total = set->n_dropped_total;
    set->dropped = NULL;
    set->n_dropped = 0;
}

static void pool_sync(scr_pool_t *p)
{
    size_t n_lists = 1 + p->n_discs;
    const scr_group_t **lists = lc_xcalloc(n_lists, sizeof(*lists));
    size_t *counts = lc_xcalloc(n_lists, sizeof(*counts));
    lists[0] = p->job->static_groups;
    counts[0] = p->job->n_static;
    for (size_t i = 0; i < p->n_discs; i++) {
        lists[i + 1] = p->discs[i]->groups;
        counts[i + 1] = p->discs[i]->n_groups;
    }
    scr_target_set_t set;
    scr_targets_build(p->job, lists, counts, n_lists, &set);
    lc_free(lists);
    lc_free(counts);

    scr_target_t **next = lc_xcalloc(set.n + 1, sizeof(*next));
    for (size_t i = 0; i < set.n; i++) {
        scr_target_t *t = find_target(p, set.v[i].key);
        if (t)
            scr_target_update(t, &set.v[i]);
        else
            t = scr_target_new(p, &set.v[i]);
        next[i] = t;
    }
    /* Targets that are not in the new set go. */
    qsort(next, set.n, sizeof(*next), target_key_cmp);
    for (size_t i = 0; i < p->n_targets; i++) {
        scr_target_t *old = p->targets[i];
        scr_target_t **hit = bsearch(&old, next, set.n, sizeof(*next), target_key_cmp);
        if (!hit || *hit != old)
            scr_target_remove(old);
    }
    lc_free(p->targets);
    p->targets = next;
    p->n_targets = set.n;
    pool_set_dropped(p, &set);
    scr_target_set_fini(&set);
    p->dirty = false;
    lc_metric_set(p->m_active, (double)p->n_targets);
    lc_metric_set(p->m_dropped, (double)p->n_dropped_total);
}

static bool pool_ready(const scr_pool_t *p, int64_t now)
{
    for (size_t i = 0; i < p->n_discs; i++)
        if (!p->discs[i]->reported)
            return now - p->waiting_since_ns >= SCR_DISC_GRACE_NS;
    return true;
}

static void on_sync_timer(uv_timer_t *timer)
{
    scr_t *s = timer->data;
    int64_t now = lc_realtime_ns();
    bool waiting = false;
    for (size_t i = 0; i < s->n_pools; i++) {
        scr_pool_t *p = s->pools[i];
        if (!p->dirty)
            continue;
        if (pool_ready(p, now))
            pool_sync(p);
        else
            waiting = true;
    }
    if (waiting && !s->closing)
        uv_timer_start(&s->sync_timer, on_sync_timer, SCR_SYNC_DELAY_MS, 0);
}

static void on_disc_changed(scr_disc_t *d, void *data)
{
    scr_pool_t *p = data;
    LC_UNUSED(d);
    p->dirty = true;
    scr_t *s = p->scr;
    if (!s->closing && !uv_is_active((uv_handle_t *)&s->sync_timer))
        uv_timer_start(&s->sync_timer, on_sync_timer, SCR_SYNC_DELAY_MS, 0);
}

/* ---------------------------------------------------------------- pools */

static void pool_metrics(scr_pool_t *p)
{
    lc_metrics_t *m = p->scr->metrics;
    if (!m)
        return;
    char labels[512];
    scr_metric_labels(labels, sizeof(labels), p->name, NULL, NULL);
    size_t len = strlen(labels);
    snprintf(labels + len, sizeof(labels) - len, ",state=\"active\"");
    p->m_active =
        lc_metrics_gauge(m, "ember_scrape_targets", "Scrape targets by job and state", labels);
    snprintf(labels + len, sizeof(labels) - len, ",state=\"dropped\"");
    p->m_dropped =
        lc_metrics_gauge(m, "ember_scrape_targets", "Scrape targets by job and state", labels);
    labels[len] = '\0';
    p->m_duration_hist = lc_metrics_histogram(m, "ember_scrape_job_duration_seconds",
                                              "Scrape durations by job", labels, NULL, 0);
}

static scr_pool_t *pool_new(scr_t *s, const scr_job_t *job)
{
    scr_pool_t *p = lc_xcalloc(1, sizeof(*p));
    p->scr = s;
    p->job = job;
    p->name = lc_xstrdup(job->name);
    pool_metrics(p);
    return p;
}

static void pool_free(scr_pool_t *p)
{
    for (size_t i = 0; i < p->n_targets; i++)
        scr_target_remove(p->targets[i]);
    for (size_t i = 0; i < p->n_discs; i++)
        p->discs[i]->close(p->discs[i]);
    lc_free(p->discs);
    lc_free(p->targets);
    scr_target_set_t none = {0};
    pool_set_dropped(p, &none);
    lc_metric_set(p->m_active, 0);
    lc_free(p->name);
    lc_free(p);
}

/* Takes the discoverer with this kind and key out of old (NULL if none). */
static scr_disc_t *take_disc(scr_disc_t **old, size_t n_old, scr_disc_kind_t kind, uint64_t key)
{
    for (size_t i = 0; i < n_old; i++) {
        if (old[i] && old[i]->kind == kind && old[i]->key == key) {
            scr_disc_t *d = old[i];
            old[i] = NULL;
            return d;
        }
    }
    return NULL;
}

/* A new discoverer shows the groups of the one at the same place in the old
 * config until it reports, so that changing a setting does not flap targets. */
static void inherit_groups(scr_disc_t *d, scr_disc_t **old, size_t n_old, size_t index)
{
    size_t seen = 0;
    for (size_t i = 0; i < n_old; i++) {
        if (!old[i] || old[i]->kind != d->kind)
            continue;
        if (seen++ != index)
            continue;
        d->groups = old[i]->groups;
        d->n_groups = old[i]->n_groups;
        old[i]->groups = NULL;
        old[i]->n_groups = 0;
        return;
    }
}

static void wire_disc(scr_pool_t *p, scr_disc_t *d)
{
    d->changed = on_disc_changed;
    d->data = p;
    p->discs[p->n_discs++] = d;
}

static void pool_discovery(scr_pool_t *p, scr_disc_t **old, size_t n_old)
{
    const scr_job_t *job = p->job;
    scr_t *s = p->scr;
    p->discs = lc_xcalloc(job->n_file_sd + job->n_dns_sd + job->n_kube_sd + 1, sizeof(*p->discs));
    p->n_discs = 0;
    for (size_t i = 0; i < job->n_file_sd; i++) {
        scr_disc_t *d = take_disc(old, n_old, SCR_DISC_FILE, job->file_sd[i].key);
        if (!d && scr_disc_file_new(s->loop, &job->file_sd[i], &d) == 0)
            inherit_groups(d, old, n_old, i);
        wire_disc(p, d);
    }
    for (size_t i = 0; i < job->n_dns_sd; i++) {
        scr_disc_t *d = take_disc(old, n_old, SCR_DISC_DNS, job->dns_sd[i].key);
        if (!d && scr_disc_dns_new(s->loop, &job->dns_sd[i], &d) == 0)
            inherit_groups(d, old, n_old, i);
        wire_disc(p, d);
    }
    for (size_t i = 0; i < job->n_kube_sd; i++) {
        scr_disc_t *d = take_disc(old, n_old, SCR_DISC_KUBE, job->kube_sd[i].key);
        if (!d && scr_disc_kube_new(s->loop, s->http, &job->kube_sd[i], &d) == 0)
            inherit_groups(d, old, n_old, i);
        wire_disc(p, d);
    }
    for (size_t i = 0; i < n_old; i++)
        if (old[i])
            old[i]->close(old[i]);
}

/* ---------------------------------------------------------------- applying a config */

static scr_pool_t *take_pool(scr_pool_t **old, size_t n_old, const char *name)
{
    for (size_t i = 0; i < n_old; i++) {
        if (old[i] && strcmp(old[i]->name, name) == 0) {
            scr_pool_t *p = old[i];
            old[i] = NULL;
            return p;
        }
    }
    return NULL;
}

static void apply_config(scr_t *s, scr_config_t *config)
{
    scr_pool_t **old = s->pools;
    size_t n_old = s->n_pools;
    s->pools = lc_xcalloc(config->n_jobs + 1, sizeof(*s->pools));
    s->n_pools = 0;
    int64_t now = lc_realtime_ns();
    for (size_t i = 0; i < config->n_jobs; i++) {
        const scr_job_t *job = &config->jobs[i];
        scr_pool_t *p = take_pool(old, n_old, job->name);
        scr_disc_t **old_discs = p ? p->discs : NULL;
        size_t n_old_discs = p ? p->n_discs : 0;
        if (!p)
            p = pool_new(s, job);
        p->job = job;
        pool_discovery(p, old_discs, n_old_discs);
        lc_free(old_discs);
        p->waiting_since_ns = now;
        s->pools[s->n_pools++] = p;
    }
    for (size_t i = 0; i < n_old; i++)
        if (old[i])
            pool_free(old[i]);
    lc_free(old);
    /* Targets point into the config: every pool is synced against the new
     * one before the old one goes, even those still waiting for discovery. */
    for (size_t i = 0; i < s->n_pools; i++) {
        pool_sync(s->pools[i]);
        s->pools[i]->dirty = !pool_ready(s->pools[i], now);
    }
    scr_config_free(s->config);
    s->config = config;
    if (!uv_is_active((uv_handle_t *)&s->sync_timer))
        uv_timer_start(&s->sync_timer, on_sync_timer, SCR_SYNC_DELAY_MS, 0);
}

static void reload_metrics(scr_t *s, bool ok)
{
    lc_metric_set(s->m_reload_ok, ok ? 1 : 0);
    if (ok)
        lc_metric_set(s->m_reload_ts, (double)lc_realtime_ns() / 1e9);
}

int scr_reload(scr_t *s, lc_status_t *st)
{
    scr_config_t *config = NULL;
    if (scr_config_load(s->opts.config_file, &config, st) != 0) {
        reload_metrics(s, false);
        LC_LOG_ERROR("scrape config not reloaded; keeping the running one err=\"%s\"", st->msg);
        return -1;
    }
    apply_config(s, config);
    reload_metrics(s, true);
    size_t targets = 0;
    for (size_t i = 0; i < s->n_pools; i++)
        targets += s->pools[i]->n_targets;
    LC_LOG_INFO("scrape config loaded file=%s jobs=%zu targets=%zu", s->opts.config_file,
                s->n_pools, targets);
    return 0;
}

/* ---------------------------------------------------------------- triggers */

static void on_sighup(uv_signal_t *sig, int signum)
{
    scr_t *s = sig->data;
    lc_status_t st = {0};
    LC_UNUSED(signum);
    LC_LOG_INFO("SIGHUP: reloading the scrape config file=%s", s->opts.config_file);
    if (scr_reload(s, &st) != 0)
        return; /* logged; the running config stays */
}

static void on_config_changed(uv_fs_poll_t *poll, int status, const uv_stat_t *prev,
                              const uv_stat_t *curr)
{
    scr_t *s = poll->data;
    lc_status_t st = {0};
    LC_UNUSED(prev);
    LC_UNUSED(curr);
    if (status < 0 || s->closing)
        return; /* a vanished file is reported by the next successful change */
    LC_LOG_INFO("scrape config file changed; reloading file=%s", s->opts.config_file);
    if (scr_reload(s, &st) != 0)
        return; /* logged; the running config stays */
}

/* ---------------------------------------------------------------- membership */

void scr_set_members(scr_t *s, const char *const *ids, size_t n)
{
    scr_strings_free(s->members, s->n_members);
    lc_free(s->live);
    s->members = lc_xcalloc(n + 1, sizeof(char *));
    s->live = lc_xcalloc(n + 1, sizeof(*s->live));
    s->n_members = n;
    for (size_t i = 0; i < n; i++) {
        s->members[i] = lc_xstrdup(ids[i]);
        s->live[i].id = s->members[i];
    }
    int64_t now = lc_realtime_ns();
    size_t mine = 0, total = 0;
    for (size_t i = 0; i < s->n_pools; i++) {
        for (size_t j = 0; j < s->pools[i]->n_targets; j++) {
            scr_target_t *t = s->pools[i]->targets[j];
            scr_target_set_owned(t, scr_owns(s, t->spec.key), now);
            mine += t->owned;
            total++;
        }
    }
    LC_LOG_INFO("scraper members changed members=%zu owned_targets=%zu targets=%zu", n, mine,
                total);
}

/* ---------------------------------------------------------------- lifecycle */

static void scr_register_metrics(scr_t *s)
{
    if (!s->metrics)
        return;
    s->m_reload_ok = lc_metrics_gauge(s->metrics, "ember_scrape_config_last_reload_successful",
                                      "1 if the last scrape config (re)load succeeded", "");
    s->m_reload_ts =
        lc_metrics_gauge(s->metrics, "ember_scrape_config_last_reload_success_timestamp_seconds",
                         "When the scrape config was last loaded successfully", "");
}

static void scr_copy_opts(scr_t *s, const scr_opts_t *o)
{
    s->opts = *o;
    s->opts.config_file = lc_xstrdup(o->config_file);
    s->opts.tenant = lc_xstrdup(o->tenant && o->tenant[0] ? o->tenant : "anonymous");
    char id[256];
    if (o->replica_id && o->replica_id[0]) {
        snprintf(id, sizeof(id), "%s", o->replica_id);
    } else {
        char host[128] = "ember";
        gethostname(host, sizeof(host) - 1);
        snprintf(id, sizeof(id), "%s-%ld", host, (long)getpid());
    }
    s->opts.replica_id = lc_xstrdup(id);
    if (!s->opts.partitions)
        s->opts.partitions = 1;
    if (!s->opts.max_body_bytes)
        s->opts.max_body_bytes = DEFAULT_MAX_BODY_BYTES;
    if (!s->opts.max_samples)
        s->opts.max_samples = DEFAULT_MAX_SAMPLES;
}

static int start_triggers(scr_t *s)
{
    uv_timer_init(s->loop, &s->sync_timer);
    s->sync_timer.data = s;
    uv_signal_init(s->loop, &s->sighup);
    s->sighup.data = s;
    uv_fs_poll_init(s->loop, &s->config_poll);
    s->config_poll.data = s;
    s->pending += 3;
    int rc = 0;
    if (s->opts.handle_sighup)
        rc = uv_signal_start(&s->sighup, on_sighup, SIGHUP);
    if (!rc && s->opts.config_poll_ns > 0)
        rc = uv_fs_poll_start(&s->config_poll, on_config_changed, s->opts.config_file,
                              (unsigned)(s->opts.config_poll_ns / 1000000));
    return rc;
}

int scr_new(uv_loop_t *loop, const scr_opts_t *opts, scr_t **out, lc_status_t *st)
{
    *out = NULL;
    if (!opts->config_file || !opts->transport)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the scraper needs a config file and a transport");
    scr_config_t *config = NULL;
    if (scr_config_load(opts->config_file, &config, st) != 0)
        return -1;
    scr_t *s = lc_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->metrics = opts->metrics;
    scr_copy_opts(s, opts);
    scr_register_metrics(s);
    int rc = scr_http_new(loop, &s->http);
    if (!rc) {
        s->pending++;
        rc = start_triggers(s);
    }
    if (!rc && opts->httpd)
        rc = scr_pages_register(s, opts->httpd);
    if (rc) {
        scr_config_free(config);
        scr_close(s, NULL, NULL); /* finishes as the loop runs */
        return lc_status_set(st, LC_CODE_INTERNAL, "cannot start the scraper: %s", lc_strerror(rc));
    }
    *out = s;
    apply_config(s, config);
    reload_metrics(s, true);
    LC_LOG_INFO("scraper started file=%s jobs=%zu replica=%s membership=%s", s->opts.config_file,
                s->n_pools, s->opts.replica_id, s->opts.membership ? "on" : "off");
    return 0;
}

void scr_close(scr_t *s, void (*cb)(void *data), void *data)
{
    if (!s)
        return;
    s->closing = true;
    s->close_cb = cb;
    s->close_data = data;
    s->pending++; /* held until everything below has been started */
    for (size_t i = 0; i < s->n_pools; i++)
        pool_free(s->pools[i]);
    lc_free(s->pools);
    s->pools = NULL;
    s->n_pools = 0;
    if (s->http)
        scr_http_close(s->http, scr_on_http_closed, s);
    s->http = NULL;
    if (s->sync_timer.loop) {
        uv_close((uv_handle_t *)&s->sync_timer, scr_on_handle_closed);
        uv_close((uv_handle_t *)&s->sighup, scr_on_handle_closed);
        uv_close((uv_handle_t *)&s->config_poll, scr_on_handle_closed);
    }
    scr_pending_done(s);
}
