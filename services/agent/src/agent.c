/*
 * agent.c — the agent's lifecycle and its loop side.
 *
 * Loop thread: a timer swaps the BPF double buffer once per interval and
 * asks for the idle half to be drained; a uv_poll on the ring buffer's epoll
 * fd collects new-process and exec events; finished jobs are published
 * through the transport. Worker: one job at a time (uv_queue_work) snapshots
 * the announced processes, then drains, symbolizes and encodes. A swap is
 * skipped (and counted as an overrun) while the previous drain is still
 * pending, because the buffer being drained must not receive samples; the
 * current window then simply grows until the next tick.
 *
 * Closing: sampling is detached first; with flush, one last swap drains the
 * partial interval, its profiles are published and their callbacks awaited;
 * then the handles close and the agent is freed.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_int.h"
#include "lc/clock.h"
#include "lc/log.h"

#define KALLSYMS_TTL_NS (600 * 1000000000LL)
#define IDLE_ROUNDS 2
#define ELF_CACHE_UNUSED 256
#define PROCS_CAPACITY 32768
#define EVENTS_MAX 65536 /* pending events kept; beyond, drains snapshot on demand */
/* Unwind rows of all loaded objects: 8 bytes each, preallocated (the memory
 * cap of the tables). libc has ~20k rows, python3 ~60k: room for ~100 such
 * distinct objects at once (32 MiB). */
#define UNWIND_ROWS (1u << 22)
#define UNWIND_PROCS 8192 /* not preallocated: ~8 KiB per process with an entry */

typedef struct agt_job_s {
    struct agt_event *events;
    size_t n_events;
    bool drain;
    uint32_t buffer;
    int64_t start_ns, end_ns;
    agt_msgs_t msgs;
} agt_job_t;

typedef struct agt_metrics_s {
    lc_metric_t *samples, *lost_counts, *lost_stacks, *skip_idle, *skip_kthread, *skip_filtered;
    lc_metric_t *err_user, *err_kernel, *events_lost;
    lc_metric_t *sym_hit, *sym_miss, *elf_hit, *elf_miss, *elf_error;
    lc_metric_t *published, *failed, *samples_published;
    lc_metric_t *procs_seen, *procs_tracked, *cpu_procs, *cpu_profiles, *intervals, *overruns;
    lc_metric_t *drain_seconds, *cpus;
    lc_metric_t *unw[AGT_STAT_UNW_FP_END - AGT_STAT_UNW_END + 1];
    lc_metric_t *unw_fp_frames, *unw_unknown_map, *unw_rows, *unw_rows_cap, *unw_bytes;
    lc_metric_t *unw_objects, *unw_loaded, *unw_full, *unw_procs;
    lc_metric_t *py_walks, *py_frames, *py_no_thread, *py_no_frame, *py_read_err, *py_depth;
    lc_metric_t *py_procs, *py_recognised, *py_unsupported, *py_failed, *py_code_err;
    lc_metric_t *py_codes, *py_code_bytes, *py_cache_full, *py_code_replaced;
    lc_metric_t *py_by_minor[AGT_PY_N_MINORS];
    lc_metric_t *jvm_ok, *jvm_failed;
} agt_metrics_t;

struct agt_s {
    uv_loop_t *loop;
    agt_opts_t opts; /* string fields point at the copies below */
    char *node, *tenant, *filter_text, *kube_api, *procfs;
    lc_selector_t filter;
    lc_transport_t *tr;
    agt_sampler_t *sampler;
    int64_t period_ns;
    agt_metrics_t m;

    /* Worker side: touched only inside the (single) job. */
    agt_procs_t procs;
    agt_elfcache_t *elfs;
    agt_unwind_t *unwind; /* NULL when the maps cannot be mapped: frame pointers only */
    agt_python_t *python;
    agt_python_stats_t last_py;
    agt_jvm_stats_t jvm, last_jvm;
    agt_unwind_stats_t last_unw;
    agt_kallsyms_t kallsyms;
    agt_kube_t *kube;
    uint64_t round;
    uint64_t last_stats[AGT_STAT_N];
    uint64_t lost_reported;
    agt_elfcache_stats_t last_elf;

    /* Loop side. */
    uv_timer_t timer;
    uv_poll_t poll;
    uv_work_t work;
    int open_handles;
    bool timer_open, poll_open;
    struct agt_event *events;
    size_t n_events, cap_events;
    bool drain_wanted;
    uint32_t drain_buffer;
    int64_t drain_start_ns, drain_end_ns, window_start_ns;
    agt_job_t *job;
    size_t publishing;
    bool in_publish_all; /* callbacks may run inside lc_transport_publish */
    bool closing, flush, final_swap_wanted, handles_closing;
    void (*close_cb)(void *data);
    void *close_data;
};

typedef struct agt_pub_s {
    agt_t *a;
    uint64_t samples;
} agt_pub_t;

static void agt_kick(agt_t *a);

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void agt_opts_default(agt_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->sample_rate_hz = 19;
    o->interval_ns = 10 * 1000000000LL;
    o->group_by = AGT_GROUP_PROCESS;
    o->tenant = "anonymous";
    o->partitions = 1;
    o->procfs = "/proc";
}

