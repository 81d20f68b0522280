/*
 * test_load.c — ember-load's pure parts (tools/load/src): flags and their
 * errors, durations, the round matrix against parca-load's count formula
 * (R + T·R + L·T·R + 2·T·R·S, here with Series and SelectMergeProfile added),
 * the SelectSeries step rule, nearest-rank quantiles, the Connect result
 * codes, and the pprof re-stamping checked by decoding with protobuf-c.
 */
#include "google/v1/profile.pb-c.h"
#include "lc/gz.h"
#include "lc_test.h"
#include "load_config.h"
#include "load_matrix.h"
#include "load_stats.h"
#include "load_wire.h"

static int parse(ld_config_t *cfg, char *err, size_t n, int argc, char **argv)
{
    return ld_config_parse(argc, argv, cfg, err, n);
}

static void test_defaults(void)
{
    ld_config_t cfg;
    char err[256] = "";
    char *argv[] = {"ember-load"};
    LC_ASSERT_OK(parse(&cfg, err, sizeof(err), 1, argv));
    LC_ASSERT_STR_EQ(cfg.target, "http://127.0.0.1:4040");
    LC_ASSERT_EQ(cfg.clients, 5);
    LC_ASSERT_EQ(cfg.n_ranges, 3);
    LC_ASSERT_STR_EQ(cfg.ranges[2].name, "7d");
    LC_ASSERT_EQ(cfg.ranges[2].ms, 7LL * 86400000);
    LC_ASSERT_EQ(cfg.timeout_ms, 10000);
    LC_ASSERT_EQ(cfg.interval_ms, 5000);
    LC_ASSERT_EQ(cfg.n_selectors, 2);
    LC_ASSERT_STR_EQ(cfg.selectors[1], "auto");
    LC_ASSERT_EQ(cfg.methods, LD_QUERY_METHODS);
    LC_ASSERT_EQ(cfg.codec, LD_CODEC_PROTO);
    LC_CHECK(cfg.write_rate == 0);
    ld_config_free(&cfg);
}

static void test_flags(void)
{
    ld_config_t cfg;
    char err[256] = "";
    char *argv[] = {"ember-load",
                    "--target=http://h:1/",
                    "--clients",
                    "7",
                    "--rounds=3",
                    "--duration=1m30s",
                    "--interval=0",
                    "--ranges=5m,1h;2d",
                    "--selectors=all;{a=\"1\",b=\"2\"}",
                    "--labels=service_name,region",
                    "--methods=LabelNames,SelectSeries",
                    "--codec=json",
                    "--write.rate=2.5",
                    "--write.files=memory=/x/heap.pb.gz;/y/cpu.pprof",
                    "--write.series=9",
                    "--tenant=t1",
                    "--token=s3cret",
                    "--serve-after",
                    "--client.timeout=250ms",
                    "--write.target=http://ingester:4040//"};
    LC_ASSERT_OK(parse(&cfg, err, sizeof(err), (int)LC_ARRAY_LEN(argv), argv));
    LC_ASSERT_STR_EQ(err, "");
    LC_ASSERT_STR_EQ(cfg.target, "http://h:1");
    LC_ASSERT_EQ(cfg.clients, 7);
    LC_ASSERT_EQ(cfg.rounds, 3);
    LC_ASSERT_EQ(cfg.duration_ms, 90000);
    LC_ASSERT_EQ(cfg.interval_ms, 0);
    LC_ASSERT_EQ(cfg.n_ranges, 3);
    LC_ASSERT_EQ(cfg.ranges[0].ms, 300000);
    LC_ASSERT_EQ(cfg.ranges[2].ms, 2LL * 86400000);
    LC_ASSERT_EQ(cfg.n_selectors, 2);
    LC_ASSERT_STR_EQ(cfg.selectors[1], "{a=\"1\",b=\"2\"}");
    LC_ASSERT_EQ(cfg.n_labels, 2);
    LC_ASSERT_EQ(cfg.methods, (1u << LD_LABEL_NAMES) | (1u << LD_SELECT_SERIES));
    LC_ASSERT_EQ(cfg.codec, LD_CODEC_JSON);
    LC_CHECK(cfg.write_rate == 2.5);
    LC_ASSERT_EQ(cfg.n_write_files, 2);
    LC_ASSERT_STR_EQ(cfg.write_files[0].metric_name, "memory");
    LC_ASSERT_STR_EQ(cfg.write_files[0].path, "/x/heap.pb.gz");
    LC_ASSERT_STR_EQ(cfg.write_files[1].metric_name, "process_cpu");
    LC_ASSERT_EQ(cfg.write_series, 9);
    LC_ASSERT_STR_EQ(cfg.tenant, "t1");
    LC_ASSERT_STR_EQ(cfg.token, "s3cret");
    LC_CHECK(cfg.serve_after);
    LC_ASSERT_EQ(cfg.timeout_ms, 250);
    LC_ASSERT_STR_EQ(cfg.write_target, "http://ingester:4040");
    ld_config_free(&cfg);
}

