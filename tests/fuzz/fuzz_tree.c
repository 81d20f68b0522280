/*
 * fuzz_tree.c — the tree and trie decoders (services/ingester/src/tree.c) and
 * their conversion to pprof. The first byte picks the format (bit 0: trie)
 * and the sample rate; every reported stack must be a sane key with a
 * non-negative value, a failure must say why, and a converted profile must
 * decode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receive_int.h"

static int check_stack(const char *stack, size_t len, int64_t value, void *data)
{
    size_t *stacks = data;
    if (len > ING_TREE_MAX_KEY_BYTES || value <= 0 || (len && !stack))
        abort();
    (*stacks)++;
    return 0;
}

static void convert(const uint8_t *body, size_t len, bool trie, uint32_t rate)
{
    lc_arena_t *arena = lc_arena_new(1 << 26);
    lc_status_t st = {0};
    ing_app_type_t t;
    if (ing_app_type(rate & 1 ? "app.wall" : "app.alloc_space", arena, &t, &st) != 0)
        abort();
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_cv_t *cv = ing_cv_new(&t, rate, 1, &lim, &st);
    lc_buf_t out;
    lc_buf_init(&out, lim.max_decompressed_bytes);
    if (ing_tree_decode(body, len, trie, lc_cv_stack, cv, &st) == 0 &&
        lc_cv_encode(cv, &out) == 0) {
        lc_pprof_t *p;
        if (lc_pprof_decode(out.data, out.len, &lim, arena, &p, &st) != 0)
            abort();
        if (lc_pprof_validate(p, &lim, &st) != 0 && !st.msg[0])
            abort();
    }
    lc_buf_fini(&out);
    lc_cv_free(cv);
    lc_arena_free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    bool trie = data[0] & 1;
    uint32_t rate = data[0] >> 1; /* 0..127 */
    size_t len = size - 1;
    uint8_t *body = malloc(len ? len : 1);
    memcpy(body, data + 1, len);
    size_t stacks = 0;
    lc_status_t st = {0};
    int rc = ing_tree_decode(body, len, trie, check_stack, &stacks, &st);
    if (rc != 0 && !st.msg[0])
        abort();
    lc_status_t st2 = {0};
    if ((ing_tree_decode(body, len, trie, NULL, NULL, &st2) == 0) != (rc == 0))
        abort(); /* validation alone must agree with the full decode */
    convert(body, len, trie, rate);
    free(body);
    return 0;
}
