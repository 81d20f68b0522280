/*
 * delta.c — Pyroscope v1's server-side delta for cumulative Go heap
 * allocations (pyroscope-api.md §4.5): for series named `memory` whose sample
 * type is alloc_objects or alloc_space, unless the client said
 * __delta__="false" or the profile covers a time window (see below), each
 * profile is stored as its difference to the previous
 * profile of the same series. The first profile of a series only becomes the
 * baseline; if any stack's value went down (the process restarted), the
 * baseline is reset and that profile is dropped too.
 *
 * Where ember departs from v1: a profile with duration_nanos > 0 says it holds
 * the values of that window, not totals since the process started (Go's
 * heap?seconds=N, pyroscope-io's per-upload memory profiles, which carry no
 * __delta__ label), so it is stored as sent; a second difference would make
 * its totals wrong. Go's cumulative heap profile has no duration.
 *
 * Stacks are matched across profiles by a key computed from symbols (pprof ids
 * are per profile). State is per series fingerprint and lives in the writer.
 * Changes made while a batch is written are staged, so a batch that fails and
 * is redelivered sees the state from before it. Memory is bounded: once the
 * committed baselines hold more than max_entries stacks, they are all dropped,
 * which only means the next profile of each series becomes a new baseline.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/log.h"
#include "write_int.h"

typedef struct dl_point_s {
    uint64_t key;
    int64_t value;
} dl_point_t;

typedef struct dl_baseline_s {
    uint64_t fp;
    dl_point_t *points; /* sorted by key, keys unique */
    size_t n;
} dl_baseline_t;

typedef struct dl_vec_s {
    dl_baseline_t *v;
    size_t n, cap;
} dl_vec_t;

struct ing_delta_s {
    dl_vec_t committed; /* sorted by fp */
    dl_vec_t pending;   /* staged in this batch, in order */
    size_t committed_points;
    size_t max_entries;
};

ing_delta_t *ing_delta_new(size_t max_entries)
{
    ing_delta_t *d = lc_xcalloc(1, sizeof(*d));
    d->max_entries = max_entries;
    return d;
}

static void dl_vec_clear(dl_vec_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        lc_free(v->v[i].points);
    v->n = 0;
}

void ing_delta_free(ing_delta_t *d)
{
    if (!d)
        return;
    dl_vec_clear(&d->committed);
    dl_vec_clear(&d->pending);
    lc_free(d->committed.v);
    lc_free(d->pending.v);
    lc_free(d);
}

bool ing_delta_applies(const char *metric, const char *sample_type, bool delta_disabled,
                       int64_t duration_nanos)
{
    return !delta_disabled && duration_nanos <= 0 && metric && !strcmp(metric, "memory") &&
           (!strcmp(sample_type, "alloc_objects") || !strcmp(sample_type, "alloc_space"));
}

/* ---------------------------------------------------------------- lookups */

static size_t dl_lower_bound(const dl_vec_t *v, uint64_t fp)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->v[mid].fp < fp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The newest baseline of a series: staged in this batch first, then committed. */
static const dl_baseline_t *dl_find(const ing_delta_t *d, uint64_t fp)
{
    for (size_t i = d->pending.n; i > 0; i--) {
        if (d->pending.v[i - 1].fp == fp)
            return &d->pending.v[i - 1];
    }
    size_t at = dl_lower_bound(&d->committed, fp);
    return at < d->committed.n && d->committed.v[at].fp == fp ? &d->committed.v[at] : NULL;
}

static int64_t dl_value(const dl_baseline_t *b, uint64_t key)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->points[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->n && b->points[lo].key == key ? b->points[lo].value : 0;
}

/* ---------------------------------------------------------------- apply */

static int dl_point_cmp(const void *a, const void *b)
{
    uint64_t x = ((const dl_point_t *)a)->key, y = ((const dl_point_t *)b)->key;
    return x < y ? -1 : x > y;
}

/* Sums values per stack key: the profile's points, sorted and unique. */
static dl_baseline_t dl_aggregate(uint64_t fp, const uint64_t *keys, const int64_t *values,
                                  size_t n)
{
    dl_baseline_t b = {.fp = fp, .points = lc_xmalloc((n ? n : 1) * sizeof(dl_point_t))};
    for (size_t i = 0; i < n; i++)
        b.points[i] = (dl_point_t){keys[i], values[i]};
    qsort(b.points, n, sizeof(*b.points), dl_point_cmp);
    for (size_t i = 0; i < n; i++) {
        if (b.n > 0 && b.points[b.n - 1].key == b.points[i].key) /* bounded: checked profile */
            b.points[b.n - 1].value =
                (int64_t)((uint64_t)b.points[b.n - 1].value + (uint64_t)b.points[i].value);
        else
            b.points[b.n++] = b.points[i];
    }
    return b;
}

