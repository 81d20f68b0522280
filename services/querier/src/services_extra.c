/*
 * services_extra.c — opens what the extra services need (the settings store:
 * LMDB, Redis or none) and registers settings.v1, version.v1 and
 * capabilities.v1 as Connect unary routes (run on the thread pool by
 * lc_connect_register).
 */
#include <stdio.h>
#include <string.h>

#include "capabilities/v1/featureflags.pb-c.h"
#include "lc/log.h"
#include "services_extra.h"
#include "settings/v1/setting.pb-c.h"
#include "version/v1/version.pb-c.h"

#define SETTINGS_SUBDIR "settings"

typedef struct extra_method_s {
    const char *path;
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn;
} extra_method_t;

static const extra_method_t methods[] = {
    {"/settings.v1.SettingsService/Get", &settings__v1__get_settings_request__descriptor,
     qry_settings_get},
    {"/settings.v1.SettingsService/Set", &settings__v1__set_settings_request__descriptor,
     qry_settings_set},
    {"/settings.v1.SettingsService/Delete", &settings__v1__delete_settings_request__descriptor,
     qry_settings_delete},
    {"/version.v1.Version/Version", &version__v1__version_request__descriptor, qry_version},
    {"/capabilities.v1.FeatureFlagsService/GetFeatureFlags",
     &capabilities__v1__get_feature_flags_request__descriptor, qry_feature_flags},
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
    int rc = open_settings(x, opts);
    for (size_t i = 0; i < LC_ARRAY_LEN(methods) && rc == 0; i++)
        rc = lc_connect_register(srv, methods[i].path, methods[i].in, methods[i].fn, x);
    if (rc) { /* start-up fails: routes registered so far are never served */
        LC_LOG_ERROR("cannot start the settings/version/capabilities services err=\"%s\"",
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
    lc_free(x);
}
