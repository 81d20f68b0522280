/*
 * sd_kube.c — kubernetes_sd_configs with role `pod`: list the pods, then
 * watch them, against the API server (given, or the in-cluster service
 * account), per namespace, with label and field selectors. Targets and
 * __meta_kubernetes_pod_* labels follow Prometheus's pod role: one target per
 * container port (podIP:port), or one per container without ports (podIP);
 * init containers too; pods without an IP have no targets.
 *
 * Per namespace (or once for all namespaces) the state machine is
 *   LIST (GET .../pods) -> WATCH (GET ...?watch=1&resourceVersion=RV, one
 *   JSON event per line) -> WATCH again when the server ends the stream,
 *   or back to LIST after an error / 410 Gone, with exponential backoff.
 * The list body is parsed on the thread pool (it can be large); watch events
 * are small and parsed on the loop as they stream in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "scraper_int.h"

#define KUBE_MAX_LIST_BYTES ((size_t)256 << 20)
#define KUBE_MAX_EVENT_BYTES ((size_t)16 << 20)
#define KUBE_LIST_TIMEOUT_NS (60 * SCR_NS_PER_S)
#define KUBE_WATCH_TIMEOUT_S 300 /* the server ends the watch after this */
#define KUBE_BACKOFF_MIN_MS 1000
#define KUBE_BACKOFF_MAX_MS 30000
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct kube_disc_s kube_disc_t;

typedef enum { NS_IDLE, NS_LISTING, NS_PARSING, NS_WATCHING, NS_BACKOFF } ns_state_t;

typedef struct kube_ns_s {
    kube_disc_t *kd;
    char *ns; /* NULL = every namespace */
    ns_state_t state;
    scr_http_req_t *req;
    char *rv;      /* resourceVersion to watch from */
    lc_buf_t line; /* a watch event not complete yet */
    bool relist;   /* the stream asked for a new list (410 Gone) */
    uv_timer_t retry;
    uint64_t backoff_ms;
    uv_work_t work;
    lc_buf_t list_body;  /* owned by the parse work */
    scr_group_t *parsed; /* results of the parse work */
    size_t n_parsed;
    char *parsed_rv;
    char parse_error[SCR_ERROR_MAX];
} kube_ns_t;

struct kube_disc_s {
    scr_disc_t d;
    uv_loop_t *loop;
    scr_http_t *http;
    char *api; /* base URL without a trailing '/' */
    scr_client_t client;
    char *label_selector, *field_selector;
    kube_ns_t *ns;
    size_t n_ns;
    bool closing;
    int pending; /* retry timers and parse works still open */
};

/* ---------------------------------------------------------------- pods -> groups */

static const char *jstr(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* Prometheus's strutil.SanitizeLabelName: invalid characters become '_'. */
static void sanitized(const char *prefix, const char *name, char *out, size_t len)
{
    size_t used = (size_t)snprintf(out, len, "%s", prefix);
    for (const char *p = name; *p && used + 1 < len; p++) {
        char c = *p;
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        out[used++] = ok ? c : '_';
    }
    out[used] = '\0';
}

static void map_labels(lc_labels_t *ls, json_t *map, const char *value_prefix,
                       const char *present_prefix)
{
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v)
    {
        char name[512];
        sanitized(value_prefix, key, name, sizeof(name));
        lc_labels_set(ls, name, json_string_value(v) ? json_string_value(v) : "");
        sanitized(present_prefix, key, name, sizeof(name));
        lc_labels_set(ls, name, "true");
    }
}

static const char *pod_ready(json_t *status)
{
    json_t *conds = json_object_get(status, "conditions");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        if (strcmp(jstr(c, "type"), "Ready") == 0) {
            const char *s = jstr(c, "status");
            return strcmp(s, "True") == 0 ? "true" : strcmp(s, "False") == 0 ? "false" : "unknown";
        }
    }
    return "unknown";
}

