/*
 * lc/clock.h — the two clocks ember reads: wall time (profile timestamps,
 * retention) and monotonic time (timeouts, intervals), in nanoseconds.
 * Threading: any thread.
 */
#ifndef LC_CLOCK_H
#define LC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t lc_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Milliseconds as nanoseconds, saturating at the int64 ends (times read
 * from outside: a mark, a request's range). */
static inline int64_t lc_ms_to_ns(int64_t ms)
{
    if (ms > INT64_MAX / 1000000)
        return INT64_MAX;
    return ms < INT64_MIN / 1000000 ? INT64_MIN : ms * 1000000;
}

static inline int64_t lc_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
