/*
 * test_pprof_decode.c — the hand-written pprof decoder (pprof_decode.c) against
 * the protobuf-c decoder it replaced (pprof_reference.c).
 *
 * Oracle: for every pprof in testdata and for crafted edge cases, both decoders
 * take the same decision with the same message, and when they accept, their
 * profiles pack (protobuf_c_message_pack) to the same bytes once the unknown
 * fields protobuf-c keeps are dropped. The intended differences listed in
 * pprof_int.h are checked one by one. Also: lc_pprof_decode_keep and
 * lc_pprof_validate_normalized, which let the ingester forward the bytes it got.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "../../../../libcommon/profile/src/pprof_int.h"
#include "lc/gz.h"
#include "lc/pprof.h"
#include "lc_test.h"

#define ARENA_CAP (1u << 30)

/* ---------------------------------------------------------------- helpers */

static void pack(const lc_pprof_t *p, lc_buf_t *out)
{
    lc_buf_init(out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_encode(p, false, out));
}

typedef struct both_s {
    lc_arena_t *arena;
    lc_pprof_t *mine, *ref;
    int rc_mine, rc_ref;
    lc_pprof__decode_err_t why;
    lc_status_t st_mine, st_ref;
    lc_pprof_seen_t seen;
} both_t;

static void decode_both(const uint8_t *pb, size_t len, both_t *b)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    memset(b, 0, sizeof(*b));
    b->arena = lc_arena_new(ARENA_CAP);
    b->rc_mine =
        lc_pprof__decode_pb_seen(pb, len, &lim, b->arena, &b->mine, &b->seen, &b->why, &b->st_mine);
    b->rc_ref = lc_pprof__decode_protobuf_c(pb, len, b->arena, &b->ref, &b->st_ref);
}

/* What the decoder says it saw of the samples' location ids equals what
 * protobuf-c's profile holds. */
static void check_seen(const char *what, const both_t *b)
{
    uint64_t max = 0;
    bool zero = false;
    for (size_t i = 0; i < b->ref->n_sample; i++)
        for (size_t k = 0; k < b->ref->sample[i]->n_location_id; k++) {
            uint64_t id = b->ref->sample[i]->location_id[k];
            max = id > max ? id : max;
            zero |= id == 0;
        }
    bool same = b->seen.profile == b->mine && b->seen.location_id_max == max &&
                b->seen.location_id_zero == zero;
    if (!same)
        fprintf(stderr, "%s: seen max %" PRIu64 " zero %d, protobuf-c's %" PRIu64 " %d\n", what,
                b->seen.location_id_max, b->seen.location_id_zero, max, zero);
    LC_CHECK(same);
}

/* Same decision, same message, and on success the same packed bytes. */
static void check_same(const char *what, const uint8_t *pb, size_t len)
{
    both_t b;
    decode_both(pb, len, &b);
    if ((b.rc_mine == 0) != (b.rc_ref == 0) || strcmp(b.st_mine.msg, b.st_ref.msg) != 0)
        fprintf(stderr, "%s: new %d \"%s\", protobuf-c %d \"%s\"\n", what, b.rc_mine, b.st_mine.msg,
                b.rc_ref, b.st_ref.msg);
    LC_ASSERT_EQ(b.rc_mine == 0, b.rc_ref == 0);
    LC_ASSERT_STR_EQ(b.st_mine.msg, b.st_ref.msg);
    if (b.rc_mine == 0 && b.rc_ref == 0) {
        check_seen(what, &b);
        lc_pprof__drop_unknown_fields(b.ref);
        lc_buf_t x, y;
        pack(b.mine, &x);
        pack(b.ref, &y);
        bool same = x.len == y.len && (x.len == 0 || memcmp(x.data, y.data, x.len) == 0);
        if (!same)
            fprintf(stderr, "%s: packed bytes differ (%zu vs %zu bytes)\n", what, x.len, y.len);
        LC_CHECK(same);
        lc_buf_fini(&x);
        lc_buf_fini(&y);
    }
    lc_arena_free(b.arena);
}

