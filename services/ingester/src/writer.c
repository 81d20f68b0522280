/*
 * writer.c — applies batches of ember.v1.IngestProfile to the store, on the
 * transport's consumer thread (the only thread that writes).
 *
 * One store write batch per consume call, committed once. Per message:
 * decode it, once — the stream entry (lean, zstd, or a bare message:
 * lc/transport_entry.h), the IngestProfile and its pprof (validated at the
 * edge) — on the decoder thread, one message ahead of the writes; skip it if
 * its ingest id was applied before (replays are idempotent), split its samples into groups by
 * string sample labels (split.c), and write one series per group and sample type with the internal
 * labels of series.c; each of them keeps the message's profile id (Push's RawSample.ID), if any.
 * The server-side delta rule (delta.c) may replace values or drop a profile.
 *
 * One message never fails the others. A message that cannot be decoded, or
 * that the store refuses (an input-class error: a sum over int64, a time out
 * of range...; whatever the receivers let through, from this ember or
 * another version), can never succeed: it is set aside alone (reject_err,
 * lc/transport.h) and the batch is redone without it, at most once per
 * message; the transport answers its publisher or moves it to a dead-letter
 * stream. A storage failure (LMDB, I/O) aborts the batch and returns <0 so
 * the transport redelivers all of it. Every abort discards the delta state
 * the batch staged.
 *
 * Each applied id is recorded with the message's delivery id (stream and
 * entry) and the keys of what it wrote, so that a consumer that lost the
 * entry to another one can forget it (ing_writer_forget; the protocol is in
 * docs/internals/redis.md).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handover.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/transport_entry.h"
#include "rules_eval.h"
#include "write_int.h"

#define WRITER_ARENA_CAP ((size_t)4 << 30) /* per message; virtual until used */
#define WRITER_DELTA_MAX_POINTS ((size_t)4 << 20)

/* Test-only crash points (EMBER_FAILPOINT), to make the window between a
 * durable commit and its XACK deterministic in integration tests. */
typedef enum {
    WR_FAIL_NONE,
    WR_FAIL_EXIT_AFTER_COMMIT,
    WR_FAIL_STOP_AFTER_COMMIT,
} wr_failpoint_t;

/* Where a batch's time goes (ember_writer_phase_seconds_total{phase}). */
typedef enum {
    WR_PHASE_DECODE, /* lean entry, IngestProfile and pprof */
    WR_PHASE_WRITE,  /* split, delta, store writes */
    WR_PHASE_COMMIT, /* the LMDB commit */
    WR_PHASES,
} wr_phase_t;

typedef struct wr_msg_s wr_msg_t;

/* One message being decoded or written: its arena (everything decoded from
 * it and the write's scratch) and entry decoder. A ring of them, posted and
 * decoded in ring order, so that the decoder thread keeps up to
 * WR_SLOTS - 1 messages ahead of the writes: one ahead was not enough, a
 * large profile's decode then stalled the writer behind it. */
typedef struct wr_slot_s {
    lc_arena_t *arena;
    lc_entry_decoder_t *entries;
    lc_transport_msg_t *msg; /* its reject fields are set here, the rest is read */
    bool decoded;            /* wr_decode's verdict */
    bool posted, done;       /* guarded by the writer's mu */
    struct wr_msg_s *c;      /* where the decode goes */
} wr_slot_t;

#define WR_SLOTS 4

struct ing_writer_s {
    lc_store_t *store;
    ing_delta_t *delta;
    wr_slot_t slots[WR_SLOTS];
    size_t ring; /* messages posted so far: the next one goes to slots[ring % WR_SLOTS] */
    lc_pprof_limits_t limits;
    /* the decoder thread: takes a posted slot, decodes, marks it done */
    uv_thread_t decoder;
    uv_mutex_t mu;
    uv_cond_t cond;
    bool quit; /* guarded by mu */
    lc_metric_t *m_written, *m_duplicate, *m_undecodable, *m_rejected, *m_delta_dropped;
    lc_metric_t *m_forgotten;
    lc_metric_t *m_phase[WR_PHASES], *m_batch;
    wr_failpoint_t failpoint; /* fires once */
    size_t batch_written;     /* messages written by the current batch */
    ing_rules_t *rules;       /* recording rules to observe; NULL: none */
    ing_handover_t *handover; /* profiles this process's receivers decoded; NULL: none */
};

