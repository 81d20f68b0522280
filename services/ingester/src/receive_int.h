/*
 * receive_int.h — the receive room of the ingester: what the receivers
 * (ingest_http.c, push.c) compose to turn a request into published profiles.
 *
 * The pure pieces (labelset, format selection, multipart, folded text,
 * sample-type config, metric-name derivation, format converters) take plain inputs and arena
 * memory, so each is testable on its own; the receivers (ingest_http.c, push.c) and the writer
 * compose them. Threading: everything here is pure or owned by one thread at a time.
 */
#ifndef EMBER_RECEIVE_INT_H
#define EMBER_RECEIVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/v1/ingest.pb-c.h"
#include "google/v1/profile.pb-c.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/connect.h"
#include "lc/err.h"
#include "lc/folded.h"
#include "lc/labels.h"
#include "lc/pprof.h"
#include "push/v1/push.pb-c.h"

#include "ingester.h"

/* ---------------------------------------------------------------- caps */
#define ING_LABELSET_MAX_PAIRS 256 /* `name` query parameter */
#define ING_MULTIPART_MAX_PARTS 64
#define ING_MULTIPART_MAX_HEADER_BYTES 16384 /* per part */
#define ING_STCONFIG_MAX_ENTRIES 256
#define ING_PUSH_MAX_TOTAL_BYTES ((size_t)256 << 20)  /* decoded profiles per Push */
#define ING_PROFILE_ARENA_CAP ((size_t)1 << 30)       /* httpd's request arena default */
#define ING_PARK_POLL_MS 2                            /* a waiting job looks for room */
#define ING_PARK_MAX_NS ((int64_t)1000 * 1000 * 1000) /* then it publishes anyway */
/* tree/trie bodies (tree.c): a name longer than Pyroscope's symbol limit, more
 * children than a node could hold, a deeper stack or a longer key is malformed
 * (422); more nodes or more stack bytes handed to the converter than these is
 * a profile too large (413). The stack-bytes cap bounds the work a small body
 * can cause: every emitted stack repeats the whole path above it. */
#define ING_TREE_MAX_NAME 65535
#define ING_TREE_MAX_CHILDREN 1000000
#define ING_TREE_MAX_DEPTH 16384
#define ING_TREE_MAX_KEY_BYTES ((size_t)1 << 20)
#define ING_TREE_MAX_NODES ((size_t)1 << 24)
#define ING_TREE_MAX_STACK_BYTES ((size_t)256 << 20)
/* speedscope bodies (speedscope.c). The JSON document is held by jansson
 * (about 48 bytes per value, 640 per object), so its estimated size is capped
 * before parsing; the other caps match the tree formats'. */
#define ING_SPEEDSCOPE_MAX_BYTES ((size_t)64 << 20)
#define ING_SPEEDSCOPE_MAX_JSON_MEMORY ((size_t)256 << 20)
#define ING_SPEEDSCOPE_MAX_PROFILES 1024
#define ING_SPEEDSCOPE_MAX_DEPTH ING_TREE_MAX_DEPTH
#define ING_SPEEDSCOPE_MAX_STACK_FRAMES ((size_t)64 << 20)

/* ---------------------------------------------------------------- labelset.c */

/* The parsed `name` parameter of /ingest (pyroscope-api.md §2.3). */
typedef struct ing_labelset_s {
    const char *app_name; /* text before '{' or the `__name__` override */
    ing_kv_t *v;          /* every other key, first-seen order; a repeat keeps the last value */
    size_t n;
} ing_labelset_t;

/* Parses `app{k=v,...}`; strings live in arena. Errors: invalid_argument. */
int ing_labelset_parse(const char *s, lc_arena_t *arena, ing_labelset_t *out,
                       lc_status_t *st) LC_MUST_CHECK;
const char *ing_labelset_get(const ing_labelset_t *ls, const char *name);

/* ---------------------------------------------------------------- format.c */
typedef enum {
    ING_FMT_FOLDED = 0,
    ING_FMT_LINES,
    ING_FMT_PPROF,      /* raw body */
    ING_FMT_PPROF_FORM, /* multipart/form-data */
    ING_FMT_TRIE,
    ING_FMT_TREE,
    ING_FMT_JFR,
    ING_FMT_SPEEDSCOPE,
    ING_FMT_COUNT_,
} ing_format_t;

