/*
 * publish.c — from accepted profiles to durable transport messages.
 *
 * A route's `work` (thread pool) validates and converts everything, wrapping
 * each accepted profile in an ember.v1.IngestProfile packed into the request
 * arena (ing_job_add). Its `after` (loop) publishes them all; the client is
 * answered when the last publish callback reports, so a 200 means every
 * profile of the request is durable. Back-pressure (LC_EFULL) becomes 429 with
 * Retry-After, a profile the writer set aside as unappliable (a status for
 * which lc_transport_rejected holds; all-in-one only: over Redis the writer
 * runs after the 200, and dead-letters it) 400 naming the reason, any other
 * transport failure 503 (Push: resource_exhausted / unavailable). The job counts its callbacks;
 * `publishing` keeps a callback that runs inside lc_transport_publish from answering too early.
 */
#include <errno.h>
#include <string.h>

#include "handover.h"
#include "lc/clock.h"
#include "lc/gz.h"
#include "lc/log.h"
#include "lc/transport_entry.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "push/v1/push.pb-c.h"
#include "receive_int.h"

ing_job_t *ing_job_new(ing_t *ing, lc_http_req_t *req, ing_route_t route)
{
    ing_job_t *job = lc_arena_calloc(req->arena, 1, sizeof(*job));
    if (job) {
        job->ing = ing;
        job->req = req;
        job->route = route;
    }
    return job;
}

/* ---------------------------------------------------------------- building */

static Types__V1__LabelPair **job_label_pairs(const lc_labels_t *ls, lc_arena_t *arena)
{
    Types__V1__LabelPair **v = lc_arena_calloc(arena, ls->n ? ls->n : 1, sizeof(*v));
    Types__V1__LabelPair *pairs = lc_arena_calloc(arena, ls->n ? ls->n : 1, sizeof(*pairs));
    if (!v || !pairs)
        return NULL;
    for (size_t i = 0; i < ls->n; i++) {
        types__v1__label_pair__init(&pairs[i]);
        pairs[i].name = ls->v[i].name; /* borrowed: packed before labels are freed */
        pairs[i].value = ls->v[i].value;
        v[i] = &pairs[i];
    }
    return v;
}

static ing_msg_t *job_slot(ing_job_t *job)
{
    if (job->n_msgs == job->cap_msgs) {
        size_t cap = job->cap_msgs ? 2 * job->cap_msgs : 4;
        ing_msg_t *v = lc_arena_calloc(job->req->arena, cap, sizeof(*v));
        if (!v)
            return NULL;
        if (job->n_msgs)
            memcpy(v, job->msgs, job->n_msgs * sizeof(*v));
        job->msgs = v;
        job->cap_msgs = cap;
    }
    return &job->msgs[job->n_msgs];
}

const uint8_t *ing_job_pprof_bytes(const ing_t *ing, const uint8_t *body, size_t body_len,
                                   const uint8_t *pb, size_t pb_len, size_t *len)
{
    if (body && lc_transport_wants_lean(ing->tr) && lc_gz_is_gzip(body, body_len)) {
        *len = body_len;
        return body;
    }
    *len = pb_len;
    return pb;
}

static void *job_arena_alloc(void *arena, size_t size)
{
    return lc_arena_alloc(arena, size);
}

/* The message as the transport carries it (lc_entry_pack): over Redis its
 * lean entry, the pprof compressed straight from the receiver's buffer (no
 * packed copy of the raw pprof first), or the bare message when its pprof is
 * the client's gzip body (compressed already: zstd would gain little and
 * cost the most CPU of the path); in-process the packed message. NULL past
 * the arena. */
static uint8_t *job_pack(ing_t *ing, const Ember__V1__IngestProfile *m, lc_arena_t *arena,
                         size_t *len)
{
    lc_metric_add(ing->m_entry_bytes[0], (double)protobuf_c_message_get_packed_size(&m->base));
    bool wire = lc_transport_wants_lean(ing->tr);
    bool lean = wire && !lc_gz_is_gzip(m->pprof.data, m->pprof.len);
    uint8_t *data = lc_entry_pack(&m->base, lean, job_arena_alloc, arena, len);
    if (data && wire)
        lc_metric_add(ing->m_entry_bytes[1], (double)*len);
    return data;
}

