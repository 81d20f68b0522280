/*
 * test_attime.c — attime parsing for /ingest and /pyroscope/render* (pyroscope-api.md §7.6).
 * Expected values are computed here from the spec's rules, never by the code.
 */
#include "lc/attime.h"
#include "lc/err.h"
#include "lc_test.h"

#define S 1000000000LL
#define NOW (1577836800LL * S) /* 2020-01-01T00:00:00Z */

typedef struct at_case_s {
    const char *input;
    int64_t want;
} at_case_t;

static const at_case_t cases[] = {
    {"now", NOW},
    {"", NOW},
    {"garbage", NOW},
    {"now-1s", NOW - S},
    {"now+1s", NOW + S},
    {"now-1min", NOW - 60 * S},
    {"now-30m", NOW - 30 * 60 * S},
    {"now-1h", NOW - 3600 * S},
    {"now-1d", NOW - 86400 * S},
    {"now-7d", NOW - 7 * 86400 * S},
    {"now-1w", NOW - 7 * 86400 * S},
    {"now-1mon", NOW - 30 * 86400 * S},
    {"now-1M", NOW - 30 * 86400 * S},
    {"now-1y", NOW - 365 * 86400 * S},
    {"now-1", NOW},                    /* no unit: multiplier 0 */
    {"now-5ms", NOW - 5 * 60 * S},     /* no millisecond unit: "ms" is minutes */
    {"now-3h30m", NOW - 3 * 3600 * S}, /* only the first pair counts */
    {"now - 1 h", NOW - 3600 * S},     /* spaces are removed first */
    {"20200101", 1577836800LL * S},    /* YYYYMMDD, midnight UTC */
    {"20240229", 1709164800LL * S},    /* a leap day */
    {"20230229", 20230229LL * S},      /* not a date: seconds */
    {"19000101", 19000101LL * S},      /* year must be > 1900 */
    {"20201301", 20201301LL * S},      /* month 13: seconds */
    {"1577836800", 1577836800LL * S},  /* 10 digits: seconds */
    {"1_577_836_800", 1577836800LL * S},
    {"1,577,836,800", 1577836800LL * S},
    {"12345", 12345LL * S},                          /* any other length: seconds */
    {"1577836800001", 1577836800001LL * 1000000},    /* 13: ms */
    {"1577836800000001", 1577836800000001LL * 1000}, /* 16: µs */
    {"1577836800000000001", 1577836800000000001LL},  /* 19: ns */
    {"1795321214743518386", 1795321214743518386LL},  /* pyroscope-go's from */
    {"1795320543", 1795320543LL * S},                /* Node SDK's from */
    {"99999999999999999999", INT64_MAX},             /* saturates */
};

static void test_table(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        int64_t got = lc_attime_parse(cases[i].input, NOW);
        if (got != cases[i].want)
            fprintf(stderr, "  input \"%s\"\n", cases[i].input);
        LC_ASSERT_EQ(got, cases[i].want);
    }
}

static void test_null_is_now(void)
{
    LC_ASSERT_EQ(lc_attime_parse(NULL, NOW), NOW);
}

LC_TEST_MAIN(test_table, test_null_is_now)
