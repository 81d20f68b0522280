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
    __u64 py_stack;     /* hash of the thread's Python frames in stacksN; 0 = none */
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
    AGT_EVENT_NEW = 1,    /* first sample of a process: snapshot its maps now */
    AGT_EVENT_EXEC = 2,   /* a sampled process exec'd: its maps changed */
    AGT_EVENT_MAPS = 3,   /* the unwinder met code outside the known mappings (dlopen, mmap) */
    AGT_EVENT_PYCODE = 4, /* a Python code object seen for the first time: name it while it lives */
};

/* ---- .eh_frame unwinding (x86-64) ----
 *
 * One row per address range of an object's call frame information, sorted
 * by pc (the object's ELF virtual address): the row with the largest pc at
 * or below an address holds its rule. All rows live in one array map
 * (`unwind_rows`); each object owns a contiguous extent of it, shared by
 * every process that maps the object. */
enum agt_cfa_kind {
    AGT_CFA_END = 0,         /* no unwind information here (between FDEs) */
    AGT_CFA_RSP = 1,         /* CFA = rsp + cfa_off */
    AGT_CFA_RBP = 2,         /* CFA = rbp + cfa_off */
    AGT_CFA_PLT = 3,         /* PLT entry: CFA = rsp + 8 + ((rip & 15) >= cfa_off ? 8 : 0) */
    AGT_CFA_UNDEF_RA = 4,    /* return address undefined: the outermost frame (_start, clone) */
    AGT_CFA_UNSUPPORTED = 5, /* another expression or register: the walk stops here */
};

/* rbp_off: 0 = rbp unchanged by this frame; AGT_RBP_LOST = saved in a way we
 * do not follow (rbp is unknown in the caller); else saved at CFA + 8 * rbp_off.
 * The return address is always at CFA - 8 (rows where it is not are UNSUPPORTED). */
#define AGT_RBP_LOST (-128)

struct agt_unwind_row {
    __u32 pc;
    __u8 cfa;      /* enum agt_cfa_kind */
    __s8 rbp_off;  /* in 8-byte units */
    __s16 cfa_off; /* bytes (PLT: the threshold) */
};

/* Executable mappings of one process, sorted by start. table_len 0: no
 * table (anonymous/JIT code, Go, objects without .eh_frame): frame pointers. */
#define AGT_UNWIND_MAX_MAPS 256
#define AGT_UNWIND_MAX_ROWS_LOG2 24 /* binary search steps; longer tables are not loaded */

struct agt_unwind_map {
    __u64 start, end;
    __u64 bias; /* ELF vaddr = address - bias */
    __u32 table_start, table_len;
};

/* agt_unwind_proc.flags */
#define AGT_UNWIND_ASKED 1u /* an AGT_EVENT_MAPS is pending: do not send another */

struct agt_unwind_proc {
    __u64 start_ns; /* the process incarnation (leader start time) it describes */
    __u32 n_maps;
    __u32 flags;
    struct agt_unwind_map maps[AGT_UNWIND_MAX_MAPS];
};

/* ---- Python (CPython) frames ----
 *
 * For a process user space recognised as CPython (python.c), the program
 * finds the sampled thread's PyThreadState (interpreter's thread list,
 * matched by native thread id) and walks its frame chain, leaf first, into
 * a second stack of the same stacks map. Each frame is one encoded word
 * (AGT_PY_FRAME_*): the code object's address, the instruction offset in
 * code units, and whether the frame is the first one its C-level eval call
 * ran (user space splices each run of frames in place of that eval call's
 * native frame). Every offset the walk needs comes from user space, per
 * interpreter version; 0xffff marks a field the version does not have. */
#define AGT_PY_MAX_FRAMES 96
#define AGT_PY_MAX_THREADS 64 /* thread states searched for the sampled thread */
#define AGT_PY_FRAME_ADDR_MASK 0x0000ffffffffffffULL
#define AGT_PY_FRAME_OFF_SHIFT 48
#define AGT_PY_FRAME_OFF_MAX 0x3fffULL
#define AGT_PY_FRAME_TAG (1ULL << 62)   /* set on every Python frame word (never 0) */
#define AGT_PY_FRAME_ENTRY (1ULL << 63) /* the eval call's first frame */
#define AGT_PY_NO_FIELD 0xffff

