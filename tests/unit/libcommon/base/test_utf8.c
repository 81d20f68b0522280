/* lc/utf8.h: lc_utf8_sanitize replaces every byte that does not start a valid
 * sequence (Go's unicode/utf8 rule: no overlong forms, no surrogates, nothing
 * past U+10FFFF) with '?'. Expected strings are written out by hand. */
#include <stdio.h>
#include <string.h>

#include "lc/utf8.h"
#include "lc_test.h"

static void check_sanitized(const char *in, const char *want)
{
    char s[128];
    snprintf(s, sizeof(s), "%s", in);
    lc_utf8_sanitize(s);
    LC_ASSERT_STR_EQ(s, want);
    LC_CHECK(lc_utf8_valid_str(s));
}

static void test_sanitize_keeps_valid_text(void)
{
    check_sanitized("", "");
    check_sanitized("plain ascii", "plain ascii");
    check_sanitized("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5 \xf4\x8f\xbf\xbf",
                    "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5 \xf4\x8f\xbf\xbf");
}

static void test_sanitize_replaces_each_bad_byte(void)
{
    check_sanitized("ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5 bad:\xff\xc3 \xed\xa0\x80 end",
                    "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5 bad:?? ??? end");
    check_sanitized("\xc0\xaf", "??");           /* overlong '/' */
    check_sanitized("\xf4\x90\x80\x80", "????"); /* U+110000 */
    check_sanitized("a\xe2\x82", "a??");         /* cut short at the end */
    check_sanitized("\x80\xbf x", "?? x");       /* lone continuation bytes */
}

/* lc_utf8_valid skips ASCII eight bytes at a time: a bad byte, a good
 * multibyte character or a cut one at any offset of an ASCII run. */
static void test_valid_at_every_offset(void)
{
    char s[48];
    for (size_t len = 0; len <= 40; len++) {
        memset(s, 'a', len);
        LC_CHECK(lc_utf8_valid(s, len));
        for (size_t k = 0; k < len; k++) {
            memset(s, 'a', len);
            s[k] = (char)0xff;
            LC_CHECK(!lc_utf8_valid(s, len));
            if (k + 3 <= len) {
                memcpy(s + k, "\xe2\x82\xac", 3); /* U+20AC */
                LC_CHECK(lc_utf8_valid(s, len));
            }
            if (k + 2 == len) {
                memcpy(s + k, "\xe2\x82", 2); /* its first two bytes, at the end */
                LC_CHECK(!lc_utf8_valid(s, len));
            }
        }
    }
}

LC_TEST_MAIN(test_sanitize_keeps_valid_text, test_sanitize_replaces_each_bad_byte,
             test_valid_at_every_offset)
