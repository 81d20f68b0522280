/*
 * sampler.c — the user-space half of the CPU sampler: loads sampler.bpf.c
 * through its skeleton, attaches it to one CPU-clock perf event per online
 * CPU, flips the double buffer, drains the idle half, and reads statistics,
 * process entries and events.
 *
 * CPU clock in period mode (not frequency mode): each sample then stands for
 * exactly 1e9/rate ns of CPU time, which is what the pprof period says.
 * Draining uses BPF batch operations (one syscall per chunk) and falls back
 * to key iteration on kernels without them (< 5.6). libbpf's messages go to
 * lc_log.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent_int.h"
#include "lc/log.h"
#include "sampler.skel.h"

#define COUNTS_CHUNK 4096
#define STACKS_CHUNK 256
#define QUIESCE_FALLBACK_NS 50000000L /* far beyond any program's run time */

struct agt_sampler_s {
    struct sampler_bpf *skel;
    struct bpf_link **links; /* one per attached CPU */
    int *perf_fds;
    int n_links;
    int n_cpus; /* online CPUs attached */
    struct ring_buffer *events;
    agt_sampler_opts_t opts;
    uint32_t active;
};

/* ---------------------------------------------------------------- libbpf logs */

/* A printf-style function (format at 2, va_list): lets -Wformat-nonliteral see it. */
LC_PRINTF(2, 0)
static int sampler_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof(text), fmt, ap);
    /* libbpf hands over whole verifier logs; one log line per text line. */
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!*line)
            continue;
        if (level == LIBBPF_WARN)
            LC_LOG_WARN("libbpf msg=\"%s\"", line);
        else
            LC_LOG_DEBUG("libbpf msg=\"%s\"", line);
    }
    return 0;
}

/* ---------------------------------------------------------------- attaching */

/* Parses /sys/devices/system/cpu/online ("0-3,6,8-9") into a 0/1 array. */
static int online_cpus(bool *online, int max)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    if (!f)
        return -errno;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    int count = 0;
    for (char *p = buf; *p && *p != '\n';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            return LC_EINPUT;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi && c < max; c++, count++)
            online[c] = true;
        p = *end == ',' ? end + 1 : end;
    }
    return count;
}

static int perf_event_cpu_clock(int cpu, int rate_hz)
{
    struct perf_event_attr attr = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof(attr),
        .config = PERF_COUNT_SW_CPU_CLOCK,
        .sample_period = 1000000000ULL / (uint64_t)rate_hz,
    };
    int fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int sampler_attach_cpus(agt_sampler_t *s)
{
    int possible = libbpf_num_possible_cpus();
    if (possible <= 0)
        return possible < 0 ? possible : -ENODEV;
    bool *online = lc_xcalloc((size_t)possible, sizeof(*online));
    int rc = online_cpus(online, possible);
    s->links = lc_xcalloc((size_t)possible, sizeof(*s->links));
    s->perf_fds = lc_xcalloc((size_t)possible, sizeof(*s->perf_fds));
    for (int cpu = 0; rc >= 0 && cpu < possible; cpu++) {
        if (!online[cpu])
            continue;
        int fd = perf_event_cpu_clock(cpu, s->opts.sample_rate_hz);
        if (fd < 0) {
            LC_LOG_ERROR("agent: perf_event_open failed cpu=%d err=\"%s\"", cpu, lc_strerror(fd));
            rc = fd;
            break;
        }
        struct bpf_link *link = bpf_program__attach_perf_event(s->skel->progs.agt_on_sample, fd);
        if (!link) {
            rc = -errno;
            close(fd);
            LC_LOG_ERROR("agent: cannot attach the sampler cpu=%d err=\"%s\"", cpu,
                         lc_strerror(rc));
            break;
        }
        s->perf_fds[s->n_links] = fd;
        s->links[s->n_links++] = link;
    }
    lc_free(online);
    s->n_cpus = s->n_links;
    return rc < 0 ? rc : 0;
}

static int sampler_on_ring_event(void *ctx, void *data, size_t size)
{
    agt_sampler_t *s = ctx;
    if (size >= sizeof(struct agt_event) && s->opts.on_event)
        s->opts.on_event(data, s->opts.event_data);
    return 0;
}

