/*
 * delta.c — cumulative-to-delta conversion for scraped profiles (delta.h).
 *
 * A sample's identity is a 128-bit hash (two independent 64-bit hashes) of
 * its stack and labels, serialised from the strings rather than the string
 * table indices, which differ from one scrape to the next. Samples with the
 * same identity are summed, as pprof's merge does; the difference is written
 * into the first of them and the others get zero.
 *
 * The baseline is a table from identity to the summed values of the
 * subtracted sample types, plus a hash of those types' names and units: a
 * profile whose types changed cannot be subtracted and starts a new baseline.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "lc/labels.h"

#define SEED_HI 0x51ed27
#define SEED_LO 0xa0761d
#define INUSE_PREFIX "inuse_"

typedef struct delta_key_s {
    uint64_t hi, lo;
} delta_key_t;

/* Identity -> summed values, open addressing; sized once per profile. */
typedef struct delta_map_s {
    delta_key_t *keys;
    int64_t *vals; /* n_types per slot */
    uint8_t *used;
    size_t cap; /* power of two */
    size_t n;
    size_t n_types;
} delta_map_t;

struct scr_delta_s {
    delta_map_t base;
    uint64_t types_hash;
    bool has_base;
};

/* ---------------------------------------------------------------- map */

static void map_init(delta_map_t *m, size_t n_entries, size_t n_types)
{
    size_t cap = 16;
    while (cap < 2 * n_entries)
        cap *= 2;
    m->cap = cap;
    m->n = 0;
    m->n_types = n_types;
    m->keys = lc_xcalloc(cap, sizeof(*m->keys));
    m->vals = lc_xcalloc(cap * (n_types ? n_types : 1), sizeof(*m->vals));
    m->used = lc_xcalloc(cap, 1);
}

static void map_fini(delta_map_t *m)
{
    lc_free(m->keys);
    lc_free(m->vals);
    lc_free(m->used);
    memset(m, 0, sizeof(*m));
}

/* The values slot of key, or NULL when absent (insert = false). */
static int64_t *map_slot(delta_map_t *m, delta_key_t k, bool insert)
{
    if (!m->cap)
        return NULL;
    for (size_t i = (size_t)k.lo & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i]) {
            if (!insert)
                return NULL;
            m->used[i] = 1;
            m->keys[i] = k;
            m->n++;
            return &m->vals[i * m->n_types];
        }
        if (m->keys[i].hi == k.hi && m->keys[i].lo == k.lo)
            return &m->vals[i * m->n_types];
    }
}

/* ---------------------------------------------------------------- identity */

static int put_u64(lc_buf_t *b, uint64_t v)
{
    return lc_buf_append(b, &v, sizeof(v));
}

static int put_str(lc_buf_t *b, const char *s)
{
    int rc = lc_buf_puts(b, s);
    return rc ? rc : lc_buf_putc(b, '\0');
}

static int put_location(lc_buf_t *b, const lc_pprof_t *p, const lc_pprof_index_t *ix, uint64_t id)
{
    const Google__V1__Location *loc = lc_pprof_location(ix, id);
    int rc = put_u64(b, loc ? loc->address : id);
    for (size_t i = 0; loc && i < loc->n_line && !rc; i++) {
        const Google__V1__Function *fn = lc_pprof_function(ix, loc->line[i]->function_id);
        rc = put_str(b, fn ? lc_pprof_str(p, fn->name) : "");
        if (!rc)
            rc = put_str(b, fn ? lc_pprof_str(p, fn->filename) : "");
        if (!rc)
            rc = put_u64(b, (uint64_t)loc->line[i]->line);
    }
    return rc ? rc : lc_buf_putc(b, '\x01');
}

/* Orders labels by their strings (key, then string value, then number and
 * unit), so that the order does not depend on a profile's string table. */
