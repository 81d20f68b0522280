/*
 * test_scrape_sd.c — the discoverers' pure parts and the file discoverer on a
 * real loop:
 *   file_sd: JSON and YAML target group files, errors naming the file; the
 *     discoverer re-reads a file when it changes (atomic rename), follows a
 *     glob as files appear and disappear, and keeps a file's last good
 *     targets when it stops parsing;
 *   dns_sd: SRV/MX/NS answers (a DNS response built byte by byte) with
 *     Prometheus's __meta_dns_* labels, and A lookups of "localhost";
 *   kubernetes_sd: a Pod object in the API's JSON shape becomes one target
 *     per container port (or per port-less container, init containers too)
 *     with Prometheus's __meta_kubernetes_pod_* labels; a pod without an IP
 *     has no targets.
 */
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lc_test.h"
#include "scraper_int.h"

static void free_groups(scr_group_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        scr_group_fini(&g[i]);
    lc_free(g);
}

/* ---------------------------------------------------------------- file_sd parsing */

static void test_file_sd_parse(void)
{
    const char *json = "[{\"targets\": [\"10.0.0.1:6060\", \"10.0.0.2:6060\"],"
                       "  \"labels\": {\"env\": \"prod\", \"team\": \"a\"}},"
                       " {\"targets\": [\"10.0.0.3:6060\"]}]";
    scr_group_t *g;
    size_t n;
    lc_status_t st = {0};
    LC_ASSERT_OK(scr_file_sd_parse("/sd/a.json", json, strlen(json), &g, &n, &st));
    LC_ASSERT_EQ(n, 2);
    LC_ASSERT_EQ(g[0].n_targets, 2);
    LC_ASSERT_STR_EQ(lc_labels_get(&g[0].targets[1], "__address__"), "10.0.0.2:6060");
    LC_ASSERT_STR_EQ(lc_labels_get(&g[0].labels, "env"), "prod");
    LC_ASSERT_STR_EQ(g[0].source, "/sd/a.json:0");
    LC_ASSERT_STR_EQ(g[1].source, "/sd/a.json:1");
    free_groups(g, n);

    const char *yaml = "- targets: ['h:1']\n  labels:\n    zone: z1\n";
    LC_ASSERT_OK(scr_file_sd_parse("/sd/b.yml", yaml, strlen(yaml), &g, &n, &st));
    LC_ASSERT_EQ(n, 1);
    LC_ASSERT_STR_EQ(lc_labels_get(&g[0].labels, "zone"), "z1");
    free_groups(g, n);

    LC_ASSERT_OK(scr_file_sd_parse("/sd/empty.json", "[]", 2, &g, &n, &st));
    LC_ASSERT_EQ(n, 0);
    free_groups(g, n);

    struct {
        const char *text, *needle;
    } bad[] = {
        {"[{\"targets\": \"h:1\"}]", "targets"},
        {"[{\"targets\": [\"h:1\"], \"labels\": {\"a-b\": \"x\"}}]", "a-b"},
        {"[{\"targets\": [\"h:1\"], \"lables\": {}}]", "lables"},
        {"{\"targets\": [\"h:1\"]}", "list"},
        {"[{\"targets\": [\"h:1\"", "parse error"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        lc_test_checks++;
        if (scr_file_sd_parse("/sd/bad.json", bad[i].text, strlen(bad[i].text), &g, &n, &st) == 0) {
            LC_FAIL_("bad file %zu accepted", i);
            free_groups(g, n);
            continue;
        }
        LC_CHECK(strstr(st.msg, bad[i].needle) != NULL);
        LC_CHECK(strstr(st.msg, "/sd/bad.json") != NULL);
    }
}

/* ---------------------------------------------------------------- file_sd on a loop */

typedef struct file_world_s {
    uv_loop_t loop;
    uv_timer_t timer;
    scr_disc_t *d;
    char dir[64];
    int step, changes;
    char seen[8][128]; /* addresses (sorted, joined) after each step */
} file_world_t;

static void put(const file_world_t *w, const char *name, const char *text)
{
    char path[128], tmp[140];
    snprintf(path, sizeof(path), "%s/%s", w->dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static int addr_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snapshot(file_world_t *w, char *out, size_t len)
{
    const char *addrs[32];
    size_t n = 0;
    for (size_t g = 0; g < w->d->n_groups; g++)
        for (size_t t = 0; t < w->d->groups[g].n_targets && n < 32; t++)
            addrs[n++] = lc_labels_get(&w->d->groups[g].targets[t], "__address__");
    qsort(addrs, n, sizeof(*addrs), addr_cmp);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? "," : "", addrs[i]);
}

static void on_change(scr_disc_t *d, void *data)
{
    LC_UNUSED(d);
    ((file_world_t *)data)->changes++;
}

static void file_step(uv_timer_t *t)
{
    file_world_t *w = t->data;
    snapshot(w, w->seen[w->step], sizeof(w->seen[0]));
    switch (w->step++) {
    case 0:
        put(w, "a.json", "[{\"targets\": [\"a:2\"]}]");
        break; /* changed */
    case 1:
        put(w, "b.json", "[{\"targets\": [\"b:1\"]}]");
        break; /* a new file */
    case 2:
        put(w, "a.json", "[{\"targets\": [\"a:3\"");
        break; /* broken */
    case 3: {  /* removed */
        char path[128];
        snprintf(path, sizeof(path), "%s/b.json", w->dir);
        unlink(path);
        break;
    }
    default:
        w->d->close(w->d);
        uv_close((uv_handle_t *)t, NULL);
        return;
    }
    uv_timer_start(t, file_step, 1600, 0);
}

static void test_file_sd_discoverer(void)
{
    static file_world_t w;
    snprintf(w.dir, sizeof(w.dir), "/tmp/scr-fsd-%d", (int)getpid());
    mkdir(w.dir, 0700);
    put(&w, "a.json", "[{\"targets\": [\"a:1\"]}]");
    put(&w, "ignored.txt", "[{\"targets\": [\"x:1\"]}]");
    uv_loop_init(&w.loop);
    char pattern[96];
    snprintf(pattern, sizeof(pattern), "%s/*.json", w.dir);
    char *files[] = {pattern};
    scr_file_sd_t cfg = {.files = files, .n_files = 1, .refresh_ns = 300 * SCR_NS_PER_S};
    LC_ASSERT_OK(scr_disc_file_new(&w.loop, &cfg, &w.d));
    w.d->changed = on_change;
    w.d->data = &w;
    uv_timer_init(&w.loop, &w.timer);
    w.timer.data = &w;
    uv_timer_start(&w.timer, file_step, 600, 0);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&w.loop));
    LC_ASSERT_STR_EQ(w.seen[0], "a:1");
    LC_ASSERT_STR_EQ(w.seen[1], "a:2");
    LC_ASSERT_STR_EQ(w.seen[2], "a:2,b:1");
    LC_ASSERT_STR_EQ(w.seen[3], "a:2,b:1"); /* a.json broken: its last targets stay */
    LC_ASSERT_STR_EQ(w.seen[4], "a:2");
    LC_CHECK(w.changes >= 4);
    char path[128];
    snprintf(path, sizeof(path), "%s/a.json", w.dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/ignored.txt", w.dir);
    unlink(path);
    rmdir(w.dir);
}

/* ---------------------------------------------------------------- dns */

static size_t put_name(uint8_t *p, const char *name)
{
    size_t n = 0;
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t len = dot ? (size_t)(dot - name) : strlen(name);
        p[n++] = (uint8_t)len;
        memcpy(p + n, name, len);
        n += len;
        name += len + (dot ? 1 : 0);
    }
    p[n++] = 0;
    return n;
}

