/*
 * test_writer.c — the writer against a real store in a mkdtemp directory:
 * a batch of IngestProfiles is split into series (one per sample type and
 * string-label set) whose totals add up to the MANIFEST totals; replaying the
 * batch changes nothing (ingest ids); the server-side delta rule applies to
 * memory alloc_* series unless __delta__="false"; a message the writer
 * cannot apply (undecodable, or refused by the store: a total over int64) is
 * set aside alone with its reason while the rest of its batch is stored; a
 * message with the receiver's decoded form (msg.local) is stored from it.
 */
#include "lc_test.h"
#include "write_int.h"
#include "writer_fixture.h"

#define CPU_LABELS "pprof/pyroscope-go.cpu.labels.pprof"
#define CPU_LABELS_TIME 1654798932062349000LL /* MANIFEST time_nanos */
#define HEAP "pprof/pyroscope-heap"
#define HEAP_TIME 1659010242910169109LL

/* A testdata pprof, decoded into f->arena. */
static lc_pprof_t *testdata_pprof(fixture_t *f, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    size_t len;
    unsigned char *raw = lc_test_read_file(path, &len);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    LC_CHECK(raw && lc_pprof_decode(raw, len, &lim, f->arena, &p, &st) == 0);
    free(raw);
    return p;
}

/* An encoded IngestProfile of a testdata pprof (re-encoded uncompressed),
 * with every sample value replaced by every_value unless that is 0. */
static lc_transport_msg_t message_valued(fixture_t *f, const char *rel, int64_t time_ns,
                                         const char *const *labels, bool delta_disabled, uint8_t id,
                                         int64_t every_value)
{
    lc_pprof_t *p = testdata_pprof(f, rel);
    for (size_t i = 0; every_value && i < p->n_sample; i++)
        for (size_t k = 0; k < p->sample[i]->n_value; k++)
            p->sample[i]->value[k] = every_value;
    lc_buf_t pprof;
    lc_buf_init(&pprof, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_encode(p, false, &pprof));
    size_t n = pprof.len;
    uint8_t *copy = lc_arena_alloc(f->arena, n);
    memcpy(copy, pprof.data, n);
    lc_buf_fini(&pprof);
    return fx_message(f, copy, n, time_ns, labels, delta_disabled, id);
}

static lc_transport_msg_t message(fixture_t *f, const char *rel, int64_t time_ns,
                                  const char *const *labels, bool delta_disabled, uint8_t id)
{
    return message_valued(f, rel, time_ns, labels, delta_disabled, id, 0);
}

/* ---- reading back: totals per __profile_type__ and series counts. */
typedef struct readback_s {
    char types[32][128];
    int64_t totals[32];
    size_t series[32];
    size_t n;
    size_t span_samples;
    bool labels_ok;
    lc_block_t *b;
} readback_t;

static int rb_profile(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    int64_t *sum = data;
    *sum += p->total;
    return 0;
}

static size_t rb_type(readback_t *r, const char *type)
{
    for (size_t i = 0; i < r->n; i++) {
        if (!strcmp(r->types[i], type))
            return i;
    }
    snprintf(r->types[r->n], sizeof(r->types[0]), "%s", type);
    return r->n++;
}

static bool rb_labels_ok(const lc_labels_t *ls)
{
    for (size_t i = 1; i < ls->n; i++) {
        if (strcmp(ls->v[i - 1].name, ls->v[i].name) >= 0)
            return false; /* sorted, no duplicates */
    }
    const char *svc = lc_labels_get(ls, "service_name");
    const char *svc2 = lc_labels_get(ls, "__service_name__");
    return !lc_labels_get(ls, "__delta__") && svc && svc2 && !strcmp(svc, svc2) &&
           lc_labels_get(ls, "__type__") && lc_labels_get(ls, "__unit__") &&
           lc_labels_get(ls, "__period_type__") && lc_labels_get(ls, "__period_unit__");
}

static int rb_series(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                     void *data)
{
    readback_t *r = data;
    const char *type = lc_labels_get(ls, "__profile_type__");
    size_t i = rb_type(r, type ? type : "(none)");
    r->series[i]++;
    r->labels_ok &= rb_labels_ok(ls);
    int64_t sum = 0;
    int rc = lc_block_profiles(b, id, 0, INT64_MAX, rb_profile, &sum);
    r->totals[i] += sum;
    return rc;
}

