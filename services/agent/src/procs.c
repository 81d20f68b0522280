/*
 * procs.c — the process table: what the agent knows about each sampled
 * process, read from /proc/PID while it is alive.
 *
 * A snapshot reads comm, the executable, the cgroup, the pid inside the
 * process' namespace (perf map file names use it) and the executable
 * mappings, and resolves each mapped file to a cached ELF object right away:
 * through /proc/PID/map_files/<range> (works for deleted files and other
 * mount namespaces), else /proc/PID/root/<path>. Doing this on the
 * new-process event rather than at the end of the interval is what lets a
 * process that lives for a fraction of an interval be symbolized.
 *
 * Entries are keyed by pid and carry the BPF identity (pid, leader start
 * time); a recycled pid replaces the entry. Processes without samples are
 * evicted after a few rounds once gone (or after longer while alive).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent_int.h"
#include "lc/log.h"

#define PROC_FILE_MAX ((size_t)64 << 20) /* /proc/PID/maps of a huge process */
#define PROC_MAX_MAPS 65536

void agt_procs_init(agt_procs_t *t, const char *procfs, agt_elfcache_t *elfs)
{
    memset(t, 0, sizeof(*t));
    agt_u64map_init(&t->by_pid);
    t->procfs = procfs;
    t->elfs = elfs;
}

static void proc_drop_maps(agt_procs_t *t, agt_proc_t *p)
{
    for (size_t i = 0; i < p->n_maps; i++) {
        if (p->maps[i].kind == AGT_MAP_FILE)
            agt_elfcache_unref(t->elfs, p->maps[i].elf);
    }
    lc_free(p->maps);
    lc_free(p->map_paths);
    p->maps = NULL;
    p->map_paths = NULL;
    p->n_maps = 0;
}

static void proc_free(agt_procs_t *t, agt_proc_t *p)
{
    if (t->on_forget)
        t->on_forget(t->hook_data, p);
    proc_drop_maps(t, p);
    lc_free(p->exe);
    lc_free(p->cgroup);
    lc_labels_fini(&p->labels);
    agt_perfmap_fini(&p->perfmap);
    agt_python_proc_free(p->py);
    lc_free(p);
}

void agt_procs_fini(agt_procs_t *t)
{
    for (size_t i = 0; i < t->by_pid.cap; i++) {
        if (t->by_pid.keys[i])
            proc_free(t, (agt_proc_t *)(uintptr_t)t->by_pid.vals[i]);
    }
    agt_u64map_fini(&t->by_pid);
}

agt_proc_t *agt_procs_get(agt_procs_t *t, uint32_t pid)
{
    uint64_t *v = pid ? agt_u64map_get(&t->by_pid, pid) : NULL;
    return v ? (agt_proc_t *)(uintptr_t)*v : NULL;
}

agt_proc_t *agt_procs_upsert(agt_procs_t *t, uint32_t pid, uint64_t start_ns, uint64_t round)
{
    agt_proc_t *p = agt_procs_get(t, pid);
    if (p && p->start_ns == start_ns)
        return p;
    if (p) /* the pid was recycled */
        proc_free(t, p);
    p = lc_xcalloc(1, sizeof(*p));
    p->pid = pid;
    p->nspid = pid;
    p->start_ns = start_ns;
    p->exe = lc_xstrdup("");
    p->cgroup = lc_xstrdup("");
    p->needs_snapshot = true;
    p->created_round = round;
    p->last_sample_round = round;
    lc_labels_init(&p->labels);
    agt_perfmap_init(&p->perfmap);
    *agt_u64map_put(&t->by_pid, pid, NULL) = (uint64_t)(uintptr_t)p;
    return p;
}

size_t agt_procs_count(const agt_procs_t *t)
{
    return t->by_pid.n;
}

/* ---------------------------------------------------------------- /proc reading */

/* Reads a whole (procfs) file, NUL-terminated; NULL with errno set. */
static char *read_text(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = lc_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= PROC_FILE_MAX)
                break; /* keep what fits */
            cap *= 2;
            buf = lc_xrealloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r < 0 && n == 0) {
                int err = errno;
                close(fd);
                lc_free(buf);
                errno = err;
                return NULL;
            }
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void proc_path(const agt_procs_t *t, const agt_proc_t *p, const char *rel, char *out,
                      size_t cap)
{
    snprintf(out, cap, "%s/%u/%s", t->procfs, p->pid, rel);
}

