/*
 * parca_query.c — parca.query.v1alpha1.QueryService (parca.md §4.2) on the
 * query front end, so `ember` (local store) and `ember-querier` (fan-out to
 * ingesters) answer it alike. Every method is translated into the front
 * end's own calls: ProfileTypes, Labels, Values and HasProfileData into the
 * back end's listings; QueryRange into SelectSeries (step, sum_by as
 * group_by, limit); Query (merge, single, diff) into merged pprof from the
 * back end, gzipped, for PPROF, and for the other reports into a call tree
 * folded straight from the back end's parts (store blocks, ingesters'
 * partial pprofs: qry_front_merge_parts), which parca_fold.c and parca_report.c turn into
 * the report.
 *
 * Routes: `/parca.query.v1alpha1.QueryService/<Method>` and the same under
 * `/api`, through qry_route_register (tenant first, then lc/connect.h, which
 * speaks gRPC-Web binary and text, native gRPC and Connect by Content-Type).
 * Methods ember does not serve (Series, ShareProfile, unknown names) answer
 * unimplemented.
 *
 * Time: Parca's Timestamps are cut to milliseconds, ember's resolution.
 * Single mode reads the profiles stored at exactly that millisecond.
 */
#include <math.h>
#include <string.h>

#include "lc/gz.h"
#include "parca_int.h"

#define DAY_MS (24LL * 3600 * 1000)

/* ------------------------------------------------------------------ time */

static int64_t ts_ms(const Google__Protobuf__Timestamp *t, int64_t if_absent)
{
    if (!t)
        return if_absent;
    if (t->seconds > INT64_MAX / 1000 || t->seconds < INT64_MIN / 1000)
        return t->seconds > 0 ? INT64_MAX : INT64_MIN;
    return t->seconds * 1000 + t->nanos / 1000000;
}

static Google__Protobuf__Timestamp *ts_new(lc_arena_t *a, int64_t ms)
{
    Google__Protobuf__Timestamp *t = lc_arena_alloc(a, sizeof(*t));
    if (!t)
        return NULL;
    *t = (Google__Protobuf__Timestamp)GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    t->seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    t->nanos = (int32_t)((ms - t->seconds * 1000) * 1000000);
    return t;
}

/* A listing's window: absent or zero bounds mean no limit (parca.md §4.3). */
static void listing_window(const Google__Protobuf__Timestamp *start,
                           const Google__Protobuf__Timestamp *end, int64_t *start_ms,
                           int64_t *end_ms)
{
    *start_ms = ts_ms(start, 0);
    *end_ms = ts_ms(end, 0);
    if (*end_ms == 0)
        *end_ms = qry_now_ms() + DAY_MS;
    if (*start_ms > *end_ms)
        *start_ms = 0;
}

/* ------------------------------------------------------------ the listings */

static bool type_seen(Parca__Query__V1alpha1__ProfileType **types, size_t n,
                      const Types__V1__ProfileType *t)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(types[i]->name, t->name) == 0 &&
            strcmp(types[i]->sample_type, t->sample_type) == 0 &&
            strcmp(types[i]->sample_unit, t->sample_unit) == 0 &&
            strcmp(types[i]->period_type, t->period_type) == 0 &&
            strcmp(types[i]->period_unit, t->period_unit) == 0)
            return true;
    return false;
}

/* The back end's profile types in [start_ms, end_ms]. */
static int back_types(qry_front_t *fe, lc_http_req_t *req, int64_t start_ms, int64_t end_ms,
                      Querier__V1__ProfileTypesResponse **out, lc_status_t *st)
{
    Querier__V1__ProfileTypesRequest in = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    in.start = start_ms;
    in.end = end_ms;
    ProtobufCMessage *o = NULL;
    if (qry_rpc_profile_types(req, &in.base, &o, st, fe))
        return -1;
    *out = (Querier__V1__ProfileTypesResponse *)o;
    return 0;
}

