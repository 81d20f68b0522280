/*
 * test_scraper_run.c — the scraper end to end on one loop, against a fake
 * pprof endpoint served by lc_httpd (no network beyond loopback): the default
 * profile set is scraped on 1 s slots, process_cpu with ?seconds=1, gzip and
 * raw bodies are both accepted, cumulative allocs/block/mutex arrive as
 * deltas (the first scrape is only a baseline), every message carries the
 * job, instance, static labels, service_name and __delta__="false"; a target
 * that refuses connections is down with its error on /targets and in
 * ember_scrape_up; a reload keeps the healthy target's schedule and baseline
 * and applies the new labels; closing finishes cleanly.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ember/v1/ingest.pb-c.h"
#include "google/v1/profile.pb-c.h"
#include "lc/gz.h"
#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/transport.h"
#include "lc_test.h"
#include "scraper_int.h"

#define MAX_MSGS 512

typedef struct msg_s {
    char name[32], env[32], job[32], instance[64], service[32], delta[8];
    int64_t values[4]; /* summed per sample type */
    size_t n_types;
    int64_t time_nanos;
    bool delta_disabled;
} msg_t;

typedef struct world_s {
    uv_loop_t loop;
    lc_httpd_t *target, *pages;
    int port, dead_port;
    lc_transport_t *tr;
    scr_t *scr;
    scr_http_t *client;
    lc_metrics_t *metrics;
    char config_path[256];
    atomic_int requests[8]; /* per profile path */
    char cpu_query[128];
    char user_agent[128];
    pthread_mutex_t lock;
    msg_t msgs[MAX_MSGS];
    int n_msgs;
    json_t *targets; /* /targets before the reload */
    int reload_rc;
    char *metrics_text; /* /metrics after the reload, before closing */
    uv_timer_t timer;
    int phase;
    atomic_bool stopping; /* the target refuses new scrapes (uncounted) */
    int settle_ticks, quiet_ticks, published_at_tick; /* settle's, every 50 ms */
} world_t;

static char *render_metrics(lc_metrics_t *m);

/* ---------------------------------------------------------------- the fake target */

enum { P_ALLOCS, P_BLOCK, P_MUTEX, P_GOROUTINE, P_PROFILE, P_OTHER };

static int path_index(const char *path)
{
    static const char *const paths[] = {"/debug/pprof/allocs", "/debug/pprof/block",
                                        "/debug/pprof/mutex", "/debug/pprof/goroutine",
                                        "/debug/pprof/profile"};
    for (int i = 0; i < P_OTHER; i++)
        if (strcmp(path, paths[i]) == 0)
            return i;
    return P_OTHER;
}

/* A Go-shaped profile; cumulative ones grow by a fixed step per request. */
static void make_profile(int which, int n, lc_buf_t *out)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    uint64_t fa = lc_pprof_builder_function(b, "main.work", "main.work", "main.go", 10);
    uint64_t fm = lc_pprof_builder_function(b, "main.main", "main.main", "main.go", 1);
    lc_pprof_line_t la = {fa, 12}, lm = {fm, 3};
    uint64_t locs[2] = {lc_pprof_builder_location(b, 0, 0x1010, &la, 1),
                        lc_pprof_builder_location(b, 0, 0x1020, &lm, 1)};
    int64_t v[4] = {0};
    switch (which) {
    case P_ALLOCS:
        lc_pprof_builder_sample_type(b, "alloc_objects", "count");
        lc_pprof_builder_sample_type(b, "alloc_space", "bytes");
        lc_pprof_builder_sample_type(b, "inuse_objects", "count");
        lc_pprof_builder_sample_type(b, "inuse_space", "bytes");
        lc_pprof_builder_period(b, "space", "bytes", 524288);
        v[0] = 7 * n, v[1] = 700 * n, v[2] = 1, v[3] = 100;
        break;
    case P_BLOCK:
    case P_MUTEX:
        lc_pprof_builder_sample_type(b, "contentions", "count");
        lc_pprof_builder_sample_type(b, "delay", "nanoseconds");
        lc_pprof_builder_period(b, "contentions", "count", 1);
        v[0] = 2 * n, v[1] = 1000 * n;
        break;
    case P_GOROUTINE:
        lc_pprof_builder_sample_type(b, "goroutine", "count");
        lc_pprof_builder_period(b, "goroutine", "count", 1);
        v[0] = 3;
        break;
    default:
        lc_pprof_builder_sample_type(b, "samples", "count");
        lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
        lc_pprof_builder_period(b, "cpu", "nanoseconds", 10000000);
        v[0] = 5, v[1] = 50000000;
    }
    lc_pprof_builder_times(b, 0, which == P_PROFILE ? 1000000000 : 0);
    lc_pprof_builder_sample(b, locs, 2, v, NULL, 0);
    lc_buf_init(out, LC_BUF_UNLIMITED);
    if (lc_pprof_builder_encode(b, which == P_ALLOCS, out)) /* Go gzips; raw is fine too */
        abort();
    lc_pprof_builder_free(b);
}

