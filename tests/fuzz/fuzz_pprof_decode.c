/*
 * fuzz_pprof_decode.c — differential: the hand-written pprof decoder
 * (pprof_decode.c) against protobuf-c's unpack (pprof_reference.c), on
 * arbitrary bytes taken as protobuf (gzip is lc_pprof_decode's, in front of
 * both). Both must take the same decision with the same message; when both
 * accept, their profiles must pack to the same bytes once the unknown fields
 * protobuf-c keeps are dropped.
 *
 * Intended differences (pprof_int.h), allowed here and nowhere else: the new
 * decoder refuses a bool that is not a varint, which protobuf-c reads anyway;
 * and it refuses more than lim.max_samples samples before decoding them, which
 * is checked on its own below (the comparison runs without that limit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcommon/profile/src/pprof_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ARENA_CAP (512u << 20) /* well above what either decoder needs */
#define FUZZ_SAMPLE_CAP 4

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_pprof_decode: %s\n", what);
        abort();
    }
}

static void require_same_packing(const lc_pprof_t *mine, lc_pprof_t *ref)
{
    lc_pprof__drop_unknown_fields(ref);
    size_t n = protobuf_c_message_get_packed_size(&mine->base);
    require(n == protobuf_c_message_get_packed_size(&ref->base), "packed sizes differ");
    uint8_t *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
    require(protobuf_c_message_pack(&mine->base, x) == n, "pack (new)");
    require(protobuf_c_message_pack(&ref->base, y) == n, "pack (protobuf-c)");
    require(memcmp(x, y, n) == 0, "packed bytes differ");
    free(x);
    free(y);
}

/* What the decoder saw of the samples' location ids is what protobuf-c's
 * profile holds (validation trusts it instead of reading every frame). */
static void require_seen(const lc_pprof_seen_t *seen, const lc_pprof_t *mine, const lc_pprof_t *ref)
{
    uint64_t max = 0;
    bool zero = false;
    for (size_t i = 0; i < ref->n_sample; i++)
        for (size_t k = 0; k < ref->sample[i]->n_location_id; k++) {
            uint64_t id = ref->sample[i]->location_id[k];
            max = id > max ? id : max;
            zero |= id == 0;
        }
    require(seen->profile == mine && seen->location_id_max == max && seen->location_id_zero == zero,
            "seen location ids differ");
}

/* The cap refuses exactly the profiles with sample types and too many samples. */
static void check_sample_cap(const uint8_t *data, size_t size, const lc_pprof_t *uncapped)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = FUZZ_SAMPLE_CAP;
    lc_arena_t *a = lc_arena_new(FUZZ_ARENA_CAP);
    lc_pprof_t *p;
    lc_status_t st = {0};
    lc_pprof__decode_err_t why;
    int rc = lc_pprof__decode_pb(data, size, &lim, a, &p, &why, &st);
    bool over = uncapped->n_sample > FUZZ_SAMPLE_CAP && uncapped->n_sample_type > 0;
    require(over ? why == LC_PPROF__TOO_MANY_SAMPLES : rc == 0, "sample cap");
    lc_arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = 0;
    lc_arena_t *a = lc_arena_new(FUZZ_ARENA_CAP), *b = lc_arena_new(FUZZ_ARENA_CAP);
    lc_pprof_t *mine = NULL, *ref = NULL;
    lc_status_t st_mine = {0}, st_ref = {0};
    lc_pprof__decode_err_t why;
    lc_pprof_seen_t seen;
    int rc_mine = lc_pprof__decode_pb_seen(data, size, &lim, a, &mine, &seen, &why, &st_mine);
    int rc_ref = lc_pprof__decode_protobuf_c(data, size, b, &ref, &st_ref);
    if (why == LC_PPROF__BOOL_WIRE_TYPE) {
        require(strcmp(st_mine.msg, LC_PPROF__MSG_MALFORMED) == 0, "bool message");
    } else {
        if ((rc_mine == 0) != (rc_ref == 0) || strcmp(st_mine.msg, st_ref.msg) != 0)
            fprintf(stderr, "new: %d \"%s\"\nprotobuf-c: %d \"%s\"\n", rc_mine, st_mine.msg, rc_ref,
                    st_ref.msg);
        require((rc_mine == 0) == (rc_ref == 0), "accept/reject differs");
        require(strcmp(st_mine.msg, st_ref.msg) == 0, "messages differ");
        if (rc_mine == 0) {
            require_same_packing(mine, ref);
            require_seen(&seen, mine, ref);
            check_sample_cap(data, size, mine);
        }
    }
    lc_arena_free(a);
    lc_arena_free(b);
    return 0;
}