static int parca_profile_types(lc_http_req_t *req, const ProtobufCMessage *in,
                               ProtobufCMessage **out, lc_status_t *st, void *data)
{
    const Parca__Query__V1alpha1__ProfileTypesRequest *r =
        (const Parca__Query__V1alpha1__ProfileTypesRequest *)in;
    int64_t start, end;
    listing_window(r->start, r->end, &start, &end);
    Querier__V1__ProfileTypesResponse *pt;
    if (back_types(data, req, start, end, &pt, st))
        return -1;
    Parca__Query__V1alpha1__ProfileTypesResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Parca__Query__V1alpha1__ProfileType **types =
        lc_arena_calloc(req->arena, pt->n_profile_types + 1, sizeof(*types));
    if (!resp || !types)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__ProfileTypesResponse)
        PARCA__QUERY__V1ALPHA1__PROFILE_TYPES_RESPONSE__INIT;
    size_t n = 0;
    for (size_t i = 0; i < pt->n_profile_types; i++) {
        const Types__V1__ProfileType *t = pt->profile_types[i];
        if (type_seen(types, n, t))
            continue;
        Parca__Query__V1alpha1__ProfileType *p = lc_arena_alloc(req->arena, sizeof(*p));
        if (!p)
            return qry_fail_arena(st);
        *p = (Parca__Query__V1alpha1__ProfileType)PARCA__QUERY__V1ALPHA1__PROFILE_TYPE__INIT;
        p->name = t->name;
        p->sample_type = t->sample_type;
        p->sample_unit = t->sample_unit;
        p->period_type = t->period_type;
        p->period_unit = t->period_unit;
        p->delta = parca_type_is_delta(t->name, t->period_type);
        types[n++] = p;
    }
    resp->types = types;
    resp->n_types = n;
    *out = &resp->base;
    return 0;
}

static int parca_has_profile_data(lc_http_req_t *req, const ProtobufCMessage *in,
                                  ProtobufCMessage **out, lc_status_t *st, void *data)
{
    LC_UNUSED(in);
    Querier__V1__ProfileTypesResponse *pt;
    if (back_types(data, req, 0, qry_now_ms() + DAY_MS, &pt, st))
        return -1;
    Parca__Query__V1alpha1__HasProfileDataResponse *resp =
        lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__HasProfileDataResponse)
        PARCA__QUERY__V1ALPHA1__HAS_PROFILE_DATA_RESPONSE__INIT;
    resp->has_data = pt->n_profile_types > 0;
    *out = &resp->base;
    return 0;
}

/* Labels' and Values' matchers as Pyroscope selectors: each `match` (a
 * Parca query, with or without a type) narrowed to profile_type when it
 * names none; no match and a profile_type: that type alone. */
static int listing_matchers(lc_arena_t *a, char **match, size_t n_match, const char *profile_type,
                            char ***out, size_t *n_out, lc_status_t *st)
{
    parca_query_t pt = {0};
    const char *type_id = NULL;
    if (profile_type && *profile_type) {
        if (parca_parse_query(profile_type, false, a, &pt, st))
            return -1;
        type_id = pt.type_id;
    }
    *out = lc_arena_calloc(a, n_match + 1, sizeof(char *));
    if (!*out)
        return qry_fail_arena(st);
    *n_out = 0;
    for (size_t i = 0; i < n_match; i++) {
        parca_query_t q;
        if (parca_parse_query(match[i], true, a, &q, st))
            return -1;
        (*out)[(*n_out)++] =
            (char *)parca_selector_with_type(q.type_id ? q.type_id : type_id, q.selector, a);
    }
    if (n_match == 0 && type_id)
        (*out)[(*n_out)++] = (char *)parca_selector_with_type(type_id, "{}", a);
    for (size_t i = 0; i < *n_out; i++)
        if (!(*out)[i])
            return qry_fail_arena(st);
    return 0;
}

static int parca_labels(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Parca__Query__V1alpha1__LabelsRequest *r =
        (const Parca__Query__V1alpha1__LabelsRequest *)in;
    Types__V1__LabelNamesRequest ln = TYPES__V1__LABEL_NAMES_REQUEST__INIT;
    listing_window(r->start, r->end, &ln.start, &ln.end);
    if (listing_matchers(req->arena, r->match, r->n_match, r->profile_type, &ln.matchers,
                         &ln.n_matchers, st))
        return -1;
    ProtobufCMessage *o;
    if (qry_rpc_label_names(req, &ln.base, &o, st, fe))
        return -1;
    const Types__V1__LabelNamesResponse *names = (const Types__V1__LabelNamesResponse *)o;
    Parca__Query__V1alpha1__LabelsResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    char **kept = lc_arena_calloc(req->arena, names->n_names + 1, sizeof(char *));
    if (!resp || !kept)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__LabelsResponse)PARCA__QUERY__V1ALPHA1__LABELS_RESPONSE__INIT;
    /* Parca's label names are the series labels; "__" names are internal */
    for (size_t i = 0; i < names->n_names; i++)
        if (strncmp(names->names[i], "__", 2) != 0)
            kept[resp->n_label_names++] = names->names[i];
    resp->label_names = kept;
    *out = &resp->base;
    return 0;
}

