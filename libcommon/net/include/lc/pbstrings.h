/*
 * lc/pbstrings.h — every string field of a protobuf message holds text a C
 * string can carry.
 *
 * protobuf-c unpacks a `string` field into a NUL-terminated copy of its
 * bytes, so a NUL inside the field silently cuts the string where it stands:
 * a label value "a\0b" would become "a" and merge into the real "a" series.
 * lc_pb_strings_check reads the wire form a message was unpacked from, guided
 * by its descriptor, and refuses a NUL byte in any string field at any depth,
 * naming the field. Callers run it on the bytes they handed to
 * protobuf_c_message_unpack (lc_connect_decode does, for every RPC).
 * Threading: pure.
 */
#ifndef LC_PBSTRINGS_H
#define LC_PBSTRINGS_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "lc/err.h"

/* 0, or invalid_argument "<message>.<field>: a NUL byte ..." and -1. Bytes
 * that are not well-formed protobuf stop the walk without an error: the
 * unpack judges them. Nesting deeper than 100 messages is refused. */
int lc_pb_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                        lc_status_t *st) LC_MUST_CHECK;

#endif