/* §2.4 selection order; either argument may be NULL. */
ing_format_t ing_format_select(const char *format, const char *content_type);
const char *ing_format_name(ing_format_t f);

/* ---------------------------------------------------------------- multipart.c */
typedef struct ing_part_s {
    const char *name;         /* Content-Disposition name, "" if none */
    const char *filename;     /* NULL when the part is not a file part */
    const char *content_type; /* NULL if absent */
    const uint8_t *data;      /* points into the body */
    size_t len;
} ing_part_t;

typedef struct ing_form_s {
    ing_part_t *parts;
    size_t n;
} ing_form_t;

/* The boundary parameter of a multipart/form-data Content-Type (arena copy). */
int ing_multipart_boundary(const char *content_type, lc_arena_t *arena, const char **boundary,
                           lc_status_t *st) LC_MUST_CHECK;
/* A boundary taken from a body that starts with "--boundary" (a pprof, raw or
 * gzipped, cannot start with "--"); LC_ENOTFOUND otherwise. */
int ing_multipart_sniff_boundary(const uint8_t *body, size_t len, lc_arena_t *arena,
                                 const char **boundary) LC_MUST_CHECK;
/* Splits body into parts (RFC 2046/7578; CRLF or bare-LF lines). Part data
 * points into body. Errors: invalid_argument saying what is malformed. */
int ing_multipart_parse(const uint8_t *body, size_t len, const char *boundary, lc_arena_t *arena,
                        ing_form_t *out, lc_status_t *st) LC_MUST_CHECK;
/* The first file part with the given field name, or NULL. */
const ing_part_t *ing_form_file(const ing_form_t *f, const char *name);

/* ---------------------------------------------------------------- tree.c */
/* The binary tree formats (pyroscope-api.md §2.7). Calls cb for every stack
 * with a value, as a folded key (frames root first, ';'-separated, so a name
 * holding ';' becomes several frames, as in Pyroscope); a tree node's key is
 * the path of names below the empty-named root, a trie node's key the
 * concatenation of the fragments from the root. cb may be NULL to only
 * validate; the key passed to it is valid during the call. Errors:
 * invalid_argument saying what is malformed, or "profile too large: ..."
 * past ING_TREE_MAX_NODES / ING_TREE_MAX_STACK_BYTES. */
int ing_tree_decode(const uint8_t *body, size_t len, bool trie, lc_stack_cb cb, void *data,
                    lc_status_t *st) LC_MUST_CHECK;

/* ---------------------------------------------------------------- speedscope.c */
/* One profile to store: the file's profiles with the same name, type, unit
 * and startValue merged (pyroscope-api.md §2.9), in startValue order. */
typedef struct ing_ss_profile_s {
    const char *name; /* the profile_name label ("" when absent) */
    const char *unit; /* none|nanoseconds|microseconds|milliseconds|seconds|bytes */
    bool evented;
    double start_value;
    void **members; /* the merged profiles' JSON objects, in file order */
    size_t n_members;
} ing_ss_profile_t;

typedef struct ing_speedscope_s {
    void *doc; /* the jansson document; released by ing_speedscope_fini */
    const char **frame_names;
    size_t *frame_lens;
    size_t n_frames;
    ing_ss_profile_t *profiles;
    size_t n_profiles;
} ing_speedscope_t;

/* A stack of frame indices (into frame_names), root first; valid during the
 * call. Returns 0, or -1 (with the status set) to stop. */
typedef int (*ing_frames_cb)(const uint32_t *frames, size_t n, int64_t value, void *data);

/* Parses and fully validates a speedscope file (every profile is walked once).
 * Pointers into the document stay valid until ing_speedscope_fini; the arrays
 * live in arena. Errors: invalid_argument saying what is wrong, or "profile
 * too large: ..." past the ING_SPEEDSCOPE_* caps. */
int ing_speedscope_parse(const uint8_t *body, size_t len, lc_arena_t *arena, ing_speedscope_t *out,
                         lc_status_t *st) LC_MUST_CHECK;
