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
    fuzz_push_convert(data, size, ing_parca_arrow_to_push);
    return 0;
}
