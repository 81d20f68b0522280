/*
 * ingest_http.c — POST /ingest and /pyroscope/ingest (pyroscope-api.md §2).
 *
 * `work` runs on the thread pool: tenant, query parameters, format selection
 * (§2.4), then one handler per format from a table, each turning the body
 * into validated pprof (§2.5-§2.10) wrapped for publishing; adding a format
 * is one table entry (JFR's converter is jfr.c / jfr_pprof.c). Status codes follow §2.11: a bad
 * `name` or unknown profile type is 400, a profile that does not parse or validate 422 (code
 * "unknown"), one over a size limit 413. Speedscope's unknown profile type is
 * 422, as in Pyroscope (its converter does not wrap that error).
 */
#include <string.h>

#include "lc/attime.h"
#include "lc/clock.h"
#include "lc/jfr.h"
#include "lc/tenant.h"
#include "receive_int.h"

#define DEFAULT_SAMPLE_RATE 100
#define NS_PER_YEAR_1970 (365LL * 86400 * 1000000000LL)

typedef struct ingest_ctx_s {
    ing_t *ing;
    lc_http_req_t *req;
    lc_arena_t *arena;
    ing_job_t *job;
    const char *tenant;
    ing_labelset_t set;
    ing_format_t format;
    int64_t now_ns, from_ns;
    uint32_t sample_rate;
    const char *spy;
    lc_status_t st;
    const char *reason; /* ember_ingest_rejected_total{reason} on failure */
} ingest_ctx_t;

typedef int (*ingest_format_fn)(ingest_ctx_t *c);

/* ---------------------------------------------------------------- failures */

static int fail(ingest_ctx_t *c, const char *reason)
{
    c->reason = reason;
    return -1;
}

/* Re-labels the status set by a lower layer as 422 / "unknown" (§2.11). */
static int fail_422(ingest_ctx_t *c, const char *reason)
{
    c->st.http_status = 422;
    c->st.code = LC_CODE_UNKNOWN;
    return fail(c, reason);
}

static int fail_decode(ingest_ctx_t *c)
{
    if (strncmp(c->st.msg, "profile too large", 17) != 0)
        return fail_422(c, "invalid_profile");
    c->st.http_status = 413;
    c->st.code = LC_CODE_INVALID_ARGUMENT;
    return fail(c, "too_large");
}

/* ---------------------------------------------------------------- parameters */

/* Go's Atoi then uint32: non-numeric, negative or out of range -> 100. */
static uint32_t parse_sample_rate(const char *s)
{
    if (!s || !*s)
        return DEFAULT_SAMPLE_RATE;
    uint64_t v = 0;
    for (const char *c = *s == '+' ? s + 1 : s; *c; c++) {
        if (*c < '0' || *c > '9' || (v = v * 10 + (uint64_t)(*c - '0')) > UINT32_MAX)
            return DEFAULT_SAMPLE_RATE;
    }
    return *s == '+' && !s[1] ? DEFAULT_SAMPLE_RATE : (uint32_t)v;
}

/* A "%00" decodes to a NUL, which would end the C string the parameter
 * becomes: `name=app{k=a%00b}` would lose k. No parameter may hold one. */
static bool query_has_nul(const char *q)
{
    for (const char *p = q ? strchr(q, '%') : NULL; p; p = strchr(p + 1, '%'))
        if (p[1] == '0' && p[2] == '0')
            return true;
    return false;
}

static int ingest_params(ingest_ctx_t *c)
{
    if (query_has_nul(c->req->query)) {
        lc_status_set(&c->st, LC_CODE_INVALID_ARGUMENT,
                      "a NUL byte (%%00) is not allowed in the query string");
        return fail(c, "invalid_name");
    }
    if (ing_labelset_parse(lc_http_query(c->req, "name"), c->arena, &c->set, &c->st) < 0)
        return fail(c, "invalid_name");
    const char *from = lc_http_query(c->req, "from");
    c->from_ns = from && *from ? lc_attime_parse(from, c->now_ns) : c->now_ns;
    c->sample_rate = parse_sample_rate(lc_http_query(c->req, "sampleRate"));
    const char *spy = lc_http_query(c->req, "spyName");
    c->spy = spy && *spy ? spy : "unknown";
    c->format =
        ing_format_select(lc_http_query(c->req, "format"), lc_http_header(c->req, "content-type"));
    return 0;
}

/* ---------------------------------------------------------------- publishing */

