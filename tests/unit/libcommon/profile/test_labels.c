/*
 * test_labels.c — label set operations, canonical order, the binary form (and
 * its rejection of malformed input) and the stability of the hashes.
 */
#include "lc/labels.h"
#include "lc_test.h"

static void make_set(lc_labels_t *ls, const char *const *kv, size_t n)
{
    lc_labels_init(ls);
    for (size_t i = 0; i < n; i++)
        lc_labels_add(ls, kv[2 * i], kv[2 * i + 1]);
}

static void test_add_get_set_del(void)
{
    lc_labels_t ls;
    lc_labels_init(&ls);
    lc_labels_add(&ls, "service_name", "api");
    lc_labels_add(&ls, "env", "prod");
    LC_ASSERT_STR_EQ(lc_labels_get(&ls, "env"), "prod");
    LC_CHECK(lc_labels_get(&ls, "missing") == NULL);

    lc_labels_set(&ls, "env", "dev");   /* replace */
    lc_labels_set(&ls, "region", "eu"); /* append */
    LC_ASSERT_EQ(ls.n, 3);
    LC_ASSERT_STR_EQ(lc_labels_get(&ls, "env"), "dev");
    lc_labels_set(&ls, "env", lc_labels_get(&ls, "env")); /* aliasing its own value */
    LC_ASSERT_STR_EQ(lc_labels_get(&ls, "env"), "dev");

    LC_CHECK(lc_labels_del(&ls, "service_name"));
    LC_CHECK(!lc_labels_del(&ls, "service_name"));
    LC_ASSERT_EQ(ls.n, 2);
    LC_ASSERT_STR_EQ(ls.v[0].name, "env");
    LC_ASSERT_STR_EQ(ls.v[1].name, "region");
    lc_labels_fini(&ls);
    LC_ASSERT_EQ(ls.n, 0);
}

static void test_copy_is_deep(void)
{
    static const char *const kv[] = {"a", "1", "b", "2"};
    lc_labels_t src, dst;
    make_set(&src, kv, 2);
    lc_labels_copy(&dst, &src);
    lc_labels_set(&src, "a", "changed");
    LC_ASSERT_STR_EQ(lc_labels_get(&dst, "a"), "1");
    LC_CHECK(dst.v[1].name != src.v[1].name);
    lc_labels_fini(&src);
    lc_labels_fini(&dst);
}

static void test_sort_is_byte_order_and_finds_duplicates(void)
{
    /* Byte order: upper case before '_' before lower case, and UTF-8 last. */
    static const char *const kv[] = {"b", "1",        "_x", "2", "Z", "3", "a.b",
                                     "4", "\xc3\xa9", "5",  "a", "6", "b", "0"};
    lc_labels_t ls;
    make_set(&ls, kv, 7);
    lc_labels_sort(&ls);
    static const char *const want[] = {"Z", "_x", "a", "a.b", "b", "b", "\xc3\xa9"};
    for (size_t i = 0; i < 7; i++)
        LC_ASSERT_STR_EQ(ls.v[i].name, want[i]);
    LC_ASSERT_STR_EQ(ls.v[4].value, "0"); /* ties ordered by value */
    LC_ASSERT_STR_EQ(lc_labels_duplicate(&ls), "b");
    LC_CHECK(lc_labels_del(&ls, "b"));
    LC_CHECK(lc_labels_duplicate(&ls) == NULL);
    LC_ASSERT_STR_EQ(lc_labels_get(&ls, "b"), "1");
    lc_labels_fini(&ls);
}

static void test_cmp(void)
{
    static const char *const a_kv[] = {"a", "1", "b", "2"};
    static const char *const b_kv[] = {"a", "1", "b", "3"};
    static const char *const c_kv[] = {"a", "1"};
    lc_labels_t a, b, c, a2;
    make_set(&a, a_kv, 2);
    make_set(&b, b_kv, 2);
    make_set(&c, c_kv, 1);
    make_set(&a2, a_kv, 2);
    LC_ASSERT_EQ(lc_labels_cmp(&a, &a2), 0);
    LC_ASSERT_EQ(lc_labels_cmp(&a, &b), -1);
    LC_ASSERT_EQ(lc_labels_cmp(&b, &a), 1);
    LC_ASSERT_EQ(lc_labels_cmp(&c, &a), -1); /* a prefix sorts first */
    LC_ASSERT_EQ(lc_labels_cmp(&a, &c), 1);
    lc_labels_fini(&a);
    lc_labels_fini(&b);
    lc_labels_fini(&c);
    lc_labels_fini(&a2);
}

