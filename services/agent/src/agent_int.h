/*
 * agent_int.h — the agent's modules, in data-flow order:
 *
 *   sampler.c    BPF skeleton: load, attach per CPU, swap, drain, stats
 *   u64map.c     small open-addressing map used everywhere below
 *   kallsyms.c   kernel symbols from /proc/kallsyms
 *   cfi.c        unwind rows from an object's .eh_frame / .debug_frame
 *   elf.c        one ELF object: build id, load segments, function symbols, unwind rows
 *   elfcache.c   ELF objects shared across processes, by (dev, inode) and build id
 *   perfmap.c    JIT symbols from /tmp/perf-PID.map
 *   procs.c      the process table: /proc/PID snapshots (maps, comm, exe, cgroup)
 *   unwind.c     unwind rows and per-process mappings in the BPF maps
 *   container.c  cgroup path -> container id, service name
 *   kube.c       container id -> Kubernetes namespace/pod/container (API server)
 *   profiles.c   drained counts -> symbolized pprof per process/container
 *   agent.c      lifecycle, loop side (timer, events, jobs, publishing)
 *
 * Everything except sampler swap/event calls and agent.c's loop side runs in
 * the agent's job on the thread pool, one job at a time (agent.h).
 */
#ifndef EMBER_AGENT_INT_H
#define EMBER_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "lc/alloc.h"
#include "lc/hash.h"
#include "lc/labels.h"
#include "sampler.h"

/* ---------------------------------------------------------------- u64map */

/* Key 0 is reserved (empty slot); callers never insert it. */
typedef struct agt_u64map_s {
    uint64_t *keys;
    uint64_t *vals;
    size_t cap; /* power of two, or 0 */
    size_t n;
} agt_u64map_t;

void agt_u64map_init(agt_u64map_t *m);
void agt_u64map_fini(agt_u64map_t *m);
void agt_u64map_clear(agt_u64map_t *m);
/* The value slot of key, or NULL. Valid until the next put/del. */
uint64_t *agt_u64map_get(const agt_u64map_t *m, uint64_t key);
/* The value slot of key, inserted as 0 if absent (*added tells). */
uint64_t *agt_u64map_put(agt_u64map_t *m, uint64_t key, bool *added);
bool agt_u64map_del(agt_u64map_t *m, uint64_t key);

/* ---------------------------------------------------------------- sampler */

typedef struct agt_sampler_s agt_sampler_t;

typedef void (*agt_event_cb)(const struct agt_event *ev, void *data);

typedef struct agt_sampler_opts_s {
    int sample_rate_hz;
    size_t counts_capacity; /* entries per counts buffer */
    size_t stacks_capacity; /* entries per stacks buffer */
    size_t procs_capacity;
    size_t unwind_rows_capacity;  /* unwind rows of all loaded objects */
    size_t unwind_procs_capacity; /* processes with unwind entries */
    agt_event_cb on_event;        /* loop thread, from agt_sampler_consume_events */
    void *event_data;
} agt_sampler_opts_t;

/* One drained buffer. Stack frames are leaf first. */
typedef struct agt_drained_s {
    struct agt_count_key *keys;
    uint64_t *counts;
    size_t n;
    agt_u64map_t stacks; /* stack hash -> (offset << 8 | n_frames) into frames */
    uint64_t *frames;
    size_t n_frames, cap_frames;
} agt_drained_t;

/* Loads the program with the given map sizes and attaches it to a CPU-clock
 * perf event (period 1e9/rate ns) on every online CPU. Logs what failed. */