static lc_http_result_t target_handler(lc_http_req_t *req, void *data)
{
    world_t *w = data;
    int which = path_index(req->path);
    if (which == P_OTHER) {
        lc_http_reply(req, 404, "text/plain", "no", 2);
        return LC_HTTP_DONE;
    }
    if (atomic_load(&w->stopping)) {
        lc_http_reply(req, 503, "text/plain", "stopping", 8);
        return LC_HTTP_DONE;
    }
    int n = atomic_fetch_add(&w->requests[which], 1) + 1;
    if (which == P_PROFILE)
        snprintf(w->cpu_query, sizeof(w->cpu_query), "%s", req->query);
    const char *ua = lc_http_header(req, "user-agent");
    snprintf(w->user_agent, sizeof(w->user_agent), "%s", ua ? ua : "");
    lc_buf_t body;
    make_profile(which, n, &body);
    lc_http_reply(req, 200, "application/octet-stream", body.data, body.len);
    lc_buf_fini(&body);
    return LC_HTTP_DONE;
}

/* ---------------------------------------------------------------- the transport */

static void copy_label(char *dst, size_t len, const Ember__V1__IngestProfile *m, const char *name)
{
    dst[0] = '\0';
    for (size_t i = 0; i < m->n_labels; i++)
        if (strcmp(m->labels[i]->name, name) == 0)
            snprintf(dst, len, "%s", m->labels[i]->value);
}

static int consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    world_t *w = data;
    for (size_t i = 0; i < n; i++) {
        Ember__V1__IngestProfile *m =
            ember__v1__ingest_profile__unpack(NULL, msgs[i].len, msgs[i].data);
        if (!m)
            continue;
        msg_t x = {0};
        copy_label(x.name, sizeof(x.name), m, "__name__");
        copy_label(x.env, sizeof(x.env), m, "env");
        copy_label(x.job, sizeof(x.job), m, "job");
        copy_label(x.instance, sizeof(x.instance), m, "instance");
        copy_label(x.service, sizeof(x.service), m, "service_name");
        copy_label(x.delta, sizeof(x.delta), m, "__delta__");
        x.time_nanos = m->time_nanos;
        x.delta_disabled = m->delta_disabled;
        Google__V1__Profile *p = google__v1__profile__unpack(NULL, m->pprof.len, m->pprof.data);
        if (p) {
            x.n_types = p->n_sample_type;
            for (size_t s = 0; s < p->n_sample; s++)
                for (size_t t = 0; t < p->sample[s]->n_value && t < 4; t++)
                    x.values[t] += p->sample[s]->value[t];
            google__v1__profile__free_unpacked(p, NULL);
        }
        ember__v1__ingest_profile__free_unpacked(m, NULL);
        pthread_mutex_lock(&w->lock);
        if (w->n_msgs < MAX_MSGS)
            w->msgs[w->n_msgs++] = x;
        pthread_mutex_unlock(&w->lock);
    }
    return 0;
}

/* ---------------------------------------------------------------- the script */

