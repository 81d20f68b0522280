/*
 * legacy_http.c — the legacy query HTTP API (pyroscope-api.md §7): GET
 * /pyroscope/render (flamebearer JSON with timeline and groups, or DOT),
 * /pyroscope/render-diff and /pyroscope/label-values.
 *
 * As in Pyroscope, each endpoint is a thin client of the querier's own RPCs
 * (called in-process on the same request, so tenancy, the §5.9 time-range
 * rules and max_nodes validation are the RPCs'). Which RPCs is a qry_rpcs_t:
 * the local store's in `ember`, the fan-out's in `ember-querier`, so both
 * processes serve these endpoints with the same code. Each parses the parameters,
 * calls SelectMergeStacktraces + SelectSeries, Diff, SelectMergeProfile or
 * ProfileTypes, and shapes the answer (legacy_json.c, legacy_dot.c). Errors
 * are Connect error JSON with the code's HTTP status (§7.5); parameter errors
 * are invalid_argument (400).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/attime.h"
#include "lc/gz.h"
#include "querier_int.h"

#define LEGACY_MAX_GROUP_BY 64
#define DOT_SOURCE_MAX_NODES 512 /* Pyroscope's pprof size for DOT ... */
#define DOT_DEFAULT_NODES 100    /* ... and its node count */

/* One `<profile type>{selector}` query with its range. */
typedef struct legacy_query_s {
    char *profile_type;   /* 5 parts (a 6th dropped) */
    char *label_selector; /* "{...}" without __name__ */
    char *parts[5];       /* name, sample type, sample unit, period type, period unit */
    int64_t start_ms, end_ms;
} legacy_query_t;

typedef struct legacy_fields_s {
    const char *query, *from, *until;
} legacy_fields_t;

/* --------------------------------------------------------------- replies */

static void legacy_error(lc_http_req_t *req, const lc_status_t *st)
{
    lc_connect_error(req, st);
}

/* Sends body (gzip when accepted, as Pyroscope's HTTP middleware does). */
static void legacy_reply(lc_http_req_t *req, const char *content_type, lc_buf_t *body)
{
    bool gzip = lc_connect_accepts_gzip(lc_http_header(req, "accept-encoding")) && body->len;
    lc_buf_t zipped;
    lc_buf_init(&zipped, LC_BUF_UNLIMITED);
    if (gzip && lc_gzip(body->data, body->len, LC_GZIP_REPLY_LEVEL, &zipped) != 0)
        gzip = false;
    lc_buf_t *out = gzip ? &zipped : body;
    lc_http_reply(req, 200, content_type, out->data ? (const void *)out->data : "", out->len);
    if (gzip)
        lc_http_set_header(req, "Content-Encoding", "gzip");
    lc_buf_fini(&zipped);
}

/* ----------------------------------------------------------- parameters */

/* Go's strconv.Atoi: optional sign, decimal digits, int64 range. */
static bool go_atoi(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    bool neg = *s == '-';
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return false;
    __int128 v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
        if (v > (__int128)INT64_MAX + 1)
            return false;
    }
    v = neg ? -v : v;
    if (v > INT64_MAX)
        return false;
    *out = (int64_t)v;
    return true;
}

/* maxNodes wins over max-nodes; 0 or unparseable = the default (0). */
static int64_t legacy_max_nodes(lc_http_req_t *req)
{
    int64_t v, mn = 0;
    if (go_atoi(lc_http_query(req, "max-nodes"), &v) && v != 0)
        mn = v;
    if (go_atoi(lc_http_query(req, "maxNodes"), &v) && v != 0)
        mn = v;
    return mn;
}

