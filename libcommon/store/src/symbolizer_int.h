/*
 * symbolizer_int.h — the symbolizer's parts between its files: the
 * debuginfod worker (symbolizer_fetch.c), the libdw reader
 * (symbolizer_dwarf.c), used by symbolizer.c, and the demangler
 * (symbolizer_demangle.c) the reader names frames with.
 */
#ifndef SYMBOLIZER_INT_H
#define SYMBOLIZER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lc/debuginfo.h"
#include "lc/symbolizer.h"

/* ---- symbolizer_fetch.c: debuginfod lookups on one worker thread ---- */
typedef struct symfetch_s symfetch_t;

/* NULL *out (and 0) when opts name no debuginfod URL. */
int symfetch_new(const lc_symbolizer_opts_t *opts, symfetch_t **out) LC_MUST_CHECK;
void symfetch_free(symfetch_t *f);
/* The downloaded file of build_id (normalised hex): true with its path;
 * false when no server has it (remembered for negative_ttl_ms) or the
 * lookup did not end by deadline_ns (it goes on; a later call finds it). */
bool symfetch_get(symfetch_t *f, const char *build_id, uint64_t deadline_ns,
                  char path[LC_DEBUGINFO_PATH_MAX]);
/* Lookups made, and of them failed (not found, timeout, server down). */
void symfetch_counts(symfetch_t *f, uint64_t *fetches, uint64_t *failures);

/* ---- symbolizer_dwarf.c: one debug file opened with libdwfl ---- */
typedef struct symfile_s symfile_t;

/* NULL when path is not a readable ELF file (logged once by the caller). */
symfile_t *symfile_open(const char *path);
void symfile_close(symfile_t *f);
/* The frames at file_offset, copied into a (out->n = 0: none there).
 * Not thread-safe: the caller holds the lock of the file. */
int symfile_frames(symfile_t *f, uint64_t file_offset, lc_arena_t *a,
                   lc_symbols_t *out) LC_MUST_CHECK;

/* ---- symbolizer_demangle.c: C++ and Rust names, libiberty ---- */
/* The readable form of a mangled name (malloc'd; the caller frees), or NULL
 * when name is not a C++ or Rust mangled name. */
char *symdemangle(const char *name);

#endif
