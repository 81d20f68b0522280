/*
 * test_transport_entry.c — lean stream entries (lc/transport_entry.h): the
 * streamed protobuf encoding equals protobuf-c's own packing once
 * decompressed (checked with zstd's one-shot decoder too), v1 entries pass
 * through untouched, and every malformed entry — unknown version, truncated
 * or corrupt frame, a length that disagrees, over the limit — is refused.
 */
#include <string.h>

#include <zstd.h>

#include "ember/v1/ingest.pb-c.h"
#include "lc/alloc.h"
#include "lc/transport_entry.h"
#include "lc_test.h"

#define PPROF_BYTES (300 * 1000)

typedef struct entry_fixture_s {
    uint8_t *pprof, *packed, *entry;
    size_t packed_len, entry_len;
} entry_fixture_t;

static void entry_fixture(entry_fixture_t *f)
{
    f->pprof = lc_xmalloc(PPROF_BYTES);
    uint32_t x = 7;
    for (size_t i = 0; i < PPROF_BYTES; i++) {
        x = x * 1103515245u + 12345u;
        f->pprof[i] = (uint8_t)((x >> 16) % 4);
    }
    static uint8_t id[16] = {1, 2, 3};
    Types__V1__LabelPair lp = TYPES__V1__LABEL_PAIR__INIT, *lps[] = {&lp};
    lp.name = "__name__";
    lp.value = "process_cpu";
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = "anonymous";
    m.ingest_id = (ProtobufCBinaryData){sizeof(id), id};
    m.labels = lps;
    m.n_labels = 1;
    m.pprof = (ProtobufCBinaryData){PPROF_BYTES, f->pprof};
    m.time_nanos = 1700000000000000000;
    f->packed_len = protobuf_c_message_get_packed_size(&m.base);
    f->packed = lc_xmalloc(f->packed_len);
    LC_ASSERT_EQ(protobuf_c_message_pack(&m.base, f->packed), f->packed_len);
    size_t cap = lc_entry_bound(f->packed_len);
    f->entry = lc_xmalloc(cap);
    LC_ASSERT_OK(lc_entry_encode_pb(&m.base, f->entry, cap, &f->entry_len));
}

static void entry_fixture_fini(entry_fixture_t *f)
{
    lc_free(f->pprof);
    lc_free(f->packed);
    lc_free(f->entry);
}

static void test_round_trip(void)
{
    entry_fixture_t f;
    entry_fixture(&f);
    LC_CHECK(lc_entry_is_lean(f.entry, f.entry_len));
    LC_CHECK(f.entry_len < f.packed_len / 2);
    LC_ASSERT_MEM_EQ(f.entry, "\0EL\2", 4);
    /* zstd's one-shot decoder reads the frame after the header. */
    uint8_t *plain = lc_xmalloc(f.packed_len);
    size_t n = ZSTD_decompress(plain, f.packed_len, f.entry + LC_ENTRY_HEADER_BYTES,
                               f.entry_len - LC_ENTRY_HEADER_BYTES);
    LC_ASSERT_EQ(n, f.packed_len);
    LC_ASSERT_MEM_EQ(plain, f.packed, f.packed_len);
    lc_free(plain);
    lc_entry_decoder_t *d = lc_entry_decoder_new(0);
    const uint8_t *msg = NULL;
    size_t len = 0;
    const char *why = NULL;
    for (int twice = 0; twice < 2; twice++) { /* the decoder's buffer is reused */
        LC_ASSERT_OK(lc_entry_decode(d, f.entry, f.entry_len, &msg, &len, &why));
        LC_ASSERT_EQ(len, f.packed_len);
        LC_ASSERT_MEM_EQ(msg, f.packed, f.packed_len);
    }
    /* The plain encoder gives an entry that decodes the same. */
    size_t cap = lc_entry_bound(f.packed_len), plain_len = 0;
    uint8_t *e2 = lc_xmalloc(cap);
    LC_ASSERT_OK(lc_entry_encode(f.packed, f.packed_len, e2, cap, &plain_len));
    LC_ASSERT_OK(lc_entry_decode(d, e2, plain_len, &msg, &len, &why));
    LC_ASSERT_MEM_EQ(msg, f.packed, f.packed_len);
    lc_free(e2);
    lc_entry_decoder_free(d);
    entry_fixture_fini(&f);
}

/* A v1 entry (the bare message) comes back as it is, not copied. */
static void test_v1_passes_through(void)
{
    entry_fixture_t f;
    entry_fixture(&f);
    LC_CHECK(!lc_entry_is_lean(f.packed, f.packed_len));
    lc_entry_decoder_t *d = lc_entry_decoder_new(0);
    const uint8_t *msg = NULL;
    size_t len = 0;
    const char *why = NULL;
    LC_ASSERT_OK(lc_entry_decode(d, f.packed, f.packed_len, &msg, &len, &why));
    LC_CHECK(msg == f.packed);
    LC_ASSERT_EQ(len, f.packed_len);
    LC_ASSERT_OK(lc_entry_decode(d, (const uint8_t *)"x", 1, &msg, &len, &why));
    LC_ASSERT_EQ(len, 1);
    lc_entry_decoder_free(d);
    entry_fixture_fini(&f);
}

