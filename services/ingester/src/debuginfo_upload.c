/*
 * debuginfo_upload.c — the bodies of the debug-file uploads (symbols_int.h).
 *
 * Parca's Upload is a client stream. httpd hands a handler the request once
 * its body has ended (over HTTP/2 once the stream's END_STREAM arrived), so
 * a client stream needs no more from the net room than the whole body: it
 * is read here as the sequence of gRPC frames it is (each through
 * lc_grpc_unwrap_request, so a compressed frame is inflated under the same
 * cap): first an UploadInfo naming the build id, then chunk_data frames,
 * appended up to --debuginfo.max-file-bytes. The one reply follows the store.
 * The body itself is bounded by --http.max-body-bytes.
 *
 * Pyroscope's Upload is a plain HTTP POST of the file's bytes to
 * /debuginfo.v1alpha1.DebuginfoService/Upload/<gnu_build_id>.
 *
 * Either way the file is validated and stored whole or refused with nothing
 * stored (lc_debuginfo_put).
 */
#include <string.h>

#include "lc/connect.h"
#include "lc/grpc.h"
#include "lc/tenant.h"
#include "parca/debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "symbols_int.h"

/* One message of the stream into u. */
static int upload_message(const uint8_t *msg, size_t len, lc_arena_t *a, ing_upload_t *u,
                          lc_status_t *st)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    Parca__Debuginfo__V1alpha1__UploadRequest *r =
        parca__debuginfo__v1alpha1__upload_request__unpack(&alloc, len, msg);
    if (!r)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "malformed UploadRequest");
    if (r->data_case == PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_INFO) {
        if (u->build_id || !r->info)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "a second UploadInfo");
        u->build_id = r->info->build_id;
        u->file_hash = r->info->upload_id && strncmp(r->info->upload_id, ING_UPLOAD_ID_FILE_HASH,
                                                     strlen(ING_UPLOAD_ID_FILE_HASH)) == 0;
        return 0;
    }
    if (r->data_case != PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_CHUNK_DATA)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "an UploadRequest with no data");
    if (!u->build_id)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "chunk_data before the UploadInfo: the first message must name "
                             "the build id");
    if (lc_buf_append(&u->file, r->chunk_data.data, r->chunk_data.len) != 0)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the debug file is over the limit of %zu bytes; nothing was stored",
                             u->file.max);
    return 0;
}

int ing_parca_upload_decode(lc_grpc_kind_t kind, const uint8_t *body, size_t len,
                            const char *encoding, lc_arena_t *a, ing_upload_t *u, lc_status_t *st)
{
    lc_grpc_kind_t frame_kind = kind == LC_GRPC_WEB_TEXT ? LC_GRPC_WEB : kind;
    size_t off = 0;
    while (off < len) {
        if (len - off < LC_GRPC_FRAME_HEADER)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "truncated gRPC frame");
        const uint8_t *h = body + off;
        size_t n = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
        if (n > len - off - LC_GRPC_FRAME_HEADER)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "truncated gRPC frame");
        const uint8_t *msg;
        size_t msg_len;
        if (!(h[0] & LC_GRPC_FLAG_TRAILERS) &&
            (lc_grpc_unwrap_request(frame_kind, h, LC_GRPC_FRAME_HEADER + n, encoding, a, &msg,
                                    &msg_len, st) ||
             upload_message(msg, msg_len, a, u, st)))
            return -1;
        off += LC_GRPC_FRAME_HEADER + n;
    }
    return u->build_id ? 0
                       : lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no UploadInfo in the stream");
}

static lc_connect_codec_t reply_codec(lc_grpc_kind_t kind)
{
    return kind == LC_GRPC_NATIVE ? LC_CONNECT_GRPC
           : kind == LC_GRPC_WEB  ? LC_CONNECT_GRPC_WEB
                                  : LC_CONNECT_GRPC_WEB_TEXT;
}

/* Decodes and stores; fills resp. */
static int parca_upload(lc_http_req_t *req, ing_symbols_t *y, lc_grpc_kind_t kind,
                        Parca__Debuginfo__V1alpha1__UploadResponse *resp, lc_status_t *st)
{
    const char *tenant;
    if (lc_tenant_write(req, y->multitenancy, &tenant, st))
        return -1;
    const uint8_t *body = req->body;
    size_t len = req->body_len;
    uint8_t *decoded;
    if (kind == LC_GRPC_WEB_TEXT) {
        if (lc_grpc_base64_decode(body, len, req->arena, &decoded, &len, st))
            return -1;
        body = decoded;
    }
    ing_upload_t u = {0};
    lc_buf_init(&u.file, (size_t)lc_debuginfo_limits(y->files)->max_file_bytes);
    int rc = ing_parca_upload_decode(kind, body, len, lc_http_header(req, "grpc-encoding"),
                                     req->arena, &u, st);
    if (rc == 0)
        rc = ing_symbols_put(y, tenant, u.build_id ? u.build_id : "", u.file_hash, u.file.data,
                             u.file.len, st);
    resp->build_id = (char *)(u.build_id ? u.build_id : "");
    resp->size = u.file.len;
    lc_buf_fini(&u.file);
    return rc;
}

lc_http_result_t ing_parca_upload_work(lc_http_req_t *req, void *data)
{
    lc_status_t st = {0};
    lc_grpc_kind_t kind = lc_grpc_kind_of(lc_http_header(req, "content-type"));
    if (kind == LC_GRPC_NONE) {
        lc_status_set(&st, LC_CODE_UNIMPLEMENTED,
                      "Upload is a client stream: send it over gRPC or gRPC-Web");
        lc_connect_error(req, &st);
        return LC_HTTP_DONE;
    }
    Parca__Debuginfo__V1alpha1__UploadResponse resp =
        PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_RESPONSE__INIT;
    if (strcmp(req->method, "POST") != 0)
        lc_status_set(&st, LC_CODE_UNIMPLEMENTED, "Upload takes POST");
    else if (parca_upload(req, data, kind, &resp, &st) == 0) {
        lc_connect_reply(req, reply_codec(kind), &resp.base);
        return LC_HTTP_DONE;
    }
    lc_connect_error(req, &st);
    return LC_HTTP_DONE;
}

lc_http_result_t ing_pyroscope_upload_work(lc_http_req_t *req, void *data)
{
    ing_symbols_t *y = data;
    lc_status_t st = {0};
    const char *tenant;
    const char *id = strrchr(req->path, '/');
    if (lc_tenant_write(req, y->multitenancy, &tenant, &st) == 0 &&
        ing_symbols_put(y, tenant, id ? id + 1 : "", false, req->body, req->body_len, &st) == 0) {
        lc_http_reply(req, 200, "text/plain", "", 0);
        return LC_HTTP_DONE;
    }
    if (st.code == LC_CODE_RESOURCE_EXHAUSTED)
        st.http_status = 413;
    lc_http_error(req, &st);
    return LC_HTTP_DONE;
}