/* Each bad command line fails with a message naming the flag. */
static void test_flag_errors(void)
{
    static const struct {
        const char *arg, *want;
    } cases[] = {
        {"--bogus", "unknown flag --bogus"},
        {"--clients=0", "--clients"},
        {"--clients=abc", "--clients"},
        {"--ranges=15", "--ranges"},
        {"--ranges=", "--ranges"},
        {"--duration=-5s", "--duration"},
        {"--codec=xml", "--codec"},
        {"--methods=Push", "--methods"},
        {"--methods=Nope", "--methods"},
        {"--write.rate=1", "--write.files"},
        {"--write.rate=-1", "--write.rate"},
        {"--target=ftp://x", "--target"},
        {"--write.target=x", "--write.target"},
        {"--serve-after=maybe", "--serve-after"},
        {"positional", "unexpected argument"},
        {"--rounds", "needs a value"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        ld_config_t cfg;
        char err[256] = "";
        char *argv[] = {"ember-load", (char *)cases[i].arg};
        LC_ASSERT_EQ(parse(&cfg, err, sizeof(err), 2, argv), -1);
        if (!strstr(err, cases[i].want))
            fprintf(stderr, "case %s: error %s lacks %s\n", cases[i].arg, err, cases[i].want);
        LC_CHECK(strstr(err, cases[i].want) != NULL);
        ld_config_free(&cfg);
    }
}

static void test_durations(void)
{
    int64_t ms;
    LC_ASSERT_OK(ld_parse_duration_ms("15m", &ms));
    LC_ASSERT_EQ(ms, 900000);
    LC_ASSERT_OK(ld_parse_duration_ms("168h", &ms));
    LC_ASSERT_EQ(ms, 604800000);
    LC_ASSERT_OK(ld_parse_duration_ms("1w", &ms));
    LC_ASSERT_EQ(ms, 604800000);
    LC_ASSERT_OK(ld_parse_duration_ms("1h30m", &ms));
    LC_ASSERT_EQ(ms, 5400000);
    LC_ASSERT_OK(ld_parse_duration_ms("500ms", &ms));
    LC_ASSERT_EQ(ms, 500);
    LC_ASSERT_OK(ld_parse_duration_ms("1.5s", &ms));
    LC_ASSERT_EQ(ms, 1500);
    LC_ASSERT_EQ(ld_parse_duration_ms("", &ms), -1);
    LC_ASSERT_EQ(ld_parse_duration_ms("5", &ms), -1);
    LC_ASSERT_EQ(ld_parse_duration_ms("5x", &ms), -1);
    LC_ASSERT_EQ(ld_parse_duration_ms("0s", &ms), -1);
    LC_ASSERT_EQ(ld_parse_duration_ms("-1m", &ms), -1);
    LC_ASSERT_EQ(ld_parse_duration_ms("100000w", &ms), -1);
}

/* The size formula is computed here independently of the builder, and every
 * call is checked to be in range and unique. */
static void test_matrix(void)
{
    const size_t R = 3, T = 4, S = 2, L = 3;
    ld_matrix_dims_t d = {LD_QUERY_METHODS, R, T, S, L};
    size_t want = R + T * R + L * T * R + T * R + 3 * T * R * S;
    LC_ASSERT_EQ(ld_matrix_size(&d), want);
    ld_call_t *calls = calloc(want, sizeof(*calls));
    ld_matrix_build(&d, calls);
    size_t per_method[LD_METHOD_COUNT] = {0};
    for (size_t i = 0; i < want; i++) {
        const ld_call_t *c = &calls[i];
        per_method[c->method]++;
        LC_CHECK(c->range < R);
        LC_CHECK(c->method == LD_PROFILE_TYPES ? c->type == LD_NONE : c->type < T);
        LC_CHECK(c->method == LD_LABEL_VALUES ? c->label < L : c->label == LD_NONE);
        bool selects = c->method >= LD_SELECT_SERIES && c->method <= LD_SELECT_MERGE_PROFILE;
        LC_CHECK(selects ? c->selector < S : c->selector == LD_NONE);
        if (i > 0)
            LC_CHECK(calls[i - 1].method <= c->method); /* grouped by method */
        for (size_t k = 0; k < i; k++)
            LC_CHECK(memcmp(&calls[k], c, sizeof(*c)) != 0);
    }
    LC_ASSERT_EQ(per_method[LD_PROFILE_TYPES], R);
    LC_ASSERT_EQ(per_method[LD_LABEL_VALUES], L * T * R);
    LC_ASSERT_EQ(per_method[LD_SELECT_MERGE_STACKTRACES], T * R * S);
    LC_ASSERT_EQ(per_method[LD_PUSH], 0);
    free(calls);

    d.methods = 1u << LD_SELECT_SERIES;
    LC_ASSERT_EQ(ld_matrix_size(&d), T * R * S);
    d.types = 0;
    LC_ASSERT_EQ(ld_matrix_size(&d), 0);
    LC_ASSERT_EQ(ld_method_from_name("SelectMergeProfile"), LD_SELECT_MERGE_PROFILE);
    LC_ASSERT_EQ(ld_method_from_name("selectmergeprofile"), -1);
    LC_ASSERT_STR_EQ(ld_method_name(LD_PUSH), "Push");
}

static void test_step(void)
{
    /* parca-load's steps: 15m -> 117.1875 ms, 12h -> 5.625 s, 168h -> 78.75 s */
    LC_CHECK(ld_step_seconds(15 * 60000) == 0.1171875);
    LC_CHECK(ld_step_seconds(12 * 3600000LL) == 5.625);
    LC_CHECK(ld_step_seconds(168 * 3600000LL) == 78.75);
    LC_CHECK(ld_step_seconds(1000) == 0.001);
}

static void test_quantiles(void)
{
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = (double)(100 - i); /* 100 .. 1, unsorted */
    LC_CHECK(ld_quantile(v, 100, 0.50) == 50);
    LC_CHECK(ld_quantile(v, 100, 0.90) == 90);
    LC_CHECK(ld_quantile(v, 100, 0.99) == 99);
    LC_CHECK(ld_quantile(v, 100, 1.0) == 100);
    double one = 7;
    LC_CHECK(ld_quantile(&one, 1, 0.99) == 7);
    LC_CHECK(ld_quantile(NULL, 0, 0.5) == 0);

    ld_stats_t s;
    ld_stats_init(&s);
    ld_stats_record(&s, LD_SELECT_SERIES, "15m", 0.1, true);
    ld_stats_record(&s, LD_SELECT_SERIES, "15m", 0.2, false);
    ld_stats_record(&s, LD_SELECT_SERIES, "7d", 0.3, true);
    LC_ASSERT_EQ(s.n_rows, 2);
    LC_ASSERT_EQ(ld_stats_total(&s), 3);
    LC_ASSERT_EQ(ld_stats_errors(&s), 1);
    ld_stats_fini(&s);
}

/* Past LD_STATS_MAX_SAMPLES a row keeps a uniform sample: memory stays
 * bounded, the count stays exact, and the quantiles of 0..N-1 stay close. */
static void test_stats_reservoir(void)
{
    const uint32_t N = 4 * LD_STATS_MAX_SAMPLES;
    ld_stats_t s;
    ld_stats_init(&s);
    for (uint32_t i = 0; i < N; i++)
        ld_stats_record(&s, LD_SERIES, "7d", (double)i, true);
    LC_ASSERT_EQ(s.n_rows, 1);
    LC_ASSERT_EQ(s.rows[0].n, LD_STATS_MAX_SAMPLES);
    LC_ASSERT_EQ(ld_stats_total(&s), N);
    double p50 = ld_quantile(s.rows[0].latencies_s, s.rows[0].n, 0.50);
    double p99 = ld_quantile(s.rows[0].latencies_s, s.rows[0].n, 0.99);
    LC_CHECK(p50 > 0.48 * N && p50 < 0.52 * N);
    LC_CHECK(p99 > 0.98 * N && p99 < 0.995 * N);
    ld_stats_fini(&s);
}

static void test_result_codes(void)
{
    char buf[32];
    const char *err = "{\"code\":\"invalid_argument\",\"message\":\"bad\"}";
    LC_ASSERT_STR_EQ(ld_result_code(200, NULL, NULL, 0, buf, sizeof(buf)), "ok");
    LC_ASSERT_STR_EQ(ld_result_code(400, NULL, (const uint8_t *)err, strlen(err), buf, sizeof(buf)),
                     "invalid_argument");
    LC_ASSERT_STR_EQ(
        ld_result_code(404, NULL, (const uint8_t *)"404 page not found", 18, buf, sizeof(buf)),
        "unimplemented");
    LC_ASSERT_STR_EQ(ld_result_code(503, NULL, NULL, 0, buf, sizeof(buf)), "unavailable");
    LC_ASSERT_STR_EQ(ld_result_code(0, "connect", NULL, 0, buf, sizeof(buf)), "unavailable");
    LC_ASSERT_STR_EQ(ld_result_code(0, "timeout", NULL, 0, buf, sizeof(buf)), "deadline_exceeded");
    const char *says_ok = "{\"code\":\"ok\"}"; /* found by fuzz_load_wire */
    LC_ASSERT_STR_EQ(
        ld_result_code(401, NULL, (const uint8_t *)says_ok, strlen(says_ok), buf, sizeof(buf)),
        "unauthenticated");
    const char *odd = "{\"code\":\"not_a_code\"}";
    LC_ASSERT_STR_EQ(ld_result_code(500, NULL, (const uint8_t *)odd, strlen(odd), buf, sizeof(buf)),
                     "unknown");
}

static Google__V1__Profile *unpack(const uint8_t *p, size_t n)
{
    return google__v1__profile__unpack(NULL, n, p);
}

/* Re-stamping keeps every other field: the stamped profile and the original
 * with its time_nanos set the same way pack to the same bytes. */
static void test_pprof_stamp(void)
{
    size_t len;
    unsigned char *raw =
        lc_test_read_file(LC_TESTDATA_DIR "/pprof/pyroscope-cpu_go_truncated_1.pb.gz", &len);
    LC_CHECK(raw != NULL);
    if (!raw)
        return;
    lc_buf_t plain, stripped, stamped;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    lc_buf_init(&stripped, LC_BUF_UNLIMITED);
    lc_buf_init(&stamped, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gunzip(raw, len, 1u << 30, &plain));
    LC_ASSERT_OK(ld_pprof_strip_time(raw, len, &stripped));
    const int64_t t = 1764000000123456789LL;
    LC_ASSERT_OK(ld_pprof_stamp(stripped.data, stripped.len, t, &stamped));
    Google__V1__Profile *orig = unpack(plain.data, plain.len);
    Google__V1__Profile *got = unpack(stamped.data, stamped.len);
    LC_CHECK(orig && got);
    if (orig && got) {
        LC_CHECK(orig->time_nanos != t);
        LC_ASSERT_EQ(got->time_nanos, t);
        LC_ASSERT_EQ(got->n_sample, orig->n_sample);
        orig->time_nanos = t;
        size_t a = google__v1__profile__get_packed_size(orig);
        size_t b = google__v1__profile__get_packed_size(got);
        LC_ASSERT_EQ(a, b);
        uint8_t *pa = malloc(a), *pb = malloc(b);
        google__v1__profile__pack(orig, pa);
        google__v1__profile__pack(got, pb);
        LC_ASSERT_MEM_EQ(pa, pb, a < b ? a : b);
        free(pa);
        free(pb);
    }
    google__v1__profile__free_unpacked(orig, NULL);
    google__v1__profile__free_unpacked(got, NULL);
    /* a plain (not gzip) profile strips to the same bytes */
    lc_buf_t again;
    lc_buf_init(&again, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(ld_pprof_strip_time(plain.data, plain.len, &again));
    LC_ASSERT_EQ(again.len, stripped.len);
    LC_ASSERT_MEM_EQ(again.data, stripped.data,
                     again.len < stripped.len ? again.len : stripped.len);
    lc_buf_fini(&again);
    /* garbage is refused */
    lc_buf_t junk;
    lc_buf_init(&junk, LC_BUF_UNLIMITED);
    LC_CHECK(ld_pprof_strip_time((const uint8_t *)"\x0a\x05"
                                                  "ab",
                                 4, &junk) != 0);
    LC_CHECK(ld_pprof_strip_time((const uint8_t *)"", 0, &junk) != 0);
    LC_CHECK(ld_pprof_strip_time((const uint8_t *)"\x1f\x8b\x08\x00zz", 6, &junk) != 0);
    lc_buf_fini(&junk);
    lc_buf_fini(&plain);
    lc_buf_fini(&stripped);
    lc_buf_fini(&stamped);
    free(raw);
}

LC_TEST_MAIN(test_defaults, test_flags, test_flag_errors, test_durations, test_matrix, test_step,
             test_quantiles, test_stats_reservoir, test_result_codes, test_pprof_stamp)