static void sampler_size_maps(agt_sampler_t *s)
{
    struct sampler_bpf *k = s->skel;
    uint32_t counts = (uint32_t)s->opts.counts_capacity, stacks = (uint32_t)s->opts.stacks_capacity;
    /* Only fails on a loaded object; ours is not loaded yet. */
    (void)bpf_map__set_max_entries(k->maps.counts0, counts);
    (void)bpf_map__set_max_entries(k->maps.counts1, counts);
    (void)bpf_map__set_max_entries(k->maps.stacks0, stacks);
    (void)bpf_map__set_max_entries(k->maps.stacks1, stacks);
    (void)bpf_map__set_max_entries(k->maps.procs, (uint32_t)s->opts.procs_capacity);
    if (s->opts.unwind_rows_capacity)
        (void)bpf_map__set_max_entries(k->maps.unwind_rows, (uint32_t)s->opts.unwind_rows_capacity);
    if (s->opts.unwind_procs_capacity)
        (void)bpf_map__set_max_entries(k->maps.unwind_procs,
                                       (uint32_t)s->opts.unwind_procs_capacity);
}

static int sampler_load(agt_sampler_t *s)
{
    libbpf_set_print(sampler_libbpf_print);
    s->skel = sampler_bpf__open();
    if (!s->skel) {
        int rc = -errno;
        LC_LOG_ERROR("agent: cannot open the BPF object err=\"%s\"", lc_strerror(rc));
        return rc;
    }
    sampler_size_maps(s);
    int rc = sampler_bpf__load(s->skel);
    if (rc) {
        LC_LOG_ERROR("agent: cannot load the BPF program (root or CAP_BPF+CAP_PERFMON needed; "
                     "kernel with BTF) err=\"%s\"",
                     lc_strerror(rc));
        return rc;
    }
    s->skel->links.agt_on_exec = bpf_program__attach(s->skel->progs.agt_on_exec);
    if (!s->skel->links.agt_on_exec) /* degraded, not fatal: exec'd maps refresh on misses */
        LC_LOG_WARN("agent: exec tracking unavailable err=\"%s\"", lc_strerror(-errno));
    s->events = ring_buffer__new(bpf_map__fd(s->skel->maps.events), sampler_on_ring_event, s, NULL);
    if (!s->events) {
        rc = -errno;
        LC_LOG_ERROR("agent: cannot open the event ring buffer err=\"%s\"", lc_strerror(rc));
    }
    return rc;
}

int agt_sampler_open(const agt_sampler_opts_t *opts, agt_sampler_t **out)
{
    agt_sampler_t *s = lc_xcalloc(1, sizeof(*s));
    s->opts = *opts;
    *out = NULL;
    int rc = sampler_load(s);
    if (!rc)
        rc = sampler_attach_cpus(s);
    if (rc) {
        agt_sampler_free(s);
        return rc;
    }
    LC_LOG_INFO("agent: sampling cpus=%d rate_hz=%d counts=%zu stacks=%zu", s->n_cpus,
                opts->sample_rate_hz, opts->counts_capacity, opts->stacks_capacity);
    *out = s;
    return 0;
}

void agt_sampler_stop(agt_sampler_t *s)
{
    for (int i = 0; i < s->n_links; i++) {
        bpf_link__destroy(s->links[i]);
        close(s->perf_fds[i]);
    }
    s->n_links = 0;
}

void agt_sampler_free(agt_sampler_t *s)
{
    if (!s)
        return;
    agt_sampler_stop(s);
    ring_buffer__free(s->events);
    sampler_bpf__destroy(s->skel);
    lc_free(s->links);
    lc_free(s->perf_fds);
    lc_free(s);
}

int agt_sampler_n_cpus(const agt_sampler_t *s)
{
    return s->n_cpus;
}

int agt_sampler_events_fd(const agt_sampler_t *s)
{
    return ring_buffer__epoll_fd(s->events);
}

