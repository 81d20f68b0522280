/*
 * scrape.c — one target's life: a timer on its slot, the HTTP request, the
 * processing on the thread pool, the publish, and its health and metrics.
 *
 * Slots. A target is scraped at wall-clock times t with
 * (t - offset) % interval == 0, offset = key % interval: starts are spread
 * over the interval (Parca waits hash(target) mod interval first), and every
 * replica computes the same slots, so a target that moves between replicas
 * keeps its rhythm and two replicas with the same member list never both
 * scrape it. A slot that finds the previous scrape still running is skipped.
 *
 * One scrape at a time per target: `req` (the request) and `work` (processing
 * and then publishing) are never both set, and the delta baseline is only
 * touched by the work. A removed target is marked; the step in flight and the
 * timer's close callback both call target_maybe_free, and the last one frees.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/members.h"
#include "process.h"
#include "scraper_int.h"

#define NS_PER_MS 1000000

struct scr_work_s {
    scr_target_t *t;
    scr_t *scr;
    uv_work_t req;
    lc_buf_t body;
    lc_labels_t series;
    scr_value_type_t *keep;
    size_t n_keep;
    char *profile_name;
    scr_process_in_t in;
    scr_process_out_t out;
};

/* ---------------------------------------------------------------- ownership */

/* The target key as 8 little-endian bytes: every replica, whatever its
 * architecture, hashes the same bytes. */
static void key_bytes(uint64_t key, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(key >> (8 * i));
}

long scr_rendezvous_owner(const char *const *ids, size_t n, uint64_t key)
{
    lc_member_t *live = lc_xcalloc(n + 1, sizeof(*live));
    for (size_t i = 0; i < n; i++)
        live[i].id = ids[i];
    uint8_t k[8];
    key_bytes(key, k);
    size_t owner = lc_members_rendezvous(live, n, k, sizeof(k));
    lc_free(live);
    return owner == SIZE_MAX ? -1 : (long)owner;
}

bool scr_owns(const scr_t *s, uint64_t key)
{
    if (!s->opts.membership)
        return true;
    uint8_t k[8];
    key_bytes(key, k);
    size_t owner = lc_members_rendezvous(s->live, s->n_members, k, sizeof(k));
    return owner != SIZE_MAX && strcmp(s->live[owner].id, s->opts.replica_id) == 0;
}

/* ---------------------------------------------------------------- metrics */

/* `job="..",instance="..",profile=".."` with Prometheus escaping. */
void scr_metric_labels(char *out, size_t len, const char *job, const char *instance,
                       const char *profile)
{
    const char *names[] = {"job", "instance", "profile"};
    const char *values[] = {job, instance, profile};
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < 3 && values[i]; i++) {
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s=\"", i ? "," : "",
                                 names[i]);
        for (const char *p = values[i]; *p && used + 3 < len; p++) {
            if (*p == '\\' || *p == '"')
                out[used++] = '\\';
            if (*p == '\n') {
                out[used++] = '\\';
                out[used++] = 'n';
                continue;
            }
            out[used++] = *p;
        }
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "\"");
    }
}

static const char *profile_name(const scr_target_t *t)
{
    return t->pool->job->profiles[t->spec.profile].name;
}

static void target_metrics(scr_target_t *t)
{
    lc_metrics_t *m = t->scr->metrics;
    if (!m)
        return;
    char labels[1024];
    const char *instance = lc_labels_get(&t->spec.labels, "instance");
    scr_metric_labels(labels, sizeof(labels), t->pool->name, instance ? instance : "",
                      profile_name(t));
    t->m_up = lc_metrics_gauge(m, "ember_scrape_up",
                               "1 if the last scrape of the target succeeded, else 0", labels);
    t->m_duration = lc_metrics_gauge(m, "ember_scrape_duration_seconds",
                                     "Duration of the last scrape of the target", labels);
    t->m_bytes = lc_metrics_counter(m, "ember_scrape_bytes_total",
                                    "Response body bytes received from the target", labels);
    t->m_samples = lc_metrics_gauge(m, "ember_scrape_samples",
                                    "Samples in the last profile published for the target", labels);
}

