/*
 * test_multipart.c — the /ingest multipart reader against the shapes real
 * SDKs send (real-clients.md §1: Node SDK <= 0.6.1; §2b: pyroscope-go), plus
 * boundary edge cases, truncated and malformed input, and the caps.
 */
#include "lc_test.h"
#include "receive_int.h"

/* A pprof-like binary payload with bytes that could confuse a scanner. */
static const uint8_t payload[] = {0x1f, 0x8b, 0x08, 0x00, '\r', '\n', '-',  '-',  0x00, 0xff,
                                  '\n', '-',  '-',  'b',  0x0d, 0x0a, 0x2d, 0x2d, 0x41};

typedef struct mp_fixture_s {
    lc_arena_t *arena;
    lc_buf_t body;
    ing_form_t form;
    lc_status_t st;
} mp_fixture_t;

static void fx_init(mp_fixture_t *f)
{
    f->arena = lc_arena_new(1 << 22);
    lc_buf_init(&f->body, LC_BUF_UNLIMITED);
    f->st = (lc_status_t){0};
}

static void fx_fini(mp_fixture_t *f)
{
    lc_buf_fini(&f->body);
    lc_arena_free(f->arena);
}

static void put(mp_fixture_t *f, const char *s)
{
    LC_ASSERT_OK(lc_buf_puts(&f->body, s));
}

static void put_bytes(mp_fixture_t *f, const void *p, size_t n)
{
    LC_ASSERT_OK(lc_buf_append(&f->body, p, n));
}

static int parse(mp_fixture_t *f, const char *boundary)
{
    f->st = (lc_status_t){0};
    return ing_multipart_parse(f->body.data, f->body.len, boundary, f->arena, &f->form, &f->st);
}

/* Go's mime/multipart writer, as pyroscope-go v1.2.1 uses it. */
static void test_go_sdk_shape(void)
{
    static const char b[] = "d2c9a3c0b0e0d6a5d8a8e2f0d2c4a0b6c8e4f2a6d0c2e8b4a2f6e0d4c6b8a0";
    static const char cfg[] = "{\"contentions\":{\"units\":\"lock_samples\",\"display-name\":"
                              "\"mutex_count\"},\"delay\":{\"units\":\"lock_nanoseconds\","
                              "\"display-name\":\"mutex_duration\"}}\n";
    mp_fixture_t f;
    fx_init(&f);
    char ct[200];
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%s", b);
    const char *boundary;
    LC_ASSERT_OK(ing_multipart_boundary(ct, f.arena, &boundary, &f.st));
    LC_ASSERT_STR_EQ(boundary, b);
    put(&f, "--"), put(&f, b), put(&f, "\r\n");
    put(&f, "Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n");
    put(&f, "Content-Type: application/octet-stream\r\n\r\n");
    put_bytes(&f, payload, sizeof(payload));
    put(&f, "\r\n--"), put(&f, b), put(&f, "\r\n");
    put(&f, "Content-Disposition: form-data; name=\"sample_type_config\"; "
            "filename=\"sample_type_config.json\"\r\n");
    put(&f, "Content-Type: application/octet-stream\r\n\r\n");
    put(&f, cfg);
    put(&f, "\r\n--"), put(&f, b), put(&f, "--\r\n");
    LC_ASSERT_OK(parse(&f, boundary));
    LC_ASSERT_EQ(f.form.n, 2);
    const ing_part_t *p = ing_form_file(&f.form, "profile");
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_EQ(p->len, sizeof(payload));
        LC_ASSERT_MEM_EQ(p->data, payload, sizeof(payload));
        LC_ASSERT_STR_EQ(p->filename, "profile.pprof");
        LC_ASSERT_STR_EQ(p->content_type, "application/octet-stream");
    }
    p = ing_form_file(&f.form, "sample_type_config");
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_EQ(p->len, strlen(cfg));
        LC_ASSERT_MEM_EQ(p->data, cfg, strlen(cfg));
    }
    LC_CHECK(ing_form_file(&f.form, "prev_profile") == NULL);
    fx_fini(&f);
}

/* undici's FormData, as @pyroscope/nodejs <= 0.6.1 sends it. */
static void test_node_sdk_shape(void)
{
    mp_fixture_t f;
    fx_init(&f);
    const char *b;
    LC_ASSERT_OK(ing_multipart_boundary(
        "multipart/form-data; boundary=----formdata-undici-021942567315", f.arena, &b, &f.st));
    put(&f, "------formdata-undici-021942567315\r\n");
    put(&f, "Content-Disposition: form-data; name=\"profile\"; filename=\"profile\"\r\n");
    put(&f, "Content-Type: application/octet-stream\r\n\r\n");
    put_bytes(&f, payload, sizeof(payload));
    put(&f, "\r\n------formdata-undici-021942567315--");
    LC_ASSERT_OK(parse(&f, b));
    const ing_part_t *p = ing_form_file(&f.form, "profile");
    LC_CHECK(p && p->len == sizeof(payload) && memcmp(p->data, payload, p->len) == 0);
    fx_fini(&f);
}

