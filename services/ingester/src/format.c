/*
 * format.c — which /ingest format a request carries (pyroscope-api.md §2.4).
 *
 * The rules run in Pyroscope's order and the first match wins. One deliberate
 * leniency: `format=pprof` with a multipart/form-data body is read as a form
 * (Pyroscope fails such a request with 422; no client depends on that).
 */
#include <string.h>

#include "receive_int.h"

static bool eq(const char *a, const char *b)
{
    return a && strcmp(a, b) == 0;
}

static bool is_multipart(const char *content_type)
{
    return content_type && strstr(content_type, "multipart/form-data") != NULL;
}

ing_format_t ing_format_select(const char *format, const char *content_type)
{
    if (eq(format, "trie") || eq(content_type, "binary/octet-stream+trie"))
        return ING_FMT_TRIE;
    if (eq(format, "tree") || eq(content_type, "binary/octet-stream+tree"))
        return ING_FMT_TREE;
    if (eq(format, "lines"))
        return ING_FMT_LINES;
    if (eq(format, "jfr"))
        return ING_FMT_JFR;
    if (eq(format, "pprof"))
        return is_multipart(content_type) ? ING_FMT_PPROF_FORM : ING_FMT_PPROF;
    if (eq(format, "speedscope"))
        return ING_FMT_SPEEDSCOPE;
    if (is_multipart(content_type))
        return ING_FMT_PPROF_FORM;
    return ING_FMT_FOLDED;
}

const char *ing_format_name(ing_format_t f)
{
    static const char *const names[ING_FMT_COUNT_] = {
        [ING_FMT_FOLDED] = "folded", [ING_FMT_LINES] = "lines",
        [ING_FMT_PPROF] = "pprof",   [ING_FMT_PPROF_FORM] = "pprof",
        [ING_FMT_TRIE] = "trie",     [ING_FMT_TREE] = "tree",
        [ING_FMT_JFR] = "jfr",       [ING_FMT_SPEEDSCOPE] = "speedscope",
    };
    return (unsigned)f < ING_FMT_COUNT_ ? names[f] : "unknown";
}
