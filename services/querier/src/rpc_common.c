/*
 * rpc_common.c — what the store back end does first for every RPC: resolve
 * tenants (lc/tenant.h), validate the ms time range (the front end's §5.9
 * rules, qry_front_range in shared.c) and convert it, parse selectors, and open one store
 * snapshot for the range; plus the series walk behind the
 * listing RPCs and a de-duplicating string set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lc/members.h"
#include "lc/tenant.h"
#include "querier_int.h"

#define QRY_MAX_SELECTORS 256 /* matchers entries per request */

static int call_begin(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms, int64_t end_ms,
                      qry_range_rules_t rules, int64_t back_ms, lc_read_need_t need,
                      lc_status_t *st);

int qry_call_begin_range(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                         int64_t end_ms, qry_range_rules_t rules, lc_status_t *st)
{
    return call_begin(c, q, req, start_ms, end_ms, rules, 0, LC_READ_BLOCKS, st);
}

int qry_call_begin_need(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                        int64_t end_ms, qry_range_rules_t rules, int64_t back_ms,
                        lc_read_need_t need, lc_status_t *st)
{
    return call_begin(c, q, req, start_ms, end_ms, rules, back_ms, need, st);
}

int qry_call_begin_back(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms,
                        int64_t end_ms, qry_range_rules_t rules, int64_t back_ms, lc_status_t *st)
{
    return call_begin(c, q, req, start_ms, end_ms, rules, back_ms, LC_READ_BLOCKS, st);
}

/* The shard API's QRY_READ_FROM_HEADER, or INT64_MIN (every partition). */
static int read_from(const qry_t *q, lc_http_req_t *req, int64_t *from_ns, lc_status_t *st)
{
    *from_ns = INT64_MIN;
    const char *v =
        q->front.opts.read_from_header ? lc_http_header(req, QRY_READ_FROM_HEADER) : NULL;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long ns = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s is not a time in ns: \"%.40s\"",
                             QRY_READ_FROM_HEADER, v);
    *from_ns = ns;
    return 0;
}

static int call_begin(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms, int64_t end_ms,
                      qry_range_rules_t rules, int64_t back_ms, lc_read_need_t need,
                      lc_status_t *st)
{
    *c = (qry_call_t){.q = q, .req = req, .st = st};
    if (lc_tenants_read(req, q->front.opts.multitenancy, &c->tenants, &c->n_tenants, st))
        return -1;
    if (qry_front_range(&q->front, &start_ms, end_ms, rules, &c->empty, st))
        return -1;
    c->start_ms = start_ms;
    c->end_ms = end_ms;
    qry_range_ns(start_ms, end_ms, &c->start_ns, &c->end_ns);
    if (c->empty)
        return 0; /* no reader: the engine reads a NULL reader as no blocks */
    int64_t read_start_ns = c->start_ns;
    if (back_ms > 0) /* saturating: a step may be as long as int64 ms */
        read_start_ns =
            back_ms > INT64_MAX / 1000000 || read_start_ns < INT64_MIN + back_ms * 1000000
                ? INT64_MIN
                : read_start_ns - back_ms * 1000000;
    lc_read_scope_t scope = {.need = need};
    if (read_from(q, req, &scope.from_ns, st))
        return -1;
    if (q->front.opts.read_bucket_header)
        scope.bucket = lc_http_header(req, LC_MARKS_HEADER);
    int rc = lc_store_read_begin_all(q->store, read_start_ns, c->end_ns, &scope, &c->reader);
    if (rc) {
        c->reader = NULL;
        return qry_fail(st, rc, "opening the store");
    }
    /* frames stored without lines get names from the tenants' debug files */
    lc_store_reader_symbolize(c->reader, c->tenants, c->n_tenants);
    return 0;
}

int qry_call_begin(qry_call_t *c, qry_t *q, lc_http_req_t *req, int64_t start_ms, int64_t end_ms,
                   lc_status_t *st)
{
    return qry_call_begin_range(c, q, req, start_ms, end_ms, QRY_RANGE_OPEN, st);
}

void qry_call_end(qry_call_t *c)
{
    if (c->reader)
        lc_store_read_end(c->reader);
    c->reader = NULL;
}

/* -------------------------------------------------------------- selectors */