static void pod_labels(json_t *pod, lc_labels_t *ls)
{
    json_t *meta = json_object_get(pod, "metadata");
    json_t *spec = json_object_get(pod, "spec");
    json_t *status = json_object_get(pod, "status");
    lc_labels_set(ls, "__meta_kubernetes_namespace", jstr(meta, "namespace"));
    lc_labels_set(ls, "__meta_kubernetes_pod_name", jstr(meta, "name"));
    lc_labels_set(ls, "__meta_kubernetes_pod_ip", jstr(status, "podIP"));
    lc_labels_set(ls, "__meta_kubernetes_pod_ready", pod_ready(status));
    lc_labels_set(ls, "__meta_kubernetes_pod_phase", jstr(status, "phase"));
    lc_labels_set(ls, "__meta_kubernetes_pod_node_name", jstr(spec, "nodeName"));
    lc_labels_set(ls, "__meta_kubernetes_pod_host_ip", jstr(status, "hostIP"));
    lc_labels_set(ls, "__meta_kubernetes_pod_uid", jstr(meta, "uid"));
    map_labels(ls, json_object_get(meta, "labels"), "__meta_kubernetes_pod_label_",
               "__meta_kubernetes_pod_labelpresent_");
    map_labels(ls, json_object_get(meta, "annotations"), "__meta_kubernetes_pod_annotation_",
               "__meta_kubernetes_pod_annotationpresent_");
    size_t i;
    json_t *owner;
    json_array_foreach(json_object_get(meta, "ownerReferences"), i, owner)
    {
        if (json_is_true(json_object_get(owner, "controller"))) {
            lc_labels_set(ls, "__meta_kubernetes_pod_controller_kind", jstr(owner, "kind"));
            lc_labels_set(ls, "__meta_kubernetes_pod_controller_name", jstr(owner, "name"));
        }
    }
}

static const char *container_id(json_t *status, const char *name, bool init)
{
    size_t i;
    json_t *cs;
    json_array_foreach(
        json_object_get(status, init ? "initContainerStatuses" : "containerStatuses"), i, cs)
    {
        if (strcmp(jstr(cs, "name"), name) == 0)
            return jstr(cs, "containerID");
    }
    return "";
}

static lc_labels_t *scr_add_target(scr_group_t *g, const char *addr)
{
    g->targets = lc_xrealloc(g->targets, (g->n_targets + 1) * sizeof(*g->targets));
    lc_labels_t *t = &g->targets[g->n_targets++];
    lc_labels_init(t);
    lc_labels_add(t, "__address__", addr);
    return t;
}

static void container_targets(scr_group_t *g, json_t *c, json_t *status, const char *ip, bool init)
{
    const char *name = jstr(c, "name");
    json_t *ports = json_object_get(c, "ports");
    bool v6 = strchr(ip, ':') != NULL;
    size_t n_ports = json_array_size(ports);
    for (size_t i = 0; i < (n_ports ? n_ports : 1); i++) {
        json_t *port = n_ports ? json_array_get(ports, i) : NULL;
        char addr[256], num[24];
        json_int_t number = json_integer_value(json_object_get(port, "containerPort"));
        snprintf(num, sizeof(num), "%lld", (long long)number);
        if (port)
            snprintf(addr, sizeof(addr), v6 ? "[%s]:%s" : "%s:%s", ip, num);
        else
            snprintf(addr, sizeof(addr), "%s", ip);
        lc_labels_t *t = scr_add_target(g, addr);
        lc_labels_add(t, "__meta_kubernetes_pod_container_name", name);
        lc_labels_add(t, "__meta_kubernetes_pod_container_image", jstr(c, "image"));
        lc_labels_add(t, "__meta_kubernetes_pod_container_init", init ? "true" : "false");
        lc_labels_add(t, "__meta_kubernetes_pod_container_id", container_id(status, name, init));
        if (port) {
            lc_labels_add(t, "__meta_kubernetes_pod_container_port_name", jstr(port, "name"));
            lc_labels_add(t, "__meta_kubernetes_pod_container_port_number", num);
            const char *proto = jstr(port, "protocol");
            lc_labels_add(t, "__meta_kubernetes_pod_container_port_protocol",
                          proto[0] ? proto : "TCP");
        }
    }
}