int agt_sampler_consume_events(agt_sampler_t *s)
{
    int rc = ring_buffer__consume(s->events);
    return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------- swapping */

uint32_t agt_sampler_swap(agt_sampler_t *s)
{
    uint32_t old = s->active;
    s->active ^= 1;
    __atomic_store_n(&s->skel->bss->active_buffer, s->active, __ATOMIC_SEQ_CST);
    return old;
}

/* BPF programs run inside RCU read-side sections, so an RCU grace period
 * (which MEMBARRIER_CMD_GLOBAL waits for) outlasts every program that could
 * have read the old buffer index. Kernels with nohz_full refuse that
 * command; a pause far longer than any program run is the fallback. */
void agt_sampler_quiesce(void)
{
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
        return;
    struct timespec ts = {0, QUIESCE_FALLBACK_NS};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- draining */

typedef void (*drain_take_fn)(agt_drained_t *d, const void *keys, const void *vals, size_t n);

static void take_counts(agt_drained_t *d, const void *keys, const void *vals, size_t n)
{
    size_t need = d->n + n;
    d->keys = lc_xrealloc(d->keys, (need ? need : 1) * sizeof(*d->keys));
    d->counts = lc_xrealloc(d->counts, (need ? need : 1) * sizeof(*d->counts));
    memcpy(d->keys + d->n, keys, n * sizeof(*d->keys));
    memcpy(d->counts + d->n, vals, n * sizeof(*d->counts));
    d->n = need;
}

static void take_stacks(agt_drained_t *d, const void *keys, const void *vals, size_t n)
{
    const uint64_t *hashes = keys;
    const struct agt_stack *stacks = vals;
    for (size_t i = 0; i < n; i++) {
        size_t frames = 0;
        while (frames < AGT_MAX_FRAMES && stacks[i].ips[frames])
            frames++;
        d->frames =
            lc_xgrow(d->frames, &d->cap_frames, d->n_frames + frames + 1, sizeof(*d->frames));
        memcpy(d->frames + d->n_frames, stacks[i].ips, frames * sizeof(uint64_t));
        *agt_u64map_put(&d->stacks, hashes[i], NULL) = (uint64_t)d->n_frames << 8 | frames;
        d->n_frames += frames;
    }
}

/* Kernels before 5.6 have no batch operations: iterate, then delete. */
static int drain_by_iteration(int fd, size_t key_size, size_t value_size, drain_take_fn take,
                              agt_drained_t *d)
{
    uint8_t *key = lc_xmalloc(key_size), *next = lc_xmalloc(key_size);
    uint8_t *val = lc_xmalloc(value_size);
    int rc = 0;
    bool first = true;
    while (bpf_map_get_next_key(fd, first ? NULL : key, next) == 0) {
        first = false;
        memcpy(key, next, key_size);
        if (bpf_map_lookup_elem(fd, key, val) == 0)
            take(d, key, val, 1);
    }
    /* Nothing writes this buffer now, so deleting afterwards loses nothing. */
    while (bpf_map_get_next_key(fd, NULL, next) == 0) {
        rc = bpf_map_delete_elem(fd, next);
        if (rc)
            break;
    }
    lc_free(key);
    lc_free(next);
    lc_free(val);
    return rc;
}

static int drain_map(int fd, size_t key_size, size_t value_size, size_t chunk, drain_take_fn take,
                     agt_drained_t *d)
{
    uint8_t *keys = lc_xmalloc(chunk * key_size), *vals = lc_xmalloc(chunk * value_size);
    uint64_t token = 0; /* the hash map's batch cursor is a bucket index */
    bool first = true;
    int rc;
    LIBBPF_OPTS(bpf_map_batch_opts, bopts);
    for (;;) {
        uint32_t count = (uint32_t)chunk;
        rc = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &token, &token, keys, vals, &count,
                                             &bopts);
        if (rc < 0 && rc != -ENOENT) {
            if (first && (rc == -EINVAL || rc == -ENOTSUP)) { /* ENOTSUP == EOPNOTSUPP on Linux */
                rc = drain_by_iteration(fd, key_size, value_size, take, d);
                break;
            }
            if (rc == -ENOSPC) { /* one hash bucket holds more than a chunk */
                chunk *= 2;
                keys = lc_xrealloc(keys, chunk * key_size);
                vals = lc_xrealloc(vals, chunk * value_size);
                continue;
            }
            break;
        }
        take(d, keys, vals, count);
        first = false;
        if (rc == -ENOENT) {
            rc = 0;
            break;
        }
    }
    lc_free(keys);
    lc_free(vals);
    return rc;
}

int agt_sampler_drain(agt_sampler_t *s, uint32_t buffer, agt_drained_t *out)
{
    memset(out, 0, sizeof(*out));
    agt_u64map_init(&out->stacks);
    agt_sampler_quiesce();
    struct bpf_map *counts = buffer ? s->skel->maps.counts1 : s->skel->maps.counts0;
    struct bpf_map *stacks = buffer ? s->skel->maps.stacks1 : s->skel->maps.stacks0;
    int rc = drain_map(bpf_map__fd(counts), sizeof(struct agt_count_key), sizeof(uint64_t),
                       COUNTS_CHUNK, take_counts, out);
    if (!rc)
        rc = drain_map(bpf_map__fd(stacks), sizeof(uint64_t), sizeof(struct agt_stack),
                       STACKS_CHUNK, take_stacks, out);
    if (rc)
        LC_LOG_ERROR("agent: draining BPF maps failed buffer=%u err=\"%s\"", buffer,
                     lc_strerror(rc));
    return rc;
}

void agt_drained_fini(agt_drained_t *d)
{
    lc_free(d->keys);
    lc_free(d->counts);
    lc_free(d->frames);
    agt_u64map_fini(&d->stacks);
    memset(d, 0, sizeof(*d));
}

const uint64_t *agt_drained_stack(const agt_drained_t *d, uint64_t hash, size_t *n)
{
    const uint64_t *v = hash ? agt_u64map_get(&d->stacks, hash) : NULL;
    *n = v ? (size_t)(*v & 0xff) : 0;
    return v ? d->frames + (*v >> 8) : NULL;
}

/* ---------------------------------------------------------------- queries */

int agt_sampler_stats(agt_sampler_t *s, uint64_t out[AGT_STAT_N])
{
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0)
        return ncpu < 0 ? ncpu : -ENODEV;
    uint64_t *per_cpu = lc_xcalloc((size_t)ncpu, sizeof(*per_cpu));
    int fd = bpf_map__fd(s->skel->maps.stats), rc = 0;
    for (uint32_t i = 0; i < AGT_STAT_N && rc == 0; i++) {
        rc = bpf_map_lookup_elem(fd, &i, per_cpu);
        out[i] = 0;
        for (int c = 0; c < ncpu && rc == 0; c++)
            out[i] += per_cpu[c];
    }
    lc_free(per_cpu);
    return rc;
}