/* A label name as a selector writes it: bare if it is a legacy identifier. */
static int put_label_name(lc_buf_t *b, const char *name)
{
    bool bare = *name && !(*name >= '0' && *name <= '9');
    for (const char *c = name; *c && bare; c++)
        bare = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
               *c == '_';
    if (bare)
        return lc_buf_puts(b, name);
    int rc = lc_buf_putc(b, '"');
    for (const char *c = name; *c && rc == 0; c++)
        rc = (*c == '"' || *c == '\\') ? lc_buf_printf(b, "\\%c", *c) : lc_buf_putc(b, *c);
    return rc ? rc : lc_buf_putc(b, '"');
}

/* A value quoted as Go's strconv.Quote would for the selector parser. */
static int put_quoted(lc_buf_t *b, const char *v)
{
    int rc = lc_buf_putc(b, '"');
    for (; *v && rc == 0; v++) {
        switch (*v) {
        case '"':
            rc = lc_buf_puts(b, "\\\"");
            break;
        case '\\':
            rc = lc_buf_puts(b, "\\\\");
            break;
        case '\n':
            rc = lc_buf_puts(b, "\\n");
            break;
        case '\r':
            rc = lc_buf_puts(b, "\\r");
            break;
        case '\t':
            rc = lc_buf_puts(b, "\\t");
            break;
        default:
            rc = lc_buf_putc(b, *v);
        }
    }
    return rc ? rc : lc_buf_putc(b, '"');
}

/* The matchers other than __name__ back as "{a="b",c=~"d"}" (Pyroscope's
 * convertMatchersToString), in the arena. */
static char *selector_without_name(const lc_selector_t *sel, lc_arena_t *a)
{
    static const char *const ops[] = {"=", "!=", "=~", "!~"};
    lc_buf_t b;
    lc_buf_init(&b, LC_SELECTOR_MAX_BYTES * 2);
    int rc = lc_buf_putc(&b, '{');
    bool first = true;
    for (size_t i = 0; i < sel->n && rc == 0; i++) {
        const lc_matcher_t *m = &sel->m[i];
        if (strcmp(m->name, "__name__") == 0)
            continue;
        rc = first ? 0 : lc_buf_putc(&b, ',');
        first = false;
        rc = rc ? rc : put_label_name(&b, m->name);
        rc = rc ? rc : lc_buf_puts(&b, ops[m->op]);
        rc = rc ? rc : put_quoted(&b, m->value);
    }
    rc = rc ? rc : lc_buf_putc(&b, '}');
    char *out = rc ? NULL : lc_arena_strndup(a, (const char *)b.data, b.len);
    lc_buf_fini(&b);
    return out;
}

/* The profile type from a `__name__` matcher ({__name__="type", ...}). */
static const char *name_matcher_value(const lc_selector_t *sel)
{
    for (size_t i = 0; i < sel->n; i++) {
        if (strcmp(sel->m[i].name, "__name__") == 0)
            return sel->m[i].value;
    }
    return NULL;
}

static int query_error(const char *field, const char *why, lc_status_t *st)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "failed to parse '%s': %s", field, why);
}

/* Splits `<type>{...}` (or `{__name__="<type>", ...}`, or a bare `<type>`)
 * into the profile type and the remaining selector. */
static int parse_query_text(const char *field, const char *text, lc_arena_t *a, legacy_query_t *q,
                            lc_status_t *st)
{
    const char *brace = strchr(text, '{');
    const char *full = brace ? text : lc_arena_sprintf(a, "%s{}", text); /* a bare metric name */
    if (!full)
        return qry_fail_arena(st);
    brace = strchr(full, '{');
    lc_selector_t sel;
    if (lc_selector_parse(brace, strlen(brace), &sel, st))
        return query_error(field, st->msg, st);
    size_t prefix = (size_t)(brace - full);
    while (prefix && strchr(" \t\r\n", full[prefix - 1]))
        prefix--;
    const char *named = name_matcher_value(&sel);
    q->profile_type = prefix  ? lc_arena_strndup(a, full, prefix)
                      : named ? lc_arena_strdup(a, named)
                              : NULL;
    q->label_selector = selector_without_name(&sel, a);
    lc_selector_fini(&sel);
    if (!q->label_selector)
        return qry_fail_arena(st);
    if (!q->profile_type)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "'%s' must contain a profile-type selection", field);
    if (!qry_profile_type_split(a, q->profile_type, q->parts))
        return query_error(field,
                           "the profile type must be <name>:<sample type>:<sample unit>:"
                           "<period type>:<period unit>",
                           st);
    q->profile_type = lc_arena_sprintf(a, "%s:%s:%s:%s:%s", q->parts[0], q->parts[1], q->parts[2],
                                       q->parts[3], q->parts[4]);
    return q->profile_type ? 0 : qry_fail_arena(st);
}

