/*
 * test_agt_sampler.c — the BPF sampler loaded into the running kernel (root).
 *
 * Oracles: this process knows where it burns CPU (agt_busy_leaf, called from
 * the test function, called from main), and the BPF program's own per-CPU
 * counters say how many samples it recorded, which must equal what the two
 * drains of the double buffer returned — nothing lost, nothing twice. The
 * table walk is checked on two functions compiled without frame pointers
 * (GCC), which a frame-pointer walk cannot get through: the middle one is
 * skipped.
 */
#include <unistd.h>

#include "agt_test_util.h"

#define RATE_HZ 499

static volatile uint64_t sink;

/* Burns `ms` of this thread's CPU time (not wall time), so a loaded machine
 * changes how long it takes but not how many samples it earns. */
__attribute__((noinline)) static void agt_busy_leaf(double ms)
{
    double end = agt_test_thread_cpu_ms() + ms;
    while (agt_test_thread_cpu_ms() < end) {
        for (int i = 0; i < 20000; i++)
            sink += (uint64_t)i * 2654435761u;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#define AGT_NO_FRAME_POINTER __attribute__((noinline, noclone, optimize("omit-frame-pointer")))
#else
#define AGT_NO_FRAME_POINTER __attribute__((noinline))
#endif

AGT_NO_FRAME_POINTER static void agt_frameless_leaf(double ms)
{
    double end = agt_test_thread_cpu_ms() + ms; /* CPU time, as agt_busy_leaf */
    while (agt_test_thread_cpu_ms() < end) {
        for (int i = 0; i < 20000; i++)
            sink += (uint64_t)i * 2654435761u;
    }
}

AGT_NO_FRAME_POINTER static void agt_frameless_middle(double ms)
{
    agt_frameless_leaf(ms);
    sink++; /* not a tail call */
}

static agt_sampler_t *open_sampler(void)
{
    agt_sampler_opts_t so = {
        .sample_rate_hz = RATE_HZ,
        .counts_capacity = 4096,
        .stacks_capacity = 4096,
        .procs_capacity = 1024,
        .unwind_rows_capacity = 1u << 20,
        .unwind_procs_capacity = 64,
    };
    agt_sampler_t *s = NULL;
    LC_ASSERT_OK(agt_sampler_open(&so, &s));
    return s;
}

static uint64_t sum_counts(const agt_drained_t *d, uint32_t tgid, uint64_t *own)
{
    uint64_t total = 0;
    for (size_t i = 0; i < d->n; i++) {
        total += d->counts[i];
        if (d->keys[i].tgid == tgid)
            *own += d->counts[i];
    }
    return total;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Two intervals, then stop: every recorded sample comes out of exactly one
 * drain (exact), and our busy loop gets about one sample per period of the
 * CPU time the kernel accounted to us (a statistical bound that holds on a
 * loaded host: the loop burns CPU time, not wall time). */
static void test_double_buffer_conserves_samples(void)
{
    agt_sampler_t *s = open_sampler();
    if (!s)
        return;
    uint64_t own = 0, total = 0;
    agt_drained_t d;
    double cpu0 = process_cpu_s();
    agt_busy_leaf(300);
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d));
    total += sum_counts(&d, (uint32_t)getpid(), &own);
    agt_drained_fini(&d);
    agt_busy_leaf(300);
    agt_sampler_stop(s);
    double cpu_s = process_cpu_s() - cpu0;
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d));
    total += sum_counts(&d, (uint32_t)getpid(), &own);
    agt_drained_fini(&d);
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d)); /* stopped: stays empty */
    LC_ASSERT_EQ(d.n, 0);
    agt_drained_fini(&d);

    uint64_t stats[AGT_STAT_N];
    LC_ASSERT_OK(agt_sampler_stats(s, stats));
    LC_ASSERT_EQ(stats[AGT_STAT_RECORDED], total);
    LC_ASSERT_EQ(stats[AGT_STAT_LOST_COUNTS_FULL] + stats[AGT_STAT_LOST_STACKS_FULL], 0);
    double expected = cpu_s * RATE_HZ;
    LC_CHECK(expected > 100);
    LC_CHECK(agt_test_count_plausible((double)own, expected));
    agt_sampler_free(s);
}