static void read_comm(agt_procs_t *t, agt_proc_t *p)
{
    char path[128];
    size_t len;
    proc_path(t, p, "comm", path, sizeof(path));
    char *text = read_text(path, &len);
    if (!text)
        return;
    text[strcspn(text, "\n")] = '\0';
    snprintf(p->comm, sizeof(p->comm), "%s", text);
    lc_free(text);
}

static void read_exe(agt_procs_t *t, agt_proc_t *p)
{
    char path[128], target[4096];
    proc_path(t, p, "exe", path, sizeof(path));
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0)
        return;
    target[n] = '\0';
    char *deleted = strstr(target, " (deleted)");
    if (deleted && deleted[10] == '\0')
        *deleted = '\0';
    lc_free(p->exe);
    p->exe = lc_xstrdup(target);
}

static void read_cgroup(agt_procs_t *t, agt_proc_t *p)
{
    char path[128], cgroup[4096];
    size_t len;
    proc_path(t, p, "cgroup", path, sizeof(path));
    char *text = read_text(path, &len);
    if (!text)
        return;
    agt_cgroup_pick(text, len, cgroup, sizeof(cgroup));
    lc_free(text);
    lc_free(p->cgroup);
    p->cgroup = lc_xstrdup(cgroup);
    agt_container_id(cgroup, p->container_id);
}

/* NSpid lists the pid in each nested namespace, the process' own last. */
static void read_nspid(agt_procs_t *t, agt_proc_t *p)
{
    char path[128];
    size_t len;
    proc_path(t, p, "status", path, sizeof(path));
    char *text = read_text(path, &len);
    char *line = text ? strstr(text, "\nNSpid:") : NULL;
    if (line) {
        char *end = line + 7 + strcspn(line + 7, "\n");
        *end = '\0';
        char *last = strrchr(line, '\t');
        long v = last ? strtol(last + 1, NULL, 10) : 0;
        if (v > 0)
            p->nspid = (uint32_t)v;
    }
    lc_free(text);
}

/* ---------------------------------------------------------------- mappings */

typedef struct maps_line_s {
    uint64_t start, end, offset, dev, inode;
    bool exec;
    const char *path; /* into the line */
    size_t path_len;
} maps_line_t;

/* "start-end perms offset major:minor inode   path" */
static bool parse_maps_line(char *line, maps_line_t *out)
{
    unsigned long long start, end, offset, inode;
    unsigned int major, minor;
    char perms[8];
    int consumed = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset, &major,
               &minor, &inode, &consumed) < 7)
        return false;
    *out = (maps_line_t){
        start, end, offset, makedev(major, minor), inode, strchr(perms, 'x') != NULL, NULL, 0};
    out->path = line + consumed;
    out->path_len = strlen(out->path);
    static const char deleted[] = " (deleted)";
    size_t dl = sizeof(deleted) - 1;
    if (out->path_len > dl && !memcmp(out->path + out->path_len - dl, deleted, dl))
        out->path_len -= dl;
    return end > start;
}

static int map_kind(const maps_line_t *l)
{
    if (l->path_len && l->path[0] == '/')
        return AGT_MAP_FILE;
    if (l->path_len == 6 && !memcmp(l->path, "[vdso]", 6))
        return AGT_MAP_VDSO;
    if (l->path_len == 10 && !memcmp(l->path, "[vsyscall]", 10))
        return -1; /* legacy fixed page, never a frame worth naming */
    return AGT_MAP_ANON;
}

