/*
 * test_format.c — /ingest format selection order (pyroscope-api.md §2.4).
 */
#include "lc_test.h"
#include "receive_int.h"

#define MP "multipart/form-data; boundary=abc"

typedef struct fmt_case_s {
    const char *format;
    const char *content_type;
    ing_format_t want;
} fmt_case_t;

static const fmt_case_t cases[] = {
    {NULL, NULL, ING_FMT_FOLDED},
    {"folded", NULL, ING_FMT_FOLDED},
    {"collapsed", "text/plain", ING_FMT_FOLDED},
    {"groups", NULL, ING_FMT_FOLDED},
    {"nonsense", NULL, ING_FMT_FOLDED},
    {"trie", NULL, ING_FMT_TRIE},
    {NULL, "binary/octet-stream+trie", ING_FMT_TRIE},
    {"tree", "binary/octet-stream+trie", ING_FMT_TRIE}, /* rule 1 before rule 2 */
    {"tree", NULL, ING_FMT_TREE},
    {NULL, "binary/octet-stream+tree", ING_FMT_TREE},
    {"lines", "binary/octet-stream+tree", ING_FMT_TREE}, /* rule 2 before rule 3 */
    {"lines", MP, ING_FMT_LINES},                        /* rule 3 before rule 7 */
    {"jfr", MP, ING_FMT_JFR},
    {"jfr", "application/octet-stream", ING_FMT_JFR},
    {"pprof", "application/octet-stream", ING_FMT_PPROF},
    {"pprof", "application/x-protobuf", ING_FMT_PPROF},
    {"pprof", NULL, ING_FMT_PPROF},
    {"pprof", MP, ING_FMT_PPROF_FORM}, /* ember's leniency */
    {"speedscope", MP, ING_FMT_SPEEDSCOPE},
    {NULL, MP, ING_FMT_PPROF_FORM},
    {"folded", MP, ING_FMT_PPROF_FORM}, /* rule 7 before the default */
    {NULL, "multipart/form-data; boundary=----formdata-undici-0219", ING_FMT_PPROF_FORM},
    {"TRIE", NULL, ING_FMT_FOLDED}, /* values are case-sensitive */
};

static void test_table(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        ing_format_t got = ing_format_select(cases[i].format, cases[i].content_type);
        if (got != cases[i].want)
            fprintf(stderr, "  case %zu: format=%s ct=%s\n", i,
                    cases[i].format ? cases[i].format : "(none)",
                    cases[i].content_type ? cases[i].content_type : "(none)");
        LC_ASSERT_EQ(got, cases[i].want);
    }
}

static void test_names(void)
{
    LC_ASSERT_STR_EQ(ing_format_name(ING_FMT_FOLDED), "folded");
    LC_ASSERT_STR_EQ(ing_format_name(ING_FMT_TRIE), "trie");
    LC_ASSERT_STR_EQ(ing_format_name(ING_FMT_SPEEDSCOPE), "speedscope");
    LC_ASSERT_STR_EQ(ing_format_name(ING_FMT_COUNT_), "unknown");
}

LC_TEST_MAIN(test_table, test_names)
