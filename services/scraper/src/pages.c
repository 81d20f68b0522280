/*
 * pages.c — GET /targets: every job's active targets (labels before and
 * after relabeling, URL, health, last error, last scrape, and whether this
 * replica scrapes it) and its dropped targets, as JSON in the shape of
 * Prometheus's /api/v1/targets so that existing habits and tools carry over.
 * `?state=active` or `?state=dropped` limits the answer to one list.
 */
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "lc/log.h"
#include "scraper_int.h"

static json_t *labels_json(const lc_labels_t *ls, bool skip_internal)
{
    json_t *o = json_object();
    for (size_t i = 0; i < ls->n; i++)
        if (!skip_internal || strncmp(ls->v[i].name, "__", 2) != 0)
            json_object_set_new(o, ls->v[i].name, json_string(ls->v[i].value));
    return o;
}

static json_t *time_json(int64_t ns)
{
    char buf[64];
    if (ns <= 0)
        return json_string("0001-01-01T00:00:00Z");
    time_t secs = (time_t)(ns / SCR_NS_PER_S);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)((ns % SCR_NS_PER_S) / 1000000));
    return json_string(buf);
}

static const char *health_name(scr_health_t h)
{
    return h == SCR_HEALTH_UP ? "up" : h == SCR_HEALTH_DOWN ? "down" : "unknown";
}

static json_t *target_json(const scr_pool_t *p, const scr_target_t *t)
{
    char interval[32], timeout[32];
    scr_format_duration(p->job->interval_ns, interval, sizeof(interval));
    scr_format_duration(p->job->timeout_ns, timeout, sizeof(timeout));
    json_t *o = json_object();
    json_object_set_new(o, "discoveredLabels", labels_json(&t->spec.discovered, false));
    json_object_set_new(o, "labels", labels_json(&t->spec.labels, true));
    json_object_set_new(o, "scrapePool", json_string(p->name));
    json_object_set_new(o, "scrapeUrl", json_string(t->spec.url));
    json_object_set_new(o, "profile", json_string(p->job->profiles[t->spec.profile].name));
    json_object_set_new(o, "health", json_string(health_name(t->health)));
    json_object_set_new(o, "lastError", json_string(t->last_error));
    json_object_set_new(o, "lastScrape", time_json(t->last_scrape_ns));
    json_object_set_new(o, "lastScrapeDuration", json_real(t->last_duration_s));
    json_object_set_new(o, "lastSamples", json_integer((json_int_t)t->last_samples));
    json_object_set_new(o, "scrapes", json_integer((json_int_t)t->scrapes));
    json_object_set_new(o, "scrapeInterval", json_string(interval));
    json_object_set_new(o, "scrapeTimeout", json_string(timeout));
    json_object_set_new(o, "owned", json_boolean(t->owned));
    return o;
}

static json_t *dropped_json(const scr_pool_t *p, const scr_dropped_t *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "discoveredLabels", labels_json(&d->discovered, false));
    json_object_set_new(o, "scrapePool", json_string(p->name));
    json_object_set_new(o, "reason", json_string(d->reason));
    return o;
}

static json_t *targets_json(const scr_t *s, bool active, bool dropped)
{
    json_t *act = json_array(), *drop = json_array(), *members = json_array();
    size_t dropped_total = 0;
    for (size_t i = 0; i < s->n_pools; i++) {
        const scr_pool_t *p = s->pools[i];
        for (size_t j = 0; active && j < p->n_targets; j++)
            json_array_append_new(act, target_json(p, p->targets[j]));
        for (size_t j = 0; dropped && j < p->n_dropped; j++)
            json_array_append_new(drop, dropped_json(p, &p->dropped[j]));
        dropped_total += p->n_dropped_total;
    }
    for (size_t i = 0; i < s->n_members; i++)
        json_array_append_new(members, json_string(s->members[i]));
    json_t *data = json_object();
    json_object_set_new(data, "activeTargets", act);
    json_object_set_new(data, "droppedTargets", drop);
    json_object_set_new(data, "droppedTargetCounts", json_integer((json_int_t)dropped_total));
    json_object_set_new(data, "replica", json_string(s->opts.replica_id));
    json_object_set_new(data, "members", members);
    json_t *root = json_object();
    json_object_set_new(root, "status", json_string("success"));
    json_object_set_new(root, "data", data);
    return root;
}

static lc_http_result_t targets_handler(lc_http_req_t *req, void *data)
{
    scr_t *s = data;
    const char *state = lc_http_query(req, "state");
    bool active = !state || !state[0] || strcmp(state, "any") == 0 || strcmp(state, "active") == 0;
    bool dropped =
        !state || !state[0] || strcmp(state, "any") == 0 || strcmp(state, "dropped") == 0;
    json_t *root = targets_json(s, active, dropped);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) {
        lc_http_reply(req, 500, "text/plain", "out of memory", 13);
        return LC_HTTP_DONE;
    }
    lc_http_reply(req, 200, "application/json", text, strlen(text));
    free(text);
    return LC_HTTP_DONE;
}

int scr_pages_register(scr_t *s, lc_httpd_t *httpd)
{
    lc_http_route_t route = {
        .path = "/targets",
        .methods = "GET",
        .scope = LC_HTTP_SCOPE_READ, /* the targets' labels are tenant data */
        .work = targets_handler,
        .data = s,
    };
    return lc_httpd_route(httpd, &route);
}
