/*
 * test_jfr_keep.c — the memory a thread keeps between JFR conversions
 * (lc/jfr.h, lc_jfr_release): a recording converted right after others on
 * the same thread gives the same pprof bytes as converted on a fresh one,
 * whatever came before (larger or smaller recordings, one that failed half
 * way, with or without labels); the memory kept stays under
 * LC_JFR_KEPT_BYTES and lc_jfr_release gives it back; another thread keeps
 * its own.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lc/gz.h"
#include "lc/jfr.h"
#include "lc_test.h"

typedef struct input_s {
    const char *name;
    const uint8_t *jfr, *labels;
    size_t jfr_len, labels_len;
    bool fails;
} input_t;

/* What a conversion gave: every profile's bytes, or the error message. */
typedef struct output_s {
    lc_buf_t bytes;
    char err[256];
} output_t;

static void convert(const input_t *in, output_t *out)
{
    lc_buf_init(&out->bytes, LC_BUF_UNLIMITED);
    out->err[0] = '\0';
    lc_jfr_params_t params = {.start_ns = 1, .end_ns = 2, .sample_rate = 100};
    lc_arena_t *a = lc_arena_new((size_t)1 << 30);
    lc_status_t st = {0};
    lc_jfr_result_t r = {0};
    if (lc_jfr_to_pprof(in->jfr, in->jfr_len, in->labels, in->labels_len, &params, a, &r, &st)) {
        snprintf(out->err, sizeof(out->err), "%s", st.msg);
    } else {
        for (size_t i = 0; i < r.n; i++) {
            LC_ASSERT_OK(
                lc_buf_append(&out->bytes, r.profiles[i].metric, strlen(r.profiles[i].metric) + 1));
            LC_ASSERT_OK(
                lc_buf_append(&out->bytes, r.profiles[i].pprof.data, r.profiles[i].pprof.len));
        }
        lc_jfr_result_fini(&r);
    }
    lc_arena_free(a);
    LC_CHECK(lc_jfr_kept_bytes() <= LC_JFR_KEPT_BYTES);
}

static void expect_same(const input_t *in, const output_t *alone, const output_t *got)
{
    LC_ASSERT_STR_EQ(got->err, alone->err);
    LC_ASSERT_EQ(got->bytes.len, alone->bytes.len);
    if (got->bytes.len && got->bytes.len == alone->bytes.len &&
        memcmp(got->bytes.data, alone->bytes.data, got->bytes.len) != 0) {
        fprintf(stderr, "%s: output differs after other conversions\n", in->name);
        LC_CHECK(false);
    }
}

enum { N_INPUTS = 5 };
static input_t inputs[N_INPUTS];
static output_t alone[N_INPUTS];

/* Each recording once, with nothing kept before it. */
static void convert_alone(void)
{
    for (size_t i = 0; i < N_INPUTS; i++) {
        lc_jfr_release();
        LC_ASSERT_EQ(lc_jfr_kept_bytes(), 0);
        convert(&inputs[i], &alone[i]);
        LC_ASSERT_EQ(alone[i].err[0] != '\0', inputs[i].fails);
    }
    lc_jfr_release();
    LC_ASSERT_EQ(lc_jfr_kept_bytes(), 0);
}

/* Every ordered pair, and each one twice in a row, on one thread. */
static void *convert_in_turn(void *unused)
{
    (void)unused;
    for (size_t i = 0; i < N_INPUTS; i++) {
        for (size_t k = 0; k < N_INPUTS; k++) {
            output_t first, second;
            convert(&inputs[i], &first);
            convert(&inputs[k], &second);
            expect_same(&inputs[i], &alone[i], &first);
            expect_same(&inputs[k], &alone[k], &second);
            lc_buf_fini(&first.bytes);
            lc_buf_fini(&second.bytes);
        }
    }
    return NULL;
}

static void test_after_other_recordings(void)
{
    convert_alone();
    convert_in_turn(NULL);
    lc_jfr_release();
    LC_ASSERT_EQ(lc_jfr_kept_bytes(), 0);
}

/* A second thread converting while this one keeps its blocks: its own keep,
 * the same outputs (the blocks it keeps go when it exits). */
static void test_other_thread(void)
{
    output_t warm;
    convert(&inputs[2], &warm);
    size_t here = lc_jfr_kept_bytes();
    pthread_t t;
    LC_ASSERT_OK(pthread_create(&t, NULL, convert_in_turn, NULL));
    LC_ASSERT_OK(pthread_join(t, NULL));
    LC_ASSERT_EQ(lc_jfr_kept_bytes(), here);
    expect_same(&inputs[2], &alone[2], &warm);
    lc_buf_fini(&warm.bytes);
    lc_jfr_release();
}

static lc_buf_t jfr, labels, twice;

static void read_gz(const char *rel, lc_buf_t *out)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    size_t n = 0;
    unsigned char *d = lc_test_read_file(path, &n);
    LC_CHECK(d != NULL);
    lc_buf_init(out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(d ? lc_gunzip(d, n, (size_t)256 << 20, out) : -1);
    free(d);
}

/* dump1, with and without its labels, twice over (two chunks: twice the
 * samples of each stack), cut in its second chunk, cut after its header. */
static void test_inputs(void)
{
    read_gz("jfr/dump1.jfr.gz", &jfr);
    read_gz("jfr/dump1.labels.pb.gz", &labels);
    lc_buf_init(&twice, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_buf_append(&twice, jfr.data, jfr.len));
    LC_ASSERT_OK(lc_buf_append(&twice, jfr.data, jfr.len));
    LC_CHECK(jfr.len > 68);
    inputs[0] = (input_t){"dump1", jfr.data, NULL, jfr.len, 0, false};
    inputs[1] = (input_t){"dump1 with labels", jfr.data, labels.data, jfr.len, labels.len, false};
    inputs[2] = (input_t){"dump1 twice", twice.data, NULL, twice.len, 0, false};
    inputs[3] =
        (input_t){"dump1 and a cut second chunk", twice.data, NULL, jfr.len + jfr.len / 2, 0, true};
    inputs[4] = (input_t){"dump1's first chunk header", jfr.data, NULL, 68, 0, true};
}

static void test_cleanup(void)
{
    for (size_t i = 0; i < N_INPUTS; i++)
        lc_buf_fini(&alone[i].bytes);
    lc_buf_fini(&twice);
    lc_buf_fini(&jfr);
    lc_buf_fini(&labels);
    lc_jfr_release();
    LC_ASSERT_EQ(lc_jfr_kept_bytes(), 0);
}

LC_TEST_MAIN(test_inputs, test_after_other_recordings, test_other_thread, test_cleanup)