/* A query and its from/until (attime, §7.6; absent = now) in ms. */
static int parse_query(lc_http_req_t *req, const legacy_fields_t *f, legacy_query_t *q,
                       lc_status_t *st)
{
    memset(q, 0, sizeof(*q));
    const char *text = lc_http_query(req, f->query);
    if (!text || !*text)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "'%s' is required", f->query);
    if (parse_query_text(f->query, text, req->arena, q, st))
        return -1;
    int64_t now_ns = qry_now_ms() * 1000000;
    const char *from = lc_http_query(req, f->from), *until = lc_http_query(req, f->until);
    q->start_ms = lc_attime_parse(from ? from : "", now_ns) / 1000000;
    q->end_ms = lc_attime_parse(until ? until : "", now_ns) / 1000000;
    return 0;
}

static Querier__V1__SelectMergeStacktracesRequest stacktraces_request(const legacy_query_t *q,
                                                                      int64_t max_nodes)
{
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = q->profile_type;
    r.label_selector = q->label_selector;
    r.start = q->start_ms;
    r.end = q->end_ms;
    r.max_nodes = max_nodes;
    return r;
}

/* ----------------------------------------------------------------- render */

static void fill_flamegraph(qry_flamebearer_t *fb, const Querier__V1__FlameGraph *fg,
                            const legacy_query_t *q)
{
    fb->sample_type = q->parts[1];
    fb->sample_unit = q->parts[2];
    qry_flamebearer_set_graph(fb, fg);
}

/* The flame graph of the render (SelectMergeStacktraces, format flame graph). */
static int render_flamegraph(lc_http_req_t *req, const qry_rpcs_t *rpcs, const legacy_query_t *q,
                             qry_flamebearer_t *fb, lc_status_t *st)
{
    Querier__V1__SelectMergeStacktracesRequest r = stacktraces_request(q, legacy_max_nodes(req));
    qry_reply_t reply = {0};
    int rc = rpcs->select_merge_stacktraces(req, &r.base, &reply, st, rpcs->data);
    if (rc == 0) {
        const Querier__V1__SelectMergeStacktracesResponse *resp =
            (const Querier__V1__SelectMergeStacktracesResponse *)reply.msg;
        fill_flamegraph(fb, resp->flamegraph, q);
    }
    qry_reply_fini(&reply);
    return rc;
}

/* aggregation=sum|avg (anything else, or absent, is SUM). */
static int legacy_aggregation(lc_http_req_t *req)
{
    const char *a = lc_http_query(req, "aggregation");
    return a && strcmp(a, "avg") == 0
               ? TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE
               : TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM;
}

static const char *series_label(const Types__V1__Series *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++) {
        if (strcmp(s->labels[i]->name, name) == 0)
            return s->labels[i]->value;
    }
    return NULL;
}

/* groups[<value of the first groupBy label, or *>] = that series' timeline. */
static int render_groups(const Querier__V1__SelectSeriesResponse *resp, const char *group_by,
                         const legacy_query_t *q, int64_t step, lc_arena_t *a,
                         qry_flamebearer_t *fb)
{
    fb->has_groups = true;
    fb->groups = lc_arena_calloc(a, resp->n_series + 1, sizeof(*fb->groups));
    if (!fb->groups)
        return LC_ETOOBIG;
    for (size_t i = 0; i < resp->n_series; i++) {
        const char *v = series_label(resp->series[i], group_by);
        qry_group_t *g = &fb->groups[fb->n_groups++];
        g->key = v ? v : "*";
        g->order = i;
        int rc = qry_timeline_build(resp->series[i], q->start_ms, q->end_ms, step, a, &g->timeline);
        if (rc)
            return rc;
    }
    return 0;
}