static void test_empty_part_and_fields(void)
{
    mp_fixture_t f;
    fx_init(&f);
    /* Pyroscope's TestEmptyPPROF shape: an empty profile part. */
    put(&f, "--xyz\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"p\"\r\n"
            "\r\n\r\n--xyz\r\n"
            "Content-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n--xyz--\r\n");
    LC_ASSERT_OK(parse(&f, "xyz"));
    LC_ASSERT_EQ(f.form.n, 2);
    const ing_part_t *p = ing_form_file(&f.form, "profile");
    LC_CHECK(p && p->len == 0);
    LC_CHECK(ing_form_file(&f.form, "note") == NULL); /* not a file part */
    LC_ASSERT_EQ(f.form.parts[1].len, 5);
    fx_fini(&f);
}

static void test_preamble_padding_epilogue_lf(void)
{
    mp_fixture_t f;
    fx_init(&f);
    put(&f, "this is a preamble\r\n--xyz-not\r\n--xyz \t\r\n"
            "content-disposition: FORM-DATA; NAME=profile; filename=\"a\\\"b\"\r\n\r\n"
            "data--xyz\r\n--xyzz\r\n--xyz--   \r\nepilogue --xyz");
    LC_ASSERT_OK(parse(&f, "xyz"));
    const ing_part_t *p = ing_form_file(&f.form, "profile");
    LC_CHECK(p != NULL);
    if (p) {
        LC_ASSERT_STR_EQ(p->filename, "a\"b");
        LC_ASSERT_EQ(p->len, strlen("data--xyz\r\n--xyzz"));
    }
    fx_fini(&f);

    fx_init(&f); /* bare LF line endings, decided by the first delimiter */
    put(&f, "--xyz\nContent-Disposition: form-data; name=\"profile\"; filename=\"p\"\n\n"
            "ab\r\ncd\n--xyz--\n");
    LC_ASSERT_OK(parse(&f, "xyz"));
    p = ing_form_file(&f.form, "profile");
    LC_CHECK(p && p->len == 6 && memcmp(p->data, "ab\r\ncd", 6) == 0);
    fx_fini(&f);
}

static void test_first_file_part_wins(void)
{
    mp_fixture_t f;
    fx_init(&f);
    put(&f, "--b\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\nfield\r\n"
            "--b\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"1\"\r\n\r\none\r\n"
            "--b\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"2\"\r\n\r\ntwo\r\n"
            "--b\r\nContent-Disposition: attachment; name=\"x\"; filename=\"3\"\r\n\r\nthree\r\n"
            "--b--\r\n");
    LC_ASSERT_OK(parse(&f, "b"));
    const ing_part_t *p = ing_form_file(&f.form, "profile");
    LC_CHECK(p && p->len == 3 && memcmp(p->data, "one", 3) == 0);
    LC_CHECK(ing_form_file(&f.form, "x") == NULL); /* not form-data: no field name */
    fx_fini(&f);
}

static void expect_fail(const char *body, const char *boundary, const char *why)
{
    mp_fixture_t f;
    fx_init(&f);
    put(&f, body);
    int rc = parse(&f, boundary);
    if (rc == 0)
        fprintf(stderr, "  accepted (%s)\n", why);
    LC_CHECK(rc < 0);
    LC_ASSERT_EQ(f.st.code, LC_CODE_INVALID_ARGUMENT);
    fx_fini(&f);
}

static void test_malformed(void)
{
    static const char hdr[] = "Content-Disposition: form-data; name=\"profile\"; filename=\"p\"";
    char buf[512];
    expect_fail("", "xyz", "empty body");
    expect_fail("no delimiter here\r\n", "xyz", "no boundary");
    snprintf(buf, sizeof(buf), "--xyz\r\n%s\r\n\r\ndata", hdr);
    expect_fail(buf, "xyz", "truncated data");
    snprintf(buf, sizeof(buf), "--xyz\r\n%s\r\n\r\ndata\r\n--xyz\r\n", hdr);
    expect_fail(buf, "xyz", "truncated after a delimiter");
    snprintf(buf, sizeof(buf), "--xyz\r\n%s", hdr);
    expect_fail(buf, "xyz", "truncated headers");
    expect_fail("--xyz\r\nno colon\r\n\r\nd\r\n--xyz--", "xyz", "header without colon");
    snprintf(buf, sizeof(buf), "--xyz\r\n%s\r\n folded\r\n\r\nd\r\n--xyz--", hdr);
    expect_fail(buf, "xyz", "folded header");
    expect_fail("--xyz\r\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\r\n\r\n"
                "d\r\n--xyz--",
                "xyz", "duplicate parameter");
    expect_fail("--xyz\r\nContent-Disposition: form-data; name=\"a\r\n\r\nd\r\n--xyz--", "xyz",
                "unterminated quote");
    expect_fail("--xyz\r\nContent-Disposition: form-data; name\r\n\r\nd\r\n--xyz--", "xyz",
                "parameter without value");
    expect_fail("--xyzjunk\r\n\r\n--xyz--", "", "empty boundary");
}

