/*
 * lc/frame_name.h — the one name of a frame that no function names yet
 * (issue 31): a location with a mapping and an address but no line.
 *
 * Such a frame shows as "<module>+0x<offset>" wherever a query names frames
 * (flame graph, tree, table, call site, rollups, Parca reports, legacy
 * render), so stored stacks never vanish from a flame graph and every path
 * folds the same frames under the same name:
 *   module = the base name of the mapping's file ("libc.so.6"); when the file
 *            name is empty, the mapping's build id;
 *   offset = the address's offset in that file (address - memory_start +
 *            file_offset), what addr2line and debuginfod take.
 * Without a mapping, or with a mapping that has neither file nor build id,
 * there is no module to be relative to: the bare address "0x<address>".
 *
 * Threading: pure functions, no state.
 */
#ifndef LC_FRAME_NAME_H
#define LC_FRAME_NAME_H

#include <stddef.h>
#include <stdint.h>

#include "lc/pprof.h"

/* The longest module kept, in bytes: a longer one is cut (at a UTF-8
 * character boundary) so a name always fits LC_FRAME_NAME_MAX. */
#define LC_FRAME_MODULE_MAX 256
/* Room for any name lc_frame_address_name writes, NUL included. */
#define LC_FRAME_NAME_MAX (LC_FRAME_MODULE_MAX + sizeof("+0x") + 16)

/* What the name reads of the mapping a frame's address lies in. Strings
 * need not be NUL-terminated. */
typedef struct lc_frame_mapping_s {
    const char *file;
    size_t file_len;
    const char *build_id;
    size_t build_id_len;
    uint64_t memory_start, file_offset;
} lc_frame_mapping_t;

/* Writes the frame's name into out (NUL-terminated) and returns its length.
 * m is NULL when the location has no mapping. */
size_t lc_frame_address_name(const lc_frame_mapping_t *m, uint64_t address,
                             char out[LC_FRAME_NAME_MAX]);

/* The same for a location of a decoded pprof: m is its mapping, NULL when
 * the location has none. */
size_t lc_pprof_address_frame_name(const lc_pprof_t *p, const Google__V1__Mapping *m,
                                   uint64_t address, char out[LC_FRAME_NAME_MAX]);

/* The address's offset in the mapping's file. An address below the mapping's
 * start (a malformed profile) is taken as an offset already. */
uint64_t lc_frame_file_offset(const lc_frame_mapping_t *m, uint64_t address);

#endif
