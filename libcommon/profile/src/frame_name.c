/*
 * frame_name.c — "<module>+0x<offset>" for frames without a function
 * (lc/frame_name.h says which module and which offset, and why).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lc/frame_name.h"

/* The part of a path after its last '/'. */
static const char *path_base(const char *s, size_t len, size_t *base_len)
{
    size_t start = len;
    while (start > 0 && s[start - 1] != '/')
        start--;
    *base_len = len - start;
    return s + start;
}

/* How many bytes of s to keep so that at most max remain and no UTF-8
 * character is cut in two (continuation bytes are 10xxxxxx). */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t keep = max;
    while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
        keep--;
    return keep;
}

/* The module's name: the file's base name, else the build id; NULL if neither. */
static const char *module_name(const lc_frame_mapping_t *m, size_t *len)
{
    if (!m)
        return NULL;
    const char *base = m->file ? path_base(m->file, m->file_len, len) : NULL;
    if (base && *len > 0)
        return base;
    *len = m->build_id ? m->build_id_len : 0;
    return *len > 0 ? m->build_id : NULL;
}

uint64_t lc_frame_file_offset(const lc_frame_mapping_t *m, uint64_t address)
{
    if (!m || address < m->memory_start)
        return address;
    return address - m->memory_start + m->file_offset;
}

size_t lc_frame_address_name(const lc_frame_mapping_t *m, uint64_t address,
                             char out[LC_FRAME_NAME_MAX])
{
    size_t len = 0;
    const char *module = module_name(m, &len);
    if (!module)
        return (size_t)snprintf(out, LC_FRAME_NAME_MAX, "0x%" PRIx64, address);
    len = utf8_cut(module, len, LC_FRAME_MODULE_MAX);
    memcpy(out, module, len);
    int n = snprintf(out + len, LC_FRAME_NAME_MAX - len, "+0x%" PRIx64,
                     lc_frame_file_offset(m, address));
    return len + (size_t)n;
}

size_t lc_pprof_address_frame_name(const lc_pprof_t *p, const Google__V1__Mapping *m,
                                   uint64_t address, char out[LC_FRAME_NAME_MAX])
{
    if (!m)
        return lc_frame_address_name(NULL, address, out);
    lc_frame_mapping_t fm = {.file = lc_pprof_str(p, m->filename),
                             .build_id = lc_pprof_str(p, m->build_id),
                             .memory_start = m->memory_start,
                             .file_offset = m->file_offset};
    fm.file_len = strlen(fm.file);
    fm.build_id_len = strlen(fm.build_id);
    return lc_frame_address_name(&fm, address, out);
}
