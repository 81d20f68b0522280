/*
 * kube.c — Kubernetes metadata for containers on this node: container id ->
 * (namespace, pod, container), from the API server's pod list for the node
 * (GET /api/v1/pods?fieldSelector=spec.nodeName=<node>, ecosystem.md §5.3),
 * matched on status.*containerStatuses[].containerID without its runtime
 * prefix ("containerd://", "cri-o://", "docker://").
 *
 * In a pod the service account's token and CA authenticate the call (RBAC:
 * pods list). The list is fetched again when an unknown container id shows
 * up and the last fetch is older than KUBE_MIN_REFRESH_NS, so a busy node
 * costs the API server at most one list call per few seconds. Runs in the
 * agent's job (blocking libcurl is fine there).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_int.h"
#include "lc/clock.h"
#include "lc/log.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_MIN_REFRESH_NS (5 * 1000000000LL)
#define KUBE_MAX_BODY ((size_t)128 << 20)
#define KUBE_TIMEOUT_S 10L

typedef struct kube_entry_s {
    char id[65];
    agt_pod_t pod;
} kube_entry_t;

struct agt_kube_s {
    char *pods_url;
    char *auth_header; /* "Authorization: Bearer ..." or NULL */
    char *ca_file;     /* NULL = system CAs */
    kube_entry_t *v;
    size_t n, cap;
    agt_u64map_t by_id; /* id hash -> index + 1 */
    int64_t fetched_ns; /* CLOCK_MONOTONIC of the last fetch, 0 = never */
};

static uint64_t id_key(const char *id)
{
    uint64_t k = lc_hash64(id, strlen(id), 0x6b756265ULL);
    return k ? k : 1;
}

static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[16384];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return lc_xstrdup(buf);
}

static void kube_clear(agt_kube_t *k)
{
    for (size_t i = 0; i < k->n; i++) {
        lc_free(k->v[i].pod.namespace_);
        lc_free(k->v[i].pod.pod);
        lc_free(k->v[i].pod.container);
    }
    k->n = 0;
    agt_u64map_clear(&k->by_id);
}

/* In a pod: the API server from the service environment, the token and CA. */
static int kube_in_cluster(agt_kube_t *k, char **api)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    char *token = read_small_file(SA_DIR "/token");
    if (!host || !*host || !token) {
        lc_free(token);
        return LC_ENOTFOUND;
    }
    char buf[512];
    bool v6 = strchr(host, ':') != NULL;
    snprintf(buf, sizeof(buf), v6 ? "https://[%s]:%s" : "https://%s:%s", host,
             port && *port ? port : "443");
    *api = lc_xstrdup(buf);
    size_t len = strlen(token) + 32;
    k->auth_header = lc_xmalloc(len);
    snprintf(k->auth_header, len, "Authorization: Bearer %s", token);
    lc_free(token);
    k->ca_file = lc_xstrdup(SA_DIR "/ca.crt");
    return 0;
}

