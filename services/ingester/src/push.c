/*
 * push.c — POST /push.v1.PusherService/Push (pyroscope-api.md §3.3).
 *
 * Registered as a plain route (offloaded `work` + loop `after`) rather than
 * through lc_connect_register, because the answer must wait for the
 * asynchronous publish callbacks. `work` decodes the Connect request, then
 * checks every series' labels (service_name default, relabel rules, limits)
 * and every sample's pprof (gunzip, decode, validate); the valid profiles are
 * published and, as in Pyroscope, the errors of the others are still returned
 * (invalid_argument) once the valid ones are durable.
 *
 * RawSample.ID, Pyroscope's per-profile UUID, is optional. When given it must
 * parse (lc/uuid.h) and travels as 16 bytes to the store, which keeps it per
 * stored profile for profile_id_selector. Every ID is checked before anything
 * is queued: one malformed ID refuses the whole request (invalid_argument),
 * so a client never has to find out which of its profiles were kept.
 */
#include <string.h>

#include "lc/clock.h"
#include "lc/tenant.h"
#include "lc/uuid.h"
#include "push/v1/push.pb-c.h"
#include "receive_int.h"

typedef struct push_ctx_s {
    ing_t *ing;
    lc_http_req_t *req;
    ing_job_t *job;
    const char *tenant;
    int64_t now_ns;
    size_t total_bytes; /* decoded profiles, capped per request */
    size_t n_profiles, n_rejected;
    lc_status_t first_error;
} push_ctx_t;

/* Keeps the first error; later ones are only counted. */
static void push_reject(push_ctx_t *c, const lc_status_t *st, const char *reason)
{
    c->n_rejected++;
    ing_count_rejected(c->ing, reason);
    if (lc_status_ok(&c->first_error))
        c->first_error = *st;
}

/* Queues the profile as the bytes it was decoded from (gunzipped), unless
 * validation or the time default changed it: then it is encoded again. Its
 * ID, if any, was checked by push_check_ids. */
static int push_profile_into(push_ctx_t *c, const lc_labels_t *ls,
                             const Push__V1__RawSample *sample, lc_arena_t **own, lc_status_t *st)
{
    lc_arena_t *arena = *own ? *own : c->req->arena;
    const ProtobufCBinaryData *raw = &sample->raw_profile;
    uint8_t id[LC_UUID_BYTES];
    bool has_id = sample->id && *sample->id && lc_uuid_parse(sample->id, id);
    lc_pprof_limits_t lim = c->ing->opts.limits;
    lc_pprof_t *p;
    const uint8_t *pb;
    size_t pb_len;
    bool changed;
    lc_pprof_seen_t seen;
    if (lc_pprof_decode_apart(raw->data, raw->len, &lim, c->req->arena, arena, &p, &pb, &pb_len,
                              &seen, st) < 0 ||
        lc_pprof_validate_seen(p, &lim, &seen, &changed, st) < 0)
        return -1;
    if (p->time_nanos == 0) {
        p->time_nanos = c->now_ns;
        changed = true;
    }
    lc_pprof_index_t *ix;
    if (ing_check_window(c->ing, p->time_nanos, c->now_ns, st) < 0 ||
        lc_store_check_validated(p, c->tenant, p->time_nanos, arena, &ix, st) < 0)
        return -1; /* the second: what the writer would refuse */
    c->total_bytes += pb_len;
    if (c->total_bytes > ING_PUSH_MAX_TOTAL_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "decompressed profiles of the request exceed %zu bytes",
                             ING_PUSH_MAX_TOTAL_BYTES);
    if (ing_job_takes_decoded(c->job)) /* the writer of this process uses p and ix as they are */
        return ing_job_add_decoded(c->job, c->tenant, ls, p, ix, pb_len, NULL, has_id ? id : NULL,
                                   st);
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    int rc = changed ? lc_pprof_encode(p, false, &out) : 0;
    if (changed) {
        pb = out.data;
        pb_len = out.len;
    }
    size_t send_len = pb_len; /* over Redis a gzip body goes as it came */
    const uint8_t *send =
        changed ? pb : ing_job_pprof_bytes(c->ing, raw->data, raw->len, pb, pb_len, &send_len);
    if (rc != 0)
        rc = lc_status_set(st, LC_CODE_INTERNAL, "cannot encode the profile: %s", lc_strerror(rc));
    else
        rc = ing_job_add(c->job, c->tenant, ls, send, send_len, p->time_nanos, NULL,
                         has_id ? id : NULL, p->n_sample, st);
    if (rc == 0) /* a writer of this process over Redis may take p and ix as they are */
        ing_job_attach_decoded(c->job, p, ix, own);
    lc_buf_fini(&out);
    return rc;
}

static int push_profile(push_ctx_t *c, const lc_labels_t *ls, const Push__V1__RawSample *sample,
                        lc_status_t *st)
{
    lc_arena_t *own = ing_job_profile_arena(c->ing);
    int rc = push_profile_into(c, ls, sample, &own, st);
    lc_arena_free(own); /* unless the handover took it */
    return rc;
}

