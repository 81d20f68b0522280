/*
 * lc/service.h — what every ember process does around its libuv loop: turn
 * SIGTERM and SIGINT into one request to drain, and at the end close every
 * handle still open on the loop.
 *
 * Ownership: the caller embeds lc_stop_signals_t in its process struct and
 * keeps it until the loop has ended. Threading: loop thread only.
 */
#ifndef LC_SERVICE_H
#define LC_SERVICE_H

#include <stdbool.h>

#include <uv.h>

/* signum: SIGTERM, SIGINT, or what lc_stop_signals_fire was given. */
typedef void (*lc_stop_fn)(int signum, void *data);

typedef struct lc_stop_signals_s {
    uv_signal_t term, intr;
    lc_stop_fn fn;
    void *data;
    bool started; /* the handles are initialised */
    bool fired;
} lc_stop_signals_t;

/* Watches SIGTERM and SIGINT. The first of them closes both handles (so
 * that the loop can end once the drain is done) and calls fn, once; later
 * signals are ignored. */
int lc_stop_signals_start(uv_loop_t *loop, lc_stop_signals_t *s, lc_stop_fn fn, void *data);

/* The same stop, asked for by the process itself (it cannot go on). A
 * no-op once stopped, or when never started. */
void lc_stop_signals_fire(lc_stop_signals_t *s, int signum);

/* Closes every handle still open on loop and runs it until they are closed:
 * the last step before uv_loop_close. */
void lc_loop_close_all(uv_loop_t *loop);

#endif