static int decode_copy(lc_entry_decoder_t *d, const uint8_t *e, size_t n, const char **why)
{
    uint8_t *copy = lc_xmalloc(n ? n : 1);
    memcpy(copy, e, n);
    const uint8_t *msg = NULL;
    size_t len = 0;
    int rc = lc_entry_decode(d, copy, n, &msg, &len, why);
    lc_free(copy);
    return rc;
}

static void test_malformed_refused(void)
{
    entry_fixture_t f;
    entry_fixture(&f);
    lc_entry_decoder_t *d = lc_entry_decoder_new(0);
    const char *why = NULL;
    f.entry[3] = 3; /* a version from the future */
    LC_ASSERT_EQ(decode_copy(d, f.entry, f.entry_len, &why), LC_ECORRUPT);
    LC_CHECK(why && strstr(why, "version"));
    f.entry[3] = LC_ENTRY_VERSION;
    LC_ASSERT_EQ(decode_copy(d, f.entry, f.entry_len - 5, &why), LC_ECORRUPT); /* truncated */
    LC_ASSERT_EQ(decode_copy(d, f.entry, LC_ENTRY_HEADER_BYTES, &why), LC_ECORRUPT);
    f.entry[4] ^= 1; /* the header's length disagrees with the frame */
    LC_ASSERT_EQ(decode_copy(d, f.entry, f.entry_len, &why), LC_ECORRUPT);
    f.entry[4] ^= 1;
    f.entry[f.entry_len / 2] ^= 0x55; /* inside the compressed data */
    int rc = decode_copy(d, f.entry, f.entry_len, &why);
    LC_CHECK(rc == LC_ECORRUPT || rc == 0); /* zstd has no checksum by default: bytes may
                                               still decode, the protobuf layer judges */
    f.entry[f.entry_len / 2] ^= 0x55;
    lc_entry_decoder_free(d);
    /* Over the decoder's limit: refused before allocating. */
    d = lc_entry_decoder_new(f.packed_len - 1);
    LC_ASSERT_EQ(decode_copy(d, f.entry, f.entry_len, &why), LC_ETOOBIG);
    lc_entry_decoder_free(d);
    /* Too small an output buffer fails cleanly. */
    size_t len = 0;
    LC_ASSERT_EQ(lc_entry_encode(f.packed, f.packed_len, f.entry, 100, &len), LC_EINPUT);
    entry_fixture_fini(&f);
}

static void *heap_alloc(void *ctx, size_t size)
{
    LC_UNUSED(ctx);
    return lc_xmalloc(size);
}

static void *no_alloc(void *ctx, size_t size)
{
    LC_UNUSED(ctx);
    LC_UNUSED(size);
    return NULL;
}

/* What producers publish: the packed message (v1) or its lean entry, both
 * read back as protobuf-c's own packing; no room gives NULL. */
static void test_pack(void)
{
    entry_fixture_t f;
    entry_fixture(&f);
    ProtobufCMessage *m = protobuf_c_message_unpack(&ember__v1__ingest_profile__descriptor, NULL,
                                                    f.packed_len, f.packed);
    LC_CHECK(m != NULL);
    if (!m)
        return;
    size_t len = 0;
    uint8_t *bare = lc_entry_pack(m, false, heap_alloc, NULL, &len);
    LC_ASSERT_EQ(len, f.packed_len);
    LC_ASSERT_MEM_EQ(bare, f.packed, f.packed_len);
    uint8_t *lean = lc_entry_pack(m, true, heap_alloc, NULL, &len);
    LC_CHECK(lc_entry_is_lean(lean, len) && len < f.packed_len / 2);
    lc_entry_decoder_t *d = lc_entry_decoder_new(0);
    const uint8_t *msg = NULL;
    size_t msg_len = 0;
    const char *why = NULL;
    LC_ASSERT_OK(lc_entry_decode(d, lean, len, &msg, &msg_len, &why));
    LC_ASSERT_EQ(msg_len, f.packed_len);
    LC_ASSERT_MEM_EQ(msg, f.packed, f.packed_len);
    LC_CHECK(lc_entry_pack(m, true, no_alloc, NULL, &len) == NULL);
    LC_CHECK(lc_entry_pack(m, false, no_alloc, NULL, &len) == NULL);
    lc_entry_decoder_free(d);
    lc_free(bare);
    lc_free(lean);
    protobuf_c_message_free_unpacked(m, NULL);
    entry_fixture_fini(&f);
}

LC_TEST_MAIN(test_round_trip, test_v1_passes_through, test_malformed_refused, test_pack)