int agt_sampler_open(const agt_sampler_opts_t *opts, agt_sampler_t **out) LC_MUST_CHECK;
void agt_sampler_free(agt_sampler_t *s);
/* Detaches the perf events: no new samples after this returns. */
void agt_sampler_stop(agt_sampler_t *s);
int agt_sampler_n_cpus(const agt_sampler_t *s);
/* An fd that turns readable when events are waiting (for uv_poll). */
int agt_sampler_events_fd(const agt_sampler_t *s);
/* Runs opts.on_event for each waiting event. */
int agt_sampler_consume_events(agt_sampler_t *s);
/* Points new samples at the other buffer; returns the one to drain. */
uint32_t agt_sampler_swap(agt_sampler_t *s);
/* Waits until no program still writes `buffer`, then moves its contents into
 * out (initialised by the call; agt_drained_fini) and empties it. */
int agt_sampler_drain(agt_sampler_t *s, uint32_t buffer, agt_drained_t *out) LC_MUST_CHECK;
void agt_drained_fini(agt_drained_t *d);
/* Frames of a drained stack (NULL/0 for hash 0 or an unknown hash). */
const uint64_t *agt_drained_stack(const agt_drained_t *d, uint64_t hash, size_t *n);
/* Sums the per-CPU statistics (cumulative since load). */
int agt_sampler_stats(agt_sampler_t *s, uint64_t out[AGT_STAT_N]) LC_MUST_CHECK;
/* The BPF view of a process (comm when first sampled); LC_ENOTFOUND if none. */
int agt_sampler_proc(agt_sampler_t *s, uint32_t tgid, struct agt_proc *out) LC_MUST_CHECK;
/* Makes the program drop this process incarnation's samples. */
int agt_sampler_skip(agt_sampler_t *s, uint32_t tgid, uint64_t start_ns) LC_MUST_CHECK;
/* Waits until every program that may have seen the old buffer index returned. */
void agt_sampler_quiesce(void);
/* The unwinder's maps (unwind.c writes them). */
void agt_sampler_unwind_maps(const agt_sampler_t *s, int *rows_fd, uint32_t *rows_cap,
                             int *procs_fd);

/* The map of recognised CPython processes (python.c writes it). */
int agt_sampler_py_procs_fd(const agt_sampler_t *s);

/* ---------------------------------------------------------------- kallsyms */

typedef struct agt_kallsyms_s {
    uint64_t *addrs; /* sorted */
    uint32_t *names; /* offsets into text */
    char *text;
    size_t n;
    int64_t loaded_ns; /* CLOCK_MONOTONIC */
} agt_kallsyms_t;

/* Parses text symbols (t/T) of a kallsyms file. LC_EUNSUPPORTED when every
 * address reads 0 (kptr_restrict hides them from us). */
int agt_kallsyms_load(const char *path, agt_kallsyms_t *ks) LC_MUST_CHECK;
void agt_kallsyms_fini(agt_kallsyms_t *ks);
/* The function containing addr, or NULL. */
const char *agt_kallsyms_lookup(const agt_kallsyms_t *ks, uint64_t addr);

/* ---------------------------------------------------------------- cfi */

typedef struct agt_cfi_section_s {
    const uint8_t *data;
    size_t len;
    uint64_t vaddr; /* the section's address (pc-relative pointers) */
} agt_cfi_section_t;

/* Sorted by pc, compacted (no row repeats its predecessor's rule). */
typedef struct agt_cfi_rows_s {
    struct agt_unwind_row *v;
    size_t n, cap;
    uint32_t *seq; /* build order (only while building) */
    size_t cap_seq;
    bool truncated; /* more rows than the BPF search covers: the table is unusable */
} agt_cfi_rows_t;

/* Builds the rows of .eh_frame and .debug_frame (either may be NULL; FDEs of
 * .debug_frame for code .eh_frame covers are ignored). Malformed entries are
 * skipped; addresses beyond 4 GiB are left out. */
void agt_cfi_build(const agt_cfi_section_t *eh, const agt_cfi_section_t *debug,
                   agt_cfi_rows_t *out);
void agt_cfi_rows_fini(agt_cfi_rows_t *o);
/* The row ruling pc, or NULL before the first row. */
const struct agt_unwind_row *agt_cfi_lookup(const agt_cfi_rows_t *o, uint64_t pc);

