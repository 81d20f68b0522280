/*
 * lc/pbjson.h — one descriptor-driven proto3 JSON codec for every protobuf-c
 * message (protobuf-c has no JSON). Rules (pyroscope-api.md §6.3): output names
 * are lowerCamelCase json names; input accepts the json name and the proto
 * name; 64-bit integers are written as strings and read from strings or
 * numbers; enums are written by name and read by name or number; bytes are
 * base64 (standard padded out; standard or URL-safe, padded or not, in);
 * default values are omitted on output; unknown input fields are ignored;
 * null means default. Thread-safe (no global state).
 */
#ifndef LC_PBJSON_H
#define LC_PBJSON_H

#include <protobuf-c/protobuf-c.h>

#include "lc/alloc.h"
#include "lc/err.h"

/* Deepest accepted JSON nesting (objects and arrays) on input, and deepest
 * message nesting on output (LC_ETOOBIG past it). */
#define LC_PBJSON_MAX_DEPTH 64

/* Decodes JSON text into a new message whose memory comes from alloc (use an
 * arena allocator). Errors set st to invalid_argument with a message naming
 * the field. An empty body is an error (clients send "{}"). */
int lc_pbjson_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *json, size_t len,
                     ProtobufCAllocator *alloc, ProtobufCMessage **out,
                     lc_status_t *st) LC_MUST_CHECK;
/* Appends the JSON form of msg to out. */
int lc_pbjson_encode(const ProtobufCMessage *msg, lc_buf_t *out) LC_MUST_CHECK;
/* Appends s[0..len) as a quoted JSON string; invalid UTF-8 bytes become U+FFFD
 * so the output is always valid JSON. Fails only when out reaches its cap. */
int lc_pbjson_append_string(lc_buf_t *out, const char *s, size_t len) LC_MUST_CHECK;

#endif
