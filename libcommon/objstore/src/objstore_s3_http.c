/*
 * objstore_s3_http.c — one S3 request: URL (path-style or virtual-host),
 * SigV4 by libcurl (CURLOPT_AWS_SIGV4, no signing of our own), Content-MD5,
 * the body cap, timeouts, retries with exponential backoff. The CURL handle
 * is reset between requests, which keeps its connection cache, so
 * connections are reused. Threading: as lc/objstore.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lc/base64.h"
#include "lc/md5.h"
#include "lc/objstore_xml.h"
#include "objstore_s3_int.h"

#define HDR_LINE_MAX 1024

static size_t s3_on_body(char *p, size_t size, size_t n, void *arg)
{
    lc_buf_t *b = arg;
    return lc_buf_append(b, p, size * n) == 0 ? size * n : 0; /* 0 aborts: cap passed */
}

/* Copies a header's value (trimmed, quotes kept) when its name matches. */
static void header_value(const char *line, size_t len, const char *name, char *out, size_t out_len)
{
    size_t nl = strlen(name);
    if (len <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    if ((size_t)(end - v) < out_len)
        snprintf(out, out_len, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    s3_resp_t *r = arg;
    size_t len = size * n;
    char clen[32] = "";
    header_value(p, len, "ETag", r->etag, sizeof r->etag);
    header_value(p, len, "x-amz-meta-ember-sha256", r->sha256_meta, sizeof r->sha256_meta);
    header_value(p, len, "Content-Length", clen, sizeof clen);
    if (clen[0]) {
        r->content_length = strtoull(clen, NULL, 10);
        r->have_length = 1;
    }
    return len;
}

static char *request_url(const lc_objstore_t *s, const s3_req_t *req)
{
    const s3_state_t *st = s->backend;
    size_t n = strlen(st->base) + (req->key ? strlen(req->key) : 0) +
               (req->query ? strlen(req->query) : 0) + 4;
    char *url = lc_xmalloc(n);
    snprintf(url, n, "%s/%s%s%s", st->base, req->key ? req->key : "", req->query ? "?" : "",
             req->query ? req->query : "");
    return url;
}

static struct curl_slist *s3_header_add(struct curl_slist *h, const char *name, const char *value)
{
    char line[HDR_LINE_MAX];
    snprintf(line, sizeof line, "%s: %s", name, value);
    struct curl_slist *n = curl_slist_append(h, line);
    if (!n)
        abort(); /* lc/alloc.h's OOM policy */
    return n;
}

/* Headers we sign and send: the payload hash (which S3 requires and curl 7.88
 * does not add by itself), Content-MD5 on bodies (the server checks it),
 * our digest metadata, the range. No "Expect:" to turn 100-continue off:
 * curl 7.88 signs the empty header it then does not send (a 403). */
static struct curl_slist *request_headers(const s3_req_t *req)
{
    char sha[LC_SHA256_HEX];
    objstore_sha256_hex(req->body ? req->body : "", req->body_len, sha);
    struct curl_slist *h = s3_header_add(NULL, "x-amz-content-sha256", sha);
    if (req->body) {
        uint8_t md5[LC_MD5_BYTES];
        lc_buf_t b64;
        lc_buf_init(&b64, 64);
        lc_md5(req->body, req->body_len, md5);
        if (lc_base64_encode(md5, sizeof md5, &b64) == 0 && lc_buf_putc(&b64, '\0') == 0)
            h = s3_header_add(h, "Content-MD5", (const char *)b64.data);
        lc_buf_fini(&b64);
        h = s3_header_add(h, "Content-Type", "application/octet-stream");
    }
    if (req->sha256_meta)
        h = s3_header_add(h, "x-amz-meta-ember-sha256", req->sha256_meta);
    if (req->range)
        h = s3_header_add(h, "Range", req->range);
    return h;
}

static void set_method(CURL *c, const s3_req_t *req)
{
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (req->body) {
        /* POSTFIELDS, not a read callback: curl can then hash the payload. */
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    }
}

static CURLcode perform_once(lc_objstore_t *s, const s3_req_t *req, s3_resp_t *resp)
{
    s3_state_t *st = s->backend;
    CURL *c = st->curl;
    char *url = request_url(s, req);
    struct curl_slist *h = request_headers(req);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, st->sigv4);
    curl_easy_setopt(c, CURLOPT_USERPWD, st->userpwd);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->o.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)s->o.connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
    set_method(c, req);
    CURLcode cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    curl_slist_free_all(h);
    lc_free(url);
    return cc;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void resp_reset(s3_resp_t *resp, size_t max)
{
    lc_buf_fini(&resp->body);
    memset(resp, 0, sizeof *resp);
    lc_buf_init(&resp->body, max);
}

int s3_do(lc_objstore_t *s, const s3_req_t *req, s3_resp_t *resp)
{
    long delay = s->o.backoff_ms;
    for (int attempt = 0;; attempt++) {
        resp_reset(resp, req->max_response);
        CURLcode cc = perform_once(s, req, resp);
        if (cc == CURLE_WRITE_ERROR) {
            objstore_set_error(s, "%s %s: answer over %zu bytes", req->method,
                               req->key ? req->key : "/", req->max_response);
            return LC_ETOOBIG;
        }
        bool retry = cc != CURLE_OK || resp->status >= 500 || resp->status == 429;
        if (!retry)
            return 0;
        objstore_set_error(s, "%s %s: %s (HTTP %ld)", req->method, req->key ? req->key : "/",
                           curl_easy_strerror(cc), resp->status);
        if (attempt >= s->o.retries)
            return cc == CURLE_OPERATION_TIMEDOUT ? LC_ETIMEOUT : LC_ESTORE;
        sleep_ms(delay);
        delay *= 2;
    }
}

void s3_resp_fini(s3_resp_t *resp)
{
    lc_buf_fini(&resp->body);
}

int s3_status(lc_objstore_t *s, const s3_req_t *req, const s3_resp_t *resp)
{
    if (resp->status >= 200 && resp->status < 300)
        return 0;
    if (resp->status == 404)
        return LC_ENOTFOUND;
    char code[128] = "", msg[256] = "";
    const char *xml = (const char *)resp->body.data;
    if (lc_xml_first(xml, resp->body.len, "Code", code, sizeof code) != 0)
        snprintf(code, sizeof code, "?");
    if (lc_xml_first(xml, resp->body.len, "Message", msg, sizeof msg) != 0)
        msg[0] = '\0';
    objstore_set_error(s, "%s %s: HTTP %ld %s %s", req->method, req->key ? req->key : "/",
                       resp->status, code, msg);
    return LC_ESTORE;
}

char *s3_escape(lc_objstore_t *s, const char *text)
{
    s3_state_t *st = s->backend;
    char *e = curl_easy_escape(st->curl, text, 0);
    if (!e)
        abort(); /* lc/alloc.h's OOM policy */
    char *out = lc_xstrdup(e);
    curl_free(e);
    return out;
}

/* "host" → http(s)://host by --storage.s3.insecure; an explicit scheme wins. */
static void make_base(lc_objstore_t *s, s3_state_t *st)
{
    const char *ep = s->endpoint;
    const char *scheme = s->o.insecure ? "http://" : "https://";
    const char *sep = strstr(ep, "://");
    if (sep) {
        scheme = "";
    }
    size_t n = strlen(scheme) + strlen(ep) + strlen(s->bucket) + 3;
    st->base = lc_xmalloc(n);
    if (s->o.force_path_style) {
        snprintf(st->base, n, "%s%s/%s", scheme, ep, s->bucket);
    } else if (sep) {
        snprintf(st->base, n, "%.*s%s.%s", (int)(sep + 3 - ep), ep, s->bucket, sep + 3);
    } else {
        snprintf(st->base, n, "%s%s.%s", scheme, s->bucket, ep);
    }
    size_t len = strlen(st->base);
    while (len > 0 && st->base[len - 1] == '/')
        st->base[--len] = '\0';
}

static pthread_once_t objstore_curl_once = PTHREAD_ONCE_INIT;

static void objstore_curl_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int s3_http_open(lc_objstore_t *s)
{
    pthread_once(&objstore_curl_once,
                 objstore_curl_global_init); /* stores may open on several threads */
    s3_state_t *st = lc_xcalloc(1, sizeof *st);
    st->curl = curl_easy_init();
    if (!st->curl) {
        lc_free(st);
        return LC_ESTORE;
    }
    make_base(s, st);
    size_t n = strlen(s->access_key_id) + strlen(s->secret_access_key) + 2;
    st->userpwd = lc_xmalloc(n);
    snprintf(st->userpwd, n, "%s:%s", s->access_key_id, s->secret_access_key);
    snprintf(st->sigv4, sizeof st->sigv4, "aws:amz:%s:s3", s->region);
    s->backend = st;
    return 0;
}

void s3_http_close(lc_objstore_t *s)
{
    s3_state_t *st = s->backend;
    if (!st)
        return;
    curl_easy_cleanup(st->curl);
    lc_free(st->base);
    if (st->userpwd)
        memset(st->userpwd, 0, strlen(st->userpwd)); /* the secret */
    lc_free(st->userpwd);
    lc_free(st);
    s->backend = NULL;
}
