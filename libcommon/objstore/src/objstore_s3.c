/*
 * objstore_s3.c — the S3 operations on top of objstore_s3_http.c: PUT, or
 * CreateMultipartUpload / UploadPart / CompleteMultipartUpload with
 * AbortMultipartUpload on any failure; GET (whole, digest verified, or
 * ranged), HEAD, DELETE, ListObjectsV2 with continuation.
 * Threading: as lc/objstore.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lc/objstore_xml.h"
#include "objstore_s3_int.h"

#define UPLOAD_ID_MAX 1024
#define TOKEN_MAX 2048

/* A request with a body-less or XML answer, judged by status. */
static int s3_simple(lc_objstore_t *s, const s3_req_t *req, s3_resp_t *resp)
{
    int rc = s3_do(s, req, resp);
    return rc != 0 ? rc : s3_status(s, req, resp);
}

static int put_single(lc_objstore_t *s, const char *key, const void *data, size_t len,
                      const char *sha)
{
    s3_req_t req = {.method = "PUT",
                    .key = key,
                    .body = data ? data : "",
                    .body_len = len,
                    .sha256_meta = sha,
                    .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    s3_resp_fini(&resp);
    return rc;
}

/* "uploads=", not "uploads": curl 7.88 signs the query as sent, and SigV4's
 * canonical form of a valueless parameter has the '='. */
static int mp_create(lc_objstore_t *s, const char *key, const char *sha, char *upload_id)
{
    s3_req_t req = {.method = "POST",
                    .key = key,
                    .query = "uploads=",
                    .body = "",
                    .body_len = 0,
                    .sha256_meta = sha,
                    .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    if (rc == 0)
        rc = lc_xml_first((const char *)resp.body.data, resp.body.len, "UploadId", upload_id,
                          UPLOAD_ID_MAX);
    if (rc != 0 && !s->last_error[0])
        objstore_set_error(s, "CreateMultipartUpload %s: no UploadId in the answer", key);
    s3_resp_fini(&resp);
    return rc;
}

static char *mp_query(lc_objstore_t *s, const char *upload_id, int part)
{
    char *id = s3_escape(s, upload_id);
    size_t n = strlen(id) + 64;
    char *q = lc_xmalloc(n);
    if (part > 0)
        snprintf(q, n, "partNumber=%d&uploadId=%s", part, id);
    else
        snprintf(q, n, "uploadId=%s", id);
    lc_free(id);
    return q;
}

static int mp_part(lc_objstore_t *s, const char *key, const char *upload_id, int part,
                   const uint8_t *data, size_t len, lc_buf_t *complete)
{
    char *q = mp_query(s, upload_id, part);
    s3_req_t req = {.method = "PUT",
                    .key = key,
                    .query = q,
                    .body = data,
                    .body_len = len,
                    .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    if (rc == 0 && !resp.etag[0]) {
        objstore_set_error(s, "UploadPart %s #%d: no ETag", key, part);
        rc = LC_ESTORE;
    }
    /* ETags are hex in quotes: nothing in them needs XML escaping. */
    if (rc == 0)
        rc = lc_buf_printf(complete, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
                           part, resp.etag);
    s3_resp_fini(&resp);
    lc_free(q);
    return rc;
}

/* CompleteMultipartUpload may fail inside a 200 answer: an <Error> body. */
static int mp_complete(lc_objstore_t *s, const char *key, const char *upload_id,
                       const lc_buf_t *complete)
{
    char *q = mp_query(s, upload_id, 0);
    s3_req_t req = {.method = "POST",
                    .key = key,
                    .query = q,
                    .body = complete->data,
                    .body_len = complete->len,
                    .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    char code[128];
    if (rc == 0 &&
        lc_xml_first((const char *)resp.body.data, resp.body.len, "Code", code, sizeof code) == 0) {
        objstore_set_error(s, "CompleteMultipartUpload %s: %s", key, code);
        rc = LC_ESTORE;
    }
    s3_resp_fini(&resp);
    lc_free(q);
    return rc;
}

static void mp_abort(lc_objstore_t *s, const char *key, const char *upload_id)
{
    char *q = mp_query(s, upload_id, 0);
    s3_req_t req = {.method = "DELETE", .key = key, .query = q, .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    if (s3_do(s, &req, &resp) != 0) /* best effort: a bucket lifecycle rule cleans up the rest */
        (void)0;
    s3_resp_fini(&resp);
    lc_free(q);
}

static int put_multipart(lc_objstore_t *s, const char *key, const uint8_t *data, size_t len,
                         const char *sha)
{
    char upload_id[UPLOAD_ID_MAX];
    int rc = mp_create(s, key, sha, upload_id);
    if (rc != 0)
        return rc;
    lc_buf_t complete;
    lc_buf_init(&complete, S3_XML_MAX);
    rc = lc_buf_puts(&complete, "<CompleteMultipartUpload>");
    int part = 1;
    for (size_t off = 0; rc == 0 && off < len; off += s->o.part_bytes, part++) {
        size_t n = len - off < s->o.part_bytes ? len - off : s->o.part_bytes;
        rc = mp_part(s, key, upload_id, part, data + off, n, &complete);
        if (rc == 0 && s->o.on_part)
            s->o.on_part(s->o.on_part_arg, part);
    }
    if (rc == 0)
        rc = lc_buf_puts(&complete, "</CompleteMultipartUpload>");
    if (rc == 0)
        rc = mp_complete(s, key, upload_id, &complete);
    if (rc != 0)
        mp_abort(s, key, upload_id);
    lc_buf_fini(&complete);
    return rc;
}

static int s3_put(lc_objstore_t *s, const char *key, const void *data, size_t len)
{
    char sha[LC_SHA256_HEX];
    objstore_sha256_hex(data ? data : "", len, sha);
    s->last_error[0] = '\0';
    if (len >= s->o.multipart_threshold)
        return put_multipart(s, key, data, len, sha);
    return put_single(s, key, data, len, sha);
}

static int verify(lc_objstore_t *s, const char *key, const s3_resp_t *resp)
{
    char hex[LC_SHA256_HEX];
    objstore_sha256_hex(resp->body.data ? (const void *)resp->body.data : "", resp->body.len, hex);
    if (!resp->sha256_meta[0]) {
        objstore_set_error(s, "%s: no ember sha256 metadata (not written by ember?)", key);
        return LC_ECORRUPT;
    }
    if (strcmp(hex, resp->sha256_meta) != 0) {
        objstore_set_error(s, "%s: sha256 mismatch (stored %s, read %s)", key, resp->sha256_meta,
                           hex);
        return LC_ECORRUPT;
    }
    return 0;
}

static int s3_get(lc_objstore_t *s, const char *key, uint64_t off, uint64_t n, uint8_t **data,
                  size_t *len)
{
    char range[64];
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, off, off + n - 1);
    s3_req_t req = {.method = "GET",
                    .key = key,
                    .range = n ? range : NULL,
                    .max_response = n ? (size_t)n : s->o.max_object_bytes};
    s3_resp_t resp = {0};
    int rc = s3_do(s, &req, &resp);
    bool past_end = rc == 0 && n && resp.status == 416;
    if (rc == 0 && !past_end)
        rc = s3_status(s, &req, &resp);
    if (rc == 0 && n == 0)
        rc = verify(s, key, &resp);
    if (rc == 0 && past_end)
        lc_buf_reset(&resp.body);
    if (rc == 0) {
        *data = lc_buf_steal(&resp.body, len);
        if (!*data)
            *data = lc_xmalloc(1);
    }
    s3_resp_fini(&resp);
    return rc;
}

static int s3_head(lc_objstore_t *s, const char *key, uint64_t *size)
{
    s3_req_t req = {.method = "HEAD", .key = key, .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    if (rc == 0)
        *size = resp.content_length;
    s3_resp_fini(&resp);
    return rc;
}

static int s3_del(lc_objstore_t *s, const char *key)
{
    s3_req_t req = {.method = "DELETE", .key = key, .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    s3_resp_fini(&resp);
    return rc == LC_ENOTFOUND ? 0 : rc;
}

typedef struct {
    lc_objstore_t *s;
    lc_objstore_list_t *out;
    size_t next_size; /* the page's next key without its size yet */
} list_ctx_t;

static int list_key(void *arg, const char *text, size_t len)
{
    list_ctx_t *l = arg;
    return objstore_list_push(l->s, l->out, text, len, 0);
}

/* Each <Contents> holds one <Key> and one <Size>, in the same order. */
static int list_size(void *arg, const char *text, size_t len)
{
    list_ctx_t *l = arg;
    uint64_t v = 0;
    bool ok = len > 0 && len <= 19 && l->next_size < l->out->n;
    for (size_t i = 0; ok && i < len; i++) {
        ok = text[i] >= '0' && text[i] <= '9';
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (!ok) {
        objstore_set_error(l->s, "ListObjectsV2: a <Size> that is not a key's size");
        return LC_ESTORE;
    }
    l->out->sizes[l->next_size++] = v;
    return 0;
}

static char *list_query(lc_objstore_t *s, const char *prefix, const char *token)
{
    char *p = s3_escape(s, prefix);
    char *t = token[0] ? s3_escape(s, token) : NULL;
    size_t n = strlen(p) + (t ? strlen(t) : 0) + 96;
    char *q = lc_xmalloc(n);
    /* The parameters in sorted order, as SigV4's canonical query has them. */
    snprintf(q, n, "%s%s%slist-type=2&max-keys=%d&prefix=%s", t ? "continuation-token=" : "",
             t ? t : "", t ? "&" : "", s->o.list_page_keys, p);
    lc_free(p);
    lc_free(t);
    return q;
}

/* One ListObjectsV2 page; token is in: where to start, out: where next. */
static int list_page(lc_objstore_t *s, const char *prefix, char *token, lc_objstore_list_t *out)
{
    char *q = list_query(s, prefix, token);
    s3_req_t req = {.method = "GET", .query = q, .max_response = S3_XML_MAX};
    s3_resp_t resp = {0};
    int rc = s3_simple(s, &req, &resp);
    list_ctx_t ctx = {s, out, out->n};
    const char *xml = (const char *)resp.body.data;
    if (rc == 0)
        rc = lc_xml_each(xml, resp.body.len, "Key", list_key, &ctx);
    if (rc == 0)
        rc = lc_xml_each(xml, resp.body.len, "Size", list_size, &ctx);
    if (rc == 0 && ctx.next_size != out->n) {
        objstore_set_error(s, "ListObjectsV2: %zu keys without a <Size>", out->n - ctx.next_size);
        rc = LC_ESTORE;
    }
    char truncated[16] = "";
    if (rc == 0 &&
        lc_xml_first(xml, resp.body.len, "IsTruncated", truncated, sizeof truncated) != 0)
        truncated[0] = '\0';
    token[0] = '\0';
    if (rc == 0 && strcmp(truncated, "true") == 0 &&
        lc_xml_first(xml, resp.body.len, "NextContinuationToken", token, TOKEN_MAX) != 0) {
        objstore_set_error(s, "ListObjectsV2: truncated without a continuation token");
        rc = LC_ESTORE;
    }
    s3_resp_fini(&resp);
    lc_free(q);
    return rc;
}

static int s3_list(lc_objstore_t *s, const char *prefix, lc_objstore_list_t *out)
{
    char token[TOKEN_MAX] = "";
    int rc;
    do
        rc = list_page(s, prefix, token, out);
    while (rc == 0 && token[0]);
    return rc;
}

static const objstore_ops_t s3_ops = {
    .put = s3_put,
    .get = s3_get,
    .head = s3_head,
    .del = s3_del,
    .list = s3_list,
    .close = s3_http_close,
};

int objstore_s3_open(lc_objstore_t *s)
{
    int rc = s3_http_open(s);
    if (rc == 0)
        s->ops = &s3_ops;
    return rc;
}
