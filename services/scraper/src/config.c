/*
 * config.c — parca.yaml `scrape_configs`: the job fields, the pprof profile
 * set and the validation rules of parca.md §1.2–§1.6.
 *
 * Parca decodes with known-fields checking, so every unknown key is an error
 * here too; `object_storage` (Parca's required bucket) is accepted and
 * ignored, since ember stores what it scrapes itself. Discovery sections and
 * HTTP client settings live in config_sd.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lc/alloc.h"

#define JOB_FIELD_MAX 64

/* ---------------------------------------------------------------- defaults */

/* Parca's default pprof set (parca.md §1.4), identical in every version read. */
static const struct {
    const char *name;
    const char *path;
    bool delta;
} default_profiles[] = {
    {"memory", "/debug/pprof/allocs", false},       {"block", "/debug/pprof/block", false},
    {"goroutine", "/debug/pprof/goroutine", false}, {"mutex", "/debug/pprof/mutex", false},
    {"process_cpu", "/debug/pprof/profile", true},
};

/* Profiles whose counters only grow in Go, so that a scrape without
 * ?seconds= must be subtracted from the previous one (parca.md §2.3). */
static bool cumulative_name(const char *name)
{
    return strcmp(name, "memory") == 0 || strcmp(name, "block") == 0 || strcmp(name, "mutex") == 0;
}

/* ---------------------------------------------------------------- profiling_config */

/* One pprof_config entry as written, before the merge. */
typedef struct raw_profile_s {
    scr_profile_t p;
    bool enabled_set, path_set;
} raw_profile_t;

typedef struct raw_profiling_s {
    char *path_prefix;
    raw_profile_t *v;
    size_t n;
    bool has_pprof_config;
} raw_profiling_t;

static int p_enabled(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    raw_profile_t *r = t;
    r->enabled_set = true;
    return scr_yaml_bool(y, n, "enabled", &r->p.enabled);
}

static int p_path(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    raw_profile_t *r = t;
    r->path_set = true;
    return scr_yaml_string(y, n, "path", &r->p.path);
}

static int p_delta(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "delta", &((raw_profile_t *)t)->p.delta);
}

static int p_seconds(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_int(y, n, "seconds", 0, 86400, &((raw_profile_t *)t)->p.seconds);
}

static int p_value_type(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"type", NULL}, {"unit", NULL}};
    scr_value_type_t *vt = t;
    if (scr_yaml_mapping(y, n, "keep_sample_type") || scr_yaml_null(n))
        return scr_yaml_null(n) ? scr_yaml_fail(y, n, "keep_sample_type", "null entry") : -1;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = scr_yaml_get(y, p->key);
        const char *key = scr_yaml_scalar(kn);
        char **dst = !key                            ? NULL
                     : strcmp(key, keys[0].key) == 0 ? &vt->type
                     : strcmp(key, keys[1].key) == 0 ? &vt->unit
                                                     : NULL;
        if (!dst)
            return scr_yaml_fail(y, kn, "keep_sample_type", "unknown field \"%.40s\"",
                                 key ? key : "");
        if (scr_yaml_string(y, scr_yaml_get(y, p->value), "keep_sample_type", dst))
            return -1;
    }
    return 0;
}

static int p_keep(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_profile_t *p = &((raw_profile_t *)t)->p;
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE || scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, "keep_sample_type", "expected a list of {type, unit}");
    size_t count = scr_yaml_len(n);
    p->keep = lc_xcalloc(count ? count : 1, sizeof(*p->keep));
    for (size_t i = 0; i < count; i++) {
        p->n_keep++;
        if (p_value_type(y, scr_yaml_get(y, n->data.sequence.items.start[i]), &p->keep[i]))
            return -1;
    }
    return 0;
}

static const scr_yaml_key_t profile_keys[] = {
    {"enabled", p_enabled},       {"path", p_path}, {"delta", p_delta}, {"seconds", p_seconds},
    {"keep_sample_type", p_keep},
};

