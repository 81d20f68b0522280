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

/* Unwind rows of every loaded object (sampler.h); user space writes them
 * through an mmap of the array and hands out extents. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct agt_unwind_row);
} unwind_rows SEC(".maps");

/* tgid -> its executable mappings and their tables; written by user space
 * once it has read the process. Absent: bpf_get_stack (frame pointers). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct agt_unwind_proc);
} unwind_procs SEC(".maps");

/* tgid -> where its CPython runtime is and the version's offsets; written by
 * user space once it recognised the interpreter (python.c). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct agt_py_proc);
} py_procs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, AGT_STAT_N);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

/* Per-CPU slots and no nesting (the kernel does not re-enter a perf_event
 * program on a CPU where one runs), so a plain increment is exact. */
static __always_inline void stat_add(__u32 which, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += n;
}

static __always_inline void stat_inc(__u32 which)
{
    stat_add(which, 1);
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

/* Stores the n frames in buf under their hash (see take_stack). */
static __always_inline long store_stack(void *stacks, struct agt_stack *buf, __u32 n, __u64 *hash)
{
    *hash = 0;
    if (n == 0)
        return 0;
    __u64 h = hash_frames(buf, n);
    if (!bpf_map_lookup_elem(stacks, &h)) {
        long rc = bpf_map_update_elem(stacks, &h, buf, BPF_NOEXIST);
        if (rc != 0 && rc != -17) {
            stat_inc(AGT_STAT_LOST_STACKS_FULL);
            return -1;
        }
    }
    *hash = h;
    return 0;
}

/* ---------------------------------------------------------------- table unwinding */

/* The walk's registers, per CPU in a map rather than on the stack: values
 * the verifier reloads from map memory carry no history, so it neither
 * tracks the frame count as a distinct constant in each loop iteration nor
 * the bounds of a binary search's every path (which it cannot merge). */
struct unwind_walk {
    __u64 ip, sp, bp;
    __u32 tgid;
    __u32 n;       /* frames written */
    __u32 result;  /* AGT_STAT_UNW_* once the walk ended, 0 while it goes on */
    __u32 launder; /* the mapping search passes its index through here */
    __u32 by_fp;   /* the current ip came from a frame-pointer step (may be garbage) */
    __u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct unwind_walk);
} walks SEC(".maps");

static __always_inline __u32 launder_index(struct unwind_walk *w, __u32 v)
{
    volatile __u32 *slot = &w->launder;
    *slot = v;
    return *slot;
}

/* The mapping of proc containing addr, or NULL. */
static __always_inline struct agt_unwind_map *find_mapping(struct unwind_walk *w,
                                                           struct agt_unwind_proc *proc, __u64 addr)
{
    /* No clamping to a constant: a constant hi would make every path of the
     * search concrete and distinct to the verifier. */
    __u32 lo = 0, hi = proc->n_maps;
    if (hi > AGT_UNWIND_MAX_MAPS)
        return NULL;
    for (int i = 0; i < 9; i++) { /* log2(AGT_UNWIND_MAX_MAPS) + 1 */
        if (lo >= hi)
            break;
        __u32 mid = (lo + hi) / 2;
        __u32 at = launder_index(w, mid);
        if (at >= AGT_UNWIND_MAX_MAPS)
            return NULL;
        struct agt_unwind_map *m = &proc->maps[at];
        if (addr < m->start)
            hi = mid;
        else if (addr >= m->end)
            lo = mid + 1;
        else
            return m;
    }
    return NULL;
}

/* The row ruling pc in [start, start + len), or NULL. */
static __always_inline struct agt_unwind_row *find_row(__u32 start, __u32 len, __u32 pc)
{
    __u32 lo = start, hi = start + len;
    for (int i = 0; i < AGT_UNWIND_MAX_ROWS_LOG2 + 1; i++) {
        if (lo >= hi)
            break;
        __u32 mid = lo + (hi - lo) / 2;
        struct agt_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &mid);
        if (!r)
            return NULL;
        if (r->pc <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo <= start)
        return NULL;
    __u32 at = lo - 1;
    return bpf_map_lookup_elem(&unwind_rows, &at);
}