static uint8_t *read_plain(const char *path, size_t *len)
{
    size_t n = 0;
    uint8_t *d = lc_test_read_file(path, &n);
    if (!d || !lc_gz_is_gzip(d, n)) {
        *len = n;
        return d;
    }
    lc_buf_t plain;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gunzip(d, n, 256u << 20, &plain));
    free(d);
    return lc_buf_steal(&plain, len);
}

/* ---------------------------------------------------------------- real profiles */

/* A file of testdata as it is (gzip'ed or not): its protobuf bytes, compared. */
static void check_file(const char *name, const unsigned char *d, size_t n)
{
    if (!lc_gz_is_gzip(d, n)) {
        check_same(name, d, n);
        return;
    }
    lc_buf_t plain;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gunzip(d, n, 256u << 20, &plain));
    check_same(name, plain.data, plain.len);
    lc_buf_fini(&plain);
}

static void test_every_testdata_pprof_packs_the_same(void)
{
    int files = lc_test_each_testdata_file("pprof", check_file) +
                lc_test_each_testdata_file("ingest", check_file);
    LC_CHECK(files >= 26);
}

/* ---------------------------------------------------------------- edge cases */

typedef struct edge_s {
    const char *name;
    const char *bytes;
    size_t len;
} edge_t;

#define EDGE(name, lit)                                                                            \
    {                                                                                              \
        name, lit, sizeof(lit) - 1                                                                 \
    }