bool qry_profile_type_split(lc_arena_t *a, const char *id, char *parts[5])
{
    const char *p = id;
    for (int i = 0; i < 5; i++) {
        const char *colon = strchr(p, ':');
        if (i < 4 && !colon)
            return false;
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        parts[i] = lc_arena_strndup(a, p, len);
        if (!parts[i])
            return false;
        p = colon ? colon + 1 : p + len;
        /* A sixth part (legacy ":delta") is allowed and ignored; a seventh is not. */
        if (i == 4 && colon && strchr(p, ':'))
            return false;
    }
    return true;
}

/* The first five parts of a profile type ID (a sixth is dropped), or -1. */
static int profile_type_prefix(const char *id, size_t *len)
{
    size_t colons = 0, i = 0;
    for (; id[i] && colons < 5; i++)
        colons += id[i] == ':';
    if (colons == 5)
        i--; /* back onto the fifth colon */
    if (colons < 4 || (colons == 5 && strchr(id + i + 1, ':')))
        return -1;
    *len = i;
    return 0;
}

int qry_selector(const char *label_selector, const char *profile_type, lc_selector_t *out,
                 lc_status_t *st)
{
    const char *s = label_selector ? label_selector : "";
    memset(out, 0, sizeof(*out));
    if (lc_selector_parse(s, strlen(s), out, st)) {
        st->code = LC_CODE_INVALID_ARGUMENT;
        return -1;
    }
    if (!profile_type)
        return 0;
    size_t len;
    char id[1024];
    if (profile_type_prefix(profile_type, &len) || len >= sizeof(id)) {
        lc_selector_fini(out);
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid profile type ID \"%.200s\": want "
                             "name:sample_type:sample_unit:period_type:period_unit",
                             profile_type);
    }
    memcpy(id, profile_type, len);
    id[len] = '\0';
    if (lc_selector_add(out, "__profile_type__", LC_MATCH_EQ, id, st)) {
        lc_selector_fini(out);
        return -1;
    }
    return 0;
}

int qry_stack_selector(const Types__V1__StackTraceSelector *sts, lc_arena_t *a, lc_query_t *q,
                       lc_status_t *st)
{
    if (!sts)
        return 0;
    if (sts->go_pgo) {
        q->pgo = (lc_query_pgo_t){.enabled = true,
                                  .keep_locations = sts->go_pgo->keep_locations,
                                  .aggregate_callees = sts->go_pgo->aggregate_callees};
        return 0;
    }
    if (sts->n_call_site > LC_QUERY_MAX_CALL_SITE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "stack_trace_selector.call_site has %zu frames; at most %u",
                             sts->n_call_site, (unsigned)LC_QUERY_MAX_CALL_SITE);
    const char **names = lc_arena_calloc(a, sts->n_call_site + 1, sizeof(*names));
    if (!names)
        return qry_fail_arena(st);
    for (size_t i = 0; i < sts->n_call_site; i++) {
        const Types__V1__Location *loc = sts->call_site[i];
        names[i] = loc && loc->name ? loc->name : "";
    }
    q->call_site = names;
    q->n_call_site = sts->n_call_site;
    return 0;
}

void qry_matchers_free(lc_selector_t *sels, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_selector_fini(&sels[i]);
    lc_free(sels);
}

int qry_matchers(char **matchers, size_t n_matchers, lc_selector_t **out, size_t *n,
                 lc_status_t *st)
{
    *out = NULL;
    *n = 0;
    if (n_matchers > QRY_MAX_SELECTORS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "more than %d matchers",
                             QRY_MAX_SELECTORS);
    lc_selector_t *sels = lc_xcalloc(n_matchers + 1, sizeof(*sels));
    for (size_t i = 0; i < n_matchers; i++) {
        if (qry_selector(matchers[i], NULL, &sels[i], st)) {
            qry_matchers_free(sels, i);
            return -1;
        }
        if (sels[i].n == 0) { /* "{}" matches everything: the union is everything */
            qry_matchers_free(sels, i + 1);
            return 0;
        }
    }
    if (n_matchers == 0) {
        lc_free(sels);
        return 0;
    }
    *out = sels;
    *n = n_matchers;
    return 0;
}

/* ------------------------------------------------------------ series walk */

typedef struct walk_s {
    qry_call_t *c;
    bool whole_block; /* every profile of the block is in range */
    qry_series_fn fn;
    void *data;
} walk_t;

static int walk_stop_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(p);
    LC_UNUSED(data);
    return 1;
}

static int walk_series_cb(lc_block_t *b, uint32_t series_id, const char *tenant,
                          const lc_labels_t *labels, void *data)
{
    LC_UNUSED(tenant);
    walk_t *w = data;
    if (!w->whole_block) {
        /* A series exists in a block only with profiles, but maybe not in range. */
        int rc = lc_block_profiles(b, series_id, w->c->start_ns, w->c->end_ns, walk_stop_cb, NULL);
        if (rc != 1)
            return rc;
    }
    return w->fn(labels, w->data);
}