static int parca_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Parca__Query__V1alpha1__ValuesRequest *r =
        (const Parca__Query__V1alpha1__ValuesRequest *)in;
    if (!r->label_name || !*r->label_name)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "label_name is required");
    Types__V1__LabelValuesRequest lv = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    lv.name = r->label_name;
    listing_window(r->start, r->end, &lv.start, &lv.end);
    if (listing_matchers(req->arena, r->match, r->n_match, r->profile_type, &lv.matchers,
                         &lv.n_matchers, st))
        return -1;
    ProtobufCMessage *o;
    if (qry_rpc_label_values(req, &lv.base, &o, st, fe))
        return -1;
    const Types__V1__LabelValuesResponse *vals = (const Types__V1__LabelValuesResponse *)o;
    Parca__Query__V1alpha1__ValuesResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__ValuesResponse)PARCA__QUERY__V1ALPHA1__VALUES_RESPONSE__INIT;
    resp->label_values = vals->names;
    resp->n_label_values = vals->n_names;
    *out = &resp->base;
    return 0;
}

/* -------------------------------------------------------------- QueryRange */

static int required_range(const Google__Protobuf__Timestamp *start,
                          const Google__Protobuf__Timestamp *end, int64_t *start_ms,
                          int64_t *end_ms, lc_status_t *st)
{
    if (!start || !end)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "start and end are required");
    *start_ms = ts_ms(start, 0);
    *end_ms = ts_ms(end, 0);
    if (*end_ms <= *start_ms)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "end must be after start");
    return 0;
}

static Parca__Query__V1alpha1__ValueType *value_type(lc_arena_t *a, const char *type,
                                                     const char *unit)
{
    Parca__Query__V1alpha1__ValueType *v = lc_arena_alloc(a, sizeof(*v));
    if (v) {
        *v = (Parca__Query__V1alpha1__ValueType)PARCA__QUERY__V1ALPHA1__VALUE_TYPE__INIT;
        v->type = (char *)type;
        v->unit = (char *)unit;
    }
    return v;
}

static Parca__Profilestore__V1alpha1__LabelSet *labelset(lc_arena_t *a, const Types__V1__Series *s)
{
    Parca__Profilestore__V1alpha1__LabelSet *ls = lc_arena_alloc(a, sizeof(*ls));
    Parca__Profilestore__V1alpha1__Label *labels =
        lc_arena_calloc(a, s->n_labels + 1, sizeof(*labels));
    Parca__Profilestore__V1alpha1__Label **ptrs =
        lc_arena_calloc(a, s->n_labels + 1, sizeof(*ptrs));
    if (!ls || !labels || !ptrs)
        return NULL;
    *ls = (Parca__Profilestore__V1alpha1__LabelSet)PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
    ls->labels = ptrs;
    for (size_t i = 0; i < s->n_labels; i++) {
        if (strncmp(s->labels[i]->name, "__", 2) == 0)
            continue;
        labels[i] =
            (Parca__Profilestore__V1alpha1__Label)PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT;
        labels[i].name = s->labels[i]->name;
        labels[i].value = s->labels[i]->value;
        ptrs[ls->n_labels++] = &labels[i];
    }
    return ls;
}