static void profile_fini(scr_profile_t *p)
{
    lc_free(p->name);
    lc_free(p->path);
    for (size_t i = 0; i < p->n_keep; i++) {
        lc_free(p->keep[i].type);
        lc_free(p->keep[i].unit);
    }
    lc_free(p->keep);
    memset(p, 0, sizeof(*p));
}

static int pprof_config(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    raw_profiling_t *rp = t;
    rp->has_pprof_config = !scr_yaml_null(n);
    if (scr_yaml_mapping(y, n, "pprof_config") || scr_yaml_null(n))
        return scr_yaml_null(n) ? 0 : -1;
    size_t count = scr_yaml_len(n);
    rp->v = lc_xcalloc(count ? count : 1, sizeof(*rp->v));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = scr_yaml_get(y, p->key);
        const char *name = scr_yaml_scalar(kn);
        if (!name || !name[0])
            return scr_yaml_fail(y, kn, "pprof_config", "profile names must be strings");
        for (size_t i = 0; i < rp->n; i++)
            if (strcmp(rp->v[i].p.name, name) == 0)
                return scr_yaml_fail(y, kn, "pprof_config", "profile \"%.64s\" is listed twice",
                                     name);
        raw_profile_t *r = &rp->v[rp->n++];
        r->p.name = lc_xstrdup(name);
        char field[JOB_FIELD_MAX + 32];
        snprintf(field, sizeof(field), "pprof_config.%.64s", name);
        scr_yaml_table_t table = {profile_keys, LC_ARRAY_LEN(profile_keys), r};
        if (scr_yaml_fields(y, scr_yaml_get(y, p->value), field, &table, 1))
            return -1;
    }
    return 0;
}

static int path_prefix(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "path_prefix", &((raw_profiling_t *)t)->path_prefix);
}

/* filepath.Join(prefix, path) followed by Clean, as Parca builds the path:
 * repeated slashes collapse, "." and ".." segments resolve. */
static char *join_path(const char *prefix, const char *path)
{
    size_t cap = strlen(prefix) + strlen(path) + 3;
    char *joined = lc_xmalloc(cap);
    snprintf(joined, cap, "%s/%s", prefix, path);
    char **segs = lc_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    for (char *save = NULL, *s = strtok_r(joined, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (strcmp(s, ".") == 0)
            continue;
        if (strcmp(s, "..") == 0) {
            if (n)
                n--;
            continue;
        }
        segs[n++] = s;
    }
    char *out = lc_xmalloc(cap + 1);
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(out + used, cap + 1 - used, "/%s", segs[i]);
    if (!n)
        snprintf(out, cap + 1, "/");
    lc_free(segs);
    lc_free(joined);
    return out;
}

static void add_profile(scr_job_t *job, scr_profile_t *p, const char *prefix)
{
    scr_profile_t *dst = &job->profiles[job->n_profiles++];
    *dst = *p;
    memset(p, 0, sizeof(*p));
    if (prefix && prefix[0]) {
        char *joined = join_path(prefix, dst->path ? dst->path : "");
        lc_free(dst->path);
        dst->path = joined;
    }
    dst->cumulative = cumulative_name(dst->name) && !dst->delta;
}

/* The merge rules of parca.md §1.3. */
static void merge_profiles(scr_job_t *job, raw_profiling_t *rp)
{
    job->profiles = lc_xcalloc(LC_ARRAY_LEN(default_profiles) + rp->n, sizeof(*job->profiles));
    for (size_t d = 0; d < LC_ARRAY_LEN(default_profiles); d++) {
        raw_profile_t *user = NULL;
        for (size_t i = 0; i < rp->n && rp->has_pprof_config; i++)
            if (rp->v[i].p.name && strcmp(rp->v[i].p.name, default_profiles[d].name) == 0)
                user = &rp->v[i];
        scr_profile_t p = {0};
        if (user) {
            p = user->p;
            memset(&user->p, 0, sizeof(user->p));
            if (!user->enabled_set)
                p.enabled = true;
            if (!user->path_set) {
                lc_free(p.path);
                p.path = lc_xstrdup(default_profiles[d].path);
            }
        } else {
            p.name = lc_xstrdup(default_profiles[d].name);
            p.path = lc_xstrdup(default_profiles[d].path);
            p.enabled = true;
            p.delta = default_profiles[d].delta;
        }
        add_profile(job, &p, rp->path_prefix);
    }
    for (size_t i = 0; i < rp->n; i++)
        if (rp->v[i].p.name) /* a custom entry: taken as written */
            add_profile(job, &rp->v[i].p, rp->path_prefix);
}

static void raw_profiling_fini(raw_profiling_t *rp)
{
    for (size_t i = 0; i < rp->n; i++)
        profile_fini(&rp->v[i].p);
    lc_free(rp->v);
    lc_free(rp->path_prefix);
}

/* ---------------------------------------------------------------- job fields */

typedef struct job_parse_s {
    scr_job_t job;
    raw_profiling_t profiling;
    bool timeout_set, interval_set;
    bool has_relabel;
    yaml_node_t *node;
} job_parse_t;

static int j_name(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "job_name", &((job_parse_t *)t)->job.name);
}

