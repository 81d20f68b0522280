/*
 * fuzz_jfr.c — the JFR converter (services/ingester/src/jfr.c, jfr_pprof.c).
 * Input: one byte choosing whether the rest is split into a recording and a
 * LabelsSnapshot (the byte's value is the snapshot's length), then the data.
 * A failure must say why with a 413 or 422 and leave no profile; a success
 * must give profiles that decode and validate as pprof.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/jfr.h"
#include "receive_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_profiles(const lc_jfr_result_t *r, lc_arena_t *arena)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    for (size_t i = 0; i < r->n; i++) {
        lc_status_t st = {0};
        lc_pprof_t *p;
        const lc_buf_t *b = &r->profiles[i].pprof;
        if (lc_pprof_decode(b->data, b->len, &lim, arena, &p, &st) != 0)
            abort();
        if (lc_pprof_validate(p, &lim, &st) != 0 && !st.msg[0])
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4 << 20)
        return 0;
    size_t labels_len = data[0] < size - 1 ? data[0] : 0;
    const uint8_t *labels = data + 1, *jfr = data + 1 + labels_len;
    size_t jfr_len = size - 1 - labels_len;
    lc_arena_t *arena = lc_arena_new(1 << 28);
    lc_status_t st = {0};
    lc_jfr_params_t params = {
        .start_ns = 1700000000000000000LL, .end_ns = 1700000010000000000LL, .sample_rate = 100};
    lc_jfr_result_t r;
    if (lc_jfr_to_pprof(jfr, jfr_len, labels_len ? labels : NULL, labels_len, &params, arena, &r,
                        &st) != 0) {
        if (!st.msg[0] || r.n != 0 || (st.http_status != 413 && st.http_status != 422))
            abort();
    } else {
        check_profiles(&r, arena);
        lc_jfr_result_fini(&r);
    }
    lc_arena_free(arena);
    return 0;
}
