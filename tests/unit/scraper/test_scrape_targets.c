/*
 * test_scrape_targets.c — from target groups to scrape targets
 * (services/scraper/src/targets.c): Parca's label rules (job, instance,
 * __scheme__, __param_*, __profile_path__, __name__, __meta_* removal), port
 * completion, URL building (params sorted as Go's url.Values.Encode,
 * __param_* overrides, seconds=N for delta profiles), relabeling that drops
 * or rewrites targets, the published series labels (service_name from the
 * label or the job) and de-duplication.
 */
#include "config.h"
#include "lc_test.h"
#include "targets.h"

static scr_config_t *parse(const char *yaml)
{
    scr_config_t *c = NULL;
    lc_status_t st = {0};
    if (scr_config_parse(yaml, strlen(yaml), "t.yaml", &c, &st) != 0)
        LC_FAIL_("config rejected: %s", st.msg);
    return c;
}

static void build(const scr_job_t *job, scr_target_set_t *set)
{
    const scr_group_t *lists[] = {job->static_groups};
    size_t counts[] = {job->n_static};
    scr_targets_build(job, lists, counts, 1, set);
}

static const scr_target_spec_t *find(const scr_target_set_t *set, const scr_job_t *job,
                                     const char *instance, const char *profile)
{
    for (size_t i = 0; i < set->n; i++) {
        const char *inst = lc_labels_get(&set->v[i].labels, "instance");
        if (inst && strcmp(inst, instance) == 0 &&
            strcmp(job->profiles[set->v[i].profile].name, profile) == 0)
            return &set->v[i];
    }
    return NULL;
}

static char *labels_str(const lc_labels_t *ls)
{
    static char buf[1024];
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ls->n && used < sizeof(buf); i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s=%s", i ? "," : "",
                                 ls->v[i].name, ls->v[i].value);
    return buf;
}

static void test_defaults_and_urls(void)
{
    scr_config_t *c = parse("scrape_configs:\n"
                            "  - job_name: api\n"
                            "    params: {debug: ['1'], x: [a, b]}\n"
                            "    static_configs:\n"
                            "      - targets: [host, 'h2:6060']\n"
                            "        labels: {env: prod, __param_x: 'z z', __meta_secret: s}\n");
    if (!c)
        return;
    const scr_job_t *job = &c->jobs[0];
    scr_target_set_t set;
    build(job, &set);
    LC_ASSERT_EQ(set.n, 10); /* 2 targets x 5 default profiles */
    LC_ASSERT_EQ(set.n_dropped, 0);
    const scr_target_spec_t *t = find(&set, job, "host:80", "memory");
    LC_CHECK(t != NULL);
    if (t) {
        LC_ASSERT_STR_EQ(t->url, "http://host:80/debug/pprof/allocs?debug=1&x=z+z&x=b");
        LC_ASSERT_STR_EQ(labels_str(&t->series),
                         "__name__=memory,env=prod,instance=host:80,job=api,service_name=api");
        LC_CHECK(lc_labels_get(&t->labels, "__meta_secret") == NULL);
        LC_ASSERT_STR_EQ(lc_labels_get(&t->discovered, "__meta_secret"), "s");
        LC_ASSERT_STR_EQ(lc_labels_get(&t->labels, "__profile_path__"), "/debug/pprof/allocs");
    }
    t = find(&set, job, "h2:6060", "process_cpu");
    LC_CHECK(t != NULL);
    if (t)
        LC_ASSERT_STR_EQ(t->url, "http://h2:6060/debug/pprof/profile?debug=1&seconds=10&x=z+z&x=b");
    /* Keys differ per target and profile, and are stable. */
    for (size_t i = 0; i < set.n; i++)
        for (size_t j = i + 1; j < set.n; j++)
            LC_CHECK(set.v[i].key != set.v[j].key);
    scr_target_set_t again;
    build(job, &again);
    LC_ASSERT_EQ(again.n, set.n);
    for (size_t i = 0; i < set.n && i < again.n; i++)
        LC_ASSERT_EQ(again.v[i].key, set.v[i].key);
    scr_target_set_fini(&again);
    scr_target_set_fini(&set);
    scr_config_free(c);
}

