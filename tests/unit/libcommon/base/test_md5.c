/* lc/md5.h: the test suite of RFC 1321 (appendix A.5), plus inputs that end
 * on each side of the padding boundary (55, 56 and 64 bytes), whose digests
 * come from coreutils' md5sum. */
#include <stdio.h>
#include <string.h>

#include "lc/err.h"
#include "lc/md5.h"
#include "lc_test.h"

static void check_digest(const char *in, const char *want)
{
    uint8_t d[LC_MD5_BYTES];
    char got[2 * LC_MD5_BYTES + 1];
    lc_md5(in, strlen(in), d);
    for (int i = 0; i < LC_MD5_BYTES; i++)
        snprintf(got + 2 * i, 3, "%02x", d[i]);
    LC_ASSERT_STR_EQ(got, want);
}

static void test_rfc1321_vectors(void)
{
    check_digest("", "d41d8cd98f00b204e9800998ecf8427e");
    check_digest("a", "0cc175b9c0f1b6a831c399e269772661");
    check_digest("abc", "900150983cd24fb0d6963f7d28e17f72");
    check_digest("message digest", "f96b697d7cb7938d525a2f31aaf161d0");
    check_digest("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b");
    check_digest("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                 "d174ab98d277d9f5a5611c2c9f419d9f");
    check_digest("12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                 "57edf4a22be3c955ac49da2e2107b67a");
}

static void test_padding_boundaries(void)
{
    char a[65];
    struct {
        size_t n;
        const char *want;
    } v[] = {{55, "ef1772b6dff9a122358552954ad0df65"},
             {56, "3b0c8ac703f828b04c6c197006d17218"},
             {64, "014842d480b571495a4a0363793f7367"}};
    for (size_t i = 0; i < LC_ARRAY_LEN(v); i++) {
        memset(a, 'a', v[i].n);
        a[v[i].n] = '\0';
        check_digest(a, v[i].want);
    }
}

LC_TEST_MAIN(test_rfc1321_vectors, test_padding_boundaries)
