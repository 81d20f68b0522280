/*
 * front_exemplars.c — the front end's exemplars and heatmaps (docs/api.md
 * "Exemplars and heatmaps"), built from the back end's profile references
 * (qry_backend_t.select_profiles: the store's, or every ingester's through the
 * fan-out, fetched by frontend.c), so both back ends answer alike. Pure
 * functions of the references: no back end, no request.
 *
 * The references are put in cells: (group, bucket) as SelectSeries buckets
 * them (lc_query_series_bucket). Within a cell, references of one profile
 * (its id; with SPAN, of one span id) are one entry with their values summed:
 * a profile whose samples were split into several series of one group counts
 * once, a span seen in several profiles too. A cell's entries are ranked by
 * value (ties: span, time, labels, id, so every back end ranks alike); its first
 * QRY_EXEMPLARS_PER_POINT are its exemplars, and an answer holds at most
 * QRY_EXEMPLARS_PER_ANSWER of them (the highest valued kept).
 *
 * A heatmap's rows are QRY_HEATMAP_ROWS equal value ranges between the lowest
 * and the highest entry of the answer, so every slot of every series shares
 * one y axis; a slot lists only its non-empty rows (y_min and counts are
 * parallel).
 *
 * Runs on the RPC's thread-pool thread; everything is in the request arena
 * but the scratch arrays, freed before returning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/uuid.h"
#include "querier_int.h"

typedef struct xm_ref_s {
    const char *key; /* group key: name\0value\0 per present group_by label */
    size_t key_len;
    int64_t boundary_ms;
    const Ember__V1__ProfileRef *ref;
} xm_ref_t;

typedef struct xm_entry_s {
    const Ember__V1__ProfileRef *ref; /* the first of the profile's references */
    int64_t value;
    bool chosen; /* one of the answer's exemplars */
} xm_entry_t;

typedef struct xm_cell_s {
    const char *key;
    size_t key_len;
    int64_t boundary_ms;
    size_t first, n; /* its entries, by value descending */
} xm_cell_t;

typedef struct xm_s {
    lc_arena_t *arena;
    lc_query_series_opts_t o; /* from where the back end's look-back clipped */
    xm_ref_t *refs;
    size_t n_refs;
    xm_entry_t *entries;
    size_t n_entries;
    xm_cell_t *cells;
    size_t n_cells, cells_cap;
} xm_t;

/* ----------------------------------------------------------- the cells */

static const char *pair_value(Types__V1__LabelPair *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i]->name, name))
            return v[i]->value;
    return NULL;
}

/* The group key of labels, as lc_query_series_group keys a group: every
 * group_by label present with a non-empty value, name\0value\0, in order. */
static int xm_group_key(const lc_query_series_opts_t *o, Types__V1__LabelPair *const *v, size_t n,
                        lc_arena_t *a, const char **key, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < o->n_group_by; i++) {
        const char *value = pair_value(v, n, o->group_by[i]);
        if (value && *value)
            total += strlen(o->group_by[i]) + strlen(value) + 2;
    }
    char *k = lc_arena_calloc(a, 1, total + 1);
    if (!k)
        return LC_ETOOBIG;
    size_t off = 0;
    for (size_t i = 0; i < o->n_group_by; i++) {
        const char *value = pair_value(v, n, o->group_by[i]);
        if (!value || !*value)
            continue;
        size_t nl = strlen(o->group_by[i]) + 1, vl = strlen(value) + 1;
        memcpy(k + off, o->group_by[i], nl);
        memcpy(k + off + nl, value, vl);
        off += nl + vl;
    }
    *key = k;
    *len = total;
    return 0;
}

/* Sums of values from many profiles (or ingesters) saturate, never wrap. */
static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

static int key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int cell_cmp(const xm_ref_t *x, const xm_ref_t *y)
{
    int c = key_cmp(x->key, x->key_len, y->key, y->key_len);
    if (c)
        return c;
    return (x->boundary_ms > y->boundary_ms) - (x->boundary_ms < y->boundary_ms);
}

static int id_cmp(const Ember__V1__ProfileRef *x, const Ember__V1__ProfileRef *y)
{
    if (x->profile_id.len != y->profile_id.len)
        return x->profile_id.len < y->profile_id.len ? -1 : 1;
    return x->profile_id.len ? memcmp(x->profile_id.data, y->profile_id.data, x->profile_id.len)
                             : 0;
}