void ing_speedscope_fini(ing_speedscope_t *ss);
/* Every stack of profile i with a non-zero value, in the unit's ticks: 100 per
 * unit of time or per `none` sample (Pyroscope's precision multiplier), 1 per
 * byte. cb may be NULL (validation only). */
int ing_speedscope_stacks(const ing_speedscope_t *ss, size_t i, ing_frames_cb cb, void *data,
                          lc_status_t *st) LC_MUST_CHECK;
/* The sample rate Pyroscope uses for a profile when the request's sampleRate
 * is the default 100: ticks per second (0 for bytes: no rate scaling). */
uint64_t ing_speedscope_default_rate(const ing_ss_profile_t *p);

/* ---------------------------------------------------------------- stconfig.c */
typedef struct ing_stconfig_s {
    Ember__V1__SampleTypeConfig **v;
    size_t n;
} ing_stconfig_t;

/* The table used when a client sends no sample_type_config (§2.5). */
const ing_stconfig_t *ing_stconfig_builtin(void);
/* Parses the sample_type_config JSON object. A JSON null yields n == 0 and
 * *is_null set, which means "use the built-in table". */
int ing_stconfig_parse(const uint8_t *json, size_t len, lc_arena_t *arena, ing_stconfig_t *out,
                       bool *is_null, lc_status_t *st) LC_MUST_CHECK;
const Ember__V1__SampleTypeConfig *ing_stconfig_find(const ing_stconfig_t *c, const char *type);

/* ---------------------------------------------------------------- normalize.c */
/* `__name__` of a pprof uploaded to /ingest (§2.5), from its sample types. */
const char *ing_metric_name(const Google__V1__Profile *p, const ing_stconfig_t *cfg);

/* Profile type of a text/tree upload from the app-name suffix (§2.10). */
typedef struct ing_app_type_s {
    const char *metric; /* __name__ */
    const char *sample_type;
    const char *sample_unit;
    bool rate_scaled;    /* process_cpu / wall: values x period when sampleRate != 0 */
    const char *service; /* app name without the suffix (arena) */
} ing_app_type_t;
int ing_app_type(const char *app_name, lc_arena_t *arena, ing_app_type_t *out,
                 lc_status_t *st) LC_MUST_CHECK;

/* Label limits (pyroscope-api.md §3.3 item 3). */
typedef struct ing_label_limits_s {
    size_t max_names, max_name_bytes, max_value_bytes;
} ing_label_limits_t;

/* Push series labels: service_name default, relabel rules, sort, checks. */
int ing_push_labels_normalize(lc_labels_t *ls, const ing_label_limits_t *lim,
                              lc_status_t *st) LC_MUST_CHECK;
/* Drops empty values, sorts, then checks: what every /ingest series passes. */
int ing_labels_finish(lc_labels_t *ls, const ing_label_limits_t *lim,
                      lc_status_t *st) LC_MUST_CHECK;
/* The checks alone (labels must be sorted): __name__, duplicates, limits. */
int ing_labels_check(const lc_labels_t *ls, const ing_label_limits_t *lim,
                     lc_status_t *st) LC_MUST_CHECK;
/* Series labels of an /ingest upload (§2.5 / §2.10) in ls (initialised here). */
void ing_ingest_labels(lc_labels_t *ls, const char *metric, const char *spy, const char *service,
                       const ing_labelset_t *set, bool app_name_label);
/* True for labelset keys that become series labels. */
bool ing_label_allowed(const char *name);

/* ---------------------------------------------------------------- convert.c */
/* lc/folded.h's converter with the sample type an upload's app name gives
 * (ing_app_type): every stack format of /ingest goes through it (§2.10). */
lc_cv_t *ing_cv_new(const ing_app_type_t *t, uint64_t sample_rate, int64_t time_ns,
                    const lc_pprof_limits_t *lim, lc_status_t *st);
/* folded/lines text -> an uncompressed single-sample-type pprof in out. */
int ing_text_to_pprof(const uint8_t *body, size_t len, bool lines_format, const ing_app_type_t *t,
                      uint32_t sample_rate, int64_t time_ns, const lc_pprof_limits_t *lim,
                      lc_arena_t *arena, lc_buf_t *out, lc_status_t *st) LC_MUST_CHECK;

