/*
 * pprof_index.c — id -> element lookups for a decoded pprof.
 *
 * pprof ids are arbitrary uint64s, but producers almost always number them
 * 1..n in order; the index then is a direct array. Otherwise it falls back to
 * a sorted array with binary search. Everything lives in the caller's arena.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/pprof.h"

typedef struct id_slot_s {
    uint64_t id;
    const void *elem;
} id_slot_t;

typedef struct id_table_s {
    bool dense; /* elems[id - 1] */
    size_t n;
    const void **elems; /* dense form */
    id_slot_t *slots;   /* sorted form */
} id_table_t;

struct lc_pprof_index_s {
    id_table_t locations, functions, mappings;
};

static int slot_cmp(const void *a, const void *b)
{
    uint64_t x = ((const id_slot_t *)a)->id, y = ((const id_slot_t *)b)->id;
    return x < y ? -1 : x > y;
}

/* ids(i) reads the id of element i; the element pointers are in `elems`. */
static int table_build(id_table_t *t, void *const *elems, size_t n, size_t id_offset,
                       lc_arena_t *arena)
{
    t->n = n;
    t->dense = true;
    for (size_t i = 0; i < n && t->dense; i++)
        t->dense = *(const uint64_t *)((const char *)elems[i] + id_offset) == i + 1;
    if (t->dense) {
        t->elems = (const void **)elems;
        return 0;
    }
    t->slots = lc_arena_calloc(arena, n, sizeof(*t->slots));
    if (!t->slots && n)
        return LC_ETOOBIG;
    for (size_t i = 0; i < n; i++) {
        t->slots[i].id = *(const uint64_t *)((const char *)elems[i] + id_offset);
        t->slots[i].elem = elems[i];
    }
    qsort(t->slots, n, sizeof(*t->slots), slot_cmp);
    return 0;
}

static const void *table_get(const id_table_t *t, uint64_t id)
{
    if (id == 0)
        return NULL;
    if (t->dense)
        return id <= t->n ? t->elems[id - 1] : NULL;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->slots[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->slots[lo].id == id ? t->slots[lo].elem : NULL;
}

int lc_pprof_index_new(const lc_pprof_t *p, lc_arena_t *arena, lc_pprof_index_t **out)
{
    lc_pprof_index_t *ix = lc_arena_calloc(arena, 1, sizeof(*ix));
    if (!ix)
        return LC_ETOOBIG;
    int rc = table_build(&ix->locations, (void *const *)p->location, p->n_location,
                         offsetof(Google__V1__Location, id), arena);
    if (!rc)
        rc = table_build(&ix->functions, (void *const *)p->function, p->n_function,
                         offsetof(Google__V1__Function, id), arena);
    if (!rc)
        rc = table_build(&ix->mappings, (void *const *)p->mapping, p->n_mapping,
                         offsetof(Google__V1__Mapping, id), arena);
    if (rc)
        return rc;
    *out = ix;
    return 0;
}

const Google__V1__Location *lc_pprof_location(const lc_pprof_index_t *ix, uint64_t id)
{
    return table_get(&ix->locations, id);
}

const Google__V1__Function *lc_pprof_function(const lc_pprof_index_t *ix, uint64_t id)
{
    return table_get(&ix->functions, id);
}

const Google__V1__Mapping *lc_pprof_mapping(const lc_pprof_index_t *ix, uint64_t id)
{
    return table_get(&ix->mappings, id);
}

const char *lc_pprof_str(const lc_pprof_t *p, int64_t idx)
{
    if (idx < 0 || (size_t)idx >= p->n_string_table)
        return "";
    return p->string_table[idx];
}