/* The timeline (and groups) of the render: SelectSeries at CalcPointInterval. */
static int render_timeline(lc_http_req_t *req, const qry_rpcs_t *rpcs, const legacy_query_t *q,
                           qry_flamebearer_t *fb, qry_timeline_t *tl, lc_status_t *st)
{
    const char **group_by;
    size_t n_group_by = lc_http_query_all(req, "groupBy", &group_by);
    if (n_group_by > LEGACY_MAX_GROUP_BY)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "more than %d groupBy parameters",
                             LEGACY_MAX_GROUP_BY);
    double step = qry_calc_point_interval(q->start_ms, q->end_ms);
    Querier__V1__SelectSeriesRequest r = QUERIER__V1__SELECT_SERIES_REQUEST__INIT;
    r.profile_typeid = q->profile_type;
    r.label_selector = q->label_selector;
    r.start = q->start_ms;
    r.end = q->end_ms;
    r.step = step;
    r.group_by = (char **)group_by;
    r.n_group_by = n_group_by;
    r.aggregation = legacy_aggregation(req);
    ProtobufCMessage *out = NULL;
    if (rpcs->select_series(req, &r.base, &out, st, rpcs->data))
        return -1;
    const Querier__V1__SelectSeriesResponse *resp = (const Querier__V1__SelectSeriesResponse *)out;
    /* One series is the timeline; several (groupBy) leave it empty. */
    const Types__V1__Series *single = resp->n_series == 1 ? resp->series[0] : NULL;
    int rc = qry_timeline_build(single, q->start_ms, q->end_ms, (int64_t)step, req->arena, tl);
    fb->timeline = tl;
    if (rc == 0 && n_group_by)
        rc = render_groups(resp, group_by[0], q, (int64_t)step, req->arena, fb);
    return rc ? qry_fail(st, rc, "building the timeline") : 0;
}

static void send_flamebearer(lc_http_req_t *req, const qry_flamebearer_t *fb)
{
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED);
    lc_status_t st = {0};
    if (qry_flamebearer_json(fb, &body) != 0) {
        qry_fail(&st, LC_ETOOBIG, "encoding the flamebearer");
        legacy_error(req, &st);
    } else {
        legacy_reply(req, "application/json", &body);
    }
    lc_buf_fini(&body);
}

/* format=dot: the merged pprof (SelectMergeProfile) drawn as a call graph. */
static int render_dot(lc_http_req_t *req, const qry_rpcs_t *rpcs, const legacy_query_t *q,
                      lc_status_t *st)
{
    int64_t source_nodes = DOT_SOURCE_MAX_NODES, dot_nodes = DOT_DEFAULT_NODES;
    int64_t max_nodes = legacy_max_nodes(req);
    if (max_nodes > 0)
        dot_nodes = max_nodes;
    if (dot_nodes > source_nodes)
        source_nodes = dot_nodes;
    Querier__V1__SelectMergeProfileRequest r = QUERIER__V1__SELECT_MERGE_PROFILE_REQUEST__INIT;
    r.profile_typeid = q->profile_type;
    r.label_selector = q->label_selector;
    r.start = q->start_ms;
    r.end = q->end_ms;
    r.max_nodes = source_nodes;
    qry_reply_t reply = {0};
    int rc = rpcs->select_merge_profile(req, &r.base, &reply, st, rpcs->data);
    Google__V1__Profile *p = NULL;
    if (rc == 0) {
        ProtobufCAllocator alloc;
        lc_arena_pb_allocator(req->arena, &alloc);
        p = google__v1__profile__unpack(&alloc, reply.buf.len,
                                        reply.buf.data ? reply.buf.data : (const uint8_t *)"");
        rc = p ? 0 : qry_fail_arena(st);
    }
    qry_reply_fini(&reply);
    if (rc)
        return -1;
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED);
    rc = qry_pprof_to_dot(p, (size_t)dot_nodes, &body);
    if (rc == 0)
        legacy_reply(req, "text/plain; charset=utf-8", &body);
    lc_buf_fini(&body);
    return rc ? qry_fail(st, rc, "drawing the call graph") : 0;
}