static int walk_block(walk_t *w, lc_block_t *b, const lc_selector_t *sels, size_t n_sels)
{
    lc_block_info_t info;
    int rc = lc_block_info(b, &info);
    if (rc || info.profiles == 0)
        return rc;
    w->whole_block = info.min_time_ns >= w->c->start_ns && info.max_time_ns <= w->c->end_ns;
    qry_call_t *c = w->c;
    if (n_sels == 0)
        return lc_block_series(b, c->tenants, c->n_tenants, NULL, walk_series_cb, w);
    for (size_t i = 0; i < n_sels && rc == 0; i++)
        rc = lc_block_series(b, c->tenants, c->n_tenants, &sels[i], walk_series_cb, w);
    return rc;
}

int qry_walk_series(qry_call_t *c, const lc_selector_t *sels, size_t n_sels, qry_series_fn fn,
                    void *data)
{
    walk_t w = {.c = c, .fn = fn, .data = data};
    int rc = 0;
    for (size_t i = 0; rc == 0 && c->reader && i < lc_store_reader_count(c->reader); i++)
        rc = walk_block(&w, lc_store_reader_block(c->reader, i), sels, n_sels);
    return rc;
}

/* -------------------------------------------------------------------- set */

void qry_set_init(qry_set_t *s, lc_arena_t *arena)
{
    *s = (qry_set_t){.arena = arena, .mask = 63};
    s->slots = lc_xcalloc(s->mask + 1, sizeof(uint32_t));
}

void qry_set_fini(qry_set_t *s)
{
    lc_free(s->v);
    lc_free(s->len);
    lc_free(s->slots);
}

static void set_rehash(qry_set_t *s)
{
    size_t n = (s->mask + 1) * 2;
    lc_free(s->slots);
    s->slots = lc_xcalloc(n, sizeof(uint32_t));
    s->mask = n - 1;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = lc_hash64(s->v[k], s->len[k], 0) & s->mask;
        while (s->slots[i])
            i = (i + 1) & s->mask;
        s->slots[i] = (uint32_t)k + 1;
    }
}

int qry_set_add(qry_set_t *s, const void *p, size_t len, bool *added)
{
    size_t i = lc_hash64(p, len, 0) & s->mask;
    for (; s->slots[i]; i = (i + 1) & s->mask) {
        size_t k = s->slots[i] - 1;
        if (s->len[k] == len && memcmp(s->v[k], p, len) == 0) {
            if (added)
                *added = false;
            return 0;
        }
    }
    char *copy = lc_arena_strndup(s->arena, p, len);
    if (!copy || s->n >= UINT32_MAX - 1)
        return LC_ETOOBIG;
    size_t cap = s->cap;
    s->v = lc_xgrow(s->v, &s->cap, s->n + 1, sizeof(*s->v));
    s->len = lc_xgrow(s->len, &cap, s->n + 1, sizeof(*s->len));
    s->v[s->n] = copy;
    s->len[s->n] = len;
    s->slots[i] = (uint32_t)++s->n;
    if (s->n * 2 > s->mask + 1)
        set_rehash(s);
    if (added)
        *added = true;
    return 0;
}

static int bytes_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void qry_set_sort(qry_set_t *s)
{
    if (s->n == 0)
        return;
    qsort(s->v, s->n, sizeof(*s->v), bytes_cmp);
    for (size_t k = 0; k < s->n; k++)
        s->len[k] = strlen(s->v[k]);
    set_rehash(s);
}

/* -------------------------------------------------------------- responses */

Types__V1__LabelPair **qry_label_pairs(lc_arena_t *a, const lc_labels_t *ls)
{
    Types__V1__LabelPair **v = lc_arena_calloc(a, ls->n + 1, sizeof(*v));
    Types__V1__LabelPair *pairs = lc_arena_calloc(a, ls->n + 1, sizeof(*pairs));
    if (!v || !pairs)
        return NULL;
    for (size_t i = 0; i < ls->n; i++) {
        pairs[i] = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
        pairs[i].name = lc_arena_strdup(a, ls->v[i].name);
        pairs[i].value = lc_arena_strdup(a, ls->v[i].value);
        if (!pairs[i].name || !pairs[i].value)
            return NULL;
        v[i] = &pairs[i];
    }
    return v;
}