static int scr_label_cmp(const void *a, const void *b, void *arg)
{
    const lc_pprof_t *p = arg;
    const Google__V1__Label *x = *(Google__V1__Label *const *)a;
    const Google__V1__Label *y = *(Google__V1__Label *const *)b;
    int c = strcmp(lc_pprof_str(p, x->key), lc_pprof_str(p, y->key));
    if (!c)
        c = strcmp(lc_pprof_str(p, x->str), lc_pprof_str(p, y->str));
    if (!c)
        c = x->num < y->num ? -1 : x->num > y->num;
    if (!c)
        c = strcmp(lc_pprof_str(p, x->num_unit), lc_pprof_str(p, y->num_unit));
    return c;
}

static int put_labels(lc_buf_t *b, const lc_pprof_t *p, const Google__V1__Sample *s,
                      Google__V1__Label **scratch)
{
    if (!s->n_label)
        return 0;
    memcpy(scratch, s->label, s->n_label * sizeof(*scratch));
    qsort_r(scratch, s->n_label, sizeof(*scratch), scr_label_cmp, (void *)p);
    int rc = 0;
    for (size_t i = 0; i < s->n_label && !rc; i++) {
        const Google__V1__Label *l = scratch[i];
        rc = put_str(b, lc_pprof_str(p, l->key));
        if (!rc)
            rc = put_str(b, lc_pprof_str(p, l->str));
        if (!rc)
            rc = put_u64(b, (uint64_t)l->num);
        if (!rc)
            rc = put_str(b, lc_pprof_str(p, l->num_unit));
    }
    return rc;
}

static int sample_key(lc_buf_t *b, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                      const Google__V1__Sample *s, Google__V1__Label **scratch, delta_key_t *out)
{
    lc_buf_reset(b);
    int rc = 0;
    for (size_t i = 0; i < s->n_location_id && !rc; i++)
        rc = put_location(b, p, ix, s->location_id[i]);
    if (!rc)
        rc = lc_buf_putc(b, '\x02');
    if (!rc)
        rc = put_labels(b, p, s, scratch);
    if (rc)
        return rc;
    out->hi = lc_hash64(b->data, b->len, SEED_HI);
    out->lo = lc_hash64(b->data, b->len, SEED_LO);
    return 0;
}

/* ---------------------------------------------------------------- types */

/* Indices of the subtracted sample types (all but inuse_*), and a hash of
 * their names so that a baseline is only used with the same types. */
static size_t delta_types(const lc_pprof_t *p, size_t *idx, uint64_t *hash)
{
    size_t n = 0;
    uint64_t h = 0;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *type = lc_pprof_str(p, p->sample_type[i]->type);
        const char *unit = lc_pprof_str(p, p->sample_type[i]->unit);
        if (strncmp(type, INUSE_PREFIX, strlen(INUSE_PREFIX)) == 0)
            continue;
        idx[n++] = i;
        h = lc_hash64(type, strlen(type), h ^ i);
        h = lc_hash64(unit, strlen(unit), h);
    }
    *hash = h ^ n;
    return n;
}

/* ---------------------------------------------------------------- the step */

typedef struct delta_run_s {
    lc_pprof_t *p;
    delta_key_t *keys; /* per sample */
    size_t *idx;       /* subtracted types */
    size_t n_idx;
    delta_map_t cur;
} delta_run_t;

static int compute_keys(delta_run_t *r, const lc_pprof_index_t *ix, lc_arena_t *arena)
{
    lc_pprof_t *p = r->p;
    size_t max_labels = 1;
    for (size_t i = 0; i < p->n_sample; i++)
        max_labels = p->sample[i]->n_label > max_labels ? p->sample[i]->n_label : max_labels;
    Google__V1__Label **scratch = lc_arena_calloc(arena, max_labels, sizeof(*scratch));
    r->keys = lc_arena_calloc(arena, p->n_sample ? p->n_sample : 1, sizeof(*r->keys));
    if (!scratch || !r->keys)
        return LC_ETOOBIG;
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    int rc = 0;
    for (size_t i = 0; i < p->n_sample && !rc; i++)
        rc = sample_key(&b, p, ix, p->sample[i], scratch, &r->keys[i]);
    lc_buf_fini(&b);
    return rc;
}

