/*
 * fuzz_marks_spec.c — lc_marks_spec_next, the parser of the x-ember-bucket
 * header the querier's shard on the bucket reads (lc/members.h, issue 27).
 * Properties: it never reads past the NUL; every entry it accepts has a
 * non-empty id without NUL; the accepted entries, written again with
 * lc_marks_spec_add, parse back to the same entries.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/members.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 64

static void require(bool ok)
{
    if (!ok)
        abort();
}

static size_t parse_all(const char *text, lc_marks_entry_t *v)
{
    size_t n = 0;
    const char *p = text;
    while (n < MAX_ENTRIES && lc_marks_spec_next(&p, &v[n]) == 0) {
        require(v[n].id[0] != '\0' && p > text && p <= text + strlen(text));
        n++;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    require(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    static lc_marks_entry_t got[MAX_ENTRIES], again[MAX_ENTRIES];
    size_t n = parse_all(text, got);
    char *spec = NULL;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        lc_member_t m = {.id = got[i].id, .mark_ms = got[i].mark_ms, .mark_gen = got[i].gen};
        if (m.mark_ms == LC_MEMBER_NO_MARK)
            continue; /* never written: no mark */
        require(lc_marks_spec_add(&spec, &len, &m));
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += got[i].mark_ms != LC_MEMBER_NO_MARK;
    size_t m = spec ? parse_all(spec, again) : 0;
    require(m == k);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (got[i].mark_ms == LC_MEMBER_NO_MARK)
            continue;
        require(again[j].gen == got[i].gen && again[j].mark_ms == got[i].mark_ms &&
                strcmp(again[j].id, got[i].id) == 0);
        j++;
    }
    lc_free(spec);
    free(text);
    return 0;
}