/* ---------------------------------------------------------------- spy.c */
/* pyspy/rbspy/scripting: function names become "<filename> <function>". */
bool ing_spy_rewrites_names(const char *spy);
int ing_spy_fix_names(Google__V1__Profile *p, const char *spy, lc_arena_t *arena) LC_MUST_CHECK;

/* ---------------------------------------------------------------- ingester.c */
typedef enum {
    ING_ROUTE_INGEST = 0,
    ING_ROUTE_PUSH = 1,
    ING_ROUTE_OTLP = 2,      /* ProfilesService/Export: OTLP's response, partial success */
    ING_ROUTE_OTLP_HTTP = 3, /* the same over OTLP/HTTP (application/x-protobuf replies) */
    ING_ROUTE_COUNT_,
} ing_route_t;

struct ing_s {
    uv_loop_t *loop;
    ing_opts_t opts;
    lc_transport_t *tr;
    lc_metrics_t *metrics;                     /* may be NULL */
    lc_metric_t *m_profiles[ING_ROUTE_COUNT_]; /* ember_ingest_profiles_total{route} */
    lc_metric_t *m_bytes;                      /* ember_ingest_bytes_total */
    lc_metric_t *m_samples;                    /* ember_ingest_samples_total */
    lc_metric_t *m_entry_bytes[2]; /* ember_stream_entry_bytes_total{form}: message, entry */
    lc_ratelimit_t *rate;          /* NULL: no per-tenant rate limit */
    lc_serieslimit_t *series;      /* NULL: no per-tenant series limit */
    /* Jobs waiting for room in the handover before publishing (publish.c;
     * loop thread), oldest first, and the timer that looks for room. */
    struct ing_job_s *parked_head, *parked_tail;
    uv_timer_t park_timer;
    bool park_timer_init, draining;
};

/* ---------------------------------------------------------------- admit.c */
/* Per-tenant ingestion rate (--ingest.rate-*): 0, or 429 with Retry-After set
 * on req and in st (the caller counts the rejection as "rate_limited"). */
int ing_rate_check(ing_t *ing, lc_http_req_t *req, const char *tenant, double profiles,
                   lc_status_t *st);

/* Per-tenant active series (--ingest.max-series-per-tenant): 0, or -1 with a
 * 429 in st when the job's new series would pass the tenant's maximum. */
int ing_series_check(ing_t *ing, const char *tenant, const uint64_t *series, size_t n,
                     lc_status_t *st);

/* Counts a rejected request under ember_ingest_rejected_total{reason}. */
void ing_count_rejected(ing_t *ing, const char *reason);
ing_label_limits_t ing_label_limits(const ing_t *ing);
/* The optional ingestion window (opts reject_older/newer_than_ns). */
int ing_check_window(const ing_t *ing, int64_t time_ns, int64_t now_ns,
                     lc_status_t *st) LC_MUST_CHECK;

/* ---------------------------------------------------------------- publish.c */
/* One request's accepted profiles, published together once `work` is done;
 * lives in the request arena. */

typedef struct ing_msg_s {
    uint8_t *data;
    size_t len;
    uint32_t partition;
    size_t samples;
    uint64_t series;                /* lc_labels_hash of its series */
    uint8_t id[LC_INGEST_ID_BYTES]; /* its ingest id: the transport's dedupe id */
    size_t weight;                  /* what it counts in the transport's backlog */
    const ing_decoded_t *decoded;   /* for a writer in this process; NULL: it decodes */
    bool handed;                    /* its decoded form is in the handover */
} ing_msg_t;

typedef struct ing_job_s {
    ing_t *ing;
    lc_http_req_t *req;
    ing_route_t route;
    ing_msg_t *msgs;
    size_t n_msgs, cap_msgs;
    const char *tenant;       /* every message's (one tenant per request) */
    lc_status_t refused;      /* the request was refused whole after `work` */
    lc_connect_codec_t codec; /* Push: the reply codec */
    lc_status_t partial;      /* Push: errors of the profiles that were rejected */
    size_t n_rejected;        /* ... and how many (OTLP partial success) */
    size_t pending;
    bool publishing;
    int status;                    /* first transport failure */
    struct ing_job_s *parked_next; /* in ing_t's parked jobs */
    int64_t parked_ns;             /* when it was parked (monotonic) */
} ing_job_t;