static void readback(fixture_t *f, readback_t *r)
{
    *r = (readback_t){.labels_ok = true};
    lc_store_reader_t *rd;
    LC_ASSERT_OK(lc_store_read_begin(f->store, 0, INT64_MAX, &rd));
    const char *tenants[] = {"anonymous"};
    for (size_t i = 0; i < lc_store_reader_count(rd); i++)
        LC_ASSERT_OK(lc_block_series(lc_store_reader_block(rd, i), tenants, 1, NULL, rb_series, r));
    lc_store_read_end(rd);
}

static int64_t total_of(const readback_t *r, const char *type, size_t *series)
{
    for (size_t i = 0; i < r->n; i++) {
        if (!strcmp(r->types[i], type)) {
            if (series)
                *series = r->series[i];
            return r->totals[i];
        }
    }
    if (series)
        *series = 0;
    return -1;
}

static const char *const cpu_labels[] = {
    "__name__", "process_cpu", "service_name", "svc", "__delta__", "false", "env", "test", NULL};

static void test_split_totals_and_replay(void)
{
    fixture_t f;
    fx_open(&f);
    lc_transport_msg_t msgs[] = {message(&f, CPU_LABELS, CPU_LABELS_TIME, cpu_labels, true, 1)};
    LC_ASSERT_OK(ing_writer_consume(msgs, 1, f.w));
    readback_t r;
    readback(&f, &r);
    size_t series_samples, series_cpu;
    /* MANIFEST totals of pyroscope-go.cpu.labels.pprof */
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", &series_samples), 873);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &series_cpu),
                 8730000000LL);
    LC_ASSERT_EQ(r.n, 2);
    LC_CHECK(series_cpu >= 2); /* one per distinct {foo, function} set (test_split.c) */
    LC_ASSERT_EQ(series_samples, series_cpu);
    LC_CHECK(r.labels_ok);
    /* Replaying the same batch (same ingest ids) changes nothing. */
    LC_ASSERT_OK(ing_writer_consume(msgs, 1, f.w));
    readback(&f, &r);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 873);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &series_cpu),
                 8730000000LL);
    fx_close(&f);
}

/* The all-in-one's receiver hands the writer its decoded, checked profile
 * (msg.local): the writer stores that one, not the message's pprof bytes —
 * here an empty pprof, which alone it would set aside (no sample types). */
static void test_receivers_decoded_form_is_stored(void)
{
    fixture_t f;
    fx_open(&f);
    lc_pprof_t *p = testdata_pprof(&f, CPU_LABELS);
    lc_pprof_index_t *ix = NULL;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_store_check_profile(p, "anonymous", CPU_LABELS_TIME, f.arena, &ix, &st));
    ing_decoded_t decoded = {p, ix};
    lc_transport_msg_t msgs[] = {
        fx_message(&f, (const uint8_t *)"", 0, CPU_LABELS_TIME, cpu_labels, true, 1),
        fx_message(&f, (const uint8_t *)"", 0, CPU_LABELS_TIME, cpu_labels, true, 2)};
    msgs[0].local = &decoded;
    LC_ASSERT_OK(ing_writer_consume(msgs, 2, f.w));
    LC_ASSERT_EQ(msgs[0].reject_err, 0);
    LC_CHECK(msgs[1].reject_err != 0); /* no local: its own (empty) pprof */
    readback_t r;
    readback(&f, &r);
    /* MANIFEST totals of pyroscope-go.cpu.labels.pprof */
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 873);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", NULL), 8730000000LL);
    fx_close(&f);
}

static const char *const heap_labels[] = {"__name__", "memory", "service_name", "heap-svc", NULL};

/* MANIFEST totals of pyroscope-heap */
#define HEAP_ALLOC_OBJECTS 18245264435LL
#define HEAP_INUSE_SPACE 541672846LL

