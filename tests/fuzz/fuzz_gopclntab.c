/*
 * fuzz_gopclntab.c — the Go pclntab reader (lc/gopclntab.h): every offset
 * and count in the table comes from an uploaded (or downloaded) binary.
 * Input: 8 bytes of a pc (little-endian), then the table. The reader opens
 * the table with a .text address of 0x401000 and looks up that pc and a
 * spread of pcs over the text the table claims; an answer must point into
 * the table, NUL-terminated there.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/gopclntab.h"

#define FUZZ_TEXT_ADDR 0x401000u
#define FUZZ_SPREAD 64 /* pcs looked up across the text */

static void check_answer(const uint8_t *table, size_t size, const lc_gopclntab_frame_t *f)
{
    const uint8_t *name = (const uint8_t *)f->function;
    if (name < table || name >= table + size || !memchr(name, 0, (size_t)(table + size - name)))
        abort();
    if (f->file[0] &&
        ((const uint8_t *)f->file < table || (const uint8_t *)f->file >= table + size))
        abort();
}

static void look_up(const lc_gopclntab_t *t, const uint8_t *table, size_t size, uint64_t pc)
{
    lc_gopclntab_frame_t f;
    if (lc_gopclntab_lookup(t, pc, &f))
        check_answer(table, size, &f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t pc = 0;
    for (int i = 7; i >= 0; i--)
        pc = pc << 8 | data[i];
    const uint8_t *table = data + 8;
    size -= 8;
    lc_gopclntab_t t;
    if (!lc_gopclntab_open(table, size, FUZZ_TEXT_ADDR, &t))
        return 0;
    look_up(&t, table, size, pc);
    for (uint64_t i = 0; i < FUZZ_SPREAD; i++)
        look_up(&t, table, size, t.text_start + i * 97);
    return 0;
}
