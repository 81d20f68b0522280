/*
 * rpc_merge.c — the store back end's merges: the whole merged tree of a
 * SelectMergeStacktraces, SelectMergeSpanProfile or Diff side, and merged
 * pprof, for the front end (frontend.c) to shape (front_shape.c). The
 * engine (lc/query.h) does
 * the work; this file parses what only a store reads (sample and profile
 * ids, selectors, the §5.9 time range) into an lc_query_t.
 *
 * Selectors that narrow samples: span_selector names the per-sample id the
 * ingester stores (the pprof label span_id, or profile_id when there is no
 * span_id: 16 hex digits). profile_id_selector has two forms, told apart by
 * shape: 16 hex digits are such per-sample ids (given both selectors, a
 * sample must carry an id in each); UUIDs (8-4-4-4-12 or 32 hex digits) are
 * Pyroscope's per-profile ids, Push's RawSample.ID, which the store keeps per
 * profile: only profiles stored with one of them contribute. One list holds
 * one form; a mix, or an id of neither shape, is invalid_argument.
 * stack_trace_selector.call_site keeps stacks that begin with the call site;
 * go_pgo shapes merged pprof (and, as in Pyroscope, makes the call site
 * ignored). trace_id_selector is not answered: ember does not keep trace ids.
 *
 * Merged pprof is built as protobuf bytes and sent as they are
 * (lc_connect_reply_raw through frontend.c), never decoded to be encoded again.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/uuid.h"
#include "querier_int.h"

#define QRY_MAX_SAMPLE_IDS 4096 /* span or profile ids per request */
_Static_assert(LC_UUID_BYTES == LC_STORE_PROFILE_ID_BYTES, "the store keeps profile UUIDs");

/* The fields the merge requests share. */
typedef struct merge_req_s {
    const char *profile_type;
    const char *label_selector;
    int64_t start, end;
    const Types__V1__StackTraceSelector *stack_trace_selector;
    char **profile_ids;
    size_t n_profile_ids;
    char **span_selector;
    size_t n_span_selector;
} merge_req_t;

typedef struct merge_call_s {
    qry_call_t c;
    lc_selector_t sel;
    lc_query_t query;
    uint64_t *sample_ids;
    uint8_t (*profile_uuids)[LC_UUID_BYTES];
} merge_call_t;

/* ---------------------------------------------------------- sample ids */

/* 16 hex digits, as the ingester stores span ids (big-endian value). */
static bool parse_sample_id(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; s[i]; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0 || i >= 16)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return i == 16;
}

static int sample_id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Parses one list of per-sample ids into a new sorted array (*out NULL when
 * the list is empty). */
static int parse_id_list(char **ids, size_t n, const char *what, uint64_t **out, lc_status_t *st)
{
    *out = NULL;
    if (n == 0)
        return 0;
    if (n > QRY_MAX_SAMPLE_IDS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "more than %d %s ids",
                             QRY_MAX_SAMPLE_IDS, what);
    uint64_t *v = lc_xmalloc(n * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) {
        if (!parse_sample_id(ids[i], &v[i])) {
            lc_free(v);
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "%s id \"%.64s\" is not 16 hex digits%s", what, ids[i],
                                 strcmp(what, "profile") == 0
                                     ? " like the list's first (profile_id_selector holds "
                                       "either 16-hex-digit sample ids or profile UUIDs, not both)"
                                     : "");
        }
    }
    qsort(v, n, sizeof(uint64_t), sample_id_cmp);
    *out = v;
    return 0;
}

static int uuid_cmp(const void *a, const void *b)
{
    return memcmp(a, b, LC_UUID_BYTES);
}

/* profile_id_selector holds UUIDs (Pyroscope's per-profile ids) when its
 * first entry is not 16 hex digits; then every entry must be one. */
static bool is_uuid_list(char **ids, size_t n)
{
    uint64_t unused;
    return n > 0 && !parse_sample_id(ids[0], &unused);
}

