/*
 * lc/transport_entry.h — lean stream entries: what the `m` field of a Redis
 * stream entry holds (docs/internals/redis.md, "Entries").
 *
 * A message (an encoded ember.v1.IngestProfile) travels either as it is —
 * format v1, what every version wrote before, and what the scraper and the
 * agent still write — or as a lean entry, format v2:
 *
 *   byte 0     0x00   (never the first byte of a protobuf message: tag 0 is invalid)
 *   byte 1..2  'E' 'L'
 *   byte 3     version, 2
 *   byte 4..7  length of the message, little endian (bounded by the decoder)
 *   byte 8..   one zstd frame of the message
 *
 * About a third of the message's size for a raw pprof inside: near the gzip
 * size of the profile a client sent, so Redis, its AOF and the consumers move
 * a third of the bytes. Decoding accepts both formats, so entries written by
 * a previous version are still consumed after an upgrade; a version this code
 * does not know is refused (the writer skips it, logged).
 *
 * Threading: lc_entry_encode and lc_entry_pack may run on any thread (a zstd context per
 * thread, kept for the thread's life); a decoder belongs to one thread.
 */
#ifndef LC_TRANSPORT_ENTRY_H
#define LC_TRANSPORT_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "lc/err.h"

#define LC_ENTRY_HEADER_BYTES 8
#define LC_ENTRY_VERSION 2
/* Largest message a decoder accepts by default (the writer's own limit). */
#define LC_ENTRY_MAX_MESSAGE ((size_t)1 << 30)

/* Worst-case size of the lean entry of a len-byte message. */
size_t lc_entry_bound(size_t len);

/* Encodes msg as a lean entry into out (cap >= lc_entry_bound(len));
 * *out_len is its size. LC_ETOOBIG when len exceeds LC_ENTRY_MAX_MESSAGE,
 * -ENOMEM without a zstd context, LC_EINPUT when zstd fails (cap too
 * small, or out of memory). */
int lc_entry_encode(const uint8_t *msg, size_t len, uint8_t *out, size_t cap,
                    size_t *out_len) LC_MUST_CHECK;

/* The same for a protobuf message, packed straight into the compressor:
 * its bytes fields (a pprof) go from the caller's buffers into the entry
 * with no packed copy in between. cap >= lc_entry_bound(packed size). */
int lc_entry_encode_pb(const ProtobufCMessage *m, uint8_t *out, size_t cap,
                       size_t *out_len) LC_MUST_CHECK;

/* Where lc_entry_pack puts its bytes: size bytes from ctx (an arena, the
 * heap), NULL when there is no room. */
typedef void *(*lc_entry_alloc_fn)(void *ctx, size_t size);

/* What every producer (receivers, scraper, agent) publishes for message m:
 * its lean entry when `lean` (the transport wants them:
 * lc_transport_wants_lean, and the message is worth compressing), else the
 * packed message itself (v1). The bytes come from alloc(ctx, ...); *len is
 * their size. NULL when alloc gave none or encoding failed. */
uint8_t *lc_entry_pack(const ProtobufCMessage *m, bool lean, lc_entry_alloc_fn alloc, void *ctx,
                       size_t *len);

/* True when the entry carries the lean header (any version). */
bool lc_entry_is_lean(const uint8_t *entry, size_t len);

typedef struct lc_entry_decoder_s lc_entry_decoder_t;

/* max_message: largest decoded message accepted (0: LC_ENTRY_MAX_MESSAGE). */
lc_entry_decoder_t *lc_entry_decoder_new(size_t max_message);
void lc_entry_decoder_free(lc_entry_decoder_t *d);

/* The message an entry holds: a v1 entry is returned as it is (borrowed); a
 * lean one is decompressed into the decoder's buffer, valid until the next
 * call. On failure (LC_ECORRUPT: unknown version, bad frame, wrong length;
 * LC_ETOOBIG: over the limit) *why says what, and nothing is returned. */
int lc_entry_decode(lc_entry_decoder_t *d, const uint8_t *entry, size_t len, const uint8_t **msg,
                    size_t *msg_len, const char **why) LC_MUST_CHECK;

#endif