static int time_cmp(const Ember__V1__ProfileRef *x, const Ember__V1__ProfileRef *y)
{
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

/* What a reference stands for, so that equal ones lie together: a span (its
 * references earliest first) or a profile (by id; anonymous ones by time). */
static int profile_cmp(const Ember__V1__ProfileRef *x, const Ember__V1__ProfileRef *y)
{
    if (x->span_id != y->span_id)
        return x->span_id < y->span_id ? -1 : 1;
    int c = x->span_id ? time_cmp(x, y) : id_cmp(x, y);
    return c ? c : x->span_id ? id_cmp(x, y) : time_cmp(x, y);
}

static int ref_order(const void *a, const void *b)
{
    const xm_ref_t *x = a, *y = b;
    int c = cell_cmp(x, y);
    return c ? c : profile_cmp(x->ref, y->ref);
}

/* One span, or one profile with an id (an anonymous profile is its own). */
static bool same_profile(const Ember__V1__ProfileRef *x, const Ember__V1__ProfileRef *y)
{
    if (x->span_id || y->span_id)
        return x->span_id == y->span_id;
    return x->profile_id.len && id_cmp(x, y) == 0;
}

/* Series labels in order, for a total order of entries: the store and the
 * fan-out must rank ties alike. */
static int ref_labels_cmp(const Ember__V1__ProfileRef *x, const Ember__V1__ProfileRef *y)
{
    for (size_t i = 0; i < x->n_labels && i < y->n_labels; i++) {
        int c = strcmp(x->labels[i]->name, y->labels[i]->name);
        if (!c)
            c = strcmp(x->labels[i]->value, y->labels[i]->value);
        if (c)
            return c;
    }
    return (x->n_labels > y->n_labels) - (x->n_labels < y->n_labels);
}

static int entry_by_value(const void *a, const void *b)
{
    const xm_entry_t *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    const Ember__V1__ProfileRef *p = x->ref, *q = y->ref;
    if (p->span_id != q->span_id)
        return p->span_id < q->span_id ? -1 : 1;
    int c = time_cmp(p, q);
    if (!c)
        c = ref_labels_cmp(p, q);
    return c ? c : id_cmp(p, q); /* ids last: those given at ingest are random */
}

/* The references in their buckets, keyed and sorted; those outside every
 * bucket are dropped. */
static int xm_keys(xm_t *x, const Ember__V1__ProfileRefsResponse *refs)
{
    x->refs = lc_xcalloc(refs->n_profiles + 1, sizeof(*x->refs));
    for (size_t i = 0; i < refs->n_profiles; i++) {
        const Ember__V1__ProfileRef *r = refs->profiles[i];
        xm_ref_t *k = &x->refs[x->n_refs];
        if (!lc_query_series_bucket(&x->o, r->time_ns, &k->boundary_ms))
            continue;
        int rc = xm_group_key(&x->o, r->labels, r->n_labels, x->arena, &k->key, &k->key_len);
        if (rc)
            return rc;
        k->ref = r;
        x->n_refs++;
    }
    qsort(x->refs, x->n_refs, sizeof(*x->refs), ref_order);
    return 0;
}

/* One cell from the sorted references [*i, ...): its entries merged and
 * ranked. */
static void xm_cell(xm_t *x, size_t *i)
{
    const xm_ref_t *head = &x->refs[*i];
    x->cells = lc_xgrow(x->cells, &x->cells_cap, x->n_cells + 1, sizeof(*x->cells));
    xm_cell_t *c = &x->cells[x->n_cells++];
    *c = (xm_cell_t){.key = head->key,
                     .key_len = head->key_len,
                     .boundary_ms = head->boundary_ms,
                     .first = x->n_entries};
    for (; *i < x->n_refs && cell_cmp(&x->refs[*i], head) == 0; (*i)++) {
        const Ember__V1__ProfileRef *r = x->refs[*i].ref;
        xm_entry_t *last = x->n_entries > c->first ? &x->entries[x->n_entries - 1] : NULL;
        if (last && same_profile(last->ref, r))
            last->value = add_sat(last->value, r->value);
        else
            x->entries[x->n_entries++] = (xm_entry_t){.ref = r, .value = r->value};
    }
    c->n = x->n_entries - c->first;
    qsort(&x->entries[c->first], c->n, sizeof(*x->entries), entry_by_value);
}

static int chosen_by_value(const void *a, const void *b)
{
    return entry_by_value(*(xm_entry_t *const *)a, *(xm_entry_t *const *)b);
}

/* Marks each cell's top entries, then keeps the answer's best if too many. */
static void xm_choose(xm_t *x)
{
    xm_entry_t **chosen = lc_xcalloc(x->n_entries + 1, sizeof(*chosen));
    size_t n = 0;
    for (size_t c = 0; c < x->n_cells; c++) {
        size_t k =
            x->cells[c].n < QRY_EXEMPLARS_PER_POINT ? x->cells[c].n : QRY_EXEMPLARS_PER_POINT;
        for (size_t j = 0; j < k; j++) {
            chosen[n] = &x->entries[x->cells[c].first + j];
            chosen[n++]->chosen = true;
        }
    }
    if (n > QRY_EXEMPLARS_PER_ANSWER) {
        qsort(chosen, n, sizeof(*chosen), chosen_by_value);
        for (size_t j = QRY_EXEMPLARS_PER_ANSWER; j < n; j++)
            chosen[j]->chosen = false;
    }
    lc_free(chosen);
}

/* The cells of refs bucketed as o, from where the back end's look-back
 * clipped the start (refs->start_ms); call xm_fini whatever it returns. */
static int xm_build(xm_t *x, const Ember__V1__ProfileRefsResponse *refs,
                    const lc_query_series_opts_t *o, lc_arena_t *a)
{
    *x = (xm_t){.arena = a, .o = *o};
    x->o.start_ms = refs->start_ms;
    int rc = xm_keys(x, refs);
    if (rc)
        return rc;
    x->entries = lc_xcalloc(x->n_refs + 1, sizeof(*x->entries));
    for (size_t i = 0; i < x->n_refs;)
        xm_cell(x, &i);
    xm_choose(x);
    return 0;
}

static void xm_fini(xm_t *x)
{
    lc_free(x->refs);
    lc_free(x->entries);
    lc_free(x->cells);
}

/* ------------------------------------------------------------ exemplars */

/* An exemplar's labels: the series' labels that are neither grouped by nor
 * internal (__name__, __profile_type__ and the like). */
static int exemplar_labels(const lc_query_series_opts_t *o, const Ember__V1__ProfileRef *r,
                           lc_arena_t *a, Types__V1__Exemplar *e)
{
    e->labels = lc_arena_calloc(a, r->n_labels + 1, sizeof(*e->labels));
    if (!e->labels)
        return LC_ETOOBIG;
    for (size_t i = 0; i < r->n_labels; i++) {
        const char *name = r->labels[i]->name;
        bool grouped = false;
        for (size_t g = 0; g < o->n_group_by && !grouped; g++)
            grouped = !strcmp(o->group_by[g], name);
        if (!grouped && strncmp(name, "__", 2) != 0)
            e->labels[e->n_labels++] = r->labels[i];
    }
    return 0;
}

static Types__V1__Exemplar *exemplar_of(const xm_t *x, const xm_entry_t *en)
{
    const Ember__V1__ProfileRef *r = en->ref;
    Types__V1__Exemplar *e = lc_arena_calloc(x->arena, 1, sizeof(*e));
    char *id = lc_arena_calloc(x->arena, 1, LC_UUID_TEXT_LEN + 1);
    char *span = lc_arena_calloc(x->arena, 1, 17);
    if (!e || !id || !span)
        return NULL;
    *e = (Types__V1__Exemplar)TYPES__V1__EXEMPLAR__INIT;
    e->timestamp = r->time_ns / 1000000 - (r->time_ns % 1000000 < 0); /* floor, as buckets */
    e->value = en->value;
    if (r->profile_id.len == LC_UUID_BYTES)
        lc_uuid_format(r->profile_id.data, id);
    e->profile_id = id;
    if (r->span_id)
        snprintf(span, 17, "%016llx", (unsigned long long)r->span_id);
    e->span_id = span;
    return exemplar_labels(&x->o, r, x->arena, e) ? NULL : e;
}

/* A cell's chosen exemplars into *out / *n (arena). */
static int cell_exemplars(const xm_t *x, const xm_cell_t *c, Types__V1__Exemplar ***out, size_t *n)
{
    *n = 0;
    *out = lc_arena_calloc(x->arena, QRY_EXEMPLARS_PER_POINT + 1, sizeof(**out));
    if (!*out)
        return LC_ETOOBIG;
    for (size_t j = 0; j < c->n; j++) {
        const xm_entry_t *en = &x->entries[c->first + j];
        if (!en->chosen)
            continue;
        if (!((*out)[(*n)++] = exemplar_of(x, en)))
            return LC_ETOOBIG;
    }
    return 0;
}

static const xm_cell_t *find_cell(const xm_t *x, const char *key, size_t key_len, int64_t ts)
{
    size_t lo = 0, hi = x->n_cells;
    xm_ref_t want = {.key = key, .key_len = key_len, .boundary_ms = ts};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const xm_cell_t *c = &x->cells[mid];
        xm_ref_t have = {.key = c->key, .key_len = c->key_len, .boundary_ms = c->boundary_ms};
        int cmp = cell_cmp(&have, &want);
        if (cmp == 0)
            return c;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int attach_series(const xm_t *x, Types__V1__Series *se)
{
    const char *key;
    size_t key_len;
    int rc = xm_group_key(&x->o, se->labels, se->n_labels, x->arena, &key, &key_len);
    for (size_t i = 0; rc == 0 && i < se->n_points; i++) {
        Types__V1__Point *p = se->points[i];
        const xm_cell_t *c = find_cell(x, key, key_len, p->timestamp);
        if (c)
            rc = cell_exemplars(x, c, &p->exemplars, &p->n_exemplars);
    }
    return rc;
}

int qry_exemplars_series(const Ember__V1__ProfileRefsResponse *refs,
                         const lc_query_series_opts_t *o, lc_arena_t *a, Types__V1__Series **series,
                         size_t n)
{
    xm_t x;
    int rc = xm_build(&x, refs, o, a);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = attach_series(&x, series[i]);
    xm_fini(&x);
    return rc;
}

/* -------------------------------------------------------------- heatmap */

typedef struct xm_axis_s {
    int64_t lo;
    double width; /* of one row; 0 when every value is lo */
} xm_axis_t;

static xm_axis_t axis_of(const xm_t *x)
{
    if (!x->n_entries)
        return (xm_axis_t){0};
    int64_t lo = x->entries[0].value, hi = lo;
    for (size_t i = 1; i < x->n_entries; i++) {
        lo = x->entries[i].value < lo ? x->entries[i].value : lo;
        hi = x->entries[i].value > hi ? x->entries[i].value : hi;
    }
    return (xm_axis_t){.lo = lo, .width = ((double)hi - (double)lo) / QRY_HEATMAP_ROWS};
}

static size_t row_of(const xm_axis_t *ax, int64_t v)
{
    if (ax->width <= 0)
        return 0;
    double row = ((double)v - (double)ax->lo) / ax->width;
    return row >= QRY_HEATMAP_ROWS - 1 ? QRY_HEATMAP_ROWS - 1 : row <= 0 ? 0 : (size_t)row;
}

/* One slot: the cell's entries counted per row, non-empty rows only. */
static Types__V1__HeatmapSlot *heatmap_slot(const xm_t *x, const xm_axis_t *ax, const xm_cell_t *c)
{
    int32_t counts[QRY_HEATMAP_ROWS] = {0};
    for (size_t j = 0; j < c->n; j++)
        counts[row_of(ax, x->entries[c->first + j].value)]++;
    Types__V1__HeatmapSlot *s = lc_arena_calloc(x->arena, 1, sizeof(*s));
    double *y = lc_arena_calloc(x->arena, QRY_HEATMAP_ROWS, sizeof(*y));
    int32_t *k = lc_arena_calloc(x->arena, QRY_HEATMAP_ROWS, sizeof(*k));
    if (!s || !y || !k)
        return NULL;
    *s = (Types__V1__HeatmapSlot)TYPES__V1__HEATMAP_SLOT__INIT;
    s->timestamp = c->boundary_ms;
    s->y_min = y;
    s->counts = k;
    for (size_t row = 0; row < QRY_HEATMAP_ROWS; row++) {
        if (!counts[row])
            continue;
        y[s->n_y_min++] = (double)ax->lo + (double)row * ax->width;
        k[s->n_counts++] = counts[row];
    }
    return cell_exemplars(x, c, &s->exemplars, &s->n_exemplars) ? NULL : s;
}

/* The group key back as label pairs. */
static Types__V1__LabelPair **key_labels(lc_arena_t *a, const char *key, size_t len, size_t *n)
{
    size_t pairs = 0;
    for (size_t off = 0; off < len; off += strlen(key + off) + 1)
        pairs++;
    pairs /= 2;
    Types__V1__LabelPair **v = lc_arena_calloc(a, pairs + 1, sizeof(*v));
    Types__V1__LabelPair *lp = lc_arena_calloc(a, pairs + 1, sizeof(*lp));
    if (!v || !lp)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < pairs; i++) {
        lp[i] = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
        lp[i].name = (char *)key + off;
        off += strlen(key + off) + 1;
        lp[i].value = (char *)key + off;
        off += strlen(key + off) + 1;
        v[i] = &lp[i];
    }
    *n = pairs;
    return v;
}

typedef struct xm_series_s {
    Types__V1__HeatmapSeries *series;
    int64_t total;
    size_t order; /* its place in key order */
} xm_series_t;

/* The series of the cells [*i, ...) sharing one group key. */
static int heatmap_series(const xm_t *x, const xm_axis_t *ax, size_t *i, xm_series_t *out)
{
    const xm_cell_t *head = &x->cells[*i];
    size_t n = 0;
    while (*i + n < x->n_cells &&
           !key_cmp(x->cells[*i + n].key, x->cells[*i + n].key_len, head->key, head->key_len))
        n++;
    Types__V1__HeatmapSeries *se = lc_arena_calloc(x->arena, 1, sizeof(*se));
    Types__V1__HeatmapSlot **slots = lc_arena_calloc(x->arena, n + 1, sizeof(*slots));
    if (!se || !slots)
        return LC_ETOOBIG;
    *se = (Types__V1__HeatmapSeries)TYPES__V1__HEATMAP_SERIES__INIT;
    if (!(se->labels = key_labels(x->arena, head->key, head->key_len, &se->n_labels)))
        return LC_ETOOBIG;
    out->total = 0;
    for (size_t j = 0; j < n; j++) {
        const xm_cell_t *c = &x->cells[*i + j];
        for (size_t e = 0; e < c->n; e++)
            out->total = add_sat(out->total, x->entries[c->first + e].value);
        if (!(slots[j] = heatmap_slot(x, ax, c)))
            return LC_ETOOBIG;
    }
    se->slots = slots;
    se->n_slots = n;
    out->series = se;
    *i += n;
    return 0;
}

static int series_by_total(const void *a, const void *b)
{
    const xm_series_t *x = a, *y = b;
    return (x->total < y->total) - (x->total > y->total);
}

static int series_by_order(const void *a, const void *b)
{
    const xm_series_t *x = a, *y = b;
    return (x->order > y->order) - (x->order < y->order);
}

/* Every group's series, the top `limit` by value kept (0: all), in key order. */
static int heatmap_reply(const xm_t *x, int64_t limit, Querier__V1__SelectHeatmapResponse *resp)
{
    xm_axis_t ax = axis_of(x);
    xm_series_t *v = lc_xcalloc(x->n_cells + 1, sizeof(*v));
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < x->n_cells; n++) {
        v[n].order = n;
        rc = heatmap_series(x, &ax, &i, &v[n]);
    }
    if (rc == 0 && limit > 0 && (size_t)limit < n) {
        qsort(v, n, sizeof(*v), series_by_total);
        n = (size_t)limit;
        qsort(v, n, sizeof(*v), series_by_order);
    }
    resp->series = rc ? NULL : lc_arena_calloc(x->arena, n + 1, sizeof(*resp->series));
    if (rc == 0 && !resp->series)
        rc = LC_ETOOBIG;
    for (size_t i = 0; rc == 0 && i < n; i++)
        resp->series[resp->n_series++] = v[i].series;
    lc_free(v);
    return rc;
}

/* A heatmap asked with exemplar_type NONE has none. */
static void drop_exemplars(Querier__V1__SelectHeatmapResponse *resp)
{
    for (size_t i = 0; i < resp->n_series; i++)
        for (size_t j = 0; j < resp->series[i]->n_slots; j++)
            resp->series[i]->slots[j]->n_exemplars = 0;
}

int qry_exemplars_heatmap(const Ember__V1__ProfileRefsResponse *refs,
                          const lc_query_series_opts_t *o, int64_t limit, bool exemplars,
                          lc_arena_t *a, Querier__V1__SelectHeatmapResponse **out)
{
    Querier__V1__SelectHeatmapResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    if (!resp)
        return LC_ETOOBIG;
    *resp = (Querier__V1__SelectHeatmapResponse)QUERIER__V1__SELECT_HEATMAP_RESPONSE__INIT;
    xm_t x;
    int rc = xm_build(&x, refs, o, a);
    if (rc == 0)
        rc = heatmap_reply(&x, limit, resp);
    xm_fini(&x);
    if (!exemplars)
        drop_exemplars(resp);
    *out = resp;
    return rc;
}