static void test_server_side_delta(void)
{
    fixture_t f;
    fx_open(&f);
    /* The same cumulative heap profile twice: the first is the baseline
     * (dropped), the second's delta is 0 everywhere; inuse_* are gauges. */
    lc_transport_msg_t msgs[] = {
        message(&f, HEAP, HEAP_TIME, heap_labels, false, 1),
        message(&f, HEAP, HEAP_TIME + 10000000000LL, heap_labels, false, 2),
    };
    LC_ASSERT_OK(ing_writer_consume(msgs, 2, f.w));
    readback_t r;
    readback(&f, &r);
    size_t n_series;
    LC_ASSERT_EQ(total_of(&r, "memory:alloc_objects:count:space:bytes", &n_series), 0);
    LC_CHECK(n_series >= 1); /* the delta profile is stored, with total 0 */
    LC_ASSERT_EQ(total_of(&r, "memory:inuse_space:bytes:space:bytes", NULL), 2 * HEAP_INUSE_SPACE);
    fx_close(&f);

    /* __delta__="false" (delta_disabled): stored as sent. */
    fx_open(&f);
    lc_transport_msg_t plain[] = {
        message(&f, HEAP, HEAP_TIME, heap_labels, true, 1),
        message(&f, HEAP, HEAP_TIME + 10000000000LL, heap_labels, true, 2),
    };
    LC_ASSERT_OK(ing_writer_consume(plain, 2, f.w));
    readback(&f, &r);
    LC_ASSERT_EQ(total_of(&r, "memory:alloc_objects:count:space:bytes", NULL),
                 2 * HEAP_ALLOC_OBJECTS);
    fx_close(&f);
}

static void test_undecodable_message_skipped(void)
{
    fixture_t f;
    fx_open(&f);
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x0f, 0x01};
    lc_transport_msg_t msgs[] = {
        {junk, sizeof(junk), "bad"},
        message(&f, CPU_LABELS, CPU_LABELS_TIME, cpu_labels, true, 7),
    };
    LC_ASSERT_OK(ing_writer_consume(msgs, 2, f.w));
    readback_t r;
    readback(&f, &r);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 873);
    LC_ASSERT_EQ(msgs[0].reject_err, LC_ECORRUPT);
    LC_CHECK(msgs[0].reject_reason != NULL);
    LC_ASSERT_EQ(msgs[1].reject_err, 0);
    fx_close(&f);
}

/* A profile whose every value is 2^63-1: its series totals overflow int64,
 * which the store refuses. Between two valid messages it is set aside
 * alone; the others are stored in full (MANIFEST totals) and the batch
 * succeeds; delivered again, the batch changes nothing and sets it aside
 * again. Today's writer failed the whole batch. */
static void test_unappliable_message_set_aside(void)
{
    fixture_t f;
    fx_open(&f);
    lc_transport_msg_t msgs[] = {
        message(&f, CPU_LABELS, CPU_LABELS_TIME, cpu_labels, true, 1),
        message_valued(&f, CPU_LABELS, CPU_LABELS_TIME + 1, cpu_labels, true, 2, INT64_MAX),
        message(&f, HEAP, HEAP_TIME, heap_labels, true, 3),
    };
    for (int round = 0; round < 2; round++) {
        LC_ASSERT_OK(ing_writer_consume(msgs, 3, f.w));
        LC_ASSERT_EQ(msgs[0].reject_err, 0);
        LC_ASSERT_EQ(msgs[2].reject_err, 0);
        /* LC_EINPUT from the store; LC_ECORRUPT once the decoder's
         * validation refuses it first (issue 25): either way, set aside. */
        LC_CHECK(lc_transport_rejected(msgs[1].reject_err));
        LC_CHECK(msgs[1].reject_reason && msgs[1].reject_reason[0]);
        readback_t r;
        readback(&f, &r);
        LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 873);
        LC_ASSERT_EQ(total_of(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", NULL),
                     8730000000LL);
        LC_ASSERT_EQ(total_of(&r, "memory:alloc_objects:count:space:bytes", NULL),
                     HEAP_ALLOC_OBJECTS);
        LC_ASSERT_EQ(total_of(&r, "memory:inuse_space:bytes:space:bytes", NULL), HEAP_INUSE_SPACE);
    }
    fx_close(&f);
}

/* Messages whose values overflow int64 when the store sums them — per
 * series (two stacks), per merged stack (two samples of one stack that differ
 * only in trace_id, which does not split series) — are recognised when
 * decoded and set aside alone: the batch around them commits (issue 25;
 * before, the store's sum refused them mid-batch and the batch failed). */
