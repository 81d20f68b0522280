/*
 * unwind_tree.c — workloads with known call trees for the agent's
 * .eh_frame unwinder (test_agent_unwind.py). Built without frame pointers
 *   cc -O2 -fomit-frame-pointer -fno-ipa-icf -fno-inline-functions-called-once
 *      unwind_tree.c -o unwind_tree -lz -ldl
 * (PIE and -no-pie), and for the leaf case -O1 -fno-omit-frame-pointer.
 *
 *   unwind_tree tree SECONDS  main -> run_tree -> level_one -> level_two ->
 *                             {alpha_phase 150 ms, beta_phase 50 ms} -> spin
 *                             of the thread's CPU time: exactly 3:1
 *   unwind_tree leaf SECONDS  main -> {hot 150 ms, cold 50 ms} -> spin
 *   unwind_tree zlib SECONDS  main -> zlib_work -> compress2 (libz)
 *   unwind_tree qsort SECONDS main -> sort_work -> qsort (libc) -> ... -> by_value
 *   unwind_tree dlopen SECONDS  sleeps 300 ms, dlopens libz.so.1, then as zlib
 *   unwind_tree busy SECONDS  as tree, without the warm-up (benchmark load)
 *
 * Each mode first burns 1 s of CPU in warm_up: the agent loads a
 * process' tables after its first sample, so the samples before that (frame
 * pointers only) land there and not in the functions the tests compare.
 *
 * Every call is followed by work so that none is a tail call (a tail call
 * leaves no frame for any unwinder, perf's included). Prints "pid PID".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile uint64_t sink;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

NOINLINE void spin(void)
{
    for (int i = 0; i < 20000; i++)
        sink = sink * 6364136223846793005ULL + (uint64_t)i;
}

/* ---- tree: four levels of callers, a 3:1 split between two siblings */

NOINLINE void alpha_phase(void)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + 0.150;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        spin();
    sink++;
}

NOINLINE void beta_phase(void)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + 0.050;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        spin();
    sink++;
}

NOINLINE void level_two(void)
{
    alpha_phase();
    beta_phase();
    sink++;
}

NOINLINE void level_one(void)
{
    level_two();
    sink++;
}

NOINLINE void run_tree(double seconds)
{
    double end = clock_s(CLOCK_MONOTONIC) + seconds;
    while (clock_s(CLOCK_MONOTONIC) < end)
        level_one();
    sink++;
}

/* ---- leaf: the program (hot and cold share the frameless leaf) */

NOINLINE void hot(void)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + 0.150;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        spin();
    sink++;
}

NOINLINE void cold(void)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + 0.050;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        spin();
    sink++;
}

/* ---- shared libraries */

typedef int (*compress2_fn)(Bytef *, uLongf *, const Bytef *, uLong, int);

NOINLINE void zlib_work(compress2_fn fn, double seconds)
{
    static Bytef in[1 << 16], out[1 << 17];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (Bytef)((i * 7919) ^ (i >> 5));
    double end = clock_s(CLOCK_MONOTONIC) + seconds;
    while (clock_s(CLOCK_MONOTONIC) < end) {
        uLongf n = sizeof(out);
        fn(out, &n, in, sizeof(in), 6);
        sink += n;
    }
}

NOINLINE int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    sink++;
    return x < y ? -1 : x > y;
}

NOINLINE void sort_work(double seconds)
{
    enum { N = 1 << 15 };
    static uint32_t v[N];
    double end = clock_s(CLOCK_MONOTONIC) + seconds;
    uint32_t x = 12345;
    while (clock_s(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < N; i++)
            v[i] = x = x * 1103515245u + 12345u;
        qsort(v, N, sizeof(v[0]), by_value);
        sink += v[0];
    }
}

NOINLINE void warm_up(void)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + 1.0;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        sink++;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s tree|leaf|zlib|qsort|dlopen SECONDS\n", argv[0]);
        return 2;
    }
    double seconds = strtod(argv[2], NULL);
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    const char *mode = argv[1];
    if (strcmp(mode, "busy") != 0)
        warm_up();
    if (!strcmp(mode, "tree") || !strcmp(mode, "busy")) {
        run_tree(seconds);
    } else if (!strcmp(mode, "leaf")) {
        double end = clock_s(CLOCK_MONOTONIC) + seconds;
        while (clock_s(CLOCK_MONOTONIC) < end) {
            hot();
            cold();
        }
    } else if (!strcmp(mode, "zlib")) {
        zlib_work(compress2, seconds);
    } else if (!strcmp(mode, "qsort")) {
        sort_work(seconds);
    } else if (!strcmp(mode, "dlopen")) {
        usleep(300000);
        void *h = dlopen("libz.so.1", RTLD_NOW);
        compress2_fn fn = h ? (compress2_fn)dlsym(h, "compress2") : NULL;
        if (!fn)
            return 1;
        zlib_work(fn, seconds);
    } else {
        return 2;
    }
    sink++;
    return 0;
}
