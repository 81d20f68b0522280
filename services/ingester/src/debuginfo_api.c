/*
 * debuginfo_api.c — the unary methods of the two debug-file services, over
 * Connect, gRPC-Web and native gRPC (lc/connect.h), on the ingester's store
 * of debug files (lc/debuginfo.h), one tenant per request:
 *   parca.debuginfo.v1alpha1.DebuginfoService: ShouldInitiateUpload,
 *     InitiateUpload (gRPC upload strategy: the file comes by Upload),
 *     MarkUploadFinished (the file must be stored by then);
 *   debuginfo.v1alpha1.DebuginfoService (Pyroscope): ShouldInitiateUpload,
 *     UploadFinished, ListDebuginfo, DeleteDebuginfo.
 * A file is stored by the Upload itself (debuginfo_upload.c), validated and
 * whole, so there is no "uploading" state to expire: ShouldInitiateUpload
 * says yes until a valid file is there.
 */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "lc/connect.h"
#include "lc/tenant.h"
#include "lc/uuid.h"
#include "parca/debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "symbols_int.h"

#define REASON_EXISTS "Debuginfo already exists"
#define REASON_MISSING "Debuginfo does not exist"
#define REASON_FORCED "Debuginfo exists, upload forced"

/* The tenant and the normalised build id of a request. */
static int request_target(ing_symbols_t *y, lc_http_req_t *req, const char *build_id,
                          const char **tenant, char id[LC_BUILD_ID_HEX_MAX + 1], lc_status_t *st)
{
    if (lc_tenant_write(req, y->multitenancy, tenant, st))
        return -1;
    return lc_build_id_normalize(build_id, id, st);
}

static void *reply_alloc(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                         lc_status_t *st)
{
    ProtobufCMessage *m = lc_arena_calloc(req->arena, 1, desc->sizeof_message);
    if (!m) {
        lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        return NULL;
    }
    protobuf_c_message_init(desc, m);
    return m;
}

/* ------------------------------------------------------------------ Parca */

static int parca_should_initiate(lc_http_req_t *req, const ProtobufCMessage *in,
                                 ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const Parca__Debuginfo__V1alpha1__ShouldInitiateUploadRequest *r = (const void *)in;
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(data, req, r->build_id, &tenant, id, st))
        return -1;
    Parca__Debuginfo__V1alpha1__ShouldInitiateUploadResponse *resp = reply_alloc(
        req, &parca__debuginfo__v1alpha1__should_initiate_upload_response__descriptor, st);
    if (!resp)
        return -1;
    bool has = ing_symbols_has(data, tenant, id);
    resp->should_initiate_upload = !has || r->force;
    resp->reason = has ? (r->force ? REASON_FORCED : REASON_EXISTS) : REASON_MISSING;
    *out = &resp->base;
    return 0;
}

/* A fresh upload id. One for a BUILD_ID_TYPE_HASH id starts with
 * ING_UPLOAD_ID_FILE_HASH: the Upload stream that follows names only the
 * build id and this upload id, so the kind travels in it (no state between
 * the two calls, whichever ingester serves them). */
static char *new_upload_id(lc_arena_t *a, bool file_hash)
{
    uint8_t raw[LC_UUID_BYTES];
    char text[LC_UUID_TEXT_LEN + 1];
    uv_random(NULL, NULL, raw, sizeof(raw), 0, NULL);
    lc_uuid_format(raw, text);
    return lc_arena_sprintf(a, "%s%s", file_hash ? ING_UPLOAD_ID_FILE_HASH : "", text);
}

static int parca_initiate(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    ing_symbols_t *y = data;
    const Parca__Debuginfo__V1alpha1__InitiateUploadRequest *r = (const void *)in;
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(y, req, r->build_id, &tenant, id, st))
        return -1;
    uint64_t max = lc_debuginfo_limits(y->files)->max_file_bytes;
    if (r->size < 0 || (uint64_t)r->size > max)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "a debug file of %lld bytes is over the limit of %llu",
                             (long long)r->size, (unsigned long long)max);
    if (!r->force && ing_symbols_has(y, tenant, id))
        return lc_status_set(st, LC_CODE_ALREADY_EXISTS, "debuginfo of %s already exists", id);
    Parca__Debuginfo__V1alpha1__InitiateUploadResponse *resp =
        reply_alloc(req, &parca__debuginfo__v1alpha1__initiate_upload_response__descriptor, st);
    Parca__Debuginfo__V1alpha1__UploadInstructions *ins =
        reply_alloc(req, &parca__debuginfo__v1alpha1__upload_instructions__descriptor, st);
    if (!resp || !ins)
        return -1;
    ins->build_id = lc_arena_strdup(req->arena, id);
    ins->upload_id =
        new_upload_id(req->arena, r->build_id_type ==
                                      PARCA__DEBUGINFO__V1ALPHA1__BUILD_IDTYPE__BUILD_ID_TYPE_HASH);
    ins->upload_strategy =
        PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__UPLOAD_STRATEGY__UPLOAD_STRATEGY_GRPC;
    ins->type = r->type;
    resp->upload_instructions = ins;
    *out = &resp->base;
    return 0;
}