struct wr_msg_s {
    ing_writer_t *w;
    lc_arena_t *arena;
    lc_entry_decoder_t *entries;
    lc_store_txn_t *txn;
    const Ember__V1__IngestProfile *m;
    const lc_pprof_t *p;
    const lc_pprof_index_t *ix;
    ing_handover_item_t *held; /* where p and ix live, when the handover had them */
    const char *metric;
};

static lc_metric_t *wr_counter(lc_metrics_t *m, const char *result)
{
    char labels[64];
    snprintf(labels, sizeof(labels), "result=\"%s\"", result);
    return m ? lc_metrics_counter(m, "ember_writer_profiles_total",
                                  "Profiles handled by the writer, by result", labels)
             : NULL;
}

static wr_failpoint_t wr_failpoint_from_env(void)
{
    const char *fp = getenv("EMBER_FAILPOINT");
    if (!fp || !*fp)
        return WR_FAIL_NONE;
    if (strcmp(fp, "exit-after-commit") == 0)
        return WR_FAIL_EXIT_AFTER_COMMIT;
    if (strcmp(fp, "stop-after-commit") == 0)
        return WR_FAIL_STOP_AFTER_COMMIT;
    LC_LOG_WARN("writer: unknown EMBER_FAILPOINT ignored value=%s", fp);
    return WR_FAIL_NONE;
}

/* A batch that wrote something is durable and not yet acked: the window a
 * test wants to crash or pause in. */
static void wr_failpoint_hit(ing_writer_t *w)
{
    wr_failpoint_t fp = w->failpoint;
    if (fp == WR_FAIL_NONE || w->batch_written == 0)
        return;
    w->failpoint = WR_FAIL_NONE;
    LC_LOG_WARN("writer: failpoint %s after a durable batch msgs=%zu",
                fp == WR_FAIL_EXIT_AFTER_COMMIT ? "exit" : "stop", w->batch_written);
    if (fp == WR_FAIL_EXIT_AFTER_COMMIT)
        _exit(17);
    raise(SIGSTOP);
}

static void wr_register_phases(ing_writer_t *w, lc_metrics_t *m)
{
    static const char *const names[WR_PHASES] = {"decode", "write", "commit"};
    if (!m)
        return;
    for (int i = 0; i < WR_PHASES; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "phase=\"%s\"", names[i]);
        w->m_phase[i] = lc_metrics_counter(
            m, "ember_writer_phase_seconds_total",
            "Writer time by phase: decode (entry, message, pprof), write (store), commit", labels);
    }
    static const double bounds[] = {1, 4, 16, 64, 256, 1024};
    w->m_batch = lc_metrics_histogram(m, "ember_writer_batch_messages",
                                      "Messages per batch (one store transaction each)", "", bounds,
                                      LC_ARRAY_LEN(bounds));
}

static void wr_phase_add(ing_writer_t *w, wr_phase_t phase, uint64_t since_ns)
{
    lc_metric_add(w->m_phase[phase], (double)((uint64_t)lc_monotonic_ns() - since_ns) / 1e9);
}

static bool wr_decode(wr_msg_t *c, const lc_transport_msg_t *msg);

/* The decoder thread: decodes the posted slots in ring order. */
static void wr_decoder_main(void *arg)
{
    ing_writer_t *w = arg;
    size_t next = 0;
    uv_mutex_lock(&w->mu);
    for (;;) {
        wr_slot_t *s = &w->slots[next % WR_SLOTS];
        bool ready = s->posted && !s->done;
        if (!ready && w->quit)
            break;
        if (!ready) {
            uv_cond_wait(&w->cond, &w->mu);
            continue;
        }
        uv_mutex_unlock(&w->mu);
        uint64_t t0 = (uint64_t)lc_monotonic_ns();
        s->decoded = wr_decode(s->c, s->msg);
        wr_phase_add(w, WR_PHASE_DECODE, t0);
        uv_mutex_lock(&w->mu);
        s->done = true;
        next++;
        uv_cond_broadcast(&w->cond);
    }
    uv_mutex_unlock(&w->mu);
}

static int wr_start_decoder(ing_writer_t *w)
{
    for (int i = 0; i < WR_SLOTS; i++) {
        w->slots[i].arena = lc_arena_new(WRITER_ARENA_CAP);
        w->slots[i].entries = lc_entry_decoder_new(0);
        if (!w->slots[i].entries)
            return -ENOMEM;
    }
    int rc = uv_mutex_init(&w->mu);
    if (rc)
        return rc;
    rc = uv_cond_init(&w->cond);
    if (rc) {
        uv_mutex_destroy(&w->mu);
        return rc;
    }
    rc = uv_thread_create(&w->decoder, wr_decoder_main, w);
    if (rc) {
        uv_cond_destroy(&w->cond);
        uv_mutex_destroy(&w->mu);
    }
    return rc;
}