ing_job_t *ing_job_new(ing_t *ing, lc_http_req_t *req, ing_route_t route);
/* The pprof bytes to publish for a profile decoded from `body` (as the client
 * sent it) into `pb` (its protobuf bytes) and not changed since: over a wire
 * transport a gzip body itself, which the writer gunzips (cheaper than
 * compressing pb again, and as small); else pb. */
const uint8_t *ing_job_pprof_bytes(const ing_t *ing, const uint8_t *body, size_t body_len,
                                   const uint8_t *pb, size_t pb_len, size_t *len);
/* Wraps one validated pprof (uncompressed, or the gzip body it was decoded
 * from: ing_job_pprof_bytes) into an IngestProfile for the job.
 * labels must be sorted and checked; profile_id is NULL or
 * LC_STORE_PROFILE_ID_BYTES (Push's RawSample.ID); NULL gets a random UUID
 * (every stored profile has an id: exemplars name it). */
int ing_job_add(ing_job_t *job, const char *tenant, const lc_labels_t *labels, const uint8_t *pprof,
                size_t len, int64_t time_ns, const ing_stconfig_t *cfg, const uint8_t *profile_id,
                size_t n_samples, lc_status_t *st) LC_MUST_CHECK;
/* Whether the writer of this process takes the decoded form of what the job
 * publishes (the direct transport, which never retries nor persists a
 * message): ing_job_add_decoded then leaves the pprof bytes out. */
bool ing_job_takes_decoded(const ing_job_t *job);
/* ing_job_add for such a job: a message without pprof bytes, with p (checked
 * by lc_store_check_validated or lc_store_check_profile, which built ix)
 * attached for the writer; it counts `weight`, the pprof's decoded size, in
 * the backlog (the memory it stands for). Neither p nor ix may change until
 * the job is answered. */
int ing_job_add_decoded(ing_job_t *job, const char *tenant, const lc_labels_t *labels,
                        const lc_pprof_t *p, const lc_pprof_index_t *ix, size_t weight,
                        const ing_stconfig_t *cfg, const uint8_t *profile_id,
                        lc_status_t *st) LC_MUST_CHECK;
/* An arena of its own for the next profile's decoded form, which
 * ing_job_attach_decoded may then hand the writer over Redis (handover.h);
 * NULL when nothing would take it: decode into the request's arena. Its cap
 * is the request arena's default, so nothing fits here that would not fit there. */
lc_arena_t *ing_job_profile_arena(const ing_t *ing);
/* Over Redis, hands the writer of this process the decoded form of the
 * job's last message (p as checked, with the check's ix): when *own
 * (ing_job_profile_arena) holds both wholly, it goes to the handover with
 * them and *own becomes NULL. Without it (or past the arena) the writer
 * decodes the message's bytes. In process, ing_job_add_decoded does this. */
void ing_job_attach_decoded(ing_job_t *job, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                            lc_arena_t **own);
/* The routes' `after` (loop thread): publishes req->user's job, if any. Over
 * Redis, while the handover is crowded (ing_handover_crowded), it waits
 * first, behind the jobs already waiting, up to ING_PARK_MAX_NS: a
 * receiver that ran ahead of the writer of its process would leave it
 * entries it must decode again (issue 32). */
lc_http_result_t ing_publish_after(lc_http_req_t *req, void *data);
/* otlp_error.c: an error answer in the route's form: /ingest plain HTTP, OTLP/HTTP a
 * google.rpc.Status, Push and OTLP's Export a Connect/gRPC error. */
void ing_route_error(lc_http_req_t *req, ing_route_t route, const lc_status_t *st);

/* ---------------------------------------------------------------- routes */
lc_http_result_t ing_ingest_work(lc_http_req_t *req, void *data);
lc_http_result_t ing_push_work(lc_http_req_t *req, void *data);

/* A push-shaped request from the body: Push's own, or Parca's WriteRaw
 * translated (parca_write.c), in req->arena; codec as lc_connect_decode. */
typedef int (*ing_push_decode_fn)(lc_http_req_t *req, const Push__V1__PushRequest **out,
                                  lc_connect_codec_t *codec, lc_status_t *st);
