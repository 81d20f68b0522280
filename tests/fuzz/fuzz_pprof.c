/*
 * fuzz_pprof.c — lc_pprof_decode + lc_pprof_validate on arbitrary bytes (raw
 * or gzipped protobuf). Small limits make the truncation paths reachable.
 * What validates must keep the promises validation makes to the rest of
 * ember: every id and string index resolves, stacks and strings are within
 * the limits, and the profile re-encodes into bytes that validate again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ARENA_CAP (64u << 20)

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_pprof: broken promise: %s\n", what);
        abort();
    }
}

static void check_references(const lc_pprof_t *p, const lc_pprof_index_t *ix,
                             const lc_pprof_limits_t *lim)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const Google__V1__Sample *s = p->sample[i];
        require(s->n_value == p->n_sample_type, "one value per sample type");
        require(s->n_location_id <= lim->max_stack_depth, "stack depth within limit");
        for (size_t k = 0; k < s->n_location_id; k++)
            require(lc_pprof_location(ix, s->location_id[k]) != NULL, "sample location exists");
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const Google__V1__Location *l = p->location[i];
        require(!l->mapping_id || lc_pprof_mapping(ix, l->mapping_id), "mapping exists");
        for (size_t k = 0; k < l->n_line; k++)
            require(lc_pprof_function(ix, l->line[k]->function_id) != NULL, "function exists");
    }
    for (size_t i = 0; i < p->n_string_table; i++)
        require(strlen(p->string_table[i]) <= lim->max_symbol_bytes, "string within limit");
}

static void check_round_trip(const lc_pprof_t *p, const lc_pprof_limits_t *lim)
{
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    require(lc_pprof_encode(p, false, &out) == 0, "encode");
    lc_pprof_limits_t again_lim = *lim;
    again_lim.max_decompressed_bytes = out.len + 1;
    lc_arena_t *a = lc_arena_new(FUZZ_ARENA_CAP * 2);
    lc_pprof_t *q = NULL;
    lc_status_t st = {0};
    require(lc_pprof_decode(out.data, out.len, &again_lim, a, &q, &st) == 0, "re-decode");
    if (lc_pprof_validate(q, &again_lim, &st) != 0) {
        fprintf(stderr, "fuzz_pprof: re-validate: %s\n", st.msg);
        abort();
    }
    require(q->n_sample == p->n_sample && q->n_location == p->n_location, "same shape");
    lc_arena_free(a);
    lc_buf_fini(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_pprof_limits_t lim = {
        .max_decompressed_bytes = 8u << 20,
        .max_samples = 100000,
        .max_labels_per_sample = 8,
        .max_stack_depth = 16,
        .max_symbol_bytes = 64,
    };
    lc_arena_t *a = lc_arena_new(FUZZ_ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_pprof_index_t *ix = NULL;
    lc_status_t st = {0};
    bool valid =
        lc_pprof_decode(data, size, &lim, a, &p, &st) == 0 && lc_pprof_validate(p, &lim, &st) == 0;
    if (valid) {
        require(lc_pprof_index_new(p, a, &ix) == 0, "index");
        check_references(p, ix, &lim);
        check_round_trip(p, &lim);
    } else {
        require(st.code == LC_CODE_INVALID_ARGUMENT && st.msg[0], "errors say what is wrong");
    }
    lc_arena_free(a);
    return 0;
}
