/*
 * rules_eval.c — the rules of each tenant, read from the settings store and
 * compiled (selectors parsed once), and the point each written series makes
 * for each rule it matches (rules_eval.h). The sums live in rules_sums.c.
 */
#include <string.h>

#include "lc/clock.h"
#include "lc/log.h"
#include "lc/pbjson.h"
#include "rules_eval_int.h"
#include "settings/v1/recording_rules.pb-c.h"

#define RULES_LIST_ARENA_BYTES (4u << 20)

/* ---------------------------------------------------------------- compiling */

static void rule_fini(rule_t *r)
{
    for (size_t i = 0; i < r->n_selectors; i++)
        lc_selector_fini(&r->selectors[i]);
    lc_free(r->selectors);
    for (size_t i = 0; i < r->n_group_by; i++)
        lc_free(r->group_by[i]);
    lc_free(r->group_by);
    for (size_t i = 0; i < r->n_external; i++) {
        lc_free((char *)r->external[i].name);
        lc_free((char *)r->external[i].value);
    }
    lc_free(r->external);
    lc_free(r->id);
    lc_free(r->metric);
    lc_free(r->function);
}

static void copy_labels(rule_t *r, const Settings__V1__RecordingRuleStore *m)
{
    r->group_by = lc_xcalloc(m->n_group_by ? m->n_group_by : 1, sizeof(*r->group_by));
    for (size_t i = 0; i < m->n_group_by; i++)
        r->group_by[r->n_group_by++] = lc_xstrdup(m->group_by[i]);
    r->external = lc_xcalloc(m->n_external_labels ? m->n_external_labels : 1, sizeof(*r->external));
    for (size_t i = 0; i < m->n_external_labels; i++, r->n_external++) {
        r->external[i].name = lc_xstrdup(m->external_labels[i]->name);
        r->external[i].value = lc_xstrdup(m->external_labels[i]->value);
    }
}

/* A stored rule made ready to match; false (logged) when its matchers no
 * longer parse (they did when it was stored). */
static bool rule_compile(rule_t *r, const Settings__V1__RecordingRuleStore *m)
{
    memset(r, 0, sizeof(*r));
    r->selectors = lc_xcalloc(m->n_matchers ? m->n_matchers : 1, sizeof(*r->selectors));
    for (size_t i = 0; i < m->n_matchers; i++, r->n_selectors++) {
        lc_status_t st = {0};
        if (lc_selector_parse(m->matchers[i], strlen(m->matchers[i]), &r->selectors[i], &st)) {
            LC_LOG_WARN("recording rule skipped: matcher does not parse id=%s err=\"%s\"", m->id,
                        st.msg);
            rule_fini(r);
            return false;
        }
    }
    r->id = lc_xstrdup(m->id);
    r->metric = lc_xstrdup(m->metric_name);
    const Settings__V1__StacktraceFilter *f = m->stacktrace_filter;
    if (f && f->function_name && f->function_name->function_name[0])
        r->function = lc_xstrdup(f->function_name->function_name);
    copy_labels(r, m);
    return true;
}

static void tenant_clear(tenant_rules_t *t)
{
    for (size_t i = 0; i < t->n_rules; i++)
        rule_fini(&t->rules[i]);
    lc_free(t->rules);
    t->rules = NULL;
    t->n_rules = 0;
}

/* Decodes the stored rules among the tenant's settings into t. */
static void tenant_compile(tenant_rules_t *t, const lc_setting_t *all, size_t n, lc_arena_t *a)
{
    t->rules = lc_xcalloc(n ? n : 1, sizeof(*t->rules));
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(all[i].name, LC_SETTINGS_RULE_PREFIX, sizeof(LC_SETTINGS_RULE_PREFIX) - 1) != 0)
            continue;
        ProtobufCMessage *m = NULL;
        lc_status_t st = {0};
        if (lc_pbjson_decode(&settings__v1__recording_rule_store__descriptor,
                             (const uint8_t *)all[i].value, strlen(all[i].value), &alloc, &m,
                             &st) == 0 &&
            rule_compile(&t->rules[t->n_rules], (const Settings__V1__RecordingRuleStore *)m))
            t->n_rules++;
    }
}

