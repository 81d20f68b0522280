/*
 * fuzz_parca_write_v1.c — arbitrary bytes as the two records of Parca's
 * Write (the agent's v1 schema: samples naming stacks by stacktrace_id, then
 * the stack trace record), through services/ingester/src/parca_arrow.c's v1
 * conversion. The input is a 4-byte little-endian length, the samples
 * stream, then the stack trace stream. Every pprof built must decode again.
 * Seeds: the real agent's Write exchanges (tests/fixtures/parca-agent/v1).
 */
#include <string.h>

#include "fuzz_push_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t first;
    memcpy(&first, data, 4);
    if (first > size - 4)
        return 0;
    lc_arena_t *a = lc_arena_new(64u << 20);
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    Push__V1__PushRequest push;
    lc_status_t st = {0};
    const uint8_t *samples = data + 4, *stacks = data + 4 + first;
    if (ing_parca_v1_to_push(samples, first, stacks, size - 4 - first, &lim, a, &push, &st) == 0)
        fuzz_check_push_pprofs(&push, &alloc);
    lc_arena_free(a);
    return 0;
}