/* A response with one question and the given SRV answers (type 33). */
static size_t srv_response(uint8_t *buf, const char *qname, const char *const *targets,
                           const int *ports, size_t n)
{
    size_t len = 0;
    const uint8_t header[12] = {0x12, 0x34, 0x81, 0x80, 0, 1, 0, (uint8_t)n, 0, 0, 0, 0};
    memcpy(buf, header, 12);
    len = 12;
    len += put_name(buf + len, qname);
    const uint8_t q[4] = {0, 33, 0, 1};
    memcpy(buf + len, q, 4);
    len += 4;
    for (size_t i = 0; i < n; i++) {
        buf[len++] = 0xc0; /* pointer to the question name */
        buf[len++] = 12;
        const uint8_t rr[8] = {0, 33, 0, 1, 0, 0, 0, 60};
        memcpy(buf + len, rr, 8);
        len += 8;
        uint8_t rdata[300];
        size_t rd = 0;
        rdata[rd++] = 0, rdata[rd++] = 10; /* priority */
        rdata[rd++] = 0, rdata[rd++] = 5;  /* weight */
        rdata[rd++] = (uint8_t)(ports[i] >> 8), rdata[rd++] = (uint8_t)ports[i];
        rd += put_name(rdata + rd, targets[i]);
        buf[len++] = (uint8_t)(rd >> 8);
        buf[len++] = (uint8_t)rd;
        memcpy(buf + len, rdata, rd);
        len += rd;
    }
    return len;
}