int ing_writer_new(lc_store_t *store, lc_metrics_t *metrics, ing_writer_t **out)
{
    ing_writer_t *w = lc_xcalloc(1, sizeof(*w));
    w->store = store;
    w->delta = ing_delta_new(WRITER_DELTA_MAX_POINTS);
    /* Messages hold pprofs the edge validated under its own limits; the
     * writer only decodes, so it must not refuse what the edge accepted. */
    lc_pprof_limits_default(&w->limits);
    w->limits.max_decompressed_bytes = SIZE_MAX;
    w->limits.max_samples = 0;
    w->m_written = wr_counter(metrics, "written");
    w->m_duplicate = wr_counter(metrics, "duplicate");
    w->m_undecodable = wr_counter(metrics, "undecodable");
    w->m_rejected = wr_counter(metrics, "rejected");
    w->m_delta_dropped = wr_counter(metrics, "delta_dropped");
    w->m_forgotten = wr_counter(metrics, "forgotten");
    w->failpoint = wr_failpoint_from_env();
    wr_register_phases(w, metrics);
    int rc = wr_start_decoder(w);
    if (rc) {
        for (int i = 0; i < WR_SLOTS; i++) {
            lc_arena_free(w->slots[i].arena);
            lc_entry_decoder_free(w->slots[i].entries);
        }
        ing_delta_free(w->delta);
        lc_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void ing_writer_free(ing_writer_t *w)
{
    if (!w)
        return;
    uv_mutex_lock(&w->mu);
    w->quit = true;
    uv_cond_broadcast(&w->cond);
    uv_mutex_unlock(&w->mu);
    uv_thread_join(&w->decoder);
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->mu);
    for (int i = 0; i < WR_SLOTS; i++) {
        lc_arena_free(w->slots[i].arena);
        lc_entry_decoder_free(w->slots[i].entries);
    }
    ing_delta_free(w->delta);
    lc_free(w);
}

/* ---------------------------------------------------------------- one series */

/* Delta values for the series, or NULL to store as is; *drop when the rule
 * swallows this profile (first of the series, or a reset). */
static const int64_t *wr_delta(wr_msg_t *c, const lc_labels_t *ls, size_t type_idx,
                               const ing_group_t *g, bool *drop)
{
    *drop = false;
    const char *st = ing_pprof_str(c->p, c->p->sample_type[type_idx]->type);
    if (!ing_delta_applies(c->metric, st, c->m->delta_disabled, c->p->duration_nanos))
        return NULL;
    size_t n = g->n_samples;
    uint64_t *keys = lc_arena_calloc(c->arena, n ? n : 1, sizeof(*keys));
    int64_t *vals = lc_arena_calloc(c->arena, n ? n : 1, sizeof(*vals));
    int64_t *out = lc_arena_calloc(c->arena, n ? n : 1, sizeof(*out));
    if (!keys || !vals || !out)
        return NULL; /* over the arena cap: store the cumulative values */
    for (size_t i = 0; i < n; i++) {
        const Google__V1__Sample *s = c->p->sample[g->samples[i]];
        keys[i] = ing_stack_key(c->p, s, c->ix);
        vals[i] = s->value[type_idx];
    }
    uint64_t fp = lc_labels_hash(ls) ^ lc_hash64(c->m->tenant, strlen(c->m->tenant), 1);
    *drop = !ing_delta_apply(c->w->delta, fp, keys, vals, n, out);
    return out;
}

/* Hands a written series to the recording rules (counted at commit). */
static void wr_observe_rules(wr_msg_t *c, const lc_store_write_t *wr)
{
    ing_rules_series_t rs = {.tenant = wr->tenant,
                             .labels = wr->labels,
                             .time_ns = wr->time_ns,
                             .profile = c->p,
                             .index = c->ix,
                             .type_idx = wr->value_index,
                             .samples = wr->samples,
                             .n_samples = wr->n_samples,
                             .values = wr->values};
    ing_rules_observe(c->w->rules, &rs);
}

static int wr_series(wr_msg_t *c, const lc_labels_t *base, const ing_group_t *g, size_t type_idx)
{
    lc_labels_t ls;
    lc_labels_copy(&ls, base);
    for (size_t i = 0; i < g->n_labels; i++) {
        if (!lc_labels_get(&ls, g->labels[i].name)) /* series labels win */
            lc_labels_add(&ls, g->labels[i].name, g->labels[i].value);
    }
    ing_series_labels(&ls, c->p, type_idx, c->arena);
    bool drop;
    const int64_t *values = wr_delta(c, &ls, type_idx, g, &drop);
    int rc = 0;
    if (drop) {
        lc_metric_add(c->w->m_delta_dropped, 1);
    } else {
        lc_store_write_t wr = {
            .tenant = c->m->tenant,
            .labels = &ls,
            .time_ns = c->m->time_nanos,
            .profile = c->p,
            .index = c->ix,
            .value_index = type_idx,
            .samples = g->samples,
            .n_samples = g->n_samples,
            .values = values,
            .span_ids = g->has_span_ids ? g->span_ids : NULL,
            .profile_id = c->m->profile_id.len ? c->m->profile_id.data : NULL,
        };
        rc = lc_store_write_profile(c->txn, &wr);
        if (rc == 0 && c->w->rules)
            wr_observe_rules(c, &wr);
    }
    lc_labels_fini(&ls);
    return rc;
}

/* ---------------------------------------------------------------- one message */

static void wr_base_labels(const Ember__V1__IngestProfile *m, lc_labels_t *ls)
{
    lc_labels_init(ls);
    for (size_t i = 0; i < m->n_labels; i++)
        lc_labels_set(ls, m->labels[i]->name, m->labels[i]->value);
    lc_labels_sort(ls);
}

static int wr_profile(wr_msg_t *c)
{
    ing_group_t *groups;
    size_t n_groups;
    int rc = ing_split_samples(c->p, c->arena, &groups, &n_groups);
    if (rc < 0)
        return rc;
    lc_labels_t base;
    wr_base_labels(c->m, &base);
    c->metric = lc_labels_get(&base, "__name__");
    /* One pprof becomes several series: pinning lets the store resolve each
     * symbol and stack once for all of them. */
    lc_store_write_pin(c->txn, c->p, c->ix);
    for (size_t g = 0; g < n_groups && rc == 0; g++) {
        for (size_t t = 0; t < c->p->n_sample_type && rc == 0; t++)
            rc = wr_series(c, &base, &groups[g], t);
    }
    lc_store_write_unpin(c->txn);
    lc_labels_fini(&base);
    return rc;
}

/* The message's pprof and its index: what the receiver of this process
 * decoded and checked (msg->local in process; over Redis what it left in the
 * handover under the message's ingest id), else decoded here from the
 * message and checked as the receivers do, since what the check refuses
 * could only fail the write. NULL, or why it can never be applied. */
static const char *wr_decode_pprof(wr_msg_t *c, const lc_transport_msg_t *msg, lc_status_t *st)
{
    const ing_decoded_t *local = msg->local;
    if (local) {
        c->p = local->profile;
        c->ix = local->index;
        return NULL;
    }
    const ProtobufCBinaryData *id = &c->m->ingest_id;
    c->held = c->w->handover ? ing_handover_take(c->w->handover, id->data, id->len) : NULL;
    if (c->held) {
        c->p = ing_handover_profile(c->held);
        c->ix = ing_handover_index(c->held);
        return NULL;
    }
    lc_pprof_t *p;
    lc_pprof_index_t *ix;
    if (lc_pprof_decode(c->m->pprof.data, c->m->pprof.len, &c->w->limits, c->arena, &p, st) < 0 ||
        lc_store_check_profile(p, c->m->tenant, c->m->time_nanos, c->arena, &ix, st) < 0)
        return st->msg;
    c->p = p;
    c->ix = ix;
    return NULL;
}

/* Decodes the entry (either format), the message and its pprof, once each,
 * and checks it as the receivers did; false (logged) when it never can be
 * applied. */
static bool wr_decode(wr_msg_t *c, const lc_transport_msg_t *msg)
{
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(c->arena, &alloc);
    const uint8_t *data;
    size_t len;
    const char *why = NULL;
    c->m = NULL;
    if (lc_entry_decode(c->entries, msg->data, msg->len, &data, &len, &why) == 0)
        c->m = (const Ember__V1__IngestProfile *)protobuf_c_message_unpack(
            &ember__v1__ingest_profile__descriptor, &alloc, len, data);
    lc_status_t st = {0};
    why = why                    ? why
          : !c->m                ? "malformed IngestProfile"
          : !c->m->ingest_id.len ? "no ingest id"
          : c->m->profile_id.len && c->m->profile_id.len != LC_STORE_PROFILE_ID_BYTES
              ? "profile id is not 16 bytes"
              : NULL;
    if (!why)
        why = wr_decode_pprof(c, msg, &st);
    if (why)
        LC_LOG_ERROR("writer: skipping a message that cannot be applied id=%s err=\"%s\"",
                     msg->id ? msg->id : "", why);
    return why == NULL;
}

/* A decoded message: skipped when applied before, else written and recorded. */
static int wr_apply(ing_writer_t *w, lc_store_txn_t *txn, wr_msg_t *cp,
                    const lc_transport_msg_t *msg)
{
    wr_msg_t c = *cp;
    const ProtobufCBinaryData *id = &c.m->ingest_id;
    bool applied;
    int rc = lc_store_write_is_applied(txn, c.m->time_nanos, id->data, id->len, &applied);
    if (rc == 0 && applied) {
        lc_metric_add(w->m_duplicate, 1);
        return 0;
    }
    if (rc == 0)
        rc = wr_profile(&c);
    if (rc == 0)
        rc = lc_store_write_applied(txn, c.m->time_nanos, id->data, id->len, msg->delivery);
    if (rc == 0) {
        lc_metric_add(w->m_written, 1);
        w->batch_written++;
    }
    return rc;
}

/* Hands message msg to the decoder thread, into slot s. */
static void wr_post(ing_writer_t *w, wr_slot_t *s, wr_msg_t *c, lc_transport_msg_t *msg)
{
    *c = (wr_msg_t){.w = w, .arena = s->arena, .entries = s->entries};
    uv_mutex_lock(&w->mu);
    s->msg = msg;
    s->c = c;
    s->done = false;
    s->posted = true;
    uv_cond_broadcast(&w->cond);
    uv_mutex_unlock(&w->mu);
}

/* Waits for slot s's decode; the slot is free again afterwards. */
static void wr_wait(ing_writer_t *w, wr_slot_t *s)
{
    uv_mutex_lock(&w->mu);
    while (s->posted && !s->done)
        uv_cond_wait(&w->cond, &w->mu);
    s->posted = false;
    uv_mutex_unlock(&w->mu);
}

/* Frees what slot s's message was decoded into: the slot is reused next. */
static void wr_release(wr_slot_t *s, wr_msg_t *c)
{
    lc_arena_reset(s->arena);
    ing_handover_item_free(c->held);
    c->held = NULL;
}

/* Writes a decoded message (its slot is released afterwards). */
static int wr_message(ing_writer_t *w, lc_store_txn_t *txn, wr_slot_t *s, wr_msg_t *c)
{
    int rc = 0;
    if (!s->decoded) {
        lc_metric_add(w->m_undecodable, 1);
        s->msg->reject_err = LC_ECORRUPT; /* final: nothing of it was written */
        s->msg->reject_reason = lc_transport_reject_text(LC_ECORRUPT);
    } else {
        c->txn = txn;
        uint64_t t0 = (uint64_t)lc_monotonic_ns();
        rc = wr_apply(w, txn, c, s->msg);
        wr_phase_add(w, WR_PHASE_WRITE, t0);
    }
    wr_release(s, c);
    return rc;
}

/* The messages of the batch not set aside yet, in order. */
static size_t wr_todo(const lc_transport_msg_t *msgs, size_t n, size_t *todo)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].reject_err)
            todo[m++] = i;
    return m;
}

