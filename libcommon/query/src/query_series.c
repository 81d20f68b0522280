/*
 * query_series.c — SelectSeries (pyroscope-api.md §5.8): profile totals
 * bucketed into time steps, grouped by labels, summed or averaged, limited to
 * the top N series and sorted by labels.
 *
 * A profile at t (ms) belongs to the first step boundary s = start + k*step
 * with t <= s, t >= start - step; profiles past the last boundary <= end are
 * dropped, as in Pyroscope's RangeSeries (its querier reads from start - step,
 * so the point at start sums [start - step, start]). Points are sparse. The raw (group, boundary,
 * value) triples are kept and reduced once at the end with one sort, which is cheaper than a
 * per-bucket map while profiles arrive out of time order across blocks. The per-profile value is
 * the stored total, so no samples are read; only a span or call-site filter makes it read samples
 * and sum those that pass (the call site decided once per block node, query_callsite.c).
 */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

typedef struct ts_group_s {
    char *key; /* "name\0value\0" per present group_by label */
    size_t key_len;
    uint64_t hash;
    lc_labels_t labels; /* in group_by order (not sorted) */
} ts_group_t;

typedef struct ts_raw_s {
    int64_t ts_ms;
    int64_t value;
    uint32_t group;
} ts_raw_t;

struct lc_query_series_s {
    lc_query_series_opts_t o;
    char **group_by;
    ts_group_t *groups;
    size_t n_groups, groups_cap;
    uint32_t *slots; /* open addressing: group id + 1 */
    size_t mask;
    ts_raw_t *raw;
    size_t n_raw, raw_cap;
};

lc_query_series_t *lc_query_series_new(const lc_query_series_opts_t *opts)
{
    lc_query_series_t *s = lc_xcalloc(1, sizeof(*s));
    s->o = *opts;
    s->group_by = lc_xcalloc(opts->n_group_by ? opts->n_group_by : 1, sizeof(char *));
    for (size_t i = 0; i < opts->n_group_by; i++)
        s->group_by[i] = lc_xstrdup(opts->group_by[i]);
    s->o.group_by = (const char *const *)s->group_by;
    s->mask = 63;
    s->slots = lc_xcalloc(s->mask + 1, sizeof(uint32_t));
    return s;
}

void lc_query_series_free(lc_query_series_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->o.n_group_by; i++)
        lc_free(s->group_by[i]);
    lc_free(s->group_by);
    for (size_t i = 0; i < s->n_groups; i++) {
        lc_free(s->groups[i].key);
        lc_labels_fini(&s->groups[i].labels);
    }
    lc_free(s->groups);
    lc_free(s->slots);
    lc_free(s->raw);
    lc_free(s);
}

/* ------------------------------------------------------------------ groups */

/* The group key: every present group_by label as name\0value\0, in order. */
static void group_key(const lc_query_series_t *s, const lc_labels_t *labels, lc_buf_t *key)
{
    for (size_t i = 0; i < s->o.n_group_by; i++) {
        const char *v = lc_labels_get(labels, s->group_by[i]);
        if (!v || !*v)
            continue;
        /* Unlimited buffer: appends cannot fail. */
        (void)!lc_buf_append(key, s->group_by[i], strlen(s->group_by[i]) + 1);
        (void)!lc_buf_append(key, v, strlen(v) + 1);
    }
}

static void groups_rehash(lc_query_series_t *s)
{
    size_t n = (s->mask + 1) * 2;
    lc_free(s->slots);
    s->slots = lc_xcalloc(n, sizeof(uint32_t));
    s->mask = n - 1;
    for (size_t g = 0; g < s->n_groups; g++) {
        size_t i = s->groups[g].hash & s->mask;
        while (s->slots[i])
            i = (i + 1) & s->mask;
        s->slots[i] = (uint32_t)g + 1;
    }
}