/* A profile sent without an id gets one here, once, before it is published:
 * a random UUID (version 4 bits), so exemplars can name it and
 * profile_id_selector find it, and a replayed message keeps it. */
static int assigned_profile_id(uint8_t id[LC_STORE_PROFILE_ID_BYTES])
{
    _Static_assert(LC_INGEST_ID_BYTES == LC_STORE_PROFILE_ID_BYTES, "one random source");
    int rc = lc_ingest_id_new(id);
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
    return rc;
}

int ing_job_add(ing_job_t *job, const char *tenant, const lc_labels_t *labels, const uint8_t *pprof,
                size_t len, int64_t time_ns, const ing_stconfig_t *cfg, const uint8_t *profile_id,
                size_t n_samples, lc_status_t *st)
{
    lc_arena_t *arena = job->req->arena;
    uint8_t id[LC_INGEST_ID_BYTES], assigned[LC_STORE_PROFILE_ID_BYTES];
    int rc = lc_ingest_id_new(id);
    if (rc == 0 && !profile_id)
        rc = assigned_profile_id(assigned);
    if (rc)
        return lc_status_set(st, LC_CODE_INTERNAL, "no random ingest id: %s", lc_strerror(rc));
    if (!profile_id)
        profile_id = assigned;
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = (char *)tenant;
    m.ingest_id = (ProtobufCBinaryData){LC_INGEST_ID_BYTES, id};
    m.received_unix_nanos = lc_realtime_ns();
    m.labels = job_label_pairs(labels, arena);
    m.n_labels = labels->n;
    m.pprof = (ProtobufCBinaryData){len, (uint8_t *)pprof};
    m.time_nanos = time_ns;
    const char *delta = lc_labels_get(labels, "__delta__");
    m.delta_disabled = delta && strcmp(delta, "false") == 0;
    m.sample_type_config = cfg ? cfg->v : NULL;
    m.n_sample_type_config = cfg ? cfg->n : 0;
    m.profile_id = (ProtobufCBinaryData){LC_STORE_PROFILE_ID_BYTES, (uint8_t *)profile_id};
    job->tenant = tenant;
    ing_msg_t *slot = job_slot(job);
    size_t size;
    uint8_t *data = slot && m.labels ? job_pack(job->ing, &m, arena, &size) : NULL;
    if (!data)
        return lc_status_set_http(st, 413, LC_CODE_RESOURCE_EXHAUSTED,
                                  "request too large for the request memory budget");
    *slot = (ing_msg_t){
        .data = data,
        .len = size,
        .partition = lc_transport_partition(tenant, labels, job->ing->opts.partitions),
        .samples = n_samples,
        .series = lc_labels_hash(labels),
        .weight = size,
    };
    memcpy(slot->id, id, sizeof(slot->id));
    job->n_msgs++;
    return 0;
}

bool ing_job_takes_decoded(const ing_job_t *job)
{
    return !lc_transport_wants_lean(job->ing->tr) && lc_transport_carries_local(job->ing->tr);
}

int ing_job_add_decoded(ing_job_t *job, const char *tenant, const lc_labels_t *labels,
                        const lc_pprof_t *p, const lc_pprof_index_t *ix, size_t weight,
                        const ing_stconfig_t *cfg, const uint8_t *profile_id, lc_status_t *st)
{
    ing_decoded_t *d = lc_arena_alloc(job->req->arena, sizeof(*d));
    if (!d)
        return lc_status_set_http(st, 413, LC_CODE_RESOURCE_EXHAUSTED,
                                  "request too large for the request memory budget");
    int rc =
        ing_job_add(job, tenant, labels, NULL, 0, p->time_nanos, cfg, profile_id, p->n_sample, st);
    if (rc)
        return rc;
    *d = (ing_decoded_t){p, ix};
    ing_msg_t *m = &job->msgs[job->n_msgs - 1];
    m->decoded = d;
    m->weight += weight;
    return 0;
}

lc_arena_t *ing_job_profile_arena(const ing_t *ing)
{
    return ing->opts.handover ? lc_arena_new(ING_PROFILE_ARENA_CAP) : NULL;
}

