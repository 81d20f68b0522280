/*
 * parca_write_v1.c — ProfileStoreService/Write, the Parca Agent's older
 * bidirectional stream (its "v1 schema", --remote-store-use-v2-schema=false;
 * docs/internals/parca-agent-wire.md):
 *   1. the agent sends a samples record naming its stacks by stacktrace_id;
 *   2. ember answers a record of one binary column `stacktrace_id` listing
 *      the ids it wants: every distinct id of step 1 (ember keeps no stacks
 *      between calls, so it knows none);
 *   3. the agent sends the stack trace record, one row per asked id;
 *   4. ember stores both as WriteArrow's pprofs would be (parca_arrow.c)
 *      through ing_push_serve and ends the call.
 * Steps 1-2 are the route's interim hook (lc_httpd_route_interim: HTTP/2
 * only, on the loop thread, after the guard), 3-4 its ordinary handler on
 * the two messages. A stream is capped like any request body; one that
 * stalls ends with its connection's idle timeout. gRPC-Web and HTTP/1.1
 * cannot answer mid-request, so there a Write is refused as unimplemented.
 *
 * Threading: the hook runs on the loop thread with its own arena; the
 * handler on the thread pool in the request arena.
 */
#include <string.h>

#include "lc/arrow.h"
#include "lc/arrow_write.h"
#include "lc/grpc.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "receive_int.h"

#define WV1_MESSAGES 2                           /* samples, then stack traces */
#define WV1_HOOK_ARENA_BYTES ((size_t)512 << 20) /* the hook's decode of step 1 */

typedef struct wv1_msg_s {
    const uint8_t *data;
    size_t len;
} wv1_msg_t;

/* The complete gRPC messages of body (at most WV1_MESSAGES): their count,
 * or -1 for a compressed or otherwise unreadable frame. */
static int wv1_messages(const uint8_t *body, size_t len, wv1_msg_t *out)
{
    size_t at = 0;
    int n = 0;
    while (n < WV1_MESSAGES && len - at >= LC_GRPC_FRAME_HEADER) {
        if (body[at] != 0)
            return -1; /* compressed: the agent sends no grpc-encoding */
        size_t m = (size_t)body[at + 1] << 24 | (size_t)body[at + 2] << 16 |
                   (size_t)body[at + 3] << 8 | body[at + 4];
        if (m > len - at - LC_GRPC_FRAME_HEADER)
            break;
        out[n].data = body + at + LC_GRPC_FRAME_HEADER;
        out[n].len = m;
        at += LC_GRPC_FRAME_HEADER + m;
        n++;
    }
    return n;
}

/* WriteRequest.record of one message, in arena. */
static int wv1_record(const wv1_msg_t *m, lc_arena_t *a, ProtobufCBinaryData *out, lc_status_t *st)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    ProtobufCMessage *msg = protobuf_c_message_unpack(
        &parca__profilestore__v1alpha1__write_request__descriptor, &alloc, m->len, m->data);
    if (!msg)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Write: a message that is not a WriteRequest; nothing was stored");
    *out = ((const Parca__Profilestore__V1alpha1__WriteRequest *)msg)->record;
    return 0;
}

/* ---------------------------------------------------------------- step 2 */

/* The distinct ids of column ids into out. The agent's column is run-end
 * encoded over a dictionary of distinct ids, so an id is known by its
 * dictionary entry (a dictionary in several chunks may repeat some). */
static int wv1_put_ids(const lc_arrow_array_t *ids, int64_t rows, lc_arena_t *a,
                       lc_arw_batch_t *out, lc_status_t *st)
{
    const lc_arrow_array_t *seen_in = NULL;
    bool *seen = NULL;
    for (int64_t row = 0; row < rows; row++) {
        const lc_arrow_array_t *leaf;
        int64_t r;
        const uint8_t *p;
        size_t n;
        int rc = lc_arrow_resolve(ids, row, &leaf, &r, st);
        if (rc < 0)
            return -1;
        if (rc == 1)
            continue;
        if (leaf != seen_in) {
            seen_in = leaf;
            if (!(seen = lc_arena_calloc(a, (size_t)leaf->length + 1, sizeof(*seen))))
                return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        }
        if (seen[r])
            continue;
        seen[r] = true;
        if (lc_arrow_get_bytes(leaf, r, &p, &n, st) < 0)
            return -1;
        lc_arw_put_bytes(out, 0, p, n);
    }
    return 0;
}

/* Every stacktrace_id of the samples record, once, as the record the agent
 * expects back (one binary column named stacktrace_id). Returns the count. */