/* One frame-pointer step: [rbp] is the caller's rbp, [rbp + 8] the return address. */
static __always_inline void step_fp(struct unwind_walk *w)
{
    stat_inc(AGT_STAT_UNW_FP_FRAMES);
    w->by_fp = 1;
    if (w->bp == 0) {
        w->result = AGT_STAT_UNW_FP_END;
        return;
    }
    __u64 saved[2];
    if (bpf_probe_read_user(saved, sizeof(saved), (void *)w->bp) != 0) {
        w->result = AGT_STAT_UNW_READ_ERR;
        return;
    }
    __u64 sp = w->bp + 16;
    if (sp <= w->sp) {
        w->result = AGT_STAT_UNW_NO_PROGRESS;
        return;
    }
    w->sp = sp;
    w->bp = saved[0];
    w->ip = saved[1];
}

/* One step by the row's rule. */
static __always_inline void step_row(struct unwind_walk *w, struct agt_unwind_row *r)
{
    __u64 cfa;
    switch (r->cfa) {
    case AGT_CFA_RSP:
        cfa = w->sp + r->cfa_off;
        break;
    case AGT_CFA_RBP:
        if (w->bp == 0) {
            w->result = AGT_STAT_UNW_NO_RBP;
            return;
        }
        cfa = w->bp + r->cfa_off;
        break;
    case AGT_CFA_PLT:
        cfa = w->sp + 8 + ((w->ip & 15) >= (__u64)r->cfa_off ? 8 : 0);
        break;
    case AGT_CFA_UNDEF_RA:
        w->result = AGT_STAT_UNW_END;
        return;
    default:
        w->result = AGT_STAT_UNW_UNSUPPORTED;
        return;
    }
    __u64 ra;
    if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)) != 0) {
        w->result = AGT_STAT_UNW_READ_ERR;
        return;
    }
    if (r->rbp_off == AGT_RBP_LOST) {
        w->bp = 0;
    } else if (r->rbp_off != 0) {
        __u64 bp;
        if (bpf_probe_read_user(&bp, sizeof(bp), (void *)(cfa + (__s64)r->rbp_off * 8)) != 0) {
            w->result = AGT_STAT_UNW_READ_ERR;
            return;
        }
        w->bp = bp;
    }
    if (cfa <= w->sp) {
        w->result = AGT_STAT_UNW_NO_PROGRESS;
        return;
    }
    w->sp = cfa;
    w->ip = ra;
    w->by_fp = 0;
}

/* Asks user space (once until it answers) to re-read the process' maps.
 * Only for an ip we trust (the interrupted one, or one a table step found):
 * a frame-pointer step through code without frame pointers yields garbage
 * that no re-read would place. */
static __always_inline void ask_for_maps(struct agt_unwind_proc *proc, struct unwind_walk *w)
{
    stat_inc(AGT_STAT_UNW_UNKNOWN_MAP);
    if ((proc->flags & AGT_UNWIND_ASKED) || w->by_fp)
        return;
    proc->flags |= AGT_UNWIND_ASKED;
    struct agt_event ev = {.tgid = w->tgid, .kind = AGT_EVENT_MAPS, .start_ns = proc->start_ns};
    if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0)
        stat_inc(AGT_STAT_EVENTS_LOST);
}

/* bpf_loop body: records w->ip, then steps to the caller. Returns 1 to stop. */
static long unwind_step(__u64 index, void *ctx)
{
    __u32 zero = 0;
    struct unwind_walk *w = bpf_map_lookup_elem(&walks, &zero);
    if (!w)
        return 1;
    struct agt_stack *buf = bpf_map_lookup_elem(&scratch, &zero);
    __u32 tgid = w->tgid;
    struct agt_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
    if (!buf || !proc) {
        w->result = AGT_STAT_UNW_UNSUPPORTED;
        return 1;
    }
    if (w->ip == 0) {
        w->result = AGT_STAT_UNW_END;
        return 1;
    }
    __u32 n = w->n;
    if (n >= AGT_MAX_FRAMES) {
        w->result = AGT_STAT_UNW_DEPTH;
        return 1;
    }
    buf->ips[n] = w->ip;
    w->n = n + 1;
    /* A return address points after its call; the call itself is what ran. */
    __u64 lookup = n ? w->ip - 1 : w->ip;
    struct agt_unwind_map *m = find_mapping(w, proc, lookup);
    if (!m) {
        ask_for_maps(proc, w);
        step_fp(w);
    } else if (m->table_len == 0 || lookup - m->bias > 0xffffffffULL) {
        step_fp(w);
    } else {
        struct agt_unwind_row *r =
            find_row(m->table_start, m->table_len, (__u32)(lookup - m->bias));
        if (!r || r->cfa == AGT_CFA_END)
            step_fp(w); /* code the table does not cover (hand-written assembly) */
        else
            step_row(w, r);
    }
    if (w->result == 0 && w->ip == 0)
        w->result = AGT_STAT_UNW_END;
    return w->result ? 1 : 0;
}

