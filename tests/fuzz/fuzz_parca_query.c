/*
 * fuzz_parca_query.c — Parca's query strings (parca_parse_query) on arbitrary
 * text, with and without a required profile type (the first byte picks).
 * Whatever parses must map consistently: the Pyroscope type id is the five
 * name parts joined by ':', and when the selector part parses on its own,
 * the selector with the type matcher added (what Labels and Values send the
 * back end) parses too, with one more matcher, __profile_type__ first.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/labels.h"
#include "parca_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

static void check_mapping(const parca_query_t *q, lc_arena_t *a)
{
    if (q->type_id) {
        const char *want = lc_arena_sprintf(a, "%s:%s:%s:%s:%s", q->name, q->sample_type,
                                            q->sample_unit, q->period_type, q->period_unit);
        require(want && strcmp(want, q->type_id) == 0);
    }
    lc_selector_t alone, with;
    lc_status_t st = {0};
    if (lc_selector_parse(q->selector, strlen(q->selector), &alone, &st) != 0)
        return;
    const char *combined = parca_selector_with_type(q->type_id, q->selector, a);
    require(combined != NULL);
    require(lc_selector_parse(combined, strlen(combined), &with, &st) == 0);
    if (q->type_id) {
        require(with.n == alone.n + 1);
        require(strcmp(with.m[0].name, "__profile_type__") == 0);
        require(strcmp(with.m[0].value, q->type_id) == 0);
    }
    lc_selector_fini(&with);
    lc_selector_fini(&alone);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    lc_arena_t *a = lc_arena_new(1u << 20);
    char *text = lc_arena_strndup(a, (const char *)data + 1, size - 1);
    parca_query_t q;
    lc_status_t st = {0};
    if (text && parca_parse_query(text, data[0] & 1, a, &q, &st) == 0)
        check_mapping(&q, a);
    else if (text)
        require(st.code == LC_CODE_INVALID_ARGUMENT && st.msg[0]);
    lc_arena_free(a);
    return 0;
}
