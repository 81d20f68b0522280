/*
 * symbolizer_dwarf.c — frames at a file offset of one ELF file, with libdwfl
 * (elfutils): the offset becomes a virtual address through the PT_LOAD
 * segment holding it (debug files made by `objcopy --only-keep-debug` keep
 * the program headers), then
 *   - DWARF: the scopes at the address (dwarf_getscopes), innermost first;
 *     each inlined subroutine is a frame at the line the line table gives
 *     (for the innermost) or at the call site its inner frame records
 *     (DW_AT_call_file / DW_AT_call_line), up to the enclosing subprogram;
 *   - else the ELF symbol table (.symtab, else .dynsym): one frame, no line.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer_int.h"

/* Inline depth kept for one address: deeper nests keep their innermost. */
#define MAX_FRAMES 64

struct symfile_s {
    Dwfl *dwfl;
    Dwfl_Module *mod;
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
    dwfl_end(f->dwfl);
    lc_free(f);
}

/* The module address of a file offset: through the PT_LOAD segment holding
 * it when the file has the segments' bytes (a binary, stripped or not). A
 * debug file made by `objcopy --only-keep-debug` keeps the segments' addresses
 * but not their file offsets (p_offset and p_filesz are 0); then the offset is
 * taken relative to the image base (the lowest segment, which maps offset 0),
 * as GNU ld lays out the segments before the writable one: the code's offsets
 * equal its addresses minus the base. */
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
    *addr = off + base + bias;
    return have_base;
}

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
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

static bool is_function(Dwarf_Die *die)
{
    int tag = dwarf_tag(die);
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

/* The function an inlined subroutine's code sits in: its nearest enclosing
 * function scope (dwarf_getscopes_die walks the concrete tree, where
 * dwarf_getscopes continues through the abstract origin). */
static bool enclosing_function(Dwarf_Die *die, Dwarf_Die *out)
{
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes_die(die, &scopes);
    bool found = false;
    for (int i = 1; i < n && !found; i++)
        if (is_function(&scopes[i])) {
            *out = scopes[i];
            found = true;
        }
    free(scopes);
    return found;
}

static void dwarf_frames(symfile_t *f, Dwarf_Addr addr, frames_t *fr)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(f->mod, addr, &bias);
    if (!cu)
        return;
    const char *file = NULL;
    int line = 0;
    Dwfl_Line *ln = dwfl_module_getsrc(f->mod, addr);
    if (ln)
        file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
    Dwarf_Die *scopes = NULL, die;
    int n = dwarf_getscopes(cu, addr - bias, &scopes);
    bool found = false;
    for (int i = 0; i < n && !found; i++)
        if (is_function(&scopes[i])) {
            die = scopes[i];
            found = true;
        }
    free(scopes);
    while (found && fr->n < MAX_FRAMES) {
        frames_push(fr, die_name(&die), file, line);
        if (dwarf_tag(&die) == DW_TAG_subprogram)
            break;
        call_site(cu, &die, &file, &line);
        Dwarf_Die outer;
        found = enclosing_function(&die, &outer);
        die = outer;
    }
}

static void symtab_frame(symfile_t *f, Dwarf_Addr addr, frames_t *fr)
{
    GElf_Off off;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(f->mod, addr, &off, &sym, NULL, NULL, NULL);
    frames_push(fr, name, NULL, 0);
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
        d->function = lc_arena_strdup(a, fr->f[i].function);
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
            symtab_frame(f, addr, &fr);
    }
    return frames_copy(&fr, a, out);
}