/* Both services' "finished": the file must be stored by now. */
static int check_stored(ing_symbols_t *y, const char *tenant, const char *id, lc_status_t *st)
{
    if (!ing_symbols_has(y, tenant, id))
        return lc_status_set(st, LC_CODE_FAILED_PRECONDITION,
                             "no debug file of %s was uploaded (or it was refused)", id);
    return 0;
}

static int parca_mark_finished(lc_http_req_t *req, const ProtobufCMessage *in,
                               ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const Parca__Debuginfo__V1alpha1__MarkUploadFinishedRequest *r = (const void *)in;
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(data, req, r->build_id, &tenant, id, st) ||
        check_stored(data, tenant, id, st))
        return -1;
    *out = reply_alloc(req, &parca__debuginfo__v1alpha1__mark_upload_finished_response__descriptor,
                       st);
    return *out ? 0 : -1;
}

/* -------------------------------------------------------------- Pyroscope */

static int pyro_should_initiate(lc_http_req_t *req, const ProtobufCMessage *in,
                                ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const Debuginfo__V1alpha1__ShouldInitiateUploadRequest *r = (const void *)in;
    Debuginfo__V1alpha1__ShouldInitiateUploadResponse *resp =
        reply_alloc(req, &debuginfo__v1alpha1__should_initiate_upload_response__descriptor, st);
    if (!resp)
        return -1;
    *out = &resp->base;
    if (!r->file || !r->file->gnu_build_id[0]) {
        resp->reason = "empty build id"; /* as Pyroscope: answered, not an error */
        return 0;
    }
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(data, req, r->file->gnu_build_id, &tenant, id, st))
        return -1;
    bool has = ing_symbols_has(data, tenant, id);
    resp->should_initiate_upload = !has;
    resp->reason = has ? REASON_EXISTS : REASON_MISSING;
    return 0;
}

static int pyro_upload_finished(lc_http_req_t *req, const ProtobufCMessage *in,
                                ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const Debuginfo__V1alpha1__UploadFinishedRequest *r = (const void *)in;
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(data, req, r->gnu_build_id, &tenant, id, st) ||
        check_stored(data, tenant, id, st))
        return -1;
    *out = reply_alloc(req, &debuginfo__v1alpha1__upload_finished_response__descriptor, st);
    return *out ? 0 : -1;
}

static int pyro_delete(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data)
{
    const Debuginfo__V1alpha1__DeleteDebuginfoRequest *r = (const void *)in;
    const char *tenant;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (request_target(data, req, r->gnu_build_id, &tenant, id, st))
        return -1;
    /* deleting what is not there succeeds, as in Pyroscope */
    if (ing_symbols_delete(data, tenant, id, st))
        return -1;
    *out = reply_alloc(req, &debuginfo__v1alpha1__delete_debuginfo_response__descriptor, st);
    return *out ? 0 : -1;
}

typedef struct list_ctx_s {
    lc_http_req_t *req;
    Debuginfo__V1alpha1__ListDebuginfoResponse *resp;
    size_t cap;
} list_ctx_t;

static int list_one(const lc_debuginfo_entry_t *e, void *data)
{
    list_ctx_t *c = data;
    lc_arena_t *a = c->req->arena;
    Debuginfo__V1alpha1__ObjectMetadata *o = lc_arena_calloc(a, 1, sizeof(*o));
    Debuginfo__V1alpha1__FileMetadata *f = lc_arena_calloc(a, 1, sizeof(*f));
    Google__Protobuf__Timestamp *ts = lc_arena_calloc(a, 1, sizeof(*ts));
    if (!o || !f || !ts)
        return LC_ETOOBIG;
    debuginfo__v1alpha1__object_metadata__init(o);
    debuginfo__v1alpha1__file_metadata__init(f);
    google__protobuf__timestamp__init(ts);
    f->gnu_build_id = lc_arena_strdup(a, e->build_id);
    ts->seconds = e->mtime_ns / 1000000000LL;
    ts->nanos = (int32_t)(e->mtime_ns % 1000000000LL);
    o->file = f;
    o->state = DEBUGINFO__V1ALPHA1__OBJECT_METADATA__STATE__STATE_UPLOADED;
    o->finished_at = ts;
    o->size_bytes = (int64_t)e->size;
    if (c->resp->n_object == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        Debuginfo__V1alpha1__ObjectMetadata **grown = lc_arena_alloc(a, cap * sizeof(*grown));
        if (!grown)
            return LC_ETOOBIG;
        if (c->resp->n_object)
            memcpy(grown, c->resp->object, c->resp->n_object * sizeof(*grown));
        c->resp->object = grown;
        c->cap = cap;
    }
    c->resp->object[c->resp->n_object++] = o;
    return 0;
}