static int wv1_ids_record(const ProtobufCBinaryData *samples, lc_arena_t *a, lc_buf_t *ipc,
                          lc_status_t *st)
{
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lc_arrow_stream_t *s = NULL;
    const lc_arrow_batch_t *b;
    const lc_arw_field_t field = {"stacktrace_id", LC_ARW_BINARY};
    lc_arw_batch_t out;
    lc_arw_batch_init(&out, &field, 1, lim.max_body_bytes);
    int rc = lc_arrow_stream_open(&s, samples->data, samples->len, &lim, a, st);
    while (rc == 0 && (rc = lc_arrow_stream_next(s, &b, st)) == 1) {
        rc = 0;
        const lc_arrow_array_t *ids = NULL;
        for (size_t i = 0; i < b->n_columns; i++)
            if (strcmp(b->columns[i].field->name, "stacktrace_id") == 0)
                ids = &b->columns[i];
        if (ids)
            rc = wv1_put_ids(ids, b->length, a, &out, st);
    }
    size_t n_ids = out.cols[0].n;
    if (rc == 0 && lc_arw_encode(&out, ipc) != 0)
        rc = lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "Write: too many stack trace ids");
    lc_arw_batch_fini(&out);
    if (s)
        lc_arrow_stream_close(s);
    return rc < 0 ? -1 : (int)(n_ids > INT32_MAX ? INT32_MAX : n_ids);
}

/* The WriteResponse of step 2, as a gRPC message appended to out. */
static int wv1_ask(const wv1_msg_t *first, lc_buf_t *out)
{
    lc_arena_t *a = lc_arena_new(WV1_HOOK_ARENA_BYTES);
    lc_buf_t ipc;
    lc_buf_init(&ipc, WV1_HOOK_ARENA_BYTES);
    lc_status_t st = {0};
    ProtobufCBinaryData samples = {0, NULL};
    int n = wv1_record(first, a, &samples, &st) ? -1 : wv1_ids_record(&samples, a, &ipc, &st);
    int rc = n > 0 ? 0 : -1;
    if (rc == 0) {
        Parca__Profilestore__V1alpha1__WriteResponse resp =
            PARCA__PROFILESTORE__V1ALPHA1__WRITE_RESPONSE__INIT;
        resp.record.data = ipc.data;
        resp.record.len = ipc.len;
        size_t len = protobuf_c_message_get_packed_size(&resp.base);
        uint8_t *packed = lc_arena_alloc(a, len ? len : 1);
        rc = packed ? 0 : -1;
        if (rc == 0)
            protobuf_c_message_pack(&resp.base, packed);
        if (rc == 0)
            rc = lc_grpc_append_frame(out, 0, packed, len);
    }
    lc_buf_fini(&ipc);
    lc_arena_free(a);
    return rc;
}

lc_http_interim_t ing_parca_write_interim(const lc_http_req_t *req, void *data, lc_buf_t *out)
{
    LC_UNUSED(data);
    wv1_msg_t msgs[WV1_MESSAGES];
    int n = wv1_messages(req->body, req->body_len, msgs);
    if (n < 0 || n == WV1_MESSAGES)
        return LC_HTTP_INTERIM_COMPLETE;
    if (n == 0 || out->len > 0) /* asked already: wait for the stack traces */
        return LC_HTTP_INTERIM_MORE;
    /* Nothing to ask (no rows) or a samples record that does not decode:
     * the handler stores the former and refuses the latter. */
    return wv1_ask(&msgs[0], out) == 0 ? LC_HTTP_INTERIM_REPLY : LC_HTTP_INTERIM_COMPLETE;
}

/* ---------------------------------------------------------------- steps 3-4 */

static int write_v1_decode(lc_http_req_t *req, const Push__V1__PushRequest **out,
                           lc_connect_codec_t *codec, lc_status_t *st)
{
    *codec = LC_CONNECT_GRPC;
    if (lc_grpc_kind_of(lc_http_header(req, "content-type")) != LC_GRPC_NATIVE)
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "Write is a bidirectional stream: ember serves it over native gRPC "
                             "on HTTP/2 only; use WriteArrow (the Parca Agent's default)");
    wv1_msg_t msgs[WV1_MESSAGES];
    int n = wv1_messages(req->body, req->body_len, msgs);
    Push__V1__PushRequest *push = lc_arena_calloc(req->arena, 1, sizeof(*push));
    if (!push)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    *push = (Push__V1__PushRequest)PUSH__V1__PUSH_REQUEST__INIT;
    ProtobufCBinaryData samples = {0, NULL}, stacks = {0, NULL};
    if (n < 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Write: a compressed or malformed message; nothing was stored");
    if (n < WV1_MESSAGES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Write: the call ended before the stack trace record (ember asks "
                             "for it mid-call, over HTTP/2 only); nothing was stored");
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    if (wv1_record(&msgs[0], req->arena, &samples, st) ||
        wv1_record(&msgs[1], req->arena, &stacks, st) ||
        ing_parca_v1_to_push(samples.data, samples.len, stacks.data, stacks.len, &lim, req->arena,
                             push, st))
        return -1;
    *out = push;
    return 0;
}

lc_http_result_t ing_parca_write_v1_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve(req, data, write_v1_decode);
}