/* Push's steps (push.c) for any push-shaped request: decode, tenant, rate,
 * labels and pprof checks, then the job the route's `after` publishes. */
lc_http_result_t ing_push_serve(lc_http_req_t *req, ing_t *ing, ing_push_decode_fn decode);
/* The same, answering as `route` does (OTLP's response for the OTLP routes). */
lc_http_result_t ing_push_serve_as(lc_http_req_t *req, ing_t *ing, ing_push_decode_fn decode,
                                   ing_route_t route);

/* parca_write.c: parca.profilestore.v1alpha1.ProfileStoreService. WriteRaw
 * and WriteArrow go through ing_push_serve; other methods answer
 * unimplemented. */
lc_http_result_t ing_parca_write_raw_work(lc_http_req_t *req, void *data);
lc_http_result_t ing_parca_write_arrow_work(lc_http_req_t *req, void *data);
/* parca_write_v1.c: Write, the bidirectional stream of the agent's v1 schema:
 * the interim hook asks for the stack traces, the handler stores both. */
lc_http_interim_t ing_parca_write_interim(const lc_http_req_t *req, void *data, lc_buf_t *out);
lc_http_result_t ing_parca_write_v1_work(lc_http_req_t *req, void *data);
/* parca_arrow.c: WriteArrow's Arrow IPC stream (the Parca Agent's v2 schema)
 * as a Push request in arena: one pprof per (series, profile type, period,
 * 10 s window). Pure (fuzzed); errors are invalid_argument saying the row and
 * what is wrong, or resource_exhausted past the arena. */
/* Write's two records (the Parca Agent's v1 schema): samples naming their
 * stacks by stacktrace_id, and the stack trace record holding them; the
 * same pprofs as WriteArrow's. */
int ing_parca_v1_to_push(const uint8_t *samples, size_t samples_len, const uint8_t *stacks,
                         size_t stacks_len, const lc_pprof_limits_t *lim, lc_arena_t *a,
                         Push__V1__PushRequest *out, lc_status_t *st) LC_MUST_CHECK;
int ing_parca_arrow_to_push(const uint8_t *ipc, size_t len, const lc_pprof_limits_t *lim,
                            lc_arena_t *a, Push__V1__PushRequest *out,
                            lc_status_t *st) LC_MUST_CHECK;
lc_http_result_t ing_parca_write_unimplemented(lc_http_req_t *req, void *data);

/* otlp.c: OTLP profiles (opentelemetry.proto.collector.profiles.v1development).
 * Each profile of an ExportProfilesServiceRequest becomes one pprof per
 * service name, with Pyroscope's labels, and goes through ing_push_serve. */
#define ING_OTLP_EXPORT                                                                            \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define ING_OTLP_HTTP "/v1development/profiles"
#define ING_OTLP_MAX_PROFILES 65536 /* pprofs built from one request */
/* What ing_otlp_to_push makes: the Push request, and the profiles it could
 * not convert (reported in partial_success with the push's own rejects). */
typedef struct ing_otlp_push_s {
    Push__V1__PushRequest push;
    size_t rejected;
    lc_status_t why; /* the first conversion error */
} ing_otlp_push_t;
/* Converts a decoded request into a Push request in arena (pure; fuzzed).
 * *out is &ing_otlp_push_t.push. */
struct Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest;
int ing_otlp_to_push(
    const struct
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest *in,
    lc_arena_t *a, const Push__V1__PushRequest **out, lc_status_t *st) LC_MUST_CHECK;
/* ProfilesService/Export (gRPC, gRPC-Web, Connect) and OTLP/HTTP. */
lc_http_result_t ing_otlp_export_work(lc_http_req_t *req, void *data);
lc_http_result_t ing_otlp_http_work(lc_http_req_t *req, void *data);
/* OTLP/HTTP's error answer: a google.rpc.Status in the request's encoding
 * (JSON for application/json, else protobuf) with the code's HTTP status
 * (400 bad data; 429 and 503 retryable, with Retry-After where set). */
void ing_otlp_http_error(lc_http_req_t *req, const lc_status_t *st);
#define ING_PARCA_STORE "/parca.profilestore.v1alpha1.ProfileStoreService/"

#endif
