/*
 * symbolizer_dwarf.c — frames at a file offset of one ELF file, with libdwfl
 * (elfutils): the offset becomes a virtual address through the PT_LOAD
 * segment holding it (debug files made by `objcopy --only-keep-debug` keep
 * the program headers), then
 *   - DWARF: the subprogram holding the address, found by binary search in
 *     an index of its compile unit's function ranges (built once per unit:
 *     dwarf_getscopes would walk the whole unit for every address), then the
 *     inlined subroutines holding it, descending from the subprogram; each is
 *     a frame, innermost first, at the line the line table gives (for the
 *     innermost) or at the call site its inner frame records
 *     (DW_AT_call_file / DW_AT_call_line);
 *   - else, in a Go binary, its .gopclntab (lc/gopclntab.h): the function,
 *     file and line, no inlined frames;
 *   - else the ELF symbol table (.symtab, else .dynsym): one frame, no line.
 * C++ and Rust names are demangled as they are copied out (symdemangle).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "lc/gopclntab.h"
#include "symbolizer_int.h"

/* Inline depth kept for one address: deeper nests keep their innermost. */
#define MAX_FRAMES 64

/* One function's code range in a compile unit. */
typedef struct func_range_s {
    Dwarf_Addr low, high; /* [low, high) */
    Dwarf_Off die;        /* the DW_TAG_subprogram */
} func_range_t;

/* The functions of one compile unit, sorted by low: found by binary search,
 * where dwarf_getscopes walks the whole unit for every address. */
typedef struct cu_index_s {
    Dwarf_Off cu;
    func_range_t *ranges;
    size_t n, cap;
} cu_index_t;

struct symfile_s {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    cu_index_t *cus; /* built on first use of each unit */
    size_t n_cus, cap_cus;
    bool go_checked;   /* looked for .gopclntab */
    bool has_go;       /* ... and found one */
    lc_gopclntab_t go; /* into the module's ELF data */
};

/* Never look anywhere else for the DWARF: the file given is the debug file. */
static int no_separate_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                                 Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                                 GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
    (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
    return -1;
}

static const Dwfl_Callbacks offline_callbacks = {
    .find_debuginfo = no_separate_debuginfo,
    .section_address = dwfl_offline_section_address,
};

symfile_t *symfile_open(const char *path)
{
    Dwfl *dwfl = dwfl_begin(&offline_callbacks);
    if (!dwfl)
        return NULL;
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_offline(dwfl, "debug", path, -1);
    if (!mod || dwfl_report_end(dwfl, NULL, NULL) != 0) {
        dwfl_end(dwfl);
        return NULL;
    }
    symfile_t *f = lc_xcalloc(1, sizeof(*f));
    f->dwfl = dwfl;
    f->mod = mod;
    return f;
}

void symfile_close(symfile_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_cus; i++)
        lc_free(f->cus[i].ranges);
    lc_free(f->cus);
    dwfl_end(f->dwfl);
    lc_free(f);
}

/* The module address of a file offset: through the PT_LOAD segment holding
 * it when the file has the segments' bytes (a binary, stripped or not). A
 * debug file made by `objcopy --only-keep-debug` keeps the segments' addresses
 * but not their file offsets (p_offset and p_filesz are 0); then the offset is
 * taken relative to the image base (the lowest segment, which maps offset 0),
 * as GNU ld lays out the segments before the writable one: the code's offsets
 * equal its addresses minus the base. Without any PT_LOAD the base is 0. */
static bool offset_address(symfile_t *f, uint64_t off, Dwarf_Addr *addr)
{
    Dwarf_Addr bias;
    Elf *elf = dwfl_module_getelf(f->mod, &bias);
    size_t n;
    if (!elf || elf_getphdrnum(elf, &n) != 0)
        return false;
    bool have_base = false;
    uint64_t base = 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (off >= ph.p_offset && off - ph.p_offset < ph.p_filesz) {
            *addr = off - ph.p_offset + ph.p_vaddr + bias;
            return true;
        }
        uint64_t page = ph.p_align > 1 ? ph.p_vaddr & ~(ph.p_align - 1) : ph.p_vaddr;
        if (!have_base || page < base)
            base = page;
        have_base = true;
    }
    /* no PT_LOAD at all (the Parca Agent's extraction keeps only the note
     * segments): the sections' addresses are the link-time ones, base 0 */
    *addr = off + base + bias;
    return true;
}