/* The user registers at the sample: the interrupted ones when the CPU was in
 * user mode, else those saved on kernel entry. */
static __always_inline void user_regs(struct bpf_perf_event_data *ctx, struct unwind_walk *w)
{
    /* cs shares its 8-byte slot with padding; the context is read in whole words */
    __u64 cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
    if ((cs & 3) == 3) {
        w->ip = ctx->regs.ip;
        w->sp = ctx->regs.sp;
        w->bp = ctx->regs.bp;
        return;
    }
    struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    w->ip = BPF_CORE_READ(r, ip);
    w->sp = BPF_CORE_READ(r, sp);
    w->bp = BPF_CORE_READ(r, bp);
}

/* The user stack by the process' unwind tables (frame pointers where a
 * mapping has none). Returns -1 when the process has no tables yet (the
 * caller takes the frame-pointer stack), else as take_stack. */
static __always_inline long take_table_stack(struct bpf_perf_event_data *ctx, __u32 tgid,
                                             __u64 start_ns, void *stacks, __u64 *hash)
{
    *hash = 0;
    struct agt_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
    if (!proc || proc->start_ns != start_ns)
        return 1;
    __u32 zero = 0;
    struct agt_stack *buf = bpf_map_lookup_elem(&scratch, &zero);
    struct unwind_walk *w = bpf_map_lookup_elem(&walks, &zero);
    if (!buf || !w)
        return 0;
    __builtin_memset(buf, 0, sizeof(*buf)); /* stacks are zero-padded */
    *w = (struct unwind_walk){.tgid = tgid};
    user_regs(ctx, w);
    bpf_loop(AGT_MAX_FRAMES + 1, unwind_step, NULL, 0);
    stat_inc(w->result ? w->result : AGT_STAT_UNW_DEPTH);
    __u32 n = w->n;
    if (n > AGT_MAX_FRAMES)
        n = AGT_MAX_FRAMES;
    return store_stack(stacks, buf, n, hash);
}

/* ---------------------------------------------------------------- Python frames */

/* The frame walk's state, per CPU in a map (like unwind_walk). */
struct py_walk {
    __u64 frame; /* the next _PyInterpreterFrame to read; 0 at the end */
    __u32 n;     /* frames written */
    __u32 result;
    __u32 tgid, pad;
    __u64 start_ns;
    struct agt_py_offsets off;
};

/* (process, code object) pairs user space was told about: a code object is
 * announced once (AGT_EVENT_PYCODE) so that it is read while the process
 * lives, not at the drain, when a short-lived program may be gone. */
struct py_code_key {
    __u32 tgid;
    __u32 pad;
    __u64 code;
};

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 65536);
    __type(key, struct py_code_key);
    __type(value, __u64); /* the process incarnation (start_ns) */
} py_codes_seen SEC(".maps");

static __always_inline void py_announce(const struct py_walk *w, __u64 code)
{
    struct py_code_key k = {.tgid = w->tgid, .code = code};
    __u64 *seen = bpf_map_lookup_elem(&py_codes_seen, &k);
    if (seen && *seen == w->start_ns)
        return;
    __u64 start = w->start_ns;
    bpf_map_update_elem(&py_codes_seen, &k, &start, BPF_ANY);
    struct agt_event ev = {
        .tgid = w->tgid, .kind = AGT_EVENT_PYCODE, .start_ns = start, .addr = code};
    if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0)
        stat_inc(AGT_STAT_EVENTS_LOST);
}

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct py_walk);
} py_walks SEC(".maps");

/* Reads the pointer-sized field at base + off; nonzero when it cannot. */
static __always_inline long py_read(__u64 base, __u16 off, __u64 *out)
{
    *out = 0;
    if (off == AGT_PY_NO_FIELD)
        return -1;
    return bpf_probe_read_user(out, sizeof(*out), (void *)(base + off));
}

/* The sampled thread's PyThreadState, searched by native thread id (3.10:
 * by pthread_t, the fs base) in the main interpreter's thread list (the
 * thread holding the GIL need not be the one on this CPU). 0 with *result
 * set when there is none. */
