/*
 * load_wire.h — the bytes ember-load sends and reads: Connect request bodies
 * in either codec, responses decoded into an arena, the Connect error code of
 * a failed call, and the pprof of the write load re-stamped with the current
 * time (the files are years old; a query over the last 15 minutes would never
 * see them otherwise).
 *
 * Pure functions, any thread. Decoded messages live in the given arena.
 */
#ifndef EMBER_LOAD_WIRE_H
#define EMBER_LOAD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "lc/alloc.h"
#include "load_config.h"
#include "load_matrix.h"

#define LD_MAX_PROFILE_BYTES (64u << 20) /* a write-load file, decompressed */

/* The pprof in raw (gzip or plain) without its time_nanos field (9), so
 * ld_pprof_stamp can append a fresh one. LC_ECORRUPT if it is not protobuf,
 * LC_ETOOBIG past LD_MAX_PROFILE_BYTES. */
int ld_pprof_strip_time(const uint8_t *raw, size_t len, lc_buf_t *out) LC_MUST_CHECK;
/* out = stripped + time_nanos = time_ns (protobuf: the last occurrence wins). */
int ld_pprof_stamp(const uint8_t *stripped, size_t len, int64_t time_ns,
                   lc_buf_t *out) LC_MUST_CHECK;

/* Content-Type of a codec: "application/proto" or "application/json". */
const char *ld_codec_content_type(ld_codec_t codec);
/* Appends msg in the codec. */
int ld_encode(const ProtobufCMessage *msg, ld_codec_t codec, lc_buf_t *out) LC_MUST_CHECK;
/* Appends the request of a select method (SelectSeries with step seconds,
 * SelectMergeStacktraces, SelectMergeProfile) over [start_ms, end_ms];
 * selector "" means all. LC_EINPUT for any other method. */
int ld_encode_select(ld_method_t method, const char *type, const char *selector, int64_t start_ms,
                     int64_t end_ms, double step, ld_codec_t codec, lc_buf_t *out) LC_MUST_CHECK;
/* Decodes a response body of type desc into arena memory; -1 if it does not parse. */
int ld_decode(const ProtobufCMessageDescriptor *desc, ld_codec_t codec, const uint8_t *body,
              size_t len, lc_arena_t *arena, ProtobufCMessage **out) LC_MUST_CHECK;

/* The Connect code name of a finished call: "ok" for HTTP 200, else the
 * `code` of a Connect error body, else the code of the HTTP status, and for
 * calls that got no response "unavailable" (connect failed) or
 * "deadline_exceeded" (timed out) as connect-go reports them. Static string
 * or a copy in buf. */
const char *ld_result_code(long http_status, const char *transport_error, const uint8_t *body,
                           size_t len, char *buf, size_t buf_len);

#endif