/* Inputs protobuf-c reads in some particular way; each must come out the same. */
static const edge_t same_edges[] = {
    EDGE("empty", ""),
    EDGE("packed and unpacked ids mixed",
         "\x12\x0d\x0a\x03\x01\x82\x01\x08\x05\x10\x07\x0a\x00\x10\x09"),
    EDGE("10-byte varint", "\x48\x80\x80\x80\x80\x80\x80\x80\x80\x80\x7f"),
    EDGE("11-byte varint", "\x48\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    EDGE("packed 11-byte varint", "\x6a\x0b\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    EDGE("packed run cut inside a varint", "\x6a\x02\x01\x80"),
    EDGE("non-minimal 5-byte key", "\x8a\x80\x80\x80\x00\x00"),
    EDGE("6-byte key", "\x8a\x80\x80\x80\x80\x00\x00"),
    EDGE("non-minimal length", "\x32\x80\x80\x80\x80\x00"),
    EDGE("6-byte length", "\x32\x80\x80\x80\x80\x80\x00"),
    EDGE("length past the end", "\x32\x05\x61"),
    EDGE("length 2^32+1", "\x32\x81\x80\x80\x80\x10\x61"),
    EDGE("huge field number", "\xfa\xff\xff\xff\x7f\x00"),
    EDGE("minimal key of field 0", "\x05\x00\x00\x00\x00"),
    EDGE("non-minimal key of field 0", "\x85\x00\x00\x00\x00\x00"),
    EDGE("field 0 in a label", "\x12\x05\x1a\x03\x80\x00\x00"),
    EDGE("field 0 in a line", "\x22\x05\x22\x03\x80\x00\x00"),
    EDGE("field 0 in an overridden period_type", "\x5a\x03\x80\x00\x00\x5a\x02\x08\x01"),
    EDGE("field 0 in the last period_type", "\x5a\x02\x08\x01\x5a\x03\x80\x00\x00"),
    EDGE("period_type twice: the last wins whole", "\x5a\x04\x08\x05\x10\x06\x5a\x02\x10\x00"),
    EDGE("singular fields twice: the last wins", "\x48\x01\x50\x02\x48\x03\x60\x04\x60\x00"),
    EDGE("group wire type", "\x0b\x0c"),
    EDGE("unused wire type 7", "\x0f"),
    EDGE(
        "unknown fields of every wire type",
        "\x78\x01\x81\x01\x01\x02\x03\x04\x05\x06\x07\x08\x8a\x01\x01\x00\x8d\x01\x01\x02\x03\x04"),
    EDGE("unknown fields nested", "\x12\x02\x78\x01\x22\x04\x22\x02\x78\x01\x1a\x02\x78\x01"),
    EDGE("fixed64 too short", "\x81\x01\x01\x02"),
    EDGE("sample_type as a varint", "\x08\x01"),
    EDGE("string_table as a varint", "\x30\x01"),
    EDGE("time_nanos length-prefixed", "\x4a\x01\x01"),
    EDGE("comment as fixed64", "\x69\x01\x02\x03\x04\x05\x06\x07\x08"),
    EDGE("location id as fixed32", "\x22\x05\x0d\x01\x02\x03\x04"),
    EDGE("sample location_id as fixed32", "\x12\x05\x0d\x01\x02\x03\x04"),
    EDGE("label as a varint", "\x12\x02\x18\x01"),
    EDGE("line as a varint", "\x22\x02\x20\x01"),
    EDGE("label key length-prefixed", "\x12\x05\x1a\x03\x0a\x01\x01"),
    EDGE("empty messages", "\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x5a\x00"),
    EDGE("packed empty", "\x6a\x00\x12\x04\x0a\x00\x12\x00"),
    EDGE("bools as varints", "\x1a\x12\x38\x01\x40\x02\x48\x80\x00\x50\x80\x80\x80\x80\x80\x80"
                             "\x80\x80\x80\x02"),
    EDGE("strings with NULs", "\x32\x00\x32\x03\x61\x00\x62\x32\x01\x00\x32\x02\x00\x00"),
    EDGE("mapping fields", "\x1a\x0c\x08\x01\x10\x02\x18\x03\x20\x04\x28\x05\x30\x06"),
    EDGE("function fields", "\x2a\x0a\x08\x01\x10\x02\x18\x03\x20\x04\x28\x05"),
    EDGE("location fields", "\x22\x0e\x08\x01\x10\x02\x18\x03\x22\x04\x08\x04\x10\x05\x28\x01"),
    EDGE("label fields", "\x12\x0a\x1a\x08\x08\x01\x10\x02\x18\x03\x20\x04"),
    EDGE("negative int64s", "\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x6a\x0a\xfe\xff\xff\xff"
                            "\xff\xff\xff\xff\xff\x01"),
    EDGE("truncated in a nested message", "\x12\x03\x0a\x05\x01"),
};

static void test_edge_cases_match_protobuf_c(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(same_edges); i++)
        check_same(same_edges[i].name, (const uint8_t *)same_edges[i].bytes, same_edges[i].len);
}

static void test_unknown_fields_are_dropped(void)
{
    static const char pb[] = "\x78\x01\x12\x02\x78\x01\x0a\x02\x78\x01";
    both_t b;
    decode_both((const uint8_t *)pb, sizeof(pb) - 1, &b);
    LC_ASSERT_OK(b.rc_mine);
    LC_ASSERT_OK(b.rc_ref);
    LC_ASSERT_EQ(b.ref->base.n_unknown_fields, 1);
    LC_ASSERT_EQ(b.mine->base.n_unknown_fields, 0);
    LC_ASSERT_EQ(b.mine->sample[0]->base.n_unknown_fields, 0);
    LC_CHECK(b.mine->base.descriptor == &google__v1__profile__descriptor);
    LC_CHECK(b.mine->sample[0]->base.descriptor == &google__v1__sample__descriptor);
    LC_CHECK(b.mine->sample_type[0]->base.descriptor == &google__v1__value_type__descriptor);
    LC_CHECK(b.mine->sample[0]->location_id == NULL && b.mine->string_table == NULL);
    lc_arena_free(b.arena);
}