static void sum_current(delta_run_t *r)
{
    map_init(&r->cur, r->p->n_sample, r->n_idx);
    for (size_t i = 0; i < r->p->n_sample; i++) {
        int64_t *v = map_slot(&r->cur, r->keys[i], true);
        for (size_t t = 0; t < r->n_idx; t++)
            v[t] += r->p->sample[i]->value[r->idx[t]];
    }
}

/* A counter went down, or a stack that had counts vanished. */
static bool counters_went_down(const delta_map_t *base, delta_map_t *cur)
{
    for (size_t s = 0; s < base->cap; s++) {
        if (!base->used[s])
            continue;
        const int64_t *prev = &base->vals[s * base->n_types];
        const int64_t *now = map_slot(cur, base->keys[s], false);
        for (size_t t = 0; t < base->n_types; t++)
            if ((now ? now[t] : 0) < prev[t])
                return true;
    }
    return false;
}

static bool all_zero(const Google__V1__Sample *s)
{
    for (size_t t = 0; t < s->n_value; t++)
        if (s->value[t])
            return false;
    return true;
}

/* Writes the differences into the samples and drops the all-zero ones. */
static void subtract(delta_run_t *r, delta_map_t *base, uint8_t *done)
{
    lc_pprof_t *p = r->p;
    size_t kept = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        Google__V1__Sample *s = p->sample[i];
        int64_t *sum = map_slot(&r->cur, r->keys[i], false);
        size_t slot = (size_t)(sum - r->cur.vals) / (r->n_idx ? r->n_idx : 1);
        const int64_t *prev = map_slot(base, r->keys[i], false);
        bool first = !done[slot];
        done[slot] = 1;
        for (size_t t = 0; t < r->n_idx; t++)
            s->value[r->idx[t]] = first ? sum[t] - (prev ? prev[t] : 0) : 0;
        if (!all_zero(s))
            p->sample[kept++] = s;
    }
    p->n_sample = kept;
}

int scr_delta_apply(scr_delta_t *d, lc_pprof_t *p, const lc_pprof_index_t *ix, lc_arena_t *arena,
                    scr_delta_result_t *result)
{
    delta_run_t r = {.p = p};
    r.idx = lc_arena_calloc(arena, p->n_sample_type ? p->n_sample_type : 1, sizeof(*r.idx));
    if (!r.idx)
        return LC_ETOOBIG;
    uint64_t types_hash;
    r.n_idx = delta_types(p, r.idx, &types_hash);
    int rc = compute_keys(&r, ix, arena);
    if (rc)
        return rc;
    sum_current(&r);
    uint8_t *done = lc_arena_calloc(arena, r.cur.cap, 1); /* by slot of r.cur */
    if (!done) {
        map_fini(&r.cur);
        return LC_ETOOBIG;
    }
    if (!d->has_base || d->types_hash != types_hash) {
        *result = SCR_DELTA_FIRST;
    } else if (counters_went_down(&d->base, &r.cur)) {
        *result = SCR_DELTA_RESET;
    } else {
        subtract(&r, &d->base, done);
        *result = p->n_sample ? SCR_DELTA_READY : SCR_DELTA_EMPTY;
    }
    map_fini(&d->base);
    d->base = r.cur;
    d->types_hash = types_hash;
    d->has_base = true;
    return 0;
}

/* ---------------------------------------------------------------- lifecycle */

scr_delta_t *scr_delta_new(void)
{
    return lc_xcalloc(1, sizeof(scr_delta_t));
}

void scr_delta_forget(scr_delta_t *d)
{
    map_fini(&d->base);
    d->has_base = false;
}

void scr_delta_free(scr_delta_t *d)
{
    if (!d)
        return;
    map_fini(&d->base);
    lc_free(d);
}

size_t scr_delta_bytes(const scr_delta_t *d)
{
    const delta_map_t *m = &d->base;
    return m->cap * (sizeof(delta_key_t) + 1 + m->n_types * sizeof(int64_t));
}