static void write_config(world_t *w, const char *env, bool with_dead)
{
    FILE *f = fopen(w->config_path, "w");
    fprintf(f,
            "scrape_configs:\n"
            "  - job_name: fake\n"
            "    scrape_interval: 1s\n"
            "    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n"
            "        labels: {env: %s}\n",
            w->port, env);
    if (with_dead)
        fprintf(f, "      - targets: ['127.0.0.1:%d']\n", w->dead_port);
    fclose(f);
}

static void on_pages(scr_http_req_t *req, void *data)
{
    world_t *w = data;
    const scr_http_result_t *res = scr_http_result(req);
    json_error_t err;
    if (!res->error_kind)
        w->targets = json_loadb((const char *)res->body.data, res->body.len, 0, &err);
    scr_http_req_free(req);
}

static void on_closed(void *data)
{
    LC_UNUSED(data);
}

static void on_scraper_closed(void *data)
{
    world_t *w = data;
    lc_transport_close(w->tr, on_closed, NULL);
}

/* Closes everything once no profile was published for 2 s after the target
 * began refusing new scrapes (at most 20 s): a scrape the target answered
 * but the scraper had not published yet when it closed was dropped, which a
 * busy box made happen. Scrapes time out within their 1 s interval, so 2 s
 * of quiet means none is left in flight. */
static void settle(uv_timer_t *timer)
{
    world_t *w = timer->data;
    pthread_mutex_lock(&w->lock);
    int published = w->n_msgs;
    pthread_mutex_unlock(&w->lock);
    w->quiet_ticks = published == w->published_at_tick ? w->quiet_ticks + 1 : 0;
    w->published_at_tick = published;
    if (w->quiet_ticks < 40 && ++w->settle_ticks < 400)
        return;
    uv_close((uv_handle_t *)timer, NULL);
    scr_http_close(w->client, NULL, NULL);
    lc_httpd_close(w->target, NULL, NULL);
    lc_httpd_close(w->pages, NULL, NULL);
    scr_close(w->scr, on_scraper_closed, w);
}

static void step(uv_timer_t *timer)
{
    world_t *w = timer->data;
    switch (w->phase++) {
    case 0: { /* after ~3.5 s: look at /targets */
        char url[128];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/targets", lc_httpd_port(w->pages));
        scr_http_opts_t o = {.url = url,
                             .timeout_ns = 5000000000LL,
                             .max_body_bytes = 1 << 20,
                             .on_done = on_pages,
                             .data = w};
        scr_http_req_t *r;
        LC_ASSERT_OK(scr_http_start(w->client, &o, &r));
        uv_timer_start(timer, step, 300, 0);
        break;
    }
    case 1: { /* reload with a new label and without the dead target */
        write_config(w, "after", false);
        lc_status_t st = {0};
        w->reload_rc = scr_reload(w->scr, &st);
        uv_timer_start(timer, step, 2500, 0);
        break;
    }
    case 2: /* the metrics as they are, then no new scrape: those answered publish */
        w->metrics_text = render_metrics(w->metrics);
        atomic_store(&w->stopping, true);
        uv_timer_start(timer, settle, 50, 50);
        break;
    default:
        break;
    }
}