static void push_series(push_ctx_t *c, const Push__V1__RawProfileSeries *s)
{
    lc_labels_t ls;
    lc_labels_init(&ls);
    for (size_t i = 0; i < s->n_labels; i++)
        lc_labels_add(&ls, s->labels[i]->name, s->labels[i]->value);
    ing_label_limits_t lim = ing_label_limits(c->ing);
    lc_status_t st = {0};
    if (ing_push_labels_normalize(&ls, &lim, &st) < 0) {
        for (size_t i = 0; i < s->n_samples; i++)
            push_reject(c, &st, "invalid_labels");
    } else {
        for (size_t i = 0; i < s->n_samples; i++) {
            st = (lc_status_t){0};
            if (push_profile(c, &ls, s->samples[i], &st) < 0)
                push_reject(c, &st, "invalid_profile");
        }
    }
    lc_labels_fini(&ls);
}

/* Every RawSample.ID is empty or a UUID lc_uuid_parse accepts. */
static int push_check_ids(const Push__V1__PushRequest *req, lc_status_t *st)
{
    uint8_t id[LC_UUID_BYTES];
    for (size_t i = 0; i < req->n_series; i++) {
        const Push__V1__RawProfileSeries *s = req->series[i];
        for (size_t k = 0; k < s->n_samples; k++) {
            const char *text = s->samples[k]->id;
            if (text && *text && !lc_uuid_parse(text, id))
                return lc_status_set(
                    st, LC_CODE_INVALID_ARGUMENT,
                    "series %zu sample %zu: ID \"%.64s\" is not a UUID "
                    "(8-4-4-4-12 hex digits, or 32 hex digits); nothing was stored",
                    i, k, text);
        }
    }
    return 0;
}

/* The request's outcome: -1 (nothing accepted) with st, or 0 with the job's
 * partial error set when some profiles were rejected. */
static int push_run(push_ctx_t *c, const Push__V1__PushRequest *req, lc_status_t *st)
{
    for (size_t i = 0; i < req->n_series; i++)
        c->n_profiles += req->series[i]->n_samples;
    if (c->n_profiles == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no profiles received");
    if (push_check_ids(req, st))
        return -1;
    for (size_t i = 0; i < req->n_series; i++)
        push_series(c, req->series[i]);
    if (c->n_rejected == 0)
        return 0;
    c->job->n_rejected = c->n_rejected;
    lc_status_t *out = c->job->n_msgs ? &c->job->partial : st;
    lc_status_set(out, LC_CODE_INVALID_ARGUMENT, "%zu of %zu profiles rejected: %s", c->n_rejected,
                  c->n_profiles, c->first_error.msg);
    return c->job->n_msgs ? 0 : -1;
}

/* OTLP profiles that could not be converted count as rejected profiles of
 * the push (partial success), the conversion error first. */
static void push_take_otlp_rejects(push_ctx_t *c, const Push__V1__PushRequest *msg)
{
    const ing_otlp_push_t *o = LC_CONTAINER_OF(msg, ing_otlp_push_t, push);
    for (size_t i = 0; i < o->rejected; i++)
        push_reject(c, &o->why, "invalid_profile");
    c->n_profiles += o->rejected;
}

/* Profiles in a push, for the per-tenant profile rate. */
static double push_profiles(const Push__V1__PushRequest *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_series; i++)
        n += r->series[i]->n_samples;
    return (double)n;
}

/* Push's own request: decoded as it comes. */
static int push_decode(lc_http_req_t *req, const Push__V1__PushRequest **out,
                       lc_connect_codec_t *codec, lc_status_t *st)
{
    ProtobufCMessage *msg;
    if (lc_connect_decode(req, &push__v1__push_request__descriptor, &msg, codec, st) != 0)
        return -1;
    *out = (const Push__V1__PushRequest *)msg;
    return 0;
}

lc_http_result_t ing_push_serve(lc_http_req_t *req, ing_t *ing, ing_push_decode_fn decode)
{
    return ing_push_serve_as(req, ing, decode, ING_ROUTE_PUSH);
}

lc_http_result_t ing_push_serve_as(lc_http_req_t *req, ing_t *ing, ing_push_decode_fn decode,
                                   ing_route_t route)
{
    push_ctx_t c = {.ing = ing, .req = req, .now_ns = lc_realtime_ns()};
    lc_status_t st = {0};
    const Push__V1__PushRequest *msg = NULL;
    lc_connect_codec_t codec;
    req->user = NULL;
    lc_metric_add(c.ing->m_bytes, (double)req->body_len);
    c.job = ing_job_new(c.ing, req, route);
    int rc = c.job ? 0 : lc_status_set(&st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    if (rc == 0)
        rc = decode(req, &msg, &codec, &st);
    if (rc == 0)
        rc = lc_tenant_write(req, c.ing->opts.multitenancy, &c.tenant, &st);
    if (rc == 0 && ing_rate_check(c.ing, req, c.tenant, push_profiles(msg), &st) < 0) {
        ing_count_rejected(c.ing, "rate_limited");
        c.n_rejected = 1; /* counted: not an invalid request */
        rc = -1;
    }
    if (rc == 0 && (route == ING_ROUTE_OTLP || route == ING_ROUTE_OTLP_HTTP))
        push_take_otlp_rejects(&c, msg);
    if (rc == 0) {
        c.job->codec = codec;
        rc = push_run(&c, msg, &st);
    }
    if (rc < 0) {
        if (c.n_rejected == 0)
            ing_count_rejected(c.ing, "invalid_request");
        ing_route_error(req, route, &st);
        return LC_HTTP_DONE;
    }
    req->user = c.job;
    return LC_HTTP_DONE;
}

lc_http_result_t ing_push_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve(req, data, push_decode);
}
