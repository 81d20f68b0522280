/*
 * spy.c — fixes for what old scripting-language profilers upload
 * (pyroscope-api.md §2.5): pyspy, rbspy and "scripting" report a function
 * name that means little without its file, so the name becomes
 * "<filename> <function>". py-spy already puts the path in the name when the
 * file is absolute, so those are left alone; a function without a filename
 * keeps its name too. Rewritten names are appended to the string table (arena
 * memory), since one string may be shared by several functions.
 */
#include <string.h>

#include "receive_int.h"

bool ing_spy_rewrites_names(const char *spy)
{
    return spy && (!strcmp(spy, "pyspy") || !strcmp(spy, "rbspy") || !strcmp(spy, "scripting"));
}

static bool spy_skips(const char *spy, const char *filename)
{
    return !*filename || (!strcmp(spy, "pyspy") && filename[0] == '/');
}

/* Grows the string table by n slots; returns the index of the first new one. */
static int64_t spy_grow_strings(Google__V1__Profile *p, size_t n, lc_arena_t *arena)
{
    char **t = lc_arena_calloc(arena, p->n_string_table + n, sizeof(*t));
    if (!t)
        return -1;
    memcpy(t, p->string_table, p->n_string_table * sizeof(*t));
    int64_t first = (int64_t)p->n_string_table;
    p->string_table = t;
    return first;
}

int ing_spy_fix_names(Google__V1__Profile *p, const char *spy, lc_arena_t *arena)
{
    if (!ing_spy_rewrites_names(spy) || p->n_function == 0)
        return 0;
    int64_t next = spy_grow_strings(p, p->n_function, arena);
    if (next < 0)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_function; i++) {
        Google__V1__Function *f = p->function[i];
        const char *file = ing_pprof_str(p, f->filename);
        if (spy_skips(spy, file))
            continue;
        char *name = lc_arena_sprintf(arena, "%s %s", file, ing_pprof_str(p, f->name));
        if (!name)
            return LC_ETOOBIG;
        p->string_table[next] = name;
        f->name = next++;
        p->n_string_table = (size_t)next;
    }
    return 0;
}
