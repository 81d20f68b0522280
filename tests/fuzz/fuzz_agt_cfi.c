/*
 * fuzz_agt_cfi.c — the agent's call frame information parser
 * (services/agent/src/cfi.c): any bytes as .eh_frame (first byte even) or
 * .debug_frame (odd), at an address taken from the next four bytes. The
 * rows must come out strictly sorted and every row kind must be known.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    uint32_t vaddr;
    memcpy(&vaddr, data + 1, sizeof(vaddr));
    agt_cfi_section_t s = {data + 5, size - 5, vaddr};
    agt_cfi_rows_t rows;
    agt_cfi_build(data[0] & 1 ? NULL : &s, data[0] & 1 ? &s : NULL, &rows);
    for (size_t i = 0; i < rows.n; i++) {
        if ((i && rows.v[i - 1].pc >= rows.v[i].pc) || rows.v[i].cfa > AGT_CFA_UNSUPPORTED)
            abort();
        (void)agt_cfi_lookup(&rows, rows.v[i].pc);
    }
    agt_cfi_rows_fini(&rows);
    return 0;
}
