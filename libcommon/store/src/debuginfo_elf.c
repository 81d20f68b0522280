/*
 * debuginfo_elf.c — what makes an uploaded debug file acceptable
 * (lc_debuginfo_check_elf, lc/debuginfo.h), read with libelf from memory:
 *   - an ELF file (ELF_K_ELF) whose header, section headers and every
 *     section with bytes in the file (not SHT_NOBITS) lie inside it, so a
 *     truncated upload is refused, not stored to fail later;
 *   - an NT_GNU_BUILD_ID note (in a SHT_NOTE section) equal to the build id
 *     the upload claims, so one binary's symbols never name another's frames;
 *   - compressed sections (SHF_COMPRESSED) whose declared sizes add up to at
 *     most the cap: libdw inflates a section into a buffer of that declared
 *     size, so the declaration bounds the memory a query can be made to use.
 */
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

#include "lc/debuginfo.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

typedef struct elf_scan_s {
    const char *want;        /* the claimed build id, lower-case hex */
    bool found_build_id;     /* a GNU build id note was read */
    bool build_id_matches;   /* ... and it was the claimed one */
    uint64_t inflated_bytes; /* compressed sections' declared sizes */
} elf_scan_t;

static void hex_of(const uint8_t *p, size_t n, char out[LC_BUILD_ID_HEX_MAX + 1])
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 2 <= LC_BUILD_ID_HEX_MAX; i++) {
        out[k++] = digits[p[i] >> 4];
        out[k++] = digits[p[i] & 15];
    }
    out[k] = '\0';
}

/* The GNU build id notes of one SHT_NOTE section. */
static void scan_notes(Elf_Scn *scn, elf_scan_t *sc)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || !data->d_buf)
        return;
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off;
    while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
            memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0 || nh.n_descsz == 0 ||
            nh.n_descsz > LC_BUILD_ID_HEX_MAX / 2)
            continue;
        char hex[LC_BUILD_ID_HEX_MAX + 1];
        hex_of((const uint8_t *)data->d_buf + desc_off, nh.n_descsz, hex);
        sc->found_build_id = true;
        if (sc->want && strcmp(hex, sc->want) == 0)
            sc->build_id_matches = true;
    }
}

/* One section: inside the file, its compressed size declared, its notes. */
static int scan_section(Elf_Scn *scn, size_t len, elf_scan_t *sc, lc_status_t *st)
{
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unreadable section header: %s",
                             elf_errmsg(-1));
    uint64_t end = sh.sh_offset + sh.sh_size;
    if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "truncated ELF: section %zu ends at byte %llu of %zu", elf_ndxscn(scn),
                             (unsigned long long)end, len);
    if (sh.sh_flags & SHF_COMPRESSED && sh.sh_type != SHT_NOBITS) {
        GElf_Chdr ch;
        if (!gelf_getchdr(scn, &ch))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "section %zu: unreadable compression header", elf_ndxscn(scn));
        sc->inflated_bytes += ch.ch_size;
    }
    if (sh.sh_type == SHT_NOTE)
        scan_notes(scn, sc);
    return 0;
}

static int scan_elf(Elf *elf, size_t len, elf_scan_t *sc, lc_status_t *st)
{
    GElf_Ehdr eh;
    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "not an ELF file");
    size_t shnum;
    if (elf_getshdrnum(elf, &shnum) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unreadable section count");
    uint64_t shdrs_end = eh.e_shoff + (uint64_t)shnum * eh.e_shentsize;
    if (eh.e_shoff > len || shdrs_end > len || shdrs_end < eh.e_shoff)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "truncated ELF: its section headers end at byte %llu of %zu",
                             (unsigned long long)shdrs_end, len);
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn))
        if (scan_section(scn, len, sc, st))
            return -1;
    return 0;
}

int lc_debuginfo_check_elf(const uint8_t *data, size_t len, const char *build_id,
                           uint64_t max_inflated_bytes, lc_status_t *st)
{
    if (len < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "not an ELF file");
    elf_version(EV_CURRENT);
    /* libelf reads the image in place (ELF_C_READ_MMAP semantics on memory):
     * it does not write to it. */
    Elf *elf = elf_memory((char *)data, len);
    if (!elf)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "not an ELF file: %s", elf_errmsg(-1));
    elf_scan_t sc = {.want = build_id};
    int rc = scan_elf(elf, len, &sc, st);
    elf_end(elf);
    if (rc)
        return -1;
    if (build_id && !sc.found_build_id)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the ELF file has no GNU build id note; nothing was stored");
    if (build_id && !sc.build_id_matches)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the ELF file's build id is not %s; nothing was stored", build_id);
    if (sc.inflated_bytes > max_inflated_bytes)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "compressed sections declare %llu bytes inflated, over the limit "
                             "of %llu; nothing was stored",
                             (unsigned long long)sc.inflated_bytes,
                             (unsigned long long)max_inflated_bytes);
    return 0;
}
