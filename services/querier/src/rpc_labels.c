/*
 * rpc_labels.c — the store back end's listings (pyroscope-api.md §5.3): ProfileTypes,
 * LabelNames, LabelValues and Series. Each walks the series of the range once
 * (qry_walk_series) and collects into a de-duplicating set; outputs are sorted
 * byte-wise. Only series with a profile inside [start, end] count.
 */
#include <stdlib.h>
#include <string.h>

#include "querier_int.h"

#define DAY_MS (24LL * 3600 * 1000)

/* Legacy clients send LabelNames/LabelValues/Series with no range at all. */
static void default_all_time(int64_t *start, int64_t *end)
{
    if (*start == 0 && *end == 0) {
        *start = INT64_MIN / 1000000;
        *end = INT64_MAX / 1000000;
    }
}

static bool accepts_utf8_names(const lc_http_req_t *req)
{
    const char *accept = lc_http_header(req, "accept");
    return accept && strstr(accept, "allow-utf8-labelnames=true");
}

static char **set_strings(qry_set_t *s, lc_arena_t *a)
{
    char **v = lc_arena_calloc(a, s->n + 1, sizeof(*v));
    if (v && s->n)
        memcpy(v, s->v, s->n * sizeof(*v));
    return v;
}

/* ----------------------------------------------------------- ProfileTypes */

static int collect_profile_type(const lc_labels_t *labels, void *data)
{
    const char *pt = lc_labels_get(labels, "__profile_type__");
    return pt ? qry_set_add(data, pt, strlen(pt), NULL) : 0;
}

static Types__V1__ProfileType *profile_type_new(lc_arena_t *a, char *id, char *const parts[5])
{
    Types__V1__ProfileType *pt = lc_arena_calloc(a, 1, sizeof(*pt));
    if (!pt)
        return NULL;
    *pt = (Types__V1__ProfileType)TYPES__V1__PROFILE_TYPE__INIT;
    pt->id = id;
    pt->name = parts[0];
    pt->sample_type = parts[1];
    pt->sample_unit = parts[2];
    pt->period_type = parts[3];
    pt->period_unit = parts[4];
    return pt;
}

static int profile_types_reply(qry_set_t *set, lc_arena_t *a, ProtobufCMessage **out,
                               lc_status_t *st)
{
    Querier__V1__ProfileTypesResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    Types__V1__ProfileType **v = lc_arena_calloc(a, set->n + 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_arena(st);
    *resp = (Querier__V1__ProfileTypesResponse)QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    for (size_t i = 0; i < set->n; i++) {
        char *parts[5];
        /* IDs that do not split into five parts cannot be queried: leave them out. */
        if (!qry_profile_type_split(a, set->v[i], parts))
            continue;
        v[resp->n_profile_types] = profile_type_new(a, set->v[i], parts);
        if (!v[resp->n_profile_types])
            return qry_fail_arena(st);
        resp->n_profile_types++;
    }
    resp->profile_types = v;
    *out = &resp->base;
    return 0;
}

int qry_store_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                            lc_status_t *st, void *data)
{
    const Querier__V1__ProfileTypesRequest *r = (const Querier__V1__ProfileTypesRequest *)in;
    int64_t start = r->start, end = r->end;
    if (start == 0 && end == 0) { /* "recent data only": the last 24 h */
        end = qry_now_ms();
        start = end - DAY_MS;
    }
    qry_call_t c;
    if (qry_call_begin(&c, qry_of(data), req, start, end, st))
        return -1;
    qry_set_t set;
    qry_set_init(&set, req->arena);
    int rc = qry_walk_series(&c, NULL, 0, collect_profile_type, &set);
    qry_call_end(&c);
    qry_set_sort(&set);
    rc = rc ? qry_fail(st, rc, "listing profile types")
            : profile_types_reply(&set, req->arena, out, st);
    qry_set_fini(&set);
    return rc;
}

/* ------------------------------------------------------ LabelNames/Values */

typedef struct names_walk_s {
    qry_set_t set;
    const char *name; /* LabelValues: the label; NULL for LabelNames */
    bool utf8;
} names_walk_t;