static void test_relabel_and_service_name(void)
{
    scr_config_t *c = parse(
        "scrape_configs:\n"
        "  - job_name: k\n"
        "    scheme: https\n"
        "    scrape_interval: 2s\n"
        "    profiling_config:\n"
        "      pprof_config:\n"
        "        fgprof: {enabled: true, path: /debug/fgprof, delta: true, seconds: 1}\n"
        "    static_configs:\n"
        "      - targets: ['10.0.0.1:8080', '10.0.0.2:8080', '::1', '[::2]']\n"
        "        labels: {__meta_app: checkout}\n"
        "    relabel_configs:\n"
        "      - {source_labels: [__name__], regex: 'memory|fgprof|process_cpu', action: keep}\n"
        "      - {source_labels: [__address__], regex: '10.0.0.2:.*', action: drop}\n"
        "      - {source_labels: [__meta_app], target_label: service_name}\n"
        "      - {source_labels: [__address__], regex: '(.*):8080', target_label: __address__,\n"
        "         replacement: '${1}:6060'}\n");
    if (!c)
        return;
    const scr_job_t *job = &c->jobs[0];
    scr_target_set_t set;
    build(job, &set);
    LC_ASSERT_EQ(set.n, 9); /* 3 kept targets x 3 kept profiles */
    LC_ASSERT_EQ(set.n_dropped_total, 4 * 6 - 9);
    const scr_target_spec_t *t = find(&set, job, "10.0.0.1:6060", "fgprof");
    LC_CHECK(t != NULL);
    if (t) {
        LC_ASSERT_STR_EQ(t->url, "https://10.0.0.1:6060/debug/fgprof?seconds=1");
        LC_ASSERT_STR_EQ(labels_str(&t->series),
                         "__name__=fgprof,instance=10.0.0.1:6060,job=k,service_name=checkout");
    }
    t = find(&set, job, "10.0.0.1:6060", "process_cpu");
    if (t)
        LC_ASSERT_STR_EQ(t->url, "https://10.0.0.1:6060/debug/pprof/profile?seconds=2");
    LC_CHECK(find(&set, job, "[::1]:443", "memory") != NULL);
    LC_CHECK(find(&set, job, "[::2]:443", "memory") != NULL);
    LC_CHECK(set.n_dropped > 0);
    LC_ASSERT_STR_EQ(set.dropped[0].reason, "relabeling");
    scr_target_set_fini(&set);
    scr_config_free(c);
}

static void test_invalid_after_relabel_and_dedupe(void)
{
    scr_config_t *c = parse(
        "scrape_configs:\n"
        "  - job_name: j\n"
        "    profiling_config: {pprof_config: {memory: {enabled: true}, block: {enabled: false},\n"
        "      goroutine: {enabled: false}, mutex: {enabled: false},\n"
        "      process_cpu: {enabled: false}}}\n"
        "    static_configs:\n"
        "      - targets: ['a:1', 'a:1', 'b/x', '']\n"
        "    relabel_configs:\n"
        "      - {source_labels: [job], target_label: team, replacement: blue}\n");
    if (!c)
        return;
    const scr_job_t *job = &c->jobs[0];
    scr_target_set_t set;
    build(job, &set);
    LC_ASSERT_EQ(set.n, 1); /* a:1 twice is one target */
    LC_ASSERT_EQ(set.n_dropped, 2);
    bool saw_slash = false, saw_empty = false;
    for (size_t i = 0; i < set.n_dropped; i++) {
        saw_slash = saw_slash || strstr(set.dropped[i].reason, "hostname") != NULL;
        saw_empty = saw_empty || strstr(set.dropped[i].reason, "no address") != NULL;
    }
    LC_CHECK(saw_slash);
    LC_CHECK(saw_empty);
    if (set.n)
        LC_ASSERT_STR_EQ(labels_str(&set.v[0].series),
                         "__name__=memory,instance=a:1,job=j,service_name=j,team=blue");
    scr_target_set_fini(&set);
    scr_config_free(c);
}

static void test_address_port(void)
{
    struct {
        const char *in, *scheme, *want;
    } t[] = {
        {"h", "http", "h:80"},           {"h:1", "http", "h:1"},
        {"h", "https", "h:443"},         {"::1", "http", "[::1]:80"},
        {"[::1]", "https", "[::1]:443"}, {"[::1]:9", "http", "[::1]:9"},
        {"h:x", "http", "h:x"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(t); i++) {
        char *got = scr_address_with_port(t[i].in, t[i].scheme);
        LC_ASSERT_STR_EQ(got, t[i].want);
        lc_free(got);
    }
}

LC_TEST_MAIN(test_defaults_and_urls, test_relabel_and_service_name,
             test_invalid_after_relabel_and_dedupe, test_address_port)