static Parca__Query__V1alpha1__MetricsSeries *
metrics_series(lc_arena_t *a, const Types__V1__Series *s, const parca_query_t *q, int64_t step_ms)
{
    Parca__Query__V1alpha1__MetricsSeries *m = lc_arena_alloc(a, sizeof(*m));
    Parca__Query__V1alpha1__MetricsSample *samples =
        lc_arena_calloc(a, s->n_points + 1, sizeof(*samples));
    Parca__Query__V1alpha1__MetricsSample **ptrs =
        lc_arena_calloc(a, s->n_points + 1, sizeof(*ptrs));
    if (!m || !samples || !ptrs)
        return NULL;
    *m = (Parca__Query__V1alpha1__MetricsSeries)PARCA__QUERY__V1ALPHA1__METRICS_SERIES__INIT;
    m->labelset = labelset(a, s);
    m->period_type = value_type(a, q->period_type, q->period_unit);
    m->sample_type = value_type(a, q->sample_type, q->sample_unit);
    if (!m->labelset || !m->period_type || !m->sample_type)
        return NULL;
    for (size_t i = 0; i < s->n_points; i++) {
        Parca__Query__V1alpha1__MetricsSample *x = &samples[i];
        *x = (Parca__Query__V1alpha1__MetricsSample)PARCA__QUERY__V1ALPHA1__METRICS_SAMPLE__INIT;
        x->timestamp = ts_new(a, s->points[i]->timestamp);
        if (!x->timestamp)
            return NULL;
        double v = s->points[i]->value;
        x->value = (int64_t)llround(v);
        x->duration = step_ms * 1000000;
        x->value_per_second = step_ms > 0 ? v / ((double)step_ms / 1000.0) : 0;
        x->count = 1;
        ptrs[i] = x;
    }
    m->samples = ptrs;
    m->n_samples = s->n_points;
    return m;
}

static int step_of(const Google__Protobuf__Duration *d, int64_t start_ms, int64_t end_ms,
                   int64_t *step_ms, lc_status_t *st)
{
    if (!d || (d->seconds == 0 && d->nanos == 0)) {
        /* none given: about 100 points over the range, at least 1 s */
        *step_ms = (end_ms - start_ms) / 100 > 1000 ? (end_ms - start_ms) / 100 : 1000;
        return 0;
    }
    if (d->seconds < 0 || d->nanos < 0 || d->seconds > INT64_MAX / 1000000)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "step must be positive");
    int64_t ms = d->seconds * 1000 + d->nanos / 1000000;
    *step_ms = ms > 0 ? ms : 1; /* ember's series resolution is 1 ms */
    return 0;
}

static int parca_query_range(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                             lc_status_t *st, void *data)
{
    const Parca__Query__V1alpha1__QueryRangeRequest *r =
        (const Parca__Query__V1alpha1__QueryRangeRequest *)in;
    parca_query_t q;
    Querier__V1__SelectSeriesRequest ss = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    int64_t step_ms = 0;
    if (parca_parse_query(r->query, false, req->arena, &q, st) ||
        required_range(r->start, r->end, &ss.start, &ss.end, st) ||
        step_of(r->step, ss.start, ss.end, &step_ms, st))
        return -1;
    ss.profile_typeid = (char *)q.type_id;
    ss.label_selector = (char *)q.selector;
    ss.group_by = r->sum_by;
    ss.n_group_by = r->n_sum_by;
    ss.step = (double)step_ms / 1000.0;
    ss.aggregation = TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM;
    ss.limit = r->limit;
    ProtobufCMessage *o;
    if (qry_rpc_select_series(req, &ss.base, &o, st, data))
        return -1;
    const Querier__V1__SelectSeriesResponse *sr = (const Querier__V1__SelectSeriesResponse *)o;
    if (sr->n_series == 0)
        return lc_status_set(st, LC_CODE_NOT_FOUND,
                             "No data found for the query, try a different query or time range "
                             "or no data has been written to be queried yet.");
    Parca__Query__V1alpha1__QueryRangeResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Parca__Query__V1alpha1__MetricsSeries **series =
        lc_arena_calloc(req->arena, sr->n_series + 1, sizeof(*series));
    if (!resp || !series)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__QueryRangeResponse)
        PARCA__QUERY__V1ALPHA1__QUERY_RANGE_RESPONSE__INIT;
    for (size_t i = 0; i < sr->n_series; i++)
        if (!(series[i] = metrics_series(req->arena, sr->series[i], &q, step_ms)))
            return qry_fail_arena(st);
    resp->series = series;
    resp->n_series = sr->n_series;
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------------------- Query */

/* One side of a query: a merge or a single profile, as query + range. */
typedef struct side_s {
    const char *query;
    int64_t start_ms, end_ms;
} side_t;

static int side_merge(const Parca__Query__V1alpha1__MergeProfile *m, side_t *s, lc_status_t *st)
{
    if (!m)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "merge mode needs the merge options (query, start, end)");
    s->query = m->query;
    return required_range(m->start, m->end, &s->start_ms, &s->end_ms, st);
}

static int side_single(const Parca__Query__V1alpha1__SingleProfile *m, side_t *s, lc_status_t *st)
{
    if (!m || !m->time)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "single mode needs the single options (query, time)");
    s->query = m->query;
    s->start_ms = s->end_ms = ts_ms(m->time, 0);
    return 0;
}

