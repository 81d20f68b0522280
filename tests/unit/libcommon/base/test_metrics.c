/*
 * test_metrics.c — the Prometheus registry: exposition text against
 * hand-written expectations, registration rules, and exact sums under
 * concurrent updates.
 */
#include <math.h>
#include <pthread.h>

#include "lc/metrics.h"
#include "lc_test.h"

#define THREADS 4
#define PER_THREAD 100000

/* Renders m into a NUL-terminated string (free with lc_free). */
static char *render(lc_metrics_t *m)
{
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_metrics_render(m, &b));
    LC_ASSERT_OK(lc_buf_putc(&b, '\0'));
    size_t len;
    return (char *)lc_buf_steal(&b, &len);
}

static void test_render_golden(void)
{
    lc_metrics_t *m = lc_metrics_new();
    lc_metric_t *ok = lc_metrics_counter(m, "ember_requests_total", "Requests handled.",
                                         "route=\"/ingest\",code=\"200\"");
    lc_metric_t *bad = lc_metrics_counter(m, "ember_requests_total", "second help is ignored",
                                          "route=\"/render\",code=\"500\"");
    lc_metric_t *g = lc_metrics_gauge(m, "ember_backlog_bytes", "Bytes waiting.\nSee \\docs", "");
    static const double bounds[] = {0.125, 0.5, 1};
    lc_metric_t *h = lc_metrics_histogram(m, "ember_latency_seconds", "Latency.",
                                          "route=\"/ingest\"", bounds, 3);
    static const double size_bounds[] = {1024, 4096, INFINITY}; /* +Inf is implied anyway */
    lc_metric_t *sz = lc_metrics_histogram(m, "ember_size_bytes", "Sizes", NULL, size_bounds, 3);

    lc_metric_add(ok, 3);
    lc_metric_add(ok, 0.5);
    lc_metric_add(bad, 1);
    lc_metric_set(g, 1536);
    lc_metric_add(g, -36);
    /* 0.125 sits exactly on a bound: le is inclusive. Values are exact in binary. */
    static const double seen[] = {0.0625, 0.125, 0.25, 2, 0.75};
    for (size_t i = 0; i < LC_ARRAY_LEN(seen); i++)
        lc_metric_observe(h, seen[i]);
    lc_metric_observe(sz, 5000);

    char *text = render(m);
    LC_ASSERT_STR_EQ(text, "# HELP ember_requests_total Requests handled.\n"
                           "# TYPE ember_requests_total counter\n"
                           "ember_requests_total{route=\"/ingest\",code=\"200\"} 3.5\n"
                           "ember_requests_total{route=\"/render\",code=\"500\"} 1\n"
                           "# HELP ember_backlog_bytes Bytes waiting.\\nSee \\\\docs\n"
                           "# TYPE ember_backlog_bytes gauge\n"
                           "ember_backlog_bytes 1500\n"
                           "# HELP ember_latency_seconds Latency.\n"
                           "# TYPE ember_latency_seconds histogram\n"
                           "ember_latency_seconds_bucket{route=\"/ingest\",le=\"0.125\"} 2\n"
                           "ember_latency_seconds_bucket{route=\"/ingest\",le=\"0.5\"} 3\n"
                           "ember_latency_seconds_bucket{route=\"/ingest\",le=\"1\"} 4\n"
                           "ember_latency_seconds_bucket{route=\"/ingest\",le=\"+Inf\"} 5\n"
                           "ember_latency_seconds_sum{route=\"/ingest\"} 3.1875\n"
                           "ember_latency_seconds_count{route=\"/ingest\"} 5\n"
                           "# HELP ember_size_bytes Sizes\n"
                           "# TYPE ember_size_bytes histogram\n"
                           "ember_size_bytes_bucket{le=\"1024\"} 0\n"
                           "ember_size_bytes_bucket{le=\"4096\"} 0\n"
                           "ember_size_bytes_bucket{le=\"+Inf\"} 1\n"
                           "ember_size_bytes_sum 5000\n"
                           "ember_size_bytes_count 1\n");
    lc_free(text);
    lc_metrics_free(m);
}