/* ---------------------------------------------------------------- elf */

typedef struct agt_elf_seg_s {
    uint64_t offset, vaddr, filesz;
} agt_elf_seg_t;

/* Where an object keeps CPython's landmarks (ELF vaddrs; 0 = absent). */
typedef struct agt_elf_python_s {
    uint64_t runtime;         /* _PyRuntime */
    uint64_t version;         /* Py_Version (3.11+): PY_VERSION_HEX */
    uint64_t code_type;       /* PyCode_Type: what a code object's ob_type points at */
    uint64_t eval, eval_size; /* _PyEval_EvalFrameDefault */
} agt_elf_python_t;

typedef struct agt_elf_s {
    uint64_t dev, inode; /* cache key (0, 0 for the vDSO) */
    char build_id[65];   /* lower-case hex, "" if none */
    char *path;          /* as first seen (mapping filename) */
    agt_elf_seg_t *segs; /* PT_LOAD segments */
    size_t n_segs;
    uint64_t *sym_addrs; /* function start addresses, sorted */
    uint32_t *sym_sizes; /* 0 = unknown size */
    uint32_t *sym_names; /* offsets into names */
    char *names;
    size_t n_syms;
    bool has_symtab;      /* symbols came from a .symtab (else .dynsym or none) */
    agt_elf_python_t py;  /* set when the object is a CPython interpreter */
    const char *basename; /* into path */
    int refs;             /* mappings pointing here (elfcache) */
    uint64_t last_used_round;
    agt_cfi_rows_t cfi; /* unwind rows (empty without .eh_frame/.debug_frame) */
    uint32_t unw_start; /* extent in the BPF rows map, when unw_loaded */
    bool unw_loaded;
    bool unw_full_counted;
} agt_elf_t;

/* Reads build id, segments and function symbols (.symtab, else .dynsym) of
 * the ELF file open on fd (or the image in memory when fd < 0). A file with
 * neither table loads with n_syms = 0. LC_EINPUT if it is not ELF. */
int agt_elf_load(int fd, const void *image, size_t image_len, agt_elf_t *e) LC_MUST_CHECK;
/* Adds the symbols of a separate debug file (same layout) when e has none. */
int agt_elf_load_debug_symbols(int fd, agt_elf_t *e) LC_MUST_CHECK;
void agt_elf_fini(agt_elf_t *e);
/* Maps a file offset to the virtual address the symbols use. */
bool agt_elf_offset_to_vaddr(const agt_elf_t *e, uint64_t file_offset, uint64_t *vaddr);
/* The function containing vaddr, or NULL. */
const char *agt_elf_symbol(const agt_elf_t *e, uint64_t vaddr);
/* Only the build id (hex into out[65]); "" when there is none. */
int agt_elf_read_build_id(int fd, char out[65]) LC_MUST_CHECK;

/* ---------------------------------------------------------------- elfcache */

typedef struct agt_elfcache_s agt_elfcache_t;

typedef struct agt_elfcache_stats_s {
    uint64_t hits, misses, failures;
} agt_elfcache_stats_t;

agt_elfcache_t *agt_elfcache_new(size_t max_unused);
void agt_elfcache_free(agt_elfcache_t *c);
/* The object for a mapped file (dev, inode), opening `open_path` (a
 * /proc/PID/map_files or /proc/PID/root path) only on a miss; the build id
 * then finds an object loaded through another path. Takes a reference.
 * NULL when the file cannot be read. `path` names it in profiles. */
agt_elf_t *agt_elfcache_get(agt_elfcache_t *c, uint64_t dev, uint64_t inode, const char *open_path,
                            const char *alt_open_path, const char *path);
/* The vDSO, parsed from this process' own image (the kernel's, shared). */
agt_elf_t *agt_elfcache_vdso(agt_elfcache_t *c);
void agt_elfcache_unref(agt_elfcache_t *c, agt_elf_t *e);
/* Calls release(data, e) for every object no mapping references (before
 * trimming), and for every object freed. */
