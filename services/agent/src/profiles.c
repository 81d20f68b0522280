/*
 * profiles.c — one drained interval becomes one pprof per process (or per
 * container), symbolized here and wrapped in an ember.v1.IngestProfile.
 *
 * Each count entry (tgid, kernel stack, user stack) becomes a sample whose
 * locations run leaf first: kernel frames, then user frames, with values
 * [count, count x period] for samples:count and cpu:nanoseconds. Every frame
 * but a stack's first is a return address, so it is looked up at addr - 1
 * (the call instruction), which keeps calls at the very end of a function
 * (noreturn) in the right function.
 *
 * Symbol sources, by frame: kernel -> kallsyms; user -> the mapping's ELF
 * symbols (file offset -> ELF vaddr through the load segments); anonymous
 * executable memory -> the process' perf map. What stays unresolved is sent
 * as it is (issue 31): a location with its mapping (file, build id, offsets)
 * and the address looked up (the call instruction's, so a server's
 * symbolizer names the calling line) and no line, which the server shows as
 * "module+0xoffset" and names once it has a debug file; it is counted in the
 * misses. --agent.symbolize=server (or both, for stripped objects) skips the
 * ELF symbols of objects with a build id: their frames go unnamed on
 * purpose (not counted as misses) and the server names them.
 * Locations are cached per process and address for the interval.
 */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_int.h"
#include "ember/v1/ingest.pb-c.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/pprof.h"
#include "lc/store.h"
#include "lc/transport_entry.h"
#include "lc/utf8.h"

#define LABEL_VALUE_MAX 1024
#define PPROF_MAX_BYTES ((size_t)256 << 20)
#define KERNEL_MODULE "[kernel.kallsyms]"

/* ---------------------------------------------------------------- labels */

/* A process's names are the kernel's bytes, not ours to refuse: they are
 * made to meet the label rules (lc_label_check) instead. Bytes that are not
 * UTF-8 become '?', and so does a U+FFFD already in them (the rules refuse
 * it: it is what decoders leave where bytes were lost). */
static void set_label(lc_labels_t *ls, const char *name, const char *value)
{
    char v[LABEL_VALUE_MAX + 1];
    snprintf(v, sizeof(v), "%s", value);
    lc_utf8_sanitize(v);
    char *r = v, *w = v;
    while (*r) {
        bool replacement = strncmp(r, "\xef\xbf\xbd", 3) == 0;
        *w++ = replacement ? '?' : *r;
        r += replacement ? 3 : 1;
    }
    *w = '\0';
    if (*v)
        lc_labels_set(ls, name, v);
}

const char *agt_proc_runtime(const agt_proc_t *p)
{
    if (p->py)
        return "python";
    if (p->jvm)
        return "java";
    /* Node has no runtime state of its own in the agent (its JIT frames come from the
     * perf map, perfmap.c): it is known by its executable, Debian's nodejs or node */
    if (!p->exe)
        return NULL;
    const char *base = strrchr(p->exe, '/');
    base = base ? base + 1 : p->exe;
    if (strcmp(base, "node") == 0 || strcmp(base, "nodejs") == 0)
        return "node";
    return NULL;
}

void agt_proc_labels(const agt_opts_t *opts, agt_kube_t *kube, agt_proc_t *p)
{
    const agt_pod_t *pod = kube ? agt_kube_lookup(kube, p->container_id) : NULL;
    char service[512], pid[16];
    agt_service_name(pod ? pod->namespace_ : NULL, pod ? pod->container : NULL, p->container_id,
                     p->cgroup, p->exe, p->comm, service, sizeof(service));
    snprintf(pid, sizeof(pid), "%u", p->pid);
    lc_labels_fini(&p->labels);
    lc_labels_init(&p->labels);
    set_label(&p->labels, "service_name", service);
    set_label(&p->labels, "pid", pid);
    set_label(&p->labels, "comm", p->comm);
    set_label(&p->labels, "exe", p->exe);
    set_label(&p->labels, "cgroup", p->cgroup);
    set_label(&p->labels, "container_id", p->container_id);
    set_label(&p->labels, "node", opts->node);
    const char *runtime = agt_proc_runtime(p);
    if (runtime)
        set_label(&p->labels, "__runtime__", runtime);
    if (pod) {
        set_label(&p->labels, "namespace", pod->namespace_);
        set_label(&p->labels, "pod", pod->pod);
        set_label(&p->labels, "container", pod->container);
    }
    lc_labels_sort(&p->labels);
    p->labels_ready = true;
}

