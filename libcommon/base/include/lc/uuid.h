/*
 * lc/uuid.h — Pyroscope's per-profile ids (push.v1 RawSample.ID) as text and
 * as the 16 bytes the store keeps (docs/api.md "Profile ids").
 *
 * Accepted text: the canonical form 8-4-4-4-12 hex digits with hyphens, or
 * the same 32 hex digits without them; either case. Nothing else (no braces,
 * no urn:uuid: prefix, no surrounding blanks): an id that is not exactly one
 * of these shapes is the client's error. The version and variant bits are not
 * checked: Pyroscope stores any 128-bit value its parser accepts.
 * Threading: pure functions.
 */
#ifndef LC_UUID_H
#define LC_UUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LC_UUID_BYTES 16
#define LC_UUID_TEXT_LEN 36 /* canonical form, without the NUL */

/* Parses s (NUL-terminated); false, out untouched, when s is not one of the
 * accepted shapes. */
bool lc_uuid_parse(const char *s, uint8_t out[LC_UUID_BYTES]);
/* Writes the canonical lower-case form and a NUL (LC_UUID_TEXT_LEN + 1 bytes). */
void lc_uuid_format(const uint8_t id[LC_UUID_BYTES], char out[LC_UUID_TEXT_LEN + 1]);

#endif
