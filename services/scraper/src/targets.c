/*
 * targets.c — builds scrape targets from target groups, following Parca's
 * populateLabels (parca.md §1.5, §1.8):
 *
 *   target labels + group labels (the target's win)
 *   + job, __scheme__, __param_<k> when absent, __profile_path__ and __name__
 *   -> relabel_configs (dropped targets are remembered for /targets)
 *   -> __address__ must be set and contain no '/'; a missing port comes from
 *      the scheme; __meta_* labels are removed; instance defaults to the address
 *   -> URL = __scheme__://__address__ __profile_path__ ?params (+ seconds=N)
 *
 * The labels a profile is published under are the ones without the `__`
 * prefix, plus service_name (the job when no service_name label exists, as
 * Pyroscope expects one) and __name__ = the profile name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/utf8.h"
#include "targets.h"

#define KEY_SEED 0x7a29e7

/* ---------------------------------------------------------------- addresses */

static bool scr_all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* Go's net.SplitHostPort succeeds: "[v6]:port" or "host:port" with one colon. */
static bool has_port(const char *addr)
{
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        return close && close[1] == ':' && scr_all_digits(close + 2);
    }
    const char *colon = strchr(addr, ':');
    return colon && !strchr(colon + 1, ':'); /* Go accepts any port text here */
}

char *scr_address_with_port(const char *addr, const char *scheme)
{
    if (has_port(addr))
        return lc_xstrdup(addr);
    const char *port = strcmp(scheme, "https") == 0 ? "443" : "80";
    size_t len = strlen(addr) + 16;
    char *out = lc_xmalloc(len);
    bool v6 = strchr(addr, ':') && addr[0] != '[';
    if (addr[0] == '[' && addr[strlen(addr) - 1] == ']')
        snprintf(out, len, "%s:%s", addr, port);
    else
        snprintf(out, len, v6 ? "[%s]:%s" : "%s:%s", addr, port);
    return out;
}

/* ---------------------------------------------------------------- URL */

/* Go's url.QueryEscape: unreserved bytes kept, space as '+', the rest %XX. */
static int query_escape(lc_buf_t *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~';
        if (keep)
            rc = lc_buf_putc(b, (char)*p);
        else if (*p == ' ')
            rc = lc_buf_putc(b, '+');
        else
            rc = lc_buf_printf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
    }
    return rc;
}

/* Go's URL path escaping: unreserved bytes and $&+,/:;=@ are kept. */
static int path_escape(lc_buf_t *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-_.~$&+,/:;=@", *p);
        rc = keep ? lc_buf_putc(b, (char)*p)
                  : lc_buf_printf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
    }
    return rc;
}

typedef struct query_param_s {
    const char *key;
    const char *const *values; /* job params */
    size_t n_values;
    const char *first; /* __param_<key> label: replaces values[0] */
} query_param_t;

static int param_cmp(const void *a, const void *b)
{
    return strcmp(((const query_param_t *)a)->key, ((const query_param_t *)b)->key);
}

static query_param_t *find_param(query_param_t *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].key, key) == 0)
            return &v[i];
    return NULL;
}

/* The query parameters: job params, overridden by __param_* labels, plus
 * seconds=N for delta profiles; sorted by key as Go's url.Values.Encode. */
static size_t collect_params(const scr_job_t *job, const lc_labels_t *ls, const char *seconds,
                             query_param_t *v)
{
    size_t n = 0;
    for (size_t i = 0; i < job->n_params; i++)
        v[n++] = (query_param_t){job->params[i].key, (const char *const *)job->params[i].values,
                                 job->params[i].n_values, NULL};
    for (size_t i = 0; i < ls->n; i++) {
        if (strncmp(ls->v[i].name, "__param_", 8) != 0 || !ls->v[i].name[8])
            continue;
        query_param_t *p = find_param(v, n, ls->v[i].name + 8);
        if (!p) {
            p = &v[n++];
            *p = (query_param_t){ls->v[i].name + 8, NULL, 0, NULL};
        }
        p->first = ls->v[i].value;
    }
    if (seconds) {
        query_param_t *p = find_param(v, n, "seconds");
        if (!p)
            p = &v[n++];
        *p = (query_param_t){"seconds", NULL, 0, seconds};
    }
    qsort(v, n, sizeof(*v), param_cmp);
    return n;
}

static int append_query(lc_buf_t *b, const query_param_t *v, size_t n)
{
    int rc = 0;
    bool first = true;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t count = v[i].n_values ? v[i].n_values : 1;
        for (size_t j = 0; j < count && !rc; j++) {
            const char *val = j == 0 && v[i].first ? v[i].first
                              : v[i].n_values      ? v[i].values[j]
                                                   : "";
            rc = lc_buf_putc(b, first ? '?' : '&');
            if (!rc)
                rc = query_escape(b, v[i].key);
            if (!rc)
                rc = lc_buf_putc(b, '=');
            if (!rc)
                rc = query_escape(b, val);
            first = false;
        }
    }
    return rc;
}

