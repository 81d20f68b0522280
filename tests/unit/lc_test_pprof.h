/*
 * lc_test_pprof.h — profiles for unit tests as a reader gets them: bytes
 * decoded and validated into an arena (lc_test_pprof_decode), or what a
 * builder holds, encoded first (lc_test_pprof_built; the builder is freed).
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

#endif