void agt_elfcache_set_release(agt_elfcache_t *c, void (*release)(void *data, agt_elf_t *e),
                              void *data);
/* Frees unreferenced objects beyond max_unused, oldest first. */
void agt_elfcache_trim(agt_elfcache_t *c, uint64_t round);
void agt_elfcache_stats(const agt_elfcache_t *c, agt_elfcache_stats_t *out);
size_t agt_elfcache_size(const agt_elfcache_t *c);

/* ---------------------------------------------------------------- perfmap */

typedef struct agt_perfmap_s {
    uint64_t *starts; /* sorted */
    uint64_t *sizes;
    uint32_t *names;
    char *text;
    size_t n;
    off_t loaded_size; /* file size when read; -1 = no file */
} agt_perfmap_t;

#define AGT_PERFMAP_MAX_BYTES ((off_t)64 << 20)

void agt_perfmap_init(agt_perfmap_t *pm);
void agt_perfmap_fini(agt_perfmap_t *pm);
/* (Re)reads path when its size changed since the last read. */
int agt_perfmap_refresh(agt_perfmap_t *pm, const char *path) LC_MUST_CHECK;
/* Parses perf map text ("START SIZE name" per line, hex) into pm. */
int agt_perfmap_parse(agt_perfmap_t *pm, const char *text, size_t len) LC_MUST_CHECK;
const char *agt_perfmap_lookup(const agt_perfmap_t *pm, uint64_t addr);

/* ---------------------------------------------------------------- procs */

enum { AGT_MAP_FILE, AGT_MAP_ANON, AGT_MAP_VDSO };

typedef struct agt_map_s {
    uint64_t start, end, offset;
    uint64_t dev, inode; /* of the mapped file */
    agt_elf_t *elf;      /* NULL when unreadable or not a file */
    const char *path;    /* into the process' path text; "" for anonymous */
    int kind;
} agt_map_t;

typedef struct agt_proc_s {
    uint32_t pid;
    uint64_t start_ns; /* BPF identity (leader start time) */
    uint32_t nspid;    /* pid in its own namespace (perf map name) */
    char comm[AGT_COMM_LEN + 1];
    char *exe;             /* "" when unknown */
    char *cgroup;          /* "" when unknown */
    char container_id[65]; /* "" outside containers */
    agt_map_t *maps;       /* executable mappings, sorted by start */
    size_t n_maps;
    char *map_paths;
    bool snapshot_ok;     /* /proc/PID was read */
    bool needs_snapshot;  /* new or exec'd: read /proc/PID before symbolizing */
    bool maps_refreshed;  /* re-read once this round after a miss */
    bool perfmap_checked; /* perf map re-read this round */
    bool excluded;        /* filtered out */
    bool labels_ready;
    bool unwind_set;     /* has an unwind_procs entry in BPF */
    bool unwind_pending; /* the unwinder asked for the maps again */
    uint64_t unwind_refreshed_round;
    lc_labels_t labels; /* series labels (without __name__) */
    agt_perfmap_t perfmap;
    uint64_t last_sample_round;
    uint64_t created_round;
    struct agt_py_state_s *py; /* CPython state (python.c); NULL for other processes */
    bool jvm;                  /* maps libjvm.so: its perf map is asked for (jvm.c) */
    int64_t jvm_asked_ns;      /* CLOCK_MONOTONIC of the last perf map request, 0 = never */
    int64_t jvm_signalled_ns;  /* SIGQUIT sent, listener awaited since; 0 = not waiting */
} agt_proc_t;

typedef struct agt_procs_s {
    agt_u64map_t by_pid; /* pid -> agt_proc_t* */
    const char *procfs;
    agt_elfcache_t *elfs;
    /* Optional hooks: the mappings were (re)read; the entry is about to go. */
    void (*on_maps)(void *data, agt_proc_t *p);
    void (*on_forget)(void *data, agt_proc_t *p);
    void *hook_data;
} agt_procs_t;

