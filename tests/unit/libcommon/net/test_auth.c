/*
 * test_auth.c — SHA-256 against FIPS 180-4 vectors, the tokens file grammar,
 * the credential x tenant x scope matrix, tampered basic headers and reloads
 * that fail. The time a wrong token takes against how much of it matches is a
 * timing claim: bench/auth_bench.c measures it (docs/testing.md).
 */
#include <stdlib.h>

#include "lc/auth.h"
#include "lc_test.h"

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < LC_SHA256_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_hex(const char *s, char out[65])
{
    uint8_t d[LC_SHA256_BYTES];
    lc_sha256(s, strlen(s), d);
    hex(d, out);
}

static void test_sha256_vectors(void)
{
    char h[65];
    sha_hex("", h);
    LC_ASSERT_STR_EQ(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex("abc", h);
    LC_ASSERT_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", h);
    LC_ASSERT_STR_EQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *m = malloc(1000001);
    memset(m, 'a', 1000000);
    m[1000000] = '\0';
    sha_hex(m, h);
    LC_ASSERT_STR_EQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
}

static int check(const char *authz, bool write, const char *tenant)
{
    lc_http_header_t hd = {"authorization", authz};
    lc_http_req_t req = {.headers = &hd, .n_headers = authz ? 1 : 0};
    lc_status_t st = {0};
    const char *t[] = {tenant};
    if (lc_auth_check(&req, write, t, 1, &st) == 0)
        return 200;
    return st.code == LC_CODE_UNAUTHENTICATED     ? 401
           : st.code == LC_CODE_PERMISSION_DENIED ? 403
                                                  : 500;
}

static char file_text[2048];

static void load_fixture(void)
{
    char a[65], b[65], p[65];
    sha_hex("tok-a-rw", a);
    sha_hex("tok-ab-r", b);
    sha_hex("s3cret", p);
    snprintf(file_text, sizeof(file_text),
             "# test credentials\n"
             "token sha256:%s tenants=a scope=read,write\n"
             "token sha256:%s tenants=a,b scope=read\n"
             "basic alice sha256:%s tenants=* scope=write   # any tenant\n",
             a, b, p);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_auth_load_text(file_text, &st));
}

static void test_matrix(void)
{
    load_fixture();
    /* alice:s3cret, alice:s3creT, bob:s3cret */
    const char *alice = "Basic YWxpY2U6czNjcmV0", *alice_bad = "Basic YWxpY2U6czNjcmVU",
               *bob = "Basic Ym9iOnMzY3JldA==";
    LC_ASSERT_EQ(check("Bearer tok-a-rw", false, "a"), 200);
    LC_ASSERT_EQ(check("Bearer tok-a-rw", true, "a"), 200);
    LC_ASSERT_EQ(check("Bearer tok-a-rw", false, "b"), 403);
    LC_ASSERT_EQ(check("Bearer tok-ab-r", false, "b"), 200);
    LC_ASSERT_EQ(check("Bearer tok-ab-r", true, "a"), 403);
    LC_ASSERT_EQ(check(alice, true, "zzz"), 200);
    LC_ASSERT_EQ(check(alice, false, "a"), 403);
    LC_ASSERT_EQ(check(alice_bad, true, "a"), 401);
    LC_ASSERT_EQ(check(bob, true, "a"), 401);
    LC_ASSERT_EQ(check("Basic !!!!", true, "a"), 401);
    LC_ASSERT_EQ(check("Basic YWxpY2U6czNjcmV0=", true, "a"), 401); /* bad padding */
    LC_ASSERT_EQ(check("Bearer tok-a-rwx", false, "a"), 401);
    LC_ASSERT_EQ(check("Bearer ", false, "a"), 401);
    LC_ASSERT_EQ(check(NULL, false, "a"), 401);
    LC_ASSERT_EQ(check("tok-a-rw", false, "a"), 401);
    lc_auth_reset();
    LC_ASSERT_EQ(check(NULL, false, "a"), 200); /* off */
}

static void test_bad_files_are_refused(void)
{
    static const char *bad[] = {
        "token abc tenants=a scope=read\n",
        "token sha256:00 tenants=a scope=read\n",
        "basic sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 "
        "tenants=a scope=read\n",
        "token sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 "
        "tenants=a scope=admin\n",
        "token sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 "
        "scope=read tenants=a\n",
    };
    load_fixture();
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        lc_status_t st = {0};
        LC_CHECK(lc_auth_load_text(bad[i], &st) != 0);
        LC_CHECK(st.msg[0] != '\0');
    }
    /* a failed load keeps the table in force */
    LC_ASSERT_EQ(check("Bearer tok-a-rw", false, "a"), 200);
    lc_auth_reset();
}

LC_TEST_MAIN(test_sha256_vectors, test_matrix, test_bad_files_are_refused)
