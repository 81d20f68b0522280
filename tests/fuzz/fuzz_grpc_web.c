/*
 * fuzz_grpc_web.c — the gRPC-Web request decoder (lc_grpc_unwrap_request) on
 * arbitrary bodies, binary and base64 text, with and without gzip: the first
 * byte picks the kind and the encoding. A message it accepts must lie inside
 * what it was given (or the arena), and encoding it again as a frame (and as
 * base64 text) must unwrap to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/base64.h"
#include "lc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const uint8_t *msg, size_t len, lc_arena_t *a)
{
    lc_buf_t frame, text;
    lc_status_t st;
    const uint8_t *again;
    size_t again_len;
    lc_buf_init(&frame, LC_BUF_UNLIMITED);
    lc_buf_init(&text, LC_BUF_UNLIMITED);
    if (lc_grpc_append_frame(&frame, 0, msg, len) != 0 ||
        lc_base64_encode(frame.data, frame.len, &text) != 0 ||
        lc_grpc_unwrap_request(LC_GRPC_WEB_TEXT, text.data, text.len, NULL, a, &again, &again_len,
                               &st) != 0 ||
        again_len != len || (len && memcmp(again, msg, len) != 0))
        abort();
    lc_buf_fini(&frame);
    lc_buf_fini(&text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    lc_grpc_kind_t kind = (data[0] & 1) ? LC_GRPC_WEB_TEXT : LC_GRPC_WEB;
    const char *encoding = (data[0] & 2) ? "gzip" : NULL;
    lc_arena_t *a = lc_arena_new(64u << 20);
    lc_status_t st;
    const uint8_t *msg;
    size_t len;
    /* a heap copy of exactly size-1 bytes, so reading past it is caught */
    uint8_t *body = lc_xmalloc(size);
    memcpy(body, data + 1, size - 1);
    if (lc_grpc_unwrap_request(kind, body, size - 1, encoding, a, &msg, &len, &st) == 0)
        check_round_trip(msg, len, a);
    else if (st.code == LC_CODE_OK)
        abort(); /* a failure always says why */
    lc_free(body);
    lc_arena_free(a);
    return 0;
}