/* ---------------------------------------------------------------- groups */

/* One pprof being built: a process, or a container's processes. */
typedef struct group_s {
    uint64_t key;
    lc_pprof_builder_t *b;
    lc_labels_t labels;
    uint64_t kernel_mapping; /* builder mapping id, 0 until first needed */
    uint64_t samples;
} group_t;

typedef struct build_s {
    agt_build_ctx_t *ctx;
    group_t *groups;
    size_t n_groups, cap_groups;
    agt_u64map_t by_key;  /* group key -> index + 1 */
    agt_u64map_t locs;    /* per process: lookup address -> location id */
    agt_u64map_t map_ids; /* per process: mapping start -> builder mapping id */
} build_t;

static uint64_t agt_group_key(const build_t *bd, const agt_proc_t *p)
{
    if (bd->ctx->opts->group_by == AGT_GROUP_CONTAINER && p->container_id[0])
        return lc_hash64(p->container_id, strlen(p->container_id), 0x636f6e74ULL) | 1;
    return (uint64_t)p->pid << 1; /* even: never equal to a container key */
}

static void group_labels(const build_t *bd, const agt_proc_t *p, lc_labels_t *out)
{
    lc_labels_copy(out, &p->labels);
    if (bd->ctx->opts->group_by == AGT_GROUP_CONTAINER && p->container_id[0]) {
        lc_labels_del(out, "pid"); /* process-specific: a container's profile spans several */
        lc_labels_del(out, "comm");
        lc_labels_del(out, "exe");
    }
    lc_labels_set(out, "__name__", "process_cpu");
    lc_labels_sort(out);
}

static group_t *group_for(build_t *bd, const agt_proc_t *p)
{
    bool added;
    uint64_t key = agt_group_key(bd, p);
    uint64_t *slot = agt_u64map_put(&bd->by_key, key, &added);
    if (!added)
        return &bd->groups[*slot - 1];
    bd->groups = lc_xgrow(bd->groups, &bd->cap_groups, bd->n_groups + 1, sizeof(*bd->groups));
    group_t *g = &bd->groups[bd->n_groups];
    memset(g, 0, sizeof(*g));
    g->key = key;
    g->b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(g->b, "samples", "count");
    lc_pprof_builder_sample_type(g->b, "cpu", "nanoseconds");
    lc_pprof_builder_period(g->b, "cpu", "nanoseconds", bd->ctx->period_ns);
    lc_pprof_builder_times(g->b, bd->ctx->time_ns, bd->ctx->duration_ns);
    group_labels(bd, p, &g->labels);
    *slot = ++bd->n_groups;
    return g;
}

/* ---------------------------------------------------------------- symbolization */

static uint64_t add_location(group_t *g, uint64_t mapping, uint64_t addr, const char *name,
                             const char *file)
{
    uint64_t fn = lc_pprof_builder_function(g->b, name, name, file, 0);
    lc_pprof_line_t line = {fn, 0};
    return lc_pprof_builder_location(g->b, mapping, addr, &line, 1);
}

/* A frame no symbol source named: mapping and address, no line. */
static uint64_t unsymbolized_location(group_t *g, uint64_t mapping, uint64_t addr)
{
    return lc_pprof_builder_location(g->b, mapping, addr, NULL, 0);
}

static void count_symbol(build_t *bd, bool resolved)
{
    if (resolved)
        bd->ctx->sym.hits++;
    else
        bd->ctx->sym.misses++;
}

