/*
 * perfmap.c — symbols of JIT-compiled code from perf map files
 * (/tmp/perf-<pid>.map, one "START SIZE name" line per function, hex
 * numbers), the convention of the JVM, V8/Node, .NET, LuaJIT and others. The
 * runtime appends as it compiles, so the file is re-read when its size
 * changed; later entries for the same address win, as in perf.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_int.h"
#include "lc/utf8.h"

#define PERFMAP_MAX_ENTRIES (4u << 20)

typedef struct pm_entry_s {
    uint64_t start, size;
    uint32_t name;
    uint32_t seq; /* line order: the last definition of an address wins */
} pm_entry_t;

static int pm_entry_cmp(const void *a, const void *b)
{
    const pm_entry_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0; /* newest first */
}

void agt_perfmap_init(agt_perfmap_t *pm)
{
    memset(pm, 0, sizeof(*pm));
    pm->loaded_size = -1;
}

void agt_perfmap_fini(agt_perfmap_t *pm)
{
    lc_free(pm->starts);
    lc_free(pm->sizes);
    lc_free(pm->names);
    lc_free(pm->text);
    agt_perfmap_init(pm);
}

/* "START SIZE name": returns false for malformed lines. */
static bool pm_parse_line(const char *p, const char *end, uint64_t *start, uint64_t *size,
                          const char **name, size_t *name_len)
{
    char num[40];
    for (int field = 0; field < 2; field++) {
        while (p < end && *p == ' ')
            p++;
        size_t n = 0;
        while (p < end && *p != ' ' && n < sizeof(num) - 1)
            num[n++] = *p++;
        num[n] = '\0';
        char *stop;
        uint64_t v = strtoull(num, &stop, 16);
        if (!n || *stop)
            return false;
        *(field ? size : start) = v;
    }
    if (p >= end || *p != ' ')
        return false;
    *name = p + 1;
    *name_len = (size_t)(end - *name);
    return *name_len > 0;
}

static void pm_install(agt_perfmap_t *pm, pm_entry_t *v, size_t n, char *text)
{
    if (n)
        qsort(v, n, sizeof(*v), pm_entry_cmp);
    agt_perfmap_fini(pm);
    pm->starts = lc_xmalloc((n ? n : 1) * sizeof(*pm->starts));
    pm->sizes = lc_xmalloc((n ? n : 1) * sizeof(*pm->sizes));
    pm->names = lc_xmalloc((n ? n : 1) * sizeof(*pm->names));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && pm->starts[k - 1] == v[i].start)
            continue; /* an older definition of the same address */
        pm->starts[k] = v[i].start;
        pm->sizes[k] = v[i].size;
        pm->names[k] = v[i].name;
        k++;
    }
    pm->n = k;
    pm->text = text;
}

int agt_perfmap_parse(agt_perfmap_t *pm, const char *text, size_t len)
{
    char *names = lc_xmalloc(len + 1);
    size_t used = 0, n = 0, cap = 0;
    pm_entry_t *v = NULL;
    for (const char *p = text, *end = text + len; p < end && n < PERFMAP_MAX_ENTRIES;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        uint64_t start = 0, size = 0;
        const char *name;
        size_t name_len;
        if (pm_parse_line(p, line_end, &start, &size, &name, &name_len) && start) {
            memcpy(names + used, name, name_len);
            names[used + name_len] = '\0';
            lc_utf8_sanitize(names + used);
            v = lc_xgrow(v, &cap, n + 1, sizeof(*v));
            v[n] = (pm_entry_t){start, size, (uint32_t)used, (uint32_t)n};
            n++;
            used += name_len + 1;
        }
        p = eol ? eol + 1 : end;
    }
    off_t keep = pm->loaded_size;
    pm_install(pm, v, n, names);
    pm->loaded_size = keep;
    lc_free(v);
    return 0;
}

int agt_perfmap_refresh(agt_perfmap_t *pm, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    if (!rc && (st.st_size > AGT_PERFMAP_MAX_BYTES || !S_ISREG(st.st_mode)))
        rc = LC_ETOOBIG;
    if (rc || st.st_size == pm->loaded_size) {
        close(fd);
        return rc;
    }
    size_t len = (size_t)st.st_size, got = 0;
    char *text = lc_xmalloc(len + 1);
    while (got < len) {
        ssize_t r = read(fd, text + got, len - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    rc = agt_perfmap_parse(pm, text, got);
    pm->loaded_size = (off_t)got;
    lc_free(text);
    return rc;
}

const char *agt_perfmap_lookup(const agt_perfmap_t *pm, uint64_t addr)
{
    if (!pm->n || addr < pm->starts[0])
        return NULL;
    size_t lo = 0, hi = pm->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (pm->starts[mid] <= addr)
            lo = mid;
        else
            hi = mid;
    }
    return addr - pm->starts[lo] < pm->sizes[lo] ? pm->text + pm->names[lo] : NULL;
}
