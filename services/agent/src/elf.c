/*
 * elf.c — what the agent needs from one ELF object, read with libelf: the
 * GNU build id, the PT_LOAD segments (to turn a file offset from
 * /proc/PID/maps into the virtual address symbols use, which handles PIE,
 * ASLR and prelinked objects alike) and the function symbols of .symtab, or
 * .dynsym when the object is stripped.
 *
 * Symbols are copied out (addresses, sizes, names in one text block) so the
 * file can be closed: the agent keeps objects for many processes open
 * otherwise. Sizes and counts are capped, since the input is any binary a
 * process on the host maps.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

#define ELF_MAX_SYMBOLS (8u << 20)
#define ELF_MAX_NAME_BYTES ((size_t)512 << 20)
#define ELF_MAX_SEGMENTS 64
#define NT_GNU_BUILD_ID_TYPE 3

typedef struct elf_sym_s {
    uint64_t addr;
    uint32_t size;
    uint32_t name;
    int rank; /* prefer global over weak over local at one address */
} elf_sym_t;

static Elf *elf_open(int fd, const void *image, size_t image_len)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return NULL;
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL)
                       : elf_memory((char *)(uintptr_t)image, image_len);
    if (elf && elf_kind(elf) != ELF_K_ELF) {
        elf_end(elf);
        return NULL;
    }
    return elf;
}

/* ---------------------------------------------------------------- build id */

static bool build_id_from_notes(Elf_Data *data, char out[65])
{
    GElf_Nhdr nhdr;
    size_t off = 0, name_off, desc_off;
    while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
        const char *name = (const char *)data->d_buf + name_off;
        if (nhdr.n_type != NT_GNU_BUILD_ID_TYPE || nhdr.n_namesz != 4 ||
            memcmp(name, "GNU", 4) != 0)
            continue;
        const uint8_t *id = (const uint8_t *)data->d_buf + desc_off;
        size_t n = nhdr.n_descsz > 32 ? 32 : nhdr.n_descsz;
        for (size_t i = 0; i < n; i++)
            snprintf(out + 2 * i, 3, "%02x", id[i]);
        out[2 * n] = '\0';
        return n > 0;
    }
    return false;
}

static void elf_build_id(Elf *elf, char out[65])
{
    out[0] = '\0';
    Elf_Scn *scn = NULL;
    GElf_Shdr shdr;
    while ((scn = elf_nextscn(elf, scn))) {
        Elf_Data *data;
        if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_NOTE &&
            (data = elf_getdata(scn, NULL)) && build_id_from_notes(data, out))
            return;
    }
    size_t n = 0; /* no section headers left (some stripped objects): PT_NOTE */
    if (elf_getphdrnum(elf, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        Elf_Data *data;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE &&
            (data = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR)) &&
            build_id_from_notes(data, out))
            return;
    }
}

int agt_elf_read_build_id(int fd, char out[65])
{
    Elf *elf = elf_open(fd, NULL, 0);
    out[0] = '\0';
    if (!elf)
        return LC_EINPUT;
    elf_build_id(elf, out);
    elf_end(elf);
    return 0;
}

/* ---------------------------------------------------------------- segments */

static void elf_segments(Elf *elf, agt_elf_t *e)
{
    size_t n = 0;
    if (elf_getphdrnum(elf, &n) != 0)
        return;
    e->segs = lc_xcalloc(n ? n : 1, sizeof(*e->segs));
    for (size_t i = 0; i < n && e->n_segs < ELF_MAX_SEGMENTS; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
            e->segs[e->n_segs++] = (agt_elf_seg_t){ph.p_offset, ph.p_vaddr, ph.p_filesz};
    }
}

bool agt_elf_offset_to_vaddr(const agt_elf_t *e, uint64_t file_offset, uint64_t *vaddr)
{
    for (size_t i = 0; i < e->n_segs; i++) {
        const agt_elf_seg_t *s = &e->segs[i];
        if (file_offset >= s->offset && file_offset - s->offset < s->filesz) {
            *vaddr = file_offset - s->offset + s->vaddr;
            return true;
        }
    }
    return false;
}

/* ---------------------------------------------------------------- symbols */

static int elf_sym_cmp(const void *a, const void *b)
{
    const elf_sym_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->rank - y->rank;
}

static int binding_rank(unsigned char info)
{
    switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    default:
        return 2;
    }
}

static Elf_Scn *find_section(Elf *elf, Elf64_Word type, GElf_Shdr *shdr)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        if (gelf_getshdr(scn, shdr) && shdr->sh_type == type && shdr->sh_entsize)
            return scn;
    }
    return NULL;
}