void scr_kube_pod_group(json_t *pod, scr_group_t *g)
{
    memset(g, 0, sizeof(*g));
    json_t *meta = json_object_get(pod, "metadata");
    char source[512];
    snprintf(source, sizeof(source), "pod/%s/%s", jstr(meta, "namespace"), jstr(meta, "name"));
    g->source = lc_xstrdup(source);
    lc_labels_init(&g->labels);
    pod_labels(pod, &g->labels);
    json_t *status = json_object_get(pod, "status");
    const char *ip = jstr(status, "podIP");
    if (!ip[0])
        return; /* not scheduled or not started yet */
    json_t *spec = json_object_get(pod, "spec");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
        container_targets(g, c, status, ip, false);
    json_array_foreach(json_object_get(spec, "initContainers"), i, c)
        container_targets(g, c, status, ip, true);
}

/* ---------------------------------------------------------------- URLs */

static int append_param(lc_buf_t *b, const char *name, const char *value, bool *first)
{
    char *esc = curl_easy_escape(NULL, value, 0);
    int rc = lc_buf_printf(b, "%c%s=%s", *first ? '?' : '&', name, esc ? esc : "");
    curl_free(esc);
    *first = false;
    return rc;
}

static char *pods_url(const kube_ns_t *n, bool watch)
{
    const kube_disc_t *kd = n->kd;
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    int rc = n->ns ? lc_buf_printf(&b, "%s/api/v1/namespaces/%s/pods", kd->api, n->ns)
                   : lc_buf_printf(&b, "%s/api/v1/pods", kd->api);
    bool first = true;
    if (!rc && kd->label_selector)
        rc = append_param(&b, "labelSelector", kd->label_selector, &first);
    if (!rc && kd->field_selector)
        rc = append_param(&b, "fieldSelector", kd->field_selector, &first);
    if (!rc && watch) {
        rc = append_param(&b, "watch", "1", &first);
        if (!rc)
            rc = append_param(&b, "allowWatchBookmarks", "true", &first);
        if (!rc && n->rv)
            rc = append_param(&b, "resourceVersion", n->rv, &first);
        if (!rc)
            rc = lc_buf_printf(&b, "&timeoutSeconds=%d", KUBE_WATCH_TIMEOUT_S);
    }
    if (!rc)
        rc = lc_buf_putc(&b, '\0');
    size_t len;
    return rc ? NULL : (char *)lc_buf_steal(&b, &len);
}

/* ---------------------------------------------------------------- groups per namespace */

static bool source_in_ns(const char *source, const char *ns)
{
    if (!ns)
        return true;
    size_t len = strlen(ns);
    return strncmp(source, "pod/", 4) == 0 && strncmp(source + 4, ns, len) == 0 &&
           source[4 + len] == '/';
}

/* Replaces every group of the namespace with the listed ones. */
static void replace_ns_groups(kube_ns_t *n, scr_group_t *groups, size_t count)
{
    scr_disc_t *d = &n->kd->d;
    size_t kept = 0;
    for (size_t i = 0; i < d->n_groups; i++) {
        if (source_in_ns(d->groups[i].source, n->ns))
            scr_group_fini(&d->groups[i]);
        else
            d->groups[kept++] = d->groups[i];
    }
    d->n_groups = kept;
    for (size_t i = 0; i < count; i++)
        scr_disc_upsert(d, &groups[i]);
    lc_free(groups);
}

/* ---------------------------------------------------------------- state machine */

/* The last step of a close: the namespace states were kept for the handles
 * and parses still running. */
static void kube_free(kube_disc_t *kd)
{
    lc_free(kd->ns);
    lc_free(kd);
}

static void ns_list(kube_ns_t *n);
static void ns_watch(kube_ns_t *n);

static void ns_on_retry(uv_timer_t *t)
{
    kube_ns_t *n = t->data;
    if (!n->kd->closing)
        ns_list(n);
}

