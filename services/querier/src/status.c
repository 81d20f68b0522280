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
#include "lc/tenant.h"
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

static int check_tenant(lc_http_req_t *req, const qry_extra_t *x, lc_status_t *st)
{
    const char *const *tenants;
    size_t n_tenants;
    return lc_tenants_read(req, x->multitenancy, &tenants, &n_tenants, st);
}

int qry_status_build_info(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    if (check_tenant(req, data, st))
        return -1;
    Status__V1__GetBuildInfoResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Status__V1__GetBuildInfoData *d = lc_arena_alloc(req->arena, sizeof(*d));
    if (!resp || !d)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
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
    *out = &resp->base;
    return 0;
}

/* An HttpBody of YAML text (borrowed; it outlives every request). */
static int yaml_body(lc_http_req_t *req, const qry_extra_t *x, const char *yaml,
                     ProtobufCMessage **out, lc_status_t *st)
{
    if (check_tenant(req, x, st))
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
