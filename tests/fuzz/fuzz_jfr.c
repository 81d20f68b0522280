/*
 * fuzz_jfr.c — the JFR converter (services/ingester/src/jfr.c, jfr_pprof.c).
 * Input: one byte choosing whether the rest is split into a recording and a
 * LabelsSnapshot (the byte's value is the snapshot's length), then the data.
 * A failure must say why with a 413 or 422 and leave no profile; a success
 * must give profiles that decode and validate as pprof. Every input is
 * converted twice, with stack-trace pools copied and with them located
 * (lazy_stacks_min_bytes 1, a path real recordings take only past 2 MiB):
 * both must give the same bytes, or the same error.
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

/* One conversion; the result's profiles (or error) stay in r / st. */
static int convert(const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                   size_t lazy_min, lc_arena_t *arena, lc_jfr_result_t *r, lc_status_t *st)
{
    lc_jfr_params_t params = {.start_ns = 1700000000000000000LL,
                              .end_ns = 1700000010000000000LL,
                              .sample_rate = 100,
                              .lazy_stacks_min_bytes = lazy_min};
    int rc = lc_jfr_to_pprof(jfr, jfr_len, labels, labels_len, &params, arena, r, st);
    if (rc != 0 && (!st->msg[0] || r->n != 0 || (st->http_status != 413 && st->http_status != 422)))
        abort();
    return rc;
}

static void same_results(const lc_jfr_result_t *a, const lc_jfr_result_t *b)
{
    if (a->n != b->n)
        abort();
    for (size_t i = 0; i < a->n; i++)
        if (a->profiles[i].pprof.len != b->profiles[i].pprof.len ||
            memcmp(a->profiles[i].pprof.data, b->profiles[i].pprof.data,
                   a->profiles[i].pprof.len) != 0)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4 << 20)
        return 0;
    size_t labels_len = data[0] < size - 1 ? data[0] : 0;
    const uint8_t *labels = labels_len ? data + 1 : NULL, *jfr = data + 1 + labels_len;
    size_t jfr_len = size - 1 - labels_len;
    lc_arena_t *arena = lc_arena_new(1 << 28);
    lc_status_t st_copied = {0}, st_located = {0};
    lc_jfr_result_t copied, located;
    int rc_copied = convert(jfr, jfr_len, labels, labels_len, 0, arena, &copied, &st_copied);
    int rc_located = convert(jfr, jfr_len, labels, labels_len, 1, arena, &located, &st_located);
    if (rc_copied != rc_located || (rc_copied && strcmp(st_copied.msg, st_located.msg) != 0))
        abort();
    if (rc_copied == 0) {
        check_profiles(&copied, arena);
        same_results(&copied, &located);
        lc_jfr_result_fini(&copied);
        lc_jfr_result_fini(&located);
    }
    lc_arena_free(arena);
    return 0;
}
