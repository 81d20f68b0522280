/*
 * test_scrape_config.c — the parca.yaml scrape_configs parser
 * (services/scraper/src/config*.c): Parca's defaults (10s interval, timeout =
 * interval + 3s, the five default pprof profiles), the pprof_config merge
 * rules of parca.md §1.3, path_prefix joining, discovery defaults, and a table
 * of bad configs, each rejected with an error that names the job and field.
 */
#include "config.h"
#include "lc_test.h"

#define S SCR_NS_PER_S

static scr_config_t *parse_ok(const char *yaml)
{
    scr_config_t *c = NULL;
    lc_status_t st = {0};
    if (scr_config_parse(yaml, strlen(yaml), "test.yaml", &c, &st) != 0) {
        LC_FAIL_("config rejected: %s\n%s", st.msg, yaml);
        return NULL;
    }
    return c;
}

static const scr_profile_t *profile(const scr_job_t *job, const char *name)
{
    for (size_t i = 0; i < job->n_profiles; i++)
        if (strcmp(job->profiles[i].name, name) == 0)
            return &job->profiles[i];
    return NULL;
}

static void test_defaults(void)
{
    scr_config_t *c = parse_ok("scrape_configs:\n"
                               "  - job_name: api\n"
                               "    static_configs:\n"
                               "      - targets: ['127.0.0.1:6060', 'app:8080']\n"
                               "        labels: {env: prod}\n");
    if (!c)
        return;
    LC_ASSERT_EQ(c->n_jobs, 1);
    const scr_job_t *j = &c->jobs[0];
    LC_ASSERT_STR_EQ(j->name, "api");
    LC_ASSERT_EQ(j->interval_ns, 10 * S);
    LC_ASSERT_EQ(j->timeout_ns, 13 * S);
    LC_ASSERT_STR_EQ(j->scheme, "http");
    LC_ASSERT_EQ(j->n_profiles, 5);
    static const struct {
        const char *name, *path;
        bool delta, cumulative;
    } want[] = {
        {"memory", "/debug/pprof/allocs", false, true},
        {"block", "/debug/pprof/block", false, true},
        {"goroutine", "/debug/pprof/goroutine", false, false},
        {"mutex", "/debug/pprof/mutex", false, true},
        {"process_cpu", "/debug/pprof/profile", true, false},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(want); i++) {
        const scr_profile_t *p = profile(j, want[i].name);
        LC_CHECK(p != NULL);
        if (!p)
            continue;
        LC_ASSERT_STR_EQ(p->path, want[i].path);
        LC_CHECK(p->enabled);
        LC_ASSERT_EQ(p->delta, want[i].delta);
        LC_ASSERT_EQ(p->cumulative, want[i].cumulative);
    }
    LC_ASSERT_EQ(j->n_static, 1);
    LC_ASSERT_EQ(j->static_groups[0].n_targets, 2);
    LC_ASSERT_STR_EQ(lc_labels_get(&j->static_groups[0].targets[1], "__address__"), "app:8080");
    LC_ASSERT_STR_EQ(lc_labels_get(&j->static_groups[0].labels, "env"), "prod");
    scr_config_free(c);
}