static int free_port(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_tcp_t tcp;
    uv_tcp_init(&loop, &tcp);
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_bind(&tcp, (struct sockaddr *)&sa, 0);
    struct sockaddr_storage name;
    int len = sizeof(name);
    uv_tcp_getsockname(&tcp, (struct sockaddr *)&name, &len);
    int port = ntohs(((struct sockaddr_in *)&name)->sin_port);
    uv_close((uv_handle_t *)&tcp, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return port;
}

static void start(world_t *w)
{
    uv_loop_init(&w->loop);
    pthread_mutex_init(&w->lock, NULL);
    w->metrics = lc_metrics_new();
    lc_httpd_opts_t ho = {.address = "127.0.0.1:0"};
    LC_ASSERT_OK(lc_httpd_new(&w->loop, &ho, &w->target));
    lc_http_route_t r = {
        .path = "/debug/pprof/*", .scope = LC_HTTP_SCOPE_PUBLIC, .work = target_handler, .data = w};
    LC_ASSERT_OK(lc_httpd_route(w->target, &r));
    LC_ASSERT_OK(lc_httpd_listen(w->target));
    w->port = lc_httpd_port(w->target);
    w->dead_port = free_port();
    LC_ASSERT_OK(lc_httpd_new(&w->loop, &ho, &w->pages));
    snprintf(w->config_path, sizeof(w->config_path), "/tmp/scr-run-%d.yaml", (int)getpid());
    write_config(w, "before", true);
    LC_ASSERT_OK(lc_transport_direct_new(&w->loop, NULL, consume, w, &w->tr));
    scr_opts_t o;
    scr_opts_default(&o);
    o.config_file = w->config_path;
    o.transport = w->tr;
    o.metrics = w->metrics;
    o.httpd = w->pages;
    o.handle_sighup = false;
    lc_status_t st = {0};
    int rc = scr_new(&w->loop, &o, &w->scr, &st);
    if (rc)
        LC_FAIL_("scr_new: %s", st.msg);
    LC_ASSERT_OK(lc_httpd_listen(w->pages));
    LC_ASSERT_OK(scr_http_new(&w->loop, &w->client));
    uv_timer_init(&w->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, step, 3500, 0);
}

/* ---------------------------------------------------------------- checks */

static int count(world_t *w, const char *name, const char *env)
{
    int n = 0;
    for (int i = 0; i < w->n_msgs; i++)
        n += strcmp(w->msgs[i].name, name) == 0 && (!env || strcmp(w->msgs[i].env, env) == 0);
    return n;
}

static void check_messages(world_t *w)
{
    static const char *const names[] = {"process_cpu", "goroutine", "memory", "block", "mutex"};
    for (size_t i = 0; i < LC_ARRAY_LEN(names); i++) {
        lc_test_checks++;
        if (count(w, names[i], "before") < 1)
            LC_FAIL_("no %s profile published before the reload", names[i]);
        lc_test_checks++;
        if (count(w, names[i], "after") < 1)
            LC_FAIL_("no %s profile published after the reload", names[i]);
    }
    char instance[64];
    snprintf(instance, sizeof(instance), "127.0.0.1:%d", w->port);
    for (int i = 0; i < w->n_msgs; i++) {
        msg_t *m = &w->msgs[i];
        LC_ASSERT_STR_EQ(m->job, "fake");
        LC_ASSERT_STR_EQ(m->service, "fake");
        LC_ASSERT_STR_EQ(m->instance, instance);
        LC_ASSERT_STR_EQ(m->delta, "false");
        LC_CHECK(m->delta_disabled);
        LC_CHECK(m->time_nanos > 0);
        if (strcmp(m->name, "memory") == 0) {
            LC_ASSERT_EQ(m->n_types, 4);
            LC_ASSERT_EQ(m->values[0], 7); /* one request's growth */
            LC_ASSERT_EQ(m->values[1], 700);
            LC_ASSERT_EQ(m->values[3], 100); /* inuse passes through */
        }
        if (strcmp(m->name, "block") == 0 || strcmp(m->name, "mutex") == 0) {
            LC_ASSERT_EQ(m->values[0], 2);
            LC_ASSERT_EQ(m->values[1], 1000);
        }
    }
    /* The first allocs scrape is only a baseline, and the reload kept it: one
     * fewer memory profile than allocs requests (the label change made new
     * targets, whose first scrape is again a baseline). */
    int allocs = atomic_load(&w->requests[P_ALLOCS]);
    lc_test_checks++;
    if (count(w, "memory", NULL) != allocs - 2)
        LC_FAIL_("memory profiles %d, allocs requests %d", count(w, "memory", NULL), allocs);
    LC_CHECK(strstr(w->cpu_query, "seconds=1") != NULL);
    LC_CHECK(strncmp(w->user_agent, "ember-scraper/", 14) == 0);
    LC_ASSERT_EQ(w->reload_rc, 0);
}

static void check_targets_page(world_t *w)
{
    LC_CHECK(w->targets != NULL);
    if (!w->targets)
        return;
    json_t *active = json_object_get(json_object_get(w->targets, "data"), "activeTargets");
    LC_ASSERT_EQ(json_array_size(active), 10);
    int up = 0, down = 0;
    size_t i;
    json_t *t;
    json_array_foreach(active, i, t)
    {
        const char *health = json_string_value(json_object_get(t, "health"));
        const char *err = json_string_value(json_object_get(t, "lastError"));
        const char *url = json_string_value(json_object_get(t, "scrapeUrl"));
        char dead[64];
        snprintf(dead, sizeof(dead), ":%d/", w->dead_port);
        if (strstr(url, dead)) {
            down += strcmp(health, "down") == 0;
            LC_CHECK(strstr(err, "connect") != NULL);
        } else {
            up += strcmp(health, "up") == 0;
            LC_ASSERT_STR_EQ(err, "");
        }
    }
    LC_ASSERT_EQ(up, 5);
    LC_ASSERT_EQ(down, 5);
    json_decref(w->targets);
}

/* The registry's exposition as a C string (free with lc_free). */
static char *render_metrics(lc_metrics_t *m)
{
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_metrics_render(m, &b));
    LC_ASSERT_OK(lc_buf_putc(&b, '\0'));
    size_t len;
    return (char *)lc_buf_steal(&b, &len);
}