static uint64_t kernel_location(build_t *bd, group_t *g, uint64_t addr, uint64_t lookup)
{
    const char *name = agt_kallsyms_lookup(bd->ctx->kallsyms, lookup);
    count_symbol(bd, name != NULL);
    if (!g->kernel_mapping)
        g->kernel_mapping = lc_pprof_builder_mapping(g->b, 0, 0, 0, KERNEL_MODULE, "", true);
    if (!name)
        return unsymbolized_location(g, g->kernel_mapping, addr);
    return add_location(g, g->kernel_mapping, addr, name, "");
}

static const char *map_module(const agt_map_t *m)
{
    if (m->kind == AGT_MAP_VDSO)
        return "[vdso]";
    if (m->kind == AGT_MAP_ANON)
        return m->path[0] ? m->path : "[anon]";
    const char *slash = strrchr(m->path, '/');
    return slash ? slash + 1 : m->path;
}

static const char *jit_symbol(build_t *bd, agt_proc_t *p, uint64_t lookup)
{
    if (!p->perfmap_checked) {
        p->perfmap_checked = true;
        char path[256];
        snprintf(path, sizeof(path), "%s/%u/root/tmp/perf-%u.map", bd->ctx->procs->procfs, p->pid,
                 p->nspid);
        /* In another pid namespace the file is named after the inner pid; a
         * process that has exited leaves its map in the host's /tmp at best. */
        if (agt_perfmap_refresh(&p->perfmap, path) != 0) {
            snprintf(path, sizeof(path), "/tmp/perf-%u.map", p->pid);
            if (agt_perfmap_refresh(&p->perfmap, path) != 0)
                LC_LOG_DEBUG("agent: no perf map pid=%u", p->pid);
        }
    }
    return agt_perfmap_lookup(&p->perfmap, lookup);
}

/* local: whether the agent names this mapping's frames (has_functions). */
static uint64_t agt_mapping_id(build_t *bd, group_t *g, const agt_map_t *m, bool local)
{
    bool added;
    uint64_t *id = agt_u64map_put(&bd->map_ids, m->start ? m->start : 1, &added);
    if (added) {
        const agt_elf_t *e = m->elf;
        *id = lc_pprof_builder_mapping(g->b, m->start, m->end, m->offset,
                                       m->kind == AGT_MAP_FILE ? m->path : map_module(m),
                                       e ? e->build_id : "", local && e && e->n_syms);
    }
    return *id;
}

static const agt_map_t *find_map(build_t *bd, agt_proc_t *p, uint64_t lookup)
{
    const agt_map_t *m = agt_proc_find_map(p, lookup);
    if (m || !p->snapshot_ok || p->maps_refreshed)
        return m;
    /* dlopen'ed since the snapshot, or exec'd: read the maps again, once. */
    p->maps_refreshed = true;
    if (agt_proc_refresh_maps(bd->ctx->procs, p) == 0)
        agt_u64map_clear(&bd->map_ids);
    return agt_proc_find_map(p, lookup);
}

/* Whether --agent.symbolize leaves the frames of this object to the server:
 * it needs the build id to find a debug file. */
static bool server_names(const agt_opts_t *o, const agt_elf_t *e)
{
    if (o->symbolize == AGT_SYMBOLIZE_LOCAL || !e || !e->build_id[0])
        return false;
    return o->symbolize == AGT_SYMBOLIZE_SERVER || !e->has_symtab;
}

static uint64_t user_location(build_t *bd, group_t *g, agt_proc_t *p, uint64_t addr,
                              uint64_t lookup)
{
    const agt_map_t *m = find_map(bd, p, lookup);
    const char *name = NULL;
    uint64_t vaddr;
    bool local = !m || !server_names(bd->ctx->opts, m->elf);
    if (local && m && m->elf &&
        agt_elf_offset_to_vaddr(m->elf, lookup - m->start + m->offset, &vaddr))
        name = agt_elf_symbol(m->elf, vaddr);
    if (!name && (!m || m->kind == AGT_MAP_ANON))
        name = jit_symbol(bd, p, lookup);
    if (local)
        count_symbol(bd, name != NULL);
    uint64_t mapping = m ? agt_mapping_id(bd, g, m, local) : 0;
    if (!name) /* the call instruction's address: what the server looks up */
        return unsymbolized_location(g, mapping, lookup);
    return add_location(g, mapping, addr, name, m ? m->path : "");
}