static void test_profile_merge(void)
{
    scr_config_t *c = parse_ok("object_storage: {bucket: {type: FILESYSTEM, config: {directory: "
                               "./data}}}\n"
                               "scrape_configs:\n"
                               "  - job_name: merge\n"
                               "    scrape_interval: 15s\n"
                               "    scrape_timeout: 0s\n"
                               "    profiling_config:\n"
                               "      path_prefix: /prefix/\n"
                               "      pprof_config:\n"
                               "        memory: {path: /debug/pprof/heap}\n"
                               "        process_cpu: {enabled: true}\n"
                               "        mutex: {enabled: false}\n"
                               "        block: {delta: true, seconds: 5}\n"
                               "        fgprof: {enabled: true, path: /debug/fgprof, delta: true}\n"
                               "        custom_off: {path: /x}\n"
                               "        kept:\n"
                               "          enabled: true\n"
                               "          path: /debug/pprof/allocs\n"
                               "          keep_sample_type: [{type: alloc_space, unit: bytes}]\n");
    if (!c)
        return;
    const scr_job_t *j = &c->jobs[0];
    LC_ASSERT_EQ(j->timeout_ns, 18 * S); /* 0 becomes interval + 3s */
    LC_ASSERT_EQ(j->n_profiles, 8);
    const scr_profile_t *p = profile(j, "memory");
    LC_ASSERT_STR_EQ(p->path, "/prefix/debug/pprof/heap");
    LC_CHECK(p->enabled); /* a mentioned default without `enabled` stays on */
    LC_CHECK(p->cumulative);
    p = profile(j, "process_cpu");
    LC_CHECK(p->enabled);
    LC_CHECK(!p->delta); /* delta is not inherited (parca.md §1.3) */
    LC_ASSERT_STR_EQ(p->path, "/prefix/debug/pprof/profile");
    LC_CHECK(!profile(j, "mutex")->enabled);
    p = profile(j, "block");
    LC_CHECK(p->delta);
    LC_CHECK(!p->cumulative); /* ?seconds= makes the target compute the delta */
    LC_ASSERT_EQ(p->seconds, 5);
    LC_ASSERT_STR_EQ(profile(j, "goroutine")->path, "/prefix/debug/pprof/goroutine");
    p = profile(j, "fgprof");
    LC_CHECK(p->enabled);
    LC_CHECK(p->delta);
    LC_CHECK(!p->cumulative);
    LC_ASSERT_STR_EQ(p->path, "/prefix/debug/fgprof");
    LC_CHECK(!profile(j, "custom_off")->enabled); /* custom entries need enabled: true */
    p = profile(j, "kept");
    LC_ASSERT_EQ(p->n_keep, 1);
    LC_ASSERT_STR_EQ(p->keep[0].type, "alloc_space");
    LC_ASSERT_STR_EQ(p->keep[0].unit, "bytes");
    scr_config_free(c);
}

static void test_client_and_discovery(void)
{
    scr_config_t *c = parse_ok(
        "scrape_configs:\n"
        "  - job_name: full\n"
        "    scheme: https\n"
        "    params: {debug: ['1'], x: [a, b]}\n"
        "    basic_auth: {username: u, password_file: /run/pw}\n"
        "    tls_config: {ca_file: /ca.pem, insecure_skip_verify: true, min_version: TLS12,\n"
        "                 server_name: api.internal}\n"
        "    follow_redirects: true\n"
        "    relabel_configs:\n"
        "      - {source_labels: [__address__], target_label: host}\n"
        "    file_sd_configs:\n"
        "      - files: [/etc/targets/*.json, /etc/more.yml]\n"
        "    dns_sd_configs:\n"
        "      - names: [_pprof._tcp.example.org]\n"
        "      - {names: [api.example.org], type: A, port: 6060, refresh_interval: 1m}\n"
        "    kubernetes_sd_configs:\n"
        "      - role: pod\n"
        "        api_server: http://127.0.0.1:8001\n"
        "        bearer_token: t0k3n\n"
        "        namespaces: {names: [default, prod]}\n"
        "        selectors: [{role: pod, label: 'app=api', field: 'spec.nodeName=n1'}]\n"
        "  - job_name: bearer\n"
        "    bearer_token_file: /var/run/token\n"
        "    authorization: null\n");
    if (!c)
        return;
    const scr_job_t *j = &c->jobs[0];
    LC_ASSERT_STR_EQ(j->scheme, "https");
    LC_ASSERT_EQ(j->n_params, 2);
    LC_ASSERT_STR_EQ(j->params[1].values[1], "b");
    LC_CHECK(j->client.basic_auth);
    LC_ASSERT_STR_EQ(j->client.username, "u");
    LC_ASSERT_STR_EQ(j->client.password_file, "/run/pw");
    LC_ASSERT_EQ(j->client.min_tls, 12);
    LC_CHECK(j->client.insecure_skip_verify);
    LC_ASSERT_STR_EQ(j->client.server_name, "api.internal");
    LC_CHECK(j->client.follow_redirects);
    LC_ASSERT_EQ(j->relabel.n, 1);
    LC_ASSERT_EQ(j->n_file_sd, 1);
    LC_ASSERT_EQ(j->file_sd[0].n_files, 2);
    LC_ASSERT_EQ(j->file_sd[0].refresh_ns, 300 * S);
    LC_ASSERT_EQ(j->n_dns_sd, 2);
    LC_ASSERT_EQ(j->dns_sd[0].type, SCR_DNS_SRV);
    LC_ASSERT_EQ(j->dns_sd[0].refresh_ns, 30 * S);
    LC_ASSERT_EQ(j->dns_sd[1].type, SCR_DNS_A);
    LC_ASSERT_EQ(j->dns_sd[1].port, 6060);
    LC_ASSERT_EQ(j->dns_sd[1].refresh_ns, 60 * S);
    LC_CHECK(j->dns_sd[0].key != j->dns_sd[1].key);
    LC_ASSERT_EQ(j->n_kube_sd, 1);
    const scr_kube_sd_t *k = &j->kube_sd[0];
    LC_ASSERT_STR_EQ(k->api_server, "http://127.0.0.1:8001");
    LC_ASSERT_STR_EQ(k->client.credentials, "t0k3n");
    LC_ASSERT_EQ(k->n_namespaces, 2);
    LC_ASSERT_STR_EQ(k->label_selector, "app=api");
    LC_ASSERT_STR_EQ(k->field_selector, "spec.nodeName=n1");
    LC_ASSERT_STR_EQ(c->jobs[1].client.credentials_file, "/var/run/token");
    scr_config_free(c);

    /* The same discovery settings give the same key (kept across reloads). */
    const char *a = "scrape_configs: [{job_name: a, file_sd_configs: [{files: [/x.json]}]}]";
    const char *b = "scrape_configs: [{job_name: b, file_sd_configs: [{files: [/x.json]}]}]";
    scr_config_t *ca = parse_ok(a), *cb = parse_ok(b);
    if (ca && cb)
        LC_ASSERT_EQ(ca->jobs[0].file_sd[0].key, cb->jobs[0].file_sd[0].key);
    scr_config_free(ca);
    scr_config_free(cb);
}