void scr_count_error(scr_pool_t *pool, const char *kind)
{
    lc_metrics_t *m = pool->scr->metrics;
    if (!m)
        return;
    char labels[512], extra[96];
    scr_metric_labels(labels, sizeof(labels), pool->name, NULL, NULL);
    snprintf(extra, sizeof(extra), ",kind=\"%s\"", kind);
    size_t used = strlen(labels);
    snprintf(labels + used, sizeof(labels) - used, "%s", extra);
    lc_metric_add(lc_metrics_counter(m, "ember_scrape_errors_total",
                                     "Failed scrapes by job and kind of failure", labels),
                  1);
}

static void count_job(scr_pool_t *pool, const char *name, const char *help, double v)
{
    lc_metrics_t *m = pool->scr->metrics;
    if (!m)
        return;
    char labels[512];
    scr_metric_labels(labels, sizeof(labels), pool->name, NULL, NULL);
    lc_metric_add(lc_metrics_counter(m, name, help, labels), v);
}

/* ---------------------------------------------------------------- health */

static void record_failure(scr_target_t *t, const char *kind, const char *msg, double secs)
{
    t->health = SCR_HEALTH_DOWN;
    snprintf(t->last_error, sizeof(t->last_error), "%s: %s", kind, msg);
    t->last_duration_s = secs;
    lc_metric_set(t->m_up, 0);
    lc_metric_set(t->m_duration, secs);
    scr_count_error(t->pool, kind);
    LC_LOG_DEBUG("scrape failed job=%s url=%s kind=%s err=\"%s\"", t->pool->name, t->spec.url, kind,
                 msg);
}

static void record_success(scr_target_t *t, double secs, size_t bytes, size_t samples,
                           bool published)
{
    t->health = SCR_HEALTH_UP;
    t->last_error[0] = '\0';
    t->last_duration_s = secs;
    t->last_bytes = bytes;
    lc_metric_set(t->m_up, 1);
    lc_metric_set(t->m_duration, secs);
    lc_metric_add(t->m_bytes, (double)bytes);
    if (published) {
        t->last_samples = samples;
        lc_metric_set(t->m_samples, (double)samples);
    }
    lc_metric_observe(t->pool->m_duration_hist, secs);
}

/* ---------------------------------------------------------------- freeing */

/* A removed target's series leave /metrics with it: targets come and go with
 * discovery (pods), and their metrics must not pile up. */
static void target_release_metrics(scr_target_t *t)
{
    lc_metrics_t *m = t->scr->metrics;
    lc_metrics_release(m, t->m_up);
    lc_metrics_release(m, t->m_duration);
    lc_metrics_release(m, t->m_bytes);
    lc_metrics_release(m, t->m_samples);
}

static void target_free(scr_target_t *t)
{
    target_release_metrics(t);
    scr_target_spec_fini(&t->spec);
    scr_delta_free(t->delta);
    lc_free(t);
}

static void work_free(scr_work_t *w)
{
    lc_buf_fini(&w->body);
    lc_labels_fini(&w->series);
    for (size_t i = 0; i < w->n_keep; i++) {
        lc_free(w->keep[i].type);
        lc_free(w->keep[i].unit);
    }
    lc_free(w->keep);
    lc_free(w->profile_name);
    lc_free(w->out.msg);
    lc_free(w);
}

/* Frees a removed target once its timer is closed and nothing is in flight. */
static void target_maybe_free(scr_target_t *t)
{
    if (!t->removed || !t->timer_closed || t->work || t->req)
        return;
    scr_t *s = t->scr;
    target_free(t);
    scr_pending_done(s);
}

/* ---------------------------------------------------------------- publishing */

static void scr_on_published(int status, void *data)
{
    scr_work_t *w = data;
    scr_target_t *t = w->t;
    t->work = NULL;
    if (!t->removed && status != 0) {
        const char *kind = status == LC_EFULL ? "publish_backpressure" : "publish";
        snprintf(t->last_error, sizeof(t->last_error), "%s: %s", kind, lc_strerror(status));
        scr_count_error(t->pool, kind);
    } else if (!t->removed) {
        count_job(t->pool, "ember_scrape_published_profiles_total",
                  "Profiles the scraper published", 1);
        count_job(t->pool, "ember_scrape_published_samples_total",
                  "Samples in the profiles the scraper published", (double)w->out.n_samples);
    }
    work_free(w);
    target_maybe_free(t);
}