static void test_default_buckets(void)
{
    lc_metrics_t *m = lc_metrics_new();
    lc_metric_t *h = lc_metrics_histogram(m, "d_seconds", "h", "", NULL, 0);
    lc_metric_observe(h, 0.003);
    lc_metric_observe(h, 45);
    lc_metric_observe(h, 61);
    char *text = render(m);
    LC_ASSERT_STR_EQ(text, "# HELP d_seconds h\n"
                           "# TYPE d_seconds histogram\n"
                           "d_seconds_bucket{le=\"0.001\"} 0\n"
                           "d_seconds_bucket{le=\"0.0025\"} 0\n"
                           "d_seconds_bucket{le=\"0.005\"} 1\n"
                           "d_seconds_bucket{le=\"0.01\"} 1\n"
                           "d_seconds_bucket{le=\"0.025\"} 1\n"
                           "d_seconds_bucket{le=\"0.05\"} 1\n"
                           "d_seconds_bucket{le=\"0.1\"} 1\n"
                           "d_seconds_bucket{le=\"0.25\"} 1\n"
                           "d_seconds_bucket{le=\"0.5\"} 1\n"
                           "d_seconds_bucket{le=\"1\"} 1\n"
                           "d_seconds_bucket{le=\"2.5\"} 1\n"
                           "d_seconds_bucket{le=\"5\"} 1\n"
                           "d_seconds_bucket{le=\"10\"} 1\n"
                           "d_seconds_bucket{le=\"30\"} 1\n"
                           "d_seconds_bucket{le=\"60\"} 2\n"
                           "d_seconds_bucket{le=\"+Inf\"} 3\n"
                           "d_seconds_sum 106.003\n"
                           "d_seconds_count 3\n");
    lc_free(text);
    lc_metrics_free(m);
}

/* Gauge values that need care to print in a form Prometheus parses back. */
static void test_number_format(void)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0.1, "0.1"},
        {-2.5, "-2.5"},
        {1e20, "1e+20"},
        {123456789012.0, "123456789012"},
        {1e-9, "1e-09"},
        {NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {1.0 / 3, "0.3333333333333333"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        lc_metrics_t *m = lc_metrics_new();
        lc_metric_set(lc_metrics_gauge(m, "g", "", ""), cases[i].v);
        char *text = render(m);
        char want[128];
        snprintf(want, sizeof(want), "# HELP g \n# TYPE g gauge\ng %s\n", cases[i].text);
        LC_ASSERT_STR_EQ(text, want);
        lc_free(text);
        lc_metrics_free(m);
    }
}

static void test_registration_rules(void)
{
    lc_metrics_t *m = lc_metrics_new();
    lc_metric_t *a = lc_metrics_counter(m, "x_total", "x", "k=\"1\"");
    LC_CHECK(a != NULL);
    LC_CHECK(lc_metrics_counter(m, "x_total", "x", "k=\"1\"") == a);
    LC_CHECK(lc_metrics_counter(m, "x_total", "x", "k=\"2\"") != a);
    /* Same name, another type: refused (and logged), whatever the labels. */
    LC_CHECK(lc_metrics_gauge(m, "x_total", "x", "k=\"1\"") == NULL);
    LC_CHECK(lc_metrics_histogram(m, "x_total", "x", "k=\"3\"", NULL, 0) == NULL);
    LC_CHECK(lc_metrics_counter(m, "bad-name", "x", "") == NULL);
    LC_CHECK(lc_metrics_counter(m, "9lives", "x", "") == NULL);
    LC_CHECK(lc_metrics_counter(m, "nl_total", "x", "k=\"a\nb\"") == NULL);
    static const double down[] = {1, 0.5};
    LC_CHECK(lc_metrics_histogram(m, "h", "x", "", down, 2) == NULL);

    /* Updates through a failed registration are ignored rather than crashing. */
    lc_metric_add(NULL, 1);
    lc_metric_set(NULL, 1);
    lc_metric_observe(NULL, 1);
    /* A counter never goes down. */
    lc_metric_add(a, 2);
    lc_metric_add(a, -1);
    lc_metric_add(a, NAN);
    LC_CHECK(lc_metric_value(a) == 2);

    /* Many label sets force the lookup table to grow; every lookup still finds its own. */
    lc_metric_t *many[300];
    for (int i = 0; i < 300; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "i=\"%d\"", i);
        many[i] = lc_metrics_gauge(m, "many", "", labels);
        lc_metric_set(many[i], i);
    }
    for (int i = 0; i < 300; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "i=\"%d\"", i);
        LC_CHECK(lc_metrics_gauge(m, "many", "", labels) == many[i]);
        LC_CHECK(lc_metric_value(many[i]) == i);
    }
    lc_metrics_free(m);
    lc_metrics_free(NULL);
}

static void test_render_respects_cap(void)
{
    lc_metrics_t *m = lc_metrics_new();
    lc_metric_add(lc_metrics_counter(m, "a_total", "a counter with a long help text", ""), 1);
    lc_buf_t b;
    lc_buf_init(&b, 16);
    LC_ASSERT_EQ(lc_metrics_render(m, &b), LC_ETOOBIG);
    lc_buf_fini(&b);
    lc_metrics_free(m);
}