static void test_empty_and_durations(void)
{
    scr_config_t *c = parse_ok("");
    if (c)
        LC_ASSERT_EQ(c->n_jobs, 0);
    scr_config_free(c);
    c = parse_ok("scrape_configs:\n");
    if (c)
        LC_ASSERT_EQ(c->n_jobs, 0);
    scr_config_free(c);

    struct {
        const char *s;
        int64_t ns;
    } ok[] = {{"0", 0},
              {"10s", 10 * S},
              {"1m30s", 90 * S},
              {"500ms", S / 2},
              {"1h", 3600 * S},
              {"2d", 2 * 86400 * S},
              {"1w", 7 * 86400 * S},
              {"1y", 365 * 86400 * S},
              {"1h1ms", 3600 * S + S / 1000}};
    for (size_t i = 0; i < LC_ARRAY_LEN(ok); i++) {
        int64_t ns = -1;
        LC_ASSERT_OK(scr_parse_duration(ok[i].s, &ns));
        LC_ASSERT_EQ(ns, ok[i].ns);
    }
    const char *bad[] = {
        "", "10", "s", "1.5s", "10S", "1s1m", "1s1s", "-1s", " 1s", "1s ", "99999999999999999999h"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        int64_t ns;
        lc_test_checks++;
        if (scr_parse_duration(bad[i], &ns) == 0)
            LC_FAIL_("duration \"%s\" accepted", bad[i]);
    }
    char buf[32];
    scr_format_duration(90 * S, buf, sizeof(buf));
    LC_ASSERT_STR_EQ(buf, "1m30s");
    scr_format_duration(S / 2, buf, sizeof(buf));
    LC_ASSERT_STR_EQ(buf, "500ms");
}

/* ---------------------------------------------------------------- bad configs */

typedef struct bad_s {
    const char *yaml;
    const char *needle1, *needle2; /* both must appear in the error */
} bad_t;

#define JOB(body) "scrape_configs:\n  - job_name: api\n" body
#define TARGETS "    static_configs: [{targets: ['h:1']}]\n"

