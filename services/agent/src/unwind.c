/*
 * unwind.c — the BPF unwinder's tables, on the user-space side.
 *
 * Every ELF object carries its rows (cfi.c, built when the object is
 * loaded). The first process that maps an object gets those rows copied into
 * an extent of the `unwind_rows` array map, which user space writes through
 * an mmap; every other process mapping the same object (same file, or same
 * build id through another mount namespace: elfcache.c) points at the same
 * extent. A process' entry in `unwind_procs` lists its executable mappings,
 * each with the address bias and the extent of its object; without an entry
 * the BPF program falls back to frame pointers (bpf_get_stack).
 *
 * An object's rows live in one place at a time: in user memory while no
 * process maps it (built by cfi.c, or copied back on release), in its
 * extent of the map while one does — the agent's RSS does not hold a second
 * copy of every loaded table.
 *
 * Extents are freed when no process maps their object any more (the
 * elfcache's release hook, at the end of each drain), but only become
 * reusable after the next RCU quiescence (agt_unwind_quiesced): a program
 * that looked up a process entry just before it was deleted may still be
 * reading the old rows. The array's size is the memory cap; an object that
 * does not fit is unwound with frame pointers and counted.
 *
 * Threading: the agent's job only (one at a time), like procs.c.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent_int.h"
#include "lc/log.h"

typedef struct unw_extent_s {
    uint32_t start, len;
} unw_extent_t;

struct agt_unwind_s {
    int rows_fd, procs_fd;
    uint32_t rows_cap;
    struct agt_unwind_row *rows; /* mmap of unwind_rows */
    size_t mapped_bytes;
    unw_extent_t *free_list; /* sorted by start, coalesced */
    size_t n_free, cap_free;
    unw_extent_t *pending; /* freed, reusable after the next quiescence */
    size_t n_pending, cap_pending;
    struct agt_unwind_proc *scratch;
    agt_unwind_stats_t stats;
};

int agt_unwind_new(int rows_fd, uint32_t rows_cap, int procs_fd, agt_unwind_t **out)
{
    *out = NULL;
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)rows_cap * sizeof(struct agt_unwind_row);
    bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rows_fd, 0);
    if (mem == MAP_FAILED)
        return -errno;
    agt_unwind_t *u = lc_xcalloc(1, sizeof(*u));
    u->rows_fd = rows_fd;
    u->procs_fd = procs_fd;
    u->rows_cap = rows_cap;
    u->rows = mem;
    u->mapped_bytes = bytes;
    u->free_list = lc_xmalloc(sizeof(*u->free_list));
    u->free_list[0] = (unw_extent_t){0, rows_cap};
    u->n_free = u->cap_free = 1;
    u->scratch = lc_xcalloc(1, sizeof(*u->scratch));
    u->stats.rows_capacity = rows_cap;
    *out = u;
    return 0;
}

void agt_unwind_free(agt_unwind_t *u)
{
    if (!u)
        return;
    munmap(u->rows, u->mapped_bytes);
    lc_free(u->free_list);
    lc_free(u->pending);
    lc_free(u->scratch);
    lc_free(u);
}

/* ---------------------------------------------------------------- extents */

static bool extent_alloc(agt_unwind_t *u, uint32_t len, uint32_t *start)
{
    for (size_t i = 0; i < u->n_free; i++) { /* first fit */
        unw_extent_t *x = &u->free_list[i];
        if (x->len < len)
            continue;
        *start = x->start;
        x->start += len;
        x->len -= len;
        if (!x->len) {
            memmove(x, x + 1, (u->n_free - i - 1) * sizeof(*x));
            u->n_free--;
        }
        return true;
    }
    return false;
}

static void extent_free(agt_unwind_t *u, unw_extent_t x)
{
    size_t i = 0;
    while (i < u->n_free && u->free_list[i].start < x.start)
        i++;
    u->free_list = lc_xgrow(u->free_list, &u->cap_free, u->n_free + 1, sizeof(*u->free_list));
    memmove(&u->free_list[i + 1], &u->free_list[i], (u->n_free - i) * sizeof(x));
    u->free_list[i] = x;
    u->n_free++;
    if (i + 1 < u->n_free && x.start + x.len == u->free_list[i + 1].start) {
        u->free_list[i].len += u->free_list[i + 1].len;
        memmove(&u->free_list[i + 1], &u->free_list[i + 2], (u->n_free - i - 2) * sizeof(x));
        u->n_free--;
    }
    if (i > 0 && u->free_list[i - 1].start + u->free_list[i - 1].len == u->free_list[i].start) {
        u->free_list[i - 1].len += u->free_list[i].len;
        memmove(&u->free_list[i], &u->free_list[i + 1], (u->n_free - i - 1) * sizeof(x));
        u->n_free--;
    }
}