static uint32_t group_insert(lc_query_series_t *s, lc_buf_t *key, uint64_t h, size_t slot)
{
    s->groups = lc_xgrow(s->groups, &s->groups_cap, s->n_groups + 1, sizeof(*s->groups));
    ts_group_t *g = &s->groups[s->n_groups];
    *g = (ts_group_t){.key_len = key->len, .hash = h};
    g->key = (char *)lc_buf_steal(key, &g->key_len);
    lc_labels_init(&g->labels);
    for (size_t off = 0; off < g->key_len;) {
        const char *name = g->key + off;
        const char *value = name + strlen(name) + 1;
        lc_labels_add(&g->labels, name, value);
        off = (size_t)(value - g->key) + strlen(value) + 1;
    }
    s->slots[slot] = (uint32_t)s->n_groups + 1;
    uint32_t id = (uint32_t)s->n_groups++;
    if (s->n_groups * 2 > s->mask + 1)
        groups_rehash(s);
    return id;
}

int lc_query_series_group(lc_query_series_t *s, const lc_labels_t *labels, uint32_t *group)
{
    lc_buf_t key;
    lc_buf_init(&key, LC_BUF_UNLIMITED);
    group_key(s, labels, &key);
    uint64_t h = lc_query__hash_bytes(key.data ? (const void *)key.data : "", key.len);
    size_t i = h & s->mask;
    while (s->slots[i]) {
        const ts_group_t *g = &s->groups[s->slots[i] - 1];
        if (g->hash == h && g->key_len == key.len &&
            (key.len == 0 || memcmp(g->key, key.data, key.len) == 0)) {
            *group = s->slots[i] - 1;
            lc_buf_fini(&key);
            return 0;
        }
        i = (i + 1) & s->mask;
    }
    if (s->n_groups >= UINT32_MAX - 1) {
        lc_buf_fini(&key);
        return LC_ETOOBIG;
    }
    *group = group_insert(s, &key, h, i);
    lc_buf_fini(&key);
    return 0;
}

/* ----------------------------------------------------------------- points */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The boundary a time falls on, or false if it is outside [start - step, last].
 * As in Pyroscope's rangeSeries (whose querier reads from start - step), the
 * first point, at start, holds the profiles of [start - step, start]; so with
 * step > end - start that point is the whole answer. (C's division truncates
 * toward zero, so every t in [start - step, start] gives k = 0.) */
static bool bucket_of(const lc_query_series_opts_t *o, int64_t t_ms, int64_t *boundary)
{
    if (t_ms < lc_query_series_first_ms(o) || t_ms > o->end_ms)
        return false;
    __int128 k = ((__int128)t_ms - o->start_ms + o->step_ms - 1) / o->step_ms;
    __int128 b = (__int128)o->start_ms + k * o->step_ms;
    if (b > o->end_ms)
        return false;
    *boundary = (int64_t)b;
    return true;
}

bool lc_query_series_bucket(const lc_query_series_opts_t *o, int64_t time_ns, int64_t *boundary_ms)
{
    return o->step_ms >= 1 && bucket_of(o, floor_div(time_ns, 1000000), boundary_ms);
}

int lc_query_series_add(lc_query_series_t *s, uint32_t group, int64_t time_ns, int64_t value)
{
    int64_t boundary;
    if (!lc_query_series_bucket(&s->o, time_ns, &boundary))
        return 0;
    if (s->n_raw >= LC_QUERY_MAX_SERIES_POINTS)
        return LC_ETOOBIG;
    s->raw = lc_xgrow(s->raw, &s->raw_cap, s->n_raw + 1, sizeof(*s->raw));
    s->raw[s->n_raw++] = (ts_raw_t){.ts_ms = boundary, .value = value, .group = group};
    return 0;
}

/* ------------------------------------------------------------------- emit */

typedef struct ts_out_s {
    const lc_labels_t *labels;
    Types__V1__Series *series;
    double sum;
} ts_out_t;

static int raw_cmp(const void *a, const void *b)
{
    const ts_raw_t *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->ts_ms < y->ts_ms ? -1 : x->ts_ms > y->ts_ms;
}