static const bad_t bad[] = {
    {"scrape_configs:\n  - scrape_interval: 10s\n", "scrape_configs[0]", "job_name is empty"},
    {"scrape_configs:\n  - job_name: ''\n", "scrape_configs[0]", "job_name"},
    {"scrape_configs:\n  - job_name: a\n  - job_name: a\n", "job \"a\"", "multiple scrape configs"},
    {JOB("    scrape_interval: 10s\n    scrape_timeout: 10s\n"), "job \"api\"", "scrape_timeout"},
    {JOB("    scrape_interval: 10s\n    scrape_timeout: 5s\n"), "job \"api\"",
     "greater than the interval"},
    {JOB("    scrape_interval: 10\n"), "job \"api\"", "scrape_interval"},
    {JOB("    scrape_interval: 0s\n"), "job \"api\"", "scrape_interval"},
    {JOB("    scrape_timeout: soon\n"), "job \"api\"", "scrape_timeout"},
    {JOB("    scrape_interval: 1s\n    scrape_timeout: 1500ms\n"), "scrape_timeout", "process_cpu"},
    {JOB("    scheme: ftp\n"), "job \"api\"", "scheme"},
    {JOB("    scrape_intervall: 10s\n"), "job \"api\"", "scrape_intervall"},
    {"global: {scrape_interval: 10s}\n", "global", "unknown field"},
    {"scrape_configs: {job_name: a}\n", "scrape_configs", "list"},
    {"scrape_configs:\n  - null\n", "scrape_configs[0]", "null"},
    {"scrape_configs: [\n", "YAML", "line"},
    {JOB("    static_configs: [{targets: ['h:1/metrics']}]\n"), "static_configs",
     "not a valid hostname"},
    {JOB("    static_configs: [{targets: ['h:1'], labels: {'bad-name': x}}]\n"), "labels",
     "bad-name"},
    {JOB("    static_configs: [{targets: 'h:1'}]\n"), "job \"api\"", "targets"},
    {JOB("    static_configs: [{target: ['h:1']}]\n"), "job \"api\"", "static_configs.target"},
    {JOB("    basic_auth: {username: u, password: p}\n    bearer_token: t\n"), "job \"api\"",
     "at most one of basic_auth"},
    {JOB("    bearer_token: t\n    bearer_token_file: /f\n"), "bearer_token_file", "at most one"},
    {JOB("    bearer_token: t\n    authorization: {credentials: x}\n"), "authorization",
     "not compatible"},
    {JOB("    authorization: {type: Basic, credentials: x}\n"), "authorization", "basic_auth"},
    {JOB("    basic_auth: {username: u, password: p, password_file: /f}\n"), "basic_auth",
     "password"},
    {JOB("    basic_auth: {user: u}\n"), "job \"api\"", "basic_auth.user"},
    {JOB("    tls_config: {cert_file: /c.pem}\n"), "tls_config", "key"},
    {JOB("    tls_config: {min_version: TLS9}\n"), "min_version", "TLS9"},
    {JOB("    oauth2: {client_id: x}\n"), "job \"api\"", "oauth2"},
    {JOB("    consul_sd_configs: [{server: 'x:8500'}]\n"), "job \"api\"", "consul_sd_configs"},
    {JOB("    params: {debug: '1'}\n"), "job \"api\"", "params"},
    {JOB("    profiling_config: {pprof_config: {memory: {pth: /x}}}\n"), "job \"api\"",
     "pprof_config.memory.pth"},
    {JOB("    profiling_config: {pprof_config: {memory: {enabled: maybe}}}\n"), "job \"api\"",
     "enabled"},
    {JOB("    profiling_config: {pprof_config: {memory: {seconds: -1}}}\n"), "job \"api\"",
     "seconds"},
    {JOB("    profiling_config: {pprof_config: {fgprof: {enabled: true}}}\n"), "job \"api\"",
     "pprof_config.fgprof"},
    {JOB("    profiling_config: {pprof_config: {memory: {keep_sample_type: [{typ: x}]}}}\n"),
     "job \"api\"", "keep_sample_type"},
    {JOB("    profiling_config: {prefix: /x}\n"), "job \"api\"", "profiling_config.prefix"},
    {JOB("    relabel_configs: [{action: hashmod, target_label: x}]\n"), "job \"api\"",
     "relabel_configs[0]: modulus"},
    {JOB("    relabel_configs: [null]\n"), "job \"api\"", "relabel_configs[0]"},
    {JOB("    file_sd_configs: [{files: []}]\n"), "job \"api\"", "file_sd_configs.files"},
    {JOB("    file_sd_configs: [{files: [/etc/targets.txt]}]\n"), "job \"api\"",
     "file_sd_configs.files"},
    {JOB("    file_sd_configs: [{files: [/etc/*/t.json]}]\n"), "job \"api\"",
     "file_sd_configs.files"},
    {JOB("    file_sd_configs: [{files: [/t.json], refresh_interval: 0}]\n"), "job \"api\"",
     "refresh_interval"},
    {JOB("    dns_sd_configs: [{names: [a.example], type: A}]\n"), "job \"api\"",
     "dns_sd_configs.port"},
    {JOB("    dns_sd_configs: [{names: [a.example], type: TXT}]\n"), "job \"api\"",
     "dns_sd_configs.type"},
    {JOB("    dns_sd_configs: [{type: SRV}]\n"), "job \"api\"", "dns_sd_configs.names"},
    {JOB("    kubernetes_sd_configs: [{api_server: 'http://x'}]\n"), "job \"api\"",
     "kubernetes_sd_configs.role"},
    {JOB("    kubernetes_sd_configs: [{role: service}]\n"), "job \"api\"", "only pod"},
    {JOB("    kubernetes_sd_configs: [{role: pod, kubeconfig_file: /k}]\n"), "job \"api\"",
     "kubeconfig_file"},
    {JOB("    kubernetes_sd_configs: [{role: pod, selectors: [{role: node, label: a=b}]}]\n"),
     "job \"api\"", "selectors"},
    {JOB("    kubernetes_sd_configs: [{role: pod, api_server: 'ftp://x'}]\n"), "job \"api\"",
     "api_server"},
    {JOB("    kubernetes_sd_configs: [{role: pod, namespaces: {name: [a]}}]\n"), "job \"api\"",
     "namespaces.name"},
    {JOB("    kubernetes_sd_configs: [{role: pod, bearer_token: a, bearer_token_file: b}]\n"),
     "job \"api\"", "bearer_token_file"},
    {JOB(TARGETS "    normalized_addresses: perhaps\n"), "job \"api\"", "normalized_addresses"},
    {"scrape_configs: []\nscrape_configs: []\n", "scrape_configs", "set twice"},
    {JOB("    scrape_interval: 1s\n    scrape_interval: 2s\n"), "job \"api\"", "set twice"},
};

