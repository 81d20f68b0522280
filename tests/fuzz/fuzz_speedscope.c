/*
 * fuzz_speedscope.c — the speedscope parser (services/ingester/src/
 * speedscope.c) and its stacks into the converter. A parsed file's stacks
 * must index its frames, be no deeper than the cap and carry positive values;
 * a failure must say why; converted profiles must decode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receive_int.h"

typedef struct check_s {
    const ing_speedscope_t *ss;
    lc_cv_t *cv;
    uint64_t locs[ING_SPEEDSCOPE_MAX_DEPTH];
} check_t;

static int check_stack(const uint32_t *frames, size_t n, int64_t value, void *data)
{
    check_t *c = data;
    if (n > ING_SPEEDSCOPE_MAX_DEPTH || value <= 0)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (frames[i] >= c->ss->n_frames)
            abort();
        c->locs[i] =
            lc_cv_location(c->cv, c->ss->frame_names[frames[i]], c->ss->frame_lens[frames[i]]);
    }
    return lc_cv_sample(c->cv, c->locs, n, value);
}

static void convert(const ing_speedscope_t *ss, size_t i, lc_arena_t *arena)
{
    static check_t c;
    lc_status_t st = {0};
    ing_app_type_t t;
    if (ing_app_type(ss->profiles[i].evented ? "app" : "app.bytes", arena, &t, &st) != 0)
        abort();
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    c.ss = ss;
    c.cv = ing_cv_new(&t, ing_speedscope_default_rate(&ss->profiles[i]), 1, &lim, &st);
    lc_buf_t out;
    lc_buf_init(&out, lim.max_decompressed_bytes);
    int rc = ing_speedscope_stacks(ss, i, check_stack, &c, &st);
    if (rc != 0 && !st.msg[0])
        abort();
    if (rc == 0 && lc_cv_encode(c.cv, &out) == 0) {
        lc_pprof_t *p;
        if (lc_pprof_decode(out.data, out.len, &lim, arena, &p, &st) != 0)
            abort();
        if (lc_pprof_validate(p, &lim, &st) != 0 && !st.msg[0])
            abort();
    }
    lc_buf_fini(&out);
    lc_cv_free(c.cv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    lc_arena_t *arena = lc_arena_new(1 << 26);
    lc_status_t st = {0};
    ing_speedscope_t ss;
    if (ing_speedscope_parse(data, size, arena, &ss, &st) != 0) {
        if (!st.msg[0] || ss.doc)
            abort();
    } else {
        for (size_t i = 0; i < ss.n_profiles; i++)
            convert(&ss, i, arena);
        ing_speedscope_fini(&ss);
    }
    lc_arena_free(arena);
    return 0;
}
