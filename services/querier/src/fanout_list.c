/*
 * fanout_list.c — the listing methods by fan-out: ProfileTypes, LabelNames,
 * LabelValues, Series and GetProfileStats. Every ingester answers for the data
 * it holds; the answer is the union, sorted as the local querier sorts it.
 * AnalyzeQuery too: its counts are sums, its series a union of keys.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/v1/shard.pb-c.h"
#include "fanout_int.h"

/* Calls method on every ingester with r and unpacks the answers as desc. */
static int ask_all(qry_fanout_t *f, lc_http_req_t *req, const char *method,
                   const ProtobufCMessage *r, const ProtobufCMessageDescriptor *desc,
                   ProtobufCMessage ***parts, size_t *n, lc_status_t *st)
{
    fo_answer_t *ans;
    char *path = lc_arena_sprintf(req->arena, FO_PUBLIC_SERVICE "%s", method);
    if (!path)
        return qry_fail_arena(st);
    if (fo_call_all(f, req, path, r, &ans, n, st))
        return -1;
    return fo_unpack_all(req, desc, ans, *n, parts, st);
}

/* ----------------------------------------------------------- ProfileTypes */

static int pt_cmp(const void *a, const void *b)
{
    const Types__V1__ProfileType *x = *(Types__V1__ProfileType *const *)a;
    const Types__V1__ProfileType *y = *(Types__V1__ProfileType *const *)b;
    return strcmp(x->id, y->id);
}

int fo_rpc_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    ProtobufCMessage **parts;
    size_t n, total = 0;
    if (ask_all(fo_of(data), req, "ProfileTypes", in,
                &querier__v1__profile_types_response__descriptor, &parts, &n, st))
        return -1;
    for (size_t i = 0; i < n; i++)
        total += ((Querier__V1__ProfileTypesResponse *)parts[i])->n_profile_types;
    Types__V1__ProfileType **v = lc_arena_calloc(req->arena, total + 1, sizeof(*v));
    Querier__V1__ProfileTypesResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!v || !resp)
        return qry_fail_arena(st);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Querier__V1__ProfileTypesResponse *p = (Querier__V1__ProfileTypesResponse *)parts[i];
        for (size_t j = 0; j < p->n_profile_types; j++)
            v[k++] = p->profile_types[j];
    }
    if (k)
        qsort(v, k, sizeof(*v), pt_cmp);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (w == 0 || strcmp(v[w - 1]->id, v[i]->id) != 0)
            v[w++] = v[i];
    *resp = (Querier__V1__ProfileTypesResponse)QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    resp->profile_types = v;
    resp->n_profile_types = w;
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------ LabelNames/Values */

/* LabelNamesResponse and LabelValuesResponse share their layout (names = 1). */
static int union_names(lc_http_req_t *req, ProtobufCMessage **parts, size_t n,
                       Types__V1__LabelNamesResponse *resp, lc_status_t *st)
{
    char ***lists = lc_arena_calloc(req->arena, n + 1, sizeof(*lists));
    size_t *ns = lc_arena_calloc(req->arena, n + 1, sizeof(*ns));
    if (!lists || !ns)
        return qry_fail_arena(st);
    for (size_t i = 0; i < n; i++) {
        const Types__V1__LabelNamesResponse *p = (Types__V1__LabelNamesResponse *)parts[i];
        lists[i] = p->names;
        ns[i] = p->n_names;
    }
    int rc = fo_union_strings(req->arena, lists, ns, n, &resp->names, &resp->n_names);
    return rc ? qry_fail_arena(st) : 0;
}

int fo_rpc_label_names(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                       lc_status_t *st, void *data)
{
    ProtobufCMessage **parts;
    size_t n;
    Types__V1__LabelNamesResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Types__V1__LabelNamesResponse)TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
    if (ask_all(fo_of(data), req, "LabelNames", in, &types__v1__label_names_response__descriptor,
                &parts, &n, st) ||
        union_names(req, parts, n, resp, st))
        return -1;
    *out = &resp->base;
    return 0;
}

int fo_rpc_label_values(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data)
{
    const Types__V1__LabelValuesRequest *r = (const Types__V1__LabelValuesRequest *)in;
    if (!r->name || !*r->name)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "name is required");
    ProtobufCMessage **parts;
    size_t n;
    Types__V1__LabelNamesResponse names = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
    Types__V1__LabelValuesResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    if (ask_all(fo_of(data), req, "LabelValues", in, &types__v1__label_values_response__descriptor,
                &parts, &n, st) ||
        union_names(req, parts, n, &names, st))
        return -1;
    *resp = (Types__V1__LabelValuesResponse)TYPES__V1__LABEL_VALUES_RESPONSE__INIT;
    resp->names = names.names;
    resp->n_names = names.n_names;
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------------------ Series */

