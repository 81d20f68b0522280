/*
 * fanout_merge.c — merging what ingesters answer: partial pprofs into one
 * builder (which de-duplicates functions, locations and equal samples, so the
 * merge of N partials is what one store would have produced), and sorted
 * string listings into their union.
 */
#include <stdlib.h>
#include <string.h>

#include "fanout_int.h"
#include "lc/pprof.h"

/* ------------------------------------------------------------------ pprof */

typedef struct id_map_s {
    uint64_t *from, *to;
    size_t n;
} id_map_t;

static uint64_t map_id(const id_map_t *m, uint64_t id)
{
    for (size_t lo = 0, hi = m->n; lo < hi;) { /* ids come sorted when dense */
        size_t mid = lo + (hi - lo) / 2;
        if (m->from[mid] == id)
            return m->to[mid];
        if (m->from[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = 0; i < m->n; i++) /* not sorted after all */
        if (m->from[i] == id)
            return m->to[i];
    return 0;
}

static void merge_map_init(id_map_t *m, lc_arena_t *a, size_t n)
{
    m->from = lc_arena_calloc(a, n + 1, sizeof(uint64_t));
    m->to = lc_arena_calloc(a, n + 1, sizeof(uint64_t));
    m->n = m->from && m->to ? n : 0;
}

static void add_functions(lc_pprof_builder_t *b, const lc_pprof_t *p, id_map_t *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const Google__V1__Function *fn = p->function[i];
        m->from[i] = fn->id;
        m->to[i] = lc_pprof_builder_function(b, lc_pprof_str(p, fn->name),
                                             lc_pprof_str(p, fn->system_name),
                                             lc_pprof_str(p, fn->filename), fn->start_line);
    }
}

static void add_mappings(lc_pprof_builder_t *b, const lc_pprof_t *p, id_map_t *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const Google__V1__Mapping *mp = p->mapping[i];
        m->from[i] = mp->id;
        m->to[i] = lc_pprof_builder_mapping(b, mp->memory_start, mp->memory_limit, mp->file_offset,
                                            lc_pprof_str(p, mp->filename),
                                            lc_pprof_str(p, mp->build_id), mp->has_functions);
    }
}

static int add_locations(lc_pprof_builder_t *b, lc_arena_t *a, const lc_pprof_t *p, id_map_t *m,
                         const id_map_t *fns, const id_map_t *maps)
{
    for (size_t i = 0; i < m->n; i++) {
        const Google__V1__Location *loc = p->location[i];
        lc_pprof_line_t *lines = lc_arena_calloc(a, loc->n_line + 1, sizeof(*lines));
        if (!lines)
            return LC_ETOOBIG;
        for (size_t k = 0; k < loc->n_line; k++)
            lines[k] =
                (lc_pprof_line_t){map_id(fns, loc->line[k]->function_id), loc->line[k]->line};
        m->from[i] = loc->id;
        m->to[i] = lc_pprof_builder_location(b, loc->mapping_id ? map_id(maps, loc->mapping_id) : 0,
                                             loc->address, lines, loc->n_line);
    }
    return 0;
}

static int add_samples(lc_pprof_builder_t *b, lc_arena_t *a, const lc_pprof_t *p,
                       const id_map_t *locs)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const Google__V1__Sample *s = p->sample[i];
        uint64_t *ids = lc_arena_calloc(a, s->n_location_id + 1, sizeof(*ids));
        if (!ids)
            return LC_ETOOBIG;
        for (size_t k = 0; k < s->n_location_id; k++)
            ids[k] = map_id(locs, s->location_id[k]);
        lc_pprof_builder_sample(b, ids, s->n_location_id, s->value, NULL, 0);
    }
    return 0;
}

static void merge_add_header(lc_pprof_builder_t *b, const lc_pprof_t *p)
{
    for (size_t i = 0; i < p->n_sample_type; i++)
        lc_pprof_builder_sample_type(b, lc_pprof_str(p, p->sample_type[i]->type),
                                     lc_pprof_str(p, p->sample_type[i]->unit));
    if (p->period_type)
        lc_pprof_builder_period(b, lc_pprof_str(p, p->period_type->type),
                                lc_pprof_str(p, p->period_type->unit), p->period);
}

int fo_pprof_add(lc_pprof_builder_t *b, lc_arena_t *a, const uint8_t *pb, size_t len, bool first,
                 int64_t *start_ns, int64_t *end_ns, lc_status_t *st)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = SIZE_MAX / 2;
    lim.max_samples = 0;
    lc_pprof_t *p;
    if (lc_pprof_decode(pb, len, &lim, a, &p, st))
        return -1;
    if (first)
        merge_add_header(b, p);
    if (first || p->time_nanos < *start_ns)
        *start_ns = p->time_nanos;
    if (first || p->time_nanos + p->duration_nanos > *end_ns)
        *end_ns = p->time_nanos + p->duration_nanos;
    id_map_t fns, maps, locs;
    merge_map_init(&fns, a, p->n_function);
    merge_map_init(&maps, a, p->n_mapping);
    merge_map_init(&locs, a, p->n_location);
    add_functions(b, p, &fns);
    add_mappings(b, p, &maps);
    int rc = add_locations(b, a, p, &locs, &fns, &maps);
    if (rc == 0)
        rc = add_samples(b, a, p, &locs);
    return rc ? qry_fail_arena(st) : 0;
}

/* -------------------------------------------------------------- listings */

static int merge_str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fo_union_strings(lc_arena_t *a, char ***lists, const size_t *ns, size_t n_lists, char ***out,
                     size_t *n_out)
{
    size_t total = 0;
    for (size_t i = 0; i < n_lists; i++)
        total += ns[i];
    char **v = lc_arena_calloc(a, total + 1, sizeof(*v));
    if (!v)
        return LC_ETOOBIG;
    size_t n = 0;
    for (size_t i = 0; i < n_lists; i++)
        for (size_t k = 0; k < ns[i]; k++)
            v[n++] = lists[i][k];
    if (n)
        qsort(v, n, sizeof(*v), merge_str_cmp);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || strcmp(v[w - 1], v[i]) != 0)
            v[w++] = v[i];
    *out = v;
    *n_out = w;
    return 0;
}