/* The UUID form of profile_id_selector -> a new sorted array of ids. */
static int parse_uuid_list(char **ids, size_t n, uint8_t (**out)[LC_UUID_BYTES], lc_status_t *st)
{
    *out = NULL;
    if (n > QRY_MAX_SAMPLE_IDS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "more than %d profile ids",
                             QRY_MAX_SAMPLE_IDS);
    uint8_t(*v)[LC_UUID_BYTES] = lc_xmalloc(n * LC_UUID_BYTES);
    for (size_t i = 0; i < n; i++) {
        if (!lc_uuid_parse(ids[i], v[i])) {
            lc_free(v);
            return lc_status_set(
                st, LC_CODE_INVALID_ARGUMENT,
                "profile id \"%.64s\" is not a UUID (8-4-4-4-12 or 32 hex digits); "
                "profile_id_selector holds either profile UUIDs or 16-hex-digit sample ids, "
                "not both",
                ids[i]);
        }
    }
    qsort(v, n, LC_UUID_BYTES, uuid_cmp);
    *out = v;
    return 0;
}

/* The ids in both sorted lists, into a (which has room); returns the count. */
static size_t intersect(uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    size_t i = 0, j = 0, n = 0;
    while (i < na && j < nb) {
        if (a[i] < b[j]) {
            i++;
        } else if (b[j] < a[i]) {
            j++;
        } else {
            a[n++] = a[i];
            i++;
            j++;
        }
    }
    return n;
}

/* span_selector and profile_id_selector -> the query's sorted span-id set
 * and, for profile UUIDs, its sorted profile-id set. */
static int parse_sample_ids(merge_call_t *m, const merge_req_t *r, lc_status_t *st)
{
    if (is_uuid_list(r->profile_ids, r->n_profile_ids)) {
        if (parse_uuid_list(r->profile_ids, r->n_profile_ids, &m->profile_uuids, st))
            return -1;
        m->query.profile_ids = (const uint8_t(*)[LC_STORE_PROFILE_ID_BYTES])m->profile_uuids;
        m->query.n_profile_ids = r->n_profile_ids;
        if (parse_id_list(r->span_selector, r->n_span_selector, "span", &m->sample_ids, st))
            return -1;
        m->query.span_ids = m->sample_ids;
        m->query.n_span_ids = r->n_span_selector;
        return 0;
    }
    uint64_t *spans, *profiles;
    if (parse_id_list(r->span_selector, r->n_span_selector, "span", &spans, st))
        return -1;
    if (parse_id_list(r->profile_ids, r->n_profile_ids, "profile", &profiles, st)) {
        lc_free(spans);
        return -1;
    }
    size_t n = r->n_span_selector;
    if (spans && profiles) {
        n = intersect(spans, n, profiles, r->n_profile_ids);
        lc_free(profiles);
    } else if (profiles) {
        spans = profiles;
        n = r->n_profile_ids;
    }
    m->sample_ids = spans;
    m->query.span_ids = spans; /* non-NULL with n 0: no sample matches */
    m->query.n_span_ids = n;
    return 0;
}

/* ------------------------------------------------------------ the call */

static void merge_end(merge_call_t *m)
{
    qry_call_end(&m->c);
    lc_selector_fini(&m->sel);
    lc_free(m->sample_ids);
    lc_free(m->profile_uuids);
}

/* tree: the answer is a flame graph (lc_query_merge_tree), which may take
 * whole windows from rollups alone. */
static int merge_begin(merge_call_t *m, qry_t *q, lc_http_req_t *req, const merge_req_t *r,
                       bool tree, lc_status_t *st)
{
    /* The front end has checked the trace ids and max_nodes already. */
    memset(m, 0, sizeof(*m));
    if (parse_sample_ids(m, r, st) ||
        qry_stack_selector(r->stack_trace_selector, req->arena, &m->query, st))
        goto fail;
    if (!r->profile_type || !*r->profile_type) {
        lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile_typeID is required");
        goto fail;
    }
    if (qry_selector(r->label_selector, r->profile_type, &m->sel, st))
        goto fail;
    lc_read_need_t need =
        tree && lc_query_merge_uses_rollups(&m->query) ? LC_READ_ROLLUPS_SUFFICE : LC_READ_BLOCKS;
    if (qry_call_begin_need(&m->c, q, req, r->start, r->end, QRY_RANGE_RULES, 0, need, st))
        goto fail;
    m->query.tenants = m->c.tenants;
    m->query.n_tenants = m->c.n_tenants;
    m->query.sel = &m->sel;
    m->query.start_ns = m->c.start_ns;
    m->query.end_ns = m->c.end_ns;
    return 0;
fail:
    merge_end(m);
    return -1;
}

/* ---------------------------------------------------------------- outputs */

