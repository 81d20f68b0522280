/*
 * rpc_exemplars.c — the store back end's profile references: what the front
 * end builds exemplars and heatmaps from (front_exemplars.c). For a
 * SelectSeries-shaped request it lists every stored profile of the selection
 * in the series' range (from start - step, as the buckets count), each with
 * its series' labels, time, total and id; with exemplar_type SPAN, one entry
 * per (profile, span id) instead, valued by that span's samples. Totals and
 * ids come from the profile header; only SPAN reads samples.
 *
 * The list is bounded (QRY_MAX_PROFILE_REFS): a range holding more profiles
 * is refused with resource_exhausted rather than half-answered, since a
 * heatmap's counts would be wrong.
 */
#include <stdlib.h>
#include <string.h>

#include "querier_int.h"

typedef struct span_sum_s {
    uint64_t span_id;
    int64_t value;
} span_sum_t;

typedef struct refs_walk_s {
    lc_arena_t *arena;
    bool spans;
    Ember__V1__ProfileRef **v; /* heap array of arena refs */
    size_t n, cap;
    Types__V1__LabelPair **labels; /* the current series' labels (arena) */
    size_t n_labels;
    span_sum_t *sums; /* scratch for one profile's spans */
    size_t n_sums, sums_cap;
    bool over_cap; /* stopped at QRY_MAX_PROFILE_REFS (not a full arena) */
} refs_walk_t;

/* ------------------------------------------------------------ the entries */

static int ref_append(refs_walk_t *w, const lc_stored_profile_t *p, int64_t value, uint64_t span_id)
{
    if (w->n >= QRY_MAX_PROFILE_REFS) {
        w->over_cap = true;
        return LC_ETOOBIG;
    }
    Ember__V1__ProfileRef *r = lc_arena_calloc(w->arena, 1, sizeof(*r));
    if (!r)
        return LC_ETOOBIG;
    *r = (Ember__V1__ProfileRef)EMBER__V1__PROFILE_REF__INIT;
    r->labels = w->labels;
    r->n_labels = w->n_labels;
    r->time_ns = p->time_ns;
    r->value = value;
    r->span_id = span_id;
    if (p->has_profile_id) {
        uint8_t *id = lc_arena_calloc(w->arena, 1, LC_STORE_PROFILE_ID_BYTES);
        if (!id)
            return LC_ETOOBIG;
        memcpy(id, p->profile_id, LC_STORE_PROFILE_ID_BYTES);
        r->profile_id = (ProtobufCBinaryData){.len = LC_STORE_PROFILE_ID_BYTES, .data = id};
    }
    w->v = lc_xgrow(w->v, &w->cap, w->n + 1, sizeof(*w->v));
    w->v[w->n++] = r;
    return 0;
}

static int span_cmp(const void *a, const void *b)
{
    const span_sum_t *x = a, *y = b;
    return x->span_id < y->span_id ? -1 : x->span_id > y->span_id;
}

/* One entry per span id of p, valued by its samples (0 = no span: skipped).
 * Samples are sorted by node first, so the spans are gathered, sorted and
 * summed here. */
static int span_refs(refs_walk_t *w, const lc_stored_profile_t *p)
{
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    w->n_sums = 0;
    int rc;
    for (;;) {
        uint32_t node;
        int64_t value;
        uint64_t span;
        rc = lc_sample_iter_next(&it, &node, &value, &span);
        if (rc != 1)
            break;
        if (!span)
            continue;
        w->sums = lc_xgrow(w->sums, &w->sums_cap, w->n_sums + 1, sizeof(*w->sums));
        w->sums[w->n_sums++] = (span_sum_t){.span_id = span, .value = value};
    }
    if (rc)
        return rc;
    qsort(w->sums, w->n_sums, sizeof(*w->sums), span_cmp);
    for (size_t i = 0; rc == 0 && i < w->n_sums;) {
        span_sum_t s = w->sums[i++];
        for (; i < w->n_sums && w->sums[i].span_id == s.span_id; i++)
            s.value += w->sums[i].value; /* the store bounds a profile's sum to int64 */
        rc = ref_append(w, p, s.value, s.span_id);
    }
    return rc;
}