/* Drained stacks symbolize to this file's functions, leaf first, down to main. */
static void test_stacks_symbolize_to_our_functions(void)
{
    agt_sampler_t *s = open_sampler();
    if (!s)
        return;
    agt_busy_leaf(400);
    agt_sampler_stop(s);
    agt_drained_t d;
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d));

    agt_elfcache_t *elfs = agt_elfcache_new(16);
    agt_procs_t procs;
    agt_procs_init(&procs, "/proc", elfs);
    agt_proc_t *me = agt_procs_upsert(&procs, (uint32_t)getpid(), 1, 0);
    LC_ASSERT_OK(agt_proc_snapshot(&procs, me));
    /* Other processes' samples are ignored: they have no entry in procs. */
    agt_kallsyms_t ks;
    LC_ASSERT_OK(agt_kallsyms_load("/proc/kallsyms", &ks));
    agt_opts_t opts;
    agt_opts_default(&opts);
    opts.node = "test-node";
    agt_build_ctx_t ctx = {.opts = &opts,
                           .procs = &procs,
                           .kallsyms = &ks,
                           .period_ns = 1000000000LL / RATE_HZ,
                           .time_ns = 1,
                           .duration_ns = 2};
    agt_msgs_t msgs = {0};
    LC_ASSERT_OK(agt_build_profiles(&ctx, &d, &msgs));
    LC_ASSERT_EQ(msgs.n, 1);
    agt_decoded_t dec;
    if (msgs.n == 1 && agt_test_decode(&msgs.v[0], &dec) == 0) {
        int64_t leaf = 0, all = 0, from_main = 0;
        for (size_t i = 0; i < dec.p->n_sample; i++) {
            const Google__V1__Sample *smp = dec.p->sample[i];
            all += smp->value[0];
            const char *f0 = agt_test_frame(&dec, smp, 0);
            if (f0 && strcmp(f0, "agt_busy_leaf") == 0)
                leaf += smp->value[0];
            if (agt_test_stack_has(&dec, smp, "agt_busy_leaf") &&
                agt_test_stack_has(&dec, smp, "test_stacks_symbolize_to_our_functions") &&
                agt_test_stack_has(&dec, smp, "main"))
                from_main += smp->value[0];
        }
        fprintf(stderr, "samples=%lld leaf=%lld from_main=%lld\n", (long long)all, (long long)leaf,
                (long long)from_main);
        LC_CHECK(all > 20);
        LC_CHECK(leaf * 10 >= all * 6); /* the loop itself; the rest is clock_gettime */
        LC_CHECK(from_main * 10 >= all * 9);
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "__name__"), "process_cpu");
        agt_test_decoded_fini(&dec);
    } else {
        LC_CHECK(!"decodable profile");
    }
    agt_msgs_fini(&msgs);
    agt_kallsyms_fini(&ks);
    agt_procs_fini(&procs);
    agt_elfcache_free(elfs);
    agt_drained_fini(&d);
    agt_sampler_free(s);
}

/* Samples of d (this process) whose stacks hold every name in `want`, and
 * those whose leaf is `leaf`. */