static int qry_collect_names(const lc_labels_t *labels, void *data)
{
    names_walk_t *w = data;
    int rc = 0;
    for (size_t i = 0; i < labels->n && rc == 0; i++) {
        const char *name = labels->v[i].name;
        if (w->utf8 || lc_label_name_is_legacy(name))
            rc = qry_set_add(&w->set, name, strlen(name), NULL);
    }
    return rc;
}

static int collect_values(const lc_labels_t *labels, void *data)
{
    names_walk_t *w = data;
    const char *v = lc_labels_get(labels, w->name);
    return v && *v ? qry_set_add(&w->set, v, strlen(v), NULL) : 0;
}

/* Walks the matching series collecting names or values, then replies with
 * the sorted list in a LabelNames/LabelValuesResponse (same layout). */
static int names_or_values(lc_http_req_t *req, qry_t *q, char **matchers, size_t n_matchers,
                           int64_t start, int64_t end, names_walk_t *w, lc_status_t *st)
{
    lc_selector_t *sels;
    size_t n_sels;
    if (qry_matchers(matchers, n_matchers, &sels, &n_sels, st))
        return -1;
    qry_call_t c;
    qry_range_rules_t rules = qry_listing_rules(start, end);
    default_all_time(&start, &end);
    if (qry_call_begin_range(&c, q, req, start, end, rules, st)) {
        qry_matchers_free(sels, n_sels);
        return -1;
    }
    qry_set_init(&w->set, req->arena);
    int rc = qry_walk_series(&c, sels, n_sels, w->name ? collect_values : qry_collect_names, w);
    qry_call_end(&c);
    qry_matchers_free(sels, n_sels);
    qry_set_sort(&w->set);
    return rc ? qry_fail(st, rc, "listing labels") : 0;
}

int qry_store_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                          lc_status_t *st, void *data)
{
    const Types__V1__LabelNamesRequest *r = (const Types__V1__LabelNamesRequest *)in;
    names_walk_t w = {.utf8 = accepts_utf8_names(req)};
    int rc =
        names_or_values(req, qry_of(data), r->matchers, r->n_matchers, r->start, r->end, &w, st);
    Types__V1__LabelNamesResponse *resp = rc ? NULL : lc_arena_calloc(req->arena, 1, sizeof(*resp));
    char **names = rc ? NULL : set_strings(&w.set, req->arena);
    if (rc == 0 && (!resp || !names))
        rc = qry_fail_arena(st);
    if (rc == 0) {
        *resp = (Types__V1__LabelNamesResponse)TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
        resp->names = names;
        resp->n_names = w.set.n;
        *out = &resp->base;
    }
    qry_set_fini(&w.set);
    return rc;
}

int qry_store_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                           lc_status_t *st, void *data)
{
    const Types__V1__LabelValuesRequest *r = (const Types__V1__LabelValuesRequest *)in;
    if (!r->name || !*r->name)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "name is required");
    names_walk_t w = {.name = r->name};
    int rc =
        names_or_values(req, qry_of(data), r->matchers, r->n_matchers, r->start, r->end, &w, st);
    Types__V1__LabelValuesResponse *resp =
        rc ? NULL : lc_arena_calloc(req->arena, 1, sizeof(*resp));
    char **names = rc ? NULL : set_strings(&w.set, req->arena);
    if (rc == 0 && (!resp || !names))
        rc = qry_fail_arena(st);
    if (rc == 0) {
        *resp = (Types__V1__LabelValuesResponse)TYPES__V1__LABEL_VALUES_RESPONSE__INIT;
        resp->names = names;
        resp->n_names = w.set.n;
        *out = &resp->base;
    }
    qry_set_fini(&w.set);
    return rc;
}

/* ------------------------------------------------------------------ Series */

typedef struct series_walk_s {
    char **label_names;
    size_t n_label_names;
    qry_set_t keys; /* encoded label sets already listed */
    lc_labels_t *sets;
    size_t n_sets, cap_sets;
    lc_buf_t key;
} series_walk_t;

