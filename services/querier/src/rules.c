/*
 * rules.c — settings.v1.RecordingRulesService (List, Get, Upsert, Delete)
 * over the rules kept in the settings store (rules.h). Answers follow
 * Pyroscope's handler: rules carry their profile type (from the
 * __profile_type__ matcher) and provisioned=false; a missing or blank id on
 * Get/Delete is invalid_argument, an unknown one not_found. Tenancy as for
 * settings: exactly one tenant, write scope for Upsert and Delete.
 */
#include <string.h>

#include "rules.h"
#include "services_extra.h"

/* The API form of a stored rule (shares the stored rule's strings). */
static Settings__V1__RecordingRule *api_rule(const Settings__V1__RecordingRuleStore *s,
                                             lc_arena_t *a)
{
    Settings__V1__RecordingRule *r = lc_arena_alloc(a, sizeof(*r));
    if (!r)
        return NULL;
    settings__v1__recording_rule__init(r);
    r->id = s->id;
    r->metric_name = s->metric_name;
    r->profile_type = (char *)qry_rule_profile_type(s, a);
    r->n_matchers = s->n_matchers;
    r->matchers = s->matchers;
    r->n_group_by = s->n_group_by;
    r->group_by = s->group_by;
    r->n_external_labels = s->n_external_labels;
    r->external_labels = s->external_labels;
    r->generation = s->generation;
    r->stacktrace_filter = s->stacktrace_filter;
    return r->profile_type ? r : NULL;
}

/* Get and Delete take an id with surrounding blanks trimmed; none is an error. */
static const char *request_id(char *id, lc_arena_t *a, lc_status_t *st)
{
    const char *out = qry_rule_trim(id, a);
    if (!out)
        qry_fail_memory(st);
    else if (!out[0])
        lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid request: id is required");
    return out && out[0] ? out : NULL;
}

int qry_rules_rpc_list(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const char *tenant;
    Settings__V1__RecordingRuleStore **stored;
    size_t n;
    LC_UNUSED(in);
    if (qry_settings_tenant(req, x, false, &tenant, st) ||
        qry_rules_list(x->settings, tenant, req->arena, &stored, &n, st))
        return -1;
    Settings__V1__ListRecordingRulesResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Settings__V1__RecordingRule **v = lc_arena_calloc(req->arena, n ? n : 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_memory(st);
    settings__v1__list_recording_rules_response__init(resp);
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = api_rule(stored[i], req->arena)))
            return qry_fail_memory(st);
    resp->rules = v;
    resp->n_rules = n;
    *out = &resp->base;
    return 0;
}

int qry_rules_rpc_get(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const Settings__V1__GetRecordingRuleRequest *r =
        (const Settings__V1__GetRecordingRuleRequest *)in;
    const char *tenant, *id;
    Settings__V1__RecordingRuleStore *stored;
    if (!(id = request_id(r->id, req->arena, st)) ||
        qry_settings_tenant(req, x, false, &tenant, st) ||
        qry_rules_get(x->settings, tenant, id, req->arena, &stored, st))
        return -1;
    Settings__V1__GetRecordingRuleResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_memory(st);
    settings__v1__get_recording_rule_response__init(resp);
    if (!(resp->rule = api_rule(stored, req->arena)))
        return qry_fail_memory(st);
    *out = &resp->base;
    return 0;
}

/* The stored form of a validated upsert (shares the request's strings). */
static Settings__V1__RecordingRuleStore *
store_form(const Settings__V1__UpsertRecordingRuleRequest *r, lc_arena_t *a)
{
    Settings__V1__RecordingRuleStore *s = lc_arena_alloc(a, sizeof(*s));
    if (!s)
        return NULL;
    settings__v1__recording_rule_store__init(s);
    s->id = r->id;
    s->metric_name = r->metric_name;
    s->n_matchers = r->n_matchers;
    s->matchers = r->matchers;
    s->n_group_by = r->n_group_by;
    s->group_by = r->group_by;
    s->n_external_labels = r->n_external_labels;
    s->external_labels = r->external_labels;
    s->generation = r->generation;
    s->stacktrace_filter = r->stacktrace_filter;
    return s;
}

int qry_rules_rpc_upsert(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    /* validation normalises the request in place; it is ours (arena) */
    Settings__V1__UpsertRecordingRuleRequest *r = (Settings__V1__UpsertRecordingRuleRequest *)in;
    const char *tenant;
    if (qry_rule_validate(r, req->arena, st) || qry_settings_tenant(req, x, true, &tenant, st))
        return -1;
    Settings__V1__RecordingRuleStore *stored = store_form(r, req->arena);
    if (!stored)
        return qry_fail_memory(st);
    if (qry_rules_upsert(x->settings, tenant, stored, req->arena, st))
        return -1;
    Settings__V1__UpsertRecordingRuleResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_memory(st);
    settings__v1__upsert_recording_rule_response__init(resp);
    if (!(resp->rule = api_rule(stored, req->arena)))
        return qry_fail_memory(st);
    *out = &resp->base;
    return 0;
}

int qry_rules_rpc_delete(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const Settings__V1__DeleteRecordingRuleRequest *r =
        (const Settings__V1__DeleteRecordingRuleRequest *)in;
    const char *tenant, *id;
    if (!(id = request_id(r->id, req->arena, st)) ||
        qry_settings_tenant(req, x, true, &tenant, st) ||
        qry_rules_delete(x->settings, tenant, id, req->arena, st))
        return -1;
    Settings__V1__DeleteRecordingRuleResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_memory(st);
    settings__v1__delete_recording_rule_response__init(resp);
    *out = &resp->base;
    return 0;
}