/* Remembers the symbols that make an object a CPython interpreter (its
 * runtime state, version word, code type and eval loop: python.c). */
static void note_python_symbol(agt_elf_t *e, const char *name, const GElf_Sym *sym)
{
    if (name[0] != '_' && name[0] != 'P')
        return;
    if (strcmp(name, "_PyRuntime") == 0)
        e->py.runtime = sym->st_value;
    else if (strcmp(name, "Py_Version") == 0)
        e->py.version = sym->st_value;
    else if (strcmp(name, "PyCode_Type") == 0)
        e->py.code_type = sym->st_value;
    else if (strcmp(name, "_PyEval_EvalFrameDefault") == 0) {
        e->py.eval = sym->st_value;
        e->py.eval_size = sym->st_size;
    }
}

/* A symbol's size; one without (crti's `_init`, hand-written assembly) ends
 * with its section at the latest, not at the next symbol: the PLT stubs that
 * follow .init were named `_init`. 0: unknown (up to the next symbol). */
static uint32_t symbol_size(Elf *elf, const GElf_Sym *sym)
{
    uint64_t size = sym->st_size;
    GElf_Shdr sh;
    Elf_Scn *scn = !size && sym->st_shndx < SHN_LORESERVE ? elf_getscn(elf, sym->st_shndx) : NULL;
    if (scn && gelf_getshdr(scn, &sh) && sym->st_value >= sh.sh_addr &&
        sym->st_value - sh.sh_addr < sh.sh_size)
        size = sh.sh_addr + sh.sh_size - sym->st_value;
    return size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
}

/* Collects FUNC/IFUNC symbols with an address from one symbol table. */
static int collect_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr, elf_sym_t **out,
                           size_t *n_out, lc_buf_t *names, agt_elf_t *e)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data)
        return LC_EINPUT;
    size_t count = shdr->sh_size / shdr->sh_entsize, n = 0, cap = 0;
    elf_sym_t *v = NULL;
    for (size_t i = 0; i < count && n < ELF_MAX_SYMBOLS; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym))
            break;
        int type = GELF_ST_TYPE(sym.st_info);
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
            continue;
        const char *name = elf_strptr(elf, shdr->sh_link, sym.st_name);
        if (!name || !*name)
            continue;
        note_python_symbol(e, name, &sym);
        if (type != STT_FUNC && type != STT_GNU_IFUNC)
            continue;
        uint32_t off = (uint32_t)names->len;
        if (lc_buf_append(names, name, strlen(name) + 1) != 0)
            break; /* name budget spent: keep what we have */
        v = lc_xgrow(v, &cap, n + 1, sizeof(*v));
        v[n++] = (elf_sym_t){sym.st_value, symbol_size(elf, &sym), off, binding_rank(sym.st_info)};
    }
    *out = v;
    *n_out = n;
    return 0;
}

/* Sorts, keeps one symbol per address and moves them into e. */
static void install_symbols(agt_elf_t *e, elf_sym_t *v, size_t n, lc_buf_t *names)
{
    if (n)
        qsort(v, n, sizeof(*v), elf_sym_cmp);
    lc_free(e->sym_addrs);
    lc_free(e->sym_sizes);
    lc_free(e->sym_names);
    lc_free(e->names);
    e->sym_addrs = lc_xmalloc((n ? n : 1) * sizeof(*e->sym_addrs));
    e->sym_sizes = lc_xmalloc((n ? n : 1) * sizeof(*e->sym_sizes));
    e->sym_names = lc_xmalloc((n ? n : 1) * sizeof(*e->sym_names));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && e->sym_addrs[k - 1] == v[i].addr)
            continue;
        e->sym_addrs[k] = v[i].addr;
        e->sym_sizes[k] = v[i].size;
        e->sym_names[k] = v[i].name;
        k++;
    }
    e->n_syms = k;
    size_t len;
    e->names = (char *)lc_buf_steal(names, &len);
}

/* Loads .symtab (else .dynsym) into e; *had_symtab tells which. */
static int elf_symbols(Elf *elf, agt_elf_t *e, bool *had_symtab)
{
    GElf_Shdr shdr;
    Elf_Scn *scn = find_section(elf, SHT_SYMTAB, &shdr);
    *had_symtab = scn != NULL;
    if (!scn)
        scn = find_section(elf, SHT_DYNSYM, &shdr);
    if (!scn)
        return 0;
    lc_buf_t names;
    lc_buf_init(&names, ELF_MAX_NAME_BYTES);
    elf_sym_t *v = NULL;
    size_t n = 0;
    int rc = collect_symbols(elf, scn, &shdr, &v, &n, &names, e);
    if (!rc)
        install_symbols(e, v, n, &names);
    lc_free(v);
    lc_buf_fini(&names);
    return rc;
}