static bool wanted_name(const series_walk_t *w, const char *name)
{
    if (w->n_label_names == 0)
        return true;
    for (size_t i = 0; i < w->n_label_names; i++)
        if (strcmp(w->label_names[i], name) == 0)
            return true;
    return false;
}

static int collect_series(const lc_labels_t *labels, void *data)
{
    series_walk_t *w = data;
    lc_labels_t proj;
    lc_labels_init(&proj);
    for (size_t i = 0; i < labels->n; i++)
        if (wanted_name(w, labels->v[i].name))
            lc_labels_add(&proj, labels->v[i].name, labels->v[i].value);
    lc_buf_reset(&w->key);
    bool added = false;
    int rc = lc_labels_encode(&proj, &w->key);
    if (rc == 0)
        rc =
            qry_set_add(&w->keys, w->key.data ? (const void *)w->key.data : "", w->key.len, &added);
    if (rc == 0 && added) {
        w->sets = lc_xgrow(w->sets, &w->cap_sets, w->n_sets + 1, sizeof(*w->sets));
        w->sets[w->n_sets++] = proj;
        return 0;
    }
    lc_labels_fini(&proj);
    return rc;
}

static int labels_order(const void *a, const void *b)
{
    const lc_labels_t *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    for (size_t i = 0; i < n; i++) {
        int c = strcmp(x->v[i].name, y->v[i].name);
        if (c == 0)
            c = strcmp(x->v[i].value, y->v[i].value);
        if (c)
            return c;
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

static int series_reply(series_walk_t *w, lc_arena_t *a, ProtobufCMessage **out, lc_status_t *st)
{
    if (w->n_sets)
        qsort(w->sets, w->n_sets, sizeof(*w->sets), labels_order);
    Querier__V1__SeriesResponse *resp = lc_arena_calloc(a, 1, sizeof(*resp));
    Types__V1__Labels **v = lc_arena_calloc(a, w->n_sets + 1, sizeof(*v));
    if (!resp || !v)
        return qry_fail_arena(st);
    *resp = (Querier__V1__SeriesResponse)QUERIER__V1__SERIES_RESPONSE__INIT;
    for (size_t i = 0; i < w->n_sets; i++) {
        v[i] = lc_arena_calloc(a, 1, sizeof(**v));
        if (!v[i])
            return qry_fail_arena(st);
        *v[i] = (Types__V1__Labels)TYPES__V1__LABELS__INIT;
        v[i]->labels = qry_label_pairs(a, &w->sets[i]);
        v[i]->n_labels = w->sets[i].n;
        if (!v[i]->labels)
            return qry_fail_arena(st);
    }
    resp->labels_set = v;
    resp->n_labels_set = w->n_sets;
    *out = &resp->base;
    return 0;
}

static void series_walk_fini(series_walk_t *w)
{
    for (size_t i = 0; i < w->n_sets; i++)
        lc_labels_fini(&w->sets[i]);
    lc_free(w->sets);
    qry_set_fini(&w->keys);
    lc_buf_fini(&w->key);
}

int qry_store_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data)
{
    const Querier__V1__SeriesRequest *r = (const Querier__V1__SeriesRequest *)in;
    lc_selector_t *sels;
    size_t n_sels;
    if (qry_matchers(r->matchers, r->n_matchers, &sels, &n_sels, st))
        return -1;
    int64_t start = r->start, end = r->end;
    qry_range_rules_t rules = qry_listing_rules(start, end);
    default_all_time(&start, &end);
    qry_call_t c;
    if (qry_call_begin_range(&c, qry_of(data), req, start, end, rules, st)) {
        qry_matchers_free(sels, n_sels);
        return -1;
    }
    series_walk_t w = {.label_names = r->label_names, .n_label_names = r->n_label_names};
    qry_set_init(&w.keys, req->arena);
    lc_buf_init(&w.key, LC_BUF_UNLIMITED);
    int rc = qry_walk_series(&c, sels, n_sels, collect_series, &w);
    qry_call_end(&c);
    qry_matchers_free(sels, n_sels);
    rc = rc ? qry_fail(st, rc, "listing series") : series_reply(&w, req->arena, out, st);
    series_walk_fini(&w);
    return rc;
}
