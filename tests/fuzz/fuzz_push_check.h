/*
 * fuzz_push_check.h — what the fuzz targets of the ingester's converters
 * (fuzz_otlp.c, fuzz_parca_arrow.c) assert about the Push request they
 * built: every pprof in it decodes again with protobuf-c.
 */
#ifndef EMBER_FUZZ_PUSH_CHECK_H
#define EMBER_FUZZ_PUSH_CHECK_H

#include <stdlib.h>

#include "../../services/ingester/src/receive_int.h"

static inline void fuzz_check_push_pprofs(const Push__V1__PushRequest *push,
                                          ProtobufCAllocator *alloc)
{
    for (size_t i = 0; i < push->n_series; i++) {
        const ProtobufCBinaryData *raw = &push->series[i]->samples[0]->raw_profile;
        ProtobufCMessage *p =
            protobuf_c_message_unpack(&google__v1__profile__descriptor, alloc, raw->len, raw->data);
        if (!p && raw->len > 0)
            abort(); /* a pprof we built must decode */
    }
}

/* A converter of the Parca writes (parca_arrow.c): input bytes into a Push
 * request in arena a. */
typedef int (*fuzz_push_convert_fn)(const uint8_t *data, size_t size, const lc_pprof_limits_t *lim,
                                    lc_arena_t *a, Push__V1__PushRequest *out, lc_status_t *st);

/* Runs convert on the input with the default pprof limits in a fresh arena
 * and checks what it built. */
static inline void fuzz_push_convert(const uint8_t *data, size_t size, fuzz_push_convert_fn convert)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    Push__V1__PushRequest push;
    lc_status_t st = {0};
    if (convert(size ? data : (const uint8_t *)"", size, &lim, a, &push, &st) == 0)
        fuzz_check_push_pprofs(&push, &alloc);
    lc_arena_free(a);
}

#endif
