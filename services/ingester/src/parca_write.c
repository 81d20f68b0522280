/*
 * parca_write.c — parca.profilestore.v1alpha1.ProfileStoreService (parca.md
 * §4.4), as Parca's scraper and older agents write: WriteRaw over gRPC-Web,
 * native gRPC or Connect (lc/connect.h picks by Content-Type), at the root
 * and under /api.
 *
 * WriteRaw is Push with another envelope, so it is translated into a
 * Push__V1__PushRequest in the request arena and served by ing_push_serve:
 * the same tenant, rate, label and pprof checks (gzip auto-detected), the
 * same transport and store. A series' labels become the series labels as
 * they are; `__name__`, which Parca requires, is the profile name that
 * prefixes every profile type (process_cpu:samples:count:cpu:nanoseconds).
 * `normalized` says the addresses are already normalised; ember keeps
 * addresses as sent either way, so it changes nothing. executable_info is
 * accepted and not kept.
 *
 * WriteArrow (the Parca Agent's default): its Arrow IPC stream becomes one
 * pprof per series and window (parca_arrow.c), served the same way.
 *
 * Write (a bidirectional stream of Arrow records, the agent's v1 schema) is
 * parca_write_v1.c's; any other method answers unimplemented.
 */
#include <string.h>

#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "receive_int.h"

static bool series_has_name(const Parca__Profilestore__V1alpha1__RawProfileSeries *s)
{
    if (!s->labels)
        return false;
    for (size_t i = 0; i < s->labels->n_labels; i++)
        if (strcmp(s->labels->labels[i]->name, "__name__") == 0 && s->labels->labels[i]->value[0])
            return true;
    return false;
}

/* One RawProfileSeries as Push's: labels and raw profiles, shared, not copied. */
static int series_to_push(const Parca__Profilestore__V1alpha1__RawProfileSeries *in, size_t index,
                          lc_arena_t *a, Push__V1__RawProfileSeries *out, lc_status_t *st)
{
    if (!series_has_name(in))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "series %zu: missing __name__ label (the profile name); nothing was "
                             "stored",
                             index);
    *out = (Push__V1__RawProfileSeries)PUSH__V1__RAW_PROFILE_SERIES__INIT;
    size_t n_labels = in->labels->n_labels;
    out->labels = lc_arena_calloc(a, n_labels + 1, sizeof(*out->labels));
    out->samples = lc_arena_calloc(a, in->n_samples + 1, sizeof(*out->samples));
    Types__V1__LabelPair *pairs = lc_arena_calloc(a, n_labels + 1, sizeof(*pairs));
    Push__V1__RawSample *samples = lc_arena_calloc(a, in->n_samples + 1, sizeof(*samples));
    if (!out->labels || !out->samples || !pairs || !samples)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < n_labels; i++) {
        pairs[i] = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
        pairs[i].name = in->labels->labels[i]->name;
        pairs[i].value = in->labels->labels[i]->value;
        out->labels[i] = &pairs[i];
    }
    out->n_labels = n_labels;
    for (size_t i = 0; i < in->n_samples; i++) {
        samples[i] = (Push__V1__RawSample)PUSH__V1__RAW_SAMPLE__INIT;
        samples[i].raw_profile = in->samples[i]->raw_profile;
        out->samples[i] = &samples[i];
    }
    out->n_samples = in->n_samples;
    return 0;
}

static int write_raw_decode(lc_http_req_t *req, const Push__V1__PushRequest **out,
                            lc_connect_codec_t *codec, lc_status_t *st)
{
    ProtobufCMessage *msg;
    if (lc_connect_decode(req, &parca__profilestore__v1alpha1__write_raw_request__descriptor, &msg,
                          codec, st) != 0)
        return -1;
    const Parca__Profilestore__V1alpha1__WriteRawRequest *in =
        (const Parca__Profilestore__V1alpha1__WriteRawRequest *)msg;
    Push__V1__PushRequest *push = lc_arena_calloc(req->arena, 1, sizeof(*push));
    Push__V1__RawProfileSeries *series =
        lc_arena_calloc(req->arena, in->n_series + 1, sizeof(*series));
    Push__V1__RawProfileSeries **ptrs =
        lc_arena_calloc(req->arena, in->n_series + 1, sizeof(*ptrs));
    if (!push || !series || !ptrs)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    *push = (Push__V1__PushRequest)PUSH__V1__PUSH_REQUEST__INIT;
    for (size_t i = 0; i < in->n_series; i++) {
        if (series_to_push(in->series[i], i, req->arena, &series[i], st))
            return -1;
        ptrs[i] = &series[i];
    }
    push->series = ptrs;
    push->n_series = in->n_series;
    *out = push;
    return 0;
}

lc_http_result_t ing_parca_write_raw_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve(req, data, write_raw_decode);
}

static int write_arrow_decode(lc_http_req_t *req, const Push__V1__PushRequest **out,
                              lc_connect_codec_t *codec, lc_status_t *st)
{
    ProtobufCMessage *msg;
    if (lc_connect_decode(req, &parca__profilestore__v1alpha1__write_arrow_request__descriptor,
                          &msg, codec, st) != 0)
        return -1;
    const Parca__Profilestore__V1alpha1__WriteArrowRequest *in =
        (const Parca__Profilestore__V1alpha1__WriteArrowRequest *)msg;
    Push__V1__PushRequest *push = lc_arena_calloc(req->arena, 1, sizeof(*push));
    if (!push)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    /* The pprofs built here are checked again, with the ingester's own
     * limits, by ing_push_serve; the defaults bound the stack depth. */
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    if (ing_parca_arrow_to_push(in->ipc_buffer.data, in->ipc_buffer.len, &lim, req->arena, push,
                                st))
        return -1;
    *out = push;
    return 0;
}

lc_http_result_t ing_parca_write_arrow_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve(req, data, write_arrow_decode);
}

lc_http_result_t ing_parca_write_unimplemented(lc_http_req_t *req, void *data)
{
    LC_UNUSED(data);
    const char *method = strrchr(req->path, '/');
    lc_status_t st;
    lc_status_set(&st, LC_CODE_UNIMPLEMENTED,
                  "%s is not implemented by ember: write profiles with "
                  "ProfileStoreService/WriteArrow (the Parca Agent's default v2 schema), "
                  "WriteRaw (pprof), or Pyroscope's push API",
                  method ? method + 1 : req->path);
    lc_connect_error(req, &st);
    return LC_HTTP_DONE;
}