void agt_procs_init(agt_procs_t *t, const char *procfs, agt_elfcache_t *elfs);
void agt_procs_fini(agt_procs_t *t);
agt_proc_t *agt_procs_get(agt_procs_t *t, uint32_t pid);
/* The entry for (pid, start_ns), replacing one of a recycled pid. */
agt_proc_t *agt_procs_upsert(agt_procs_t *t, uint32_t pid, uint64_t start_ns, uint64_t round);
/* Reads comm, exe, cgroup, NSpid and the executable mappings from /proc/PID.
 * Returns 0, or -errno when the process is gone (fields stay as they were). */
int agt_proc_snapshot(agt_procs_t *t, agt_proc_t *p) LC_MUST_CHECK;
/* Re-reads only the mappings (after an address fell outside all of them). */
int agt_proc_refresh_maps(agt_procs_t *t, agt_proc_t *p) LC_MUST_CHECK;
const agt_map_t *agt_proc_find_map(const agt_proc_t *p, uint64_t addr);
/* ELF vaddr = address - bias for the mapping m (file offset m->offset at
 * m->start), through the PT_LOAD segment holding that offset; m->elf set. */
bool agt_map_bias(const agt_map_t *m, uint64_t *bias);
/* Forgets processes without samples for `idle_rounds` that are gone, and any
 * without samples for 4 x idle_rounds. */
void agt_procs_evict(agt_procs_t *t, uint64_t round, uint64_t idle_rounds);
size_t agt_procs_count(const agt_procs_t *t);
/* Parses /proc/PID/maps text into p's executable mappings (no ELF lookup). */
int agt_proc_parse_maps(agt_proc_t *p, const char *text, size_t len) LC_MUST_CHECK;

/* ---------------------------------------------------------------- unwind */

typedef struct agt_unwind_s agt_unwind_t;

typedef struct agt_unwind_stats_s {
    uint64_t rows_used, rows_capacity;
    uint64_t objects;              /* objects with rows in the map now */
    uint64_t objects_loaded_total; /* loads since start */
    uint64_t objects_full;         /* objects left to frame pointers: the map was full */
    uint64_t procs_truncated;      /* processes with more than AGT_UNWIND_MAX_MAPS mappings */
    uint64_t procs_failed;         /* unwind_procs updates that failed (map full) */
} agt_unwind_stats_t;

/* Maps the rows array (rows_fd, rows_cap entries) for writing. */
int agt_unwind_new(int rows_fd, uint32_t rows_cap, int procs_fd, agt_unwind_t **out) LC_MUST_CHECK;
void agt_unwind_free(agt_unwind_t *u);
/* Loads the tables of p's objects as needed and writes p's BPF entry. */
int agt_unwind_set_proc(agt_unwind_t *u, agt_proc_t *p) LC_MUST_CHECK;
/* Deletes p's BPF entry (the program then uses frame pointers for it). */
void agt_unwind_forget_proc(agt_unwind_t *u, agt_proc_t *p);
/* e is mapped by no process: its extent is freed after the next quiescence. */
void agt_unwind_release_object(agt_unwind_t *u, agt_elf_t *e);
/* No BPF program still reads what was released before this call. */
void agt_unwind_quiesced(agt_unwind_t *u);
void agt_unwind_stats(const agt_unwind_t *u, agt_unwind_stats_t *out);

/* ---------------------------------------------------------------- python */

typedef struct agt_python_s agt_python_t;

/* One code object as the profile names it. */
typedef struct agt_py_code_s {
    char *name; /* module.co_qualname (agt_python_module, agt_python_qualified_name) */
    char *file; /* co_filename */
    int64_t first_line;
    uint8_t *linetable; /* co_linetable bytes (the version's format) */
    size_t linetable_len;
    uint64_t qualname_at, filename_at; /* the str objects it was read from (python.c) */
} agt_py_code_t;