static int j_interval(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    ((job_parse_t *)t)->interval_set = true;
    return scr_yaml_duration(y, n, "scrape_interval", &((job_parse_t *)t)->job.interval_ns);
}

static int j_timeout(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    ((job_parse_t *)t)->timeout_set = true;
    return scr_yaml_duration(y, n, "scrape_timeout", &((job_parse_t *)t)->job.timeout_ns);
}

static int j_scheme(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "scheme", &((job_parse_t *)t)->job.scheme);
}

static int j_normalized(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "normalized_addresses",
                         &((job_parse_t *)t)->job.normalized_addresses);
}

/* params: a map of key to a list of values (Go url.Values). */
static int j_params(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_job_t *job = &((job_parse_t *)t)->job;
    if (scr_yaml_mapping(y, n, "params") || scr_yaml_null(n))
        return scr_yaml_null(n) ? 0 : -1;
    job->params = lc_xcalloc(scr_yaml_len(n) + 1, sizeof(*job->params));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const char *key = scr_yaml_scalar(scr_yaml_get(y, p->key));
        if (!key || !key[0])
            return scr_yaml_fail(y, n, "params", "parameter names must be non-empty strings");
        scr_param_t *param = &job->params[job->n_params++];
        param->key = lc_xstrdup(key);
        yaml_node_t *v = scr_yaml_get(y, p->value);
        if (v->type != YAML_SEQUENCE_NODE)
            return scr_yaml_fail(y, v, "params", "the value of \"%.64s\" must be a list of strings",
                                 key);
        if (scr_yaml_strings(y, v, "params", &param->values, &param->n_values))
            return -1;
    }
    return 0;
}

static int j_profiling(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"pprof_config", pprof_config},
                                          {"path_prefix", path_prefix}};
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), &((job_parse_t *)t)->profiling};
    return scr_yaml_fields(y, n, "profiling_config", &table, 1);
}

static int j_relabel(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    job_parse_t *jp = t;
    char where[sizeof(y->where) + 32];
    snprintf(where, sizeof(where), "%s: %s: relabel_configs", y->source, y->where);
    scr_relabel_fini(&jp->job.relabel);
    if (scr_relabel_parse_yaml(y->doc, n, where, &jp->job.relabel, y->st))
        return -1;
    jp->has_relabel = jp->job.relabel.n > 0;
    return 0;
}

static int j_static(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_config_static(y, n, &((job_parse_t *)t)->job);
}