static uint64_t frame_location(build_t *bd, group_t *g, agt_proc_t *p, uint64_t addr, bool kernel,
                               bool first)
{
    uint64_t lookup = first ? addr : addr - 1;
    bool added;
    uint64_t *loc = agt_u64map_put(&bd->locs, lookup ? lookup : 1, &added);
    if (added)
        *loc =
            kernel ? kernel_location(bd, g, addr, lookup) : user_location(bd, g, p, addr, lookup);
    return *loc;
}

/* ---------------------------------------------------------------- samples */

/* A Python frame (sampler.h word): its code object's name, file and line. */
static uint64_t python_location(build_t *bd, group_t *g, agt_proc_t *p, uint64_t word)
{
    bool added;
    uint64_t *loc = agt_u64map_put(&bd->locs, word & ~AGT_PY_FRAME_ENTRY, &added);
    if (!added)
        return *loc;
    int64_t line;
    const agt_py_code_t *c = agt_python_code(bd->ctx->python, p, word, &line);
    count_symbol(bd, c != NULL);
    if (!c) {
        *loc = add_location(g, 0, 0, "[unknown python frame]", "");
        return *loc;
    }
    uint64_t fn = lc_pprof_builder_function(g->b, c->name, c->name, c->file, c->first_line);
    lc_pprof_line_t l = {fn, line};
    *loc = lc_pprof_builder_location(g->b, 0, 0, &l, 1);
    return *loc;
}

/* One sample's locations, leaf first: kernel frames, then user frames with
 * each eval-loop frame replaced by the Python frames it ran. Python frames
 * come leaf first in runs, each ending with its eval call's entry frame;
 * frames left when the native stack ends (cut short) go on top of it.
 * Between two spliced eval-loop frames, the interpreter's own frames (its
 * call dispatch: _PyEval_Vector, _PyFunction_Vectorcall...) are left out:
 * in Python's terms the one frame called the other. Frames of other objects
 * there (a C extension calling back into Python) stay, in order. */
typedef struct frames_s {
    const uint64_t *kernel, *user, *python;
    size_t n_kernel, n_user, n_python;
} frames_t;

static size_t splice_python(build_t *bd, group_t *g, agt_proc_t *p, const frames_t *f, size_t *next,
                            uint64_t *locs, size_t n)
{
    while (*next < f->n_python) {
        uint64_t word = f->python[(*next)++];
        locs[n++] = python_location(bd, g, p, word);
        if (word & AGT_PY_FRAME_ENTRY)
            break;
    }
    return n;
}

static uint64_t user_lookup(const frames_t *f, size_t i)
{
    return i == 0 ? f->user[i] : f->user[i] - 1;
}

/* The first user frame at or after i that is in the eval loop; n_user if none. */
static size_t next_eval_frame(const agt_proc_t *p, const frames_t *f, size_t i)
{
    while (i < f->n_user && !agt_python_is_eval(p, user_lookup(f, i)))
        i++;
    return i;
}

static size_t sample_locations(build_t *bd, group_t *g, agt_proc_t *p, const frames_t *f,
                               uint64_t *locs)
{
    size_t n = 0, next_py = 0;
    bool splice = f->n_python && bd->ctx->python && p->py;
    bool spliced = false; /* an eval-loop frame leafward was replaced */
    size_t eval_at = splice ? next_eval_frame(p, f, 0) : f->n_user; /* the next one rootward */
    for (size_t i = 0; i < f->n_kernel; i++)
        locs[n++] = frame_location(bd, g, p, f->kernel[i], true, i == 0);
    for (size_t i = 0; i < f->n_user; i++) {
        if (eval_at < i)
            eval_at = next_eval_frame(p, f, i);
        /* the next eval-loop frame rootward gets Python frames too */
        bool python_next = splice && next_py < f->n_python && eval_at < f->n_user;
        if (python_next && eval_at == i) {
            n = splice_python(bd, g, p, f, &next_py, locs, n);
            spliced = true;
        } else if (!(spliced && python_next && agt_python_in_interpreter(p, user_lookup(f, i)))) {
            locs[n++] = frame_location(bd, g, p, f->user[i], false, i == 0);
        } /* else: the interpreter's call glue between two replaced frames */
    }
    while (splice && next_py < f->n_python)
        n = splice_python(bd, g, p, f, &next_py, locs, n);
    return n;
}

