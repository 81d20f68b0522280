/*
 * elfcache.c — ELF objects shared by every process that maps them.
 *
 * Two indexes: (dev, inode) as /proc/PID/maps reports them, so a library
 * mapped by a thousand processes is opened once; and the build id, so the
 * same binary reached through another container's filesystem (another
 * inode) reuses the symbols already parsed. Objects are reference-counted by
 * the mappings of live processes; unreferenced ones stay cached up to
 * max_unused and are then dropped oldest first.
 *
 * Stripped objects (.dynsym only) get the symbols of their separate debug
 * file when one is installed under /usr/lib/debug/.build-id/.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "agent_int.h"
#include "lc/log.h"

#define DEBUG_ROOT "/usr/lib/debug/.build-id"

struct agt_elfcache_s {
    agt_elf_t **v; /* NULL slots are free */
    size_t n, cap;
    agt_u64map_t by_file;     /* file key -> slot + 1 */
    agt_u64map_t by_build_id; /* build id hash -> slot + 1 */
    agt_elf_t *vdso;
    bool vdso_tried;
    size_t max_unused;
    uint64_t round;
    void (*release)(void *data, agt_elf_t *e);
    void *release_data;
    agt_elfcache_stats_t stats;
};

static uint64_t file_key(uint64_t dev, uint64_t inode)
{
    uint64_t k = lc_mix64(dev * 0x9e3779b97f4a7c15ULL) ^ inode;
    return k ? k : 1;
}

static uint64_t build_id_key(const char *build_id)
{
    uint64_t k = lc_hash64(build_id, strlen(build_id), 0x62756964ULL);
    return k ? k : 1;
}

agt_elfcache_t *agt_elfcache_new(size_t max_unused)
{
    agt_elfcache_t *c = lc_xcalloc(1, sizeof(*c));
    agt_u64map_init(&c->by_file);
    agt_u64map_init(&c->by_build_id);
    c->max_unused = max_unused;
    return c;
}

static void elf_free(agt_elf_t *e)
{
    if (e) {
        agt_elf_fini(e);
        lc_free(e);
    }
}

void agt_elfcache_free(agt_elfcache_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        elf_free(c->v[i]);
    lc_free(c->v);
    elf_free(c->vdso);
    agt_u64map_fini(&c->by_file);
    agt_u64map_fini(&c->by_build_id);
    lc_free(c);
}

static agt_elf_t *slot_elf(const agt_elfcache_t *c, const uint64_t *slot)
{
    return slot && *slot && *slot <= c->n ? c->v[*slot - 1] : NULL;
}

static agt_elf_t *elfcache_take(agt_elfcache_t *c, agt_elf_t *e)
{
    e->refs++;
    e->last_used_round = c->round;
    c->stats.hits++;
    return e;
}

static size_t elfcache_insert(agt_elfcache_t *c, agt_elf_t *e)
{
    for (size_t i = 0; i < c->n; i++) {
        if (!c->v[i]) {
            c->v[i] = e;
            return i;
        }
    }
    c->v = lc_xgrow(c->v, &c->cap, c->n + 1, sizeof(*c->v));
    c->v[c->n] = e;
    return c->n++;
}

static void set_path(agt_elf_t *e, const char *path)
{
    e->path = lc_xstrdup(path);
    const char *slash = strrchr(e->path, '/');
    e->basename = slash && slash[1] ? slash + 1 : e->path;
}

/* The separate debug file of a stripped object, by build id. */
static void load_debug_file(agt_elf_t *e)
{
    if (e->has_symtab || strlen(e->build_id) < 4)
        return;
    char path[256];
    snprintf(path, sizeof(path), "%s/%.2s/%s.debug", DEBUG_ROOT, e->build_id, e->build_id + 2);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (agt_elf_load_debug_symbols(fd, e) != 0)
        LC_LOG_DEBUG("agent: unreadable debug file path=%s", path);
    close(fd);
}

static int open_either(const char *a, const char *b)
{
    int fd = a ? open(a, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0 && b)
        fd = open(b, O_RDONLY | O_CLOEXEC);
    return fd;
}

