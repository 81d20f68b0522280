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

/* The input split into its two records (a 4-byte little-endian length first). */
static int fuzz_v1_convert(const uint8_t *data, size_t size, const lc_pprof_limits_t *lim,
                           lc_arena_t *a, Push__V1__PushRequest *out, lc_status_t *st)
{
    uint32_t first;
    if (size < 4)
        return -1;
    memcpy(&first, data, 4);
    if (first > size - 4)
        return -1;
    return ing_parca_v1_to_push(data + 4, first, data + 4 + first, size - 4 - first, lim, a, out,
                                st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_push_convert(data, size, fuzz_v1_convert);
    return 0;
}