static void ns_backoff(kube_ns_t *n, const char *what, const char *why)
{
    scr_disc_error(&n->kd->d, "kubernetes %s (namespace %s): %s", what, n->ns ? n->ns : "*", why);
    n->state = NS_BACKOFF;
    n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : KUBE_BACKOFF_MIN_MS;
    if (n->backoff_ms > KUBE_BACKOFF_MAX_MS)
        n->backoff_ms = KUBE_BACKOFF_MAX_MS;
    uv_timer_start(&n->retry, ns_on_retry, n->backoff_ms, 0);
}

static scr_http_opts_t request_opts(kube_disc_t *kd, const char *url)
{
    static const char *const headers[] = {"Accept: application/json"};
    return (scr_http_opts_t){
        .url = url,
        .client = &kd->client,
        .user_agent = SCR_USER_AGENT,
        .headers = headers,
        .n_headers = 1,
    };
}

/* -- list */

static void parse_work(uv_work_t *w)
{
    kube_ns_t *n = LC_CONTAINER_OF(w, kube_ns_t, work);
    json_error_t err;
    json_t *root = json_loadb((const char *)n->list_body.data, n->list_body.len, 0, &err);
    json_t *items = json_object_get(root, "items");
    if (!root || !json_is_array(items)) {
        snprintf(n->parse_error, sizeof(n->parse_error), "not a PodList: %s",
                 root ? "no items" : err.text);
        json_decref(root);
        return;
    }
    n->n_parsed = json_array_size(items);
    n->parsed = lc_xcalloc(n->n_parsed ? n->n_parsed : 1, sizeof(*n->parsed));
    for (size_t i = 0; i < n->n_parsed; i++)
        scr_kube_pod_group(json_array_get(items, i), &n->parsed[i]);
    n->parsed_rv = lc_xstrdup(jstr(json_object_get(root, "metadata"), "resourceVersion"));
    json_decref(root);
}

static void parse_after(uv_work_t *w, int status)
{
    kube_ns_t *n = LC_CONTAINER_OF(w, kube_ns_t, work);
    kube_disc_t *kd = n->kd;
    LC_UNUSED(status);
    lc_buf_fini(&n->list_body);
    kd->pending--;
    if (kd->closing || n->parse_error[0]) {
        for (size_t i = 0; i < n->n_parsed; i++)
            scr_group_fini(&n->parsed[i]);
        lc_free(n->parsed);
        if (!kd->closing)
            ns_backoff(n, "list", n->parse_error);
    } else {
        replace_ns_groups(n, n->parsed, n->n_parsed);
        lc_free(n->rv);
        n->rv = n->parsed_rv;
        n->parsed_rv = NULL;
        n->backoff_ms = 0;
        scr_disc_notify(&kd->d);
        ns_watch(n);
    }
    n->parsed = NULL;
    n->n_parsed = 0;
    lc_free(n->parsed_rv);
    n->parsed_rv = NULL;
    if (kd->closing && kd->pending == 0)
        kube_free(kd);
}

static void list_on_done(scr_http_req_t *req, void *data)
{
    kube_ns_t *n = data;
    kube_disc_t *kd = n->kd;
    n->req = NULL;
    const scr_http_result_t *res = scr_http_result(req);
    if (res->error_kind) {
        ns_backoff(n, "list", res->error);
        scr_http_req_free(req);
        return;
    }
    scr_http_take_body(req, &n->list_body);
    scr_http_req_free(req);
    n->state = NS_PARSING;
    n->parse_error[0] = '\0';
    kd->pending++;
    if (uv_queue_work(kd->loop, &n->work, parse_work, parse_after) != 0) {
        kd->pending--;
        lc_buf_fini(&n->list_body);
        ns_backoff(n, "list", "cannot queue the parse");
    }
}

static void ns_list(kube_ns_t *n)
{
    kube_disc_t *kd = n->kd;
    char *url = pods_url(n, false);
    scr_http_opts_t o = request_opts(kd, url ? url : "");
    o.timeout_ns = KUBE_LIST_TIMEOUT_NS;
    o.max_body_bytes = KUBE_MAX_LIST_BYTES;
    o.on_done = list_on_done;
    o.data = n;
    n->state = NS_LISTING;
    int rc = url ? scr_http_start(kd->http, &o, &n->req) : LC_EINPUT;
    lc_free(url);
    if (rc)
        ns_backoff(n, "list", lc_strerror(rc));
}