static lc_http_result_t render_work(lc_http_req_t *req, void *data)
{
    static const legacy_fields_t fields = {"query", "from", "until"};
    const qry_rpcs_t *rpcs = data;
    lc_status_t st = {0};
    legacy_query_t q;
    qry_flamebearer_t fb = {0};
    qry_timeline_t tl;
    const char *format = lc_http_query(req, "format");
    int rc = qry_tenant_first(req, rpcs->multitenancy, &st);
    if (rc == 0)
        rc = parse_query(req, &fields, &q, &st);
    if (rc == 0 && format && strcmp(format, "dot") == 0)
        rc = render_dot(req, rpcs, &q, &st);
    else if (rc == 0 && (rc = render_flamegraph(req, rpcs, &q, &fb, &st)) == 0 &&
             (rc = render_timeline(req, rpcs, &q, &fb, &tl, &st)) == 0)
        send_flamebearer(req, &fb);
    if (rc)
        legacy_error(req, &st);
    return LC_HTTP_DONE;
}

/* ------------------------------------------------------------ render-diff */

static int diff_flamebearer(lc_http_req_t *req, const qry_rpcs_t *rpcs, const legacy_query_t *left,
                            const legacy_query_t *right, qry_flamebearer_t *fb, lc_status_t *st)
{
    int64_t max_nodes = legacy_max_nodes(req);
    Querier__V1__SelectMergeStacktracesRequest l = stacktraces_request(left, max_nodes);
    Querier__V1__SelectMergeStacktracesRequest r = stacktraces_request(right, max_nodes);
    Querier__V1__DiffRequest d = QUERIER__V1__DIFF_REQUEST__INIT;
    d.left = &l;
    d.right = &r;
    ProtobufCMessage *out = NULL;
    if (rpcs->diff(req, &d.base, &out, st, rpcs->data))
        return -1;
    const Querier__V1__FlameGraphDiff *fg = ((const Querier__V1__DiffResponse *)out)->flamegraph;
    fb->sample_type = left->parts[1]; /* metadata from the left type, as Pyroscope */
    fb->sample_unit = left->parts[2];
    qry_flamebearer_set_diff(fb, fg);
    return 0;
}

static lc_http_result_t render_diff_work(lc_http_req_t *req, void *data)
{
    static const legacy_fields_t left_fields = {"leftQuery", "leftFrom", "leftUntil"};
    static const legacy_fields_t right_fields = {"rightQuery", "rightFrom", "rightUntil"};
    const qry_rpcs_t *rpcs = data;
    lc_status_t st = {0};
    legacy_query_t left, right;
    qry_flamebearer_t fb = {0};
    int rc = qry_tenant_first(req, rpcs->multitenancy, &st);
    if (rc == 0)
        rc = parse_query(req, &left_fields, &left, &st);
    if (rc == 0)
        rc = parse_query(req, &right_fields, &right, &st);
    if (rc == 0 && strcmp(left.profile_type, right.profile_type) != 0)
        rc = lc_status_set(&st, LC_CODE_INVALID_ARGUMENT,
                           "profile types must match: %.200s vs %.200s", left.profile_type,
                           right.profile_type);
    if (rc == 0)
        rc = diff_flamebearer(req, rpcs, &left, &right, &fb, &st);
    if (rc == 0)
        send_flamebearer(req, &fb);
    else
        legacy_error(req, &st);
    return LC_HTTP_DONE;
}