bool agt_symbolize_parse(const char *s, agt_symbolize_t *out)
{
    static const char *const names[] = {"local", "server", "both"};
    for (size_t i = 0; s && i < LC_ARRAY_LEN(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (agt_symbolize_t)i;
            return true;
        }
    return false;
}

bool agt_ready(const agt_t *a)
{
    return a && a->sampler && !a->closing;
}

/* ---------------------------------------------------------------- metrics */

static lc_metric_t *counter(lc_metrics_t *m, const char *name, const char *help, const char *labels)
{
    return lc_metrics_counter(m, name, help, labels);
}

static void register_python_metrics(agt_metrics_t *m, lc_metrics_t *reg)
{
    const char *walks = "Python frame walks in BPF (recognised interpreters), by result";
    m->py_walks = counter(reg, "ember_agent_python_walks_total", walks, "result=\"ok\"");
    m->py_no_thread = counter(reg, "ember_agent_python_walks_total", walks, "result=\"no_thread\"");
    m->py_no_frame = counter(reg, "ember_agent_python_walks_total", walks, "result=\"no_frame\"");
    m->py_read_err = counter(reg, "ember_agent_python_walks_total", walks, "result=\"read_error\"");
    m->py_depth = counter(reg, "ember_agent_python_walks_total", walks, "result=\"depth\"");
    m->py_frames = counter(reg, "ember_agent_python_frames_total", "Python frames read in BPF", "");
    m->py_procs = lc_metrics_gauge(reg, "ember_agent_python_processes",
                                   "Python processes whose frames are read", "");
    const char *procs = "Python interpreters found in processes, by outcome";
    m->py_recognised =
        counter(reg, "ember_agent_python_interpreters_total", procs, "result=\"recognised\"");
    m->py_unsupported = counter(reg, "ember_agent_python_interpreters_total", procs,
                                "result=\"unsupported_version\"");
    m->py_failed =
        counter(reg, "ember_agent_python_interpreters_total", procs, "result=\"map_full\"");
    for (int i = 0; i < AGT_PY_N_MINORS; i++) {
        char version[32];
        snprintf(version, sizeof(version), "version=\"3.%d\"", AGT_PY_FIRST_MINOR + i);
        m->py_by_minor[i] = counter(reg, "ember_agent_python_interpreters_by_version_total",
                                    "Python interpreters recognised, by version", version);
    }
    m->py_code_replaced =
        counter(reg, "ember_agent_python_code_replaced_total",
                "Cached code objects found replaced by another at their address (re-read)", "");
    m->py_cache_full =
        counter(reg, "ember_agent_python_code_cache_full_total",
                "Code objects named but not cached: the caches were at their cap", "");
    m->py_code_err = counter(reg, "ember_agent_python_code_read_errors_total",
                             "Code objects that could not be read from the process", "");
    m->py_codes = lc_metrics_gauge(reg, "ember_agent_python_code_objects",
                                   "Code objects cached (names, files, line tables)", "");
    m->py_code_bytes = lc_metrics_gauge(reg, "ember_agent_python_code_bytes",
                                        "Memory of the cached code objects", "");
    const char *jvm = "Perf map requests to JVMs (attach mechanism), by result";
    m->jvm_ok = counter(reg, "ember_agent_jvm_perfmap_requests_total", jvm, "result=\"ok\"");
    m->jvm_failed =
        counter(reg, "ember_agent_jvm_perfmap_requests_total", jvm, "result=\"failed\"");
}

static void register_metrics(agt_t *a, lc_metrics_t *reg)
{
    agt_metrics_t *m = &a->m;
    const char *lost = "CPU samples lost by the agent, by reason";
    const char *skipped = "CPU samples not profiled on purpose, by reason";
    m->samples = counter(reg, "ember_agent_samples_total", "CPU samples recorded", "");
    m->lost_counts = counter(reg, "ember_agent_samples_lost_total", lost, "reason=\"counts_full\"");
    m->lost_stacks = counter(reg, "ember_agent_samples_lost_total", lost, "reason=\"stacks_full\"");
    m->skip_idle = counter(reg, "ember_agent_samples_skipped_total", skipped, "reason=\"idle\"");
    m->skip_kthread =
        counter(reg, "ember_agent_samples_skipped_total", skipped, "reason=\"kernel_thread\"");
    m->skip_filtered =
        counter(reg, "ember_agent_samples_skipped_total", skipped, "reason=\"filtered\"");
    const char *errs = "Samples recorded without one of their stacks (unreadable)";
    m->err_user = counter(reg, "ember_agent_stack_errors_total", errs, "stack=\"user\"");
    m->err_kernel = counter(reg, "ember_agent_stack_errors_total", errs, "stack=\"kernel\"");
    m->events_lost = counter(reg, "ember_agent_events_lost_total",
                             "New-process events dropped (ring buffer full)", "");
    const char *sym = "Distinct frames symbolized per interval and process, by result";
    m->sym_hit = counter(reg, "ember_agent_symbolization_total", sym, "result=\"hit\"");
    m->sym_miss = counter(reg, "ember_agent_symbolization_total", sym, "result=\"miss\"");
    const char *elf = "ELF object lookups by the symbolizer, by result";
    m->elf_hit = counter(reg, "ember_agent_elf_cache_total", elf, "result=\"hit\"");
    m->elf_miss = counter(reg, "ember_agent_elf_cache_total", elf, "result=\"miss\"");
    m->elf_error = counter(reg, "ember_agent_elf_cache_total", elf, "result=\"error\"");
    m->published =
        counter(reg, "ember_agent_profiles_published_total", "Profiles the transport accepted", "");
    m->failed = counter(reg, "ember_agent_profiles_failed_total",
                        "Profiles the transport refused or failed", "");
    m->samples_published = counter(reg, "ember_agent_samples_published_total",
                                   "CPU samples in the profiles the transport accepted", "");
    m->procs_seen = counter(reg, "ember_agent_processes_seen_total",
                            "Processes (pid incarnations) seen on a CPU", "");
    m->procs_tracked = lc_metrics_gauge(reg, "ember_agent_processes",
                                        "Processes in the agent's process table", "");
    const char *cpu = "CPU time of the agent's own work: reading new processes (/proc, ELF "
                      "files) and building profiles (drain, symbolize, encode)";
    m->cpu_procs = counter(reg, "ember_agent_cpu_seconds_total", cpu, "phase=\"processes\"");
    m->cpu_profiles = counter(reg, "ember_agent_cpu_seconds_total", cpu, "phase=\"profiles\"");
    m->intervals = counter(reg, "ember_agent_intervals_total", "Intervals drained", "");
    m->cpus = lc_metrics_gauge(reg, "ember_agent_sampled_cpus",
                               "Online CPUs with an attached sampler", "");
    m->overruns = counter(reg, "ember_agent_interval_overruns_total",
                          "Ticks skipped because the previous drain was still running", "");
    m->drain_seconds =
        lc_metrics_histogram(reg, "ember_agent_drain_seconds",
                             "Time to drain, symbolize and encode one interval", "", NULL, 0);
    static const char *const ends[] = {"end",    "depth",       "read_error", "unsupported_rule",
                                       "no_rbp", "no_progress", "fp_end"};
    const char *unw = "User stacks walked with unwind tables, by how the walk ended";
    for (size_t i = 0; i < LC_ARRAY_LEN(ends); i++) {
        char label[64];
        snprintf(label, sizeof(label), "result=\"%s\"", ends[i]);
        m->unw[i] = counter(reg, "ember_agent_unwind_total", unw, label);
    }
    m->unw_fp_frames = counter(reg, "ember_agent_unwind_fp_frames_total",
                               "Frames unwound by frame pointer inside table walks (no table)", "");
    m->unw_unknown_map =
        counter(reg, "ember_agent_unwind_unknown_mapping_frames_total",
                "Frames outside every mapping the agent knew (maps re-read on demand)", "");
    m->unw_rows = lc_metrics_gauge(reg, "ember_agent_unwind_rows", "Unwind rows loaded in BPF", "");
    m->unw_rows_cap = lc_metrics_gauge(reg, "ember_agent_unwind_rows_capacity",
                                       "Unwind rows the BPF map holds (the memory cap)", "");
    m->unw_bytes =
        lc_metrics_gauge(reg, "ember_agent_unwind_map_bytes",
                         "Memory of the unwinder's BPF maps (rows + process entries)", "");
    m->unw_objects = lc_metrics_gauge(reg, "ember_agent_unwind_objects",
                                      "Objects (executables, libraries) with tables in BPF", "");
    m->unw_loaded = counter(reg, "ember_agent_unwind_objects_loaded_total",
                            "Object tables copied into BPF", "");
    m->unw_full = counter(reg, "ember_agent_unwind_objects_full_total",
                          "Objects left to frame pointers because the rows map was full", "");
    m->unw_procs =
        lc_metrics_gauge(reg, "ember_agent_unwind_processes", "Processes unwound with tables", "");
    register_python_metrics(m, reg);
}

static void add_delta(lc_metric_t *m, uint64_t now, uint64_t *last)
{
    if (now > *last)
        lc_metric_add(m, (double)(now - *last));
    *last = now;
}

static void update_stat_metrics(agt_t *a)
{
    uint64_t s[AGT_STAT_N];
    if (agt_sampler_stats(a->sampler, s) != 0)
        return;
    uint64_t *l = a->last_stats;
    add_delta(a->m.samples, s[AGT_STAT_RECORDED], &l[AGT_STAT_RECORDED]);
    add_delta(a->m.lost_counts, s[AGT_STAT_LOST_COUNTS_FULL], &l[AGT_STAT_LOST_COUNTS_FULL]);
    add_delta(a->m.lost_stacks, s[AGT_STAT_LOST_STACKS_FULL], &l[AGT_STAT_LOST_STACKS_FULL]);
    add_delta(a->m.skip_idle, s[AGT_STAT_IDLE], &l[AGT_STAT_IDLE]);
    add_delta(a->m.skip_kthread, s[AGT_STAT_KTHREAD], &l[AGT_STAT_KTHREAD]);
    add_delta(a->m.skip_filtered, s[AGT_STAT_FILTERED], &l[AGT_STAT_FILTERED]);
    add_delta(a->m.err_user, s[AGT_STAT_USER_STACK_ERR], &l[AGT_STAT_USER_STACK_ERR]);
    add_delta(a->m.err_kernel, s[AGT_STAT_KERNEL_STACK_ERR], &l[AGT_STAT_KERNEL_STACK_ERR]);
    add_delta(a->m.events_lost, s[AGT_STAT_EVENTS_LOST], &l[AGT_STAT_EVENTS_LOST]);
    for (int i = AGT_STAT_UNW_END; i <= AGT_STAT_UNW_FP_END; i++)
        add_delta(a->m.unw[i - AGT_STAT_UNW_END], s[i], &l[i]);
    add_delta(a->m.unw_fp_frames, s[AGT_STAT_UNW_FP_FRAMES], &l[AGT_STAT_UNW_FP_FRAMES]);
    add_delta(a->m.unw_unknown_map, s[AGT_STAT_UNW_UNKNOWN_MAP], &l[AGT_STAT_UNW_UNKNOWN_MAP]);
    add_delta(a->m.py_walks, s[AGT_STAT_PY_WALKS], &l[AGT_STAT_PY_WALKS]);
    add_delta(a->m.py_frames, s[AGT_STAT_PY_FRAMES], &l[AGT_STAT_PY_FRAMES]);
    add_delta(a->m.py_no_thread, s[AGT_STAT_PY_NO_THREAD], &l[AGT_STAT_PY_NO_THREAD]);
    add_delta(a->m.py_no_frame, s[AGT_STAT_PY_NO_FRAME], &l[AGT_STAT_PY_NO_FRAME]);
    add_delta(a->m.py_read_err, s[AGT_STAT_PY_READ_ERR], &l[AGT_STAT_PY_READ_ERR]);
    add_delta(a->m.py_depth, s[AGT_STAT_PY_DEPTH], &l[AGT_STAT_PY_DEPTH]);
    uint64_t lost = s[AGT_STAT_LOST_COUNTS_FULL] + s[AGT_STAT_LOST_STACKS_FULL];
    if (lost > a->lost_reported) {
        LC_LOG_WARN("agent: samples lost, BPF maps full (raise --agent.max-stacks) counts=%llu "
                    "stacks=%llu",
                    (unsigned long long)s[AGT_STAT_LOST_COUNTS_FULL],
                    (unsigned long long)s[AGT_STAT_LOST_STACKS_FULL]);
        a->lost_reported = lost;
    }
}

static void update_elf_metrics(agt_t *a)
{
    agt_elfcache_stats_t now;
    agt_elfcache_stats(a->elfs, &now);
    add_delta(a->m.elf_hit, now.hits, &a->last_elf.hits);
    add_delta(a->m.elf_miss, now.misses, &a->last_elf.misses);
    add_delta(a->m.elf_error, now.failures, &a->last_elf.failures);
    lc_metric_set(a->m.procs_tracked, (double)agt_procs_count(&a->procs));
}

static void update_unwind_metrics(agt_t *a)
{
    if (!a->unwind)
        return;
    agt_unwind_stats_t now;
    agt_unwind_stats(a->unwind, &now);
    size_t procs = 0;
    for (size_t i = 0; i < a->procs.by_pid.cap; i++) {
        if (a->procs.by_pid.keys[i])
            procs += ((agt_proc_t *)(uintptr_t)a->procs.by_pid.vals[i])->unwind_set;
    }
    lc_metric_set(a->m.unw_rows, (double)now.rows_used);
    lc_metric_set(a->m.unw_rows_cap, (double)now.rows_capacity);
    lc_metric_set(a->m.unw_bytes, (double)(now.rows_capacity * sizeof(struct agt_unwind_row) +
                                           procs * sizeof(struct agt_unwind_proc)));
    lc_metric_set(a->m.unw_objects, (double)now.objects);
    lc_metric_set(a->m.unw_procs, (double)procs);
    add_delta(a->m.unw_loaded, now.objects_loaded_total, &a->last_unw.objects_loaded_total);
    add_delta(a->m.unw_full, now.objects_full, &a->last_unw.objects_full);
}

static void update_python_metrics(agt_t *a)
{
    agt_python_stats_t now;
    agt_python_stats(a->python, &now);
    lc_metric_set(a->m.py_procs, (double)now.procs);
    lc_metric_set(a->m.py_codes, (double)now.codes);
    lc_metric_set(a->m.py_code_bytes, (double)now.code_bytes);
    add_delta(a->m.py_recognised, now.recognised_total, &a->last_py.recognised_total);
    add_delta(a->m.py_unsupported, now.unsupported_total, &a->last_py.unsupported_total);
    add_delta(a->m.py_failed, now.failed_total, &a->last_py.failed_total);
    add_delta(a->m.py_code_err, now.code_reads_failed, &a->last_py.code_reads_failed);
    add_delta(a->m.py_cache_full, now.cache_full_total, &a->last_py.cache_full_total);
    add_delta(a->m.py_code_replaced, now.code_replaced_total, &a->last_py.code_replaced_total);
    for (int i = 0; i < AGT_PY_N_MINORS; i++)
        add_delta(a->m.py_by_minor[i], now.recognised_by_minor[i],
                  &a->last_py.recognised_by_minor[i]);
    add_delta(a->m.jvm_ok, a->jvm.requests_ok, &a->last_jvm.requests_ok);
    add_delta(a->m.jvm_failed, a->jvm.requests_failed, &a->last_jvm.requests_failed);
}

/* ---------------------------------------------------------------- worker: unwind tables */

static void on_proc_maps(void *data, agt_proc_t *p)
{
    agt_t *a = data;
    p->unwind_pending = false;
    /* Python first: its entry is one small map write, the unwind tables of a
     * new process' objects can take the job seconds on a busy machine, and
     * the Python walk needs none of them (its frames go on top of whatever
     * native stack there is) */
    agt_python_on_maps(a->python, p);
    if (a->unwind && agt_unwind_set_proc(a->unwind, p) != 0)
        LC_LOG_DEBUG("agent: no unwind entry (map full) pid=%u", p->pid);
    p->jvm = agt_jvm_maps_jvm(p);
}

static void on_proc_forget(void *data, agt_proc_t *p)
{
    agt_t *a = data;
    if (a->unwind)
        agt_unwind_forget_proc(a->unwind, p);
    agt_python_forget(a->python, p);
}

static void on_elf_release(void *data, agt_elf_t *e)
{
    agt_t *a = data;
    if (a->unwind)
        agt_unwind_release_object(a->unwind, e);
}

/* The unwinder met code outside p's known mappings (dlopen, a new mmap):
 * re-read them, at most once per interval per process (the BPF side asks
 * once until its entry is rewritten; the rest waits for the next drain). */
static void unwind_refresh(agt_t *a, agt_proc_t *p)
{
    if (p->unwind_refreshed_round == a->round + 1) {
        p->unwind_pending = true;
        return;
    }
    p->unwind_refreshed_round = a->round + 1;
    if (agt_proc_refresh_maps(&a->procs, p) != 0)
        p->unwind_pending = false; /* gone */
}

static void unwind_refresh_pending(agt_t *a)
{
    for (size_t i = 0; i < a->procs.by_pid.cap; i++) {
        agt_proc_t *p =
            a->procs.by_pid.keys[i] ? (agt_proc_t *)(uintptr_t)a->procs.by_pid.vals[i] : NULL;
        if (p && p->unwind_pending)
            unwind_refresh(a, p);
    }
}

/* JVMs with samples this interval: a fresh perf map when one is due. */
static void jvm_refresh_sampled(agt_t *a)
{
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    for (size_t i = 0; i < a->procs.by_pid.cap; i++) {
        agt_proc_t *p =
            a->procs.by_pid.keys[i] ? (agt_proc_t *)(uintptr_t)a->procs.by_pid.vals[i] : NULL;
        if (p && p->jvm && !p->excluded && p->last_sample_round == a->round)
            agt_jvm_refresh(a->procfs, p, now, &a->jvm);
    }
}

/* ---------------------------------------------------------------- worker: processes */

/* Reads /proc/PID, labels the process and applies the filter. */
static void classify(agt_t *a, agt_proc_t *p)
{
    if (agt_proc_snapshot(&a->procs, p) != 0 && !p->comm[0]) {
        struct agt_proc bp; /* gone already: the comm BPF saw is all there is */
        if (agt_sampler_proc(a->sampler, p->pid, &bp) == 0) {
            memcpy(p->comm, bp.comm, AGT_COMM_LEN);
            p->comm[AGT_COMM_LEN] = '\0';
        }
    }
    agt_proc_labels(&a->opts, a->kube, p);
    /* An undecided regex (< 0) keeps the process: profiling too much beats a gap. */
    p->excluded = a->filter.n && lc_selector_match(&a->filter, &p->labels) == 0;
    if (p->excluded && agt_sampler_skip(a->sampler, p->pid, p->start_ns) != 0)
        LC_LOG_WARN("agent: cannot mark a filtered process pid=%u", p->pid);
}

/* The process exec'd: agt_on_exec has dropped its BPF entries (unwinder,
 * interpreter), so what user space made them from goes too, and the new
 * image is read as a new process' would be. Kept, the Python state would
 * stand for an entry that is gone: a Popen child recognised before its exec
 * as its parent's non-PIE python3.11, exec'ing that same binary, maps the
 * same _PyRuntime address again, and was never walked. */
static void forget_image(agt_t *a, agt_proc_t *p)
{
    on_proc_forget(a, p);
    p->needs_snapshot = true;
}

static void job_take_events(agt_t *a, agt_job_t *j)
{
    for (size_t i = 0; i < j->n_events; i++) {
        const struct agt_event *ev = &j->events[i];
        agt_proc_t *known = agt_procs_get(&a->procs, ev->tgid);
        if (ev->kind == AGT_EVENT_MAPS) {
            if (known && known->start_ns == ev->start_ns && !known->needs_snapshot)
                unwind_refresh(a, known);
            continue;
        }
        if (ev->kind == AGT_EVENT_PYCODE) {
            if (known && known->start_ns == ev->start_ns)
                agt_python_prefetch(a->python, known, ev->addr);
            continue;
        }
        bool fresh = !known || known->start_ns != ev->start_ns;
        agt_proc_t *p = agt_procs_upsert(&a->procs, ev->tgid, ev->start_ns, a->round);
        if (fresh)
            lc_metric_add(a->m.procs_seen, 1);
        if (ev->kind == AGT_EVENT_EXEC)
            forget_image(a, p);
        if (p->needs_snapshot)
            classify(a, p);
    }
}

/* Every process with samples in d gets an entry (snapshotted if it can be). */
static void job_ensure_procs(agt_t *a, const agt_drained_t *d, uint64_t *filtered)
{
    for (size_t i = 0; i < d->n; i++) {
        uint32_t tgid = d->keys[i].tgid;
        agt_proc_t *p = agt_procs_get(&a->procs, tgid);
        if (!p) { /* its event was lost, or it was evicted while idle */
            struct agt_proc bp = {0};
            if (agt_sampler_proc(a->sampler, tgid, &bp) != 0)
                memset(&bp, 0, sizeof(bp)); /* evicted from the LRU too: a pid is all we have */
            p = agt_procs_upsert(&a->procs, tgid, bp.start_ns, a->round);
            memcpy(p->comm, bp.comm, AGT_COMM_LEN);
            lc_metric_add(a->m.procs_seen, 1);
        }
        if (p->needs_snapshot)
            classify(a, p);
        p->last_sample_round = a->round;
        if (p->excluded)
            *filtered += d->counts[i];
    }
}

static agt_kallsyms_t *job_kallsyms(agt_t *a)
{
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    if (a->kallsyms.n && now - a->kallsyms.loaded_ns < KALLSYMS_TTL_NS)
        return &a->kallsyms;
    agt_kallsyms_t fresh; /* modules and BPF programs come and go: reload now and then */
    int rc = agt_kallsyms_load("/proc/kallsyms", &fresh);
    if (rc == 0) {
        agt_kallsyms_fini(&a->kallsyms);
        a->kallsyms = fresh;
    } else if (!a->kallsyms.n) {
        LC_LOG_WARN("agent: no kernel symbols (kernel frames stay [unknown]) err=\"%s\"",
                    lc_strerror(rc));
        a->kallsyms.loaded_ns = now; /* do not retry on every interval */
    }
    return &a->kallsyms;
}

/* ---------------------------------------------------------------- worker: draining */

static void job_drain(agt_t *a, agt_job_t *j)
{
    int64_t t0 = clock_ns(CLOCK_MONOTONIC);
    agt_drained_t d;
    if (agt_sampler_drain(a->sampler, j->buffer, &d) != 0) {
        agt_drained_fini(&d);
        return;
    }
    if (a->unwind)
        agt_unwind_quiesced(a->unwind); /* the drain waited for an RCU grace period */
    a->round++;
    unwind_refresh_pending(a);
    uint64_t filtered = 0;
    job_ensure_procs(a, &d, &filtered);
    lc_metric_add(a->m.skip_filtered, (double)filtered);
    jvm_refresh_sampled(a);
    agt_build_ctx_t ctx = {
        .opts = &a->opts,
        .procs = &a->procs,
        .kallsyms = job_kallsyms(a),
        .kube = a->kube,
        .python = a->python,
        .period_ns = a->period_ns,
        .time_ns = j->start_ns,
        .duration_ns = j->end_ns - j->start_ns,
        .lean = lc_transport_wants_lean(a->tr),
    };
    if (agt_build_profiles(&ctx, &d, &j->msgs) != 0)
        LC_LOG_ERROR("agent: profiles of this interval are incomplete round=%llu",
                     (unsigned long long)a->round);
    lc_metric_add(a->m.sym_hit, (double)ctx.sym.hits);
    lc_metric_add(a->m.sym_miss, (double)ctx.sym.misses);
    agt_drained_fini(&d);
    agt_procs_evict(&a->procs, a->round, IDLE_ROUNDS);
    agt_elfcache_trim(a->elfs, a->round);
    update_stat_metrics(a);
    update_elf_metrics(a);
    update_unwind_metrics(a);
    update_python_metrics(a);
    lc_metric_add(a->m.intervals, 1);
    lc_metric_observe(a->m.drain_seconds, (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9);
}

static void job_run(uv_work_t *w)
{
    agt_t *a = LC_CONTAINER_OF(w, agt_t, work);
    agt_job_t *j = a->job;
    int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    job_take_events(a, j);
    int64_t cpu1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    lc_metric_add(a->m.cpu_procs, (double)(cpu1 - cpu0) / 1e9);
    if (j->drain) {
        job_drain(a, j);
        lc_metric_add(a->m.cpu_profiles, (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu1) / 1e9);
    }
}

/* ---------------------------------------------------------------- loop: publishing */

static void agt_maybe_finish_close(agt_t *a);

static void on_published(int status, void *data)
{
    agt_pub_t *pub = data;
    agt_t *a = pub->a;
    if (status == 0) {
        lc_metric_add(a->m.published, 1);
        lc_metric_add(a->m.samples_published, (double)pub->samples);
    } else {
        lc_metric_add(a->m.failed, 1);
        LC_LOG_WARN("agent: profile not published err=\"%s\"", lc_strerror(status));
    }
    lc_free(pub);
    a->publishing--;
    agt_maybe_finish_close(a);
}

static void publish_all(agt_t *a, agt_msgs_t *msgs)
{
    a->in_publish_all = true;
    for (size_t i = 0; i < msgs->n; i++) {
        const agt_msg_t *m = &msgs->v[i];
        agt_pub_t *pub = lc_xmalloc(sizeof(*pub));
        *pub = (agt_pub_t){a, m->samples};
        a->publishing++;
        int rc = lc_transport_publish(a->tr, m->data, m->len, m->partition, m->ingest_id,
                                      sizeof(m->ingest_id), on_published, pub);
        if (rc != 0) {
            a->publishing--;
            lc_free(pub);
            lc_metric_add(a->m.failed, 1);
            LC_LOG_WARN("agent: profile not published err=\"%s\"", lc_strerror(rc));
        }
    }
    a->in_publish_all = false;
}

static void job_after(uv_work_t *w, int status)
{
    agt_t *a = LC_CONTAINER_OF(w, agt_t, work);
    agt_job_t *j = a->job;
    a->job = NULL;
    if (status == 0 && (!a->closing || a->flush))
        publish_all(a, &j->msgs);
    agt_msgs_fini(&j->msgs);
    lc_free(j->events);
    lc_free(j);
    agt_kick(a);
}

/* ---------------------------------------------------------------- loop: scheduling */

static void agt_swap(agt_t *a)
{
    int64_t now = lc_realtime_ns();
    a->drain_buffer = agt_sampler_swap(a->sampler);
    a->drain_wanted = true;
    a->drain_start_ns = a->window_start_ns;
    a->drain_end_ns = now;
    a->window_start_ns = now;
}

static void agt_kick(agt_t *a)
{
    if (a->job)
        return;
    if (a->final_swap_wanted && !a->drain_wanted) {
        a->final_swap_wanted = false;
        agt_swap(a);
    }
    if (!a->n_events && !a->drain_wanted) {
        agt_maybe_finish_close(a);
        return;
    }
    agt_job_t *j = lc_xcalloc(1, sizeof(*j));
    j->events = a->events;
    j->n_events = a->n_events;
    a->events = NULL;
    a->n_events = a->cap_events = 0;
    if (a->drain_wanted) {
        j->drain = true;
        j->buffer = a->drain_buffer;
        j->start_ns = a->drain_start_ns;
        j->end_ns = a->drain_end_ns;
        a->drain_wanted = false;
    }
    a->job = j;
    int rc = uv_queue_work(a->loop, &a->work, job_run, job_after);
    if (rc != 0) { /* only fails for a bad argument: a bug, not a state to recover */
        LC_LOG_ERROR("agent: cannot queue work err=\"%s\"", lc_strerror(rc));
        LC_ASSERT(rc == 0);
    }
}

static void on_tick(uv_timer_t *t)
{
    agt_t *a = LC_CONTAINER_OF(t, agt_t, timer);
    if (a->closing)
        return;
    if (a->drain_wanted || (a->job && a->job->drain)) {
        lc_metric_add(a->m.overruns, 1);
        return;
    }
    agt_swap(a);
    agt_kick(a);
}

static void on_event(const struct agt_event *ev, void *data)
{
    agt_t *a = data;
    if (a->n_events >= EVENTS_MAX) { /* the drain snapshots such processes on demand */
        lc_metric_add(a->m.events_lost, 1);
        return;
    }
    a->events = lc_xgrow(a->events, &a->cap_events, a->n_events + 1, sizeof(*a->events));
    a->events[a->n_events++] = *ev;
}

static void on_events_readable(uv_poll_t *h, int status, int events)
{
    agt_t *a = h->data;
    LC_UNUSED(events);
    if (status < 0 || a->closing)
        return;
    if (agt_sampler_consume_events(a->sampler) != 0)
        LC_LOG_WARN("agent: reading BPF events failed");
    agt_kick(a);
}

/* ---------------------------------------------------------------- lifecycle */

static void agt_destroy(agt_t *a)
{
    a->procs.on_maps = a->procs.on_forget = NULL; /* the BPF maps go first */
    if (a->elfs)
        agt_elfcache_set_release(a->elfs, NULL, NULL);
    agt_unwind_free(a->unwind);
    agt_sampler_free(a->sampler);
    agt_procs_fini(&a->procs);
    agt_python_free(a->python);
    agt_elfcache_free(a->elfs);
    agt_kallsyms_fini(&a->kallsyms);
    agt_kube_free(a->kube);
    lc_selector_fini(&a->filter);
    lc_free(a->events);
    lc_free(a->node);
    lc_free(a->tenant);
    lc_free(a->filter_text);
    lc_free(a->kube_api);
    lc_free(a->procfs);
    lc_free(a);
}

static void agt_finish(agt_t *a)
{
    void (*cb)(void *) = a->close_cb;
    void *data = a->close_data;
    agt_destroy(a);
    if (cb)
        cb(data);
}

static void on_handle_closed(uv_handle_t *h)
{
    agt_t *a = h->data;
    if (--a->open_handles == 0)
        agt_finish(a);
}

static void agt_maybe_finish_close(agt_t *a)
{
    if (!a->closing || a->handles_closing || a->job || a->drain_wanted || a->final_swap_wanted ||
        a->publishing || a->in_publish_all)
        return;
    a->handles_closing = true;
    /* The final tally: with nothing lost, recorded == published (tests use it). */
    LC_LOG_INFO("agent: stopped samples_recorded=%.0f samples_published=%.0f samples_lost=%.0f "
                "profiles_published=%.0f profiles_failed=%.0f",
                lc_metric_value(a->m.samples), lc_metric_value(a->m.samples_published),
                lc_metric_value(a->m.lost_counts) + lc_metric_value(a->m.lost_stacks),
                lc_metric_value(a->m.published), lc_metric_value(a->m.failed));
    if (a->timer_open)
        uv_close((uv_handle_t *)&a->timer, on_handle_closed);
    if (a->poll_open)
        uv_close((uv_handle_t *)&a->poll, on_handle_closed);
    if (!a->open_handles) /* start-up failed before the handles existed */
        agt_finish(a);
}

void agt_close(agt_t *a, bool flush, void (*cb)(void *data), void *data)
{
    if (!a || a->closing)
        return;
    a->closing = true;
    a->flush = flush;
    a->close_cb = cb;
    a->close_data = data;
    if (a->timer_open)
        uv_timer_stop(&a->timer);
    if (a->poll_open)
        uv_poll_stop(&a->poll);
    if (a->sampler)
        agt_sampler_stop(a->sampler); /* no samples after this: the last drain gets them all */
    if (flush && a->sampler)
        a->final_swap_wanted = true;
    else
        a->drain_wanted = false;
    a->n_events = 0;
    agt_kick(a);
}

static char *dup_or(const char *s, const char *fallback)
{
    return lc_xstrdup(s && *s ? s : fallback);
}

static void resolve_node(agt_t *a, const char *node)
{
    char host[256] = "";
    const char *env = getenv("NODE_NAME");
    if (!(node && *node) && !(env && *env) && gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    a->node = dup_or(node && *node ? node : env && *env ? env : host, "unknown");
}

static int copy_opts(agt_t *a, const agt_opts_t *o)
{
    a->opts = *o;
    resolve_node(a, o->node);
    a->tenant = dup_or(o->tenant, "anonymous");
    a->filter_text = dup_or(o->filter, "");
    a->kube_api = dup_or(o->kubernetes_api, "");
    a->procfs = dup_or(o->procfs, "/proc");
    a->opts.node = a->node;
    a->opts.tenant = a->tenant;
    a->opts.filter = a->filter_text;
    a->opts.kubernetes_api = a->kube_api;
    a->opts.procfs = a->procfs;
    if (!a->opts.partitions)
        a->opts.partitions = 1;
    if (o->sample_rate_hz < EMBER_AGENT_MIN_RATE_HZ ||
        o->sample_rate_hz > EMBER_AGENT_MAX_RATE_HZ ||
        o->interval_ns < EMBER_AGENT_MIN_INTERVAL_NS) {
        LC_LOG_ERROR("agent: sample rate must be %d..%d Hz and the interval at least 1s",
                     EMBER_AGENT_MIN_RATE_HZ, EMBER_AGENT_MAX_RATE_HZ);
        return LC_EINPUT;
    }
    lc_status_t st = {0};
    if (lc_selector_parse(a->filter_text, strlen(a->filter_text), &a->filter, &st) != 0) {
        LC_LOG_ERROR("agent: bad filter selector filter=\"%s\" err=\"%s\"", a->filter_text, st.msg);
        return LC_EINPUT;
    }
    a->period_ns = 1000000000LL / o->sample_rate_hz;
    return 0;
}

/* Map sizes: room for every sample of two intervals in distinct stacks (a
 * sample has at most two), and of eight in counts, within sane bounds. A
 * swap is skipped while the previous drain runs, so a slow drain (a first
 * symbolization on a busy host) leaves one buffer taking samples for several
 * intervals: on a loaded 2-core CI box under sanitizers counts sized for two
 * intervals lost 823 of 4,312 samples in 8 s. A counts entry is 40 bytes
 * where a stack is ~1 KiB, and no stack was lost. */
static void size_maps(const agt_opts_t *o, agt_sampler_opts_t *so)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double seconds = (double)o->interval_ns / 1e9;
    double per_interval = (double)(cpus > 0 ? cpus : 1) * o->sample_rate_hz * seconds;
    size_t want = (size_t)(2 * per_interval), counts = 4 * want;
    so->counts_capacity = counts < 8192 ? 8192 : counts > (1u << 20) ? (1u << 20) : counts;
    size_t stacks = want < 4096 ? 4096 : want > 65536 ? 65536 : want;
    so->stacks_capacity = o->max_stacks ? o->max_stacks : stacks;
    so->procs_capacity = PROCS_CAPACITY;
    so->unwind_rows_capacity = UNWIND_ROWS;
    so->unwind_procs_capacity = UNWIND_PROCS;
}

static void start_unwinder(agt_t *a)
{
    int rows_fd, procs_fd;
    uint32_t rows_cap;
    agt_sampler_unwind_maps(a->sampler, &rows_fd, &rows_cap, &procs_fd);
    /* The process hooks serve the Python reader too, tables or not. */
    a->python = agt_python_new(agt_sampler_py_procs_fd(a->sampler), a->procfs);
    a->procs.on_maps = on_proc_maps;
    a->procs.on_forget = on_proc_forget;
    a->procs.hook_data = a;
    int rc = agt_unwind_new(rows_fd, rows_cap, procs_fd, &a->unwind);
    if (rc) { /* degraded, not fatal */
        LC_LOG_WARN("agent: no unwind tables, frame pointers only err=\"%s\"", lc_strerror(rc));
        return;
    }
    agt_elfcache_set_release(a->elfs, on_elf_release, a);
}

static void start_kube(agt_t *a)
{
    if (strcmp(a->kube_api, "off") == 0)
        return;
    int rc = agt_kube_new(a->kube_api[0] ? a->kube_api : NULL, a->node, &a->kube);
    if (rc == 0)
        LC_LOG_INFO("agent: Kubernetes metadata on node=%s", a->node);
    else if (a->kube_api[0])
        LC_LOG_WARN("agent: Kubernetes API unusable api=%s err=\"%s\"", a->kube_api,
                    lc_strerror(rc));
}

static int start_loop_side(agt_t *a)
{
    uv_timer_init(a->loop, &a->timer);
    a->timer.data = a;
    a->timer_open = true;
    a->open_handles++;
    int rc = uv_poll_init(a->loop, &a->poll, agt_sampler_events_fd(a->sampler));
    if (rc)
        return rc;
    a->poll.data = a;
    a->poll_open = true;
    a->open_handles++;
    uint64_t ms = (uint64_t)(a->opts.interval_ns / 1000000);
    rc = uv_timer_start(&a->timer, on_tick, ms, ms);
    return rc ? rc : uv_poll_start(&a->poll, UV_READABLE, on_events_readable);
}

int agt_new(uv_loop_t *loop, const agt_opts_t *opts, lc_transport_t *tr, lc_metrics_t *metrics,
            agt_t **out)
{
    agt_t *a = lc_xcalloc(1, sizeof(*a));
    a->loop = loop;
    a->tr = tr;
    *out = NULL;
    int rc = copy_opts(a, opts);
    if (rc) {
        agt_destroy(a);
        return rc;
    }
    register_metrics(a, metrics);
    a->elfs = agt_elfcache_new(ELF_CACHE_UNUSED);
    agt_procs_init(&a->procs, a->procfs, a->elfs);
    agt_sampler_opts_t so = {
        .sample_rate_hz = opts->sample_rate_hz, .on_event = on_event, .event_data = a};
    size_maps(&a->opts, &so);
    rc = agt_sampler_open(&so, &a->sampler);
    if (!rc) {
        lc_metric_set(a->m.cpus, agt_sampler_n_cpus(a->sampler));
        start_unwinder(a);
        start_kube(a);
        a->window_start_ns = lc_realtime_ns();
        rc = start_loop_side(a);
    }
    if (rc) {
        LC_LOG_ERROR("agent: cannot start err=\"%s\"", lc_strerror(rc));
        if (a->open_handles) { /* handles must close on the loop before the memory goes */
            agt_close(a, false, NULL, NULL);
            return rc;
        }
        agt_destroy(a);
        return rc;
    }
    LC_LOG_INFO("agent: profiling rate_hz=%d interval_ms=%lld group_by=%s node=%s filter=\"%s\"",
                opts->sample_rate_hz, (long long)(opts->interval_ns / 1000000),
                opts->group_by == AGT_GROUP_CONTAINER ? "container" : "process", a->node,
                a->filter_text);
    *out = a;
    return 0;
}
