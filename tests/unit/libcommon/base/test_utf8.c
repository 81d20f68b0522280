/* lc/utf8.h: lc_utf8_sanitize replaces every byte that does not start a valid
 * sequence (Go's unicode/utf8 rule: no overlong forms, no surrogates, nothing
 * past U+10FFFF) with '?'. Expected strings are written out by hand. */
#include <stdio.h>

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

LC_TEST_MAIN(test_sanitize_keeps_valid_text, test_sanitize_replaces_each_bad_byte)
