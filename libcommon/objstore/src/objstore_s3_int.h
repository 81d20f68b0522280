/*
 * objstore_s3_int.h — one S3 request over the store's reused CURL handle
 * (objstore_s3_http.c), for the S3 operations (objstore_s3.c).
 * Threading: as lc/objstore.h.
 */
#ifndef LC_OBJSTORE_S3_INT_H
#define LC_OBJSTORE_S3_INT_H

#include <curl/curl.h>

#include "lc/alloc.h"
#include "objstore_int.h"

#define S3_XML_MAX ((size_t)4 << 20) /* any XML answer (a listing page is ~1 MiB at most) */
#define S3_ETAG_MAX 128

typedef struct {
    CURL *curl;
    char *base;      /* scheme://host[:port][/bucket], no trailing '/' */
    char *userpwd;   /* access:secret for curl's SigV4 */
    char sigv4[160]; /* "aws:amz:<region>:s3" */
} s3_state_t;

typedef struct {
    const char *method; /* GET HEAD PUT POST DELETE */
    const char *key;    /* full key, or NULL for the bucket */
    const char *query;  /* already escaped, without '?', may be NULL */
    const void *body;
    size_t body_len;
    const char *sha256_meta; /* sends x-amz-meta-ember-sha256 when set */
    const char *range;       /* "bytes=a-b" or NULL */
    size_t max_response;     /* body cap; over it is LC_ETOOBIG */
} s3_req_t;

typedef struct {
    long status;
    lc_buf_t body;
    char etag[S3_ETAG_MAX];
    char sha256_meta[LC_SHA256_HEX];
    uint64_t content_length;
    int have_length;
} s3_resp_t;

/* Runs req with retries and backoff on transport errors and 5xx. Returns 0
 * with resp filled for any final HTTP status; the caller judges it. resp must
 * be released with s3_resp_fini even on error. */
int s3_do(lc_objstore_t *s, const s3_req_t *req, s3_resp_t *resp);
void s3_resp_fini(s3_resp_t *resp);
/* Maps a final status to 0, LC_ENOTFOUND or LC_ESTORE (recording the
 * server's <Code>/<Message>). */
int s3_status(lc_objstore_t *s, const s3_req_t *req, const s3_resp_t *resp);
/* curl_easy_escape into a fresh lc_ string. */
char *s3_escape(lc_objstore_t *s, const char *text);

int s3_http_open(lc_objstore_t *s);
void s3_http_close(lc_objstore_t *s);

#endif