static lc_pprof_limits_t limits(const ingest_ctx_t *c)
{
    return c->ing->opts.limits;
}

/* p is validated and its labels are final; checks the window and what the
 * writer would refuse (lc_store_check_validated), and queues p for
 * publishing. For a writer in this process, p itself and the check's index
 * (issue 32: the writer neither decodes nor checks it again, and the message
 * carries no pprof bytes); over Redis as pb, the bytes it was decoded from,
 * when the receiver left it as it was (encoding it again cost ~8% of ingest's
 * CPU), else encoded, and p in the handover when the writer of this process
 * may take it. */
static int ingest_publish(ingest_ctx_t *c, lc_pprof_t *p, lc_labels_t *ls,
                          const ing_stconfig_t *cfg, const uint8_t *pb, size_t pb_len,
                          lc_arena_t **own)
{
    if (ing_check_window(c->ing, p->time_nanos, c->now_ns, &c->st) < 0)
        return fail(c, "out_of_window");
    lc_pprof_index_t *ix;
    if (lc_store_check_validated(p, c->tenant, p->time_nanos, *own ? *own : c->arena, &ix, &c->st) <
        0)
        return fail_422(c, "invalid_profile"); /* the writer would refuse it */
    if (ing_job_takes_decoded(c->job))         /* pb_len: the profile's decoded size */
        return ing_job_add_decoded(c->job, c->tenant, ls, p, ix, pb_len, cfg, NULL, &c->st) == 0
                   ? 0
                   : fail(c, "too_large");
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    int rc = pb ? 0 : lc_pprof_encode(p, false, &out);
    if (rc != 0)
        lc_status_set(&c->st, LC_CODE_INTERNAL, "cannot encode the profile: %s", lc_strerror(rc));
    else if ((rc = ing_job_add(c->job, c->tenant, ls, pb ? pb : out.data, pb ? pb_len : out.len,
                               p->time_nanos, cfg, NULL, p->n_sample, &c->st)) == 0)
        ing_job_attach_decoded(c->job, p, ix, own);
    lc_buf_fini(&out);
    return rc == 0 ? 0 : fail(c, "too_large");
}

static int ingest_labels(ingest_ctx_t *c, lc_labels_t *ls, const ing_labelset_t *set,
                         const char *metric, const char *service, bool app_name_label)
{
    ing_label_limits_t lim = ing_label_limits(c->ing);
    ing_ingest_labels(ls, metric, c->spy, service, set, app_name_label);
    return ing_labels_finish(ls, &lim, &c->st);
}

/* ---------------------------------------------------------------- pprof */

/* ingest_pprof's work: the decoded profile (not its bytes) and what it
 * grows into go to *own when there is one (ing_job_profile_arena). */
static int ingest_pprof_into(ingest_ctx_t *c, const uint8_t *data, size_t len,
                             const ing_stconfig_t *cfg, lc_arena_t **own)
{
    lc_arena_t *arena = *own ? *own : c->arena;
    lc_pprof_limits_t lim = limits(c);
    lc_pprof_t *p;
    const uint8_t *pb;
    size_t pb_len;
    bool changed;
    lc_pprof_seen_t seen;
    if (lc_pprof_decode_apart(data, len, &lim, c->arena, arena, &p, &pb, &pb_len, &seen, &c->st) <
        0)
        return fail_decode(c);
    if (lc_pprof_validate_seen(p, &lim, &seen, &changed, &c->st) < 0)
        return fail_422(c, "invalid_profile");
    /* Old pyspy/rbspy/pyroscope-rs sent µs or ms here: anything in 1970 is `from`. */
    if (p->time_nanos >= 0 && p->time_nanos < NS_PER_YEAR_1970) {
        p->time_nanos = c->from_ns;
        changed = true;
    }
    size_t strings = p->n_string_table;
    if (ing_spy_fix_names(p, c->spy, arena) < 0) {
        lc_status_set_http(&c->st, 413, LC_CODE_INVALID_ARGUMENT, "profile too large");
        return fail(c, "too_large");
    }
    changed |= p->n_string_table != strings; /* spy.c renamed functions */
    const ing_stconfig_t *effective = cfg ? cfg : ing_stconfig_builtin();
    if (!changed) /* over Redis a gzip body goes as it came */
        pb = ing_job_pprof_bytes(c->ing, data, len, pb, pb_len, &pb_len);
    lc_labels_t ls;
    int rc = ingest_labels(c, &ls, &c->set, ing_metric_name(p, effective), c->set.app_name, false);
    rc = rc < 0 ? fail_422(c, "invalid_labels")
                : ingest_publish(c, p, &ls, cfg, changed ? NULL : pb, pb_len, own); /* the builtin
                                                            config is implied: not carried */
    lc_labels_fini(&ls);
    return rc;
}