agt_elf_t *agt_elfcache_get(agt_elfcache_t *c, uint64_t dev, uint64_t inode, const char *open_path,
                            const char *alt_open_path, const char *path)
{
    uint64_t fkey = file_key(dev, inode);
    agt_elf_t *e = slot_elf(c, agt_u64map_get(&c->by_file, fkey));
    if (e && e->dev == dev && e->inode == inode)
        return elfcache_take(c, e);
    int fd = open_either(open_path, alt_open_path);
    if (fd < 0) {
        c->stats.failures++;
        return NULL;
    }
    char build_id[65];
    if (agt_elf_read_build_id(fd, build_id) == 0 && build_id[0]) {
        uint64_t *slot = agt_u64map_get(&c->by_build_id, build_id_key(build_id));
        e = slot_elf(c, slot);
        if (e && strcmp(e->build_id, build_id) == 0) {
            *agt_u64map_put(&c->by_file, fkey, NULL) = *slot;
            close(fd);
            return elfcache_take(c, e);
        }
    }
    c->stats.misses++;
    e = lc_xcalloc(1, sizeof(*e));
    int rc = agt_elf_load(fd, NULL, 0, e);
    close(fd);
    if (rc) {
        c->stats.failures++;
        elf_free(e);
        return NULL;
    }
    e->dev = dev;
    e->inode = inode;
    set_path(e, path);
    load_debug_file(e);
    size_t idx = elfcache_insert(c, e);
    *agt_u64map_put(&c->by_file, fkey, NULL) = idx + 1;
    if (e->build_id[0])
        *agt_u64map_put(&c->by_build_id, build_id_key(e->build_id), NULL) = idx + 1;
    e->refs = 1;
    e->last_used_round = c->round;
    return e;
}

/* The size of our own [vdso] mapping. */
static size_t vdso_size(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    size_t size = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi;
        if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &lo, &hi) == 2) {
            size = (size_t)(hi - lo);
            break;
        }
    }
    if (f)
        fclose(f);
    return size;
}

agt_elf_t *agt_elfcache_vdso(agt_elfcache_t *c)
{
    if (c->vdso_tried)
        return c->vdso;
    c->vdso_tried = true;
    const void *base = (const void *)getauxval(AT_SYSINFO_EHDR);
    size_t size = base ? vdso_size() : 0;
    if (!size)
        return NULL;
    void *copy = lc_xmalloc(size); /* libelf may keep pointers into the image */
    memcpy(copy, base, size);
    agt_elf_t *e = lc_xcalloc(1, sizeof(*e));
    if (agt_elf_load(-1, copy, size, e) == 0) {
        set_path(e, "[vdso]");
        c->vdso = e;
    } else {
        elf_free(e);
    }
    lc_free(copy);
    return c->vdso;
}

void agt_elfcache_unref(agt_elfcache_t *c, agt_elf_t *e)
{
    if (!e || e == c->vdso)
        return;
    LC_ASSERT(e->refs > 0);
    e->refs--;
    e->last_used_round = c->round;
}

/* Drops every index entry that points at slot idx. */
static void unindex(agt_u64map_t *m, uint64_t slot)
{
    uint64_t *doomed = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] && m->vals[i] == slot) {
            doomed = lc_xgrow(doomed, &cap, n + 1, sizeof(*doomed));
            doomed[n++] = m->keys[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        agt_u64map_del(m, doomed[i]);
    lc_free(doomed);
}

void agt_elfcache_set_release(agt_elfcache_t *c, void (*release)(void *data, agt_elf_t *e),
                              void *data)
{
    c->release = release;
    c->release_data = data;
}

void agt_elfcache_trim(agt_elfcache_t *c, uint64_t round)
{
    c->round = round;
    for (size_t i = 0; c->release && i < c->n; i++) {
        if (c->v[i] && !c->v[i]->refs)
            c->release(c->release_data, c->v[i]);
    }
    for (;;) {
        size_t unused = 0, oldest = SIZE_MAX;
        for (size_t i = 0; i < c->n; i++) {
            agt_elf_t *e = c->v[i];
            if (!e || e->refs)
                continue;
            unused++;
            if (oldest == SIZE_MAX || e->last_used_round < c->v[oldest]->last_used_round)
                oldest = i;
        }
        if (unused <= c->max_unused)
            return;
        unindex(&c->by_file, oldest + 1);
        unindex(&c->by_build_id, oldest + 1);
        if (c->release)
            c->release(c->release_data, c->v[oldest]);
        elf_free(c->v[oldest]);
        c->v[oldest] = NULL;
    }
}

void agt_elfcache_stats(const agt_elfcache_t *c, agt_elfcache_stats_t *out)
{
    *out = c->stats;
}

size_t agt_elfcache_size(const agt_elfcache_t *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->v[i] != NULL;
    return n;
}
