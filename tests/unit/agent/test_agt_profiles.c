/*
 * test_agt_profiles.c — drained counts -> IngestProfile + pprof, on
 * hand-made drained data, read back by libcommon's decoder and validator.
 *
 * Oracles: the addresses of this file's functions (symbolized to their
 * names), kallsyms addresses read with sscanf, the arithmetic of period and
 * values, and the label rules.
 */
#include <stdio.h>
#include <unistd.h>

#include "agt_test_util.h"

#define PERIOD_NS (1000000000LL / 19)

__attribute__((noinline)) int agt_fn_leaf(int x)
{
    return x + 1;
}

__attribute__((noinline)) int agt_fn_mid(int x)
{
    return agt_fn_leaf(x) * 2;
}

typedef struct fixture_s {
    agt_elfcache_t *elfs;
    agt_procs_t procs;
    agt_kallsyms_t ks;
    agt_opts_t opts;
    agt_build_ctx_t ctx;
    agt_drained_t d;
} fixture_t;

static uint64_t kernel_addr(const char *want)
{
    FILE *f = fopen("/proc/kallsyms", "r");
    char line[512], name[256], type;
    unsigned long long addr, found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && !strcmp(name, want))
            found = addr;
    }
    if (f)
        fclose(f);
    return found;
}

static void fixture_init(fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    f->elfs = agt_elfcache_new(8);
    agt_procs_init(&f->procs, "/proc", f->elfs);
    LC_ASSERT_OK(agt_kallsyms_load("/proc/kallsyms", &f->ks));
    agt_opts_default(&f->opts);
    f->opts.node = "node-a";
    f->opts.tenant = "anonymous";
    f->ctx = (agt_build_ctx_t){.opts = &f->opts,
                               .procs = &f->procs,
                               .kallsyms = &f->ks,
                               .period_ns = PERIOD_NS,
                               .time_ns = 1700000000000000000LL,
                               .duration_ns = 10000000000LL};
    agt_u64map_init(&f->d.stacks);
}

static void fixture_fini(fixture_t *f)
{
    agt_drained_fini(&f->d);
    agt_procs_fini(&f->procs);
    agt_kallsyms_fini(&f->ks);
    agt_elfcache_free(f->elfs);
}

static void add_stack(agt_drained_t *d, uint64_t hash, const uint64_t *ips, size_t n)
{
    d->frames = lc_xgrow(d->frames, &d->cap_frames, d->n_frames + n + 1, sizeof(*d->frames));
    memcpy(d->frames + d->n_frames, ips, n * sizeof(*ips));
    *agt_u64map_put(&d->stacks, hash, NULL) = (uint64_t)d->n_frames << 8 | n;
    d->n_frames += n;
}

static void add_count(agt_drained_t *d, uint32_t tgid, uint64_t kstack, uint64_t ustack,
                      uint64_t count)
{
    d->keys = lc_xrealloc(d->keys, (d->n + 1) * sizeof(*d->keys));
    d->counts = lc_xrealloc(d->counts, (d->n + 1) * sizeof(*d->counts));
    d->keys[d->n] =
        (struct agt_count_key){.tgid = tgid, .kernel_stack = kstack, .user_stack = ustack};
    d->counts[d->n++] = count;
}

static const Google__V1__Sample *find_sample(const agt_decoded_t *dec, int64_t count)
{
    for (size_t i = 0; i < dec->p->n_sample; i++)
        if (dec->p->sample[i]->value[0] == count)
            return dec->p->sample[i];
    return NULL;
}

