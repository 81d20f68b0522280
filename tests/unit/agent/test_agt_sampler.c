/*
 * test_agt_sampler.c — the BPF sampler loaded into the running kernel (root).
 *
 * Oracles: this process knows where it burns CPU (agt_busy_leaf, called from
 * the test function, called from main), and the BPF program's own per-CPU
 * counters say how many samples it recorded, which must equal what the two
 * drains of the double buffer returned — nothing lost, nothing twice.
 */
#include <unistd.h>

#include "agt_test_util.h"

#define RATE_HZ 499

static volatile uint64_t sink;

__attribute__((noinline)) static void agt_busy_leaf(double ms)
{
    double end = agt_test_now_ms() + ms;
    while (agt_test_now_ms() < end) {
        for (int i = 0; i < 20000; i++)
            sink += (uint64_t)i * 2654435761u;
    }
}

static agt_sampler_t *open_sampler(void)
{
    agt_sampler_opts_t so = {
        .sample_rate_hz = RATE_HZ,
        .counts_capacity = 4096,
        .stacks_capacity = 4096,
        .procs_capacity = 1024,
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
 * drain, and our busy loop gets about one sample per period of the CPU time
 * the kernel accounted to us (a loaded host gives us less of the 600 ms). */
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
    fprintf(stderr, "own samples %llu, cpu %.3fs -> %.0f expected\n", (unsigned long long)own,
            cpu_s, expected);
    LC_CHECK(expected > 20);
    LC_CHECK(own >= 0.75 * expected && own <= 1.25 * expected);
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

LC_TEST_MAIN(test_double_buffer_conserves_samples, test_stacks_symbolize_to_our_functions)
