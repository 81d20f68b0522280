/*
 * fanout_call.c — the parallel shard calls of the fan-out: which ingesters
 * to ask (a snapshot of the set fanout.c keeps), one Connect unary POST
 * (application/proto) of the request to each, all at once on one libcurl
 * multi handle driven inside the RPC's thread-pool job (the job has nothing
 * else to do until all have answered, and a multi handle waits on all
 * sockets with one poll instead of one thread per ingester), and their
 * answers decoded. The caller's tenant (X-Scope-OrgID) and deadline travel
 * along; every call has a timeout, so a hung ingester costs at most that.
 * Used by fanout_rpc.c and fanout_list.c; any thread-pool thread.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fanout_int.h"
#include "lc/clock.h"
#include "lc/log.h"

#define FO_MAX_SHARDS 256
#define FO_MAX_ANSWER_BYTES (1024u << 20) /* one ingester's partial result */
#define FO_CURL_ERR_MAX 160

static bool request_end_ms(const ProtobufCMessage *msg, int64_t *end_ms);

/* The reason this request cannot be answered now, copied into the arena, or
 * NULL (none, or it ends below the history the bucket answers meanwhile). */
static const char *unavailable_reason(qry_fanout_t *f, const ProtobufCMessage *msg, lc_arena_t *a)
{
    int64_t end_ms;
    bool ranged = request_end_ms(msg, &end_ms);
    pthread_mutex_lock(&f->lock);
    bool history = ranged && end_ms < f->history_below_ms;
    const char *r = f->unavailable && !history ? lc_arena_strdup(a, f->unavailable) : NULL;
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* One shard to ask: its base URL and what it reads (a header line, or NULL). */
typedef struct fo_target_s {
    const char *url;
    const char *scope;
} fo_target_t;

/* The header that says which partitions member i reads: from its mark on. */
static const char *member_scope(const qry_fanout_t *f, size_t i, lc_arena_t *a)
{
    int64_t ms = f->marks_ms[i];
    if (ms == LC_MEMBER_NO_MARK || !f->marks_spec || !f->n_bucket_urls)
        return NULL; /* no bucket shard reads the rest: it answers for everything */
    return lc_arena_sprintf(a, "%s: %lld", QRY_READ_FROM_HEADER, (long long)lc_ms_to_ns(ms));
}

/* The end (ms) of the request's range when it has one: an int64 field "end",
 * as every querier.v1 and types.v1 request with a range has. */
static bool request_end_ms(const ProtobufCMessage *msg, int64_t *end_ms)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "end");
    if (!fd || fd->label != PROTOBUF_C_LABEL_NONE || fd->type != PROTOBUF_C_TYPE_INT64)
        return false;
    int64_t end;
    memcpy(&end, (const char *)msg + fd->offset, sizeof(end));
    if (end <= 0)
        return false; /* no range given (a listing over everything) */
    *end_ms = end;
    return true;
}

/* Whether member i holds nothing a request ending at end_ms reads: all of
 * it lies below its mark, where the bucket shard reads. */
static bool member_below(const qry_fanout_t *f, size_t i, int64_t end_ms)
{
    int64_t ms = f->marks_ms[i];
    return ms != LC_MEMBER_NO_MARK && f->marks_spec && f->n_bucket_urls && end_ms < ms;
}

/* A snapshot of the shards to ask, in the arena (a member that is also in
 * the static list is asked once, for everything; one whose mark lies past
 * the request's end not at all), then this querier's bucket shard for what
 * lies below the members' marks. */
static size_t targets(qry_fanout_t *f, const ProtobufCMessage *msg, lc_arena_t *a,
                      fo_target_t **out)
{
    int64_t end_ms = INT64_MAX;
    (void)request_end_ms(msg, &end_ms);
    pthread_mutex_lock(&f->lock);
    size_t cap = f->n_fixed + f->n_members, n = 0;
    fo_target_t *v = lc_arena_calloc(a, cap + 2, sizeof(*v));
    for (size_t i = 0; v && i < cap && n < FO_MAX_SHARDS; i++) {
        const char *u = i < f->n_fixed ? f->fixed[i] : f->members[i - f->n_fixed];
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++)
            dup = strcmp(v[j].url, u) == 0;
        if (dup || (i >= f->n_fixed && member_below(f, i - f->n_fixed, end_ms)) ||
            !(v[n].url = lc_arena_strdup(a, u)))
            continue;
        v[n++].scope = i < f->n_fixed ? NULL : member_scope(f, i - f->n_fixed, a);
    }
    if (v && f->n_bucket_urls && f->marks_spec && n < FO_MAX_SHARDS) {
        v[n].url = lc_arena_strdup(a, f->bucket_urls[f->bucket_next++ % f->n_bucket_urls]);
        v[n].scope = lc_arena_sprintf(a, "%s: %s", LC_MARKS_HEADER, f->marks_spec);
        n += v[n].url && v[n].scope;
    }
    pthread_mutex_unlock(&f->lock);
    *out = v;
    return n;
}

