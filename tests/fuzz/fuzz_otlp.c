/*
 * fuzz_otlp.c — arbitrary bytes as an OTLP ExportProfilesServiceRequest
 * (protobuf), through the OTLP -> pprof conversion of the ingester
 * (services/ingester/src/otlp.c): dictionary indices of every kind, sample
 * services, links, attributes. Every pprof it builds must decode again with
 * protobuf-c.
 */
#include "fuzz_push_check.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    ProtobufCMessage *msg = protobuf_c_message_unpack(
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
        &alloc, size, size ? data : (const uint8_t *)"");
    const Push__V1__PushRequest *push = NULL;
    lc_status_t st = {0};
    if (msg && ing_otlp_to_push((const void *)msg, a, &push, &st) == 0)
        fuzz_check_push_pprofs(push, &alloc);
    lc_arena_free(a);
    return 0;
}