static __always_inline __u64 py_thread_state(const struct agt_py_proc *pp, __u32 tid, __u32 *result)
{
    __u64 interp, ts;
    if (py_read(pp->runtime, pp->off.runtime_interp_head, &interp) != 0 || interp == 0 ||
        py_read(interp, pp->off.interp_threads_head, &ts) != 0) {
        *result = AGT_STAT_PY_READ_ERR;
        return 0;
    }
    __u64 want = tid, mask = 0xffffffffULL;
    if (pp->off.flags & AGT_PY_F_TID_IS_PTHREAD) {
        struct task_struct *task = bpf_get_current_task_btf();
        want = BPF_CORE_READ(task, thread.fsbase);
        mask = ~0ULL;
    }
    for (int i = 0; i < AGT_PY_MAX_THREADS && ts; i++) {
        __u64 native;
        if (py_read(ts, pp->off.tstate_native_tid, &native) != 0) {
            *result = AGT_STAT_PY_READ_ERR;
            return 0;
        }
        if ((native & mask) == want)
            return ts;
        if (py_read(ts, pp->off.tstate_next, &ts) != 0) {
            *result = AGT_STAT_PY_READ_ERR;
            return 0;
        }
    }
    *result = AGT_STAT_PY_NO_THREAD;
    return 0;
}

/* The thread's innermost frame: tstate->cframe->current_frame (3.11, 3.12). */
static __always_inline __u64 py_current_frame(const struct agt_py_proc *pp, __u64 ts)
{
    __u64 holder = ts, frame;
    if (pp->off.tstate_cframe != AGT_PY_NO_FIELD && py_read(ts, pp->off.tstate_cframe, &holder))
        return 0;
    if (holder == 0 || py_read(holder, pp->off.cframe_current_frame, &frame) != 0)
        return 0;
    return frame;
}

#define PY_SHIM_FRAME 1 /* py_frame_word: an eval call's base, not a Python frame */

/* The frame's instruction offset in code units: from the instruction
 * pointer and the code's first unit (3.11+), or 3.10's int f_lasti, an index
 * already (read as a word: the int is its low half; -1 before the first). */
static __always_inline __u64 py_code_units(const struct agt_py_offsets *off, __u64 code,
                                           __u64 instr)
{
    if (off->flags & AGT_PY_F_LASTI_INDEX) {
        __s32 lasti = (__s32)instr;
        return lasti > 0 ? (__u64)lasti : 0;
    }
    __u64 first = code + off->code_adaptive;
    return instr >= first ? (instr - first) / 2 : 0;
}

/* One frame's word (sampler.h); 0 when the frame cannot be read,
 * PY_SHIM_FRAME for the base frame of an eval call (3.12+). */
static __always_inline __u64 py_frame_word(struct py_walk *w, __u64 frame, __u64 *previous)
{
    __u64 code, instr;
    __u8 entry = 0, owner = 0;
    if (py_read(frame, w->off.frame_code, &code) != 0 ||
        py_read(frame, w->off.frame_previous, previous) != 0 ||
        py_read(frame, w->off.frame_prev_instr, &instr) != 0)
        return 0;
    if (w->off.frame_is_entry != AGT_PY_NO_FIELD &&
        bpf_probe_read_user(&entry, 1, (void *)(frame + w->off.frame_is_entry)) != 0)
        return 0;
    if (w->off.frame_owner != AGT_PY_NO_FIELD &&
        bpf_probe_read_user(&owner, 1, (void *)(frame + w->off.frame_owner)) != 0)
        return 0;
    if (owner == AGT_PY_OWNED_BY_CSTACK)
        return PY_SHIM_FRAME;
    __u64 word = (code & AGT_PY_FRAME_ADDR_MASK) | AGT_PY_FRAME_TAG;
    __u64 units = py_code_units(&w->off, code, instr);
    word |= (units > AGT_PY_FRAME_OFF_MAX ? AGT_PY_FRAME_OFF_MAX : units) << AGT_PY_FRAME_OFF_SHIFT;
    if (w->off.flags & AGT_PY_F_EACH_FRAME_ENTRY)
        entry = 1;
    return entry ? word | AGT_PY_FRAME_ENTRY : word;
}

