/*
 * fuzz_labelset.c — the /ingest `name` parser (services/ingester/labelset.c).
 * Checks the invariants of a successful parse: a non-empty app name and label
 * names of [a-zA-Z0-9_.] only (the `__name__` override is not a label).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receive_int.h"

static bool key_ok(const char *k)
{
    if (!*k)
        return false;
    for (; *k; k++) {
        char c = *k;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    lc_arena_t *arena = lc_arena_new(1 << 24);
    ing_labelset_t ls;
    lc_status_t st = {0};
    if (ing_labelset_parse(s, arena, &ls, &st) == 0) {
        if (!ls.app_name || !*ls.app_name)
            abort();
        for (size_t i = 0; i < ls.n; i++) {
            if (!key_ok(ls.v[i].name) || !ls.v[i].value || strcmp(ls.v[i].name, "__name__") == 0)
                abort();
        }
    } else if (st.code != LC_CODE_INVALID_ARGUMENT || !st.msg[0]) {
        abort();
    }
    lc_arena_free(arena);
    free(s);
    return 0;
}
