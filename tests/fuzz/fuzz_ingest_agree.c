/*
 * fuzz_ingest_agree.c — the receivers and the writer agree (issue 25): a pprof
 * (raw or gzipped) that a receiver accepts — decoded and validated under the
 * default limits, then lc_store_check_validated — is wrapped in an
 * IngestProfile and handed to the writer's apply path over a real LMDB store
 * in a temporary directory. Any writer rejection aborts: a failed batch, or
 * the message set aside as one that cannot be applied.
 *
 * The message's labels make it a memory profile, so the server-side delta
 * rule runs too (its state lives across inputs, as in a writer). One store
 * and writer serve the whole run; each input is a batch of its own. Inputs
 * starting with 'B' describe a profile's samples instead (fz_build), so that
 * the sums the store forms are fuzzed directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "write_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_ARENA_CAP ((size_t)256 << 20)
#define FZ_TIME 1700000000000000000LL /* what a receiver stamps a profile without a time */
#define FZ_TENANT "anonymous"

typedef struct fz_writer_s {
    lc_store_t *store;
    ing_writer_t *w;
    lc_metrics_t *metrics;
    lc_metric_t *written, *duplicate, *undecodable;
    uint64_t next_id;
} fz_writer_t;

static void fz_die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_ingest_agree: %s: %s\n", what, detail);
    abort();
}

static lc_metric_t *fz_result(lc_metrics_t *m, const char *result)
{
    char labels[64];
    snprintf(labels, sizeof(labels), "result=\"%s\"", result);
    return lc_metrics_counter(m, "ember_writer_profiles_total",
                              "Profiles handled by the writer, by result", labels);
}

static fz_writer_t fz_state;
static char fz_dir[64];

/* Messages the writer applied: written, or replays of ones it had. */
static double fz_applied(const fz_writer_t *w)
{
    return lc_metric_value(w->written) + lc_metric_value(w->duplicate);
}

/* At exit: how many inputs reached the writer, and the store removed. */
static void fz_cleanup(void)
{
    fprintf(stderr, "fuzz_ingest_agree: %.0f profiles applied by the writer\n",
            fz_applied(&fz_state));
    ing_writer_free(fz_state.w);
    lc_store_close(fz_state.store);
    lc_metrics_free(fz_state.metrics);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fz_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_ingest_agree: could not remove %s\n", fz_dir);
}

/* The store lives in a temporary directory for the process's life. */
static fz_writer_t *fz_writer(void)
{
    char *dir = fz_dir;
    if (fz_state.w)
        return &fz_state;
    snprintf(dir, sizeof(fz_dir), "/tmp/ember-fuzz-agree-XXXXXX");
    if (!mkdtemp(dir))
        fz_die("mkdtemp", dir);
    lc_store_opts_t o = {.dir = dir};
    fz_state.metrics = lc_metrics_new();
    if (lc_store_open(&o, &fz_state.store) != 0 ||
        ing_writer_new(fz_state.store, fz_state.metrics, &fz_state.w) != 0)
        fz_die("cannot open the store", dir);
    fz_state.written = fz_result(fz_state.metrics, "written");
    fz_state.duplicate = fz_result(fz_state.metrics, "duplicate");
    fz_state.undecodable = fz_result(fz_state.metrics, "undecodable");
    atexit(fz_cleanup);
    return &fz_state;
}

/* What a receiver does: decode, validate (normalising), the shared check. */
static lc_pprof_t *fz_receive(const uint8_t *data, size_t size, lc_arena_t *arena)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = (size_t)16 << 20;
    lc_pprof_t *p;
    lc_status_t st = {0};
    bool changed;
    if (lc_pprof_decode(data, size, &lim, arena, &p, &st) != 0 ||
        lc_pprof_validate_normalized(p, &lim, &changed, &st) != 0)
        return NULL;
    p->time_nanos = FZ_TIME;
    if (lc_store_check_validated(p, FZ_TENANT, FZ_TIME, arena, NULL, &st) != 0)
        return NULL;
    return p;
}

