/*
 * fuzz_exemplars.c — the front end's exemplars and heatmaps (front_exemplars.c)
 * on arbitrary profile references, as an ingester's ShardService/SelectProfiles
 * answer brings them to ember-querier. The first byte picks the bucketing
 * (step and which labels are grouped by); the rest is unpacked as an
 * ember.v1.ProfileRefsResponse. Whatever unpacks must give a heatmap whose
 * slots have parallel, ascending, non-empty rows that count at most the
 * references sent, at most QRY_EXEMPLARS_PER_POINT exemplars a slot and
 * QRY_EXEMPLARS_PER_ANSWER in all; series made of the heatmap's slots must get
 * the same exemplars; and both answers must pack.
 */
#include <stdlib.h>
#include <string.h>

#include "querier_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

static const char *const group_names[] = {"pod", "service_name", "__name__"};

static lc_query_series_opts_t opts_of(uint8_t b)
{
    static const int64_t steps[] = {1, 1000, 60000, INT64_MAX / 2};
    return (lc_query_series_opts_t){.start_ms = (b & 0x10) ? -5000 : 0,
                                    .end_ms = (b & 0x20) ? INT64_MAX / 4 : 600000,
                                    .step_ms = steps[b & 3],
                                    .group_by = group_names,
                                    .n_group_by = (size_t)((b >> 2) & 3)};
}

/* Checks one slot's rows; returns its exemplar count. */
static size_t check_slot(const Types__V1__HeatmapSlot *s, size_t *counted)
{
    require(s->n_y_min == s->n_counts && s->n_y_min > 0);
    for (size_t i = 0; i < s->n_counts; i++) {
        require(s->counts[i] > 0);
        /* rows ascend (equal only where doubles cannot tell them apart) */
        require(i == 0 || s->y_min[i] >= s->y_min[i - 1]);
        *counted += (size_t)s->counts[i];
    }
    require(s->n_exemplars <= QRY_EXEMPLARS_PER_POINT);
    return s->n_exemplars;
}

/* The heatmap's slots as series points: attaching must give each point its
 * slot's exemplars. */
static void check_series(const Ember__V1__ProfileRefsResponse *refs,
                         const lc_query_series_opts_t *o, lc_arena_t *a,
                         const Querier__V1__SelectHeatmapResponse *h)
{
    Types__V1__Series **series = lc_arena_calloc(a, h->n_series + 1, sizeof(*series));
    if (!series)
        return;
    for (size_t i = 0; i < h->n_series; i++) {
        const Types__V1__HeatmapSeries *hs = h->series[i];
        Types__V1__Series *se = lc_arena_calloc(a, 1, sizeof(*se));
        Types__V1__Point **pts = lc_arena_calloc(a, hs->n_slots + 1, sizeof(*pts));
        if (!se || !pts)
            return;
        *se = (Types__V1__Series)TYPES__V1__SERIES__INIT;
        se->labels = hs->labels;
        se->n_labels = hs->n_labels;
        for (size_t j = 0; j < hs->n_slots; j++) {
            if (!(pts[j] = lc_arena_calloc(a, 1, sizeof(**pts))))
                return;
            *pts[j] = (Types__V1__Point)TYPES__V1__POINT__INIT;
            pts[j]->timestamp = hs->slots[j]->timestamp;
        }
        se->points = pts;
        se->n_points = hs->n_slots;
        series[i] = se;
    }
    if (qry_exemplars_series(refs, o, a, series, h->n_series))
        return; /* the arena filled up */
    for (size_t i = 0; i < h->n_series; i++) {
        (void)protobuf_c_message_get_packed_size(&series[i]->base);
        for (size_t j = 0; j < series[i]->n_points; j++) {
            const Types__V1__Point *p = series[i]->points[j];
            const Types__V1__HeatmapSlot *s = h->series[i]->slots[j];
            require(p->n_exemplars == s->n_exemplars);
            for (size_t k = 0; k < p->n_exemplars; k++)
                require(!strcmp(p->exemplars[k]->profile_id, s->exemplars[k]->profile_id) &&
                        p->exemplars[k]->value == s->exemplars[k]->value);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    lc_query_series_opts_t o = opts_of(data[0]);
    lc_arena_t *a = lc_arena_new(64u << 20);
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(a, &alloc);
    Ember__V1__ProfileRefsResponse *refs =
        (Ember__V1__ProfileRefsResponse *)protobuf_c_message_unpack(
            &ember__v1__profile_refs_response__descriptor, &alloc, size - 1, data + 1);
    Querier__V1__SelectHeatmapResponse *h;
    if (refs && qry_exemplars_heatmap(refs, &o, data[0] >> 6, true, a, &h) == 0) {
        size_t counted = 0, exemplars = 0;
        for (size_t i = 0; i < h->n_series; i++)
            for (size_t j = 0; j < h->series[i]->n_slots; j++)
                exemplars += check_slot(h->series[i]->slots[j], &counted);
        require(counted <= refs->n_profiles);
        require(exemplars <= QRY_EXEMPLARS_PER_ANSWER);
        (void)protobuf_c_message_get_packed_size(&h->base);
        if ((data[0] >> 6) == 0) /* every series kept: each slot is a point */
            check_series(refs, &o, a, h);
    }
    lc_arena_free(a);
    return 0;
}
