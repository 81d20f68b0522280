/*
 * fuzz_folded.c — the folded/lines parser and their conversion to pprof
 * (services/ingester/folded.c, convert.c). The first byte picks the format
 * and the sample rate; a converted profile must decode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receive_int.h"

typedef struct bounds_s {
    const uint8_t *start, *end;
} bounds_t;

static int check_stack(const char *stack, size_t len, int64_t value, void *data)
{
    const bounds_t *b = data;
    if ((const uint8_t *)stack < b->start || (const uint8_t *)stack + len > b->end || value < 0)
        abort();
    return 0;
}

static void convert(const uint8_t *body, size_t len, bool lines, uint32_t rate)
{
    lc_arena_t *arena = lc_arena_new(1 << 26);
    lc_status_t st = {0};
    ing_app_type_t t;
    if (ing_app_type(rate & 1 ? "app.wall" : "app", arena, &t, &st) != 0)
        abort();
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_buf_t out;
    lc_buf_init(&out, lim.max_decompressed_bytes);
    if (ing_text_to_pprof(body, len, lines, &t, rate, 1, &lim, arena, &out, &st) == 0) {
        /* Must decode; validation may refuse it (e.g. frames of invalid
         * UTF-8, which the handler answers with 422), but says why. */
        lc_pprof_t *p;
        if (lc_pprof_decode(out.data, out.len, &lim, arena, &p, &st) != 0)
            abort();
        if (lc_pprof_validate(p, &lim, &st) != 0 && !st.msg[0])
            abort();
    }
    lc_buf_fini(&out);
    lc_arena_free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    bool lines = data[0] & 1;
    uint32_t rate = data[0] >> 1; /* 0..127: 0 keeps counts */
    size_t len = size - 1;
    uint8_t *body = malloc(len ? len : 1);
    memcpy(body, data + 1, len);
    bounds_t b = {body, body + len};
    lc_arena_t *arena = lc_arena_new(1 << 26);
    lc_status_t st = {0};
    if (lc_folded_parse(body, len, lines, arena, check_stack, &b, &st) != 0 && !st.msg[0])
        abort();
    lc_arena_free(arena);
    convert(body, len, lines, rate);
    free(body);
    return 0;
}
