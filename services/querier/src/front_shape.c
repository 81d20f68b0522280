/*
 * front_shape.c — how the query front end shapes an answer, once, whatever
 * the back end gathered it (the store's rpc_merge.c or the fan-out): a
 * merged tree as a flame graph or tree bytes truncated at max_nodes, merged
 * pprof bytes wrapped as a SelectMergeStacktracesResponse, and Diff answered
 * from its two merged sides. Called by frontend.c on the RPC's thread-pool
 * thread; everything it allocates is in the request arena.
 */
#include <string.h>

#include "querier_int.h"

/* ---------------------------------------------------------------- trees */

static int tree_bytes(lc_ftree_t *t, int64_t max_nodes, lc_arena_t *a, ProtobufCBinaryData *out,
                      lc_status_t *st)
{
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    int rc = lc_ftree_write_tree(t, max_nodes, &buf);
    uint8_t *copy = rc ? NULL : lc_arena_alloc(a, buf.len + 1);
    if (copy) {
        memcpy(copy, buf.data ? (const void *)buf.data : "", buf.len);
        *out = (ProtobufCBinaryData){.len = buf.len, .data = copy};
    }
    lc_buf_fini(&buf);
    if (rc)
        return qry_fail(st, rc, "encoding the tree");
    return copy ? 0 : qry_fail_arena(st);
}

int qry_shape_tree(lc_ftree_t *t, int format, int64_t max_nodes, lc_arena_t *a,
                   Querier__V1__SelectMergeStacktracesResponse *resp, lc_status_t *st)
{
    if (format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE) {
        if (lc_ftree_symbolized_names(t, a, &resp->symbolized_names, &resp->n_symbolized_names))
            return qry_fail_arena(st);
        return tree_bytes(t, max_nodes, a, &resp->tree, st);
    }
    int rc = lc_ftree_flamegraph(t, max_nodes, a, &resp->flamegraph);
    return rc ? qry_fail(st, rc, "encoding the flame graph") : 0;
}

/* ---------------------------------------------------------------- pprof */

/* Appends a protobuf length-delimited field header (wire type 2). */
static size_t put_len_field(uint8_t *p, uint32_t field, size_t len)
{
    size_t n = 0;
    p[n++] = (uint8_t)(field << 3 | 2);
    do {
        p[n++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
        len >>= 7;
    } while (len);
    return n;
}

int qry_wrap_pprof_response(lc_buf_t *buf)
{
    uint8_t inner[16], outer[16];
    size_t n_inner = put_len_field(inner, 1, buf->len);
    size_t n_outer = put_len_field(outer, 5, n_inner + buf->len);
    size_t shift = n_inner + n_outer, len = buf->len;
    int rc = lc_buf_reserve(buf, shift);
    if (rc)
        return rc;
    memmove(buf->data + shift, buf->data, len);
    memcpy(buf->data, outer, n_outer);
    memcpy(buf->data + n_outer, inner, n_inner);
    buf->len = len + shift;
    return 0;
}

/* -------------------------------------------------------------------- Diff */

int qry_diff_answer(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                    lc_status_t *st, qry_diff_side_fn side, void *data)
{
    const Querier__V1__DiffRequest *r = (const Querier__V1__DiffRequest *)in;
    if (!r->left || !r->right)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "left and right are required");
    Querier__V1__DiffResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Querier__V1__DiffResponse)QUERIER__V1__DIFF_RESPONSE__INIT;
    lc_ftree_t *left = NULL, *right = NULL;
    int64_t max_nodes = 0, unused;
    int rc = side(data, req, r->left, &left, &max_nodes, st);
    if (rc == 0)
        rc = side(data, req, r->right, &right, &unused, st);
    if (rc == 0) {
        /* The left request's max_nodes governs the whole diff. */
        rc = lc_ftree_diff(left, right, max_nodes, req->arena, &resp->flamegraph);
        if (rc)
            rc = qry_fail(st, rc, "encoding the diff");
    }
    lc_ftree_free(left);
    lc_ftree_free(right);
    if (rc == 0)
        *out = &resp->base;
    return rc ? -1 : 0;
}