static int j_file_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_config_file_sd(y, n, &((job_parse_t *)t)->job);
}

static int j_dns_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_config_dns_sd(y, n, &((job_parse_t *)t)->job);
}

static int j_kube_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_config_kube_sd(y, n, &((job_parse_t *)t)->job);
}

static const scr_yaml_key_t job_keys[] = {
    {"job_name", j_name},
    {"scrape_interval", j_interval},
    {"scrape_timeout", j_timeout},
    {"scheme", j_scheme},
    {"params", j_params},
    {"normalized_addresses", j_normalized},
    {"profiling_config", j_profiling},
    {"relabel_configs", j_relabel},
    {"static_configs", j_static},
    {"file_sd_configs", j_file_sd},
    {"dns_sd_configs", j_dns_sd},
    {"kubernetes_sd_configs", j_kube_sd},
};

/* Prometheus discovery mechanisms Parca accepts that ember does not implement:
 * named in the error instead of "unknown field". */
static const char *const unsupported_sd[] = {
    "consul_sd_configs",       "ec2_sd_configs",
    "azure_sd_configs",        "gce_sd_configs",
    "digitalocean_sd_configs", "docker_sd_configs",
    "dockerswarm_sd_configs",  "eureka_sd_configs",
    "hetzner_sd_configs",      "http_sd_configs",
    "ionos_sd_configs",        "linode_sd_configs",
    "marathon_sd_configs",     "nomad_sd_configs",
    "openstack_sd_configs",    "ovhcloud_sd_configs",
    "puppetdb_sd_configs",     "scaleway_sd_configs",
    "triton_sd_configs",       "uyuni_sd_configs",
    "vultr_sd_configs",        "kuma_sd_configs",
    "serverset_sd_configs",    "nerve_sd_configs",
    "lightsail_sd_configs",    "oauth2",
};

static int check_unsupported(scr_yaml_t *y, yaml_node_t *map)
{
    if (scr_yaml_mapping(y, map, NULL) || scr_yaml_null(map))
        return scr_yaml_null(map) ? 0 : -1;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = scr_yaml_get(y, p->key);
        const char *key = scr_yaml_scalar(kn);
        for (size_t i = 0; key && i < LC_ARRAY_LEN(unsupported_sd); i++)
            if (strcmp(key, unsupported_sd[i]) == 0)
                return scr_yaml_fail(y, kn, key,
                                     "not supported by ember's scraper (supported: "
                                     "static_configs, file_sd_configs, dns_sd_configs, "
                                     "kubernetes_sd_configs, basic_auth, authorization, "
                                     "bearer_token)");
    }
    return 0;
}

/* Sets y->where to `job "<name>"` (or the list index) before the fields are
 * parsed, so that every later error names the job. */
static void job_where(scr_yaml_t *y, yaml_node_t *map, size_t index)
{
    snprintf(y->where, sizeof(y->where), "scrape_configs[%zu]", index);
    if (!map || map->type != YAML_MAPPING_NODE)
        return;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *key = scr_yaml_scalar(scr_yaml_get(y, p->key));
        const char *val = scr_yaml_scalar(scr_yaml_get(y, p->value));
        if (key && val && strcmp(key, "job_name") == 0 && val[0])
            snprintf(y->where, sizeof(y->where), "job \"%.100s\"", val);
    }
}

/* ---------------------------------------------------------------- validation */

static bool process_cpu_enabled(const scr_job_t *job)
{
    for (size_t i = 0; i < job->n_profiles; i++)
        if (job->profiles[i].enabled && strcmp(job->profiles[i].name, "process_cpu") == 0)
            return true;
    return false;
}