struct agt_py_offsets {
    __u16 runtime_interp_head; /* _PyRuntime.interpreters.head */
    __u16 interp_threads_head; /* PyInterpreterState.threads.head */
    __u16 tstate_next;
    __u16 tstate_native_tid;
    __u16 tstate_cframe;        /* 3.11/3.12: PyThreadState.cframe */
    __u16 cframe_current_frame; /* _PyCFrame.current_frame (or tstate's, without cframe) */
    __u16 frame_code;
    __u16 frame_previous;
    __u16 frame_prev_instr;
    __u16 frame_is_entry; /* 3.11: bool is_entry */
    __u16 code_adaptive;  /* PyCodeObject.co_code_adaptive */
    __u16 frame_owner;    /* 3.12+: char owner (AGT_PY_OWNED_BY_CSTACK marks an eval call's base) */
    __u16 flags;          /* AGT_PY_F_*: how 3.10's older structures differ */
    __u16 pad[3];
};

/* 3.10: tstate_native_tid is PyThreadState.thread_id, the pthread_t (on
 * x86-64 glibc the thread's TCB address, its fs base), not the kernel tid. */
#define AGT_PY_F_TID_IS_PTHREAD 1
/* 3.10: every PyFrameObject is run by its own eval call (no inlined calls). */
#define AGT_PY_F_EACH_FRAME_ENTRY 2
/* 3.10: frame_prev_instr is int f_lasti, an index in code units. */
#define AGT_PY_F_LASTI_INDEX 4

/* 3.12+: the shim frame each eval call pushes below the frames it runs. */
#define AGT_PY_OWNED_BY_CSTACK 3

struct agt_py_proc {
    __u64 start_ns; /* the process incarnation it describes */
    __u64 runtime;  /* address of _PyRuntime in the process */
    struct agt_py_offsets off;
};

/* Ring buffer record. */
struct agt_event {
    __u32 tgid;
    __u32 kind;
    __u64 start_ns;
    __u64 addr; /* AGT_EVENT_PYCODE: the code object */
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
    /* User stacks walked with unwind tables, by how the walk ended: */
    AGT_STAT_UNW_END,         /* reached the outermost frame (undefined return address, 0) */
    AGT_STAT_UNW_DEPTH,       /* truncated at AGT_MAX_FRAMES */
    AGT_STAT_UNW_READ_ERR,    /* a saved register could not be read (page not present) */
    AGT_STAT_UNW_UNSUPPORTED, /* a CFA rule we do not follow (signal frame, DW_OP program) */
    AGT_STAT_UNW_NO_RBP,      /* the CFA is rbp-based but rbp is unknown */
    AGT_STAT_UNW_NO_PROGRESS, /* the stack pointer did not grow: corrupt or foreign frame */
    AGT_STAT_UNW_FP_END,      /* a frame-pointer step met rbp = 0 (usual end of FP code) */
    AGT_STAT_UNW_FP_FRAMES,   /* frames stepped by frame pointer (no table for the code) */
    AGT_STAT_UNW_UNKNOWN_MAP, /* frames outside every known mapping (maps re-read) */
    /* Python frame walks (processes user space recognised as CPython): */
    AGT_STAT_PY_WALKS,     /* walks that emitted frames */
    AGT_STAT_PY_FRAMES,    /* Python frames emitted */
    AGT_STAT_PY_NO_THREAD, /* the sampled thread has no thread state (not a Python thread) */
    AGT_STAT_PY_NO_FRAME,  /* its thread state had no current frame (not running Python) */
    AGT_STAT_PY_READ_ERR,  /* interpreter memory could not be read (page not present) */
    AGT_STAT_PY_DEPTH,     /* the chain was longer than AGT_PY_MAX_FRAMES (leaf side kept) */
    AGT_STAT_N
};

#endif