static void dl_stage(ing_delta_t *d, dl_baseline_t b)
{
    d->pending.v = lc_xgrow(d->pending.v, &d->pending.cap, d->pending.n + 1, sizeof(b));
    d->pending.v[d->pending.n++] = b;
}

/* Delta values per sample; the first sample of each stack carries its whole
 * delta, repeats of that stack get 0. False if any stack decreased. */
static bool dl_deltas(const dl_baseline_t *cur, const dl_baseline_t *prev, const uint64_t *keys,
                      size_t n, int64_t *out)
{
    int64_t *delta = lc_xmalloc((cur->n ? cur->n : 1) * sizeof(*delta));
    bool ok = true;
    /* A negative cumulative value (in either profile) counts as a reset:
     * then every delta lies in [0, its current value], so the deltas sum no
     * further than the profile's own values, which lc_store_check_profile
     * bounded. */
    for (size_t i = 0; i < cur->n && ok; i++) {
        int64_t was = dl_value(prev, cur->points[i].key);
        ok = was >= 0 && cur->points[i].value >= was;
        delta[i] = ok ? cur->points[i].value - was : 0;
    }
    for (size_t i = 0; i < n && ok; i++) {
        dl_point_t probe = {keys[i], 0};
        dl_point_t *at = bsearch(&probe, cur->points, cur->n, sizeof(probe), dl_point_cmp);
        size_t k = (size_t)(at - cur->points);
        out[i] = delta[k];
        delta[k] = 0;
    }
    lc_free(delta);
    return ok;
}

bool ing_delta_apply(ing_delta_t *d, uint64_t series_fp, const uint64_t *stack_keys,
                     const int64_t *values, size_t n, int64_t *out_values)
{
    const dl_baseline_t *prev = dl_find(d, series_fp);
    dl_baseline_t cur = dl_aggregate(series_fp, stack_keys, values, n);
    bool keep = prev && dl_deltas(&cur, prev, stack_keys, n, out_values);
    dl_stage(d, cur); /* after the lookup: staging may move the pending array */
    return keep;
}

/* ---------------------------------------------------------------- batches */

static void dl_commit_one(ing_delta_t *d, dl_baseline_t b)
{
    dl_vec_t *c = &d->committed;
    size_t at = dl_lower_bound(c, b.fp);
    if (at < c->n && c->v[at].fp == b.fp) {
        d->committed_points -= c->v[at].n;
        lc_free(c->v[at].points);
        c->v[at] = b;
    } else {
        c->v = lc_xgrow(c->v, &c->cap, c->n + 1, sizeof(b));
        memmove(&c->v[at + 1], &c->v[at], (c->n - at) * sizeof(b));
        c->v[at] = b;
        c->n++;
    }
    d->committed_points += b.n;
}

void ing_delta_commit(ing_delta_t *d)
{
    for (size_t i = 0; i < d->pending.n; i++)
        dl_commit_one(d, d->pending.v[i]);
    d->pending.n = 0;
    if (d->committed_points > d->max_entries) {
        LC_LOG_WARN("server-side delta state over its cap; baselines reset points=%zu cap=%zu",
                    d->committed_points, d->max_entries);
        dl_vec_clear(&d->committed);
        d->committed_points = 0;
    }
}

void ing_delta_discard(ing_delta_t *d)
{
    dl_vec_clear(&d->pending);
}

/* ---------------------------------------------------------------- stack keys */

static uint64_t dl_mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t dl_mix_str(uint64_t h, const char *s)
{
    return dl_mix(h, s, strlen(s) + 1);
}

uint64_t ing_stack_key(const Google__V1__Profile *p, const Google__V1__Sample *s,
                       const lc_pprof_index_t *ix)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < s->n_location_id; i++) {
        const Google__V1__Location *loc = lc_pprof_location(ix, s->location_id[i]);
        if (!loc)
            continue;
        if (loc->n_line == 0) /* unsymbolized: the address is all there is */
            h = dl_mix(h, &loc->address, sizeof(loc->address));
        for (size_t j = 0; j < loc->n_line; j++) {
            const Google__V1__Function *f = lc_pprof_function(ix, loc->line[j]->function_id);
            h = dl_mix_str(h, f ? ing_pprof_str(p, f->name) : "");
            h = dl_mix_str(h, f ? ing_pprof_str(p, f->filename) : "");
            h = dl_mix(h, &loc->line[j]->line, sizeof(loc->line[j]->line));
        }
        h = dl_mix(h, "|", 1);
    }
    return h;
}
