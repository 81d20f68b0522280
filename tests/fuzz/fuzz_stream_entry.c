/*
 * fuzz_stream_entry.c — arbitrary bytes as the `m` field of a stream entry
 * through lc_entry_decode (lean v2 header + zstd frame, or a v1 message),
 * with a 1 MiB message limit. Whatever the bytes: no crash, no leak, and an
 * accepted lean entry decodes to exactly the length its header states.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lc/transport_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lc_entry_decoder_t *d;
    if (!d)
        d = lc_entry_decoder_new((size_t)1 << 20);
    const uint8_t *msg = NULL;
    size_t len = 0;
    const char *why = NULL;
    int rc = lc_entry_decode(d, data, size, &msg, &len, &why);
    if (rc == 0 && lc_entry_is_lean(data, size)) {
        size_t stated =
            (size_t)data[4] | (size_t)data[5] << 8 | (size_t)data[6] << 16 | (size_t)data[7] << 24;
        if (len != stated) {
            fprintf(stderr, "fuzz_stream_entry: decoded %zu bytes, header says %zu\n", len, stated);
            abort();
        }
    }
    if (rc != 0 && !why)
        abort();
    return 0;
}