static void test_bad_configs(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        scr_config_t *c = NULL;
        lc_status_t st = {0};
        int rc = scr_config_parse(bad[i].yaml, strlen(bad[i].yaml), "bad.yaml", &c, &st);
        lc_test_checks++;
        if (rc == 0) {
            LC_FAIL_("bad config %zu accepted:\n%s", i, bad[i].yaml);
            scr_config_free(c);
            continue;
        }
        if (!strstr(st.msg, bad[i].needle1) || !strstr(st.msg, bad[i].needle2))
            LC_FAIL_("bad config %zu: error \"%s\" lacks \"%s\" or \"%s\"", i, st.msg,
                     bad[i].needle1, bad[i].needle2);
        if (!strstr(st.msg, "bad.yaml"))
            LC_FAIL_("bad config %zu: error \"%s\" does not name the file", i, st.msg);
        LC_CHECK(c == NULL);
    }
}

/* Aliases are resolved into shared nodes: a "billion laughs" document must be
 * refused by the visit cap instead of being walked for ever. */
static void test_alias_bomb(void)
{
    const char *yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "scrape_configs:\n"
                       "  - job_name: bomb\n"
                       "    static_configs: [{targets: *f}]\n";
    scr_config_t *c = NULL;
    lc_status_t st = {0};
    int rc = scr_config_parse(yaml, strlen(yaml), "bomb.yaml", &c, &st);
    LC_CHECK(rc != 0); /* "a" is an unknown top-level key, or the cap trips first */
    scr_config_free(c);
    const char *yaml2 = "scrape_configs:\n"
                        "  - job_name: bomb\n"
                        "    params: {a: &a [x, x, x, x, x, x, x, x, x, x]}\n"
                        "    static_configs:\n"
                        "      - targets: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                        "        labels: {}\n";
    rc = scr_config_parse(yaml2, strlen(yaml2), "bomb.yaml", &c, &st);
    LC_CHECK(rc != 0); /* a list inside a list is not a string */
    scr_config_free(c);
}

LC_TEST_MAIN(test_defaults, test_profile_merge, test_client_and_discovery, test_empty_and_durations,
             test_bad_configs, test_alias_bomb)
