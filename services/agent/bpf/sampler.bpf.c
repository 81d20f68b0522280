// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sampler.bpf.c — ember-agent's on-CPU sampler (CO-RE).
 *
 * agt_on_sample runs on a perf_event CPU-clock sampler on every online CPU.
 * For each sample of a user process it takes the kernel and the user stack
 * (frame pointers, via bpf_get_stack), hashes each one, keeps the frames in
 * the active stacks map under that hash and counts (tgid, kernel hash, user
 * hash) in the active counts map. Stacks are stored under our own 64-bit
 * hash instead of a STACK_TRACE map's bucket index because the latter drops
 * (or, with REUSE_STACKID, overwrites) a stack whenever two stacks share a
 * bucket, which at realistic sizes loses a few percent of the samples.
 *
 * The first sample of a process (tgid, leader start time) records it in
 * `procs` and emits an event so user space can read its maps while it is
 * alive; agt_on_exec forgets a process that exec'd so its next sample emits
 * again. Nothing is lost silently: every early return and every failed map
 * update bumps a per-CPU statistic (sampler.h).
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "sampler.h"

/* include/linux/sched.h; a macro, so not in vmlinux.h. */
#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Which buffer (0 or 1) samples go to; written by user space through the
 * skeleton's mmap'ed .bss. */
volatile __u32 active_buffer;

/* Sizes are set by user space before loading (bpf_map__set_max_entries). */
#define COUNTS_MAP(name)                                                                           \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, 1024);                                                                 \
        __type(key, struct agt_count_key);                                                         \
        __type(value, __u64);                                                                      \
    } name SEC(".maps")

#define STACKS_MAP(name)                                                                           \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, 1024);                                                                 \
        __type(key, __u64);                                                                        \
        __type(value, struct agt_stack);                                                           \
    } name SEC(".maps")

COUNTS_MAP(counts0);
COUNTS_MAP(counts1);
STACKS_MAP(stacks0);
STACKS_MAP(stacks1);

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct agt_proc);
} procs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* One stack's worth of scratch per CPU (too big for the 512-byte BPF stack). */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct agt_stack);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, AGT_STAT_N);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

/* Per-CPU slots and no nesting (the kernel does not re-enter a perf_event
 * program on a CPU where one runs), so a plain increment is exact. */
static __always_inline void stat_inc(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        (*v)++;
}

/* A 64-bit hash of the first n frames; never 0 (0 means "no stack"). */
static __always_inline __u64 hash_frames(const struct agt_stack *s, __u32 n)
{
    __u64 h = 0x9e3779b97f4a7c15ULL ^ n;
    for (__u32 i = 0; i < AGT_MAX_FRAMES; i++) {
        if (i >= n)
            break;
        h ^= s->ips[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
    }
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h ? h : 1;
}

/* Takes one stack (user when flags has BPF_F_USER_STACK) into `stacks`.
 * Returns its hash (0 for an empty or unreadable stack), or -1 when the
 * stacks map is full and the sample must be dropped. */
static __always_inline long take_stack(struct bpf_perf_event_data *ctx, void *stacks, __u64 flags,
                                       __u32 err_stat, __u64 *hash)
{
    __u32 zero = 0;
    struct agt_stack *buf = bpf_map_lookup_elem(&scratch, &zero);
    *hash = 0;
    if (!buf)
        return 0;
    long len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), flags);
    if (len < 0) {
        stat_inc(err_stat);
        return 0;
    }
    if (len == 0)
        return 0;
    __u64 h = hash_frames(buf, (__u32)len / sizeof(__u64));
    if (!bpf_map_lookup_elem(stacks, &h)) {
        long rc = bpf_map_update_elem(stacks, &h, buf, BPF_NOEXIST);
        if (rc != 0 && rc != -17 /* EEXIST: another CPU stored it meanwhile */) {
            stat_inc(AGT_STAT_LOST_STACKS_FULL);
            return -1;
        }
    }
    *hash = h;
    return 0;
}

static __always_inline int record(struct bpf_perf_event_data *ctx, __u32 tgid, void *counts,
                                  void *stacks)
{
    struct agt_count_key key = {.tgid = tgid};
    if (take_stack(ctx, stacks, 0, AGT_STAT_KERNEL_STACK_ERR, &key.kernel_stack) < 0)
        return 0;
    if (take_stack(ctx, stacks, BPF_F_USER_STACK, AGT_STAT_USER_STACK_ERR, &key.user_stack) < 0)
        return 0;
    __u64 *count = bpf_map_lookup_elem(counts, &key);
    if (count) {
        __sync_fetch_and_add(count, 1);
    } else {
        __u64 one = 1;
        long rc = bpf_map_update_elem(counts, &key, &one, BPF_NOEXIST);
        if (rc == -17) { /* EEXIST: another CPU inserted the key meanwhile */
            count = bpf_map_lookup_elem(counts, &key);
            if (count)
                __sync_fetch_and_add(count, 1);
            rc = count ? 0 : rc;
        }
        if (rc != 0) {
            stat_inc(AGT_STAT_LOST_COUNTS_FULL);
            return 0;
        }
    }
    stat_inc(AGT_STAT_RECORDED);
    return 0;
}

/* The process entry for tgid, created (and announced to user space) on the
 * first sample of this process incarnation. */
static __always_inline struct agt_proc *note_process(struct task_struct *task, __u32 tgid)
{
    __u64 start = BPF_CORE_READ(task, group_leader, start_time);
    struct agt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
    if (p && p->start_ns == start)
        return p;
    struct agt_proc fresh = {.start_ns = start, .cgroup_id = bpf_get_current_cgroup_id()};
    BPF_CORE_READ_STR_INTO(&fresh.comm, task, group_leader, comm);
    bpf_map_update_elem(&procs, &tgid, &fresh, BPF_ANY);
    struct agt_event ev = {.tgid = tgid, .kind = AGT_EVENT_NEW, .start_ns = start};
    if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0)
        stat_inc(AGT_STAT_EVENTS_LOST);
    return bpf_map_lookup_elem(&procs, &tgid);
}

SEC("perf_event")
int agt_on_sample(struct bpf_perf_event_data *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    stat_inc(AGT_STAT_SAMPLES);
    if (tgid == 0) {
        stat_inc(AGT_STAT_IDLE);
        return 0;
    }
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    if (BPF_CORE_READ(task, flags) & PF_KTHREAD) {
        stat_inc(AGT_STAT_KTHREAD);
        return 0;
    }
    struct agt_proc *p = note_process(task, tgid);
    if (p && (p->flags & AGT_PROC_SKIP)) {
        stat_inc(AGT_STAT_FILTERED);
        return 0;
    }
    if (active_buffer & 1)
        return record(ctx, tgid, &counts1, &stacks1);
    return record(ctx, tgid, &counts0, &stacks0);
}

/* A process that exec'd keeps its pid and start time but not its mappings:
 * forget it, and tell user space if it had been sampled before. */
SEC("raw_tp/sched_process_exec")
int agt_on_exec(void *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct agt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
    if (!p)
        return 0;
    struct agt_event ev = {.tgid = tgid, .kind = AGT_EVENT_EXEC, .start_ns = p->start_ns};
    bpf_map_delete_elem(&procs, &tgid);
    if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0)
        stat_inc(AGT_STAT_EVENTS_LOST);
    return 0;
}
