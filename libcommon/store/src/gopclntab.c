/*
 * gopclntab.c — lc/gopclntab.h: a Go 1.18+ .gopclntab read for one address
 * at a time: the function table searched by entry offset, the function's
 * record, its name, and its file and line from the pc-value tables. Every
 * read goes through at(), which refuses anything past the table.
 */
#include <string.h>

#include "lc/gopclntab.h"

#define GOPCLN_MAGIC_118 0xfffffff0u /* Go 1.18, 1.19 */
#define GOPCLN_MAGIC_120 0xfffffff1u /* Go 1.20 and later */
#define GOPCLN_WORDS 8               /* nfunc .. pclnOffset */
#define GOPCLN_FUNC_BYTES 36         /* entryOff .. cuOffset: 9 x uint32 */
#define GOPCLN_NO_FILE 0xffffffffu   /* a cutab entry for a file not in the unit */

/* n bytes at off, or NULL when they do not lie inside the table. */
static const uint8_t *at(const lc_gopclntab_t *t, uint64_t off, uint64_t n)
{
    if (off > t->size || n > t->size - off)
        return NULL;
    return t->data + off;
}

static bool read_u32(const lc_gopclntab_t *t, uint64_t off, uint32_t *v)
{
    const uint8_t *p = at(t, off, 4);
    if (!p)
        return false;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return true;
}

static uint64_t pcln_word(const uint8_t *p, uint8_t ptr_size)
{
    uint64_t v = 0;
    for (int i = ptr_size - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The NUL-terminated string at off, or NULL. */
static const char *string_at(const lc_gopclntab_t *t, uint64_t off)
{
    const uint8_t *p = at(t, off, 1);
    if (!p || !memchr(p, 0, t->size - off))
        return NULL;
    return (const char *)p;
}

bool lc_gopclntab_open(const uint8_t *data, size_t size, uint64_t text_addr, lc_gopclntab_t *out)
{
    *out = (lc_gopclntab_t){.data = data, .size = size};
    uint32_t magic;
    if (!read_u32(out, 0, &magic) || (magic != GOPCLN_MAGIC_118 && magic != GOPCLN_MAGIC_120))
        return false;
    const uint8_t *h = at(out, 4, 4);
    if (!h || h[0] || h[1] || (h[2] != 1 && h[2] != 2 && h[2] != 4) || (h[3] != 4 && h[3] != 8))
        return false;
    out->quantum = h[2];
    out->ptr_size = h[3];
    const uint8_t *w = at(out, 8, (uint64_t)GOPCLN_WORDS * out->ptr_size);
    if (!w)
        return false;
    uint64_t v[GOPCLN_WORDS];
    for (int i = 0; i < GOPCLN_WORDS; i++)
        v[i] = pcln_word(w + (size_t)i * out->ptr_size, out->ptr_size);
    out->nfunc = v[0];
    out->text_start = v[2] ? v[2] : text_addr;
    out->funcnametab = v[3];
    out->cutab = v[4];
    out->filetab = v[5];
    out->pctab = v[6];
    out->functab = v[7];
    /* the function table (nfunc + 1 entries of 8 bytes) must fit */
    return out->nfunc > 0 && out->nfunc < size / 8 && at(out, out->functab, (out->nfunc + 1) * 8);
}

/* The function table's entry offset of function i (i <= nfunc). */
static uint32_t entry_off(const lc_gopclntab_t *t, uint64_t i)
{
    uint32_t v = 0;
    (void)read_u32(t, t->functab + i * 8, &v); /* in bounds: checked at open */
    return v;
}

/* The index of the function holding text offset off, or -1. */
static int64_t find_func(const lc_gopclntab_t *t, uint64_t off)
{
    if (off >= entry_off(t, t->nfunc) || off < entry_off(t, 0))
        return -1;
    uint64_t lo = 0, hi = t->nfunc; /* entry_off(lo) <= off < entry_off(hi) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (entry_off(t, mid) <= off)
            lo = mid;
        else
            hi = mid;
    }
    return (int64_t)lo;
}

static bool read_uvarint(const lc_gopclntab_t *t, uint64_t *off, uint32_t *v)
{
    uint32_t x = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        const uint8_t *p = at(t, (*off)++, 1);
        if (!p)
            return false;
        x |= (uint32_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The value a pc-value table (at pctab + table) gives pc, for a function
 * starting at entry; false when the table ends first or is malformed. */
static bool pc_value(const lc_gopclntab_t *t, uint32_t table, uint64_t entry, uint64_t pc,
                     int32_t *out)
{
    if (table == 0)
        return false;
    uint64_t off = t->pctab + table, at_pc = entry;
    int32_t val = -1;
    for (bool first = true;; first = false) {
        uint32_t vdelta, pcdelta;
        if (!read_uvarint(t, &off, &vdelta) || (vdelta == 0 && !first) ||
            !read_uvarint(t, &off, &pcdelta))
            return false;
        /* zig-zag, wrapping as Go's int32 arithmetic does */
        val = (int32_t)((uint32_t)val + ((vdelta >> 1) ^ (uint32_t) - (int32_t)(vdelta & 1)));
        at_pc += (uint64_t)pcdelta * t->quantum;
        if (pc < at_pc) {
            *out = val;
            return true;
        }
    }
}

static const char *file_name(const lc_gopclntab_t *t, uint32_t cu_offset, int32_t fileno)
{
    uint32_t off;
    if (fileno < 0 || !read_u32(t, t->cutab + ((uint64_t)cu_offset + (uint64_t)fileno) * 4, &off) ||
        off == GOPCLN_NO_FILE)
        return NULL;
    return string_at(t, t->filetab + off);
}

bool lc_gopclntab_lookup(const lc_gopclntab_t *t, uint64_t pc, lc_gopclntab_frame_t *out)
{
    if (pc < t->text_start)
        return false;
    int64_t i = find_func(t, pc - t->text_start);
    uint32_t func_off, f[GOPCLN_FUNC_BYTES / 4];
    if (i < 0 || !read_u32(t, t->functab + (uint64_t)i * 8 + 4, &func_off))
        return false;
    for (size_t k = 0; k < GOPCLN_FUNC_BYTES / 4; k++)
        if (!read_u32(t, t->functab + func_off + k * 4, &f[k]))
            return false;
    /* f: entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset */
    const char *name = string_at(t, t->funcnametab + f[1]);
    if (!name || !name[0])
        return false;
    uint64_t entry = t->text_start + f[0];
    int32_t fileno = -1, line = 0;
    const char *file = pc_value(t, f[5], entry, pc, &fileno) ? file_name(t, f[8], fileno) : NULL;
    if (!pc_value(t, f[6], entry, pc, &line) || line < 0)
        line = 0;
    *out = (lc_gopclntab_frame_t){.function = name, .file = file ? file : "", .line = line};
    return true;
}
