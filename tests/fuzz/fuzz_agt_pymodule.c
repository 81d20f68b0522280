/*
 * fuzz_agt_pymodule.c — a Python frame's module from its file name
 * (services/agent/src/python.c, agt_python_module and
 * agt_python_qualified_name): any bytes as a code object's co_filename (read
 * from another process' memory, so anything), under a root that holds no
 * packages. It must stay inside the name and give a module no longer than
 * the file name, one part of it without '/' (but a "<frozen X>" name's X,
 * which is what it is).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

#define FUZZ_MAX_NAME 8192 /* longer than any path (PATH_MAX): the refusal path too */

/* Under a root without packages a module is one component of the name: a
 * part of it, without '/'. */
static void check_module(const char *file, const char *module)
{
    if (strlen(module) > strlen(file) || !strstr(file, module))
        abort();
    if (strncmp(file, "<frozen ", 8) != 0 && strchr(module, '/'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_NAME)
        return 0;
    char *file = malloc(size + 1); /* exactly the name: ASan sees any read past it */
    if (!file)
        return 0;
    memcpy(file, data, size);
    file[size] = '\0';
    char *module = agt_python_module("/nonexistent-ember-fuzz-root", file);
    check_module(file, module);
    char *name = agt_python_qualified_name(module, "f");
    if (strlen(name) != (module[0] ? strlen(module) + 2 : 1))
        abort();
    lc_free(name);
    lc_free(module);
    free(file);
    return 0;
}