static int side_of_selection(const Parca__Query__V1alpha1__ProfileDiffSelection *d, side_t *s,
                             lc_status_t *st)
{
    if (!d)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "diff mode needs both a and b");
    if (d->mode == PARCA__QUERY__V1ALPHA1__PROFILE_DIFF_SELECTION__MODE__MODE_MERGE)
        return side_merge(d->merge, s, st);
    return side_single(d->single, s, st);
}

/* The back end's merge request of one side. */
static int side_request(lc_http_req_t *req, const side_t *s, parca_query_t *q,
                        Querier__V1__SelectMergeProfileRequest *mr, lc_status_t *st)
{
    if (parca_parse_query(s->query, false, req->arena, q, st))
        return -1;
    *mr = (Querier__V1__SelectMergeProfileRequest)QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    mr->profile_typeid = (char *)q->type_id;
    mr->label_selector = (char *)q->selector;
    mr->start = s->start_ms;
    mr->end = s->end_ms;
    return 0;
}

/* The merged pprof of one side (protobuf bytes, maybe gzip) into out. */
static int side_pprof(qry_front_t *fe, lc_http_req_t *req, const side_t *s, parca_query_t *q,
                      lc_buf_t *out, lc_status_t *st)
{
    Querier__V1__SelectMergeProfileRequest mr;
    if (side_request(req, s, q, &mr, st))
        return -1;
    return qry_front_merge_pprof(fe, req, &mr.base, out, st);
}

/* One side folded into t straight from what the back end reads. */
static int side_fold(qry_front_t *fe, lc_http_req_t *req, const side_t *s, parca_query_t *q,
                     parca_tree_t *t, int sign, int64_t *total, lc_status_t *st)
{
    Querier__V1__SelectMergeProfileRequest mr;
    if (side_request(req, s, q, &mr, st))
        return -1;
    parca_fold_t *f = parca_fold_new(t, sign, total);
    qry_merge_sink_t sink = {.nodes = parca_fold_nodes, .pprof = parca_fold_pprof, .data = f};
    int rc = qry_front_merge_parts(fe, req, &mr.base, &sink, st);
    parca_fold_free(f);
    return rc;
}

static int decode_merged(lc_http_req_t *req, const lc_buf_t *b, lc_pprof_t **p, lc_status_t *st)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = (size_t)64 << 20;
    lim.max_decompressed_bytes = (size_t)1 << 30;
    return lc_pprof_decode(b->len ? b->data : (const uint8_t *)"", b->len, &lim, req->arena, p, st);
}

static int64_t pprof_total(const lc_pprof_t *p)
{
    int64_t total = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i]->n_value)
            total += p->sample[i]->value[0];
    return total;
}

static int report_pprof(lc_http_req_t *req, const lc_buf_t *b,
                        Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    lc_pprof_t *p;
    if (decode_merged(req, b, &p, st))
        return -1;
    resp->total = pprof_total(p);
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_PPROF;
    if (lc_gz_is_gzip(b->data, b->len)) {
        resp->pprof.data = b->data;
        resp->pprof.len = b->len;
        return 0;
    }
    lc_buf_t z;
    lc_buf_init(&z, LC_BUF_UNLIMITED);
    int rc = lc_gzip(b->data ? b->data : (const uint8_t *)"", b->len, 1, &z);
    if (rc == 0) {
        resp->pprof.data = lc_arena_alloc(req->arena, z.len + 1);
        if (resp->pprof.data)
            memcpy(resp->pprof.data, z.data, z.len);
        resp->pprof.len = z.len;
        rc = resp->pprof.data ? 0 : LC_ETOOBIG;
    }
    lc_buf_fini(&z);
    return rc ? qry_fail(st, rc, "compressing the profile") : 0;
}

static int check_report_type(int type, bool diff, lc_status_t *st)
{
    switch (type) {
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PPROF:
        return diff ? lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                    "REPORT_TYPE_PPROF is not available for a diff")
                    : 0;
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_UNSPECIFIED:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_TOP:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_CALLGRAPH:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_TABLE:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_ARROW:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_TABLE_ARROW:
        return 0;
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_SOURCE:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PROFILE_METADATA:
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMECHART:
        return lc_status_set(st, LC_CODE_UNIMPLEMENTED,
                             "report type %d is not implemented by ember (PPROF, TOP, CALLGRAPH, "
                             "FLAMEGRAPH_TABLE, FLAMEGRAPH_ARROW and TABLE_ARROW are)",
                             type);
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown report type %d", type);
    }
}