static void publish(scr_target_t *t, scr_work_t *w)
{
    scr_t *s = w->scr;
    int rc = lc_transport_publish(s->opts.transport, w->out.msg, w->out.len, w->out.partition,
                                  w->out.ingest_id, sizeof(w->out.ingest_id), scr_on_published, w);
    if (rc != 0)
        scr_on_published(rc, w); /* the callback never runs for a failed call */
    LC_UNUSED(t);
}

/* ---------------------------------------------------------------- processing */

static void work_run(uv_work_t *req)
{
    scr_work_t *w = LC_CONTAINER_OF(req, scr_work_t, req);
    (void)scr_process(&w->in, &w->out);
}

static void work_after(uv_work_t *req, int status)
{
    scr_work_t *w = LC_CONTAINER_OF(req, scr_work_t, req);
    scr_target_t *t = w->t;
    LC_UNUSED(status);
    if (t->removed || t->scr->closing) {
        t->work = NULL;
        work_free(w);
        target_maybe_free(t);
        return;
    }
    if (t->delta && !t->owned)
        scr_delta_forget(t->delta); /* ownership moved while this ran */
    double secs = t->last_duration_s;
    if (w->out.error_kind) {
        record_failure(t, w->out.error_kind, w->out.error, secs);
    } else {
        record_success(t, secs, w->body.len, w->out.n_samples, w->out.msg != NULL);
        if (w->out.msg && t->owned) {
            publish(t, w);
            return;
        }
    }
    t->work = NULL;
    work_free(w);
}

static scr_work_t *work_new(scr_target_t *t, lc_buf_t *body)
{
    scr_t *s = t->scr;
    const scr_profile_t *p = &t->pool->job->profiles[t->spec.profile];
    scr_work_t *w = lc_xcalloc(1, sizeof(*w));
    w->t = t;
    w->scr = s;
    w->body = *body;
    lc_labels_copy(&w->series, &t->spec.series);
    w->profile_name = lc_xstrdup(p->name);
    w->keep = lc_xcalloc(p->n_keep + 1, sizeof(*w->keep));
    for (size_t i = 0; i < p->n_keep; i++) {
        w->keep[i].type = p->keep[i].type ? lc_xstrdup(p->keep[i].type) : NULL;
        w->keep[i].unit = p->keep[i].unit ? lc_xstrdup(p->keep[i].unit) : NULL;
    }
    w->n_keep = p->n_keep;
    w->in = (scr_process_in_t){
        .body = w->body.data,
        .len = w->body.len,
        .profile_name = w->profile_name,
        .cumulative = p->cumulative,
        .delta = t->delta,
        .keep = w->keep,
        .n_keep = w->n_keep,
        .series = &w->series,
        .tenant = s->opts.tenant,
        .partitions = s->opts.partitions,
        .lean = lc_transport_wants_lean(s->opts.transport),
        .scrape_time_ns = t->last_scrape_ns,
    };
    lc_pprof_limits_default(&w->in.limits);
    w->in.limits.max_decompressed_bytes = s->opts.max_body_bytes;
    w->in.limits.max_samples = s->opts.max_samples;
    return w;
}

/* ---------------------------------------------------------------- the request */

static void on_response(scr_http_req_t *req, void *data)
{
    scr_target_t *t = data;
    t->req = NULL;
    const scr_http_result_t *res = scr_http_result(req);
    t->last_duration_s = res->duration_s;
    if (res->error_kind) {
        record_failure(t, res->error_kind, res->error, res->duration_s);
        scr_http_req_free(req);
        return;
    }
    lc_buf_t body;
    scr_http_take_body(req, &body);
    scr_http_req_free(req);
    scr_work_t *w = work_new(t, &body);
    t->work = w;
    if (uv_queue_work(t->scr->loop, &w->req, work_run, work_after) != 0) {
        t->work = NULL;
        work_free(w);
        record_failure(t, "internal", "cannot queue the processing", res->duration_s);
    }
}

static void start_scrape(scr_target_t *t)
{
    scr_t *s = t->scr;
    const scr_job_t *job = t->pool->job;
    char replica[256];
    snprintf(replica, sizeof(replica), "X-Ember-Scraper-Replica: %s", s->opts.replica_id);
    const char *headers[] = {replica};
    scr_http_opts_t o = {
        .url = t->spec.url,
        .client = &job->client,
        .timeout_ns = job->timeout_ns,
        .max_body_bytes = s->opts.max_body_bytes,
        .user_agent = SCR_USER_AGENT,
        .headers = headers,
        .n_headers = 1,
        .on_done = on_response,
        .data = t,
    };
    t->last_scrape_ns = lc_realtime_ns();
    t->scrapes++;
    int rc = scr_http_start(s->http, &o, &t->req);
    if (rc != 0) {
        t->req = NULL;
        record_failure(t, "internal", lc_strerror(rc), 0);
    }
}