/* The linkage name first: demangled (frames_copy) it is the qualified name
 * ("ns::Widget::draw"), where DW_AT_name of C++ and Rust is the bare one
 * ("draw"); C and Go have no linkage name. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    return name;
}

/* The call site an inlined subroutine records: its caller's file and line. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inlined, const char **file, int *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word idx, ln;
    Dwarf_Files *files;
    size_t n_files;
    *file = NULL;
    *line = 0;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &ln) == 0)
        *line = (int)ln;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &idx) == 0 &&
        dwarf_getsrcfiles(cu, &files, &n_files) == 0 && idx < n_files)
        *file = dwarf_filesrc(files, idx, NULL, NULL);
}

typedef struct frames_s {
    lc_symbol_frame_t f[MAX_FRAMES];
    size_t n;
} frames_t;

static void frames_push(frames_t *fr, const char *fn, const char *file, int line)
{
    if (fr->n < MAX_FRAMES && fn && fn[0])
        fr->f[fr->n++] = (lc_symbol_frame_t){fn, file ? file : "", line};
}

static int func_range_cmp(const void *a, const void *b)
{
    const func_range_t *x = a, *y = b;
    return (x->low > y->low) - (x->low < y->low);
}

static void index_add(cu_index_t *ix, Dwarf_Die *sub)
{
    Dwarf_Addr base, low, high;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(sub, off, &base, &low, &high)) > 0)
        if (high > low) {
            ix->ranges = lc_xgrow(ix->ranges, &ix->cap, ix->n + 1, sizeof(*ix->ranges));
            ix->ranges[ix->n++] = (func_range_t){low, high, dwarf_dieoffset(sub)};
        }
}

/* The unit's subprograms with code, at any depth outside functions (C++
 * namespaces and classes hold theirs). */
static void index_scan(cu_index_t *ix, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > MAX_FRAMES || dwarf_child(parent, &child) != 0)
        return;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram)
            index_add(ix, &child);
        else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
                 tag == DW_TAG_structure_type || tag == DW_TAG_module)
            index_scan(ix, &child, depth + 1);
    } while (dwarf_siblingof(&child, &child) == 0);
}

static cu_index_t *cu_index(symfile_t *f, Dwarf_Die *cu)
{
    Dwarf_Off off = dwarf_dieoffset(cu);
    for (size_t i = 0; i < f->n_cus; i++)
        if (f->cus[i].cu == off)
            return &f->cus[i];
    f->cus = lc_xgrow(f->cus, &f->cap_cus, f->n_cus + 1, sizeof(*f->cus));
    cu_index_t *ix = &f->cus[f->n_cus++];
    *ix = (cu_index_t){.cu = off};
    index_scan(ix, cu, 0);
    if (ix->n)
        qsort(ix->ranges, ix->n, sizeof(*ix->ranges), func_range_cmp);
    return ix;
}

/* The subprogram whose code holds addr (a unit address), by binary search. */
static bool find_subprogram(symfile_t *f, Dwarf_Die *cu, Dwarf_Addr addr, Dwarf_Die *out)
{
    cu_index_t *ix = cu_index(f, cu);
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* the first range starting after addr */
        size_t mid = lo + (hi - lo) / 2;
        if (ix->ranges[mid].low <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) /* nested ranges are rare: look back a little */
        if (ix->ranges[i].high > addr)
            return dwarf_offdie(dwarf_cu_getdwarf(cu->cu), ix->ranges[i].die, out) != NULL;
        else if (lo - i > 8)
            break;
    return false;
}

/* The inlined subroutines holding addr below die, outermost first, into
 * path (path[0] is die itself). Returns the path's length. */
