/*
 * async.c — SelectMergeStacktraces' async queries (querier.v1
 * AsyncQueryRequest, docs/api.md "Async queries"): a request with
 * async.type FORCE is answered, and its answer kept under a new request id
 * for QRY_ASYNC_TTL_MS; a request whose async.request_id is set polls: it
 * gets that answer again (status SUCCESS) while it is kept. The query runs
 * while the submitting call waits, so IN_PROGRESS is never seen: a client
 * polls once and is done. Answers are kept in this process (a poll through
 * another ember-querier finds nothing), at most QRY_ASYNC_PER_TENANT per
 * tenant set and QRY_ASYNC_MAX in all, each at most QRY_ASYNC_MAX_BYTES;
 * expired ones are dropped on every use.
 *
 * Ownership: the front end owns one qry_async_t. Threading: any thread (the
 * RPCs' thread-pool threads); one mutex around the table.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lc/tenant.h"
#include "lc/transport.h"
#include "lc/uuid.h"
#include "querier_int.h"

typedef struct async_entry_s {
    char id[LC_UUID_TEXT_LEN + 1];
    char *tenants; /* the asking tenants, joined by '|' */
    int64_t created_ms;
    uint8_t *answer; /* SelectMergeStacktracesResponse bytes, without async */
    size_t len;
} async_entry_t;

struct qry_async_s {
    pthread_mutex_t lock;
    async_entry_t v[QRY_ASYNC_MAX];
    size_t n;
};

qry_async_t *qry_async_new(void)
{
    qry_async_t *a = lc_xcalloc(1, sizeof(*a));
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

static void entry_fini(async_entry_t *e)
{
    lc_free(e->tenants);
    lc_free(e->answer);
}

void qry_async_free(qry_async_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        entry_fini(&a->v[i]);
    pthread_mutex_destroy(&a->lock);
    lc_free(a);
}

/* Drops the answers older than the TTL (lock held). */
static void expire(qry_async_t *a, int64_t now_ms)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (now_ms - a->v[i].created_ms >= QRY_ASYNC_TTL_MS)
            entry_fini(&a->v[i]);
        else
            a->v[k++] = a->v[i];
    }
    a->n = k;
}

static size_t held_by(const qry_async_t *a, const char *tenants)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++)
        n += strcmp(a->v[i].tenants, tenants) == 0;
    return n;
}

/* The tenants a request reads, as one key. */
static char *tenants_key(lc_http_req_t *req, bool multitenancy, lc_status_t *st)
{
    const char *const *tenants;
    size_t n;
    if (lc_tenants_read(req, multitenancy, &tenants, &n, st))
        return NULL;
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    for (size_t i = 0; i < n; i++) /* unlimited: appends cannot fail */
        (void)!lc_buf_append(&b, tenants[i], strlen(tenants[i]) + (i + 1 < n));
    (void)!lc_buf_append(&b, "", 1);
    size_t len;
    char *key = (char *)lc_buf_steal(&b, &len);
    for (size_t i = 0; i + 1 < len; i++)
        key[i] = key[i] ? key[i] : '|'; /* the NULs between tenants */
    return key;
}

static int new_id(char out[LC_UUID_TEXT_LEN + 1])
{
    uint8_t id[LC_INGEST_ID_BYTES];
    int rc = lc_ingest_id_new(id);
    if (rc == 0)
        lc_uuid_format(id, out);
    return rc;
}

/* Keeps a copy of answer for the tenants; fills id. */
static int async_put(qry_async_t *a, char *tenants, const uint8_t *answer, size_t len,
                     char id[LC_UUID_TEXT_LEN + 1], lc_status_t *st)
{
    if (len > QRY_ASYNC_MAX_BYTES)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the answer (%zu bytes) is too large to keep for an async query "
                             "(limit %u); ask without async or lower max_nodes",
                             len, (unsigned)QRY_ASYNC_MAX_BYTES);
    if (new_id(id))
        return lc_status_set(st, LC_CODE_INTERNAL, "no random async request id");
    pthread_mutex_lock(&a->lock);
    expire(a, qry_now_ms());
    int rc = 0;
    if (held_by(a, tenants) >= QRY_ASYNC_PER_TENANT || a->n >= QRY_ASYNC_MAX) {
        rc = lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                           "too many async query answers kept (%u per tenant, %u in all, each "
                           "for %llds): fetch them or wait",
                           (unsigned)QRY_ASYNC_PER_TENANT, (unsigned)QRY_ASYNC_MAX,
                           (long long)(QRY_ASYNC_TTL_MS / 1000));
    } else {
        async_entry_t *e = &a->v[a->n++];
        *e = (async_entry_t){.tenants = tenants, .created_ms = qry_now_ms(), .len = len};
        memcpy(e->id, id, sizeof(e->id));
        e->answer = lc_xmalloc(len ? len : 1);
        if (len)
            memcpy(e->answer, answer, len);
        tenants = NULL; /* the entry owns it */
    }
    pthread_mutex_unlock(&a->lock);
    lc_free(tenants);
    return rc;
}