/* ---------------------------------------------------------------- unwind rows */

/* The bytes of the named PROGBITS section (decompressed when SHF_COMPRESSED). */
static bool cfi_section(Elf *elf, const char *want, agt_cfi_section_t *out)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return false;
    Elf_Scn *scn = NULL;
    GElf_Shdr shdr;
    while ((scn = elf_nextscn(elf, scn))) {
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS ||
            !(name = elf_strptr(elf, shstrndx, shdr.sh_name)) || strcmp(name, want) != 0)
            continue;
        if ((shdr.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
            return false;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data || !data->d_buf || !data->d_size)
            return false;
        *out = (agt_cfi_section_t){data->d_buf, data->d_size, shdr.sh_addr};
        return true;
    }
    return false;
}

static void elf_unwind_rows(Elf *elf, agt_elf_t *e)
{
    GElf_Ehdr eh;
    if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64)
        return; /* the BPF unwinder knows x86-64 registers only */
    agt_cfi_section_t ehf = {0}, dbg = {0};
    bool has_eh = cfi_section(elf, ".eh_frame", &ehf);
    bool has_dbg = cfi_section(elf, ".debug_frame", &dbg);
    if (has_eh || has_dbg)
        agt_cfi_build(has_eh ? &ehf : NULL, has_dbg ? &dbg : NULL, &e->cfi);
    if (e->cfi.truncated)
        agt_cfi_rows_fini(&e->cfi); /* partial tables would mislead: frame pointers instead */
}

int agt_elf_load(int fd, const void *image, size_t image_len, agt_elf_t *e)
{
    Elf *elf = elf_open(fd, image, image_len);
    if (!elf)
        return LC_EINPUT;
    elf_build_id(elf, e->build_id);
    elf_segments(elf, e);
    elf_unwind_rows(elf, e);
    bool had_symtab;
    int rc = elf_symbols(elf, e, &had_symtab);
    e->has_symtab = had_symtab;
    elf_end(elf);
    return rc;
}

int agt_elf_load_debug_symbols(int fd, agt_elf_t *e)
{
    Elf *elf = elf_open(fd, NULL, 0);
    if (!elf)
        return LC_EINPUT;
    GElf_Shdr shdr;
    int rc = 0;
    if (find_section(elf, SHT_SYMTAB, &shdr)) {
        bool had_symtab;
        rc = elf_symbols(elf, e, &had_symtab);
        e->has_symtab = had_symtab;
    }
    elf_end(elf);
    return rc;
}

void agt_elf_fini(agt_elf_t *e)
{
    lc_free(e->path);
    lc_free(e->segs);
    lc_free(e->sym_addrs);
    lc_free(e->sym_sizes);
    lc_free(e->sym_names);
    lc_free(e->names);
    agt_cfi_rows_fini(&e->cfi);
    memset(e, 0, sizeof(*e));
}

const char *agt_elf_symbol(const agt_elf_t *e, uint64_t vaddr)
{
    if (!e->n_syms || vaddr < e->sym_addrs[0])
        return NULL;
    size_t lo = 0, hi = e->n_syms; /* last symbol starting at or below vaddr */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->sym_addrs[mid] <= vaddr)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t size = e->sym_sizes[lo];
    if (size && vaddr - e->sym_addrs[lo] >= size)
        return NULL; /* in a gap: PLT stubs, padding, code without a symbol */
    return e->names + e->sym_names[lo];
}

/* The load bias of a mapping of this object: its start minus the virtual
 * address of the PT_LOAD segment its file offset falls in. */
bool agt_map_bias(const agt_map_t *m, uint64_t *bias)
{
    const agt_elf_t *e = m->elf;
    for (size_t i = 0; i < e->n_segs; i++) {
        const agt_elf_seg_t *s = &e->segs[i];
        uint64_t page_start = s->offset & ~(uint64_t)0xfff;
        if (m->offset >= page_start && m->offset < s->offset + s->filesz) {
            uint64_t vaddr = s->vaddr - (s->offset - m->offset);
            *bias = m->start - vaddr;
            return true;
        }
    }
    return false;
}