static void add_sample(build_t *bd, group_t *g, agt_proc_t *p, const agt_drained_t *d,
                       const struct agt_count_key *key, uint64_t count)
{
    frames_t f;
    f.kernel = agt_drained_stack(d, key->kernel_stack, &f.n_kernel);
    f.user = agt_drained_stack(d, key->user_stack, &f.n_user);
    f.python = agt_drained_stack(d, key->py_stack, &f.n_python);
    uint64_t locs[3 * AGT_MAX_FRAMES + 1];
    size_t n = sample_locations(bd, g, p, &f, locs);
    if (n == 0) { /* neither stack was readable: keep the sample, visibly (no
                     address to send, so a named placeholder) */
        locs[n++] = add_location(g, 0, 0, "[unknown]", "");
        bd->ctx->sym.misses++;
    }
    int64_t values[2] = {(int64_t)count, (int64_t)count * bd->ctx->period_ns};
    lc_pprof_builder_sample(g->b, locs, n, values, NULL, 0);
    g->samples += count;
}

/* ---------------------------------------------------------------- messages */

void agt_msgs_fini(agt_msgs_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        lc_free(m->v[i].data);
    lc_free(m->v);
    memset(m, 0, sizeof(*m));
}

static void *agt_heap_alloc(void *ctx, size_t size)
{
    LC_UNUSED(ctx);
    return lc_xmalloc(size);
}

/* The IngestProfile as the transport carries it (lean over Redis). */
static int encode_message(build_t *bd, group_t *g, const lc_buf_t *pprof, agt_msg_t *out)
{
    uint8_t id[LC_INGEST_ID_BYTES];
    int rc = lc_ingest_id_new(id);
    if (rc)
        return rc;
    const char *tenant = bd->ctx->opts->tenant;
    size_t n = g->labels.n;
    Types__V1__LabelPair *pairs = lc_xcalloc(n ? n : 1, sizeof(*pairs));
    Types__V1__LabelPair **ptrs = lc_xcalloc(n ? n : 1, sizeof(*ptrs));
    for (size_t i = 0; i < n; i++) {
        types__v1__label_pair__init(&pairs[i]);
        pairs[i].name = g->labels.v[i].name;
        pairs[i].value = g->labels.v[i].value;
        ptrs[i] = &pairs[i];
    }
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = (char *)tenant;
    m.ingest_id = (ProtobufCBinaryData){LC_INGEST_ID_BYTES, id};
    m.received_unix_nanos = lc_realtime_ns();
    m.labels = ptrs;
    m.n_labels = n;
    m.pprof = (ProtobufCBinaryData){pprof->len, pprof->data};
    m.time_nanos = bd->ctx->time_ns;
    out->data = lc_entry_pack(&m.base, bd->ctx->lean, agt_heap_alloc, NULL, &out->len);
    if (!out->data) {
        lc_free(pairs);
        lc_free(ptrs);
        return LC_EINPUT;
    }
    out->partition = lc_transport_partition(tenant, &g->labels, bd->ctx->opts->partitions);
    memcpy(out->ingest_id, id, sizeof(out->ingest_id));
    out->samples = g->samples;
    lc_free(pairs);
    lc_free(ptrs);
    return 0;
}

/* What the writer would refuse (lc_store_check_profile) is not published,
 * as every receiver refuses it: the profile is decoded back and checked. */