/* Reads the tenant's rules again; on a store error the old ones stay. */
static void tenant_load(ing_rules_t *r, tenant_rules_t *t, int64_t now_ms)
{
    lc_arena_t *a = lc_arena_new(RULES_LIST_ARENA_BYTES);
    lc_setting_t *all;
    size_t n;
    int rc = lc_settings_store_list(r->settings, t->tenant, a, &all, &n);
    if (rc == 0) {
        tenant_clear(t);
        tenant_compile(t, all, n, a);
    } else {
        LC_LOG_WARN("recording rules: cannot read the rules tenant=%s err=\"%s\"", t->tenant,
                    lc_strerror(rc));
    }
    t->loaded_ms = now_ms;
    lc_arena_free(a);
}

/* The tenant's rules, (re)loaded when missing or older than refresh_ms;
 * NULL past LC_RULES_MAX_TENANTS tenants. */
static tenant_rules_t *tenant_rules(ing_rules_t *r, const char *tenant)
{
    int64_t now_ms = lc_realtime_ns() / 1000000;
    tenant_rules_t *t = NULL;
    for (size_t i = 0; i < r->n_tenants && !t; i++)
        if (strcmp(r->tenants[i].tenant, tenant) == 0)
            t = &r->tenants[i];
    if (!t) {
        if (r->n_tenants == LC_RULES_MAX_TENANTS)
            return NULL;
        t = &r->tenants[r->n_tenants++];
        t->tenant = lc_xstrdup(tenant);
        t->loaded_ms = 0; /* never: loaded below */
    }
    if (now_ms - t->loaded_ms >= r->refresh_ms)
        tenant_load(r, t, now_ms);
    return t;
}

void ing_rules_tenants_free(ing_rules_t *r)
{
    for (size_t i = 0; i < r->n_tenants; i++) {
        tenant_clear(&r->tenants[i]);
        lc_free(r->tenants[i].tenant);
    }
    lc_free(r->tenants);
}

/* ---------------------------------------------------------------- matching */

static bool rule_matches(const rule_t *rule, const lc_labels_t *ls)
{
    for (size_t i = 0; i < rule->n_selectors; i++)
        if (lc_selector_match(&rule->selectors[i], ls) <= 0) /* undecided: no point */
            return false;
    return true;
}

/* Whether a frame of sample's stack is function name fn. */
static bool stack_has(const ing_rules_series_t *s, const Google__V1__Sample *sample, const char *fn)
{
    for (size_t i = 0; i < sample->n_location_id; i++) {
        const Google__V1__Location *loc = lc_pprof_location(s->index, sample->location_id[i]);
        for (size_t k = 0; loc && k < loc->n_line; k++) {
            const Google__V1__Function *f = lc_pprof_function(s->index, loc->line[k]->function_id);
            if (f && strcmp(lc_pprof_str(s->profile, f->name), fn) == 0)
                return true;
        }
    }
    return false;
}

/* The rule's value for the series: the total, or the function's total. */
static double series_value(const ing_rules_series_t *s, const char *fn)
{
    double sum = 0;
    size_t n = s->samples ? s->n_samples : s->profile->n_sample;
    for (size_t i = 0; i < n; i++) {
        const Google__V1__Sample *sample = s->profile->sample[s->samples ? s->samples[i] : i];
        if (fn && !stack_has(s, sample, fn))
            continue;
        sum += (double)(s->values ? s->values[i] : sample->value[s->type_idx]);
    }
    return sum;
}

void ing_rules_observe(ing_rules_t *r, const ing_rules_series_t *s)
{
    const tenant_rules_t *t = tenant_rules(r, s->tenant);
    if (!t) {
        lc_metric_add(r->m_no_tenant, 1);
        return;
    }
    int64_t step = r->step_ms;
    int64_t time_ms = s->time_ns / 1000000;
    /* SelectSeries' rule (pyroscope-api.md §5.8): a profile at t counts at
     * the first multiple of the step at or after t, the point's time. */
    int64_t below = ((time_ms % step) + step) % step;
    int64_t bucket = time_ms - below + (below ? step : 0);
    for (size_t i = 0; i < t->n_rules; i++)
        if (rule_matches(&t->rules[i], s->labels))
            ing_rules_pending_add(r, &t->rules[i], s->labels, bucket,
                                  series_value(s, t->rules[i].function));
}