/* A read: the files of every tenant the request may read. */
static int pyro_list(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data)
{
    (void)in;
    ing_symbols_t *y = data;
    const char *const *tenants;
    size_t n_tenants;
    if (lc_tenants_read(req, y->multitenancy, &tenants, &n_tenants, st))
        return -1;
    list_ctx_t c = {.req = req};
    c.resp = reply_alloc(req, &debuginfo__v1alpha1__list_debuginfo_response__descriptor, st);
    if (!c.resp)
        return -1;
    for (size_t i = 0; i < n_tenants; i++) {
        int rc = ing_symbols_list(y, tenants[i], list_one, &c);
        if (rc == LC_ETOOBIG)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        if (rc)
            return lc_status_set(st, LC_CODE_UNAVAILABLE, "listing the debug files failed: %s",
                                 lc_strerror(rc));
    }
    *out = &c.resp->base;
    return 0;
}

/* ----------------------------------------------------------------- routes */

typedef struct unary_route_s {
    const char *path;
    lc_http_scope_t scope;
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn;
} unary_route_t;

static int upload_routes(ing_symbols_t *y, lc_httpd_t *srv)
{
    /* methods NULL: the Connect layer answers 405 with its own headers */
    const lc_http_route_t routes[] = {
        {ING_PARCA_DEBUGINFO "Upload", NULL, ing_parca_upload_work, NULL, true,
         ING_PARCA_DEBUGINFO "Upload", y, 0, LC_HTTP_SCOPE_WRITE, lc_connect_error},
        {ING_PYROSCOPE_DEBUGINFO "Upload/*", "POST", ing_pyroscope_upload_work, NULL, true,
         ING_PYROSCOPE_DEBUGINFO "Upload", y, 0, LC_HTTP_SCOPE_WRITE, NULL},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(routes); i++) {
        int rc = lc_httpd_route(srv, &routes[i]);
        if (rc)
            return rc;
    }
    return 0;
}

int ing_debuginfo_routes(ing_symbols_t *y, lc_httpd_t *srv)
{
    const unary_route_t unary[] = {
        {ING_PARCA_DEBUGINFO "ShouldInitiateUpload", LC_HTTP_SCOPE_WRITE,
         &parca__debuginfo__v1alpha1__should_initiate_upload_request__descriptor,
         parca_should_initiate},
        {ING_PARCA_DEBUGINFO "InitiateUpload", LC_HTTP_SCOPE_WRITE,
         &parca__debuginfo__v1alpha1__initiate_upload_request__descriptor, parca_initiate},
        {ING_PARCA_DEBUGINFO "MarkUploadFinished", LC_HTTP_SCOPE_WRITE,
         &parca__debuginfo__v1alpha1__mark_upload_finished_request__descriptor,
         parca_mark_finished},
        {ING_PYROSCOPE_DEBUGINFO "ShouldInitiateUpload", LC_HTTP_SCOPE_WRITE,
         &debuginfo__v1alpha1__should_initiate_upload_request__descriptor, pyro_should_initiate},
        {ING_PYROSCOPE_DEBUGINFO "UploadFinished", LC_HTTP_SCOPE_WRITE,
         &debuginfo__v1alpha1__upload_finished_request__descriptor, pyro_upload_finished},
        {ING_PYROSCOPE_DEBUGINFO "ListDebuginfo", LC_HTTP_SCOPE_READ,
         &debuginfo__v1alpha1__list_debuginfo_request__descriptor, pyro_list},
        {ING_PYROSCOPE_DEBUGINFO "DeleteDebuginfo", LC_HTTP_SCOPE_WRITE,
         &debuginfo__v1alpha1__delete_debuginfo_request__descriptor, pyro_delete},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(unary); i++) {
        int rc =
            lc_connect_register(srv, unary[i].path, unary[i].scope, unary[i].in, unary[i].fn, y);
        if (rc)
            return rc;
    }
    return upload_routes(y, srv);
}