/* The reload dropped the dead target: its series left /metrics with it; the
 * healthy one stayed up. Once the scraper closed, no target series is left. */
static void check_metrics(world_t *w)
{
    const char *text = w->metrics_text;
    char want[256];
    snprintf(want, sizeof(want), "ember_scrape_up{job=\"fake\",instance=\"127.0.0.1:%d\"",
             w->dead_port);
    LC_CHECK(strstr(text, want) == NULL);
    snprintf(want, sizeof(want),
             "ember_scrape_up{job=\"fake\",instance=\"127.0.0.1:%d\",profile=\"memory\"} 1",
             w->port);
    LC_CHECK(strstr(text, want) != NULL);
    LC_CHECK(strstr(text, "ember_scrape_errors_total{job=\"fake\",kind=\"connect\"}"));
    LC_CHECK(strstr(text, "ember_scrape_config_last_reload_successful 1"));
    lc_free(w->metrics_text);

    char *closed = render_metrics(w->metrics);
    LC_CHECK(strstr(closed, "ember_scrape_up{") == NULL);
    LC_CHECK(strstr(closed, "ember_scrape_bytes_total{") == NULL);
    lc_free(closed);
}

static void test_scrape_end_to_end(void)
{
    static world_t w;
    start(&w);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&w.loop));
    check_messages(&w);
    check_targets_page(&w);
    check_metrics(&w);
    lc_metrics_free(w.metrics);
    unlink(w.config_path);
}

static void test_rendezvous(void)
{
    const char *ids[] = {"a", "b", "c"};
    int owned[3] = {0};
    for (uint64_t k = 0; k < 3000; k++) {
        long o = scr_rendezvous_owner(ids, 3, k * 0x9e3779b97f4a7c15ULL);
        LC_CHECK(o >= 0 && o < 3);
        if (o >= 0)
            owned[o]++;
        /* Removing a member only moves the keys it owned. */
        const char *two[] = {"a", "c"};
        long o2 = scr_rendezvous_owner(two, 2, k * 0x9e3779b97f4a7c15ULL);
        if (o == 0)
            LC_ASSERT_EQ(o2, 0);
        if (o == 2)
            LC_ASSERT_EQ(o2, 1);
    }
    for (int i = 0; i < 3; i++)
        LC_CHECK(owned[i] > 800 && owned[i] < 1200);
    LC_ASSERT_EQ(scr_rendezvous_owner(ids, 0, 1), -1);
}

LC_TEST_MAIN(test_rendezvous, test_scrape_end_to_end)