/* Pyroscope's CompareLabelPairs: pairwise by name then value, shorter first. */
static int labels_cmp(const lc_labels_t *a, const lc_labels_t *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        int c = strcmp(a->v[i].name, b->v[i].name);
        if (c == 0)
            c = strcmp(a->v[i].value, b->v[i].value);
        if (c)
            return c;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

static int out_by_labels(const void *a, const void *b)
{
    return labels_cmp(((const ts_out_t *)a)->labels, ((const ts_out_t *)b)->labels);
}

static int out_by_sum_desc(const void *a, const void *b)
{
    const ts_out_t *x = a, *y = b;
    if (x->sum != y->sum)
        return x->sum > y->sum ? -1 : 1;
    return labels_cmp(x->labels, y->labels);
}

static Types__V1__Series *series_new(const ts_group_t *g, size_t n_points, lc_arena_t *arena)
{
    Types__V1__Series *se = lc_arena_calloc(arena, 1, sizeof(*se));
    Types__V1__LabelPair **lp = lc_arena_calloc(arena, g->labels.n + 1, sizeof(*lp));
    Types__V1__Point **pts = lc_arena_calloc(arena, n_points, sizeof(*pts));
    if (!se || !lp || !pts)
        return NULL;
    *se = (Types__V1__Series)TYPES__V1__SERIES__INIT;
    for (size_t i = 0; i < g->labels.n; i++) {
        lp[i] = lc_arena_calloc(arena, 1, sizeof(**lp));
        if (!lp[i])
            return NULL;
        *lp[i] = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
        lp[i]->name = lc_arena_strdup(arena, g->labels.v[i].name);
        lp[i]->value = lc_arena_strdup(arena, g->labels.v[i].value);
        if (!lp[i]->name || !lp[i]->value)
            return NULL;
    }
    se->labels = lp;
    se->n_labels = g->labels.n;
    se->points = pts;
    return se;
}

static int point_append(Types__V1__Series *se, int64_t ts, double sum, int64_t count, bool average,
                        lc_arena_t *arena)
{
    Types__V1__Point *p = lc_arena_calloc(arena, 1, sizeof(*p));
    if (!p)
        return LC_ETOOBIG;
    *p = (Types__V1__Point)TYPES__V1__POINT__INIT;
    p->timestamp = ts;
    p->value = average ? sum / (double)count : sum;
    se->points[se->n_points++] = p;
    return 0;
}

/* Reduces the sorted run raw[*i ..] of one group into a series. */
static int series_reduce(const lc_query_series_t *s, size_t *i, lc_arena_t *arena, ts_out_t *out)
{
    size_t end = *i;
    uint32_t g = s->raw[*i].group;
    while (end < s->n_raw && s->raw[end].group == g)
        end++;
    out->labels = &s->groups[g].labels;
    out->series = series_new(&s->groups[g], end - *i, arena);
    out->sum = 0;
    if (!out->series)
        return LC_ETOOBIG;
    while (*i < end) {
        int64_t ts = s->raw[*i].ts_ms, count = 0;
        double sum = 0;
        for (; *i < end && s->raw[*i].ts_ms == ts; (*i)++, count++)
            sum += (double)s->raw[*i].value;
        if (point_append(out->series, ts, sum, count, s->o.average, arena))
            return LC_ETOOBIG;
        out->sum += out->series->points[out->series->n_points - 1]->value;
    }
    return 0;
}

int lc_query_series_emit(lc_query_series_t *s, lc_arena_t *arena, Types__V1__Series ***out,
                         size_t *n)
{
    if (s->n_raw)
        qsort(s->raw, s->n_raw, sizeof(*s->raw), raw_cmp);
    ts_out_t *tmp = lc_xcalloc(s->n_groups + 1, sizeof(*tmp));
    size_t n_out = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_raw && rc == 0;)
        rc = series_reduce(s, &i, arena, &tmp[n_out++]);
    if (rc == 0 && s->o.limit > 0 && (size_t)s->o.limit < n_out) {
        qsort(tmp, n_out, sizeof(*tmp), out_by_sum_desc);
        n_out = (size_t)s->o.limit;
    }
    qsort(tmp, n_out, sizeof(*tmp), out_by_labels);
    Types__V1__Series **res = rc ? NULL : lc_arena_calloc(arena, n_out + 1, sizeof(*res));
    if (rc == 0 && !res)
        rc = LC_ETOOBIG;
    for (size_t i = 0; rc == 0 && i < n_out; i++)
        res[i] = tmp[i].series;
    lc_free(tmp);
    *out = res;
    *n = rc ? 0 : n_out;
    return rc;
}

