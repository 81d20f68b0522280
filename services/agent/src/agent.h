/*
 * agent.h — ember's eBPF CPU profiler for every process on the host.
 *
 * A CO-RE BPF program samples on-CPU stacks (kernel + user, frame pointers)
 * on a perf_event CPU clock on every online CPU and aggregates counts in BPF
 * maps. Every interval the agent swaps the maps' double buffer, drains the
 * idle half, symbolizes it (kallsyms; ELF .symtab/.dynsym of each mapping
 * read through /proc/PID; JIT perf maps) and publishes one pprof per process
 * (or per container) as an ember.v1.IngestProfile through the transport:
 * process_cpu with samples:count and cpu:nanoseconds, period cpu:nanoseconds.
 *
 * Threading: the agent lives on one uv loop. Everything that blocks or burns
 * CPU (reading /proc, parsing ELF files, draining maps, building pprofs, the
 * Kubernetes API) runs in one job at a time on the libuv thread pool, so the
 * agent's caches are only ever touched by one thread. The loop thread flips
 * buffers, reads BPF events and publishes. Metrics may be read from anywhere.
 * Privileges: root, or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE +
 * CAP_DAC_READ_SEARCH + CAP_SYSLOG (docs/internals/agent.md).
 */
#ifndef EMBER_AGENT_H
#define EMBER_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/err.h"
#include "lc/metrics.h"
#include "lc/transport.h"

#include "ember_process.h"
#include "lc/service.h"

typedef enum { AGT_GROUP_PROCESS = 0, AGT_GROUP_CONTAINER = 1 } agt_group_by_t;

/* Who names the frames of native code in mapped files (issue 31). Kernel
 * frames (kallsyms) and JIT frames (perf maps) are named by the agent in
 * every mode: no server has their files. A frame left unnamed is sent as its
 * mapping (file, build id) and the address of its instruction, which the
 * server names at query time from a debug file (uploaded or debuginfod's). */
typedef enum {
    AGT_SYMBOLIZE_LOCAL = 0, /* ELF .symtab/.dynsym here; misses go unnamed */
    AGT_SYMBOLIZE_SERVER,    /* every binary with a build id goes unnamed */
    AGT_SYMBOLIZE_BOTH       /* here for binaries with a .symtab; stripped ones go unnamed */
} agt_symbolize_t;

/* Parses "local", "server" or "both"; false for anything else. */
bool agt_symbolize_parse(const char *s, agt_symbolize_t *out);

typedef struct agt_opts_s {
    int sample_rate_hz;      /* per CPU; default 19 */
    int64_t interval_ns;     /* one profile per process per interval; default 10 s */
    agt_group_by_t group_by; /* process (default) or container */
    const char *filter;      /* selector over process labels ({comm=~"..", pid!="1"}); "" = all */
    const char *node;        /* `node` label; NULL/"" = $NODE_NAME, else the host name */
    const char *tenant;      /* default "anonymous" */
    const char *kubernetes_api; /* NULL/"" = in-cluster when running in a pod; "off"; or a URL */
    size_t max_stacks;          /* distinct stacks per buffer; 0 = sized from rate x interval */
    uint32_t partitions;        /* transport partitions (as the ingesters); default 1 */
    const char *procfs;         /* default "/proc" */
    agt_symbolize_t symbolize;  /* who names native frames; default local */
} agt_opts_t;

typedef struct agt_s agt_t;

void agt_opts_default(agt_opts_t *o);

/* Loads and attaches the BPF program and starts sampling. Profiles go to tr,
 * counters to metrics (ember_agent_*). Errors: LC_EINPUT for bad options
 * (logged), or the -errno of what failed to load or attach (logged). */
int agt_new(uv_loop_t *loop, const agt_opts_t *opts, lc_transport_t *tr, lc_metrics_t *metrics,
            agt_t **out) LC_MUST_CHECK;

/* Stops sampling. With `flush`, the samples of the current interval are
 * drained and published and their publish callbacks awaited first. Then the
 * handles close, `a` is freed and cb (if any) runs on the loop. */
void agt_close(agt_t *a, bool flush, void (*cb)(void *data), void *data);

/* True once sampling is attached on every online CPU. */
bool agt_ready(const agt_t *a);

/* The agent node of the process shell (node.c; takes an ember_settings_t):
 * in `ember` with --agent, and in `ember-agent` beside the publisher node. */
extern const lc_node_ops_t agt_node;

#endif
