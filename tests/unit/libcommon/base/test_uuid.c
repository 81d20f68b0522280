/* lc/uuid.h: the accepted spellings of a profile id, and everything else
 * refused. Expected bytes are written out by hand from the text. */
#include <string.h>

#include "lc/uuid.h"
#include "lc_test.h"

static const uint8_t WANT[LC_UUID_BYTES] = {0x6f, 0x2e, 0x49, 0xdd, 0xf2, 0xb1, 0x4b, 0xf8,
                                            0x82, 0x1b, 0xa1, 0xcc, 0x9f, 0x07, 0x0a, 0xff};

static void test_accepted_forms(void)
{
    const char *forms[] = {"6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff",
                           "6F2E49DD-F2B1-4BF8-821B-A1CC9F070AFF",
                           "6f2e49ddf2b14bf8821ba1cc9f070aff", "6f2E49dDf2B14bF8821bA1cC9f070AfF"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        uint8_t got[LC_UUID_BYTES] = {0};
        LC_CHECK(lc_uuid_parse(forms[i], got));
        LC_CHECK(memcmp(got, WANT, LC_UUID_BYTES) == 0);
    }
}

static void test_refused_forms(void)
{
    const char *bad[] = {
        "",
        "6f2e49dd-f2b1-4bf8-821b-a1cc9f070af",    /* one digit short */
        "6f2e49dd-f2b1-4bf8-821b-a1cc9f070afff",  /* one too many */
        "6f2e49ddf2b14bf8821ba1cc9f070af",        /* 31 digits */
        "6f2e49dd-f2b14-bf8-821b-a1cc9f070aff",   /* hyphen misplaced */
        "6f2e49dd_f2b1_4bf8_821b_a1cc9f070aff",   /* not hyphens */
        "6f2e49dd-f2b1-4bf8-821b-a1cc9f070afg",   /* not hex */
        "{6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff}", /* braces */
        "urn:uuid:6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff",
        " 6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff",
        "00000000000000a1", /* a span id */
        "6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff-",
        "6f2e49dd-f2b1-4bf8-821b--1cc9f070aff",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t got[LC_UUID_BYTES];
        memset(got, 0x5a, sizeof(got));
        if (lc_uuid_parse(bad[i], got))
            fprintf(stderr, "  accepted: \"%s\"\n", bad[i]);
        LC_CHECK(!lc_uuid_parse(bad[i], got));
        for (size_t k = 0; k < sizeof(got); k++)
            LC_ASSERT_EQ(got[k], 0x5a); /* untouched on failure */
    }
}

static void test_format_round_trip(void)
{
    char text[LC_UUID_TEXT_LEN + 1];
    lc_uuid_format(WANT, text);
    LC_CHECK(strcmp(text, "6f2e49dd-f2b1-4bf8-821b-a1cc9f070aff") == 0);
    uint8_t back[LC_UUID_BYTES];
    LC_CHECK(lc_uuid_parse(text, back));
    LC_CHECK(memcmp(back, WANT, LC_UUID_BYTES) == 0);
}

LC_TEST_MAIN(test_accepted_forms, test_refused_forms, test_format_round_trip)
