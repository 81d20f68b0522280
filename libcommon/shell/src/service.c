/*
 * service.c — SIGTERM/SIGINT as one drain request, and the final close of a
 * loop (lc/service.h).
 */
#include <signal.h>

#include "lc/err.h"
#include "lc/service.h"

static void on_signal(uv_signal_t *sig, int signum)
{
    lc_stop_signals_fire(sig->data, signum);
}

int lc_stop_signals_start(uv_loop_t *loop, lc_stop_signals_t *s, lc_stop_fn fn, void *data)
{
    *s = (lc_stop_signals_t){.fn = fn, .data = data, .started = true};
    s->term.data = s->intr.data = s;
    uv_signal_init(loop, &s->term);
    uv_signal_init(loop, &s->intr);
    int rc = uv_signal_start(&s->term, on_signal, SIGTERM);
    return rc ? rc : uv_signal_start(&s->intr, on_signal, SIGINT);
}

void lc_stop_signals_fire(lc_stop_signals_t *s, int signum)
{
    if (!s->started || s->fired)
        return;
    s->fired = true;
    uv_close((uv_handle_t *)&s->term, NULL);
    uv_close((uv_handle_t *)&s->intr, NULL);
    s->fn(signum, s->data);
}

static void close_one(uv_handle_t *h, void *arg)
{
    LC_UNUSED(arg);
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void lc_loop_close_all(uv_loop_t *loop)
{
    uv_walk(loop, close_one, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}
