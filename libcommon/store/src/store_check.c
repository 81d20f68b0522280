/*
 * store_check.c — everything a write of one message can refuse, asked before
 * the message is published (the receivers) and when it is decoded (the
 * writer), so that the two sides never disagree: a profile the receivers
 * accept is one the writer can apply (issue 25).
 *
 * Values are checked in a way that does not depend on order: for each sample
 * type the positive values of the whole profile must sum within int64, and so
 * must the negative ones; likewise the values of each sample across its types.
 * Then every partial sum the writer forms — a stack's samples merged, a
 * series' total, a profile's total — lies between those two bounds and fits.
 */
#include <string.h>

#include "store_int.h"

/* Positive and negative parts of a sum, each of which must fit int64. */
typedef struct sum_bounds_s {
    int64_t pos, neg;
    bool overflow;
} sum_bounds_t;

static void bounds_add(sum_bounds_t *b, int64_t v)
{
    if (v > 0)
        b->overflow |= __builtin_add_overflow(b->pos, v, &b->pos);
    else
        b->overflow |= __builtin_add_overflow(b->neg, v, &b->neg);
}

/* "<what> <i>: <why>" as invalid_argument. */
static int refuse(lc_status_t *st, const char *what, size_t i, const char *why)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s %zu: %s", what, i, why);
}

/* A string the store interns: in the table, and not longer than a symbol. */
static int check_string(const lc_pprof_t *p, int64_t idx, const char *what, size_t i,
                        lc_status_t *st)
{
    if (idx < 0 || (size_t)idx >= p->n_string_table)
        return refuse(st, what, i, "references a string outside the string table");
    if (strlen(p->string_table[idx]) > STORE_MAX_STRING_BYTES)
        return refuse(st, what, i, "has a string longer than 1 MiB");
    return 0;
}

static int check_function(const lc_pprof_t *p, const Google__V1__Function *fn, size_t i,
                          lc_status_t *st)
{
    int64_t strs[] = {fn->name, fn->system_name, fn->filename};
    for (size_t k = 0; k < LC_ARRAY_LEN(strs); k++)
        if (check_string(p, strs[k], "function", i, st) < 0)
            return -1;
    return 0;
}

static int check_mapping(const lc_pprof_t *p, const Google__V1__Mapping *m, size_t i,
                         lc_status_t *st)
{
    if (check_string(p, m->filename, "mapping", i, st) < 0)
        return -1;
    return check_string(p, m->build_id, "mapping", i, st);
}

/* The store resolves a location's mapping and its lines' functions by id;
 * id 0 means none. */
static int check_location(const lc_pprof_index_t *ix, const Google__V1__Location *loc, size_t i,
                          lc_status_t *st)
{
    if (loc->mapping_id && !lc_pprof_mapping(ix, loc->mapping_id))
        return refuse(st, "location", i, "references an unknown mapping");
    for (size_t k = 0; k < loc->n_line; k++) {
        uint64_t fn = loc->line[k]->function_id;
        if (fn && !lc_pprof_function(ix, fn))
            return refuse(st, "location", i, "references an unknown function");
    }
    return 0;
}

static int check_symbols(const lc_pprof_t *p, const lc_pprof_index_t *ix, lc_status_t *st)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (check_function(p, p->function[i], i, st) < 0)
            return -1;
    for (size_t i = 0; i < p->n_mapping; i++)
        if (check_mapping(p, p->mapping[i], i, st) < 0)
            return -1;
    for (size_t i = 0; i < p->n_location; i++)
        if (check_location(ix, p->location[i], i, st) < 0)
            return -1;
    return 0;
}

/* Whether the location ids are 1..n in order, as Go and most writers emit
 * them: a sample's location is then known iff its id is in that range, with
 * no index lookup per frame (those lookups were half of this check's CPU on
 * the ingest bench, issue 32). */
static bool locations_dense(const lc_pprof_t *p)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id != i + 1)
            return false;
    return true;
}