/* ----------------------------------------------------------- label-values */

/* label=__name__: every profile type ID (ProfileTypes). */
static int profile_type_ids(lc_http_req_t *req, const qry_rpcs_t *rpcs, char ***ids, size_t *n,
                            lc_status_t *st)
{
    Querier__V1__ProfileTypesRequest r = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    ProtobufCMessage *out = NULL;
    if (rpcs->profile_types(req, &r.base, &out, st, rpcs->data))
        return -1;
    const Querier__V1__ProfileTypesResponse *resp = (const Querier__V1__ProfileTypesResponse *)out;
    *ids = lc_arena_calloc(req->arena, resp->n_profile_types + 1, sizeof(**ids));
    if (!*ids)
        return qry_fail_arena(st);
    for (size_t i = 0; i < resp->n_profile_types; i++)
        (*ids)[i] = resp->profile_types[i]->id;
    *n = resp->n_profile_types;
    return 0;
}

/* Any other label: Pyroscope sends an empty LabelValuesRequest (the label is
 * not forwarded), which LabelValues rejects; the same happens here. */
static int other_label_values(lc_http_req_t *req, const qry_rpcs_t *rpcs, char ***values, size_t *n,
                              lc_status_t *st)
{
    Types__V1__LabelValuesRequest r = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    ProtobufCMessage *out = NULL;
    if (rpcs->label_values(req, &r.base, &out, st, rpcs->data))
        return -1;
    const Types__V1__LabelValuesResponse *resp = (const Types__V1__LabelValuesResponse *)out;
    *values = resp->names;
    *n = resp->n_names;
    return 0;
}

static lc_http_result_t label_values_work(lc_http_req_t *req, void *data)
{
    lc_status_t st = {0};
    const char *label = lc_http_query(req, "label");
    char **values = NULL;
    size_t n = 0;
    int rc = qry_tenant_first(req, ((const qry_rpcs_t *)data)->multitenancy, &st);
    if (rc == 0 && (!label || !*label))
        rc = lc_status_set(&st, LC_CODE_INVALID_ARGUMENT, "label parameter is required");
    else if (rc == 0 && strcmp(label, "__name__") == 0)
        rc = profile_type_ids(req, data, &values, &n, &st);
    else if (rc == 0)
        rc = other_label_values(req, data, &values, &n, &st);
    lc_buf_t body;
    lc_buf_init(&body, LC_BUF_UNLIMITED);
    if (rc == 0 && qry_string_array_json(values, n, &body) != 0)
        rc = qry_fail(&st, LC_ETOOBIG, "encoding the label values");
    if (rc == 0)
        legacy_reply(req, "application/json", &body);
    else
        legacy_error(req, &st);
    lc_buf_fini(&body);
    return LC_HTTP_DONE;
}

/* ----------------------------------------------------------- registration */

int qry_register_gets(lc_httpd_t *srv, const qry_get_route_t *routes, size_t n, bool offload)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        lc_http_route_t route = {
            .path = routes[i].path,
            .methods = "GET",
            .scope = LC_HTTP_SCOPE_READ,
            .work = routes[i].work,
            .offload = offload,
            .data = routes[i].data,
        };
        rc = lc_httpd_route(srv, &route);
    }
    return rc;
}

int qry_legacy_register(const qry_rpcs_t *rpcs, lc_httpd_t *srv)
{
    const qry_get_route_t routes[] = {
        {"/pyroscope/render", render_work, (void *)rpcs},
        {"/pyroscope/render-diff", render_diff_work, (void *)rpcs},
        {"/pyroscope/label-values", label_values_work, (void *)rpcs},
    };
    /* merging and LMDB reads: the thread pool */
    return qry_register_gets(srv, routes, LC_ARRAY_LEN(routes), true);
}