int agt_sampler_proc(agt_sampler_t *s, uint32_t tgid, struct agt_proc *out)
{
    int rc = bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &tgid, out);
    return rc == -ENOENT ? LC_ENOTFOUND : rc;
}

int agt_sampler_skip(agt_sampler_t *s, uint32_t tgid, uint64_t start_ns)
{
    int fd = bpf_map__fd(s->skel->maps.procs);
    struct agt_proc p;
    if (bpf_map_lookup_elem(fd, &tgid, &p) != 0 || p.start_ns != start_ns)
        p = (struct agt_proc){.start_ns = start_ns};
    p.flags |= AGT_PROC_SKIP;
    return bpf_map_update_elem(fd, &tgid, &p, BPF_ANY);
}

void agt_sampler_unwind_maps(const agt_sampler_t *s, int *rows_fd, uint32_t *rows_cap,
                             int *procs_fd)
{
    *rows_fd = bpf_map__fd(s->skel->maps.unwind_rows);
    *rows_cap = bpf_map__max_entries(s->skel->maps.unwind_rows);
    *procs_fd = bpf_map__fd(s->skel->maps.unwind_procs);
}

int agt_sampler_py_procs_fd(const agt_sampler_t *s)
{
    return bpf_map__fd(s->skel->maps.py_procs);
}