/* Appends the kept answer of id for the tenants to out. */
static int async_get(qry_async_t *a, const char *tenants, const char *id, lc_buf_t *out,
                     lc_status_t *st)
{
    pthread_mutex_lock(&a->lock);
    expire(a, qry_now_ms());
    int rc = -1;
    for (size_t i = 0; i < a->n && rc; i++) {
        const async_entry_t *e = &a->v[i];
        if (!strcmp(e->id, id) && !strcmp(e->tenants, tenants))
            rc = lc_buf_append(out, e->answer, e->len) ? -2 : 0;
    }
    pthread_mutex_unlock(&a->lock);
    if (rc == -1)
        return lc_status_set(st, LC_CODE_NOT_FOUND,
                             "async query %.64s is unknown or expired (answers are kept %llds, "
                             "by the querier that ran them)",
                             id, (long long)(QRY_ASYNC_TTL_MS / 1000));
    return rc ? qry_fail(st, LC_ETOOBIG, "copying the async answer") : 0;
}

/* Appends field 4 (async) of SelectMergeStacktracesResponse: protobuf lets a
 * field follow the message's other bytes. */
static int append_status(lc_buf_t *out, const char *id)
{
    Querier__V1__AsyncQueryResponse s = QUERIER__V1__ASYNC_QUERY_RESPONSE__INIT;
    s.request_id = (char *)id;
    s.status = QUERIER__V1__ASYNC_QUERY_STATUS__ASYNC_QUERY_STATUS_SUCCESS;
    uint8_t body[128]; /* an id of 36 characters and a status */
    size_t n = protobuf_c_message_pack(&s.base, body);
    uint8_t head[2] = {(4 << 3) | 2, (uint8_t)n};
    if (n >= 128)
        return LC_ETOOBIG;
    int rc = lc_buf_append(out, head, sizeof(head));
    return rc ? rc : lc_buf_append(out, body, n);
}

/* The answer in out as bytes (a message is packed into out->buf). */
static int reply_bytes(qry_reply_t *out)
{
    if (out->desc)
        return 0;
    size_t n = protobuf_c_message_get_packed_size(out->msg);
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    uint8_t *p = lc_xmalloc(n ? n : 1);
    protobuf_c_message_pack(out->msg, p);
    int rc = lc_buf_append(&out->buf, p, n);
    lc_free(p);
    out->desc = &querier__v1__select_merge_stacktraces_response__descriptor;
    out->msg = NULL;
    return rc;
}

/* A front end set up without qry_front_init keeps nothing. */
static int no_table(lc_status_t *st)
{
    return lc_status_set(st, LC_CODE_UNIMPLEMENTED, "async queries are not kept by this server");
}

int qry_async_submit(qry_front_t *fe, lc_http_req_t *req, qry_reply_t *out, lc_status_t *st)
{
    char id[LC_UUID_TEXT_LEN + 1];
    if (!fe->async)
        return no_table(st);
    char *tenants = tenants_key(req, fe->opts.multitenancy, st);
    if (!tenants)
        return -1;
    if (reply_bytes(out)) {
        lc_free(tenants);
        return qry_fail(st, LC_ETOOBIG, "encoding the async answer");
    }
    if (async_put(fe->async, tenants, out->buf.data, out->buf.len, id, st))
        return -1;
    return append_status(&out->buf, id) ? qry_fail(st, LC_ETOOBIG, "encoding the async answer") : 0;
}

int qry_async_poll(qry_front_t *fe, lc_http_req_t *req, const char *id, qry_reply_t *out,
                   lc_status_t *st)
{
    if (!fe->async)
        return no_table(st);
    char *tenants = tenants_key(req, fe->opts.multitenancy, st);
    if (!tenants)
        return -1;
    lc_buf_init(&out->buf, LC_BUF_UNLIMITED);
    int rc = async_get(fe->async, tenants, id, &out->buf, st);
    lc_free(tenants);
    if (rc)
        return -1;
    out->desc = &querier__v1__select_merge_stacktraces_response__descriptor;
    return append_status(&out->buf, id) ? qry_fail(st, LC_ETOOBIG, "encoding the async answer") : 0;
}