int agt_kube_new(const char *api, const char *node, agt_kube_t **out)
{
    *out = NULL;
    agt_kube_t *k = lc_xcalloc(1, sizeof(*k));
    agt_u64map_init(&k->by_id);
    char *base = NULL;
    if (api && *api) {
        base = lc_xstrdup(api);
    } else if (kube_in_cluster(k, &base) != 0) {
        agt_kube_free(k);
        return LC_ENOTFOUND;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    char *esc = c ? curl_easy_escape(c, node, 0) : NULL;
    size_t len = strlen(base) + (esc ? strlen(esc) : 0) + 64;
    k->pods_url = lc_xmalloc(len);
    snprintf(k->pods_url, len, "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", base,
             esc ? esc : "");
    curl_free(esc);
    curl_easy_cleanup(c);
    lc_free(base);
    *out = k;
    return 0;
}

void agt_kube_free(agt_kube_t *k)
{
    if (!k)
        return;
    kube_clear(k);
    lc_free(k->v);
    agt_u64map_fini(&k->by_id);
    lc_free(k->pods_url);
    lc_free(k->auth_header);
    lc_free(k->ca_file);
    lc_free(k);
}

/* ---------------------------------------------------------------- parsing */

static const char *json_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

static void kube_add(agt_kube_t *k, const char *ns, const char *pod, json_t *status)
{
    const char *cid = json_str(status, "containerID");
    const char *sep = strstr(cid, "://");
    const char *id = sep ? sep + 3 : cid;
    if (strlen(id) != 64)
        return;
    bool added;
    uint64_t *slot = agt_u64map_put(&k->by_id, id_key(id), &added);
    if (!added)
        return;
    k->v = lc_xgrow(k->v, &k->cap, k->n + 1, sizeof(*k->v));
    kube_entry_t *e = &k->v[k->n];
    memcpy(e->id, id, 65);
    e->pod.namespace_ = lc_xstrdup(ns);
    e->pod.pod = lc_xstrdup(pod);
    e->pod.container = lc_xstrdup(json_str(status, "name"));
    *slot = ++k->n;
}

int agt_kube_load_pods(agt_kube_t *k, const char *json, size_t len)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    json_t *items = root ? json_object_get(root, "items") : NULL;
    if (!json_is_array(items)) {
        json_decref(root);
        return LC_EINPUT;
    }
    kube_clear(k);
    static const char *const lists[] = {"containerStatuses", "initContainerStatuses",
                                        "ephemeralContainerStatuses"};
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        json_t *meta = json_object_get(item, "metadata"), *status = json_object_get(item, "status");
        const char *ns = json_str(meta, "namespace"), *pod = json_str(meta, "name");
        for (size_t l = 0; l < LC_ARRAY_LEN(lists); l++) {
            size_t j;
            json_t *cs;
            json_array_foreach(json_object_get(status, lists[l]), j, cs) kube_add(k, ns, pod, cs);
        }
    }
    json_decref(root);
    return 0;
}

/* ---------------------------------------------------------------- fetching */

static size_t kube_on_body(char *data, size_t size, size_t n, void *user)
{
    return lc_buf_append(user, data, size * n) == 0 ? size * n : 0;
}

static int kube_fetch(agt_kube_t *k)
{
    CURL *c = curl_easy_init();
    if (!c)
        return -ENOMEM;
    lc_buf_t body;
    lc_buf_init(&body, KUBE_MAX_BODY);
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
    if (k->auth_header)
        headers = curl_slist_append(headers, k->auth_header);
    curl_easy_setopt(c, CURLOPT_URL, k->pods_url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, kube_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, KUBE_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    if (k->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, k->ca_file);
    CURLcode cc = curl_easy_perform(c);
    int rc = 0;
    if (cc != CURLE_OK) {
        LC_LOG_WARN("agent: Kubernetes pod list failed url=%s err=\"%s\"", k->pods_url,
                    curl_easy_strerror(cc));
        rc = LC_EUNSUPPORTED;
    } else {
        rc = agt_kube_load_pods(k, (const char *)body.data, body.len);
        if (rc)
            LC_LOG_WARN("agent: unreadable Kubernetes pod list url=%s", k->pods_url);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    lc_buf_fini(&body);
    return rc;
}

const agt_pod_t *agt_kube_lookup(agt_kube_t *k, const char *container_id)
{
    if (!container_id || !*container_id)
        return NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t *slot = agt_u64map_get(&k->by_id, id_key(container_id));
        if (slot && strcmp(k->v[*slot - 1].id, container_id) == 0)
            return &k->v[*slot - 1].pod;
        int64_t now = lc_monotonic_ns();
        if (attempt || (k->fetched_ns && now - k->fetched_ns < KUBE_MIN_REFRESH_NS))
            break;
        k->fetched_ns = now;
        if (kube_fetch(k) != 0)
            break;
    }
    return NULL;
}
