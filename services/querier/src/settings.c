/*
 * settings.c — settings.v1.SettingsService (Get, Set, Delete) over the
 * per-tenant settings store (lc/settings_store.h).
 *
 * Semantics follow Pyroscope's settings handler: Set without a modifiedAt
 * (<= 0) is stamped with the current time in ms; a Set or Delete older than
 * the stored setting fails with already_exists ("newer update already
 * written"); Get lists the tenant's settings sorted by name; Delete of a
 * missing name succeeds. Settings belong to exactly one tenant, so an
 * X-Scope-OrgID naming several ("a|b") is invalid_argument here, as in
 * Pyroscope. Names and values must be valid UTF-8 (proto3 strings). Without a
 * store (an ember-querier not given --redis.url) every call is unimplemented.
 * Names under QRY_RULE_SETTING_PREFIX hold recording rules (rules.h): Get
 * leaves them out, Set and Delete refuse them.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "lc/clock.h"
#include "lc/tenant.h"
#include "lc/utf8.h"
#include "rules.h"
#include "services_extra.h"
#include "settings/v1/setting.pb-c.h"

int qry_settings_tenant(lc_http_req_t *req, const qry_extra_t *x, bool write, const char **tenant,
                        lc_status_t *st)
{
    const char *const *tenants;
    size_t n;
    if (!x->settings)
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "settings need a store shared by every querier: start "
                             "ember-querier with --redis.url");
    if (write) /* Set and Delete change the tenant's settings: write scope */
        return lc_tenant_write(req, x->multitenancy, tenant, st);
    if (lc_tenants_read(req, x->multitenancy, &tenants, &n, st))
        return -1;
    if (n != 1)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "settings belong to one tenant; X-Scope-OrgID names %zu", n);
    *tenant = tenants[0];
    return 0;
}

/* Maps a settings-store error for setting `name` to a client status. */
static int store_fail(lc_status_t *st, int rc, const char *name)
{
    switch (rc) {
    case -EEXIST:
        return lc_status_set(st, LC_CODE_ALREADY_EXISTS,
                             "failed to update %.256s: newer update already written", name);
    case LC_EINPUT:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no setting name provided");
    case LC_ETOOBIG:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "setting names are limited to %d bytes and values to %u bytes",
                             LC_SETTINGS_NAME_MAX_BYTES, LC_SETTINGS_VALUE_MAX_BYTES);
    case LC_EFULL:
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "a tenant has at most %d settings",
                             LC_SETTINGS_MAX_PER_TENANT);
    case -ENOTCONN: /* a shared backend (Redis) is down: retry later */
        return lc_status_set(st, LC_CODE_UNAVAILABLE, "the settings store cannot be reached");
    default:
        return lc_status_set(st, LC_CODE_INTERNAL, "settings store: %s", lc_strerror(rc));
    }
}

/* The request arena (capped) cannot hold the answer. */
int qry_fail_memory(lc_status_t *st)
{
    return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "the answer exceeds the request memory");
}

static Settings__V1__Setting *setting_message(lc_arena_t *a, const lc_setting_t *s)
{
    Settings__V1__Setting *m = lc_arena_alloc(a, sizeof(*m));
    if (!m)
        return NULL;
    settings__v1__setting__init(m);
    m->name = (char *)s->name;
    m->value = (char *)(s->value ? s->value : "");
    m->modifiedat = s->modified_at_ms;
    return m;
}

int qry_settings_get(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const char *tenant;
    LC_UNUSED(in);
    if (qry_settings_tenant(req, x, false, &tenant, st))
        return -1;
    lc_setting_t *list;
    size_t n;
    int rc = lc_settings_store_list(x->settings, tenant, req->arena, &list, &n);
    if (rc == LC_ETOOBIG)
        return qry_fail_memory(st);
    if (rc)
        return store_fail(st, rc, "");
    Settings__V1__GetSettingsResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Settings__V1__Setting **v = n ? lc_arena_calloc(req->arena, n, sizeof(*v)) : NULL;
    if (!resp || (n && !v))
        return qry_fail_memory(st);
    settings__v1__get_settings_response__init(resp);
    for (size_t i = 0; i < n; i++) {
        v[i] = setting_message(req->arena, &list[i]);
        if (!v[i])
            return qry_fail_memory(st);
    }
    resp->settings = v;
    resp->n_settings = 0;
    for (size_t i = 0; i < n; i++) /* recording rules are not settings (rules.h) */
        if (!qry_rule_setting_name(v[i]->name))
            v[resp->n_settings++] = v[i];
    *out = &resp->base;
    return 0;
}

/* Names under QRY_RULE_SETTING_PREFIX hold recording rules: only
 * RecordingRulesService writes them, so a rule is never half-valid. */
static int reserved_name(const char *name, lc_status_t *st)
{
    if (!qry_rule_setting_name(name))
        return 0;
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                         "setting names starting with " QRY_RULE_SETTING_PREFIX
                         " are reserved for recording rules");
}

static int check_setting(const Settings__V1__Setting *m, lc_status_t *st)
{
    if (!m)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no setting values provided");
    if (!m->name[0])
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no setting name provided");
    if (reserved_name(m->name, st))
        return -1;
    if (!lc_utf8_valid_str(m->name) || !lc_utf8_valid_str(m->value))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "setting %s is not valid UTF-8",
                             lc_utf8_valid_str(m->name) ? "value" : "name");
    return 0;
}

int qry_settings_set(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const Settings__V1__SetSettingsRequest *r = (const Settings__V1__SetSettingsRequest *)in;
    const char *tenant;
    if (qry_settings_tenant(req, x, true, &tenant, st) || check_setting(r->setting, st))
        return -1;
    lc_setting_t s = {.name = r->setting->name,
                      .value = r->setting->value,
                      .modified_at_ms = r->setting->modifiedat > 0 ? r->setting->modifiedat
                                                                   : lc_realtime_ns() / 1000000};
    int rc = lc_settings_store_set(x->settings, tenant, &s);
    if (rc)
        return store_fail(st, rc, s.name);
    Settings__V1__SetSettingsResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_memory(st);
    settings__v1__set_settings_response__init(resp);
    resp->setting = setting_message(req->arena, &s);
    if (!resp->setting)
        return qry_fail_memory(st);
    *out = &resp->base;
    return 0;
}

int qry_settings_delete(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const Settings__V1__DeleteSettingsRequest *r = (const Settings__V1__DeleteSettingsRequest *)in;
    const char *tenant;
    if (qry_settings_tenant(req, x, true, &tenant, st))
        return -1;
    if (!r->name[0])
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no setting name provided");
    if (reserved_name(r->name, st))
        return -1;
    int rc = lc_settings_store_delete(x->settings, tenant, r->name, lc_realtime_ns() / 1000000);
    if (rc)
        return store_fail(st, rc, r->name);
    Settings__V1__DeleteSettingsResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_memory(st);
    settings__v1__delete_settings_response__init(resp);
    *out = &resp->base;
    return 0;
}