/* -- watch */

static void watch_event(kube_ns_t *n, const char *line, size_t len)
{
    json_error_t err;
    json_t *ev = json_loadb(line, len, 0, &err);
    const char *type = jstr(ev, "type");
    json_t *obj = json_object_get(ev, "object");
    const char *rv = jstr(json_object_get(obj, "metadata"), "resourceVersion");
    if (strcmp(type, "ERROR") == 0) {
        n->relist = true; /* 410 Gone and every other watch error: start over */
    } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0 ||
               strcmp(type, "DELETED") == 0) {
        scr_group_t g;
        scr_kube_pod_group(obj, &g);
        if (strcmp(type, "DELETED") == 0) {
            for (size_t i = 0; i < g.n_targets; i++)
                lc_labels_fini(&g.targets[i]);
            g.n_targets = 0; /* an empty group removes the pod */
        }
        scr_disc_upsert(&n->kd->d, &g);
    }
    if (rv[0] && strcmp(type, "ERROR") != 0) {
        lc_free(n->rv);
        n->rv = lc_xstrdup(rv);
    }
    json_decref(ev);
}

static bool watch_on_chunk(scr_http_req_t *req, const char *p, size_t len, void *data)
{
    kube_ns_t *n = data;
    LC_UNUSED(req);
    bool changed = false;
    while (len > 0 && !n->relist) {
        const char *nl = memchr(p, '\n', len);
        size_t take = nl ? (size_t)(nl - p) : len;
        if (lc_buf_append(&n->line, p, take) != 0) {
            n->relist = true; /* one event past the cap */
            break;
        }
        if (!nl)
            break;
        if (n->line.len)
            watch_event(n, (const char *)n->line.data, n->line.len);
        lc_buf_reset(&n->line);
        changed = true;
        p += take + 1;
        len -= take + 1;
    }
    if (changed)
        scr_disc_notify(&n->kd->d);
    return !n->relist;
}

static void watch_on_done(scr_http_req_t *req, void *data)
{
    kube_ns_t *n = data;
    n->req = NULL;
    const scr_http_result_t *res = scr_http_result(req);
    bool relist = n->relist || res->status == 410;
    lc_buf_reset(&n->line);
    n->relist = false;
    if (relist) {
        ns_list(n);
    } else if (res->error_kind && strcmp(res->error_kind, SCR_HTTP_ERR_TIMEOUT) != 0) {
        ns_backoff(n, "watch", res->error);
    } else if (res->status != 200) {
        char why[64];
        snprintf(why, sizeof(why), "HTTP status %ld", res->status);
        ns_backoff(n, "watch", why);
    } else {
        ns_watch(n); /* the server ended the watch: resume from the last version */
    }
    scr_http_req_free(req);
}

static void ns_watch(kube_ns_t *n)
{
    kube_disc_t *kd = n->kd;
    char *url = pods_url(n, true);
    scr_http_opts_t o = request_opts(kd, url ? url : "");
    o.timeout_ns = (KUBE_WATCH_TIMEOUT_S + 30) * SCR_NS_PER_S;
    o.on_chunk = watch_on_chunk;
    o.on_done = watch_on_done;
    o.data = n;
    n->state = NS_WATCHING;
    int rc = url ? scr_http_start(kd->http, &o, &n->req) : LC_EINPUT;
    lc_free(url);
    if (rc)
        ns_backoff(n, "watch", lc_strerror(rc));
}

/* ---------------------------------------------------------------- lifecycle */

static void retry_on_closed(uv_handle_t *h)
{
    kube_ns_t *n = h->data;
    kube_disc_t *kd = n->kd;
    if (--kd->pending == 0)
        kube_free(kd);
}