/* The accepted profile as the receiver publishes it. */
static uint8_t *fz_message(fz_writer_t *fw, const lc_buf_t *pprof, lc_arena_t *arena, size_t *len)
{
    static const char *const kv[] = {"__name__", "memory", "service_name", "fuzz"};
    Types__V1__LabelPair pairs[2], *pp[2];
    for (size_t i = 0; i < 2; i++) {
        types__v1__label_pair__init(&pairs[i]);
        pairs[i].name = (char *)kv[2 * i];
        pairs[i].value = (char *)kv[2 * i + 1];
        pp[i] = &pairs[i];
    }
    uint8_t id[16] = {0};
    fw->next_id++;
    memcpy(id, &fw->next_id, sizeof(fw->next_id));
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = FZ_TENANT;
    m.ingest_id = (ProtobufCBinaryData){sizeof(id), id};
    m.labels = pp;
    m.n_labels = 2;
    m.pprof = (ProtobufCBinaryData){pprof->len, pprof->data};
    m.time_nanos = FZ_TIME;
    *len = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *out = lc_arena_alloc(arena, *len ? *len : 1);
    if (out)
        protobuf_c_message_pack(&m.base, out);
    return out;
}

/* An input starting with 'B' describes a profile instead of being one, so
 * that most inputs reach the writer with values chosen by the fuzzer: byte 1
 * picks 1-3 sample types (memory's alloc_* first, so the delta rule runs),
 * then per sample a stack byte (which of four frames, leaf first), a label
 * byte (none, k=a, k=b or a trace_id, which does not split series) and one
 * little-endian int64 per type. Built as a converter builds (a repeated
 * stack's wrapped sum is refused, as the receivers do), then encoded. */
static bool fz_build(const uint8_t *data, size_t size, lc_buf_t *out)
{
    static const char *const types[][2] = {
        {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"cpu", "nanoseconds"}};
    static const char *const labels[][2] = {{"k", "a"}, {"k", "b"}, {"trace_id", "1"}};
    if (size < 2 || data[0] != 'B')
        return false;
    size_t n_types = 1 + data[1] % 3, width = 2 + 8 * n_types;
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    for (size_t t = 0; t < n_types; t++)
        lc_pprof_builder_sample_type(b, types[t][0], types[t][1]);
    uint64_t locs[4];
    char name[2] = {'a', 0};
    for (size_t i = 0; i < 4; i++, name[0]++) {
        lc_pprof_line_t line = {lc_pprof_builder_function(b, name, name, "f.c", 1), 1};
        locs[i] = lc_pprof_builder_location(b, 0, 0, &line, 1);
    }
    for (const uint8_t *at = data + 2; at + width <= data + size; at += width) {
        uint64_t stack[4];
        size_t depth = 0;
        for (size_t i = 0; i < 4; i++)
            if (at[0] & (1u << i))
                stack[depth++] = locs[i];
        int64_t values[3];
        memcpy(values, at + 2, 8 * n_types);
        size_t label = at[1] % 4;
        lc_pprof_builder_sample(b, stack, depth, values, label ? labels[label - 1] : NULL,
                                label ? 1 : 0);
    }
    bool ok = !lc_pprof_builder_sum_wrapped(b) && lc_pprof_builder_encode(b, false, out) == 0;
    lc_pprof_builder_free(b);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_writer_t *fw = fz_writer();
    lc_arena_t *arena = lc_arena_new(FZ_ARENA_CAP);
    lc_buf_t built;
    lc_buf_init(&built, LC_BUF_UNLIMITED);
    if (fz_build(data, size, &built)) {
        data = built.data;
        size = built.len;
    } else if (size && data[0] == 'B') {
        size = 0; /* a description the converters would refuse */
    }
    lc_pprof_t *p = size ? fz_receive(data, size, arena) : NULL;
    lc_buf_t pprof;
    lc_buf_init(&pprof, LC_BUF_UNLIMITED);
    if (p && lc_pprof_encode(p, false, &pprof) != 0)
        fz_die("encode", "an accepted profile does not encode");
    size_t len = 0;
    uint8_t *msg = p ? fz_message(fw, &pprof, arena, &len) : NULL;
    if (msg) {
        lc_transport_msg_t m = {msg, len, ""};
        double undecodable = lc_metric_value(fw->undecodable), applied = fz_applied(fw);
        int rc = ing_writer_consume(&m, 1, fw->w);
        if (rc != 0)
            fz_die("the writer failed a batch the receiver accepted", lc_strerror(rc));
        if (lc_metric_value(fw->undecodable) != undecodable)
            fz_die("the writer set aside a message the receiver accepted", "see its log line");
        if (fz_applied(fw) <= applied)
            fz_die("the writer did not apply a message the receiver accepted", "no result");
    }
    lc_buf_fini(&pprof);
    lc_buf_fini(&built);
    lc_arena_free(arena);
    return 0;
}