/* protobuf-c reads a bool from any wire type; that is malformed protobuf. */
static void test_bool_must_be_a_varint(void)
{
    static const char *const pbs[] = {
        "\x1a\x09\x39\x01\x00\x00\x00\x00\x00\x00\x00", /* has_functions as fixed64 */
        "\x1a\x03\x3a\x01\x00",                         /* ... length-prefixed */
        "\x22\x05\x2d\x01\x00\x00\x00",                 /* is_folded as fixed32 */
    };
    static const size_t lens[] = {11, 5, 7};
    for (size_t i = 0; i < LC_ARRAY_LEN(pbs); i++) {
        both_t b;
        decode_both((const uint8_t *)pbs[i], lens[i], &b);
        LC_ASSERT_OK(b.rc_ref);
        LC_CHECK(b.rc_mine != 0);
        LC_ASSERT_EQ(b.why, LC_PPROF__BOOL_WIRE_TYPE);
        LC_ASSERT_STR_EQ(b.st_mine.msg, LC_PPROF__MSG_MALFORMED);
        lc_arena_free(b.arena);
    }
}

/* ---------------------------------------------------------------- packed runs */

static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 17;
}

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        out[n++] = (uint8_t)(v | 0x80);
    out[n++] = (uint8_t)v;
    return n;
}

/* Ids of one to four bytes, mostly one or two as in real stacks. */
static uint64_t random_id(uint64_t *state)
{
    static const uint64_t span[] = {1u << 7, 1u << 14, 1u << 14, 1u << 21, 1u << 28};
    return next_random(state) % span[next_random(state) % LC_ARRAY_LEN(span)];
}

/* One sample {location_id packed, value packed}: its ids' run may end cut
 * inside a varint (cut), and the sample may end the input (last). */
static size_t put_sample(uint8_t *out, uint64_t *state, bool cut)
{
    uint8_t run[256];
    size_t len = 0, ids = next_random(state) % 40;
    for (size_t i = 0; i < ids; i++)
        len += put_varint(run + len, random_id(state));
    if (cut && len > 0 && run[len - 1] < 0x80)
        run[len - 1] |= 0x80;
    uint8_t msg[300];
    size_t n = 0;
    msg[n++] = 0x0a; /* field 1, length-delimited */
    n += put_varint(msg + n, len);
    memcpy(msg + n, run, len);
    n += len;
    msg[n++] = 0x12; /* field 2: one value */
    msg[n++] = 0x01;
    msg[n++] = 0x07;
    size_t m = 0;
    out[m++] = 0x12; /* Profile.sample */
    m += put_varint(out + m, n);
    memcpy(out + m, msg, n);
    return m + n;
}

/* Random runs of location ids, in profiles cut at every length so that runs
 * end at, near and past the end of the input: the decoder reads packed ids
 * eight bytes at a time where the CPU can, and must read the same ids, and
 * refuse the same cut runs, as protobuf-c. */
static void test_random_packed_ids_match_protobuf_c(void)
{
    uint64_t state = 42;
    uint8_t pb[4096];
    for (int round = 0; round < 300; round++) {
        size_t n = 0, samples = 1 + next_random(&state) % 8;
        for (size_t i = 0; i < samples; i++)
            n += put_sample(pb + n, &state, next_random(&state) % 16 == 0);
        for (size_t len = n > 48 ? n - 48 : 0; len <= n; len++) {
            char what[64];
            snprintf(what, sizeof(what), "random runs %d, %zu of %zu bytes", round, len, n);
            check_same(what, pb, len);
        }
    }
}

/* ---------------------------------------------------------------- limits */