/* ---------------------------------------------------------------- the schedule */

static void scr_on_tick(uv_timer_t *timer);

/* Arms the timer for the first slot after now, and never for the slot that
 * just fired: libuv's timer runs on the loop's cached monotonic clock, which
 * can lag the wall clock by a few milliseconds, so a timer may fire just
 * before its slot and would otherwise fire again for the same slot. */
static void schedule(scr_target_t *t)
{
    int64_t interval = t->pool->job->interval_ns;
    int64_t offset = (int64_t)(t->spec.key % (uint64_t)interval);
    int64_t now = lc_realtime_ns();
    int64_t next = ((now - offset) / interval + 1) * interval + offset;
    if (t->interval_ns == interval && next <= t->next_slot_ns)
        next = t->next_slot_ns + interval;
    t->interval_ns = interval;
    t->next_slot_ns = next;
    uv_update_time(t->scr->loop);
    uint64_t delay_ms = (uint64_t)((next - now + NS_PER_MS - 1) / NS_PER_MS);
    uv_timer_start(&t->timer, scr_on_tick, delay_ms, 0);
}

static void scr_on_tick(uv_timer_t *timer)
{
    scr_target_t *t = timer->data;
    scr_t *s = t->scr;
    schedule(t);
    if (s->closing || !t->owned || t->req || t->work)
        return;
    if (s->opts.handover_ns > 0 && lc_realtime_ns() - t->owned_since_ns < s->opts.handover_ns)
        return; /* the previous owner may not have heard of the new member yet */
    start_scrape(t);
}

/* ---------------------------------------------------------------- lifecycle */

scr_target_t *scr_target_new(scr_pool_t *pool, scr_target_spec_t *spec)
{
    scr_target_t *t = lc_xcalloc(1, sizeof(*t));
    t->scr = pool->scr;
    t->pool = pool;
    t->spec = *spec;
    memset(spec, 0, sizeof(*spec));
    if (pool->job->profiles[t->spec.profile].cumulative)
        t->delta = scr_delta_new();
    uv_timer_init(pool->scr->loop, &t->timer);
    t->timer.data = t;
    t->owned = scr_owns(pool->scr, t->spec.key);
    t->owned_since_ns = pool->scr->opts.membership ? lc_realtime_ns() : 0;
    target_metrics(t);
    schedule(t);
    return t;
}

void scr_target_update(scr_target_t *t, scr_target_spec_t *spec)
{
    bool was_cumulative = t->delta != NULL;
    scr_target_spec_fini(&t->spec);
    t->spec = *spec;
    memset(spec, 0, sizeof(*spec));
    bool cumulative = t->pool->job->profiles[t->spec.profile].cumulative;
    if (cumulative && !was_cumulative)
        t->delta = scr_delta_new();
    else if (!cumulative && was_cumulative && !t->work) {
        scr_delta_free(t->delta);
        t->delta = NULL;
    }
    if (t->interval_ns != t->pool->job->interval_ns)
        schedule(t);
}

void scr_target_set_owned(scr_target_t *t, bool owned, int64_t now_ns)
{
    if (owned == t->owned)
        return;
    t->owned = owned;
    if (owned) {
        t->owned_since_ns = now_ns;
        return;
    }
    if (t->req) { /* stop at once: the new owner takes the next slot */
        scr_http_cancel(t->req);
        t->req = NULL;
    }
    if (t->delta && !t->work)
        scr_delta_forget(t->delta);
}

static void on_timer_closed(uv_handle_t *h)
{
    scr_target_t *t = h->data;
    t->timer_closed = true;
    target_maybe_free(t);
}

void scr_target_remove(scr_target_t *t)
{
    t->removed = true;
    t->pool = NULL; /* may be freed before the step in flight finishes */
    t->scr->pending++;
    if (t->req) {
        scr_http_cancel(t->req);
        t->req = NULL;
    }
    uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}