static int check_static_targets(scr_yaml_t *y, const job_parse_t *jp)
{
    if (jp->has_relabel)
        return 0; /* relabeling may still rewrite __address__ (parca.md §1.6 rule 3) */
    const scr_job_t *job = &jp->job;
    for (size_t g = 0; g < job->n_static; g++) {
        for (size_t t = 0; t < job->static_groups[g].n_targets; t++) {
            const char *addr = lc_labels_get(&job->static_groups[g].targets[t], "__address__");
            if (addr && strchr(addr, '/'))
                return scr_yaml_fail(y, jp->node, "static_configs",
                                     "\"%.100s\" is not a valid hostname", addr);
        }
    }
    return 0;
}

static int check_profiles(scr_yaml_t *y, const job_parse_t *jp)
{
    const scr_job_t *job = &jp->job;
    for (size_t i = 0; i < job->n_profiles; i++) {
        const scr_profile_t *p = &job->profiles[i];
        if (p->enabled && (!p->path || p->path[0] != '/'))
            return scr_yaml_fail(y, jp->node, "profiling_config",
                                 "pprof_config.%s: an enabled profile needs a path starting "
                                 "with /",
                                 p->name);
    }
    return 0;
}

static int check_job(scr_yaml_t *y, job_parse_t *jp)
{
    scr_job_t *job = &jp->job;
    if (!job->name || !job->name[0])
        return scr_yaml_fail(y, jp->node, "job_name", "job_name is empty");
    if (!jp->interval_set)
        job->interval_ns = SCR_DEFAULT_INTERVAL_NS;
    if (job->interval_ns <= 0)
        return scr_yaml_fail(y, jp->node, "scrape_interval", "must be greater than 0");
    if (!jp->timeout_set || job->timeout_ns == 0)
        job->timeout_ns = job->interval_ns + SCR_TIMEOUT_EXTRA_NS;
    if (job->timeout_ns <= job->interval_ns)
        return scr_yaml_fail(y, jp->node, "scrape_timeout",
                             "scrape timeout must be greater than the interval: %s", job->name);
    if (!job->scheme)
        job->scheme = lc_xstrdup("http");
    if (strcmp(job->scheme, "http") != 0 && strcmp(job->scheme, "https") != 0)
        return scr_yaml_fail(y, jp->node, "scheme", "invalid scheme \"%.32s\" (http or https)",
                             job->scheme);
    if (process_cpu_enabled(job) && job->timeout_ns < SCR_MIN_CPU_TIMEOUT_NS)
        return scr_yaml_fail(y, jp->node, "scrape_timeout",
                             "must be at least 2s when process_cpu is enabled");
    if (scr_config_client_check(y, &job->client))
        return -1;
    if (check_profiles(y, jp))
        return -1;
    return check_static_targets(y, jp);
}

/* ---------------------------------------------------------------- jobs */

static void job_fini(scr_job_t *job)
{
    lc_free(job->name);
    lc_free(job->scheme);
    for (size_t i = 0; i < job->n_params; i++) {
        lc_free(job->params[i].key);
        scr_strings_free(job->params[i].values, job->params[i].n_values);
    }
    lc_free(job->params);
    for (size_t i = 0; i < job->n_profiles; i++)
        profile_fini(&job->profiles[i]);
    lc_free(job->profiles);
    scr_relabel_fini(&job->relabel);
    scr_client_fini(&job->client);
    for (size_t i = 0; i < job->n_static; i++)
        scr_group_fini(&job->static_groups[i]);
    lc_free(job->static_groups);
    for (size_t i = 0; i < job->n_file_sd; i++)
        scr_strings_free(job->file_sd[i].files, job->file_sd[i].n_files);
    lc_free(job->file_sd);
    for (size_t i = 0; i < job->n_dns_sd; i++)
        scr_strings_free(job->dns_sd[i].names, job->dns_sd[i].n_names);
    lc_free(job->dns_sd);
    for (size_t i = 0; i < job->n_kube_sd; i++) {
        scr_kube_sd_t *k = &job->kube_sd[i];
        lc_free(k->api_server);
        scr_client_fini(&k->client);
        scr_strings_free(k->namespaces, k->n_namespaces);
        lc_free(k->label_selector);
        lc_free(k->field_selector);
    }
    lc_free(job->kube_sd);
    memset(job, 0, sizeof(*job));
}

