/*
 * version.c — version.v1.Version/Version: the querier API version clients may
 * rely on. Pyroscope reports the lowest version among its live queriers; its
 * current querier API version is 1, and ember answers the same querier.v1
 * surface, so it reports 1. Like Pyroscope (no auth interceptor on this
 * service), the call needs no tenant.
 */
#include "services_extra.h"
#include "version/v1/version.pb-c.h"

int qry_version(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    LC_UNUSED(data);
    Version__V1__VersionResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    version__v1__version_response__init(resp);
    resp->querierapi = QRY_QUERIER_API_VERSION;
    *out = &resp->base;
    return 0;
}