static int merge_tree(merge_call_t *m, lc_ftree_t **out, lc_status_t *st)
{
    lc_ftree_t *t = lc_ftree_new(0);
    if (lc_query_merge_tree(m->c.reader, &m->query, t, st)) {
        lc_ftree_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* The merged pprof as protobuf bytes appended to out: one sample type (the
 * requested type's), the period type from the ID (period 0: it is not
 * stored), time and duration from the range. */
static int merged_pprof(merge_call_t *m, const char *profile_type, lc_arena_t *a, lc_buf_t *out,
                        lc_status_t *st)
{
    char *parts[5];
    if (!qry_profile_type_split(a, profile_type, parts))
        return qry_fail_arena(st);
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, parts[1], parts[2]);
    if (*parts[3] || *parts[4])
        lc_pprof_builder_period(b, parts[3], parts[4], 0);
    int64_t start = m->c.start_ns > 0 ? m->c.start_ns : 0;
    lc_pprof_builder_times(b, start, m->c.end_ns > start ? m->c.end_ns - start + 1 : 0);
    int rc = lc_query_merge_pprof(m->c.reader, &m->query, b, st);
    if (rc == 0) {
        rc = lc_pprof_builder_encode(b, false, out);
        if (rc)
            qry_fail(st, rc, "encoding the merged profile");
    }
    lc_pprof_builder_free(b);
    return rc ? -1 : 0;
}

/* ------------------------------------------------- the back-end functions */

/* The fields every merge request has, under the same names. */
#define MERGE_REQ_COMMON(r)                                                                        \
    .profile_type = (r)->profile_typeid, .label_selector = (r)->label_selector,                    \
    .start = (r)->start, .end = (r)->end

/* The merge fields of any of the three merge requests (told apart by
 * in->descriptor); SelectMergeStacktraces may carry every selector. */
static merge_req_t merge_req_of(const ProtobufCMessage *in)
{
    if (in->descriptor == &querier__v1__select_merge_span_profile_request__descriptor) {
        const Querier__V1__SelectMergeSpanProfileRequest *r = (const void *)in;
        return (merge_req_t){MERGE_REQ_COMMON(r), .span_selector = r->span_selector,
                             .n_span_selector = r->n_span_selector};
    }
    if (in->descriptor == &querier__v1__select_merge_profile_request__descriptor) {
        const Querier__V1__SelectMergeProfileRequest *r = (const void *)in;
        return (merge_req_t){MERGE_REQ_COMMON(r), .stack_trace_selector = r->stack_trace_selector,
                             .profile_ids = r->profile_id_selector,
                             .n_profile_ids = r->n_profile_id_selector};
    }
    const Querier__V1__SelectMergeStacktracesRequest *r = (const void *)in;
    return (merge_req_t){MERGE_REQ_COMMON(r),
                         .stack_trace_selector = r->stack_trace_selector,
                         .profile_ids = r->profile_id_selector,
                         .n_profile_ids = r->n_profile_id_selector,
                         .span_selector = r->span_selector,
                         .n_span_selector = r->n_span_selector};
}

int qry_store_merge_tree(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                         lc_ftree_t **out, lc_status_t *st)
{
    merge_req_t mr = merge_req_of(in);
    merge_call_t m;
    if (merge_begin(&m, qry_of(fe), req, &mr, true, st))
        return -1;
    int rc = merge_tree(&m, out, st);
    merge_end(&m);
    return rc;
}

int qry_store_merge_pprof(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          lc_buf_t *out, lc_status_t *st)
{
    merge_req_t mr = merge_req_of(in);
    merge_call_t m;
    if (merge_begin(&m, qry_of(fe), req, &mr, false, st))
        return -1;
    int rc = merged_pprof(&m, mr.profile_type, req->arena, out, st);
    merge_end(&m);
    return rc;
}

int qry_store_merge_parts(qry_front_t *fe, lc_http_req_t *req, const ProtobufCMessage *in,
                          const qry_merge_sink_t *sink, lc_status_t *st)
{
    merge_req_t mr = merge_req_of(in);
    merge_call_t m;
    if (merge_begin(&m, qry_of(fe), req, &mr, false, st))
        return -1;
    int rc = lc_query_merge_nodes(m.c.reader, &m.query, sink->nodes, sink->data, st);
    merge_end(&m);
    return rc;
}