/* The sides of r as its mode says (b is the compared side of a diff). */
static int query_sides(const Parca__Query__V1alpha1__QueryRequest *r, side_t *a, side_t *b,
                       bool *diff, lc_status_t *st)
{
    *diff = false;
    switch (r->mode) {
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_MERGE:
        return side_merge(r->options_case == PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_MERGE
                              ? r->merge
                              : NULL,
                          b, st);
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_SINGLE_UNSPECIFIED:
        return side_single(r->options_case == PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_SINGLE
                               ? r->single
                               : NULL,
                           b, st);
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_DIFF:
        if (r->options_case != PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_DIFF || !r->diff)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "diff mode needs the diff options");
        *diff = true;
        return side_of_selection(r->diff->a, a, st) ? -1 : side_of_selection(r->diff->b, b, st);
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unknown mode %d", (int)r->mode);
    }
}

static int build_report(lc_http_req_t *req, const Parca__Query__V1alpha1__QueryRequest *r,
                        parca_tree_t *t, const char *unit,
                        Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    double trim = r->node_trim_threshold > 0 ? r->node_trim_threshold / 100.0 : 0;
    switch (r->report_type) {
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_TOP:
        return parca_report_top(t, unit, req->arena, resp, st);
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_CALLGRAPH:
        return parca_report_callgraph(t, req->arena, resp, st);
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_ARROW:
        return parca_report_flamegraph_arrow(t, unit, trim, req->arena, resp, st);
    case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_TABLE_ARROW:
        return parca_report_table_arrow(t, unit, req->arena, resp, st);
    default:
        return parca_report_flamegraph(t, unit, trim, req->arena, resp, st);
    }
}

/* Each side into one tree, then the report: folded straight from the back
 * end's parts, or through the merged pprof when the request filters stacks
 * (the filters judge whole stacks; the pprof has them). */
static int tree_report(qry_front_t *fe, lc_http_req_t *req,
                       const Parca__Query__V1alpha1__QueryRequest *r, const side_t *a,
                       const side_t *b, bool diff, Parca__Query__V1alpha1__QueryResponse *resp,
                       lc_status_t *st)
{
    parca_filter_t *filter;
    if (parca_filter_new(r, req->arena, &filter, st))
        return -1;
    bool by_address = false;
    for (size_t i = 0; r->group_by && i < r->group_by->n_fields; i++)
        by_address |= strcmp(r->group_by->fields[i], "location_address") == 0;
    parca_tree_t *t = parca_tree_new(by_address, req->arena);
    parca_query_t q;
    int rc = 0;
    for (int pass = diff ? 0 : 1; pass < 2 && rc == 0; pass++) {
        int64_t ignored = 0;
        if (!filter) {
            rc = side_fold(fe, req, pass ? b : a, &q, t, pass ? 1 : -1,
                           pass ? &resp->total : &ignored, st);
            continue;
        }
        lc_buf_t buf;
        lc_pprof_t *p;
        lc_buf_init(&buf, LC_BUF_UNLIMITED);
        rc = side_pprof(fe, req, pass ? b : a, &q, &buf, st);
        if (rc == 0)
            rc = decode_merged(req, &buf, &p, st);
        if (rc == 0)
            rc = parca_tree_add(t, p, pass ? 1 : -1, filter, pass ? &resp->total : &ignored,
                                pass ? &resp->filtered : &ignored, st);
        lc_buf_fini(&buf);
    }
    if (rc == 0)
        rc = build_report(req, r, t, q.sample_unit, resp, st);
    parca_tree_free(t);
    return rc;
}