static void test_dns_srv_answer(void)
{
    uint8_t buf[1024];
    const char *targets[] = {"pod-a.svc.cluster.local", "pod-b.svc.cluster.local"};
    const int ports[] = {6060, 7070};
    size_t len = srv_response(buf, "_pprof._tcp.svc.cluster.local", targets, ports, 2);
    scr_group_t g = {0};
    LC_ASSERT_OK(scr_dns_parse_answer(buf, len, SCR_DNS_SRV, 0, &g));
    LC_ASSERT_EQ(g.n_targets, 2);
    if (g.n_targets == 2) {
        LC_ASSERT_STR_EQ(lc_labels_get(&g.targets[0], "__address__"),
                         "pod-a.svc.cluster.local:6060");
        LC_ASSERT_STR_EQ(lc_labels_get(&g.targets[1], "__meta_dns_srv_record_target"),
                         "pod-b.svc.cluster.local");
        LC_ASSERT_STR_EQ(lc_labels_get(&g.targets[1], "__meta_dns_srv_record_port"), "7070");
    }
    scr_group_fini(&g);
    LC_CHECK(scr_dns_parse_answer(buf, 20, SCR_DNS_SRV, 0, &g) != 0); /* truncated */
    scr_group_fini(&g);
}

typedef struct dns_world_s {
    uv_loop_t loop;
    uv_timer_t timer;
    scr_disc_t *d;
    char seen[256];
} dns_world_t;

static void dns_changed(scr_disc_t *d, void *data)
{
    dns_world_t *w = data;
    for (size_t i = 0; i < d->n_groups && !w->seen[0]; i++) {
        const scr_group_t *g = &d->groups[i];
        snprintf(w->seen, sizeof(w->seen), "%s %s %s", g->source,
                 lc_labels_get(&g->labels, "__meta_dns_name"),
                 g->n_targets ? lc_labels_get(&g->targets[0], "__address__") : "-");
    }
    d->close(d);
    uv_close((uv_handle_t *)&w->timer, NULL);
}

static void dns_timeout(uv_timer_t *t)
{
    dns_world_t *w = t->data;
    w->d->close(w->d);
    uv_close((uv_handle_t *)t, NULL);
}

static void test_dns_a_localhost(void)
{
    static dns_world_t w;
    uv_loop_init(&w.loop);
    char *names[] = {"localhost"};
    scr_dns_sd_t cfg = {.names = names,
                        .n_names = 1,
                        .type = SCR_DNS_A,
                        .port = 9100,
                        .refresh_ns = 30 * SCR_NS_PER_S};
    LC_ASSERT_OK(scr_disc_dns_new(&w.loop, &cfg, &w.d));
    w.d->changed = dns_changed;
    w.d->data = &w;
    uv_timer_init(&w.loop, &w.timer);
    w.timer.data = &w;
    uv_timer_start(&w.timer, dns_timeout, 10000, 0);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&w.loop));
    LC_ASSERT_STR_EQ(w.seen, "localhost localhost 127.0.0.1:9100");
}

/* ---------------------------------------------------------------- kubernetes */

