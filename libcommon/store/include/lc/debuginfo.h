/*
 * lc/debuginfo.h — the debug-file store (issue 31): ELF files with debug
 * information that agents upload (Pyroscope's and Parca's DebuginfoService),
 * content-addressed by GNU build id, per tenant, in the local data dir:
 *
 *   <dir>/<tenant, escaped>/<build id, lower-case hex>.debug
 *
 * A file is stored only whole and only valid (lc_debuginfo_check_elf): it is
 * written to a temporary name, synced and renamed, so a reader sees either no
 * file or the complete one, and a refused upload leaves nothing behind.
 * Bounds: a file's size (max_file_bytes), a tenant's total (max_tenant_bytes,
 * counted from the directory at each put, so a restart forgets nothing) and
 * the sections' declared decompressed size (max_inflated_bytes: a
 * decompression bomb is refused before any section is inflated).
 *
 * Why the store room: the symbolizer (lc/symbolizer.h), which lc_block_frame_name
 * calls while a query reads blocks, opens these files; the store may call
 * base, which is all this needs besides libelf.
 *
 * Ownership: lc_debuginfo_t owns its directory path; callers own buffers.
 * Threading: every function may run on any thread; puts of one tenant are
 * serialised by an internal mutex (the tenant total is read and raised as one
 * step).
 */
#ifndef LC_DEBUGINFO_H
#define LC_DEBUGINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"

/* A GNU build id is 1..64 bytes; in hex at most 128 characters. */
#define LC_BUILD_ID_HEX_MAX 128
/* Room for a stored file's path. */
#define LC_DEBUGINFO_PATH_MAX 4096

typedef struct lc_debuginfo_limits_s {
    uint64_t max_file_bytes;     /* one upload */
    uint64_t max_tenant_bytes;   /* all of one tenant's files */
    uint64_t max_inflated_bytes; /* sum of compressed sections' declared sizes */
} lc_debuginfo_limits_t;

typedef struct lc_debuginfo_s lc_debuginfo_t;

/* Creates dir if needed. */
int lc_debuginfo_open(const char *dir, const lc_debuginfo_limits_t *limits,
                      lc_debuginfo_t **out) LC_MUST_CHECK;
void lc_debuginfo_close(lc_debuginfo_t *d);
const lc_debuginfo_limits_t *lc_debuginfo_limits(const lc_debuginfo_t *d);

/* Normalises a build id given in hex (either case) into lower case.
 * Returns 0, or -1 with st invalid_argument (empty, odd length, not hex,
 * longer than LC_BUILD_ID_HEX_MAX). */
int lc_build_id_normalize(const char *in, char out[LC_BUILD_ID_HEX_MAX + 1],
                          lc_status_t *st) LC_MUST_CHECK;

/* Checks that data is a whole ELF file whose NT_GNU_BUILD_ID note is
 * build_id (normalised hex; NULL: any note or none, see
 * lc_debuginfo_put_file_hash), and that its compressed sections declare at
 * most max_inflated_bytes in total. Pure: nothing is stored. Returns 0, or -1
 * with st invalid_argument (not ELF, truncated, no or another build id) or
 * resource_exhausted (a bomb). */
int lc_debuginfo_check_elf(const uint8_t *data, size_t len, const char *build_id,
                           uint64_t max_inflated_bytes, lc_status_t *st) LC_MUST_CHECK;

/* Validates and stores data as tenant's file of build_id (replacing one
 * already there). Returns 0, or -1 with st (invalid_argument, or
 * resource_exhausted for a size over a limit, or internal); on -1 nothing is
 * stored. */
int lc_debuginfo_put(lc_debuginfo_t *d, const char *tenant, const char *build_id,
                     const uint8_t *data, size_t len, lc_status_t *st) LC_MUST_CHECK;

/* As lc_debuginfo_put for a file named by its uploader's own hash of the
 * binary instead of a GNU build id (Parca's BUILD_ID_TYPE_HASH: the
 * OpenTelemetry profiler's file id, the id its frames carry). The upload is
 * the binary's symbols only (the agent strips its text), so the hash cannot
 * be checked against it: everything else is (whole ELF, limits, bombs), and
 * the file only ever names frames of the tenant that uploaded it. */
int lc_debuginfo_put_file_hash(lc_debuginfo_t *d, const char *tenant, const char *file_hash,
                               const uint8_t *data, size_t len, lc_status_t *st) LC_MUST_CHECK;

/* Whether tenant has the file of build_id; its size when it has. */
bool lc_debuginfo_has(lc_debuginfo_t *d, const char *tenant, const char *build_id, uint64_t *size);
/* The path of tenant's file of build_id into out. 0, or LC_ENOTFOUND. */
int lc_debuginfo_path(lc_debuginfo_t *d, const char *tenant, const char *build_id,
                      char out[LC_DEBUGINFO_PATH_MAX]) LC_MUST_CHECK;
/* Removes it. 0, or LC_ENOTFOUND (often not an error: the end state is the same). */
int lc_debuginfo_delete(lc_debuginfo_t *d, const char *tenant, const char *build_id);

typedef struct lc_debuginfo_entry_s {
    char build_id[LC_BUILD_ID_HEX_MAX + 1];
    uint64_t size;
    int64_t mtime_ns;
} lc_debuginfo_entry_t;
/* Calls fn for each of tenant's files (in directory order); stops early at
 * a non-zero return and returns it. */
typedef int (*lc_debuginfo_list_fn)(const lc_debuginfo_entry_t *e, void *data);
int lc_debuginfo_list(lc_debuginfo_t *d, const char *tenant, lc_debuginfo_list_fn fn,
                      void *data) LC_MUST_CHECK;

#endif