static void test_boundary_param(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 16);
    lc_status_t st = {0};
    const char *b;
    LC_ASSERT_OK(ing_multipart_boundary("Multipart/Form-Data; Boundary=\"a b:c\"", arena, &b, &st));
    LC_ASSERT_STR_EQ(b, "a b:c");
    LC_ASSERT_OK(
        ing_multipart_boundary("multipart/form-data;boundary=x;charset=utf-8", arena, &b, &st));
    LC_ASSERT_STR_EQ(b, "x");
    LC_CHECK(ing_multipart_boundary("multipart/form-data", arena, &b, &st) < 0);
    LC_CHECK(ing_multipart_boundary("multipart/mixed; boundary=x", arena, &b, &st) < 0);
    LC_CHECK(ing_multipart_boundary("text/plain; boundary=x", arena, &b, &st) < 0);
    LC_CHECK(ing_multipart_boundary(NULL, arena, &b, &st) < 0);
    LC_CHECK(ing_multipart_boundary("multipart/form-data; boundary=", arena, &b, &st) < 0);
    LC_CHECK(ing_multipart_boundary("multipart/form-data; boundary=\"x \"", arena, &b, &st) < 0);
    char long_ct[200];
    snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%071d", 0);
    LC_CHECK(ing_multipart_boundary(long_ct, arena, &b, &st) < 0); /* 71 > 70 chars */
    snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%070d", 0);
    LC_ASSERT_OK(ing_multipart_boundary(long_ct, arena, &b, &st));
    lc_arena_free(arena);
}

static void test_caps(void)
{
    mp_fixture_t f;
    fx_init(&f);
    for (int i = 0; i <= ING_MULTIPART_MAX_PARTS; i++)
        put(&f, "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\nx\r\n");
    put(&f, "--b--\r\n");
    LC_CHECK(parse(&f, "b") < 0);
    LC_CHECK(strstr(f.st.msg, "too many parts") != NULL);
    fx_fini(&f);

    fx_init(&f);
    put(&f, "--b\r\nX-Filler: ");
    for (int i = 0; i < ING_MULTIPART_MAX_HEADER_BYTES; i++)
        put(&f, "a");
    put(&f, "\r\n\r\nx\r\n--b--\r\n");
    LC_CHECK(parse(&f, "b") < 0);
    LC_CHECK(strstr(f.st.msg, "headers too large") != NULL);
    fx_fini(&f);

    fx_init(&f); /* exactly the cap of parts is fine */
    for (int i = 0; i < ING_MULTIPART_MAX_PARTS; i++)
        put(&f, "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\nx\r\n");
    put(&f, "--b--\r\n");
    LC_ASSERT_OK(parse(&f, "b"));
    LC_ASSERT_EQ(f.form.n, ING_MULTIPART_MAX_PARTS);
    fx_fini(&f);
}

static void test_sniff_boundary(void)
{
    lc_arena_t *arena = lc_arena_new(1 << 16);
    const char *b;
    static const char go[] = "--0123abcd\r\nContent-Disposition: form-data\r\n";
    LC_ASSERT_OK(ing_multipart_sniff_boundary((const uint8_t *)go, strlen(go), arena, &b));
    LC_ASSERT_STR_EQ(b, "0123abcd");
    LC_ASSERT_OK(ing_multipart_sniff_boundary((const uint8_t *)"--x y \n", 7, arena, &b));
    LC_ASSERT_STR_EQ(b, "x y");
    static const uint8_t gz[] = {0x1f, 0x8b, 0x08, 0x00};
    LC_CHECK(ing_multipart_sniff_boundary(gz, sizeof(gz), arena, &b) < 0);
    LC_CHECK(ing_multipart_sniff_boundary((const uint8_t *)"--\r\n", 4, arena, &b) < 0);
    LC_CHECK(ing_multipart_sniff_boundary((const uint8_t *)"-", 1, arena, &b) < 0);
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_go_sdk_shape, test_node_sdk_shape, test_empty_part_and_fields,
             test_preamble_padding_epilogue_lf, test_first_file_part_wins, test_malformed,
             test_boundary_param, test_caps, test_sniff_boundary)
