/*
 * fuzz_parca_arrow.c — arbitrary bytes as WriteArrow's Arrow IPC stream,
 * through the Parca Agent v2 record -> pprof conversion of the ingester
 * (services/ingester/src/parca_arrow.c): labels, list-view stacks of
 * dictionary-encoded frames, lines, run-end encoded profile types. Every
 * pprof it builds must decode again with protobuf-c. The seeds are the real
 * agent's pushes (tests/fixtures/parca-agent/v2, unwrapped) and arrow_gen.py's
 * v2 streams.
 */
#include "fuzz_push_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    Push__V1__PushRequest push;
    lc_status_t st = {0};
    if (ing_parca_arrow_to_push(size ? data : (const uint8_t *)"", size, &lim, a, &push, &st) == 0)
        fuzz_check_push_pprofs(&push, &alloc);
    lc_arena_free(a);
    return 0;
}