static int parca_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data)
{
    qry_front_t *fe = data;
    const Parca__Query__V1alpha1__QueryRequest *r =
        (const Parca__Query__V1alpha1__QueryRequest *)in;
    side_t a = {0}, b = {0};
    bool diff;
    if (query_sides(r, &a, &b, &diff, st) || check_report_type(r->report_type, diff, st))
        return -1;
    if (r->node_trim_threshold < 0 || isnan(r->node_trim_threshold))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "node_trim_threshold must be a percentage >= 0");
    Parca__Query__V1alpha1__QueryResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Parca__Query__V1alpha1__QueryResponse)PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__INIT;
    int rc;
    if (r->report_type == PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PPROF) {
        parca_query_t q;
        lc_buf_t buf;
        lc_buf_init(&buf, LC_BUF_UNLIMITED);
        rc = side_pprof(fe, req, &b, &q, &buf, st);
        if (rc == 0)
            rc = report_pprof(req, &buf, resp, st);
        if (rc == 0 && buf.len && resp->pprof.data == buf.data) {
            /* still points into buf: keep a copy in the arena */
            uint8_t *copy = lc_arena_alloc(req->arena, buf.len);
            rc = copy ? 0 : qry_fail_arena(st);
            if (copy)
                memcpy(copy, buf.data, buf.len);
            resp->pprof.data = copy;
        }
        lc_buf_fini(&buf);
    } else {
        rc = tree_report(fe, req, r, &a, &b, diff, resp, st);
    }
    if (rc)
        return -1;
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------------- the routes */

static int parca_unimplemented(lc_http_req_t *req, const ProtobufCMessage *in,
                               ProtobufCMessage **out, lc_status_t *st, void *data)
{
    LC_UNUSED(req);
    LC_UNUSED(in);
    LC_UNUSED(out);
    return lc_status_set(st, LC_CODE_UNIMPLEMENTED, "%s is not implemented by ember",
                         (const char *)data);
}

typedef struct parca_method_s {
    const char *name;
    const ProtobufCMessageDescriptor *in;
    lc_connect_unary_fn fn; /* NULL: unimplemented */
} parca_method_t;

static const parca_method_t parca_methods[QRY_PARCA_METHODS] = {
    {"QueryRange", &parca__query__v1alpha1__query_range_request__descriptor, parca_query_range},
    {"Query", &parca__query__v1alpha1__query_request__descriptor, parca_query},
    {"ProfileTypes", &parca__query__v1alpha1__profile_types_request__descriptor,
     parca_profile_types},
    {"Labels", &parca__query__v1alpha1__labels_request__descriptor, parca_labels},
    {"Values", &parca__query__v1alpha1__values_request__descriptor, parca_values},
    {"HasProfileData", &parca__query__v1alpha1__has_profile_data_request__descriptor,
     parca_has_profile_data},
    {"Series", &parca__query__v1alpha1__series_request__descriptor, NULL},
    {"ShareProfile", &parca__query__v1alpha1__share_profile_request__descriptor, NULL},
};

/* Any other path under the service: unimplemented, in the caller's protocol. */
static lc_http_result_t unknown_method(lc_http_req_t *req, void *data)
{
    LC_UNUSED(data);
    lc_status_t st;
    const char *method = strrchr(req->path, '/');
    lc_status_set(&st, LC_CODE_UNIMPLEMENTED,
                  "unknown method %.64s of parca.query.v1alpha1.QueryService",
                  method ? method + 1 : req->path);
    lc_connect_error(req, &st);
    return LC_HTTP_DONE;
}

int qry_parca_register(qry_front_t *fe, lc_httpd_t *srv)
{
    static const char *const prefixes[] = {"", "/api"};
    int rc = 0;
    for (size_t i = 0; i < QRY_PARCA_METHODS && rc == 0; i++) {
        const parca_method_t *m = &parca_methods[i];
        fe->parca[i] = (qry_route_t){
            .in = m->in,
            .unary = m->fn ? m->fn : parca_unimplemented,
            .data = m->fn ? (void *)fe : (void *)m->name,
            .multitenancy = fe->opts.multitenancy,
        };
        for (size_t p = 0; p < 2 && rc == 0; p++) {
            char path[128];
            snprintf(path, sizeof(path), "%s" PARCA_QUERY_SERVICE "%s", prefixes[p], m->name);
            rc = qry_route_register(srv, path, LC_HTTP_SCOPE_READ, &fe->parca[i]);
        }
    }
    for (size_t p = 0; p < 2 && rc == 0; p++) {
        char path[128];
        snprintf(path, sizeof(path), "%s" PARCA_QUERY_SERVICE "*", prefixes[p]);
        lc_http_route_t route = {.path = path,
                                 .scope = LC_HTTP_SCOPE_READ,
                                 .deny = lc_connect_error,
                                 .work = unknown_method,
                                 .data = fe};
        rc = lc_httpd_route(srv, &route);
    }
    return rc;
}