static const char *POD =
    "{\"metadata\": {\"name\": \"api-7f9\", \"namespace\": \"prod\", \"uid\": \"u-1\","
    "  \"resourceVersion\": \"42\","
    "  \"labels\": {\"app\": \"api\", \"app.kubernetes.io/name\": \"api\"},"
    "  \"annotations\": {\"pyroscope.io/scrape\": \"true\"},"
    "  \"ownerReferences\": [{\"kind\": \"ReplicaSet\", \"name\": \"api-7f\", \"controller\": "
    "true}]},"
    " \"spec\": {\"nodeName\": \"node-1\","
    "  \"containers\": ["
    "   {\"name\": \"app\", \"image\": \"api:1\", \"ports\": ["
    "     {\"name\": \"http\", \"containerPort\": 8080, \"protocol\": \"TCP\"},"
    "     {\"name\": \"pprof\", \"containerPort\": 6060}]},"
    "   {\"name\": \"sidecar\", \"image\": \"envoy:1\"}],"
    "  \"initContainers\": [{\"name\": \"init\", \"image\": \"busybox\"}]},"
    " \"status\": {\"phase\": \"Running\", \"podIP\": \"10.1.2.3\", \"hostIP\": \"192.168.0.9\","
    "  \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}],"
    "  \"containerStatuses\": [{\"name\": \"app\", \"containerID\": \"containerd://abc\"}]}}";

static const lc_labels_t *target_by_addr(const scr_group_t *g, const char *addr,
                                         const char *container)
{
    for (size_t i = 0; i < g->n_targets; i++)
        if (strcmp(lc_labels_get(&g->targets[i], "__address__"), addr) == 0 &&
            strcmp(lc_labels_get(&g->targets[i], "__meta_kubernetes_pod_container_name"),
                   container) == 0)
            return &g->targets[i];
    return NULL;
}

static void test_kube_pod_group(void)
{
    json_error_t err;
    json_t *pod = json_loads(POD, 0, &err);
    LC_CHECK(pod != NULL);
    scr_group_t g;
    scr_kube_pod_group(pod, &g);
    LC_ASSERT_STR_EQ(g.source, "pod/prod/api-7f9");
    LC_ASSERT_EQ(g.n_targets, 4);
    const lc_labels_t *l = &g.labels;
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_namespace"), "prod");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_name"), "api-7f9");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_ip"), "10.1.2.3");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_ready"), "true");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_phase"), "Running");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_node_name"), "node-1");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_host_ip"), "192.168.0.9");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_uid"), "u-1");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_label_app"), "api");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_label_app_kubernetes_io_name"), "api");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_labelpresent_app"), "true");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_annotation_pyroscope_io_scrape"),
                     "true");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_controller_kind"), "ReplicaSet");
    LC_ASSERT_STR_EQ(lc_labels_get(l, "__meta_kubernetes_pod_controller_name"), "api-7f");
    const lc_labels_t *t = target_by_addr(&g, "10.1.2.3:6060", "app");
    LC_CHECK(t != NULL);
    if (t) {
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_port_name"), "pprof");
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_port_number"), "6060");
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_port_protocol"), "TCP");
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_id"),
                         "containerd://abc");
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_init"), "false");
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_image"), "api:1");
    }
    LC_CHECK(target_by_addr(&g, "10.1.2.3:8080", "app") != NULL);
    LC_CHECK(target_by_addr(&g, "10.1.2.3", "sidecar") != NULL);
    t = target_by_addr(&g, "10.1.2.3", "init");
    LC_CHECK(t != NULL);
    if (t)
        LC_ASSERT_STR_EQ(lc_labels_get(t, "__meta_kubernetes_pod_container_init"), "true");
    scr_group_fini(&g);

    /* Not started yet: no IP, no targets (the group still names the pod). */
    json_object_set_new(json_object_get(pod, "status"), "podIP", json_string(""));
    scr_kube_pod_group(pod, &g);
    LC_ASSERT_EQ(g.n_targets, 0);
    LC_ASSERT_STR_EQ(g.source, "pod/prod/api-7f9");
    scr_group_fini(&g);
    json_decref(pod);
}

LC_TEST_MAIN(test_file_sd_parse, test_file_sd_discoverer, test_dns_srv_answer, test_dns_a_localhost,
             test_kube_pod_group)
