/*
 * kallsyms.c — kernel frames are symbolized from /proc/kallsyms, which gives
 * the real (KASLR-shifted) addresses of the running kernel, its modules and
 * JIT-compiled BPF programs. Only text symbols (t/T) are kept; a frame
 * belongs to the closest symbol at or below it. Module symbols keep their
 * module in brackets ("nf_hook_slow [nf_tables]") so they stay apart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_int.h"
#include "lc/clock.h"

#define KALLSYMS_MAX_SYMBOLS (4u << 20)
#define KALLSYMS_MAX_TEXT ((size_t)256 << 20)

typedef struct ks_entry_s {
    uint64_t addr;
    uint32_t name;
} ks_entry_t;

static int ks_entry_cmp(const void *a, const void *b)
{
    const ks_entry_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Appends "name" or "name [module]" to text; returns its offset. */
static uint32_t ks_add_name(lc_buf_t *text, const char *name, const char *module)
{
    uint32_t off = (uint32_t)text->len;
    int rc = lc_buf_puts(text, name);
    if (!rc && module && *module)
        rc = lc_buf_printf(text, " %s", module);
    if (!rc)
        rc = lc_buf_putc(text, '\0');
    return rc ? UINT32_MAX : off;
}

/* One line: "ffffffff81000000 T _stext" or "... t name\t[module]". */
static bool ks_parse_line(char *line, uint64_t *addr, char *type, char **name, char **module)
{
    char *end;
    *addr = strtoull(line, &end, 16);
    if (end == line || *end != ' ' || !end[1] || end[2] != ' ')
        return false;
    *type = end[1];
    *name = end + 3;
    *module = NULL;
    char *tab = strpbrk(*name, "\t\n");
    if (tab) {
        bool has_module = *tab == '\t';
        *tab = '\0';
        if (has_module) {
            *module = tab + 1;
            (*module)[strcspn(*module, "\n")] = '\0';
        }
    }
    return **name != '\0';
}

int agt_kallsyms_load(const char *path, agt_kallsyms_t *ks)
{
    memset(ks, 0, sizeof(*ks));
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    lc_buf_t text;
    lc_buf_init(&text, KALLSYMS_MAX_TEXT);
    ks_entry_t *v = NULL;
    size_t n = 0, cap = 0, nonzero = 0;
    char line[1024];
    int rc = 0;
    while (fgets(line, sizeof(line), f) && n < KALLSYMS_MAX_SYMBOLS) {
        uint64_t addr;
        char type, *name, *module;
        if (!ks_parse_line(line, &addr, &type, &name, &module) || (type != 't' && type != 'T'))
            continue;
        uint32_t off = ks_add_name(&text, name, module);
        if (off == UINT32_MAX) {
            rc = LC_ETOOBIG;
            break;
        }
        v = lc_xgrow(v, &cap, n + 1, sizeof(*v));
        v[n++] = (ks_entry_t){addr, off};
        nonzero += addr != 0;
    }
    fclose(f);
    if (!rc && n > 0 && nonzero == 0)
        rc = LC_EUNSUPPORTED;
    if (!rc && n == 0)
        rc = LC_EINPUT;
    if (rc) {
        lc_free(v);
        lc_buf_fini(&text);
        return rc;
    }
    qsort(v, n, sizeof(*v), ks_entry_cmp);
    ks->addrs = lc_xmalloc(n * sizeof(*ks->addrs));
    ks->names = lc_xmalloc(n * sizeof(*ks->names));
    for (size_t i = 0; i < n; i++) {
        ks->addrs[i] = v[i].addr;
        ks->names[i] = v[i].name;
    }
    lc_free(v);
    ks->n = n;
    size_t len;
    ks->text = (char *)lc_buf_steal(&text, &len);
    ks->loaded_ns = lc_monotonic_ns();
    return 0;
}

void agt_kallsyms_fini(agt_kallsyms_t *ks)
{
    lc_free(ks->addrs);
    lc_free(ks->names);
    lc_free(ks->text);
    memset(ks, 0, sizeof(*ks));
}

const char *agt_kallsyms_lookup(const agt_kallsyms_t *ks, uint64_t addr)
{
    if (!ks->n || addr < ks->addrs[0])
        return NULL;
    size_t lo = 0, hi = ks->n; /* last entry with addrs[i] <= addr */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->addrs[mid] <= addr)
            lo = mid;
        else
            hi = mid;
    }
    return ks->text + ks->names[lo];
}
