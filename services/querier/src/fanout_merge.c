/*
 * fanout_merge.c — merging what ingesters answer: partial pprofs into one
 * builder (which de-duplicates functions, locations and equal samples, so the
 * merge of N partials is what one store would have produced), and sorted
 * string listings into their union.
 */
#define _GNU_SOURCE /* qsort_r: the sorts take their context, no global */
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

/* ------------------------------------------------------ canonical order */

/* Content order of mappings, functions and locations: what a location is,
 * never the ids it happened to get. */
static int str_cmp_at(const lc_pprof_t *p, int64_t a, int64_t b)
{
    return strcmp(lc_pprof_str(p, a), lc_pprof_str(p, b));
}

static int order_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

static int mapping_cmp(const lc_pprof_t *p, const Google__V1__Mapping *a,
                       const Google__V1__Mapping *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    int c = str_cmp_at(p, a->filename, b->filename);
    if (!c)
        c = str_cmp_at(p, a->build_id, b->build_id);
    if (!c)
        c = order_u64(a->memory_start, b->memory_start);
    if (!c)
        c = order_u64(a->memory_limit, b->memory_limit);
    return c ? c : order_u64(a->file_offset, b->file_offset);
}

static int function_cmp(const lc_pprof_t *p, const Google__V1__Function *a,
                        const Google__V1__Function *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    int c = str_cmp_at(p, a->name, b->name);
    if (!c)
        c = str_cmp_at(p, a->system_name, b->system_name);
    if (!c)
        c = str_cmp_at(p, a->filename, b->filename);
    return c ? c : (a->start_line > b->start_line) - (a->start_line < b->start_line);
}

/* The merged profile p as it is rebuilt: p came from a builder, so its ids
 * are dense (function, mapping and location ids 1..n, in table order). */
typedef struct canon_s {
    const lc_pprof_t *p;
    lc_pprof_builder_t *b;
    uint32_t *rank;    /* by location index: its place in content order */
    uint64_t *new_loc; /* by location index: its id in b, 0 = not added yet */
    uint64_t *new_fn;  /* by old function id */
    uint64_t *new_map; /* by old mapping id */
} canon_t;

static bool canon_dense(const lc_pprof_t *p)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id != i + 1 || p->location[i]->mapping_id > p->n_mapping)
            return false;
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id != i + 1)
            return false;
    for (size_t i = 0; i < p->n_mapping; i++)
        if (p->mapping[i]->id != i + 1)
            return false;
    for (size_t i = 0; i < p->n_location; i++)
        for (size_t k = 0; k < p->location[i]->n_line; k++)
            if (p->location[i]->line[k]->function_id - 1 >= p->n_function)
                return false;
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
            if (p->sample[i]->location_id[k] - 1 >= p->n_location)
                return false;
    return true;
}

static const Google__V1__Mapping *mapping_of(const lc_pprof_t *p, uint64_t id)
{
    return id ? p->mapping[id - 1] : NULL;
}

static int location_cmp(const void *x, const void *y, void *arg)
{
    const lc_pprof_t *p = arg;
    const Google__V1__Location *a = p->location[*(const size_t *)x];
    const Google__V1__Location *b = p->location[*(const size_t *)y];
    int r = mapping_cmp(p, mapping_of(p, a->mapping_id), mapping_of(p, b->mapping_id));
    if (!r)
        r = order_u64(a->address, b->address);
    for (size_t k = 0; !r && k < a->n_line && k < b->n_line; k++) {
        r = function_cmp(p, p->function[a->line[k]->function_id - 1],
                         p->function[b->line[k]->function_id - 1]);
        if (!r)
            r = (a->line[k]->line > b->line[k]->line) - (a->line[k]->line < b->line[k]->line);
    }
    return r ? r : order_u64(a->n_line, b->n_line);
}

/* Samples by their stacks' location ranks, leaf first. */
static int sample_cmp(const void *x, const void *y, void *arg)
{
    const uint32_t *rank = arg;
    const Google__V1__Sample *a = *(Google__V1__Sample *const *)x;
    const Google__V1__Sample *b = *(Google__V1__Sample *const *)y;
    for (size_t k = 0; k < a->n_location_id && k < b->n_location_id; k++) {
        uint32_t ra = rank[a->location_id[k] - 1], rb = rank[b->location_id[k] - 1];
        if (ra != rb)
            return (ra > rb) - (ra < rb);
    }
    return order_u64(a->n_location_id, b->n_location_id);
}

