/*
 * fuzz_load_wire.c — arbitrary bytes into ember-load's wire helpers
 * (tools/load/src/load_wire.c): the pprof re-stamping of the write load, which
 * walks the top-level protobuf fields of a file (plain or gzip), and the
 * Connect result code read from a response body.
 *
 * Beyond "no crash, no leak": stripping is idempotent on its own output and
 * on a stamped profile (the stamp is exactly one time_nanos field, and the
 * stripped bytes hold none); the code is always "ok" or a Connect code name.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/err.h"
#include "load_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_strip(const uint8_t *data, size_t size)
{
    lc_buf_t stripped, stamped, again;
    lc_buf_init(&stripped, LD_MAX_PROFILE_BYTES);
    lc_buf_init(&stamped, LD_MAX_PROFILE_BYTES + 16);
    lc_buf_init(&again, LD_MAX_PROFILE_BYTES + 16);
    if (ld_pprof_strip_time(data, size, &stripped) == 0 && stripped.len > 0) {
        if (ld_pprof_stamp(stripped.data, stripped.len, 1234567890123456789LL, &stamped) != 0)
            abort();
        if (ld_pprof_strip_time(stamped.data, stamped.len, &again) != 0 ||
            again.len != stripped.len || memcmp(again.data, stripped.data, again.len) != 0)
            abort();
    }
    lc_buf_fini(&stripped);
    lc_buf_fini(&stamped);
    lc_buf_fini(&again);
}

static void check_code(const uint8_t *data, size_t size)
{
    static const long statuses[] = {0, 200, 400, 401, 404, 429, 500, 503};
    char buf[32];
    long status = size ? statuses[data[0] % 8] : 0;
    const char *code =
        ld_result_code(status, status ? NULL : "connect", data, size, buf, sizeof(buf));
    if (strcmp(code, "ok") != 0 && lc_code_from_name(code) < 0)
        abort();
    if ((strcmp(code, "ok") == 0) != (status == 200))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_strip(data, size);
    check_code(data, size);
    return 0;
}
