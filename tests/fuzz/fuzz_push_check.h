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

#endif