static size_t inline_path(Dwarf_Die *die, Dwarf_Addr addr, Dwarf_Die path[MAX_FRAMES])
{
    size_t n = 1;
    path[0] = *die;
    Dwarf_Die scope = *die, child;
    for (int depth = 0; depth < 4 * MAX_FRAMES && n < MAX_FRAMES; depth++) {
        bool deeper = false;
        if (dwarf_child(&scope, &child) == 0)
            do {
                int tag = dwarf_tag(&child);
                if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
                    dwarf_haspc(&child, addr) == 1) {
                    if (tag == DW_TAG_inlined_subroutine)
                        path[n++] = child;
                    scope = child;
                    deeper = true;
                }
            } while (!deeper && dwarf_siblingof(&child, &child) == 0);
        if (!deeper)
            break;
    }
    return n;
}

static void dwarf_frames(symfile_t *f, Dwarf_Addr addr, frames_t *fr)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(f->mod, addr, &bias);
    Dwarf_Die sub;
    if (!cu || !find_subprogram(f, cu, addr - bias, &sub))
        return;
    const char *file = NULL;
    int line = 0;
    Dwfl_Line *ln = dwfl_module_getsrc(f->mod, addr);
    if (ln)
        file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
    Dwarf_Die path[MAX_FRAMES];
    size_t n = inline_path(&sub, addr - bias, path);
    for (size_t i = n; i-- > 0;) {
        frames_push(fr, die_name(&path[i]), file, line);
        if (i > 0)
            call_site(cu, &path[i], &file, &line);
    }
}

static void symtab_frame(symfile_t *f, Dwarf_Addr addr, frames_t *fr)
{
    GElf_Off off;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(f->mod, addr, &off, &sym, NULL, NULL, NULL);
    frames_push(fr, name, NULL, 0);
}

/* The file's .gopclntab (a Go binary's own table: `-ldflags=-s -w` keeps
 * it), found once; false when there is none with bytes in the file. */
static bool go_table(symfile_t *f)
{
    if (f->go_checked)
        return f->has_go;
    f->go_checked = true;
    Dwarf_Addr bias;
    Elf *elf = dwfl_module_getelf(f->mod, &bias);
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return false;
    Elf_Scn *table = NULL;
    uint64_t text_addr = 0;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (name && strcmp(name, ".text") == 0)
            text_addr = sh.sh_addr;
        if (name && strcmp(name, ".gopclntab") == 0 && sh.sh_type != SHT_NOBITS)
            table = scn;
    }
    Elf_Data *d = table ? elf_getdata(table, NULL) : NULL;
    f->has_go = d && d->d_buf && lc_gopclntab_open(d->d_buf, d->d_size, text_addr, &f->go);
    return f->has_go;
}

/* A Go function's frame from the pclntab: name, file, line (no inlined
 * frames: the table's inline tree is not read). */
static void go_frame(symfile_t *f, Dwarf_Addr addr, frames_t *fr)
{
    Dwarf_Addr bias;
    lc_gopclntab_frame_t g;
    if (dwfl_module_getelf(f->mod, &bias) && go_table(f) &&
        lc_gopclntab_lookup(&f->go, addr - bias, &g))
        frames_push(fr, g.function, g.file, (int)g.line);
}

static int frames_copy(const frames_t *fr, lc_arena_t *a, lc_symbols_t *out)
{
    out->n = 0;
    if (fr->n == 0)
        return 0;
    out->frames = lc_arena_calloc(a, fr->n, sizeof(*out->frames));
    if (!out->frames)
        return LC_ETOOBIG;
    for (size_t i = 0; i < fr->n; i++) {
        lc_symbol_frame_t *d = &out->frames[i];
        char *readable = symdemangle(fr->f[i].function);
        d->function = lc_arena_strdup(a, readable ? readable : fr->f[i].function);
        free(readable);
        d->file = lc_arena_strdup(a, fr->f[i].file);
        d->line = fr->f[i].line;
        if (!d->function || !d->file)
            return LC_ETOOBIG;
    }
    out->n = fr->n;
    return 0;
}

int symfile_frames(symfile_t *f, uint64_t file_offset, lc_arena_t *a, lc_symbols_t *out)
{
    frames_t fr = {.n = 0};
    Dwarf_Addr addr;
    if (offset_address(f, file_offset, &addr)) {
        dwarf_frames(f, addr, &fr);
        if (fr.n == 0)
            go_frame(f, addr, &fr);
        if (fr.n == 0)
            symtab_frame(f, addr, &fr);
    }
    return frames_copy(&fr, a, out);
}