/* Every message of the batch not set aside, decoded up to WR_SLOTS - 1
 * ahead on the decoder thread. After a failure (*failed: its message)
 * nothing more is posted, and what was posted is waited for (the decoder
 * thread must never touch a slot the next batch reuses). */
static int wr_messages(ing_writer_t *w, lc_store_txn_t *txn, lc_transport_msg_t *msgs, size_t n,
                       size_t *failed)
{
    size_t *todo = lc_xmalloc((n ? n : 1) * sizeof(*todo));
    size_t m = wr_todo(msgs, n, todo);
    wr_msg_t cs[WR_SLOTS];
    size_t posted = 0;
    int rc = 0;
    for (size_t i = 0; i < m && (rc == 0 || i < posted); i++) {
        for (; rc == 0 && posted < m && posted < i + WR_SLOTS; posted++) {
            size_t k = (w->ring + posted) % WR_SLOTS;
            wr_post(w, &w->slots[k], &cs[k], &msgs[todo[posted]]);
        }
        size_t k = (w->ring + i) % WR_SLOTS;
        wr_wait(w, &w->slots[k]);
        if (rc == 0) {
            rc = wr_message(w, txn, &w->slots[k], &cs[k]);
            if (rc)
                *failed = todo[i];
        } else {
            wr_release(&w->slots[k], &cs[k]);
        }
    }
    w->ring += posted;
    lc_free(todo);
    return rc;
}

