/*
 * services_extra.c — opens what the extra services need (the settings store:
 * LMDB, Redis or none) and registers settings.v1, version.v1,
 * capabilities.v1 and status.v1 as Connect unary routes (run on the thread pool by
 * qry_route_register, which checks the tenant before it reads the request,
 * as the querier's routes do).
 */
#include <stdio.h>
#include <string.h>

#include "adhoc.h"
#include "capabilities/v1/featureflags.pb-c.h"
#include "lc/log.h"
#include "querier_int.h"
#include "services_extra.h"
#include "settings/v1/recording_rules.pb-c.h"
#include "settings/v1/setting.pb-c.h"
#include "status/v1/status.pb-c.h"
#include "version/v1/version.pb-c.h"

#define SETTINGS_SUBDIR "settings"

typedef struct extra_method_s {
    const char *path;
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn;
    bool needs_tenant; /* version.v1 has no auth in Pyroscope either */
    lc_http_scope_t scope;
} extra_method_t;

static const extra_method_t methods[] = {
    {"/settings.v1.SettingsService/Get", &settings__v1__get_settings_request__descriptor,
     qry_settings_get, true, LC_HTTP_SCOPE_READ},
    {"/settings.v1.SettingsService/Set", &settings__v1__set_settings_request__descriptor,
     qry_settings_set, true, LC_HTTP_SCOPE_WRITE},
    {"/settings.v1.SettingsService/Delete", &settings__v1__delete_settings_request__descriptor,
     qry_settings_delete, true, LC_HTTP_SCOPE_WRITE},
    {"/settings.v1.RecordingRulesService/ListRecordingRules",
     &settings__v1__list_recording_rules_request__descriptor, qry_rules_rpc_list, true,
     LC_HTTP_SCOPE_READ},
    {"/settings.v1.RecordingRulesService/GetRecordingRule",
     &settings__v1__get_recording_rule_request__descriptor, qry_rules_rpc_get, true,
     LC_HTTP_SCOPE_READ},
    {"/settings.v1.RecordingRulesService/UpsertRecordingRule",
     &settings__v1__upsert_recording_rule_request__descriptor, qry_rules_rpc_upsert, true,
     LC_HTTP_SCOPE_WRITE},
    {"/settings.v1.RecordingRulesService/DeleteRecordingRule",
     &settings__v1__delete_recording_rule_request__descriptor, qry_rules_rpc_delete, true,
     LC_HTTP_SCOPE_WRITE},
    {"/version.v1.Version/Version", &version__v1__version_request__descriptor, qry_version, false,
     LC_HTTP_SCOPE_PUBLIC},
    {"/capabilities.v1.FeatureFlagsService/GetFeatureFlags",
     &capabilities__v1__get_feature_flags_request__descriptor, qry_feature_flags, true,
     LC_HTTP_SCOPE_READ},
    {"/status.v1.StatusService/GetBuildInfo", &status__v1__get_build_info_request__descriptor,
     qry_status_build_info, true, LC_HTTP_SCOPE_READ},
    {"/status.v1.StatusService/GetConfig", &status__v1__get_config_request__descriptor,
     qry_status_config, true, LC_HTTP_SCOPE_READ},
    {"/status.v1.StatusService/GetDiffConfig", &status__v1__get_config_request__descriptor,
     qry_status_diff_config, true, LC_HTTP_SCOPE_READ},
    {"/status.v1.StatusService/GetDefaultConfig", &status__v1__get_config_request__descriptor,
     qry_status_default_config, true, LC_HTTP_SCOPE_READ},
};

static int open_settings(qry_extra_t *x, const qry_extra_opts_t *opts)
{
    if (opts->settings_store) {
        x->settings = opts->settings_store;
        return 0;
    }
    if (opts->settings_redis_url && *opts->settings_redis_url) {
        int rc = lc_settings_store_open_redis(opts->settings_redis_url, opts->redis_timeout_ms,
                                              &x->settings);
        x->owns_settings = rc == 0;
        return rc;
    }
    if (!opts->data_dir)
        return 0; /* no store: the settings methods say so */
    size_t len = strlen(opts->data_dir) + sizeof(SETTINGS_SUBDIR) + 1;
    char *dir = lc_xmalloc(len);
    snprintf(dir, len, "%s/%s", opts->data_dir, SETTINGS_SUBDIR);
    int rc = lc_settings_store_open_lmdb(dir, &x->settings);
    lc_free(dir);
    x->owns_settings = rc == 0;
    return rc;
}

int qry_extra_new(uv_loop_t *loop, const qry_extra_opts_t *opts, lc_httpd_t *srv, qry_extra_t **out)
{
    LC_UNUSED(loop);
    qry_extra_t *x = lc_xcalloc(1, sizeof(*x));
    x->multitenancy = opts->multitenancy;
    x->config_yaml = opts->config_yaml;
    x->config_diff_yaml = opts->config_diff_yaml;
    x->config_default_yaml = opts->config_default_yaml;
    int rc = open_settings(x, opts);
    x->routes = lc_xcalloc(LC_ARRAY_LEN(methods), sizeof(*x->routes));
    for (size_t i = 0; i < LC_ARRAY_LEN(methods) && rc == 0; i++) {
        x->routes[i] = (qry_route_t){
            .in = methods[i].in,
            .unary = methods[i].fn,
            .data = x,
            /* without multitenancy the check always passes (anonymous) */
            .multitenancy = methods[i].needs_tenant && x->multitenancy,
        };
        rc = qry_route_register(srv, methods[i].path, methods[i].scope, &x->routes[i]);
    }
    if (rc == 0)
        rc = qry_status_register_http(x, srv);
    if (rc == 0) {
        x->adhoc = qry_adhoc_new(x->multitenancy);
        rc = qry_adhoc_register(x->adhoc, srv);
    }
    if (rc) { /* start-up fails: routes registered so far are never served */
        LC_LOG_ERROR("cannot start the settings/version/capabilities/status services err=\"%s\"",
                     lc_strerror(rc));
        qry_extra_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

void qry_extra_free(qry_extra_t *x)
{
    if (!x)
        return;
    if (x->owns_settings)
        lc_settings_store_free(x->settings);
    qry_adhoc_free(x->adhoc);
    lc_free(x->routes);
    lc_free(x);
}