static void test_sample_cap_before_decoding(void)
{
    /* sample_type {1, 2}; three samples; string table "", "a", "b". */
    static const char pb[] = "\x0a\x04\x08\x01\x10\x02\x12\x02\x10\x01\x12\x02\x10\x01"
                             "\x12\x02\x10\x01\x32\x00\x32\x01\x61\x32\x01\x62";
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_samples = 2;
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p = NULL;
    lc_status_t st = {0};
    LC_CHECK(lc_pprof_decode((const uint8_t *)pb, sizeof(pb) - 1, &lim, a, &p, &st) != 0);
    LC_ASSERT_STR_EQ(st.msg, "invalid pprof: profile has 3 samples (limit 2)");
    lim.max_samples = 3;
    LC_ASSERT_OK(lc_pprof_decode((const uint8_t *)pb, sizeof(pb) - 1, &lim, a, &p, &st));
    LC_ASSERT_EQ(p->n_sample, 3);
    /* Without sample types validation's first complaint comes first. */
    lim.max_samples = 2;
    LC_ASSERT_OK(lc_pprof_decode((const uint8_t *)pb + 6, sizeof(pb) - 7, &lim, a, &p, &st));
    LC_CHECK(lc_pprof_validate(p, &lim, &st) != 0);
    LC_CHECK(strstr(st.msg, "no sample types") != NULL);
    lim.max_samples = 0; /* no limit */
    LC_ASSERT_OK(lc_pprof_decode((const uint8_t *)pb, sizeof(pb) - 1, &lim, a, &p, &st));
    lc_arena_free(a);
}

static void test_arena_cap(void)
{
    size_t len;
    char path[1024];
    snprintf(path, sizeof(path), "%s/pprof/pyroscope-heap", LC_TESTDATA_DIR);
    uint8_t *d = read_plain(path, &len);
    LC_CHECK(d != NULL);
    if (!d)
        return;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *small = lc_arena_new(len);
    lc_pprof_t *p;
    lc_status_t st = {0};
    lc_pprof__decode_err_t why;
    LC_CHECK(lc_pprof__decode_pb(d, len, &lim, small, &p, &why, &st) != 0);
    LC_ASSERT_EQ(why, LC_PPROF__NO_MEMORY);
    LC_ASSERT_STR_EQ(st.msg, LC_PPROF__MSG_MALFORMED);
    lc_arena_free(small);
    lc_free(d);
}

/* ---------------------------------------------------------------- forwarding */

static void test_decode_keep_hands_back_the_bytes(void)
{
    size_t gz_len, plain_len;
    char path[1024];
    snprintf(path, sizeof(path), "%s/pprof/pyroscope-cpu_go_truncated_1.pb.gz", LC_TESTDATA_DIR);
    uint8_t *gz = lc_test_read_file(path, &gz_len);
    uint8_t *plain = read_plain(path, &plain_len);
    LC_CHECK(gz && plain);
    if (!gz || !plain)
        return;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p;
    lc_status_t st = {0};
    const uint8_t *pb;
    size_t pb_len;
    LC_ASSERT_OK(lc_pprof_decode_keep(gz, gz_len, &lim, a, &p, &pb, &pb_len, &st));
    LC_ASSERT_EQ(pb_len, plain_len);
    LC_ASSERT_MEM_EQ(pb, plain, plain_len);
    LC_ASSERT_EQ(p->n_sample, 647); /* MANIFEST */
    LC_ASSERT_OK(lc_pprof_decode_keep(plain, plain_len, &lim, a, &p, &pb, &pb_len, &st));
    LC_CHECK(pb == plain && pb_len == plain_len);
    /* Two gzip members: the stated size is the last one's, the direct path
     * finds more and the general one decodes it. */
    lc_buf_t two;
    lc_buf_init(&two, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(plain, plain_len / 2, 1, &two));
    LC_ASSERT_OK(lc_gzip(plain + plain_len / 2, plain_len - plain_len / 2, 1, &two));
    LC_CHECK(lc_gz_size_hint(two.data, two.len) < plain_len);
    LC_ASSERT_OK(lc_pprof_decode_keep(two.data, two.len, &lim, a, &p, &pb, &pb_len, &st));
    LC_ASSERT_EQ(pb_len, plain_len);
    LC_ASSERT_MEM_EQ(pb, plain, plain_len);
    lc_buf_fini(&two);
    lim.max_decompressed_bytes = plain_len - 1;
    LC_CHECK(lc_pprof_decode_keep(gz, gz_len, &lim, a, &p, &pb, &pb_len, &st) != 0);
    LC_CHECK(strstr(st.msg, "profile too large") != NULL);
    lim.max_decompressed_bytes = plain_len;
    LC_ASSERT_OK(lc_pprof_decode_keep(gz, gz_len, &lim, a, &p, &pb, &pb_len, &st));
    gz[gz_len / 2] ^= 0x55;
    LC_CHECK(lc_pprof_decode_keep(gz, gz_len, &lim, a, &p, &pb, &pb_len, &st) != 0);
    LC_CHECK(strstr(st.msg, "bad gzip data") != NULL);
    lc_arena_free(a);
    free(gz);
    lc_free(plain);
}

