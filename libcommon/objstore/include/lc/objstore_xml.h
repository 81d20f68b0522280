/*
 * lc/objstore_xml.h — the bounded reader for S3's XML answers: the text of
 * every <name>...</name> element, entities decoded. It knows exactly what the
 * S3 client needs (Key, IsTruncated, NextContinuationToken, UploadId, Code,
 * Message) and nothing of namespaces, attributes on the wanted elements,
 * CDATA or nesting of the wanted element in itself — S3 never sends those
 * for these names. Why not libxml2: it is not a dependency of ember, and a
 * 40-line scanner with hard caps is easier to fuzz and to reason about.
 *
 * Threading: pure functions. Exposed for the S3 backend and its fuzz target.
 */
#ifndef LC_OBJSTORE_XML_H
#define LC_OBJSTORE_XML_H

#include <stddef.h>

#include "lc/err.h"

#define LC_XML_TEXT_MAX 4096 /* an element's text past this is LC_ETOOBIG */

/* Calls each(arg, text, text_len) for every element called name, in order
 * (text is NUL-terminated and lives only for the call). A nonzero return from
 * each stops the walk and is returned. LC_EINPUT for an element that is not
 * closed or holds a bad entity. */
int lc_xml_each(const char *xml, size_t len, const char *name,
                int (*each)(void *arg, const char *text, size_t text_len), void *arg) LC_MUST_CHECK;

/* The first element called name into out (NUL-terminated); LC_ENOTFOUND if
 * none, LC_ETOOBIG if it does not fit. */
int lc_xml_first(const char *xml, size_t len, const char *name, char *out,
                 size_t out_len) LC_MUST_CHECK;

#endif