static uint64_t canon_function(canon_t *c, uint64_t old)
{
    if (!c->new_fn[old]) {
        const Google__V1__Function *fn = c->p->function[old - 1];
        c->new_fn[old] = lc_pprof_builder_function(
            c->b, lc_pprof_str(c->p, fn->name), lc_pprof_str(c->p, fn->system_name),
            lc_pprof_str(c->p, fn->filename), fn->start_line);
    }
    return c->new_fn[old];
}

static uint64_t canon_mapping(canon_t *c, uint64_t old)
{
    if (old && !c->new_map[old]) {
        const Google__V1__Mapping *mp = c->p->mapping[old - 1];
        c->new_map[old] = lc_pprof_builder_mapping(
            c->b, mp->memory_start, mp->memory_limit, mp->file_offset,
            lc_pprof_str(c->p, mp->filename), lc_pprof_str(c->p, mp->build_id), mp->has_functions);
    }
    return old ? c->new_map[old] : 0;
}

/* Location index i in the new builder: its mapping and functions first. */
static uint64_t canon_location(canon_t *c, lc_arena_t *a, size_t i)
{
    if (c->new_loc[i])
        return c->new_loc[i];
    const Google__V1__Location *loc = c->p->location[i];
    lc_pprof_line_t *lines = lc_arena_calloc(a, loc->n_line + 1, sizeof(*lines));
    if (!lines)
        return 0;
    uint64_t map = canon_mapping(c, loc->mapping_id);
    for (size_t k = 0; k < loc->n_line; k++)
        lines[k] =
            (lc_pprof_line_t){canon_function(c, loc->line[k]->function_id), loc->line[k]->line};
    c->new_loc[i] = lc_pprof_builder_location(c->b, map, loc->address, lines, loc->n_line);
    return c->new_loc[i];
}

static int canon_samples(canon_t *c, lc_arena_t *a, const Google__V1__Sample **samples)
{
    const lc_pprof_t *p = c->p;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Google__V1__Sample *s = samples[i];
        uint64_t *ids = lc_arena_calloc(a, s->n_location_id + 1, sizeof(*ids));
        if (!ids)
            return LC_ETOOBIG;
        for (size_t k = 0; k < s->n_location_id; k++)
            if (!(ids[k] = canon_location(c, a, s->location_id[k] - 1)))
                return LC_ETOOBIG;
        lc_pprof_builder_sample(c->b, ids, s->n_location_id, s->value, NULL, 0);
    }
    return 0;
}

int fo_pprof_canonical(lc_pprof_builder_t *b, lc_arena_t *a, const lc_pprof_t *p)
{
    if (!canon_dense(p))
        return LC_EINPUT;
    size_t nl = p->n_location;
    canon_t c = {.p = p,
                 .b = b,
                 .rank = lc_arena_calloc(a, nl + 1, sizeof(uint32_t)),
                 .new_loc = lc_arena_calloc(a, nl + 1, sizeof(uint64_t)),
                 .new_fn = lc_arena_calloc(a, p->n_function + 1, sizeof(uint64_t)),
                 .new_map = lc_arena_calloc(a, p->n_mapping + 1, sizeof(uint64_t))};
    size_t *order = lc_arena_calloc(a, nl + 1, sizeof(*order));
    const Google__V1__Sample **samples = lc_arena_calloc(a, p->n_sample + 1, sizeof(*samples));
    if (!c.rank || !c.new_loc || !c.new_fn || !c.new_map || !order || !samples)
        return LC_ETOOBIG;
    for (size_t i = 0; i < nl; i++)
        order[i] = i;
    qsort_r(order, nl, sizeof(*order), location_cmp, (void *)p);
    for (size_t i = 0; i < nl; i++)
        c.rank[order[i]] = (uint32_t)i;
    if (p->n_sample)
        memcpy(samples, p->sample, p->n_sample * sizeof(*samples));
    qsort_r(samples, p->n_sample, sizeof(*samples), sample_cmp, c.rank);
    merge_add_header(b, p);
    return canon_samples(&c, a, samples);
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