/* ------------------------------------------------------------ shard calls */

typedef struct fo_xfer_s {
    CURL *easy;
    struct curl_slist *headers;
    const char *url;
    lc_buf_t body;
    char err[CURL_ERROR_SIZE];
} fo_xfer_t;

static size_t fo_on_body(char *p, size_t size, size_t nmemb, void *data)
{
    fo_xfer_t *x = data;
    size_t n = size * nmemb;
    return lc_buf_append(&x->body, p, n) == 0 ? n : 0; /* 0 aborts: answer too large */
}

static struct curl_slist *shard_headers(lc_http_req_t *req, lc_arena_t *a, const char *scope,
                                        uint64_t timeout_ms)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/proto");
    if (scope)
        h = curl_slist_append(h, scope);
    h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    const char *org = lc_http_header(req, "x-scope-orgid");
    if (org)
        h = curl_slist_append(h, lc_arena_sprintf(a, "X-Scope-OrgID: %s", org));
    const char *authz = lc_http_header(req, "authorization"); /* ingesters may check it too */
    if (authz)
        h = curl_slist_append(h, lc_arena_sprintf(a, "Authorization: %s", authz));
    const char *accept = lc_http_header(req, "accept"); /* allow-utf8-labelnames */
    if (accept && strstr(accept, "allow-utf8-labelnames"))
        h = curl_slist_append(h, lc_arena_sprintf(a, "Accept: %s", accept));
    h = curl_slist_append(
        h, lc_arena_sprintf(a, "Connect-Timeout-Ms: %llu", (unsigned long long)timeout_ms));
    return h;
}

static void xfer_init(fo_xfer_t *x, qry_fanout_t *f, lc_http_req_t *req, const fo_target_t *t,
                      const char *path, const uint8_t *body, size_t len, uint64_t timeout_ms)
{
    x->url = t->url;
    lc_buf_init(&x->body, FO_MAX_ANSWER_BYTES);
    x->easy = curl_easy_init();
    x->headers = shard_headers(req, req->arena, t->scope, timeout_ms);
    curl_easy_setopt(x->easy, CURLOPT_URL, lc_arena_sprintf(req->arena, "%s%s", t->url, path));
    curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, fo_on_body);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->err);
    curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)f->opts.connect_timeout_ms);
    curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L); /* thread-pool thread */
    curl_easy_setopt(x->easy, CURLOPT_ACCEPT_ENCODING, "");
}

static void xfer_fini(fo_xfer_t *x)
{
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    lc_buf_fini(&x->body);
}

/* The deadline of one shard call: ours, capped by the caller's. */
static uint64_t call_timeout_ms(const qry_fanout_t *f, const lc_http_req_t *req)
{
    uint64_t t = f->opts.timeout_ms, caller = lc_connect_timeout_ms(req);
    return caller && caller < t ? caller : t;
}

static void run_multi(CURLM *m)
{
    int running = 1;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(m, NULL, 0, 1000, NULL);
    }
}

/* An ingester's error code by name; "ok" or a name we do not know is unknown. */
static lc_code_t code_of_name(const char *name)
{
    int code = lc_code_from_name(name);
    return code > 0 ? (lc_code_t)code : LC_CODE_UNKNOWN;
}

/* An ingester's Connect error, passed on with its code: a bad request is
 * invalid_argument whether one process or many answer it. */
static int shard_error(fo_xfer_t *x, long http, lc_status_t *st)
{
    json_t *j = json_loadb((const char *)x->body.data, x->body.len, 0, NULL);
    const char *code = j ? json_string_value(json_object_get(j, "code")) : NULL;
    const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
    lc_code_t c = code ? code_of_name(code) : LC_CODE_UNAVAILABLE;
    if (c == LC_CODE_UNAUTHENTICATED || c == LC_CODE_INVALID_ARGUMENT ||
        c == LC_CODE_UNIMPLEMENTED || c == LC_CODE_RESOURCE_EXHAUSTED)
        lc_status_set(st, c, "%s", msg ? msg : "");
    else
        lc_status_set(st, c, "ingester %s answered HTTP %ld: %s", x->url, http,
                      msg ? msg : "(no message)");
    json_decref(j);
    return -1;
}