static void test_overflowing_messages_do_not_fail_the_batch(void)
{
    fixture_t f;
    fx_open(&f);
    const int64_t big[] = {INT64_MAX, 1}, ok[] = {5, 7};
    const int two_stacks[] = {0, 1}, one_stack[] = {0, 0};
    const char *const traces[] = {"1", "2"};
    size_t len[4];
    const uint8_t *pprof[4] = {
        fx_pprof(&f, ok, two_stacks, NULL, NULL, 2, &len[0]),
        fx_pprof(&f, big, two_stacks, NULL, NULL, 2, &len[1]),
        fx_pprof(&f, big, one_stack, "trace_id", traces, 2, &len[2]),
        fx_pprof(&f, ok, one_stack, NULL, NULL, 2, &len[3]),
    };
    lc_transport_msg_t msgs[4];
    for (uint8_t i = 0; i < 4; i++)
        msgs[i] = fx_message(&f, pprof[i], len[i], FX_TIME, cpu_labels, true, (uint8_t)(20 + i));
    LC_ASSERT_OK(ing_writer_consume(msgs, 4, f.w));
    readback_t r;
    readback(&f, &r);
    size_t series;
    LC_ASSERT_EQ(total_of(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &series), 24);
    LC_ASSERT_EQ(series, 1);
    fx_close(&f);
}

/* A message is recorded under its delivery id: forgetting that delivery
 * removes all its series; a second delivery of the same message (the writer
 * claimed it back and owns it) is applied again, once. */
static void test_forget_by_delivery(void)
{
    fixture_t f;
    fx_open(&f);
    lc_transport_msg_t a = message(&f, CPU_LABELS, CPU_LABELS_TIME, cpu_labels, true, 1);
    lc_transport_msg_t b = message(&f, HEAP, HEAP_TIME, heap_labels, true, 2);
    a.delivery = "ember:ingest:0/5-0";
    b.delivery = "ember:ingest:1/5-0"; /* the same entry id in another stream */
    lc_transport_msg_t msgs[] = {a, b};
    LC_ASSERT_OK(ing_writer_consume(msgs, 2, f.w));
    const char *gone[] = {"ember:ingest:0/5-0", "ember:ingest:7/1-0"};
    LC_ASSERT_OK(ing_writer_forget(gone, 2, f.w));
    readback_t r;
    readback(&f, &r);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 0);
    LC_ASSERT_EQ(total_of(&r, "memory:alloc_objects:count:space:bytes", NULL), HEAP_ALLOC_OBJECTS);
    LC_ASSERT_OK(ing_writer_consume(msgs, 1, f.w)); /* a, delivered again */
    LC_ASSERT_OK(ing_writer_consume(msgs, 1, f.w)); /* and replayed: a duplicate */
    readback(&f, &r);
    LC_ASSERT_EQ(total_of(&r, "process_cpu:samples:count:cpu:nanoseconds", NULL), 873);
    LC_ASSERT_EQ(total_of(&r, "memory:alloc_objects:count:space:bytes", NULL), HEAP_ALLOC_OBJECTS);
    fx_close(&f);
}

/* A full LMDB map is the store's trouble, not the message's: the whole batch
 * fails (to be redelivered) and nothing is set aside. */
static void test_storage_failure_fails_the_batch(void)
{
    fixture_t f;
    fx_open_sized(&f, (size_t)256 << 10);
    lc_transport_msg_t msgs[] = {
        message(&f, CPU_LABELS, CPU_LABELS_TIME, cpu_labels, true, 1),
        message(&f, HEAP, CPU_LABELS_TIME + 2, heap_labels, true, 2),
    };
    int rc = ing_writer_consume(msgs, 2, f.w);
    LC_CHECK(rc < 0);
    LC_CHECK(!lc_transport_rejected(rc));
    LC_ASSERT_EQ(msgs[0].reject_err, 0);
    LC_ASSERT_EQ(msgs[1].reject_err, 0);
    fx_close(&f);
}

LC_TEST_MAIN(test_split_totals_and_replay, test_receivers_decoded_form_is_stored,
             test_server_side_delta, test_undecodable_message_skipped,
             test_unappliable_message_set_aside, test_storage_failure_fails_the_batch,
             test_overflowing_messages_do_not_fail_the_batch, test_forget_by_delivery)
