/*
 * test_pbstrings.c — lc_pb_strings_check (lc/pbstrings.h) on Push requests
 * packed by protobuf-c from known strings: a NUL in a label name or value two
 * messages deep is refused naming the field; the same request without it,
 * bytes fields holding NULs and unknown fields pass; malformed bytes are left
 * to the unpack (0).
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "lc/alloc.h"
#include "lc/pbstrings.h"
#include "lc_test.h"
#include "push/v1/push.pb-c.h"

/* Packs a one-series Push request whose one label is name_len/value_len
 * bytes (NULs allowed: the packer copies strlen bytes, so they are written
 * by hand after a placeholder of the same length). */
static size_t pack_push(const char *name, size_t name_len, const char *value, size_t value_len,
                        uint8_t *out)
{
    char n[32], v[32];
    memset(n, 'N', name_len);
    n[name_len] = '\0';
    memset(v, 'V', value_len);
    v[value_len] = '\0';
    Types__V1__LabelPair lp = TYPES__V1__LABEL_PAIR__INIT;
    lp.name = n;
    lp.value = v;
    Types__V1__LabelPair *lps[] = {&lp};
    uint8_t raw[] = {0, 1, 0, 2}; /* bytes may hold NULs */
    Push__V1__RawSample rs = PUSH__V1__RAW_SAMPLE__INIT;
    rs.raw_profile = (ProtobufCBinaryData){sizeof(raw), raw};
    Push__V1__RawSample *rss[] = {&rs};
    Push__V1__RawProfileSeries s = PUSH__V1__RAW_PROFILE_SERIES__INIT;
    s.n_labels = 1;
    s.labels = lps;
    s.n_samples = 1;
    s.samples = rss;
    Push__V1__RawProfileSeries *ss[] = {&s};
    Push__V1__PushRequest r = PUSH__V1__PUSH_REQUEST__INIT;
    r.n_series = 1;
    r.series = ss;
    size_t len = push__v1__push_request__pack(&r, out);
    uint8_t *at = memmem(out, len, n, name_len);
    memcpy(at, name, name_len);
    at = memmem(out, len, v, value_len);
    memcpy(at, value, value_len);
    return len;
}

static void test_nul_refused(void)
{
    uint8_t buf[256];
    lc_status_t st = {0};
    size_t len = pack_push("key", 3, "a\0b", 3, buf);
    LC_ASSERT_EQ(lc_pb_strings_check(&push__v1__push_request__descriptor, buf, len, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    LC_ASSERT_EQ(strstr(st.msg, "types.v1.LabelPair.value") != NULL, 1);
    len = pack_push("k\0y", 3, "abc", 3, buf);
    LC_ASSERT_EQ(lc_pb_strings_check(&push__v1__push_request__descriptor, buf, len, &st), -1);
    LC_ASSERT_EQ(strstr(st.msg, "types.v1.LabelPair.name") != NULL, 1);
}

static void test_clean_passes(void)
{
    uint8_t buf[256];
    lc_status_t st = {0};
    size_t len = pack_push("key", 3, "abc", 3, buf);
    LC_ASSERT_OK(lc_pb_strings_check(&push__v1__push_request__descriptor, buf, len, &st));
    /* an unknown field (99, length-delimited, holding a NUL) is stepped over */
    uint8_t extra[] = {0x9a, 0x06, 2, 'a', 0};
    memcpy(buf + len, extra, sizeof(extra));
    LC_ASSERT_OK(
        lc_pb_strings_check(&push__v1__push_request__descriptor, buf, len + sizeof(extra), &st));
}

static void test_malformed_left_to_unpack(void)
{
    lc_status_t st = {0};
    const uint8_t cut[] = {0x0a, 0x40, 0x0a}; /* a length past the end */
    LC_ASSERT_OK(lc_pb_strings_check(&push__v1__push_request__descriptor, cut, sizeof(cut), &st));
    LC_ASSERT_OK(lc_pb_strings_check(&push__v1__push_request__descriptor, NULL, 0, &st));
}

LC_TEST_MAIN(test_nul_refused, test_clean_passes, test_malformed_left_to_unpack)