/* Checks one finished transfer; copies its body into the arena. */
static int collect(fo_xfer_t *x, CURLcode res, lc_arena_t *a, fo_answer_t *ans, lc_status_t *st)
{
    long http = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
    if (res != CURLE_OK)
        return lc_status_set(st, LC_CODE_UNAVAILABLE, "ingester %s is unreachable: %s", x->url,
                             x->err[0] ? x->err : curl_easy_strerror(res));
    if (http != 200)
        return shard_error(x, http, st);
    uint8_t *copy = lc_arena_alloc(a, x->body.len + 1);
    if (!copy)
        return qry_fail_arena(st);
    if (x->body.len)
        memcpy(copy, x->body.data, x->body.len);
    *ans = (fo_answer_t){.url = x->url, .body = copy, .len = x->body.len};
    return 0;
}

/* Results in transfer order; the first failure wins. */
static int collect_all(CURLM *m, fo_xfer_t *xs, size_t n, lc_arena_t *a, fo_answer_t *ans,
                       lc_status_t *st)
{
    CURLcode *res = lc_xcalloc(n, sizeof(*res));
    for (size_t i = 0; i < n; i++)
        res[i] = CURLE_OPERATION_TIMEDOUT; /* unless the multi handle reports it done */
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
        for (size_t i = 0; msg->msg == CURLMSG_DONE && i < n; i++) {
            if (xs[i].easy == msg->easy_handle)
                res[i] = msg->data.result;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = collect(&xs[i], res[i], a, &ans[i], st);
    lc_free(res);
    return rc;
}

int fo_call_all(qry_fanout_t *f, lc_http_req_t *req, const char *path, const ProtobufCMessage *msg,
                fo_answer_t **out, size_t *n_out, lc_status_t *st)
{
    fo_target_t *urls;
    *out = NULL;
    *n_out = 0;
    const char *reason = unavailable_reason(f, msg, req->arena);
    if (reason)
        return lc_status_set(st, LC_CODE_UNAVAILABLE, "%s", reason);
    size_t n = targets(f, msg, req->arena, &urls);
    if (n == 0)
        return lc_status_set(st, LC_CODE_UNAVAILABLE,
                             "no live ingester to query (none has announced itself)");
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *body = lc_arena_alloc(req->arena, len + 1);
    fo_answer_t *ans = lc_arena_calloc(req->arena, n, sizeof(*ans));
    if (!body || !ans)
        return qry_fail_arena(st);
    protobuf_c_message_pack(msg, body);

    uint64_t timeout = call_timeout_ms(f, req);
    fo_xfer_t *xs = lc_xcalloc(n, sizeof(*xs));
    CURLM *m = curl_multi_init();
    for (size_t i = 0; i < n; i++) {
        xfer_init(&xs[i], f, req, &urls[i], path, body, len, timeout);
        curl_multi_add_handle(m, xs[i].easy);
    }
    run_multi(m);
    int rc = collect_all(m, xs, n, req->arena, ans, st);
    for (size_t i = 0; i < n; i++) {
        curl_multi_remove_handle(m, xs[i].easy);
        xfer_fini(&xs[i]);
    }
    curl_multi_cleanup(m);
    lc_free(xs);
    lc_metric_add(f->shard_calls, (double)n);
    if (rc) {
        lc_metric_add(f->shard_errors, 1);
        LC_LOG_WARN("shard call failed path=%s err=\"%s\"", path, st->msg);
        return -1;
    }
    *out = ans;
    *n_out = n;
    return 0;
}

int fo_unpack_all(lc_http_req_t *req, const ProtobufCMessageDescriptor *desc,
                  const fo_answer_t *ans, size_t n, ProtobufCMessage ***out, lc_status_t *st)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(req->arena, &alloc);
    ProtobufCMessage **v = lc_arena_calloc(req->arena, n + 1, sizeof(*v));
    if (!v)
        return qry_fail_arena(st);
    for (size_t i = 0; i < n; i++) {
        v[i] = protobuf_c_message_unpack(desc, &alloc, ans[i].len, ans[i].body);
        if (!v[i])
            return lc_status_set(st, LC_CODE_INTERNAL, "ingester %s sent a malformed %s",
                                 ans[i].url, desc->name);
    }
    *out = v;
    return 0;
}
