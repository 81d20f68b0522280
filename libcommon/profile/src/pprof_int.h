/*
 * pprof_int.h — internals of the pprof module shared by pprof.c, pprof_decode.c,
 * pprof_reference.c and the tests (not part of the public API).
 *
 * lc_pprof__decode_pb is the decoder behind lc_pprof_decode (protobuf bytes only,
 * no gzip). lc_pprof__decode_protobuf_c is the decoder it replaced, kept as the
 * oracle of the differential tests (tests/unit/libcommon/profile/test_pprof_decode.c,
 * tests/fuzz/fuzz_pprof_decode.c): both must accept the same inputs, fail with
 * the same messages and yield profiles that pack to the same bytes, except for
 * the differences listed with lc_pprof__decode_err_t.
 */
#ifndef LC_PPROF_INT_H
#define LC_PPROF_INT_H

#include "lc/pprof.h"

/* Why lc_pprof__decode_pb refused its input. The last three are the intended
 * differences from protobuf-c (which accepts such input); everything protobuf-c
 * refuses is LC_PPROF__MALFORMED or, for a field numbered 0, LC_PPROF__FIELD_ZERO. */
typedef enum lc_pprof__decode_err_e {
    LC_PPROF__DECODED = 0,
    LC_PPROF__MALFORMED,        /* bad tag, varint or length; wrong wire type; group */
    LC_PPROF__FIELD_ZERO,       /* a field numbered 0 (protobuf-c keeps it as unknown) */
    LC_PPROF__NO_MEMORY,        /* the arena's cap was reached */
    LC_PPROF__BOOL_WIRE_TYPE,   /* a bool not encoded as a varint (protobuf-c reads any) */
    LC_PPROF__TOO_MANY_SAMPLES, /* more than lim->max_samples, refused before allocating */
} lc_pprof__decode_err_t;

/* Decodes protobuf bytes (never gzip) into the arena; on failure sets st as
 * lc_pprof_decode documents and *why to the reason. Unknown fields are skipped. */
int lc_pprof__decode_pb(const uint8_t *pb, size_t len, const lc_pprof_limits_t *lim,
                        lc_arena_t *arena, lc_pprof_t **out, lc_pprof__decode_err_t *why,
                        lc_status_t *st) LC_MUST_CHECK;

/* lc_pprof__decode_pb that also says what it saw of the profile (seen may be NULL). */
int lc_pprof__decode_pb_seen(const uint8_t *pb, size_t len, const lc_pprof_limits_t *lim,
                             lc_arena_t *arena, lc_pprof_t **out, lc_pprof_seen_t *seen,
                             lc_pprof__decode_err_t *why, lc_status_t *st) LC_MUST_CHECK;

/* The former lc_pprof_decode without gzip: protobuf-c's unpack, embedded NULs
 * replaced by U+FFFD, field number 0 refused. Unknown fields are kept. */
int lc_pprof__decode_protobuf_c(const uint8_t *pb, size_t len, lc_arena_t *arena, lc_pprof_t **out,
                                lc_status_t *st) LC_MUST_CHECK;

/* Drops the unknown fields lc_pprof__decode_protobuf_c kept (it packs them
 * back; lc_pprof__decode_pb skips them), so that the two decoders' results
 * compare field for field (tests only). */
void lc_pprof__drop_unknown_fields(lc_pprof_t *p);

/* A NUL-terminated arena copy of s[0..n) with every NUL byte replaced by
 * U+FFFD (C strings cannot carry NULs); NULL past the arena's cap. */
char *lc_pprof__copy_replacing_nuls(const uint8_t *s, size_t n, lc_arena_t *arena);

/* The status messages of decode failures, shared so both decoders say the same. */
#define LC_PPROF__MSG_MALFORMED                                                                    \
    "failed to parse pprof: malformed protobuf message (or larger than the decode budget)"
#define LC_PPROF__MSG_FIELD_ZERO "failed to parse pprof: invalid field number 0"

/* gzip level 1: on pprof it is about 3x faster than the default level for
 * output only ~6% larger, and encoding sits on the query response path. */
#define LC_PPROF__GZIP_LEVEL 1

/* Where a builder's arrays and maps come from: lc_pprof_builder_new's are
 * lc_xcalloc, lc_xgrow and lc_free; the JFR converter's are the blocks its
 * thread keeps between conversions (jfr.c, lc/jfr.h). A builder made with
 * one behaves as lc_pprof_builder_new's, and is freed on the same thread. */
typedef struct lc_pprof__alloc_s {
    void *(*calloc)(size_t n, size_t size);
    void *(*grow)(void *p, size_t *cap, size_t need, size_t size);
    void (*free)(void *p);
} lc_pprof__alloc_t;
lc_pprof_builder_t *lc_pprof__builder_new_alloc(const lc_pprof__alloc_t *a);

#endif