static void test_validate_tells_when_it_changed_the_profile(void)
{
    size_t len;
    char path[1024];
    snprintf(path, sizeof(path), "%s/pprof/pyroscope-go.cpu.labels.pprof", LC_TESTDATA_DIR);
    uint8_t *d = lc_test_read_file(path, &len);
    LC_CHECK(d != NULL);
    if (!d)
        return;
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_arena_t *a = lc_arena_new(ARENA_CAP);
    lc_pprof_t *p;
    lc_status_t st = {0};
    bool changed = true;
    LC_ASSERT_OK(lc_pprof_decode(d, len, &lim, a, &p, &st));
    LC_ASSERT_OK(lc_pprof_validate_normalized(p, &lim, &changed, &st));
    LC_CHECK(!changed);
    lim.max_stack_depth = 3; /* some stacks are deeper */
    LC_ASSERT_OK(lc_pprof_decode(d, len, &lim, a, &p, &st));
    LC_ASSERT_OK(lc_pprof_validate_normalized(p, &lim, &changed, &st));
    LC_CHECK(changed);
    lc_pprof_limits_default(&lim);
    lim.max_symbol_bytes = 8; /* some function names are longer */
    LC_ASSERT_OK(lc_pprof_decode(d, len, &lim, a, &p, &st));
    LC_ASSERT_OK(lc_pprof_validate_normalized(p, &lim, &changed, &st));
    LC_CHECK(changed);
    lc_arena_free(a);
    free(d);
}

/* ---------------------------------------------------------------- speed (informative) */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_print_speed(void)
{
    size_t len;
    char path[1024];
    snprintf(path, sizeof(path), "%s/pprof/pyroscope-heap", LC_TESTDATA_DIR);
    uint8_t *d = read_plain(path, &len);
    LC_CHECK(d != NULL);
    if (!d)
        return;
    enum { ROUNDS = 20 };
    double ms[2] = {0, 0};
    for (int which = 0; which < 2; which++) {
        lc_arena_t *a = lc_arena_new(ARENA_CAP);
        double t0 = now_ms();
        for (int r = 0; r < ROUNDS; r++) {
            lc_pprof_t *p;
            lc_status_t st = {0};
            lc_pprof__decode_err_t why;
            lc_pprof_limits_t lim;
            lc_pprof_limits_default(&lim);
            int rc = which == 0 ? lc_pprof__decode_pb(d, len, &lim, a, &p, &why, &st)
                                : lc_pprof__decode_protobuf_c(d, len, a, &p, &st);
            LC_ASSERT_OK(rc);
            lc_arena_reset(a);
        }
        ms[which] = (now_ms() - t0) / ROUNDS;
        lc_arena_free(a);
    }
    printf("pyroscope-heap (%zu bytes): new decoder %.3f ms, protobuf-c %.3f ms per decode\n", len,
           ms[0], ms[1]);
    lc_free(d);
}

LC_TEST_MAIN(test_every_testdata_pprof_packs_the_same, test_edge_cases_match_protobuf_c,
             test_random_packed_ids_match_protobuf_c, test_unknown_fields_are_dropped,
             test_bool_must_be_a_varint, test_sample_cap_before_decoding, test_arena_cap,
             test_decode_keep_hands_back_the_bytes, test_validate_tells_when_it_changed_the_profile,
             test_print_speed)
