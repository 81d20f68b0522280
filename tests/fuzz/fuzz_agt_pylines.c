/*
 * fuzz_agt_pylines.c — the CPython location table reader
 * (services/agent/src/python.c, agt_python_line, and 3.10's
 * agt_python_line_310): any bytes as a code
 * object's co_linetable (read from another process' memory, so anything),
 * looked up at the code unit given by the first two bytes. It must stay
 * inside the table and return a line within the table's reach.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint16_t unit;
    memcpy(&unit, data, sizeof(unit));
    const uint8_t *table = data + 2;
    size_t len = size - 2;
    /* A copy of exactly len bytes: ASan sees any read past the table. */
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return 0;
    memcpy(copy, table, len);
    int64_t line = agt_python_line(copy, len, 1000, unit);
    /* each entry moves the line by less than 2^31 and there are < len entries */
    if (line < 1000 - (int64_t)len * ((int64_t)1 << 31) ||
        line > 1000 + (int64_t)len * ((int64_t)1 << 31))
        abort();
    /* 3.10: one signed byte of line per two bytes of table */
    int64_t line_310 = agt_python_line_310(copy, len, 1000, unit);
    if (line_310 < 1000 - 128 * (int64_t)len || line_310 > 1000 + 128 * (int64_t)len)
        abort();
    free(copy);
    return 0;
}