static int profile_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    refs_walk_t *w = data;
    return w->spans ? span_refs(w, p) : ref_append(w, p, p->total, 0);
}

typedef struct series_walk_s {
    refs_walk_t *w;
    int64_t start_ns, end_ns;
} series_walk_t;

static int series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                     const lc_labels_t *labels, void *data)
{
    LC_UNUSED(tenant);
    series_walk_t *s = data;
    s->w->labels = qry_label_pairs(s->w->arena, labels);
    s->w->n_labels = labels->n;
    if (!s->w->labels)
        return LC_ETOOBIG;
    return lc_block_profiles(b, series_id, s->start_ns, s->end_ns, profile_cb, s->w);
}

/* ------------------------------------------------------------- the call */

static int walk_blocks(qry_call_t *c, const lc_selector_t *sel, int64_t start_ns, refs_walk_t *w)
{
    series_walk_t s = {.w = w, .start_ns = start_ns, .end_ns = c->end_ns};
    int rc = 0;
    for (size_t i = 0; c->reader && rc == 0 && i < lc_store_reader_count(c->reader); i++)
        rc = lc_block_series(lc_store_reader_block(c->reader, i), c->tenants, c->n_tenants, sel,
                             series_cb, &s);
    return rc;
}

static int refs_reply(refs_walk_t *w, int64_t start_ms, Ember__V1__ProfileRefsResponse **out,
                      lc_status_t *st)
{
    Ember__V1__ProfileRefsResponse *resp = lc_arena_calloc(w->arena, 1, sizeof(*resp));
    Ember__V1__ProfileRef **v = lc_arena_calloc(w->arena, w->n + 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_arena(st);
    *resp = (Ember__V1__ProfileRefsResponse)EMBER__V1__PROFILE_REFS_RESPONSE__INIT;
    if (w->n)
        memcpy(v, w->v, w->n * sizeof(*v));
    resp->profiles = v;
    resp->n_profiles = w->n;
    resp->start_ms = start_ms;
    *out = resp;
    return 0;
}

int qry_refs_fail(lc_status_t *st, int rc, bool over_cap)
{
    if (over_cap)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the range holds more than %u profiles: narrow the selector or the "
                             "range to get exemplars or a heatmap",
                             (unsigned)QRY_MAX_PROFILE_REFS);
    return qry_fail(st, rc, "listing profiles");
}

int qry_profile_refs(qry_t *qry, lc_http_req_t *req, const Querier__V1__SelectSeriesRequest *r,
                     const lc_query_series_opts_t *o, Ember__V1__ProfileRefsResponse **out,
                     lc_status_t *st)
{
    lc_selector_t sel;
    qry_call_t c;
    if (qry_series_begin(qry, req, r, o->step_ms, &sel, &c, st))
        return -1;
    lc_query_series_opts_t clipped = *o;
    clipped.start_ms = c.start_ms; /* the buckets start where the look-back clipped */
    refs_walk_t w = {.arena = req->arena,
                     .spans = r->exemplar_type == TYPES__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN};
    int rc = walk_blocks(&c, &sel, lc_query_series_first_ns(&clipped, c.start_ns), &w);
    rc = rc ? qry_refs_fail(st, rc, w.over_cap) : refs_reply(&w, c.start_ms, out, st);
    lc_free(w.v);
    lc_free(w.sums);
    qry_call_end(&c);
    lc_selector_fini(&sel);
    return rc;
}

int qry_store_select_profiles(qry_front_t *fe, lc_http_req_t *req,
                              const Querier__V1__SelectSeriesRequest *r,
                              const lc_query_series_opts_t *o, Ember__V1__ProfileRefsResponse **out,
                              lc_status_t *st)
{
    return qry_profile_refs(qry_of(fe), req, r, o, out, st);
}