/* The CPython minor versions read: 3.10 to 3.13. */
#define AGT_PY_FIRST_MINOR 10
#define AGT_PY_N_MINORS 4

typedef struct agt_python_stats_s {
    uint64_t procs;                                /* processes with a BPF entry now */
    uint64_t recognised_total;                     /* interpreters recognised since start */
    uint64_t recognised_by_minor[AGT_PY_N_MINORS]; /* the same by 3.(FIRST + i) */
    uint64_t cache_full_total;    /* code objects read but not cached (PY_MAX_CODE_BYTES) */
    uint64_t code_replaced_total; /* cached code objects found replaced by another at the address */
    uint64_t unsupported_total;   /* interpreters of a version without offsets: skipped */
    uint64_t failed_total;        /* recognised, but the BPF entry could not be written */
    uint64_t code_reads_failed;   /* code objects that could not be read */
    uint64_t codes, code_bytes;   /* the code object caches now (all processes) */
} agt_python_stats_t;

/* procfs: where /PID/root is (kept, not copied). */
agt_python_t *agt_python_new(int py_procs_fd, const char *procfs);
void agt_python_free(agt_python_t *py);
/* Recognises a CPython in p's mappings (once) and writes its BPF entry. */
void agt_python_on_maps(agt_python_t *py, agt_proc_t *p);
/* Deletes p's BPF entry and its cached code objects. */
void agt_python_forget(agt_python_t *py, agt_proc_t *p);
/* Frees a process' Python state (procs.c, when an entry goes). */
void agt_python_proc_free(struct agt_py_state_s *s);
/* Whether a native frame's lookup address is in the eval loop (the frames
 * it ran are spliced in its place). */
bool agt_python_is_eval(const agt_proc_t *p, uint64_t addr);
/* Whether a native frame's lookup address is in the interpreter's own code
 * (the object holding _PyRuntime): between two eval-loop frames, its call
 * glue, left out of the stack. */
bool agt_python_in_interpreter(const agt_proc_t *p, uint64_t addr);
/* The code object of a Python frame word (sampler.h) and the line it ran
 * (*line; the first line when the table says nothing). NULL if unreadable. */
const agt_py_code_t *agt_python_code(agt_python_t *py, agt_proc_t *p, uint64_t word, int64_t *line);
/* Reads and caches the code object at addr now (its first sighting), while
 * the process is alive. */
void agt_python_prefetch(agt_python_t *py, agt_proc_t *p, uint64_t addr);
void agt_python_stats(const agt_python_t *py, agt_python_stats_t *out);
/* The line of code unit `unit` in a 3.11+ location table (first if none). */
int64_t agt_python_line(const uint8_t *table, size_t len, int64_t first_line, uint32_t unit);
/* The dotted module of a source file: its base name without ".py" after
 * each enclosing package's (a directory holding an __init__.py, looked up
 * under `root`: a process' /proc/PID/root for an absolute file name, its
 * /proc/PID/cwd for a relative one; "" for the agent's own), at most 32;
 * ".../pkg/__init__.py" names pkg; "<frozen X>": X; other "<...>": none
 * (""); a file without ".py": its base name. Allocated. */
char *agt_python_module(const char *root, const char *file);
/* "module.qualname" ("qualname" for no module). Allocated. */
char *agt_python_qualified_name(const char *module, const char *qualname);
/* The same in a 3.10 line table (PEP 626 format). */
int64_t agt_python_line_310(const uint8_t *table, size_t len, int64_t first_line, uint32_t unit);

/* ---------------------------------------------------------------- jvm */

typedef struct agt_jvm_stats_s {
    uint64_t requests_ok, requests_failed; /* perf map requests answered / given up */
} agt_jvm_stats_t;