/* A pprof body (raw or the `profile` part): decode, validate, fix, label. */
static int ingest_pprof(ingest_ctx_t *c, const uint8_t *data, size_t len, const ing_stconfig_t *cfg)
{
    if (len == 0)
        return 0; /* an empty push: nothing stored, 200 */
    lc_arena_t *own = ing_job_profile_arena(c->ing);
    int rc = ingest_pprof_into(c, data, len, cfg, &own);
    lc_arena_free(own); /* unless the handover took it */
    return rc;
}

static int form_config(ingest_ctx_t *c, const ing_form_t *form, ing_stconfig_t **cfg)
{
    *cfg = NULL;
    const ing_part_t *part = ing_form_file(form, "sample_type_config");
    if (!part)
        return 0;
    ing_stconfig_t *parsed = lc_arena_calloc(c->arena, 1, sizeof(*parsed));
    bool is_null;
    if (!parsed)
        return lc_status_set(&c->st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    if (ing_stconfig_parse(part->data, part->len, c->arena, parsed, &is_null, &c->st) < 0)
        return -1;
    *cfg = is_null ? NULL : parsed; /* a JSON null means "no config" */
    return 0;
}

static int ingest_form(ingest_ctx_t *c, const char *boundary)
{
    ing_form_t form;
    if (ing_multipart_parse(c->req->body, c->req->body_len, boundary, c->arena, &form, &c->st) < 0)
        return fail_422(c, "invalid_profile");
    const ing_part_t *prev = ing_form_file(&form, "prev_profile");
    if (prev && prev->len > 0) {
        lc_status_set_http(&c->st, 422, LC_CODE_UNKNOWN,
                           "unsupported client version: prev_profile (cumulative profiles) is "
                           "not supported, please update the pyroscope SDK");
        return fail(c, "unsupported_client");
    }
    ing_stconfig_t *cfg;
    if (form_config(c, &form, &cfg) < 0)
        return fail_422(c, "invalid_profile");
    const ing_part_t *profile = ing_form_file(&form, "profile");
    return profile ? ingest_pprof(c, profile->data, profile->len, cfg) : 0;
}

static int ingest_pprof_form(ingest_ctx_t *c)
{
    const char *boundary;
    const char *ct = lc_http_header(c->req, "content-type");
    if (ing_multipart_boundary(ct, c->arena, &boundary, &c->st) < 0)
        return fail_422(c, "invalid_profile");
    return ingest_form(c, boundary);
}

/* format=pprof: a raw pprof, or (leniently) a form sent with another content type. */
static int ingest_pprof_raw(ingest_ctx_t *c)
{
    const char *boundary;
    if (ing_multipart_sniff_boundary(c->req->body, c->req->body_len, c->arena, &boundary) == 0)
        return ingest_form(c, boundary);
    return ingest_pprof(c, c->req->body, c->req->body_len, NULL);
}

/* ---------------------------------------------------------------- converted formats */

/* Legacy exemplar uploads (§2.3): accepted and dropped by every converted format. */
static bool has_profile_id(const ingest_ctx_t *c)
{
    const char *profile_id = ing_labelset_get(&c->set, "profile_id");
    return profile_id && *profile_id;
}

/* An encoded, uncompressed pprof from a converter is decoded and validated
 * like any pprof, then labelled (§2.10) and queued (as those bytes, unless
 * validation changed it). One without samples is not stored. */
static int ingest_encoded_into(ingest_ctx_t *c, const lc_buf_t *out, const char *metric,
                               const char *service, const ing_labelset_t *set, lc_arena_t **own)
{
    lc_pprof_limits_t lim = limits(c);
    lc_pprof_t *p = NULL;
    bool changed = true;
    int rc = lc_pprof_decode(out->data, out->len, &lim, *own ? *own : c->arena, &p, &c->st);
    if (rc == 0)
        rc = lc_pprof_validate_normalized(p, &lim, &changed, &c->st);
    if (rc < 0 || p->n_sample == 0) /* no stacks: nothing to store */
        return rc < 0 ? fail_decode(c) : 0;
    lc_labels_t ls;
    rc = ingest_labels(c, &ls, set, metric, service, true);
    rc = rc < 0 ? fail(c, "invalid_labels")
                : ingest_publish(c, p, &ls, NULL, changed ? NULL : out->data, out->len, own);
    lc_labels_fini(&ls);
    return rc;
}

static int ingest_encoded(ingest_ctx_t *c, const lc_buf_t *out, const char *metric,
                          const char *service, const ing_labelset_t *set)
{
    lc_arena_t *own = ing_job_profile_arena(c->ing);
    int rc = ingest_encoded_into(c, out, metric, service, set, &own);
    lc_arena_free(own); /* unless the handover took it */
    return rc;
}

/* The profile built in cv, encoded, then as ingest_encoded. */
static int ingest_converted(ingest_ctx_t *c, lc_cv_t *cv, const ing_app_type_t *t,
                            const ing_labelset_t *set)
{
    lc_buf_t out;
    lc_buf_init(&out, limits(c).max_decompressed_bytes);
    int rc = lc_cv_encode(cv, &out);
    rc = rc != 0 ? fail_decode(c) : ingest_encoded(c, &out, t->metric, t->service, set);
    lc_buf_fini(&out);
    return rc;
}

/* folded / lines: dropped with a profile_id before anything is parsed. */
static int ingest_text(ingest_ctx_t *c, bool lines_format)
{
    if (has_profile_id(c))
        return 0;
    ing_app_type_t t;
    if (ing_app_type(c->set.app_name, c->arena, &t, &c->st) < 0)
        return fail(c, "unknown_profile_type");
    lc_pprof_limits_t lim = limits(c);
    lc_cv_t *cv = ing_cv_new(&t, c->sample_rate, c->from_ns, &lim, &c->st);
    int rc = lc_folded_parse(c->req->body, c->req->body_len, lines_format, c->arena, lc_cv_stack,
                             cv, &c->st);
    rc = rc != 0 ? fail_422(c, "invalid_profile") : ingest_converted(c, cv, &t, &c->set);
    lc_cv_free(cv);
    return rc;
}

static int ingest_folded(ingest_ctx_t *c)
{
    return ingest_text(c, false);
}

static int ingest_lines(ingest_ctx_t *c)
{
    return ingest_text(c, true);
}

/* tree / trie: as in Pyroscope the body is parsed before the profile_id and
 * profile type checks (a malformed body is 422 either way), so it is read
 * twice: once to validate, once into the converter. */
static int ingest_tree_format(ingest_ctx_t *c, bool trie)
{
    const uint8_t *body = c->req->body;
    size_t len = c->req->body_len;
    if (ing_tree_decode(body, len, trie, NULL, NULL, &c->st) < 0)
        return fail_decode(c);
    if (has_profile_id(c))
        return 0;
    ing_app_type_t t;
    if (ing_app_type(c->set.app_name, c->arena, &t, &c->st) < 0)
        return fail(c, "unknown_profile_type");
    lc_pprof_limits_t lim = limits(c);
    lc_cv_t *cv = ing_cv_new(&t, c->sample_rate, c->from_ns, &lim, &c->st);
    int rc = ing_tree_decode(body, len, trie, lc_cv_stack, cv, &c->st);
    rc = rc != 0 ? fail_decode(c) : ingest_converted(c, cv, &t, &c->set);
    lc_cv_free(cv);
    return rc;
}

static int ingest_tree(ingest_ctx_t *c)
{
    return ingest_tree_format(c, false);
}

static int ingest_trie(ingest_ctx_t *c)
{
    return ingest_tree_format(c, true);
}

/* ---------------------------------------------------------------- speedscope */

/* Speedscope stacks (frame indices) into the converter; each frame's location
 * is interned once (ids start at 1, so 0 means "not yet"). */
typedef struct ss_conv_s {
    lc_cv_t *cv;
    const ing_speedscope_t *ss;
    uint64_t *frame_locs; /* per frame index */
    uint64_t *locs;       /* scratch: one stack */
    size_t cap_locs;
} ss_conv_t;

static int ss_conv_stack(const uint32_t *frames, size_t n, int64_t value, void *data)
{
    ss_conv_t *s = data;
    s->locs = lc_xgrow(s->locs, &s->cap_locs, n ? n : 1, sizeof(*s->locs));
    for (size_t i = 0; i < n; i++) {
        uint64_t *loc = &s->frame_locs[frames[i]];
        if (*loc == 0)
            *loc =
                lc_cv_location(s->cv, s->ss->frame_names[frames[i]], s->ss->frame_lens[frames[i]]);
        s->locs[i] = *loc;
    }
    return lc_cv_sample(s->cv, s->locs, n, value);
}

/* One profile's labelset (§2.9): `profile_name` is always set (Pyroscope adds
 * it even for a single profile), and when the file holds several profiles the
 * app name becomes "<app>.<unit>", which picks the profile type. */
static int ss_labelset(ingest_ctx_t *c, const ing_ss_profile_t *p, bool several,
                       ing_labelset_t *out)
{
    out->app_name =
        several ? lc_arena_sprintf(c->arena, "%s.%s", c->set.app_name, p->unit) : c->set.app_name;
    out->v = lc_arena_calloc(c->arena, c->set.n + 1, sizeof(*out->v));
    if (!out->app_name || !out->v) {
        lc_status_set(&c->st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        return fail(c, "too_large");
    }
    out->n = 0;
    for (size_t i = 0; i < c->set.n; i++) {
        if (strcmp(c->set.v[i].name, "profile_name") != 0)
            out->v[out->n++] = c->set.v[i];
    }
    out->v[out->n++] = (ing_kv_t){"profile_name", p->name};
    return 0;
}

/* Pyroscope replaces the default sampleRate (100) by the unit's own rate. */
static uint64_t ss_sample_rate(const ingest_ctx_t *c, const ing_ss_profile_t *p)
{
    return c->sample_rate == DEFAULT_SAMPLE_RATE ? ing_speedscope_default_rate(p) : c->sample_rate;
}

static int ingest_ss_profile(ingest_ctx_t *c, const ing_speedscope_t *ss, size_t i)
{
    const ing_ss_profile_t *p = &ss->profiles[i];
    ing_labelset_t set;
    ing_app_type_t t;
    if (ss_labelset(c, p, ss->n_profiles > 1, &set) < 0)
        return -1;
    if (ing_app_type(set.app_name, c->arena, &t, &c->st) < 0)
        return fail_422(c, "unknown_profile_type");
    lc_pprof_limits_t lim = limits(c);
    ss_conv_t s = {.cv = ing_cv_new(&t, ss_sample_rate(c, p), c->from_ns, &lim, &c->st),
                   .ss = ss,
                   .frame_locs = lc_xcalloc(ss->n_frames ? ss->n_frames : 1, sizeof(uint64_t))};
    int rc = ing_speedscope_stacks(ss, i, ss_conv_stack, &s, &c->st);
    rc = rc != 0 ? fail_decode(c) : ingest_converted(c, s.cv, &t, &set);
    lc_free(s.frame_locs);
    lc_free(s.locs);
    lc_cv_free(s.cv);
    return rc;
}

/* Every profile is parsed and validated before any is converted, and all of
 * them are published together or none is (Pyroscope pushes them one by one). */
static int ingest_speedscope(ingest_ctx_t *c)
{
    ing_speedscope_t ss;
    if (ing_speedscope_parse(c->req->body, c->req->body_len, c->arena, &ss, &c->st) < 0)
        return fail_decode(c);
    int rc = 0;
    for (size_t i = 0; !has_profile_id(c) && rc == 0 && i < ss.n_profiles; i++)
        rc = ingest_ss_profile(c, &ss, i);
    ing_speedscope_fini(&ss);
    return rc;
}

/* ---------------------------------------------------------------- jfr */

/* The request's labelset plus jfr_event (the agent's event setting). */
static int jfr_labelset(ingest_ctx_t *c, const char *event, ing_labelset_t *out)
{
    *out = c->set;
    if (!*event)
        return 0;
    out->v = lc_arena_calloc(c->arena, c->set.n + 1, sizeof(*out->v));
    if (!out->v) {
        lc_status_set(&c->st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        return fail(c, "too_large");
    }
    out->n = 0;
    for (size_t i = 0; i < c->set.n; i++) {
        if (strcmp(c->set.v[i].name, "jfr_event") != 0)
            out->v[out->n++] = c->set.v[i];
    }
    out->v[out->n++] = (ing_kv_t){"jfr_event", event};
    return 0;
}

/* The `jfr` and `labels` parts of the agent's form, or the raw body. */
static int jfr_parts(ingest_ctx_t *c, const ing_part_t **jfr, const ing_part_t **labels)
{
    const char *boundary = NULL;
    const char *ct = lc_http_header(c->req, "content-type");
    if (ct && strstr(ct, "multipart/form-data")) {
        if (ing_multipart_boundary(ct, c->arena, &boundary, &c->st) < 0)
            return fail_422(c, "invalid_profile");
    } else if (ing_multipart_sniff_boundary(c->req->body, c->req->body_len, c->arena, &boundary) !=
               0) {
        boundary = NULL;
    }
    *labels = NULL;
    if (!boundary) {
        ing_part_t *body = lc_arena_calloc(c->arena, 1, sizeof(*body));
        if (!body)
            return fail(c, "too_large");
        *body = (ing_part_t){.name = "jfr", .data = c->req->body, .len = c->req->body_len};
        *jfr = body;
        return 0;
    }
    ing_form_t form;
    if (ing_multipart_parse(c->req->body, c->req->body_len, boundary, c->arena, &form, &c->st) < 0)
        return fail_422(c, "invalid_profile");
    *jfr = ing_form_file(&form, "jfr");
    *labels = ing_form_file(&form, "labels");
    if (!*jfr) {
        lc_status_set(&c->st, LC_CODE_INVALID_ARGUMENT,
                      "invalid jfr: the form has no `jfr` file part");
        return fail_422(c, "invalid_profile");
    }
    return 0;
}

/* format=jfr (§2.8): one profile per event kind, all stored or none. */
static int ingest_jfr(ingest_ctx_t *c)
{
    const ing_part_t *jfr, *labels;
    if (jfr_parts(c, &jfr, &labels) < 0)
        return -1;
    const char *until = lc_http_query(c->req, "until");
    lc_jfr_params_t params = {.start_ns = c->from_ns,
                              .end_ns =
                                  until && *until ? lc_attime_parse(until, c->now_ns) : c->now_ns,
                              .sample_rate = c->sample_rate};
    lc_jfr_result_t r;
    if (lc_jfr_to_pprof(jfr->data, jfr->len, labels ? labels->data : NULL, labels ? labels->len : 0,
                        &params, c->arena, &r, &c->st) < 0)
        return c->st.http_status == 413 ? fail(c, "too_large") : fail_422(c, "invalid_profile");
    ing_labelset_t set;
    int rc = jfr_labelset(c, r.event, &set);
    for (size_t i = 0; rc == 0 && i < r.n; i++)
        rc = ingest_encoded(c, &r.profiles[i].pprof, r.profiles[i].metric, c->set.app_name, &set);
    lc_jfr_result_fini(&r);
    return rc;
}

/* ---------------------------------------------------------------- the table */

/* clang-format off */
static const ingest_format_fn ingest_formats[ING_FMT_COUNT_] = {
    [ING_FMT_FOLDED]     = ingest_folded,
    [ING_FMT_LINES]      = ingest_lines,
    [ING_FMT_PPROF]      = ingest_pprof_raw,
    [ING_FMT_PPROF_FORM] = ingest_pprof_form,
    [ING_FMT_TRIE]       = ingest_trie,
    [ING_FMT_TREE]       = ingest_tree,
    [ING_FMT_JFR]        = ingest_jfr,
    [ING_FMT_SPEEDSCOPE] = ingest_speedscope,
};
/* clang-format on */

/* ---------------------------------------------------------------- the route */

static int ingest_run(ingest_ctx_t *c)
{
    if (!c->job) {
        lc_status_set(&c->st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        return fail(c, "too_large");
    }
    if (lc_tenant_write(c->req, c->ing->opts.multitenancy, &c->tenant, &c->st) < 0)
        return fail(c, "unauthenticated");
    if (ing_rate_check(c->ing, c->req, c->tenant, 1, &c->st) < 0)
        return fail(c, "rate_limited");
    if (ingest_params(c) < 0)
        return -1;
    return ingest_formats[c->format](c);
}

lc_http_result_t ing_ingest_work(lc_http_req_t *req, void *data)
{
    ingest_ctx_t c = {.ing = data, .req = req, .arena = req->arena, .now_ns = lc_realtime_ns()};
    req->user = NULL;
    lc_metric_add(c.ing->m_bytes, (double)req->body_len);
    c.job = ing_job_new(c.ing, req, ING_ROUTE_INGEST);
    if (ingest_run(&c) < 0) {
        ing_count_rejected(c.ing, c.reason ? c.reason : "invalid_request");
        lc_http_error(req, &c.st);
        return LC_HTTP_DONE;
    }
    req->user = c.job;
    return LC_HTTP_DONE;
}