void ing_job_attach_decoded(ing_job_t *job, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                            lc_arena_t **own)
{
    ing_handover_t *h = job->ing->opts.handover;
    if (job->n_msgs == 0 || !lc_transport_wants_lean(job->ing->tr) || !*own || !h)
        return; /* the writer decodes what arrives */
    ing_msg_t *m = &job->msgs[job->n_msgs - 1];
    ing_handover_put(h, m->id, m->partition, *own, p, ix);
    m->handed = true;
    *own = NULL;
}

/* ---------------------------------------------------------------- answering */

static void job_count_success(ing_job_t *job)
{
    ing_t *ing = job->ing;
    for (size_t i = 0; i < job->n_msgs; i++) {
        lc_metric_add(ing->m_profiles[job->route], 1);
        lc_metric_add(ing->m_samples, (double)job->msgs[i].samples);
    }
}

static void job_transport_status(const ing_job_t *job, lc_status_t *st)
{
    if (job->status == LC_EFULL) {
        lc_status_set_http(st, 429, LC_CODE_RESOURCE_EXHAUSTED,
                           "ingestion backlog is full, retry later");
        lc_http_set_header(job->req, "Retry-After", "1");
        ing_count_rejected(job->ing, "backpressure");
    } else if (lc_transport_rejected(job->status)) {
        lc_status_set_http(st, 400, LC_CODE_INVALID_ARGUMENT,
                           "profile refused by the writer, not stored: %s",
                           lc_transport_reject_text(job->status));
        ing_count_rejected(job->ing, "unappliable");
    } else {
        lc_status_set_http(st, 503, LC_CODE_UNAVAILABLE, "profile could not be stored: %s",
                           lc_strerror(job->status));
        ing_count_rejected(job->ing, "unavailable");
    }
}

/* OTLP answers success with ExportProfilesServiceResponse, whose
 * partial_success counts the profiles rejected and says why (the accepted
 * ones are stored); OTLP/HTTP replies in application/x-protobuf. */
static void job_reply_otlp(ing_job_t *job)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess partial =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    if (!lc_status_ok(&job->partial)) {
        partial.rejected_profiles = (int64_t)job->n_rejected;
        partial.error_message = job->partial.msg;
        resp.partial_success = &partial;
    }
    lc_connect_reply(job->req, job->codec, &resp.base);
    if (job->route == ING_ROUTE_OTLP_HTTP && job->codec == LC_CONNECT_PROTO)
        lc_http_set_header(job->req, "Content-Type", "application/x-protobuf");
}

/* A refusal after `work` (series limit) or a failed publish is the route's
 * error; otherwise the route's success (Push: its partial error, if any). */
/* A job not published (refused, or a publish failed): nobody will consume
 * its messages here, so what the handover holds for them goes now. */
static void job_drop_handover(const ing_job_t *job)
{
    ing_handover_t *h = job->ing->opts.handover;
    for (size_t i = 0; h && i < job->n_msgs; i++)
        ing_handover_drop(h, job->msgs[i].id);
}

static void job_respond(ing_job_t *job)
{
    lc_status_t st = job->refused;
    if (lc_status_ok(&st) && job->status != 0)
        job_transport_status(job, &st);
    if (!lc_status_ok(&st)) {
        job_drop_handover(job);
        ing_route_error(job->req, job->route, &st);
        return;
    }
    job_count_success(job);
    if (job->route == ING_ROUTE_INGEST)
        return; /* 200, empty body */
    if (job->route == ING_ROUTE_OTLP || job->route == ING_ROUTE_OTLP_HTTP) {
        job_reply_otlp(job);
    } else if (!lc_status_ok(&job->partial)) {
        lc_connect_error(job->req, &job->partial);
    } else {
        Push__V1__PushResponse resp = PUSH__V1__PUSH_RESPONSE__INIT;
        lc_connect_reply(job->req, job->codec, &resp.base);
    }
}

static void job_on_published(int status, void *data)
{
    ing_job_t *job = data;
    if (status != 0 && job->status == 0)
        job->status = status;
    if (--job->pending == 0 && !job->publishing) {
        job_respond(job);
        lc_http_finish(job->req);
    }
}

