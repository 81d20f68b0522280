/*
 * httpd_routes.c — the route table of an lc_httpd_t (httpd_int.h): routes
 * as registered (each with its scope, checked here: a route cannot be added
 * without one), found by path and method for a request (exact paths before
 * prefixes, longer prefixes first), the Allow header of a 405, and the
 * /debug/routes listing. Owned by its server; written before it listens and
 * read on the loop thread afterwards, so no lock.
 */
#include <stdio.h>
#include <string.h>

#include "httpd_int.h"
#include "lc/alloc.h"
#include "lc/metrics.h"

typedef lc_httpd__route_t route_t;

static bool route_path_matches(const route_t *r, const char *path)
{
    if (r->prefix)
        return strncmp(path, r->path, r->path_len) == 0;
    return strcmp(path, r->path) == 0;
}

/* methods is a comma-separated list such as "GET,POST" (spaces allowed). */
static bool method_listed(const char *methods, const char *method)
{
    if (!methods)
        return true;
    size_t mlen = strlen(method);
    for (const char *s = methods; *s;) {
        while (*s == ' ' || *s == ',')
            s++;
        size_t n = strcspn(s, ", ");
        if (n == mlen && n > 0 && strncmp(s, method, n) == 0)
            return true;
        s += n;
    }
    return false;
}

/* Exact routes win over prefixes, and longer prefixes over shorter ones.
 * *path_known tells a 405 (path served, other method) from a 404. */
const route_t *lc_httpd__routes_find(const lc_httpd__routes_t *t, const char *path,
                                     const char *method, bool *path_known)
{
    const route_t *best = NULL;
    *path_known = false;
    for (size_t i = 0; i < t->n; i++) {
        const route_t *r = &t->v[i];
        if (!route_path_matches(r, path))
            continue;
        *path_known = true;
        if (!method_listed(r->methods, method))
            continue;
        if (!r->prefix)
            return r;
        if (!best || r->path_len > best->path_len)
            best = r;
    }
    return best;
}

/* The Allow header of a 405: the methods of every route serving the path. */
void lc_httpd__routes_allow(const lc_httpd__routes_t *t, lc_http_req_t *req)
{
    lc_buf_t allow;
    lc_buf_init(&allow, 4096);
    for (size_t i = 0; i < t->n; i++) {
        const route_t *r = &t->v[i];
        if (!r->methods || !route_path_matches(r, req->path))
            continue;
        if ((allow.len && lc_buf_puts(&allow, ", ") != 0) || lc_buf_puts(&allow, r->methods) != 0)
            break;
    }
    if (lc_buf_putc(&allow, '\0') == 0)
        lc_http_set_header(req, "Allow", (const char *)allow.data);
    lc_buf_fini(&allow);
}

lc_metric_t *lc_httpd__route_latency_metric(lc_metrics_t *metrics, const char *route_label)
{
    char labels[LC_HTTPD__METRIC_LABELS_MAX];
    if (!metrics)
        return NULL;
    snprintf(labels, sizeof(labels), "route=\"%s\"", route_label);
    return lc_metrics_histogram(metrics, "ember_http_request_duration_seconds",
                                "Time from the first byte of a request to its response.", labels,
                                NULL, 0);
}

/* Route names are chosen by the program, but keep the label text valid anyway. */
static bool label_value_ok(const char *s)
{
    return strpbrk(s, "\"\\\n") == NULL;
}

const char *lc_http_scope_name(lc_http_scope_t scope)
{
    switch (scope) {
    case LC_HTTP_SCOPE_PUBLIC:
        return "public";
    case LC_HTTP_SCOPE_READ:
        return "read";
    case LC_HTTP_SCOPE_WRITE:
        return "write";
    default:
        return "unset";
    }
}

static bool scope_valid(lc_http_scope_t scope)
{
    return scope == LC_HTTP_SCOPE_PUBLIC || scope == LC_HTTP_SCOPE_READ ||
           scope == LC_HTTP_SCOPE_WRITE;
}

int lc_httpd__routes_add(lc_httpd__routes_t *t, const lc_http_route_t *route, size_t max_inflated,
                         lc_metrics_t *metrics)
{
    if (!route->path || !route->path[0] || !route->work || !scope_valid(route->scope))
        return LC_EINPUT;
    const char *label = route->metric_name ? route->metric_name : route->path;
    if (!label_value_ok(label))
        return LC_EINPUT;
    t->v = lc_xgrow(t->v, &t->cap, t->n + 1, sizeof(route_t));
    route_t *r = &t->v[t->n++];
    memset(r, 0, sizeof(*r));
    r->path_len = strlen(route->path);
    r->prefix = route->path[r->path_len - 1] == '*';
    if (r->prefix)
        r->path_len--;
    r->path = lc_xstrndup(route->path, r->path_len);
    r->methods = route->methods ? lc_xstrdup(route->methods) : NULL;
    r->metric_name = lc_xstrdup(label);
    r->work = route->work;
    r->after = route->after;
    r->offload = route->offload;
    r->max_inflated = max_inflated;
    if (route->max_decompressed_bytes && route->max_decompressed_bytes < r->max_inflated)
        r->max_inflated = route->max_decompressed_bytes;
    r->data = route->data;
    r->latency = lc_httpd__route_latency_metric(metrics, r->metric_name);
    r->scope = route->scope;
    r->deny = route->deny;
    return 0;
}

int lc_httpd__routes_text(const lc_httpd__routes_t *t, lc_buf_t *out)
{
    for (size_t i = 0; i < t->n; i++) {
        const route_t *r = &t->v[i];
        int rc = lc_buf_printf(out, "%s%s\t%s\t%s\n", r->path, r->prefix ? "*" : "",
                               r->methods ? r->methods : "*", lc_http_scope_name(r->scope));
        if (rc)
            return rc;
    }
    return 0;
}

void lc_httpd__routes_fini(lc_httpd__routes_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        lc_free(t->v[i].path);
        lc_free(t->v[i].methods);
        lc_free(t->v[i].metric_name);
    }
    lc_free(t->v);
    *t = (lc_httpd__routes_t){0};
}
