/*
 * cpu_mix.c — a workload whose CPU profile is known by construction, for the
 * agent's integration tests and benchmark. Build with
 *   cc -O1 -g -fno-omit-frame-pointer -fno-ipa-icf -pthread cpu_mix.c -o cpu_mix
 *
 *   cpu_mix mix SECONDS [THREADS]  each thread alternates alpha_work for 150 ms
 *                                  and beta_work for 50 ms of its own CPU time
 *                                  (so exactly 75% / 25%); the main thread's
 *                                  stacks are main -> mix_worker -> *_work.
 *                                  Phases much longer than the sampling period
 *                                  make the sample counts nearly exact (each
 *                                  phase is off by at most one sample) rather
 *                                  than binomially noisy.
 *   cpu_mix sys SECONDS            sys_work reads /dev/zero with a raw syscall
 *                                  instruction: mostly kernel time
 *   cpu_mix jit SECONDS            runs hand-assembled x86-64 code from an
 *                                  anonymous executable mapping, named in
 *                                  /tmp/perf-PID.map as jit_hot_loop
 *   cpu_mix short MS               short_lived_work for MS ms (wall), then exits
 *   cpu_mix spin SECONDS [THREADS] spin_work only (benchmark load)
 *
 * Prints "pid PID" once started. Time checks are spaced by ~20k iterations
 * of arithmetic so that user code, not the clock syscall, dominates.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static double run_seconds;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) void churn(void)
{
    for (int i = 0; i < 20000; i++)
        sink = sink * 6364136223846793005ULL + (uint64_t)i;
}

/* Burns `ms` of this thread's CPU time. */
static inline __attribute__((always_inline)) void burn_cpu_ms(double ms)
{
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + ms / 1e3;
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        churn();
}

__attribute__((noinline)) void alpha_work(void)
{
    burn_cpu_ms(150.0);
}

__attribute__((noinline)) void beta_work(void)
{
    burn_cpu_ms(50.0);
}

__attribute__((noinline)) void spin_work(void)
{
    churn();
}

static void *mix_worker(void *arg)
{
    double end = clock_s(CLOCK_MONOTONIC) + run_seconds;
    (void)arg;
    while (clock_s(CLOCK_MONOTONIC) < end) {
        alpha_work();
        beta_work();
    }
    return NULL;
}

/* Counts loop rounds so the benchmark can see how much work got done. */
static uint64_t spin_rounds[64];

static void *spin_worker(void *arg)
{
    uint64_t *rounds = arg;
    double end = clock_s(CLOCK_MONOTONIC) + run_seconds;
    while (clock_s(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < 16; i++)
            spin_work();
        (*rounds)++;
    }
    return NULL;
}

/* The main thread works too, so its stacks run down from main. */
static int run_threads(void *(*fn)(void *), int n)
{
    pthread_t t[64];
    if (n < 1 || n > 64)
        n = 1;
    for (int i = 1; i < n; i++)
        pthread_create(&t[i], NULL, fn, fn == spin_worker ? &spin_rounds[i] : NULL);
    fn(fn == spin_worker ? &spin_rounds[0] : NULL);
    uint64_t total = spin_rounds[0];
    for (int i = 1; i < n; i++) {
        pthread_join(t[i], NULL);
        total += spin_rounds[i];
    }
    if (fn == spin_worker)
        printf("rounds %llu\n", (unsigned long long)total);
    return 0;
}

static inline __attribute__((always_inline)) long raw_read(int fd, void *buf, size_t n)
{
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(n)
                     : "rcx", "r11", "memory");
    return ret;
#else
    return read(fd, buf, n);
#endif
}

__attribute__((noinline)) void count_round(void)
{
    sink++;
}

/* The call to count_round makes sys_work a non-leaf function: GCC gives
 * leaf functions no frame even with -fno-omit-frame-pointer, and a missing
 * frame hides the caller (main) from frame-pointer unwinding. */
__attribute__((noinline)) void sys_work(int fd, char *buf, size_t n)
{
    for (int i = 0; i < 64; i++) {
        raw_read(fd, buf, n);
        count_round();
    }
}

static int run_sys(void)
{
    int fd = open("/dev/zero", O_RDONLY);
    static char buf[1 << 16];
    double end = clock_s(CLOCK_MONOTONIC) + run_seconds;
    while (clock_s(CLOCK_MONOTONIC) < end)
        sys_work(fd, buf, sizeof(buf));
    close(fd);
    return 0;
}

/* push rbp; mov rbp,rsp; 1: dec rdi; jnz 1b; pop rbp; ret — a frame like
 * any compiled function, so frame-pointer unwinding continues into main. */
static const unsigned char jit_code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xff,
                                         0xcf, 0x75, 0xfb, 0x5d, 0xc3};

static int run_jit(void)
{
#if defined(__x86_64__)
    void *code =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, jit_code, sizeof(jit_code));
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)code, sizeof(jit_code));
    fclose(f);
    void (*fn)(uint64_t) = (void (*)(uint64_t))code;
    double end = clock_s(CLOCK_MONOTONIC) + run_seconds;
    while (clock_s(CLOCK_MONOTONIC) < end)
        fn(20000000);
    unlink(path);
    return 0;
#else
    return 2;
#endif
}

/* Bounded by wall time, so the process stays short-lived on a busy host. */
__attribute__((noinline)) void short_lived_work(double ms)
{
    double end = clock_s(CLOCK_MONOTONIC) + ms / 1e3;
    while (clock_s(CLOCK_MONOTONIC) < end)
        churn();
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cpu_mix mix|sys|jit|spin SECONDS [THREADS] | short MS\n");
        return 2;
    }
    const char *mode = argv[1];
    char *end = NULL;
    errno = 0;
    run_seconds = strtod(argv[2], &end);
    if (errno || end == argv[2] || *end) {
        fprintf(stderr, "cpu_mix: bad SECONDS/MS '%s'\n", argv[2]);
        return 2;
    }
    long threads = 1;
    if (argc > 3) {
        errno = 0;
        threads = strtol(argv[3], &end, 10);
        if (errno || end == argv[3] || *end) {
            fprintf(stderr, "cpu_mix: bad THREADS '%s'\n", argv[3]);
            return 2;
        }
    }
    int threads_n = threads >= 1 && threads <= 64 ? (int)threads : 1; /* as run_threads clamps */
    printf("pid %d\n", getpid());
    fflush(stdout);
    if (!strcmp(mode, "mix"))
        return run_threads(mix_worker, threads_n);
    if (!strcmp(mode, "spin"))
        return run_threads(spin_worker, threads_n);
    if (!strcmp(mode, "sys"))
        return run_sys();
    if (!strcmp(mode, "jit"))
        return run_jit();
    if (!strcmp(mode, "short")) {
        short_lived_work(run_seconds);
        return 0;
    }
    return 2;
}
