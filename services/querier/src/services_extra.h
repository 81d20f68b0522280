/*
 * services_extra.h — the small Connect services served next to the querier:
 * settings.v1.SettingsService (per-tenant settings, persisted),
 * settings.v1.RecordingRulesService (recording rules, kept as settings: rules.h),
 * version.v1.Version, capabilities.v1.FeatureFlagsService,
 * status.v1.StatusService (build info, configuration as YAML) and
 * adhocprofiles.v1.AdHocProfileService (adhoc.h).
 *
 * qry_extra_new registers all of them on the HTTP server; their handlers run
 * on the thread pool like the querier's. Settings live in LMDB under the data
 * dir (`ember`) or in Redis (`ember-querier`, shared by all queriers); with
 * neither, the settings methods answer unimplemented and say why. Tenancy per lc/tenant.h: settings
 * act for exactly one tenant, feature flags need a tenant only to mirror
 * Pyroscope's auth (401 without X-Scope-OrgID), version needs none.
 */
#ifndef EMBER_SERVICES_EXTRA_H
#define EMBER_SERVICES_EXTRA_H

#include <stdbool.h>

#include <uv.h>

#include "lc/connect.h"
#include "lc/httpd.h"
#include "lc/settings_store.h"

typedef struct qry_extra_opts_s {
    bool multitenancy;
    const char *data_dir;                /* settings live in <data_dir>/settings, or */
    const char *settings_redis_url;      /* in this Redis (wins over data_dir), or */
    lc_settings_store_t *settings_store; /* in this store (borrowed; wins over both) */
    uint32_t redis_timeout_ms;           /* per Redis command; 0: the store's default */
    /* status.v1's YAML views (borrowed, must outlive the object); NULL: empty */
    const char *config_yaml, *config_diff_yaml, *config_default_yaml;
} qry_extra_opts_t;

typedef struct qry_extra_s qry_extra_t;

/* Opens the settings store (unless one is given) and registers the routes.
 * @note srv must outlive the returned object's routes (the process). */
int qry_extra_new(uv_loop_t *loop, const qry_extra_opts_t *opts, lc_httpd_t *srv,
                  qry_extra_t **out) LC_MUST_CHECK;
void qry_extra_free(qry_extra_t *x);

/* ---- shared by settings.c, version.c, capabilities.c (not for callers) ---- */

struct qry_extra_s {
    bool multitenancy;
    lc_settings_store_t *settings; /* NULL: no settings store configured */
    bool owns_settings;
    struct qry_route_s *routes; /* one per method, tenant checked first */
    const char *config_yaml, *config_diff_yaml, *config_default_yaml; /* borrowed */
    struct qry_adhoc_s *adhoc; /* adhocprofiles.v1 (adhoc.h) */
};

/* The value Version reports; Pyroscope's current querier API version. */
#define QRY_QUERIER_API_VERSION 1

/* Settings (and recording rules) are per tenant: exactly one, even on reads.
 * Without a store every call is unimplemented, whoever asks. */
int qry_settings_tenant(lc_http_req_t *req, const qry_extra_t *x, bool write, const char **tenant,
                        lc_status_t *st);
/* resource_exhausted: the request arena (capped) cannot hold the answer. */
int qry_fail_memory(lc_status_t *st);
int qry_settings_get(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data);
int qry_settings_set(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data);
int qry_settings_delete(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data);
/* settings.v1.RecordingRulesService (rules.c) */
int qry_rules_rpc_list(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data);
int qry_rules_rpc_get(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data);
int qry_rules_rpc_upsert(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int qry_rules_rpc_delete(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data);
int qry_version(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                lc_status_t *st, void *data);
int qry_status_build_info(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data);
int qry_status_config(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data);
int qry_status_diff_config(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data);
int qry_status_default_config(lc_http_req_t *req, const ProtobufCMessage *in,
                              ProtobufCMessage **out, lc_status_t *st, void *data);
/* GET /api/v1/status/buildinfo and /api/v1/status/config{,/diff,/default}, as
 * Pyroscope's gRPC gateway serves them. */
int qry_status_register_http(qry_extra_t *x, lc_httpd_t *srv) LC_MUST_CHECK;
int qry_feature_flags(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data);

#endif