/* One transaction over the batch's messages not set aside. On failure,
 * *failed names the message being applied, or stays SIZE_MAX (the
 * transaction itself failed). */
static int wr_batch(ing_writer_t *w, lc_transport_msg_t *msgs, size_t n, size_t *failed)
{
    lc_store_txn_t *txn;
    int rc = lc_store_write_begin(w->store, &txn);
    if (rc)
        return rc;
    w->batch_written = 0;
    rc = wr_messages(w, txn, msgs, n, failed);
    if (rc == 0) {
        *failed = SIZE_MAX;
        uint64_t t0 = (uint64_t)lc_monotonic_ns();
        rc = lc_store_write_commit(txn);
        wr_phase_add(w, WR_PHASE_COMMIT, t0);
    } else {
        lc_store_write_abort(txn);
    }
    if (rc == 0)
        ing_delta_commit(w->delta);
    else
        ing_delta_discard(w->delta);
    if (w->rules && rc == 0)
        ing_rules_commit(w->rules);
    else if (w->rules)
        ing_rules_discard(w->rules);
    if (rc == 0)
        wr_failpoint_hit(w);
    return rc;
}

/* Errors that say the message itself is wrong: it would fail the same way
 * in any batch, on any retry. Storage errors (LC_ESTORE: LMDB, a full map;
 * -errno) say nothing about the message. */
