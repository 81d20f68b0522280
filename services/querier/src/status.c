/*
 * status.c — status.v1.StatusService: build information and the running
 * configuration as YAML (effective, what differs from the defaults, the
 * defaults), as Pyroscope's `profilecli` and Grafana read them.
 *
 * The YAML is written once by the process before the nodes start (the
 * settings never change while it runs) and borrowed here; a secret setting
 * is written "<redacted>" (lc_cfg_yaml). Pyroscope's keys are its own; ember's
 * are its settings' names, in the flat form --config.file reads back.
 * Like Pyroscope (auth interceptor on this service), multi-tenant mode wants
 * an X-Scope-OrgID; no answer depends on which tenant asks.
 * Threading: handlers run on the thread pool; everything they read is
 * immutable after start-up.
 */
#include <string.h>

#include "google/api/httpbody.pb-c.h"
#include "lc/pbjson.h"
#include "lc/tenant.h"
#include "querier_int.h"
#include "services_extra.h"
#include "status/v1/status.pb-c.h"

/* ember has no release yet: every build is a development build. */
#define STATUS_VERSION "0.0.0-dev"
#ifndef EMBER_GIT_REVISION /* set by CMake from `git` at configure time */
#define EMBER_GIT_REVISION "unknown"
#endif
#ifndef EMBER_GIT_BRANCH
#define EMBER_GIT_BRANCH "unknown"
#endif
#ifndef EMBER_BUILD_USER
#define EMBER_BUILD_USER "unknown"
#endif
#ifndef EMBER_BUILD_DATE
#define EMBER_BUILD_DATE "unknown"
#endif
/* Pyroscope reports its Go runtime here; ember reports the C compiler it was
 * built with, the nearest fact a bug report needs. */
#ifdef __VERSION__
#define STATUS_COMPILER "cc " __VERSION__
#else
#define STATUS_COMPILER "cc"
#endif

static int status_tenant_check(lc_http_req_t *req, const qry_extra_t *x, lc_status_t *st)
{
    const char *const *tenants;
    size_t n_tenants;
    return lc_tenants_read(req, x->multitenancy, &tenants, &n_tenants, st);
}

static void fill_build_info(Status__V1__GetBuildInfoResponse *resp, Status__V1__GetBuildInfoData *d)
{
    status__v1__get_build_info_response__init(resp);
    status__v1__get_build_info_data__init(d);
    d->version = (char *)STATUS_VERSION;
    d->revision = (char *)EMBER_GIT_REVISION;
    d->branch = (char *)EMBER_GIT_BRANCH;
    d->build_user = (char *)EMBER_BUILD_USER;
    d->build_date = (char *)EMBER_BUILD_DATE;
    d->go_version = (char *)STATUS_COMPILER;
    resp->status = (char *)"success";
    resp->data = d;
}

int qry_status_build_info(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    if (status_tenant_check(req, data, st))
        return -1;
    Status__V1__GetBuildInfoResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Status__V1__GetBuildInfoData *d = lc_arena_alloc(req->arena, sizeof(*d));
    if (!resp || !d)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    fill_build_info(resp, d);
    *out = &resp->base;
    return 0;
}

/* An HttpBody of YAML text (borrowed; it outlives every request). */
static int yaml_body(lc_http_req_t *req, const qry_extra_t *x, const char *yaml,
                     ProtobufCMessage **out, lc_status_t *st)
{
    if (status_tenant_check(req, x, st))
        return -1;
    Google__Api__HttpBody *body = lc_arena_alloc(req->arena, sizeof(*body));
    if (!body)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    google__api__http_body__init(body);
    body->content_type = (char *)"text/plain; charset=utf-8";
    body->data.data = (uint8_t *)(yaml ? yaml : "");
    body->data.len = yaml ? strlen(yaml) : 0;
    *out = &body->base;
    return 0;
}

int qry_status_config(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    LC_UNUSED(in);
    return yaml_body(req, x, x->config_yaml, out, st);
}

int qry_status_diff_config(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    LC_UNUSED(in);
    return yaml_body(req, x, x->config_diff_yaml, out, st);
}

int qry_status_default_config(lc_http_req_t *req, const ProtobufCMessage *in,
                              ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    LC_UNUSED(in);
    return yaml_body(req, x, x->config_default_yaml, out, st);
}

/* ---- the HTTP GETs Pyroscope's gRPC gateway serves for the same methods ----
 * /api/v1/status/buildinfo answers the message as JSON; the config paths
 * answer the YAML itself (the gateway writes an HttpBody's bytes raw, with
 * its content type). Cheap and non-blocking: they run on the loop. */

static lc_http_result_t buildinfo_get(lc_http_req_t *req, void *data)
{
    LC_UNUSED(data);
    Status__V1__GetBuildInfoResponse resp;
    Status__V1__GetBuildInfoData d;
    fill_build_info(&resp, &d);
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED);
    if (lc_pbjson_encode(&resp.base, &body) == 0) {
        lc_http_reply(req, 200, "application/json", body.data, body.len);
    } else {
        lc_status_t st;
        lc_status_set(&st, LC_CODE_INTERNAL, "encoding the build info");
        lc_http_error(req, &st);
    }
    lc_buf_fini(&body);
    return LC_HTTP_DONE;
}

static lc_http_result_t config_get(lc_http_req_t *req, void *data)
{
    const char *const *yaml = data;
    const char *text = *yaml ? *yaml : "";
    lc_http_reply(req, 200, "text/plain; charset=utf-8", text, strlen(text));
    return LC_HTTP_DONE;
}

int qry_status_register_http(qry_extra_t *x, lc_httpd_t *srv)
{
    const qry_get_route_t routes[] = {
        {"/api/v1/status/buildinfo", buildinfo_get, NULL},
        {"/api/v1/status/config", config_get, &x->config_yaml},
        {"/api/v1/status/config/diff", config_get, &x->config_diff_yaml},
        {"/api/v1/status/config/default", config_get, &x->config_default_yaml},
    };
    return qry_register_gets(srv, routes, LC_ARRAY_LEN(routes), false);
}