static int parse_job(scr_yaml_t *y, yaml_node_t *n, size_t index, scr_job_t *out)
{
    job_parse_t jp = {.node = n};
    job_where(y, n, index);
    if (scr_yaml_null(n))
        return scr_yaml_fail(y, n, NULL, "empty or null scrape config section");
    scr_yaml_table_t tables[] = {
        {job_keys, LC_ARRAY_LEN(job_keys), &jp},
        {scr_client_keys, scr_n_client_keys, &jp.job.client},
    };
    int rc = check_unsupported(y, n);
    if (!rc)
        rc = scr_yaml_fields(y, n, NULL, tables, LC_ARRAY_LEN(tables));
    if (!rc)
        merge_profiles(&jp.job, &jp.profiling);
    if (!rc)
        rc = check_job(y, &jp);
    raw_profiling_fini(&jp.profiling);
    *out = jp.job;
    return rc;
}

static int scrape_configs(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_config_t *c = t;
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return scr_yaml_fail(y, n, "scrape_configs", "expected a list of scrape configs");
    size_t count = scr_yaml_len(n);
    if (count > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, "scrape_configs", "more than %d jobs", SCR_CONFIG_MAX_LIST);
    c->jobs = lc_xcalloc(count ? count : 1, sizeof(*c->jobs));
    for (size_t i = 0; i < count; i++) {
        int rc = parse_job(y, scr_yaml_get(y, n->data.sequence.items.start[i]), i, &c->jobs[i]);
        c->n_jobs++;
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->jobs[j].name, c->jobs[i].name) == 0)
                return scr_yaml_fail(
                    y, scr_yaml_get(y, n->data.sequence.items.start[i]), "job_name",
                    "found multiple scrape configs with job name \"%s\"", c->jobs[i].name);
    }
    y->where[0] = '\0';
    return 0;
}

static int object_storage(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    LC_UNUSED(t);
    return scr_yaml_mapping(y, n, "object_storage"); /* Parca's bucket: not used by ember */
}

/* ---------------------------------------------------------------- entry points */

int scr_config_parse(const char *text, size_t len, const char *source, scr_config_t **out,
                     lc_status_t *st)
{
    static const scr_yaml_key_t top_keys[] = {{"scrape_configs", scrape_configs},
                                              {"object_storage", object_storage}};
    *out = NULL;
    if (len > SCR_CONFIG_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: larger than %zu bytes", source,
                             SCR_CONFIG_MAX_BYTES);
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: YAML error: %s (line %zu)",
                               source, parser.problem ? parser.problem : "unknown",
                               (size_t)parser.problem_mark.line + 1);
        yaml_parser_delete(&parser);
        return rc;
    }
    scr_config_t *c = lc_xcalloc(1, sizeof(*c));
    scr_yaml_t y = {.doc = &doc, .st = st, .source = source};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    scr_yaml_table_t table = {top_keys, LC_ARRAY_LEN(top_keys), c};
    int rc = root ? scr_yaml_fields(&y, root, NULL, &table, 1) : 0;
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc) {
        scr_config_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int scr_config_load(const char *path, scr_config_t **out, lc_status_t *st)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: cannot open: %s", path,
                             lc_strerror(-errno));
    char *text = lc_xmalloc(SCR_CONFIG_MAX_BYTES + 1);
    size_t len = fread(text, 1, SCR_CONFIG_MAX_BYTES + 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    int rc = failed ? lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: read error", path)
                    : scr_config_parse(text, len, path, out, st);
    lc_free(text);
    return rc;
}

void scr_config_free(scr_config_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_jobs; i++)
        job_fini(&c->jobs[i]);
    lc_free(c->jobs);
    lc_free(c);
}