/* Pyroscope's CompareLabelPairs, as the local Series sorts. */
static int fo_labels_order(const void *a, const void *b)
{
    const Types__V1__Labels *x = *(Types__V1__Labels *const *)a;
    const Types__V1__Labels *y = *(Types__V1__Labels *const *)b;
    size_t n = x->n_labels < y->n_labels ? x->n_labels : y->n_labels;
    for (size_t i = 0; i < n; i++) {
        int c = strcmp(x->labels[i]->name, y->labels[i]->name);
        if (c == 0)
            c = strcmp(x->labels[i]->value, y->labels[i]->value);
        if (c)
            return c;
    }
    return x->n_labels < y->n_labels ? -1 : x->n_labels > y->n_labels;
}

int fo_rpc_series(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                  lc_status_t *st, void *data)
{
    ProtobufCMessage **parts;
    size_t n, total = 0;
    if (ask_all(fo_of(data), req, "Series", in, &querier__v1__series_response__descriptor, &parts,
                &n, st))
        return -1;
    for (size_t i = 0; i < n; i++)
        total += ((Querier__V1__SeriesResponse *)parts[i])->n_labels_set;
    Types__V1__Labels **v = lc_arena_calloc(req->arena, total + 1, sizeof(*v));
    Querier__V1__SeriesResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!v || !resp)
        return qry_fail_arena(st);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Querier__V1__SeriesResponse *p = (Querier__V1__SeriesResponse *)parts[i];
        for (size_t j = 0; j < p->n_labels_set; j++)
            v[k++] = p->labels_set[j];
    }
    if (k)
        qsort(v, k, sizeof(*v), fo_labels_order);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (w == 0 || fo_labels_order(&v[w - 1], &v[i]) != 0)
            v[w++] = v[i];
    *resp = (Querier__V1__SeriesResponse)QUERIER__V1__SERIES_RESPONSE__INIT;
    resp->labels_set = v;
    resp->n_labels_set = w;
    *out = &resp->base;
    return 0;
}

/* --------------------------------------------------------- GetProfileStats */

int fo_rpc_get_profile_stats(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                             lc_status_t *st, void *data)
{
    ProtobufCMessage **parts;
    size_t n;
    if (ask_all(fo_of(data), req, "GetProfileStats", in,
                &types__v1__get_profile_stats_response__descriptor, &parts, &n, st))
        return -1;
    Types__V1__GetProfileStatsResponse *resp = lc_arena_calloc(req->arena, 1, sizeof(*resp));
    if (!resp)
        return qry_fail_arena(st);
    *resp = (Types__V1__GetProfileStatsResponse)TYPES__V1__GET_PROFILE_STATS_RESPONSE__INIT;
    for (size_t i = 0; i < n; i++) {
        const Types__V1__GetProfileStatsResponse *p =
            (Types__V1__GetProfileStatsResponse *)parts[i];
        if (!p->data_ingested)
            continue;
        if (!resp->data_ingested || p->oldest_profile_time < resp->oldest_profile_time)
            resp->oldest_profile_time = p->oldest_profile_time;
        if (!resp->data_ingested || p->newest_profile_time > resp->newest_profile_time)
            resp->newest_profile_time = p->newest_profile_time;
        resp->data_ingested = true;
    }
    if (!resp->data_ingested) { /* as one empty store answers */
        const Types__V1__GetProfileStatsResponse *p =
            n ? (Types__V1__GetProfileStatsResponse *)parts[0] : resp;
        resp->oldest_profile_time = p->oldest_profile_time;
        resp->newest_profile_time = p->newest_profile_time;
    }
    *out = &resp->base;
    return 0;
}

/* ------------------------------------------------------------ AnalyzeQuery */

/* One ingester's figures into a: counts add, series join the key set (a
 * series with profiles on several ingesters counts once, as in one store). */
static int analysis_add(qry_analysis_t *a, const Ember__V1__AnalyzePartialResponse *p)
{
    a->blocks += p->block_count;
    a->block_bytes += p->block_bytes;
    a->profiles += p->profile_count;
    a->samples += p->sample_count;
    a->profile_bytes += p->profile_bytes;
    int rc = 0;
    for (size_t i = 0; i < p->n_series_keys && rc == 0; i++)
        rc = qry_set_add(&a->series, p->series_keys[i].data, p->series_keys[i].len, NULL);
    return rc;
}

int fo_rpc_analyze_query(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                         lc_status_t *st, void *data)
{
    fo_answer_t *ans;
    size_t n;
    ProtobufCMessage **parts;
    if (fo_call_all(fo_of(data), req, FO_SHARD_SERVICE "AnalyzeQuery", in, &ans, &n, st) ||
        fo_unpack_all(req, &ember__v1__analyze_partial_response__descriptor, ans, n, &parts, st))
        return -1;
    qry_analysis_t a = {0};
    qry_set_init(&a.series, req->arena);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = analysis_add(&a, (const Ember__V1__AnalyzePartialResponse *)parts[i]);
    if (rc)
        rc = qry_fail(st, rc, "counting series");
    else
        rc = qry_analysis_response(req->arena, "ember ingester", n, &a, out, st);
    qry_analysis_fini(&a);
    return rc;
}
