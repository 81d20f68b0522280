/*
 * fuzz_adhoc_file.c — the ad-hoc view's format dispatch (adhoc_file_decode)
 * on arbitrary bytes: gzip or not, JFR, folded text or pprof. Whatever
 * decodes must be self-consistent: every flattened type points at a profile
 * and one of its sample types, has a name and a unit, and is found again by
 * its name; a refusal always says why.
 */
#include <stdlib.h>
#include <string.h>

#include "adhoc_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

static void check_file(const adhoc_file_t *f)
{
    require(f->n_profiles > 0 && f->n_profiles <= LC_JFR_KINDS_);
    for (size_t i = 0; i < f->n_types; i++) {
        require(f->profile_of[i] < f->n_profiles);
        require(f->type_in[i] < f->profiles[f->profile_of[i]]->n_sample_type);
        require(f->names[i] != NULL && f->units[i] != NULL);
        require(adhoc_file_type(f, f->names[i]) <= i);
    }
    require(adhoc_file_type(f, "") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_arena_t *arena = lc_arena_new(64u << 20);
    adhoc_file_t f;
    lc_status_t st = {0};
    if (adhoc_file_decode(data, size, arena, &f, &st) == 0)
        check_file(&f);
    else
        require(st.msg[0] != '\0');
    lc_arena_free(arena);
    return 0;
}
