/*
 * symbolizer_demangle.c — symbolizer_int.h: C++ (Itanium ABI) and Rust
 * (legacy and v0) symbol names made readable for the frames the symbolizer
 * answers, with Debian's libiberty (libiberty-dev: cplus_demangle, the
 * demangler binutils uses).
 *
 * Names are simplified as pprof shows them by default: no parameter list
 * (overloads fold into one frame, as Pyroscope and `go tool pprof` show
 * them), templates kept; a Rust legacy name loses its hash suffix.
 * Only names that look mangled (_Z..., _R...) are passed: libiberty's
 * other styles would "demangle" ordinary C names.
 *
 * libiberty bounds its own recursion (DEMANGLE_RECURSION_LIMIT), so a
 * hostile name in an uploaded debug file fails to demangle rather than
 * exhausting the stack; it is then shown as it is.
 *
 * Threading: cplus_demangle keeps no state; any thread.
 */
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "symbolizer_int.h"

char *symdemangle(const char *name)
{
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
        return NULL;
    return cplus_demangle(name, DMGL_AUTO);
}