static void test_encode_decode_round_trip(void)
{
    static const char *const kv[] = {"__name__",      "process_cpu", "service.name",
                                     "a\xe2\x82\xac", "empty",       ""};
    lc_labels_t ls, back;
    make_set(&ls, kv, 3);
    lc_buf_t buf;
    lc_buf_init(&buf, 1 << 20);
    LC_ASSERT_OK(lc_labels_encode(&ls, &buf));
    /* 1 count byte + (1+8 + 1+11) + (1+12 + 1+4) + (1+5 + 1+0) */
    LC_ASSERT_EQ(buf.len, 1 + 21 + 18 + 7);
    LC_ASSERT_EQ(buf.data[0], 3);
    LC_ASSERT_OK(lc_labels_decode(buf.data, buf.len, &back));
    LC_ASSERT_EQ(lc_labels_cmp(&ls, &back), 0);
    LC_ASSERT_EQ(lc_labels_hash(&ls), lc_labels_hash(&back));
    lc_labels_fini(&back);

    lc_labels_t empty;
    lc_labels_init(&empty);
    lc_buf_reset(&buf);
    LC_ASSERT_OK(lc_labels_encode(&empty, &buf));
    LC_ASSERT_EQ(buf.len, 1);
    LC_ASSERT_OK(lc_labels_decode(buf.data, buf.len, &back));
    LC_ASSERT_EQ(back.n, 0);
    lc_labels_fini(&back);
    lc_labels_fini(&ls);
    lc_buf_fini(&buf);
}

static void test_decode_rejects_malformed(void)
{
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
    } cases[] = {
        {"empty input", "", 0},
        {"truncated count varint", "\x80", 1},
        {"count larger than the input",
         "\x05\x01"
         "a\x01"
         "b",
         5},
        {"huge count", "\xff\xff\xff\xff\x0f", 5},
        {"name length past the end",
         "\x01\x05"
         "ab",
         4},
        {"missing value",
         "\x01\x01"
         "a",
         3},
        {"value length past the end",
         "\x01\x01"
         "a\x09"
         "b",
         5},
        {"trailing bytes",
         "\x01\x01"
         "a\x01"
         "bX",
         6},
        {"NUL inside a name",
         "\x01\x02"
         "a\0\x01"
         "b",
         6},
        {"overlong varint", "\x81\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        lc_labels_t out;
        int rc = lc_labels_decode((const uint8_t *)cases[i].bytes, cases[i].len, &out);
        if (rc == 0)
            fprintf(stderr, "accepted: %s\n", cases[i].what);
        LC_CHECK(rc != 0);
        LC_ASSERT_EQ(out.n, 0);
    }
}

/* The hash is persisted (series fingerprints), so its values are pinned. The
 * expected numbers were computed independently with Python:
 *   fnv1a64 over name 0xff value 0xff ..., xor n, then the murmur3 fmix64. */
static void test_hash_is_stable(void)
{
    static const char *const kv[] = {"a", "b"};
    lc_labels_t ls;
    make_set(&ls, kv, 1);
    LC_ASSERT_EQ(lc_labels_hash(&ls), (long long)0xcddb15151d61c236ULL);
    lc_labels_fini(&ls);

    lc_labels_init(&ls);
    LC_ASSERT_EQ(lc_labels_hash(&ls), (long long)0xefd01f60ba992926ULL);
    lc_labels_fini(&ls);

    LC_ASSERT_EQ(lc_hash64("hello", 5, 0), (long long)0x3aff9cfcce477975ULL);
    LC_CHECK(lc_hash64("hello", 5, 0) != lc_hash64("hello", 5, 1));
    LC_CHECK(lc_hash64("", 0, 0) != lc_hash64("", 0, 1));
}

static void test_hash_separates_fields(void)
{
    static const char *const x_kv[] = {"ab", "c"};
    static const char *const y_kv[] = {"a", "bc"};
    static const char *const z_kv[] = {"a", "b", "c", ""};
    lc_labels_t x, y, z;
    make_set(&x, x_kv, 1);
    make_set(&y, y_kv, 1);
    make_set(&z, z_kv, 2);
    LC_CHECK(lc_labels_hash(&x) != lc_labels_hash(&y));
    LC_CHECK(lc_labels_hash(&x) != lc_labels_hash(&z));
    LC_CHECK(lc_labels_hash(&y) != lc_labels_hash(&z));
    lc_labels_fini(&x);
    lc_labels_fini(&y);
    lc_labels_fini(&z);
}

static void test_legacy_names(void)
{
    LC_CHECK(lc_label_name_is_legacy("service_name"));
    LC_CHECK(lc_label_name_is_legacy("_a9"));
    LC_CHECK(lc_label_name_is_legacy("__name__"));
    LC_CHECK(!lc_label_name_is_legacy(""));
    LC_CHECK(!lc_label_name_is_legacy("9a"));
    LC_CHECK(!lc_label_name_is_legacy("service.name"));
    LC_CHECK(!lc_label_name_is_legacy("a-b"));
    LC_CHECK(!lc_label_name_is_legacy("\xc3\xa9"));
}

LC_TEST_MAIN(test_add_get_set_del, test_copy_is_deep, test_sort_is_byte_order_and_finds_duplicates,
             test_cmp, test_encode_decode_round_trip, test_decode_rejects_malformed,
             test_hash_is_stable, test_hash_separates_fields, test_legacy_names)