/* bpf_loop body: records one frame, steps to its caller. Returns 1 to stop. */
static long py_step(__u64 index, void *ctx)
{
    __u32 zero = 0;
    struct py_walk *w = bpf_map_lookup_elem(&py_walks, &zero);
    struct agt_stack *buf = bpf_map_lookup_elem(&scratch, &zero);
    if (!w || !buf)
        return 1;
    if (w->frame == 0)
        return 1;
    __u32 n = w->n;
    if (n >= AGT_PY_MAX_FRAMES) {
        w->result = AGT_STAT_PY_DEPTH;
        return 1;
    }
    __u64 previous;
    __u64 word = py_frame_word(w, w->frame, &previous);
    if (word == 0) {
        w->result = AGT_STAT_PY_READ_ERR;
        return 1;
    }
    if (word == PY_SHIM_FRAME) {
        /* the frame recorded last was the first this eval call ran */
        if (n > 0 && n <= AGT_MAX_FRAMES)
            buf->ips[n - 1] |= AGT_PY_FRAME_ENTRY;
    } else if ((word & AGT_PY_FRAME_ADDR_MASK) != 0 && n < AGT_MAX_FRAMES) {
        buf->ips[n] = word;
        w->n = n + 1;
        py_announce(w, word & AGT_PY_FRAME_ADDR_MASK);
    }
    w->frame = previous;
    return 0;
}

/* The sampled thread's Python frames into `stacks` when the process is a
 * recognised CPython: returns as store_stack (hash 0 when there are none). */
static __always_inline long take_py_stack(__u32 tgid, __u64 start_ns, void *stacks, __u64 *hash)
{
    *hash = 0;
    struct agt_py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
    if (!pp || pp->start_ns != start_ns)
        return 0;
    __u32 zero = 0;
    struct agt_stack *buf = bpf_map_lookup_elem(&scratch, &zero);
    struct py_walk *w = bpf_map_lookup_elem(&py_walks, &zero);
    if (!buf || !w)
        return 0;
    __u32 result = 0;
    __u64 ts = py_thread_state(pp, (__u32)bpf_get_current_pid_tgid(), &result);
    __u64 frame = ts ? py_current_frame(pp, ts) : 0;
    if (!frame) {
        stat_inc(result ? result : AGT_STAT_PY_NO_FRAME);
        return 0;
    }
    __builtin_memset(buf, 0, sizeof(*buf)); /* stacks are zero-padded */
    w->frame = frame;
    w->n = 0;
    w->result = 0;
    w->tgid = tgid;
    w->start_ns = start_ns;
    w->off = pp->off;
    bpf_loop(AGT_PY_MAX_FRAMES + 1, py_step, NULL, 0);
    if (w->result)
        stat_inc(w->result);
    __u32 n = w->n;
    if (n == 0)
        return 0;
    if (n > AGT_MAX_FRAMES)
        n = AGT_MAX_FRAMES;
    stat_inc(AGT_STAT_PY_WALKS);
    stat_add(AGT_STAT_PY_FRAMES, n);
    return store_stack(stacks, buf, n, hash);
}

static __always_inline int record(struct bpf_perf_event_data *ctx, __u32 tgid, __u64 start_ns,
                                  void *counts, void *stacks)
{
    struct agt_count_key key = {.tgid = tgid};
    if (take_stack(ctx, stacks, 0, AGT_STAT_KERNEL_STACK_ERR, &key.kernel_stack) < 0)
        return 0;
    long rc = take_table_stack(ctx, tgid, start_ns, stacks, &key.user_stack);
    if (rc > 0)
        rc = take_stack(ctx, stacks, BPF_F_USER_STACK, AGT_STAT_USER_STACK_ERR, &key.user_stack);
    if (rc >= 0)
        rc = take_py_stack(tgid, start_ns, stacks, &key.py_stack);
    if (rc < 0)
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
    __u64 start_ns = p ? p->start_ns : 0;
    if (active_buffer & 1)
        return record(ctx, tgid, start_ns, &counts1, &stacks1);
    return record(ctx, tgid, start_ns, &counts0, &stacks0);
}

/* A process that exec'd keeps its pid and start time but not its mappings:
 * forget it, and tell user space if it had been sampled before. */
SEC("raw_tp/sched_process_exec")
int agt_on_exec(void *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    bpf_map_delete_elem(&unwind_procs, &tgid); /* its mappings are gone */
    bpf_map_delete_elem(&py_procs, &tgid);     /* and its interpreter, if any */
    struct agt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
    if (!p)
        return 0;
    struct agt_event ev = {.tgid = tgid, .kind = AGT_EVENT_EXEC, .start_ns = p->start_ns};
    bpf_map_delete_elem(&procs, &tgid);
    if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0)
        stat_inc(AGT_STAT_EVENTS_LOST);
    return 0;
}