static void test_one_process_profile(void)
{
    fixture_t f;
    fixture_init(&f);
    uint32_t me = (uint32_t)getpid();
    agt_proc_t *p = agt_procs_upsert(&f.procs, me, 5, 0);
    LC_ASSERT_OK(agt_proc_snapshot(&f.procs, p));
    uint64_t sys = kernel_addr("do_syscall_64"), entry = kernel_addr("entry_SYSCALL_64");
    LC_CHECK(sys && entry);
    uint64_t kips[] = {sys + 8, entry + 0x20};
    uint64_t uips[] = {(uint64_t)(uintptr_t)&agt_fn_leaf + 1, /* the leaf: exact ip */
                       (uint64_t)(uintptr_t)&agt_fn_mid + 5,  /* return address */
                       0x10};                                 /* nowhere */
    add_stack(&f.d, 11, kips, 2);
    add_stack(&f.d, 22, uips, 3);
    add_count(&f.d, me, 11, 22, 5);
    add_count(&f.d, me, 0, 22, 2);
    add_count(&f.d, me, 0, 0, 1);
    add_count(&f.d, 0x3ffffff1u, 0, 22, 100); /* no process entry: not ours to report */
    agt_msgs_t msgs = {0};
    LC_ASSERT_OK(agt_build_profiles(&f.ctx, &f.d, &msgs));
    LC_ASSERT_EQ(msgs.n, 1);
    agt_decoded_t dec;
    LC_ASSERT_OK(msgs.n == 1 ? agt_test_decode(&msgs.v[0], &dec) : -1);
    if (dec.p) {
        const lc_pprof_t *pp = dec.p;
        LC_ASSERT_EQ(pp->n_sample_type, 2);
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->sample_type[0]->type), "samples");
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->sample_type[0]->unit), "count");
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->sample_type[1]->type), "cpu");
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->sample_type[1]->unit), "nanoseconds");
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->period_type->type), "cpu");
        LC_ASSERT_STR_EQ(lc_pprof_str(pp, pp->period_type->unit), "nanoseconds");
        LC_ASSERT_EQ(pp->period, PERIOD_NS);
        LC_ASSERT_EQ(pp->time_nanos, f.ctx.time_ns);
        LC_ASSERT_EQ(pp->duration_nanos, f.ctx.duration_ns);
        int64_t n = 0, cpu = 0;
        for (size_t i = 0; i < pp->n_sample; i++) {
            n += pp->sample[i]->value[0];
            cpu += pp->sample[i]->value[1];
            LC_ASSERT_EQ(pp->sample[i]->value[1], pp->sample[i]->value[0] * PERIOD_NS);
        }
        LC_ASSERT_EQ(n, 8);
        LC_ASSERT_EQ(cpu, 8 * PERIOD_NS);
        const Google__V1__Sample *full = find_sample(&dec, 5);
        const char *want[] = {"do_syscall_64", "entry_SYSCALL_64", "agt_fn_leaf", "agt_fn_mid"};
        LC_CHECK(full && full->n_location_id == 5);
        for (size_t k = 0; full && k < 4; k++)
            LC_ASSERT_STR_EQ(agt_test_frame(&dec, full, k), want[k]);
        /* the address in no mapping and no symbol source: sent with no line
         * and no made-up name (issue 31), at the return address - 1, inside
         * the call instruction, as profile.proto has non-leaf addresses (and
         * what a server's symbolizer must look up) */
        const Google__V1__Location *nowhere =
            full ? lc_pprof_location(dec.ix, full->location_id[4]) : NULL;
        LC_CHECK(nowhere && nowhere->n_line == 0 && nowhere->mapping_id == 0 &&
                 nowhere->address == 0x10 - 1);
        const Google__V1__Sample *user = find_sample(&dec, 2);
        LC_CHECK(user && user->n_location_id == 3);
        const Google__V1__Sample *none = find_sample(&dec, 1);
        LC_CHECK(none && none->n_location_id == 1);
        LC_ASSERT_STR_EQ(none ? agt_test_frame(&dec, none, 0) : NULL, "[unknown]");
        LC_ASSERT_STR_EQ(dec.msg->tenant, "anonymous");
        LC_ASSERT_EQ(dec.msg->ingest_id.len, 16);
        LC_ASSERT_EQ(dec.msg->time_nanos, f.ctx.time_ns);
        char pid[16];
        snprintf(pid, sizeof(pid), "%u", me);
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "__name__"), "process_cpu");
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "pid"), pid);
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "comm"), "test_agt_profil");
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "service_name"), "test_agt_profiles");
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "node"), "node-a");
        LC_CHECK(agt_test_label(&dec, "container_id") == NULL);
        LC_ASSERT_EQ(msgs.v[0].samples, 8);
        agt_test_decoded_fini(&dec);
    }
    LC_CHECK(f.ctx.sym.hits >= 4);
    LC_CHECK(f.ctx.sym.misses >= 2);
    agt_msgs_fini(&msgs);
    fixture_fini(&f);
}

/* Processes of one container make one profile with container labels only;
 * an excluded process makes none; label values are made valid UTF-8. */
static void test_container_grouping_and_labels(void)
{
    fixture_t f;
    fixture_init(&f);
    f.opts.group_by = AGT_GROUP_CONTAINER;
    const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for (uint32_t pid = 0x3fff0001u; pid <= 0x3fff0003u; pid++) {
        agt_proc_t *p = agt_procs_upsert(&f.procs, pid, 1, 0);
        p->needs_snapshot = false;
        memcpy(p->container_id, id, 65);
        lc_free(p->cgroup);
        p->cgroup = lc_xstrdup("/docker/0123456789abcdef0123456789abcdef0123456789abcdef01234567"
                               "89abcdef");
        /* a byte that is not UTF-8 and a U+FFFD: each becomes "?" */
        snprintf(p->comm, sizeof(p->comm), "w\xff\xef\xbf\xbd%u", pid & 0xf);
        p->excluded = pid == 0x3fff0003u;
        uint64_t ips[] = {0x1000 + pid};
        add_stack(&f.d, pid, ips, 1);
        add_count(&f.d, pid, 0, pid, 3);
    }
    agt_msgs_t msgs = {0};
    LC_ASSERT_OK(agt_build_profiles(&f.ctx, &f.d, &msgs));
    LC_ASSERT_EQ(msgs.n, 1);
    agt_decoded_t dec;
    if (msgs.n == 1 && agt_test_decode(&msgs.v[0], &dec) == 0) {
        LC_ASSERT_EQ(msgs.v[0].samples, 6);
        LC_CHECK(agt_test_label(&dec, "pid") == NULL);
        LC_CHECK(agt_test_label(&dec, "comm") == NULL);
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "container_id"), id);
        LC_ASSERT_STR_EQ(agt_test_label(&dec, "service_name"), "0123456789ab");
        agt_test_decoded_fini(&dec);
    }
    agt_proc_t *p = agt_procs_get(&f.procs, 0x3fff0001u);
    LC_ASSERT_STR_EQ(p ? lc_labels_get(&p->labels, "comm") : NULL, "w??1");
    agt_msgs_fini(&msgs);
    fixture_fini(&f);
}

LC_TEST_MAIN(test_one_process_profile, test_container_grouping_and_labels)