int agt_proc_parse_maps(agt_proc_t *p, const char *text, size_t len)
{
    char *copy = lc_xstrndup(text, len);
    agt_map_t *maps = NULL;
    size_t n = 0, cap = 0, paths_len = 0;
    size_t *path_offs = NULL, cap_offs = 0;
    char *paths = lc_xmalloc(len + 1);
    for (char *line = copy, *next; line && *line && n < PROC_MAX_MAPS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        maps_line_t l;
        int kind;
        if (!parse_maps_line(line, &l) || !l.exec || (kind = map_kind(&l)) < 0)
            continue;
        maps = lc_xgrow(maps, &cap, n + 1, sizeof(*maps));
        path_offs = lc_xgrow(path_offs, &cap_offs, n + 1, sizeof(*path_offs));
        memcpy(paths + paths_len, l.path, l.path_len);
        paths[paths_len + l.path_len] = '\0';
        path_offs[n] = paths_len;
        maps[n++] = (agt_map_t){l.start, l.end, l.offset, l.dev, l.inode, NULL, "", kind};
        paths_len += l.path_len + 1;
    }
    for (size_t i = 0; i < n; i++)
        maps[i].path = paths + path_offs[i];
    lc_free(path_offs);
    lc_free(copy);
    p->maps = maps;
    p->n_maps = n;
    p->map_paths = paths;
    return 0;
}

/* Points each file mapping at its cached ELF object (see the file comment). */
static void resolve_elfs(agt_procs_t *t, agt_proc_t *p)
{
    char by_range[160], by_root[4200];
    for (size_t i = 0; i < p->n_maps; i++) {
        agt_map_t *m = &p->maps[i];
        if (m->kind == AGT_MAP_VDSO) {
            m->elf = agt_elfcache_vdso(t->elfs);
            continue;
        }
        if (m->kind != AGT_MAP_FILE)
            continue;
        snprintf(by_range, sizeof(by_range), "%s/%u/map_files/%llx-%llx", t->procfs, p->pid,
                 (unsigned long long)m->start, (unsigned long long)m->end);
        snprintf(by_root, sizeof(by_root), "%s/%u/root%s", t->procfs, p->pid, m->path);
        m->elf = agt_elfcache_get(t->elfs, m->dev, m->inode, by_range, by_root, m->path);
    }
}

static int read_maps(agt_procs_t *t, agt_proc_t *p)
{
    char path[128];
    size_t len;
    proc_path(t, p, "maps", path, sizeof(path));
    char *text = read_text(path, &len);
    if (!text)
        return -errno;
    proc_drop_maps(t, p);
    int rc = agt_proc_parse_maps(p, text, len);
    lc_free(text);
    if (!rc)
        resolve_elfs(t, p);
    if (!rc && t->on_maps)
        t->on_maps(t->hook_data, p);
    return rc;
}

int agt_proc_refresh_maps(agt_procs_t *t, agt_proc_t *p)
{
    return read_maps(t, p);
}

int agt_proc_snapshot(agt_procs_t *t, agt_proc_t *p)
{
    p->needs_snapshot = false;
    int rc = read_maps(t, p);
    if (rc == -ENOENT || rc == -ESRCH)
        return rc; /* gone: keep what the BPF side told us */
    read_comm(t, p);
    read_exe(t, p);
    read_cgroup(t, p);
    read_nspid(t, p);
    p->snapshot_ok = true;
    p->labels_ready = false;
    agt_perfmap_fini(&p->perfmap);
    return 0;
}

const agt_map_t *agt_proc_find_map(const agt_proc_t *p, uint64_t addr)
{
    size_t lo = 0, hi = p->n_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const agt_map_t *m = &p->maps[mid];
        if (addr < m->start)
            hi = mid;
        else if (addr >= m->end)
            lo = mid + 1;
        else
            return m;
    }
    return NULL;
}

static bool proc_alive(const agt_procs_t *t, const agt_proc_t *p)
{
    char path[64];
    snprintf(path, sizeof(path), "%s/%u", t->procfs, p->pid);
    return access(path, F_OK) == 0;
}

void agt_procs_evict(agt_procs_t *t, uint64_t round, uint64_t idle_rounds)
{
    uint64_t *doomed = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->by_pid.cap; i++) {
        if (!t->by_pid.keys[i])
            continue;
        agt_proc_t *p = (agt_proc_t *)(uintptr_t)t->by_pid.vals[i];
        uint64_t idle = round - p->last_sample_round;
        if (idle <= idle_rounds || (idle <= 4 * idle_rounds && proc_alive(t, p)))
            continue;
        doomed = lc_xgrow(doomed, &cap, n + 1, sizeof(*doomed));
        doomed[n++] = p->pid;
    }
    for (size_t i = 0; i < n; i++) {
        proc_free(t, agt_procs_get(t, (uint32_t)doomed[i]));
        agt_u64map_del(&t->by_pid, doomed[i]);
    }
    lc_free(doomed);
}
