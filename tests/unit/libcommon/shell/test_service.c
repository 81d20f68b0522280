/*
 * test_service.c — SIGTERM/SIGINT as one stop request: a real signal calls
 * the stop function once and closes the signal handles (the loop ends);
 * lc_stop_signals_fire stops the same way and only once; lc_loop_close_all
 * leaves nothing open. The process shell starts nodes in order, stops them
 * in the documented order (drain in start order while the server is up, then
 * close in reverse order), frees each once, and a failed start stops the
 * nodes that had started.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

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

/* ---------------------------------------------------------------- the shell */

typedef struct trace_s {
    char log[512];
    uv_timer_t timer; /* node A: stops the process, and delays its drain */
    lc_proc_t *p;
    int fail_start_of; /* 'B': node B's start fails */
} trace_t;

static trace_t trace;

static void note(const char *what, char node)
{
    size_t used = strlen(trace.log);
    snprintf(trace.log + used, sizeof(trace.log) - used, "%s%c ", what, node);
}

static void on_stop_timer(uv_timer_t *t)
{
    lc_proc_stop(trace.p);
    lc_proc_stop(trace.p); /* a second request changes nothing */
    LC_UNUSED(t);
}

static void on_drain_timer(uv_timer_t *t)
{
    note("drained", 'A');
    uv_close((uv_handle_t *)t, NULL);
    lc_proc_continue(trace.p);
}

static int a_start(lc_proc_t *p, const void *settings, void **state)
{
    LC_UNUSED(settings);
    note("start", 'A');
    trace.p = p;
    *state = &trace;
    uv_timer_init(&p->loop, &trace.timer);
    return uv_timer_start(&trace.timer, on_stop_timer, 10, 0);
}

static int b_start(lc_proc_t *p, const void *settings, void **state)
{
    LC_UNUSED(p);
    LC_UNUSED(settings);
    note("start", 'B');
    *state = &trace;
    return trace.fail_start_of == 'B' ? LC_EINPUT : 0;
}

static int a_listening(lc_proc_t *p, void *state)
{
    LC_UNUSED(state);
    note("listening", 'A');
    LC_CHECK(lc_httpd_port(p->httpd) > 0);
    return 0;
}

/* Asynchronous: the server must still be up until it is done. */
static void a_drain(lc_proc_t *p, void *state)
{
    LC_UNUSED(state);
    note("drain", 'A');
    LC_CHECK(p->httpd != NULL);
    LC_CHECK(p->stopping);
    uv_timer_start(&trace.timer, on_drain_timer, 1, 0);
}

static void b_drain(lc_proc_t *p, void *state)
{
    LC_UNUSED(state);
    note("drain", 'B');
    lc_proc_continue(p);
}

static void a_close(lc_proc_t *p, void *state)
{
    LC_UNUSED(state);
    note("close", 'A');
    LC_CHECK(p->httpd == NULL);
    lc_proc_continue(p);
}

static void b_close(lc_proc_t *p, void *state)
{
    LC_UNUSED(state);
    note("close", 'B');
    LC_CHECK(p->httpd == NULL);
    lc_proc_continue(p);
}

static void a_free(void *state)
{
    LC_UNUSED(state);
    note("free", 'A');
}

static void b_free(void *state)
{
    LC_UNUSED(state);
    note("free", 'B');
}

static const lc_node_ops_t node_a = {.name = "a",
                                     .start = a_start,
                                     .listening = a_listening,
                                     .drain = a_drain,
                                     .close = a_close,
                                     .free = a_free};
static const lc_node_ops_t node_b = {
    .name = "b", .start = b_start, .drain = b_drain, .close = b_close, .free = b_free};
static const lc_node_ops_t *const nodes[] = {&node_a, &node_b};

static void test_nodes_start_and_stop_in_order(void)
{
    memset(&trace, 0, sizeof(trace));
    lc_proc_opts_t o = {
        .name = "test", .http_address = "127.0.0.1:0", .nodes = nodes, .n_nodes = 2};
    LC_ASSERT_OK(lc_proc_run(&o));
    LC_ASSERT_STR_EQ(trace.log, "startA startB listeningA drainA drainedA drainB closeB closeA "
                                "freeB freeA ");
}

static void test_failed_start_stops_what_started(void)
{
    memset(&trace, 0, sizeof(trace));
    trace.fail_start_of = 'B';
    lc_proc_opts_t o = {
        .name = "test", .http_address = "127.0.0.1:0", .nodes = nodes, .n_nodes = 2};
    LC_CHECK(lc_proc_run(&o) != 0);
    LC_ASSERT_STR_EQ(trace.log, "startA startB drainA drainedA drainB closeB closeA freeB freeA ");
}

LC_TEST_MAIN(test_signal_stops_once_and_loop_ends, test_fire_and_close_all,
             test_nodes_start_and_stop_in_order, test_failed_start_stops_what_started)