static int check_writable(const build_t *bd, const group_t *g, const lc_buf_t *pprof)
{
    if (lc_pprof_builder_sum_wrapped(g->b)) {
        LC_LOG_ERROR("agent: dropping a profile whose sample sums wrap past int64");
        return LC_EINPUT;
    }
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lim.max_decompressed_bytes = SIZE_MAX;
    lim.max_samples = 0;
    lc_arena_t *arena = lc_arena_new(SIZE_MAX);
    lc_pprof_t *p;
    lc_status_t st = {0};
    int rc = lc_pprof_decode(pprof->data, pprof->len, &lim, arena, &p, &st) != 0 ||
                     lc_store_check_profile(p, bd->ctx->opts->tenant, bd->ctx->time_ns, arena, NULL,
                                            &st) != 0
                 ? LC_EINPUT
                 : 0;
    if (rc)
        LC_LOG_ERROR("agent: dropping a profile the writer would refuse err=\"%s\"", st.msg);
    lc_arena_free(arena);
    return rc;
}

static int emit_group(build_t *bd, group_t *g, agt_msgs_t *out)
{
    lc_buf_t pprof;
    lc_buf_init(&pprof, PPROF_MAX_BYTES);
    int rc = lc_pprof_builder_encode(g->b, false, &pprof);
    if (!rc)
        rc = check_writable(bd, g, &pprof);
    if (!rc) {
        out->v = lc_xgrow(out->v, &out->cap, out->n + 1, sizeof(*out->v));
        rc = encode_message(bd, g, &pprof, &out->v[out->n]);
        if (!rc)
            out->n++;
    }
    if (rc)
        LC_LOG_ERROR("agent: cannot encode a profile samples=%llu err=\"%s\"",
                     (unsigned long long)g->samples, lc_strerror(rc));
    lc_buf_fini(&pprof);
    return rc;
}

/* ---------------------------------------------------------------- driver */

static int by_tgid(const void *a, const void *b, void *keys)
{
    const struct agt_count_key *k = keys;
    uint32_t x = k[*(const size_t *)a].tgid, y = k[*(const size_t *)b].tgid;
    return x < y ? -1 : x > y;
}

static void build_fini(build_t *bd)
{
    for (size_t i = 0; i < bd->n_groups; i++) {
        lc_pprof_builder_free(bd->groups[i].b);
        lc_labels_fini(&bd->groups[i].labels);
    }
    lc_free(bd->groups);
    agt_u64map_fini(&bd->by_key);
    agt_u64map_fini(&bd->locs);
    agt_u64map_fini(&bd->map_ids);
}

/* The samples of one process, entries [from, to) of order. */
static void add_process(build_t *bd, const agt_drained_t *d, const size_t *order, size_t from,
                        size_t to)
{
    agt_proc_t *p = agt_procs_get(bd->ctx->procs, d->keys[order[from]].tgid);
    if (!p || p->excluded)
        return;
    if (!p->labels_ready)
        agt_proc_labels(bd->ctx->opts, bd->ctx->kube, p);
    p->maps_refreshed = false;
    p->perfmap_checked = false;
    agt_u64map_clear(&bd->locs);
    agt_u64map_clear(&bd->map_ids);
    group_t *g = group_for(bd, p);
    for (size_t i = from; i < to; i++)
        add_sample(bd, g, p, d, &d->keys[order[i]], d->counts[order[i]]);
}

int agt_build_profiles(agt_build_ctx_t *ctx, const agt_drained_t *d, agt_msgs_t *out)
{
    build_t bd = {.ctx = ctx};
    agt_u64map_init(&bd.by_key);
    agt_u64map_init(&bd.locs);
    agt_u64map_init(&bd.map_ids);
    size_t *order = lc_xmalloc((d->n ? d->n : 1) * sizeof(*order));
    for (size_t i = 0; i < d->n; i++)
        order[i] = i;
    qsort_r(order, d->n, sizeof(*order), by_tgid, d->keys);
    for (size_t from = 0, to; from < d->n; from = to) {
        for (to = from + 1; to < d->n && d->keys[order[to]].tgid == d->keys[order[from]].tgid;)
            to++;
        add_process(&bd, d, order, from, to);
    }
    lc_free(order);
    int rc = 0;
    for (size_t i = 0; i < bd.n_groups && rc == 0; i++)
        rc = emit_group(&bd, &bd.groups[i], out);
    build_fini(&bd);
    return rc;
}
