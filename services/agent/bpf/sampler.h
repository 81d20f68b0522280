/*
 * sampler.h — what the CPU sampler BPF program and the agent share: map key
 * and value layouts, event records and the statistics slots.
 *
 * Included by sampler.bpf.c (types from vmlinux.h) and by the agent's C code
 * (types from <linux/types.h>); keep it free of anything else.
 *
 * Double buffering: every aggregation map exists twice (counts0/counts1,
 * stacks0/stacks1). The program writes into the buffer named by
 * `active_buffer` (a global in .bss); user space flips it once per interval,
 * waits for programs already running to finish, and drains the other buffer
 * while sampling goes on in the fresh one.
 */
#ifndef AGT_SAMPLER_H
#define AGT_SAMPLER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* perf's default kernel.perf_event_max_stack; deeper stacks keep their leaf side. */
#define AGT_MAX_FRAMES 127
#define AGT_COMM_LEN 16

/* One aggregated stack of one process: the value is a sample count (__u64). */
struct agt_count_key {
    __u32 tgid;
    __u32 pad;
    __u64 kernel_stack; /* hash of the kernel stack in stacksN; 0 = none */
    __u64 user_stack;   /* hash of the user stack in stacksN; 0 = none */
};

/* Instruction pointers, leaf first, zero-padded after the last frame. */
struct agt_stack {
    __u64 ips[AGT_MAX_FRAMES];
};

/* agt_proc.flags */
#define AGT_PROC_SKIP 1u /* filtered out by user space: drop its samples early */

/* Per process (tgid), shared by both buffers. Identity is (tgid, start_ns):
 * a recycled pid has another leader start time. */
struct agt_proc {
    __u64 start_ns; /* group leader's task->start_time */
    __u64 cgroup_id;
    char comm[AGT_COMM_LEN]; /* group leader's comm when first sampled */
    __u32 flags;
    __u32 pad;
};

enum agt_event_kind {
    AGT_EVENT_NEW = 1,  /* first sample of a process: snapshot its maps now */
    AGT_EVENT_EXEC = 2, /* a sampled process exec'd: its maps changed */
};

/* Ring buffer record. */
struct agt_event {
    __u32 tgid;
    __u32 kind;
    __u64 start_ns;
};

/* Per-CPU counters (slot index), summed by user space. */
enum agt_stat {
    AGT_STAT_SAMPLES = 0,      /* every time the program ran */
    AGT_STAT_IDLE,             /* the CPU was idle (pid 0) */
    AGT_STAT_KTHREAD,          /* a kernel thread was running */
    AGT_STAT_FILTERED,         /* the process is excluded by a filter */
    AGT_STAT_RECORDED,         /* counted in a counts map */
    AGT_STAT_LOST_COUNTS_FULL, /* lost: the counts map had no room */
    AGT_STAT_LOST_STACKS_FULL, /* lost: the stacks map had no room */
    AGT_STAT_USER_STACK_ERR,   /* recorded without user frames (unreadable user stack) */
    AGT_STAT_KERNEL_STACK_ERR, /* recorded without kernel frames */
    AGT_STAT_EVENTS_LOST,      /* ring buffer full: a new-process event was dropped */
    AGT_STAT_N
};

#endif
