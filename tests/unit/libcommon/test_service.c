/*
 * test_service.c — SIGTERM/SIGINT as one stop request: a real signal calls
 * the stop function once and closes the signal handles (the loop ends);
 * lc_stop_signals_fire stops the same way and only once; lc_loop_close_all
 * leaves nothing open.
 */
#include <signal.h>

#include "lc/service.h"
#include "lc_test.h"

typedef struct stops_s {
    int calls;
    int last_signum;
} stops_t;

static void on_stop(int signum, void *data)
{
    stops_t *st = data;
    st->calls++;
    st->last_signum = signum;
}

static void raise_sigint(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, NULL);
    raise(SIGINT);
}

static void test_signal_stops_once_and_loop_ends(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    stops_t st = {0};
    lc_stop_signals_t sig;
    LC_ASSERT_OK(lc_stop_signals_start(&loop, &sig, on_stop, &st));
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, raise_sigint, 10, 0);
    LC_ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0); /* ends: nothing is left open */
    LC_ASSERT_EQ(st.calls, 1);
    LC_ASSERT_EQ(st.last_signum, SIGINT);
    lc_stop_signals_fire(&sig, SIGTERM); /* already stopped */
    LC_ASSERT_EQ(st.calls, 1);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void test_fire_and_close_all(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    stops_t st = {0};
    lc_stop_signals_t never = {0};
    lc_stop_signals_fire(&never, SIGTERM); /* never started: nothing happens */
    LC_ASSERT_EQ(st.calls, 0);
    lc_stop_signals_t sig;
    LC_ASSERT_OK(lc_stop_signals_start(&loop, &sig, on_stop, &st));
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, raise_sigint, 100000, 0); /* would keep the loop alive */
    lc_stop_signals_fire(&sig, 0);
    lc_stop_signals_fire(&sig, SIGTERM);
    LC_ASSERT_EQ(st.calls, 1);
    LC_ASSERT_EQ(st.last_signum, 0);
    lc_loop_close_all(&loop);
    LC_CHECK(!uv_loop_alive(&loop));
    LC_ASSERT_OK(uv_loop_close(&loop));
}

LC_TEST_MAIN(test_signal_stops_once_and_loop_ends, test_fire_and_close_all)
