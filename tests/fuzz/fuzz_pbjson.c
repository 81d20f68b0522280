/*
 * fuzz_pbjson.c — lc_pbjson_decode on arbitrary bytes, as the two request
 * messages with the most shapes (nested messages, enums, repeated strings,
 * bytes). Whatever decodes must re-encode, and the re-encoded JSON must decode
 * again to the same protobuf bytes: a value the encoder writes but the decoder
 * refuses would break every Connect JSON client.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/pbjson.h"
#include "push/v1/push.pb-c.h"
#include "querier/v1/querier.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ARENA_CAP (64u << 20)

static uint8_t *pack(const ProtobufCMessage *msg, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *out = lc_xmalloc(*len);
    protobuf_c_message_pack(msg, out);
    return out;
}

/* encode(msg) must decode to a message with the same wire bytes. */
static void check_round_trip(const ProtobufCMessage *msg, ProtobufCAllocator *alloc)
{
    lc_buf_t json;
    lc_status_t st;
    ProtobufCMessage *again = NULL;
    size_t len1, len2;

    lc_buf_init(&json, LC_BUF_UNLIMITED);
    if (lc_pbjson_encode(msg, &json) != 0 ||
        lc_pbjson_decode(msg->descriptor, json.data, json.len, alloc, &again, &st) != 0)
        abort();
    uint8_t *a = pack(msg, &len1), *b = pack(again, &len2);
    if (len1 != len2 || memcmp(a, b, len1) != 0)
        abort();
    lc_free(a);
    lc_free(b);
    lc_buf_fini(&json);
}

static void fuzz_one(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size)
{
    lc_arena_t *arena = lc_arena_new(FUZZ_ARENA_CAP);
    ProtobufCAllocator alloc;
    ProtobufCMessage *msg = NULL;
    lc_status_t st;

    lc_arena_pb_allocator(arena, &alloc);
    if (lc_pbjson_decode(desc, data, size, &alloc, &msg, &st) == 0)
        check_round_trip(msg, &alloc);
    else if (st.code != LC_CODE_INVALID_ARGUMENT && st.code != LC_CODE_RESOURCE_EXHAUSTED)
        abort();
    lc_arena_free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(&querier__v1__select_merge_stacktraces_request__descriptor, data, size);
    fuzz_one(&push__v1__push_request__descriptor, data, size);
    return 0;
}