/* The series limit, for every receiver in one place: here, on the loop
 * thread, with all of the request's series known and nothing published. */
static int job_admit_series(ing_job_t *job)
{
    if (!job->ing->series || job->n_msgs == 0)
        return 0;
    uint64_t *series = lc_arena_alloc(job->req->arena, job->n_msgs * sizeof(*series));
    if (!series)
        return lc_status_set_http(&job->refused, 413, LC_CODE_RESOURCE_EXHAUSTED,
                                  "request too large for the request memory budget");
    for (size_t i = 0; i < job->n_msgs; i++)
        series[i] = job->msgs[i].series;
    return ing_series_check(job->ing, job->tenant, series, job->n_msgs, &job->refused);
}

/* Publishes every message of the job (loop thread); DONE when it was
 * answered already. */
static lc_http_result_t job_publish(ing_job_t *job)
{
    job->publishing = true;
    for (size_t i = 0; i < job->n_msgs && job->status == 0; i++) {
        const ing_msg_t *m = &job->msgs[i];
        if (m->handed)
            ing_handover_published(job->ing->opts.handover, m->id);
        job->pending++;
        int rc =
            lc_transport_publish_local(job->ing->tr, m->data, m->len, m->weight, m->partition,
                                       m->id, sizeof(m->id), m->decoded, job_on_published, job);
        if (rc != 0) {
            job->pending--;
            job->status = rc;
        }
    }
    job->publishing = false;
    if (job->pending > 0)
        return LC_HTTP_PENDING;
    job_respond(job);
    return LC_HTTP_DONE;
}

/* ---------------------------------------------------------------- waiting for the writer */

/* Publishes the waiting jobs there is room for, or that waited their
 * longest, in order (loop thread). */
static void park_tick(uv_timer_t *t)
{
    ing_t *ing = LC_CONTAINER_OF(t, ing_t, park_timer);
    int64_t now = lc_monotonic_ns();
    while (ing->parked_head) {
        ing_job_t *job = ing->parked_head;
        if (!ing->draining && now - job->parked_ns < ING_PARK_MAX_NS &&
            ing_handover_crowded(ing->opts.handover))
            break;
        ing->parked_head = job->parked_next;
        if (!ing->parked_head)
            ing->parked_tail = NULL;
        if (job_publish(job) == LC_HTTP_DONE)
            lc_http_finish(job->req);
    }
    if (!ing->parked_head)
        uv_timer_stop(t);
}

/* Parks the job when the handover is crowded or others wait already. */
static bool job_park(ing_job_t *job)
{
    ing_t *ing = job->ing;
    if (!ing->opts.handover || ing->draining || job->n_msgs == 0)
        return false;
    if (!ing->parked_head && !ing_handover_crowded(ing->opts.handover))
        return false;
    job->parked_ns = lc_monotonic_ns();
    job->parked_next = NULL;
    if (ing->parked_tail)
        ing->parked_tail->parked_next = job;
    else
        ing->parked_head = job;
    ing->parked_tail = job;
    if (!ing->park_timer_init)
        ing->park_timer_init = uv_timer_init(ing->loop, &ing->park_timer) == 0;
    if (ing->park_timer_init && !uv_is_active((uv_handle_t *)&ing->park_timer))
        uv_timer_start(&ing->park_timer, park_tick, ING_PARK_POLL_MS, ING_PARK_POLL_MS);
    return true;
}

void ing_drain(ing_t *ing)
{
    if (!ing)
        return;
    ing->draining = true;
    if (!ing->park_timer_init)
        return;
    park_tick(&ing->park_timer);
    uv_close((uv_handle_t *)&ing->park_timer, NULL);
    ing->park_timer_init = false;
}

lc_http_result_t ing_publish_after(lc_http_req_t *req, void *data)
{
    ing_job_t *job = req->user;
    if (!job)
        return LC_HTTP_DONE; /* `work` already answered */
    if (job_admit_series(job) != 0) {
        job_respond(job);
        return LC_HTTP_DONE;
    }
    return job_park(job) ? LC_HTTP_PENDING : job_publish(job);
}