void agt_unwind_quiesced(agt_unwind_t *u)
{
    for (size_t i = 0; i < u->n_pending; i++)
        extent_free(u, u->pending[i]);
    u->n_pending = 0;
}

/* ---------------------------------------------------------------- objects */

/* Copies e's rows into the map unless they are there already. */
static bool load_object(agt_unwind_t *u, agt_elf_t *e)
{
    if (e->unw_loaded)
        return true;
    if (!e->cfi.n || e->cfi.n > (1u << AGT_UNWIND_MAX_ROWS_LOG2))
        return false;
    uint32_t start;
    if (!extent_alloc(u, (uint32_t)e->cfi.n, &start)) {
        if (!e->unw_full_counted) { /* count each object once, not each process */
            u->stats.objects_full++;
            e->unw_full_counted = true;
        }
        return false;
    }
    memcpy(&u->rows[start], e->cfi.v, e->cfi.n * sizeof(*e->cfi.v));
    lc_free(e->cfi.v); /* the map holds them now */
    e->cfi.v = NULL;
    e->cfi.cap = 0;
    e->unw_start = start;
    e->unw_loaded = true;
    u->stats.rows_used += e->cfi.n;
    u->stats.objects++;
    u->stats.objects_loaded_total++;
    return true;
}

void agt_unwind_release_object(agt_unwind_t *u, agt_elf_t *e)
{
    if (!e->unw_loaded)
        return;
    /* Back into user memory: a process may map the object again later. */
    e->cfi.v = lc_xmalloc(e->cfi.n * sizeof(*e->cfi.v));
    memcpy(e->cfi.v, &u->rows[e->unw_start], e->cfi.n * sizeof(*e->cfi.v));
    e->cfi.cap = e->cfi.n;
    u->pending = lc_xgrow(u->pending, &u->cap_pending, u->n_pending + 1, sizeof(*u->pending));
    u->pending[u->n_pending++] = (unw_extent_t){e->unw_start, (uint32_t)e->cfi.n};
    e->unw_loaded = false;
    e->unw_full_counted = false;
    u->stats.rows_used -= e->cfi.n;
    u->stats.objects--;
}

/* ---------------------------------------------------------------- processes */

int agt_unwind_set_proc(agt_unwind_t *u, agt_proc_t *p)
{
    struct agt_unwind_proc *v = u->scratch;
    memset(v, 0, sizeof(*v));
    v->start_ns = p->start_ns;
    for (size_t i = 0; i < p->n_maps && v->n_maps < AGT_UNWIND_MAX_MAPS; i++) {
        const agt_map_t *m = &p->maps[i];
        struct agt_unwind_map *o = &v->maps[v->n_maps++];
        *o = (struct agt_unwind_map){.start = m->start, .end = m->end};
        uint64_t bias;
        if (m->elf && load_object(u, m->elf) && agt_map_bias(m, &bias)) {
            o->bias = bias;
            o->table_start = m->elf->unw_start;
            o->table_len = (uint32_t)m->elf->cfi.n;
        }
    }
    if (p->n_maps > AGT_UNWIND_MAX_MAPS) {
        /* the rest unwinds by frame pointer; asking for maps again would not help */
        v->flags = AGT_UNWIND_ASKED;
        u->stats.procs_truncated++;
    }
    int rc = bpf_map_update_elem(u->procs_fd, &p->pid, v, BPF_ANY);
    if (rc) {
        u->stats.procs_failed++;
        return rc;
    }
    p->unwind_set = true;
    return 0;
}

void agt_unwind_forget_proc(agt_unwind_t *u, agt_proc_t *p)
{
    if (!p->unwind_set)
        return;
    p->unwind_set = false;
    (void)bpf_map_delete_elem(u->procs_fd, &p->pid); /* ENOENT after an exec: fine */
}

void agt_unwind_stats(const agt_unwind_t *u, agt_unwind_stats_t *out)
{
    *out = u->stats;
}