static bool wr_input_error(int rc)
{
    return rc == LC_EINPUT || rc == LC_ETOOBIG || rc == LC_EUNSUPPORTED;
}

static void wr_set_aside(ing_writer_t *w, lc_transport_msg_t *msg, int rc, size_t n)
{
    msg->reject_err = rc;
    msg->reject_reason = lc_transport_reject_text(rc);
    lc_metric_add(w->m_rejected, 1);
    LC_LOG_ERROR("writer: setting aside a message that cannot be applied, redoing its batch "
                 "without it id=%s msgs=%zu err=\"%s\"",
                 msg->id ? msg->id : "", n, lc_strerror(rc));
}

void ing_writer_set_rules(ing_writer_t *w, ing_rules_t *rules)
{
    w->rules = rules;
}

void ing_writer_set_handover(ing_writer_t *w, ing_handover_t *h)
{
    w->handover = h;
}

int ing_writer_consume(lc_transport_msg_t *msgs, size_t n, void *data)
{
    ing_writer_t *w = data;
    for (size_t i = 0; i < n; i++) {
        msgs[i].reject_err = 0;
        msgs[i].reject_reason = NULL;
    }
    if (w->m_batch)
        lc_metric_observe(w->m_batch, (double)n);
    int rc = 0;
    /* Each redo sets one more message aside: at most n + 1 transactions. */
    for (size_t tries = 0; tries <= n; tries++) {
        size_t failed = SIZE_MAX;
        rc = wr_batch(w, msgs, n, &failed);
        if (rc == 0 || failed == SIZE_MAX || !wr_input_error(rc))
            break;
        wr_set_aside(w, &msgs[failed], rc, n);
    }
    if (rc)
        LC_LOG_ERROR("writer: batch aborted msgs=%zu err=\"%s\"", n, lc_strerror(rc));
    return rc;
}

int ing_writer_forget(const char *const *deliveries, size_t n, void *data)
{
    ing_writer_t *w = data;
    lc_store_txn_t *txn;
    size_t forgotten = 0;
    int rc = lc_store_write_begin(w->store, &txn);
    if (rc)
        return rc;
    rc = lc_store_write_forget(txn, deliveries, n, &forgotten);
    if (rc == 0) {
        rc = lc_store_write_commit(txn);
    } else {
        lc_store_write_abort(txn);
    }
    if (rc) {
        LC_LOG_ERROR("writer: forgetting failed deliveries=%zu err=\"%s\"", n, lc_strerror(rc));
        return rc;
    }
    /* The delta state of the series concerned is not rewound: the next
     * profile of such a series may come out as a delta against a profile
     * this store no longer holds (cumulative types only; see redis.md). */
    LC_LOG_INFO("writer: forgot messages another consumer took over deliveries=%zu found=%zu", n,
                forgotten);
    lc_metric_add(w->m_forgotten, (double)forgotten);
    return 0;
}