static char *build_url(const scr_job_t *job, const scr_profile_t *p, const lc_labels_t *ls)
{
    char seconds[24];
    if (p->delta)
        snprintf(seconds, sizeof(seconds), "%lld",
                 (long long)(p->seconds ? p->seconds : job->interval_ns / SCR_NS_PER_S));
    query_param_t *params = lc_xcalloc(job->n_params + ls->n + 2, sizeof(*params));
    size_t n = collect_params(job, ls, p->delta ? seconds : NULL, params);
    const char *scheme = lc_labels_get(ls, "__scheme__");
    const char *path = lc_labels_get(ls, "__profile_path__");
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    int rc = lc_buf_printf(&b, "%s://%s", scheme ? scheme : job->scheme,
                           lc_labels_get(ls, "__address__"));
    if (!rc)
        rc = path_escape(&b, path && path[0] ? path : "/");
    if (!rc)
        rc = append_query(&b, params, n);
    if (!rc)
        rc = lc_buf_putc(&b, '\0');
    lc_free(params);
    size_t len;
    return rc ? NULL : (char *)lc_buf_steal(&b, &len);
}

/* ---------------------------------------------------------------- labels */

static void set_if_absent(lc_labels_t *ls, const char *name, const char *value)
{
    const char *v = lc_labels_get(ls, name);
    if (!v || !v[0])
        lc_labels_set(ls, name, value);
}

/* The labels before relabeling (parca.md §1.8). */
static void base_labels(const scr_job_t *job, const scr_group_t *g, const lc_labels_t *target,
                        const scr_profile_t *p, lc_labels_t *ls)
{
    lc_labels_copy(ls, target);
    for (size_t i = 0; i < g->labels.n; i++)
        if (!lc_labels_get(ls, g->labels.v[i].name))
            lc_labels_add(ls, g->labels.v[i].name, g->labels.v[i].value);
    set_if_absent(ls, "job", job->name);
    set_if_absent(ls, "__scheme__", job->scheme);
    for (size_t i = 0; i < job->n_params; i++) {
        char name[128];
        snprintf(name, sizeof(name), "__param_%s", job->params[i].key);
        if (job->params[i].n_values && strlen(job->params[i].key) < sizeof(name) - 9)
            set_if_absent(ls, name, job->params[i].values[0]);
    }
    lc_labels_set(ls, "__profile_path__", p->path);
    lc_labels_set(ls, "__name__", p->name);
    lc_labels_sort(ls);
}

static void drop_meta(lc_labels_t *ls)
{
    for (size_t i = 0; i < ls->n;) {
        if (strncmp(ls->v[i].name, "__meta_", 7) == 0)
            lc_labels_del(ls, ls->v[i].name); /* shifts the rest down */
        else
            i++;
    }
}

/* What gets published: the labels without the `__` prefix, service_name and
 * __name__. */
static void series_labels(const scr_job_t *job, const scr_profile_t *p, const lc_labels_t *ls,
                          lc_labels_t *out)
{
    lc_labels_init(out);
    for (size_t i = 0; i < ls->n; i++)
        if (strncmp(ls->v[i].name, "__", 2) != 0)
            lc_labels_add(out, ls->v[i].name, ls->v[i].value);
    const char *job_label = lc_labels_get(ls, "job");
    set_if_absent(out, "service_name", job_label && job_label[0] ? job_label : job->name);
    lc_labels_set(out, "__name__", p->name);
    lc_labels_sort(out);
}

/* ---------------------------------------------------------------- building */

static void add_dropped(scr_target_set_t *set, lc_labels_t *discovered, const char *reason)
{
    set->n_dropped_total++;
    if (set->n_dropped >= SCR_MAX_DROPPED_PER_JOB) {
        lc_labels_fini(discovered);
        return;
    }
    set->dropped = lc_xrealloc(set->dropped, (set->n_dropped + 1) * sizeof(*set->dropped));
    scr_dropped_t *d = &set->dropped[set->n_dropped++];
    d->discovered = *discovered;
    d->reason = lc_xstrdup(reason);
}

/* The keys seen while building one set (open addressing; 0 marks a free slot). */
typedef struct key_set_s {
    uint64_t *slots;
    size_t mask;
} key_set_t;

