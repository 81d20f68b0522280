/*
 * normalize.c — what /ingest uploads are called: the metric name (`__name__`)
 * of a pprof from its sample types (pyroscope-api.md §2.5), and the profile
 * type of a text/tree upload from the suffix of its app name (§2.10).
 */
#include <string.h>

#include "receive_int.h"

const char *ing_pprof_str(const Google__V1__Profile *p, int64_t idx)
{
    if (idx < 0 || (uint64_t)idx >= p->n_string_table || !p->string_table[idx])
        return "";
    return p->string_table[idx];
}

/* The rules of step 2, applied to one (display) name; NULL if none matches. */
static const char *metric_rule(const char *st)
{
    if (strstr(st, "cpu"))
        return "process_cpu";
    if (strstr(st, "alloc_") || strstr(st, "inuse_") || !strcmp(st, "space") ||
        !strcmp(st, "objects"))
        return "memory";
    if (strstr(st, "mutex_"))
        return "mutex";
    if (strstr(st, "block_"))
        return "block";
    if (strstr(st, "goroutines"))
        return "goroutines";
    return NULL;
}

const char *ing_metric_name(const Google__V1__Profile *p, const ing_stconfig_t *cfg)
{
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (strcmp(ing_pprof_str(p, p->sample_type[i]->type), "wall") == 0)
            return "wall";
    }
    const char *st = "";
    for (size_t i = 0; i < p->n_sample_type; i++) {
        st = ing_pprof_str(p, p->sample_type[i]->type);
        const Ember__V1__SampleTypeConfig *c = ing_stconfig_find(cfg, st);
        const char *name = c && c->display_name && *c->display_name ? c->display_name : st;
        const char *metric = metric_rule(name);
        if (metric)
            return metric;
    }
    return st; /* fallback: the last raw sample type string */
}

/* ---- app-name suffix -> profile type (§2.10). */
typedef struct app_suffix_s {
    const char *suffix;
    const char *metric;
    const char *type; /* NULL = the suffix itself */
    const char *unit;
} app_suffix_t;

static const app_suffix_t app_suffixes[] = {
    {"cpu", "process_cpu", "samples", "count"},
    {"itimer", "process_cpu", "samples", "count"},
    {"wall", "wall", "samples", "count"},
    {"seconds", "wall", "samples", "count"},
    {"nanoseconds", "wall", "samples", "count"},
    {"microseconds", "wall", "samples", "count"},
    {"milliseconds", "wall", "samples", "count"},
    {"inuse_objects", "memory", NULL, "count"},
    {"alloc_objects", "memory", NULL, "count"},
    {"inuse_space", "memory", NULL, "bytes"},
    {"alloc_space", "memory", NULL, "bytes"},
    {"goroutines", "goroutine", NULL, "count"},
    {"mutex_count", "mutex", "contentions", "count"},
    {"mutex_duration", "mutex", "delay", "nanoseconds"},
    {"block_count", "block", "contentions", "count"},
    {"block_duration", "block", "delay", "nanoseconds"},
    {"lock_count", "block", "contentions", "count"},
    {"lock_duration", "block", "delay", "nanoseconds"},
    {"alloc_in_new_tlab_objects", "memory", NULL, "count"},
    {"alloc_outside_tlab_objects", "memory", NULL, "count"},
    {"alloc_in_new_tlab_bytes", "memory", NULL, "bytes"},
    {"alloc_outside_tlab_bytes", "memory", NULL, "bytes"},
    {"live", "memory", NULL, "count"},
    {"exceptions", "exceptions", "samples", "count"},
    {"bytes", "memory", "samples", "bytes"},
};

int ing_app_type(const char *app_name, lc_arena_t *arena, ing_app_type_t *out, lc_status_t *st)
{
    const char *dot = strrchr(app_name, '.');
    const char *suffix = dot ? dot + 1 : "cpu";
    size_t service_len = dot ? (size_t)(dot - app_name) : strlen(app_name);
    for (size_t i = 0; i < LC_ARRAY_LEN(app_suffixes); i++) {
        const app_suffix_t *s = &app_suffixes[i];
        if (strcmp(s->suffix, suffix) != 0)
            continue;
        *out = (ing_app_type_t){
            .metric = s->metric,
            .sample_type = s->type ? s->type : s->suffix,
            .sample_unit = s->unit,
            .rate_scaled = !strcmp(s->metric, "process_cpu") || !strcmp(s->metric, "wall"),
            .service = lc_arena_strndup(arena, app_name, service_len),
        };
        if (!out->service)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        return 0;
    }
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown profile type: %s", suffix);
}
