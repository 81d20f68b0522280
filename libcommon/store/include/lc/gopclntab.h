/*
 * lc/gopclntab.h — names for addresses in a Go binary from its own
 * .gopclntab (issue 31): Go keeps this table for the runtime's tracebacks,
 * so `go build -ldflags='-s -w'` (no symbol table, no DWARF) still has it.
 *
 * Layout facts (Go 1.18 and later; runtime/symtab.go, debug/gosym): a header
 * (magic 0xfffffff0 for 1.18-1.19, 0xfffffff1 for 1.20+; two zero bytes;
 * the instruction size quantum; the pointer size; then nfunc, nfiles,
 * textStart and the offsets of funcnametab, cutab, filetab, pctab and the
 * function table, each a pointer-sized word); the function table: nfunc + 1
 * pairs of uint32 (entry offset from textStart, offset of the function's
 * record from the table), the last entry's offset the end of the text; a
 * function record: entryOff, nameOff (into funcnametab), args, deferreturn,
 * pcsp, pcfile, pcln, npcdata, cuOffset (uint32 each); pcfile and pcln are
 * offsets into pctab of pc-value tables: pairs of varints (zig-zag value
 * delta, pc delta in quanta) until a zero value delta after the first; a
 * file number indexes cutab from the function's cuOffset, whose uint32 is
 * an offset into filetab. Strings are NUL-terminated.
 *
 * Every offset and count comes from the file, so every read is bounds
 * checked: a malformed table gives "not found", never a read outside it
 * (tests/fuzz/fuzz_gopclntab.c).
 *
 * Ownership: the table is the caller's (a section's bytes); answers point
 * into it. Threading: pure functions.
 */
#ifndef LC_GOPCLNTAB_H
#define LC_GOPCLNTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lc_gopclntab_s {
    const uint8_t *data;
    size_t size;
    uint8_t quantum, ptr_size;
    uint64_t nfunc, text_start;
    uint64_t funcnametab, cutab, filetab, pctab, functab; /* offsets into data */
} lc_gopclntab_t;

/* Reads the header; false when data is not a Go 1.18+ pclntab. text_addr:
 * the address of the binary's .text section, the base of the entry offsets
 * when the header's textStart is 0 (recent linkers leave it for the runtime
 * to fill in; debug/gosym takes the section's address likewise). */
bool lc_gopclntab_open(const uint8_t *data, size_t size, uint64_t text_addr, lc_gopclntab_t *out);

typedef struct lc_gopclntab_frame_s {
    const char *function; /* into the table */
    const char *file;     /* into the table; "" when unknown */
    int64_t line;         /* 0 when unknown */
} lc_gopclntab_frame_t;

/* The function holding pc (a link-time address), its file and line; false
 * when no function holds it or the table is malformed there. */
bool lc_gopclntab_lookup(const lc_gopclntab_t *t, uint64_t pc, lc_gopclntab_frame_t *out);

#endif