/* Whether p maps HotSpot (libjvm.so). */
bool agt_jvm_maps_jvm(const agt_proc_t *p);
/* Takes the next step of asking the JVM p for a fresh perf map when one is
 * due (jvm.c): never waits for the JVM beyond one request's reply. */
void agt_jvm_refresh(const char *procfs, agt_proc_t *p, int64_t now_ns, agt_jvm_stats_t *stats);

/* ---------------------------------------------------------------- container */

/* The cgroup to report from /proc/PID/cgroup text: the v2 path when it is not
 * "/", else the longest v1 path. Writes "" when none. */
void agt_cgroup_pick(const char *text, size_t len, char *out, size_t cap);
/* The 64-hex container id in a cgroup path (docker, containerd, cri-o,
 * podman, kubepods; systemd or cgroupfs drivers), or "". */
void agt_container_id(const char *cgroup, char out[65]);
/* service_name: namespace/container in Kubernetes, else the container id's
 * first 12 digits, else the systemd unit, else the executable's name. */
void agt_service_name(const char *k8s_namespace, const char *k8s_container,
                      const char *container_id, const char *cgroup, const char *exe,
                      const char *comm, char *out, size_t cap);

/* ---------------------------------------------------------------- kube */

typedef struct agt_kube_s agt_kube_t;

typedef struct agt_pod_s {
    char *namespace_;
    char *pod;
    char *container;
} agt_pod_t;

/* api: a URL (tests, out-of-cluster) or NULL for the in-cluster service
 * account. LC_ENOTFOUND when NULL and not running in a pod. */
int agt_kube_new(const char *api, const char *node, agt_kube_t **out) LC_MUST_CHECK;
void agt_kube_free(agt_kube_t *k);
/* The pod of a container id, refreshing the node's pod list when the id is
 * unknown and the list is older than a few seconds. NULL when unknown. */
const agt_pod_t *agt_kube_lookup(agt_kube_t *k, const char *container_id);
/* Replaces the table with the containers of a PodList JSON document. */
int agt_kube_load_pods(agt_kube_t *k, const char *json, size_t len) LC_MUST_CHECK;

/* ---------------------------------------------------------------- profiles */

typedef struct agt_symstats_s {
    uint64_t hits, misses; /* locations resolved to a name / left [unknown] */
} agt_symstats_t;

/* What profiles.c needs from the agent for one drained interval. */
typedef struct agt_build_ctx_s {
    const agt_opts_t *opts;
    agt_procs_t *procs;
    agt_kallsyms_t *kallsyms;
    agt_kube_t *kube;     /* NULL outside Kubernetes */
    agt_python_t *python; /* names Python frames; NULL: none are spliced */
    int64_t period_ns;
    int64_t time_ns, duration_ns; /* the buffer's window */
    bool lean;                    /* publish lean entries (lc_transport_wants_lean) */
    agt_symstats_t sym;
} agt_build_ctx_t;

/* One encoded ember.v1.IngestProfile. */

typedef struct agt_msg_s {
    uint8_t *data;
    size_t len;
    uint32_t partition;
    uint64_t samples;
    uint8_t ingest_id[LC_INGEST_ID_BYTES]; /* data's ingest id: the transport's dedupe id */
} agt_msg_t;

typedef struct agt_msgs_s {
    agt_msg_t *v;
    size_t n, cap;
} agt_msgs_t;

void agt_msgs_fini(agt_msgs_t *m);

/* Builds and encodes the profiles of every process with samples in d whose
 * entry exists in ctx->procs (callers create and snapshot them first). */
int agt_build_profiles(agt_build_ctx_t *ctx, const agt_drained_t *d, agt_msgs_t *out) LC_MUST_CHECK;
/* The `__runtime__` label of p: python, java, node, or NULL (native). */
const char *agt_proc_runtime(const agt_proc_t *p);
/* Fills p->labels from what is known about it. */
void agt_proc_labels(const agt_opts_t *opts, agt_kube_t *kube, agt_proc_t *p);

#endif