/* ------------------------------------------------------------- store walk */

typedef struct ts_series_ref_s {
    uint32_t series_id;
    uint32_t group, count_group; /* in s, and in counts */
} ts_series_ref_t;

typedef struct ts_collect_s {
    lc_query_series_t *s;
    lc_query_series_t *counts; /* NULL: profiles not counted */
    const lc_query_t *q;
    ts_series_ref_t *refs;
    size_t n_refs, refs_cap;
    size_t current; /* the ref whose profiles are being walked */
    /* sample filter (span ids, call site); keep == NULL: use stored totals */
    uint8_t *keep; /* by block node id: inside the call site */
    uint32_t n_nodes;
    uint32_t *parents, *locations;
} ts_collect_t;

static int collect_series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                             const lc_labels_t *labels, void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(tenant);
    ts_collect_t *c = data;
    uint32_t group, count_group = 0;
    int rc = lc_query_series_group(c->s, labels, &group);
    if (rc == 0 && c->counts)
        rc = lc_query_series_group(c->counts, labels, &count_group);
    if (rc)
        return rc;
    c->refs = lc_xgrow(c->refs, &c->refs_cap, c->n_refs + 1, sizeof(*c->refs));
    c->refs[c->n_refs++] =
        (ts_series_ref_t){.series_id = series_id, .group = group, .count_group = count_group};
    return 0;
}

/* One profile's total into s and, when counted, a 1 into counts. */
static int collect_point(ts_collect_t *c, uint32_t group, uint32_t count_group, int64_t time_ns,
                         int64_t total)
{
    int rc = lc_query_series_add(c->s, group, time_ns, total);
    if (rc == 0 && c->counts)
        rc = lc_query_series_add(c->counts, count_group, time_ns, 1);
    return rc;
}

/* The sum of a profile's samples that pass the span and call-site filters. */
static int filtered_total(const ts_collect_t *c, const lc_stored_profile_t *p, int64_t *total)
{
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    *total = 0;
    for (;;) {
        uint32_t node;
        int64_t value;
        uint64_t span;
        int rc = lc_sample_iter_next(&it, &node, &value, &span);
        if (rc != 1)
            return rc;
        if (node >= c->n_nodes)
            return LC_ECORRUPT;
        if (c->keep[node] && lc_query__span_selected(c->q, span))
            *total += value;
    }
}

static int collect_profile_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    ts_collect_t *c = data;
    if (!lc_query_profile_selected(c->q, p))
        return 0;
    int64_t total = p->total;
    if (c->keep) {
        int rc = filtered_total(c, p, &total);
        if (rc)
            return rc;
    }
    const ts_series_ref_t *ref = &c->refs[c->current];
    return collect_point(c, ref->group, ref->count_group, p->time_ns, total);
}

/* Per block, for a sample filter: which nodes are inside the call site (all
 * of them without one). The whole node table is loaded: samples may touch any
 * node. */