static void kube_close(scr_disc_t *d)
{
    kube_disc_t *kd = (kube_disc_t *)d;
    kd->closing = true;
    for (size_t i = 0; i < kd->n_ns; i++) {
        kube_ns_t *n = &kd->ns[i];
        if (n->req)
            scr_http_cancel(n->req);
        n->req = NULL;
        lc_free(n->ns);
        lc_free(n->rv);
        lc_buf_fini(&n->line);
        uv_close((uv_handle_t *)&n->retry, retry_on_closed);
    }
    /* The namespace states stay allocated until every handle and parse is done. */
    lc_free(kd->api);
    scr_client_fini(&kd->client);
    lc_free(kd->label_selector);
    lc_free(kd->field_selector);
    scr_disc_fini(&kd->d);
    kd->api = NULL;
}

/* In-cluster defaults: the API from the service environment variables and the
 * service account's token, CA and namespace. */
static int in_cluster(kube_disc_t *kd, char **own_ns)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !port || !host[0])
        return LC_ENOTFOUND;
    char url[512];
    snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    kd->api = lc_xstrdup(url);
    if (!kd->client.credentials && !kd->client.credentials_file && !kd->client.basic_auth)
        kd->client.credentials_file = lc_xstrdup(SA_DIR "/token");
    if (!kd->client.ca_file && !kd->client.ca)
        kd->client.ca_file = lc_xstrdup(SA_DIR "/ca.crt");
    if (own_ns && scr_read_secret(SA_DIR "/namespace", own_ns) != 0)
        *own_ns = NULL;
    return 0;
}

static void add_ns(kube_disc_t *kd, const char *ns)
{
    for (size_t i = 0; i < kd->n_ns; i++)
        if (ns && kd->ns[i].ns && strcmp(kd->ns[i].ns, ns) == 0)
            return;
    kube_ns_t *n = &kd->ns[kd->n_ns++];
    n->kd = kd;
    n->ns = ns ? lc_xstrdup(ns) : NULL;
    lc_buf_init(&n->line, KUBE_MAX_EVENT_BYTES);
    uv_timer_init(kd->loop, &n->retry);
    n->retry.data = n;
    kd->pending++;
}

int scr_disc_kube_new(uv_loop_t *loop, scr_http_t *http, const scr_kube_sd_t *cfg, scr_disc_t **out)
{
    kube_disc_t *kd = lc_xcalloc(1, sizeof(*kd));
    kd->d.kind = SCR_DISC_KUBE;
    kd->d.key = cfg->key;
    kd->d.close = kube_close;
    kd->loop = loop;
    kd->http = http;
    scr_client_copy(&kd->client, &cfg->client);
    kd->label_selector = cfg->label_selector ? lc_xstrdup(cfg->label_selector) : NULL;
    kd->field_selector = cfg->field_selector ? lc_xstrdup(cfg->field_selector) : NULL;
    char *own_ns = NULL;
    int rc = 0;
    if (cfg->api_server) {
        kd->api = lc_xstrdup(cfg->api_server);
        size_t len = strlen(kd->api);
        while (len > 0 && kd->api[len - 1] == '/')
            kd->api[--len] = '\0';
    } else {
        rc = in_cluster(kd, cfg->own_namespace ? &own_ns : NULL);
    }
    kd->ns = lc_xcalloc(cfg->n_namespaces + 2, sizeof(*kd->ns));
    for (size_t i = 0; i < cfg->n_namespaces; i++)
        add_ns(kd, cfg->namespaces[i]);
    if (own_ns)
        add_ns(kd, own_ns);
    if (!kd->n_ns)
        add_ns(kd, NULL);
    lc_free(own_ns);
    *out = &kd->d;
    if (rc) { /* reported on /targets and in the log; the job has no kubernetes targets */
        scr_disc_error(&kd->d, "no api_server and not running in a cluster "
                               "(KUBERNETES_SERVICE_HOST is unset)");
        kd->d.reported = true;
        return 0;
    }
    for (size_t i = 0; i < kd->n_ns; i++)
        ns_list(&kd->ns[i]);
    return 0;
}