typedef struct {
    lc_metrics_t *m;
    lc_metric_t *counter, *gauge, *hist;
} race_t;

static void *race_worker(void *arg)
{
    race_t *r = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        lc_metric_add(r->counter, 1);
        lc_metric_add(r->gauge, (i & 1) ? 2.5 : -1.5);
        lc_metric_observe(r->hist, (i % 4) * 0.5); /* 0, .5, 1, 1.5: exact in binary */
        /* Lazy lookups race with the updates and with each other. */
        if (i % 1000 == 0 && lc_metrics_counter(r->m, "race_total", "", "") != r->counter)
            return (void *)1;
    }
    return NULL;
}

static void test_concurrent_updates_sum_exactly(void)
{
    static const double bounds[] = {0.5, 1};
    race_t r = {.m = lc_metrics_new()};
    r.counter = lc_metrics_counter(r.m, "race_total", "", "");
    r.gauge = lc_metrics_gauge(r.m, "race_level", "", "");
    r.hist = lc_metrics_histogram(r.m, "race_seconds", "", "", bounds, 2);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        LC_ASSERT_OK(pthread_create(&t[i], NULL, race_worker, &r));
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        LC_CHECK(ret == NULL);
    }
    LC_CHECK(lc_metric_value(r.counter) == (double)THREADS * PER_THREAD);
    LC_CHECK(lc_metric_value(r.gauge) == (double)THREADS * PER_THREAD / 2);
    LC_CHECK(lc_metric_value(r.hist) == (double)THREADS * PER_THREAD / 4 * 3);

    char *text = render(r.m);
    LC_CHECK(strstr(text, "race_total 400000\n") != NULL);
    LC_CHECK(strstr(text, "race_seconds_bucket{le=\"0.5\"} 200000\n") != NULL);
    LC_CHECK(strstr(text, "race_seconds_bucket{le=\"1\"} 300000\n") != NULL);
    LC_CHECK(strstr(text, "race_seconds_bucket{le=\"+Inf\"} 400000\n") != NULL);
    LC_CHECK(strstr(text, "race_seconds_count 400000\n") != NULL);
    lc_free(text);
    lc_metrics_free(r.m);
}

/* A metric leaves the exposition when its last registration is released; the
 * others stay, in order, and the name can be registered anew from zero. */
static void test_release_removes_after_last_reference(void)
{
    lc_metrics_t *m = lc_metrics_new();
    lc_metric_t *a = lc_metrics_gauge(m, "ember_scrape_up", "Up.", "instance=\"a\"");
    lc_metric_t *b = lc_metrics_gauge(m, "ember_scrape_up", "Up.", "instance=\"b\"");
    lc_metric_t *c = lc_metrics_gauge(m, "ember_scrape_up", "Up.", "instance=\"c\"");
    lc_metric_t *b2 = lc_metrics_gauge(m, "ember_scrape_up", "Up.", "instance=\"b\"");
    LC_CHECK(b == b2);
    lc_metric_set(a, 1);
    lc_metric_set(b, 2);
    lc_metric_set(c, 3);

    lc_metrics_release(m, b); /* b2 still holds it */
    char *text = render(m);
    LC_CHECK(strstr(text, "ember_scrape_up{instance=\"b\"} 2\n") != NULL);
    lc_free(text);

    lc_metrics_release(m, b2);
    lc_metrics_release(m, c); /* the last of the family's list */
    text = render(m);
    LC_ASSERT_STR_EQ(text, "# HELP ember_scrape_up Up.\n# TYPE ember_scrape_up gauge\n"
                           "ember_scrape_up{instance=\"a\"} 1\n");
    lc_free(text);

    lc_metric_t *c2 = lc_metrics_gauge(m, "ember_scrape_up", "Up.", "instance=\"c\"");
    LC_CHECK(c2 != NULL);
    LC_CHECK(lc_metric_value(c2) == 0);
    lc_metric_set(c2, 5);
    lc_metrics_release(m, a); /* the first */
    lc_metrics_release(m, NULL);
    text = render(m);
    LC_ASSERT_STR_EQ(text, "# HELP ember_scrape_up Up.\n# TYPE ember_scrape_up gauge\n"
                           "ember_scrape_up{instance=\"c\"} 5\n");
    lc_free(text);
    lc_metrics_free(m);
}

LC_TEST_MAIN(test_render_golden, test_default_buckets, test_number_format, test_registration_rules,
             test_render_respects_cap, test_concurrent_updates_sum_exactly,
             test_release_removes_after_last_reference)