/* Adds key; false when it was already there. */
static bool key_set_add(key_set_t *ks, uint64_t key)
{
    key = key ? key : 1;
    for (size_t i = (size_t)key & ks->mask;; i = (i + 1) & ks->mask) {
        if (ks->slots[i] == key)
            return false;
        if (!ks->slots[i]) {
            ks->slots[i] = key;
            return true;
        }
    }
}

static uint64_t target_key(const scr_job_t *job, const char *url, const lc_labels_t *ls)
{
    uint64_t h = lc_hash64(job->name, strlen(job->name), KEY_SEED);
    h ^= lc_hash64(url, strlen(url), h);
    return lc_hash64(&h, sizeof(h), lc_labels_hash(ls));
}

/* Finishes a relabelled target; returns NULL (and sets *why) when it is invalid. */
static const char *finish_labels(lc_labels_t *ls)
{
    const char *addr = lc_labels_get(ls, "__address__");
    if (!addr || !addr[0])
        return "no address";
    if (strchr(addr, '/'))
        return "__address__ is not a valid hostname (contains '/')";
    const char *scheme = lc_labels_get(ls, "__scheme__");
    if (!scheme || (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
        return "__scheme__ must be http or https";
    char *full = scr_address_with_port(addr, scheme);
    lc_labels_set(ls, "__address__", full);
    drop_meta(ls);
    set_if_absent(ls, "instance", full);
    lc_free(full);
    for (size_t i = 0; i < ls->n; i++)
        if (!lc_utf8_valid_str(ls->v[i].value))
            return "a label value is not valid UTF-8";
    lc_labels_sort(ls);
    return NULL;
}

static void build_one(const scr_job_t *job, const scr_group_t *g, const lc_labels_t *target,
                      size_t pi, key_set_t *ks, scr_target_set_t *set)
{
    const scr_profile_t *p = &job->profiles[pi];
    scr_target_spec_t t = {.profile = pi};
    base_labels(job, g, target, p, &t.discovered);
    lc_labels_copy(&t.labels, &t.discovered);
    const char *why = scr_relabel_apply(&job->relabel, &t.labels) ? NULL : "relabeling";
    if (!why)
        why = finish_labels(&t.labels);
    if (!why && !(t.url = build_url(job, p, &t.labels)))
        why = "URL too long";
    if (!why && set->n >= SCR_MAX_TARGETS_PER_JOB) {
        set->n_over_cap++;
        why = "the job has too many targets";
    }
    if (why) {
        add_dropped(set, &t.discovered, why);
        lc_labels_init(&t.discovered);
        scr_target_spec_fini(&t);
        return;
    }
    t.key = target_key(job, t.url, &t.labels);
    if (!key_set_add(ks, t.key)) {
        scr_target_spec_fini(&t);
        return;
    }
    series_labels(job, p, &t.labels, &t.series);
    set->v = lc_xrealloc(set->v, (set->n + 1) * sizeof(*set->v));
    set->v[set->n++] = t;
}

void scr_targets_build(const scr_job_t *job, const scr_group_t *const *group_lists,
                       const size_t *n_groups, size_t n_lists, scr_target_set_t *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    for (size_t l = 0; l < n_lists; l++)
        for (size_t g = 0; g < n_groups[l]; g++)
            n += group_lists[l][g].n_targets * job->n_profiles;
    size_t cap = 16;
    while (cap < 2 * (n < SCR_MAX_TARGETS_PER_JOB ? n : SCR_MAX_TARGETS_PER_JOB))
        cap *= 2;
    key_set_t ks = {lc_xcalloc(cap, sizeof(uint64_t)), cap - 1};
    for (size_t l = 0; l < n_lists; l++)
        for (size_t g = 0; g < n_groups[l]; g++)
            for (size_t t = 0; t < group_lists[l][g].n_targets; t++)
                for (size_t p = 0; p < job->n_profiles; p++)
                    if (job->profiles[p].enabled)
                        build_one(job, &group_lists[l][g], &group_lists[l][g].targets[t], p, &ks,
                                  out);
    lc_free(ks.slots);
}

void scr_target_spec_fini(scr_target_spec_t *t)
{
    lc_labels_fini(&t->discovered);
    lc_labels_fini(&t->labels);
    lc_labels_fini(&t->series);
    lc_free(t->url);
    memset(t, 0, sizeof(*t));
}

void scr_target_set_fini(scr_target_set_t *set)
{
    for (size_t i = 0; i < set->n; i++)
        scr_target_spec_fini(&set->v[i]);
    lc_free(set->v);
    for (size_t i = 0; i < set->n_dropped; i++) {
        lc_labels_fini(&set->dropped[i].discovered);
        lc_free(set->dropped[i].reason);
    }
    lc_free(set->dropped);
    memset(set, 0, sizeof(*set));
}