static void count_own_stacks(agt_procs_t *procs, const agt_drained_t *d, const char *leaf,
                             const char *const *want, size_t n_want, int64_t *n_leaf,
                             int64_t *n_all_names)
{
    agt_kallsyms_t ks;
    LC_ASSERT_OK(agt_kallsyms_load("/proc/kallsyms", &ks));
    agt_opts_t opts;
    agt_opts_default(&opts);
    agt_build_ctx_t ctx = {.opts = &opts,
                           .procs = procs,
                           .kallsyms = &ks,
                           .period_ns = 1000000000LL / RATE_HZ,
                           .time_ns = 1,
                           .duration_ns = 2};
    agt_msgs_t msgs = {0};
    LC_ASSERT_OK(agt_build_profiles(&ctx, d, &msgs));
    agt_decoded_t dec;
    *n_leaf = *n_all_names = 0;
    if (msgs.n == 1 && agt_test_decode(&msgs.v[0], &dec) == 0) {
        for (size_t i = 0; i < dec.p->n_sample; i++) {
            const Google__V1__Sample *smp = dec.p->sample[i];
            const char *f0 = agt_test_frame(&dec, smp, 0);
            if (f0 && strcmp(f0, leaf) == 0)
                *n_leaf += smp->value[0];
            bool all = true;
            for (size_t k = 0; k < n_want; k++)
                all = all && agt_test_stack_has(&dec, smp, want[k]);
            *n_all_names += all ? smp->value[0] : 0;
        }
        agt_test_decoded_fini(&dec);
    } else {
        LC_CHECK(!"one decodable profile");
    }
    agt_msgs_fini(&msgs);
    agt_kallsyms_fini(&ks);
}

/* With this process' tables in the BPF maps, its stacks run through the two
 * frameless functions down to main. */
static void test_table_walk_through_frameless_functions(void)
{
    agt_sampler_t *s = open_sampler();
    if (!s)
        return;
    agt_busy_leaf(30); /* the program notes this process (its leader start time) */
    struct agt_proc bp;
    LC_ASSERT_OK(agt_sampler_proc(s, (uint32_t)getpid(), &bp));
    int rows_fd, procs_fd;
    uint32_t rows_cap;
    agt_sampler_unwind_maps(s, &rows_fd, &rows_cap, &procs_fd);
    agt_unwind_t *u = NULL;
    LC_ASSERT_OK(agt_unwind_new(rows_fd, rows_cap, procs_fd, &u));
    agt_elfcache_t *elfs = agt_elfcache_new(16);
    agt_procs_t procs;
    agt_procs_init(&procs, "/proc", elfs);
    agt_proc_t *me = agt_procs_upsert(&procs, (uint32_t)getpid(), bp.start_ns, 0);
    LC_ASSERT_OK(agt_proc_snapshot(&procs, me));
    LC_ASSERT_OK(agt_unwind_set_proc(u, me));
    agt_drained_t d;
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d)); /* before the tables */
    agt_drained_fini(&d);
    uint64_t before[AGT_STAT_N], after[AGT_STAT_N];
    LC_ASSERT_OK(agt_sampler_stats(s, before));

    agt_frameless_middle(400);
    agt_sampler_stop(s);
    LC_ASSERT_OK(agt_sampler_drain(s, agt_sampler_swap(s), &d));
    LC_ASSERT_OK(agt_sampler_stats(s, after));
    static const char *const chain[] = {"agt_frameless_leaf", "agt_frameless_middle",
                                        "test_table_walk_through_frameless_functions", "main"};
    int64_t leaf, full;
    count_own_stacks(&procs, &d, "agt_frameless_leaf", chain, LC_ARRAY_LEN(chain), &leaf, &full);
    uint64_t ended = after[AGT_STAT_UNW_END] - before[AGT_STAT_UNW_END];
    fprintf(stderr, "frameless: leaf=%lld full chain=%lld walks ended normally=%llu\n",
            (long long)leaf, (long long)full, (unsigned long long)ended);
    LC_CHECK(leaf > 20);
    LC_CHECK(full * 10 >= leaf * 9);
    LC_CHECK(ended > 0);

    agt_unwind_forget_proc(u, me);
    agt_procs_fini(&procs);
    agt_elfcache_free(elfs);
    agt_drained_fini(&d);
    agt_unwind_free(u);
    agt_sampler_free(s);
}

LC_TEST_MAIN(test_double_buffer_conserves_samples, test_stacks_symbolize_to_our_functions,
             test_table_walk_through_frameless_functions)