static bool location_known(const lc_pprof_t *p, const lc_pprof_index_t *ix, bool dense, uint64_t id)
{
    return dense ? id - 1 < p->n_location : lc_pprof_location(ix, id) != NULL;
}

/* One sample: a value per sample type, known locations, and values that sum
 * within int64 across its types. */
static int check_sample_values(const lc_pprof_t *p, const lc_pprof_index_t *ix, bool dense,
                               bool frames_known, size_t i, sum_bounds_t *per_type, lc_status_t *st)
{
    const Google__V1__Sample *s = p->sample[i];
    if (s->n_value < p->n_sample_type)
        return refuse(st, "sample", i, "has fewer values than sample types");
    for (size_t k = 0; !frames_known && k < s->n_location_id; k++)
        if (!location_known(p, ix, dense, s->location_id[k]))
            return refuse(st, "sample", i, "references an unknown location");
    sum_bounds_t across = {0};
    for (size_t t = 0; t < p->n_sample_type; t++) {
        bounds_add(&across, s->value[t]);
        bounds_add(&per_type[t], s->value[t]);
    }
    if (across.overflow)
        return refuse(st, "sample", i, "its values across sample types sum past int64");
    return 0;
}

/* Per sample type over the whole profile: bounds every series' and every
 * merged stack's sum, since those are sums over subsets of the samples. */
static int check_values(const lc_pprof_t *p, const lc_pprof_index_t *ix, bool frames_known,
                        lc_arena_t *arena, lc_status_t *st)
{
    sum_bounds_t *per_type = lc_arena_calloc(arena, p->n_sample_type, sizeof(*per_type));
    if (!per_type)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of memory checking the profile");
    bool dense = !frames_known && locations_dense(p);
    for (size_t i = 0; i < p->n_sample; i++)
        if (check_sample_values(p, ix, dense, frames_known, i, per_type, st) < 0)
            return -1;
    for (size_t t = 0; t < p->n_sample_type; t++)
        if (per_type[t].overflow)
            return refuse(st, "sample type", t,
                          "the profile's values sum past int64 (per profile and per series)");
    return 0;
}

static int check_message(const lc_pprof_t *p, const char *tenant, int64_t time_ns, lc_status_t *st)
{
    if (!tenant || strlen(tenant) > STORE_MAX_TENANT_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "tenant id longer than %d bytes",
                             STORE_MAX_TENANT_BYTES);
    if (time_ns > STORE_MAX_TIME_NS || time_ns < -STORE_MAX_TIME_NS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile time %lld ns is outside +-2^62 ns", (long long)time_ns);
    if (p->n_sample_type == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile has no sample types");
    if (p->n_sample > LC_STORE_MAX_SAMPLES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile has %zu samples (limit %zu)",
                             p->n_sample, (size_t)LC_STORE_MAX_SAMPLES);
    return 0;
}

static int check_profile(const lc_pprof_t *p, const char *tenant, int64_t time_ns,
                         bool frames_known, lc_arena_t *arena, lc_pprof_index_t **ix_out,
                         lc_status_t *st)
{
    if (check_message(p, tenant, time_ns, st) < 0)
        return -1;
    lc_pprof_index_t *ix;
    if (lc_pprof_index_new(p, arena, &ix) < 0)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of memory indexing the profile");
    if (check_symbols(p, ix, st) < 0 || check_values(p, ix, frames_known, arena, st) < 0)
        return -1;
    if (ix_out)
        *ix_out = ix;
    return 0;
}

int lc_store_check_profile(const lc_pprof_t *p, const char *tenant, int64_t time_ns,
                           lc_arena_t *arena, lc_pprof_index_t **ix_out, lc_status_t *st)
{
    return check_profile(p, tenant, time_ns, false, arena, ix_out, st);
}

int lc_store_check_validated(const lc_pprof_t *p, const char *tenant, int64_t time_ns,
                             lc_arena_t *arena, lc_pprof_index_t **ix_out, lc_status_t *st)
{
    return check_profile(p, tenant, time_ns, true, arena, ix_out, st);
}
