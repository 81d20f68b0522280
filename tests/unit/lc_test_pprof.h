/*
 * lc_test_pprof.h — profiles for unit tests as a reader gets them: bytes
 * decoded and validated into an arena (lc_test_pprof_decode), or what a
 * builder holds, encoded first (lc_test_pprof_built; the builder is freed);
 * and the frame of random test profiles (lc_test_pprof_app).
 * A failure is a failed check and NULL. Include after lc_test.h.
 */
#ifndef LC_TEST_PPROF_H
#define LC_TEST_PPROF_H

#include "lc/pprof.h"

static lc_pprof_t *lc_test_pprof_decode(const uint8_t *data, size_t len, lc_arena_t *a)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    lc_pprof_t *p = NULL;
    LC_ASSERT_OK(lc_pprof_decode(data, len, &lim, a, &p, &st));
    if (p)
        LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    if (!lc_status_ok(&st)) {
        fprintf(stderr, "decode: %s\n", st.msg);
        return NULL;
    }
    return p;
}

static lc_pprof_t *lc_test_pprof_built(lc_pprof_builder_t *b, lc_arena_t *a)
{
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &buf));
    lc_pprof_builder_free(b);
    lc_pprof_t *p = lc_test_pprof_decode(buf.data, buf.len, a);
    lc_buf_fini(&buf);
    return p;
}

/* The frame of the store tests' random profiles: a builder with the sample
 * type cpu/nanoseconds (period 10), one mapping, and one location per name
 * (line i + 1); locs[i] is names[i]'s location. */
static lc_pprof_builder_t *lc_test_pprof_app(char (*names)[16], size_t n, uint64_t *locs)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10);
    uint64_t map = lc_pprof_builder_mapping(b, 0x1000, 0x9000, 0, "/bin/app", "", true);
    for (size_t i = 0; i < n; i++) {
        uint64_t f = lc_pprof_builder_function(b, names[i], names[i], "app.c", 1);
        lc_pprof_line_t line = {f, (int64_t)i + 1};
        locs[i] = lc_pprof_builder_location(b, map, 0x1000 + i * 16, &line, 1);
    }
    return b;
}

#endif