static int collect_filter(lc_block_t *b, const lc_query_t *q, ts_collect_t *c)
{
    c->n_nodes = lc_block_node_count(b);
    size_t n = c->n_nodes ? c->n_nodes : 1;
    c->keep = lc_xrealloc(c->keep, n);
    memset(c->keep, 1, n);
    if (!q->n_call_site || c->n_nodes == 0)
        return 0;
    c->parents = lc_xrealloc(c->parents, n * sizeof(uint32_t));
    c->locations = lc_xrealloc(c->locations, n * sizeof(uint32_t));
    int rc = lc_block_nodes(b, c->parents, c->locations, c->n_nodes);
    for (uint32_t i = 1; rc == 0 && i < c->n_nodes; i++) {
        if (c->parents[i] >= i)
            rc = LC_ECORRUPT;
    }
    if (rc == 0)
        rc = lc_query__callsite_mark(b, q, c->parents, c->locations, c->n_nodes, c->keep);
    return rc;
}

static int collect_block(lc_block_t *b, const lc_query_t *q, ts_collect_t *c)
{
    c->n_refs = 0;
    int rc = lc_block_series(b, q->tenants, q->n_tenants, q->sel, collect_series_cb, c);
    if (rc == 0 && c->n_refs > 0 && (q->span_ids || q->n_call_site))
        rc = collect_filter(b, q, c);
    for (size_t i = 0; rc == 0 && i < c->n_refs; i++) {
        c->current = i;
        rc = lc_block_profiles(b, c->refs[i].series_id, q->start_ns, q->end_ns, collect_profile_cb,
                               c);
    }
    return rc;
}

/* A rollup's series: every profile's stored total, as the blocks would give. */
static int collect_rollup_cb(const lc_rollup_series_t *se, void *data)
{
    ts_collect_t *c = data;
    uint32_t group, count_group = 0;
    int rc = lc_query_series_group(c->s, se->labels, &group);
    if (rc == 0 && c->counts)
        rc = lc_query_series_group(c->counts, se->labels, &count_group);
    lc_rollup_points_t it;
    lc_rollup_points_init(&it, se);
    while (rc == 0) {
        int64_t t, total;
        rc = lc_rollup_points_next(&it, &t, &total);
        if (rc != 1)
            break;
        rc = collect_point(c, group, count_group, t, total);
    }
    return rc;
}

/* Windows whose rollup holds every profile's total answer without their
 * blocks, unless something narrows below the series. */
bool lc_query_series_uses_rollups(const lc_query_t *q)
{
    return !q->no_summaries && !q->span_ids && !q->profile_ids && !q->n_call_site;
}

int lc_query_series_collect(lc_store_reader_t *r, const lc_query_t *q, lc_query_series_t *s,
                            lc_status_t *st)
{
    return lc_query_series_collect_counted(r, q, s, NULL, st);
}

int lc_query_series_collect_counted(lc_store_reader_t *r, const lc_query_t *q, lc_query_series_t *s,
                                    lc_query_series_t *counts, lc_status_t *st)
{
    ts_collect_t c = {.s = s, .counts = counts, .q = q};
    lc_rollups_t *rs = NULL;
    int rc = r && lc_query_series_uses_rollups(q)
                 ? lc_store_rollups_begin(r, q->start_ns, q->end_ns, &rs)
                 : 0;
    for (size_t i = 0; rc == 0 && rs && i < lc_rollups_count(rs); i++)
        rc = lc_rollup_series(rs, i, q->tenants, q->n_tenants, q->sel, collect_rollup_cb, &c);
    for (size_t i = 0; rc == 0 && i < lc_query__blocks(r); i++)
        if (!rs || !lc_rollups_cover_block(rs, i))
            rc = collect_block(lc_store_reader_block(r, i), q, &c);
    lc_store_rollups_end(rs);
    lc_free(c.refs);
    lc_free(c.keep);
    lc_free(c.parents);
    lc_free(c.locations);
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the query selects more than %u profiles; narrow the range",
                             (unsigned)LC_QUERY_MAX_SERIES_POINTS);
    if (rc)
        return lc_status_set(st, LC_CODE_INTERNAL, "reading series: %s", lc_strerror(rc));
    return 0;
}
