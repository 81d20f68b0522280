/*
 * lc/pprof.h — pprof (google.v1.Profile) decoding, validation, encoding and a
 * builder that de-duplicates strings, functions, mappings and locations.
 *
 * Decoding (libcommon/profile/src/pprof_decode.c, written for this one schema) fills an
 * arena: the decoded profile lives as long as the arena, and is the struct
 * protobuf-c's unpack would give, so protobuf-c can pack it. Validation follows
 * Pyroscope's ingest rules (pyroscope-api.md §3.3 item 5) with ember's own,
 * higher, limits.
 * Threading: no shared state; a builder belongs to one thread.
 */
#ifndef LC_PPROF_H
#define LC_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "google/v1/profile.pb-c.h"
#include "lc/alloc.h"
#include "lc/err.h"

typedef Google__V1__Profile lc_pprof_t;

/* A limit of 0 means "no limit" (except max_decompressed_bytes, which is a real cap). */
typedef struct lc_pprof_limits_s {
    size_t max_decompressed_bytes; /* default 64 MiB */
    size_t max_samples;            /* default 1,000,000 (Pyroscope: 16,000) */
    size_t max_labels_per_sample;  /* default 100 */
    size_t max_stack_depth;        /* deeper stacks are truncated, root side kept; default 1024 */
    size_t max_symbol_bytes;       /* longer strings are truncated; default 65535 */
} lc_pprof_limits_t;

void lc_pprof_limits_default(lc_pprof_limits_t *lim);

/* Gunzips (detected by magic bytes) and unpacks a pprof. Does not validate,
 * except that more than lim->max_samples samples (in a profile with sample
 * types) are refused, in lc_pprof_validate's words, before they are decoded.
 * Errors: invalid_argument "profile too large: ... (limit N bytes)" past
 * lim->max_decompressed_bytes, "failed to parse pprof: ..." for bad gzip or
 * protobuf, or when the arena's cap is reached. A NUL byte inside a string
 * (which C strings cannot carry) is replaced by U+FFFD, so that validation
 * still sees the bytes after it. Unknown fields are skipped. */
int lc_pprof_decode(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                    lc_arena_t *arena, lc_pprof_t **out, lc_status_t *st) LC_MUST_CHECK;
/* lc_pprof_decode that also hands back the protobuf bytes it decoded, so that a
 * caller which does not change the profile can forward them instead of encoding
 * it again. @note *pb is `data` itself, or its gunzipped copy in the arena. */
int lc_pprof_decode_keep(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                         lc_arena_t *arena, lc_pprof_t **out, const uint8_t **pb, size_t *pb_len,
                         lc_status_t *st) LC_MUST_CHECK;
/* What decoding saw of a profile's samples on the way, so that validation
 * need not read every frame again (a heavy heap profile: 360k of them, half
 * of validation's CPU, issue 32). Describes `profile` as decoded: only
 * lc_pprof_validate_seen of that same, unchanged profile may use it. */
typedef struct lc_pprof_seen_s {
    uint64_t location_id_max; /* the largest location id of any sample */
    bool location_id_zero;    /* some sample lists location id 0 */
    const lc_pprof_t *profile;
} lc_pprof_seen_t;

/* lc_pprof_decode_keep with the bytes (*pb, when a copy) in bytes_arena and the
 * profile in arena: the profile holds copies of everything it needs, so a
 * caller that keeps the profile longer than the bytes frees them apart.
 * *seen (when not NULL) is filled for lc_pprof_validate_seen. */
int lc_pprof_decode_apart(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                          lc_arena_t *bytes_arena, lc_arena_t *arena, lc_pprof_t **out,
                          const uint8_t **pb, size_t *pb_len, lc_pprof_seen_t *seen,
                          lc_status_t *st) LC_MUST_CHECK;

/* Validates (and normalises in place: truncates deep stacks and long symbols):
 * at least one sample type; string_table[0] == ""; every string index in
 * range; every sample has one value per sample type; no location or function
 * id 0; every referenced location/function/mapping id exists; no '-' in
 * sample-type strings; all strings valid UTF-8; sample and label counts under
 * the limits. Errors: invalid_argument with a message saying what is wrong. */
int lc_pprof_validate(lc_pprof_t *p, const lc_pprof_limits_t *lim, lc_status_t *st) LC_MUST_CHECK;
/* lc_pprof_validate that sets *changed when normalising changed p (cut a stack
 * or a string), i.e. when p's original bytes no longer decode to p. */
int lc_pprof_validate_normalized(lc_pprof_t *p, const lc_pprof_limits_t *lim, bool *changed,
                                 lc_status_t *st) LC_MUST_CHECK;
/* lc_pprof_validate_normalized that, where seen describes p and its location
 * ids are 1..n, knows every sample's locations from seen alone. */
int lc_pprof_validate_seen(lc_pprof_t *p, const lc_pprof_limits_t *lim, const lc_pprof_seen_t *seen,
                           bool *changed, lc_status_t *st) LC_MUST_CHECK;

/* Serialises p (gzip, at the fast level 1, when `gzip`), appending to out.
 * LC_ETOOBIG when out's cap would be passed. */
int lc_pprof_encode(const lc_pprof_t *p, bool gzip, lc_buf_t *out) LC_MUST_CHECK;

/* The string at idx, or "" when idx is out of range. */
const char *lc_pprof_str(const lc_pprof_t *p, int64_t idx);

/* Id -> element lookups for a decoded profile (ids are arbitrary in pprof).
 * Built once per profile in the arena; NULL when the id is unknown. */
typedef struct lc_pprof_index_s lc_pprof_index_t;
int lc_pprof_index_new(const lc_pprof_t *p, lc_arena_t *arena,
                       lc_pprof_index_t **out) LC_MUST_CHECK;
const Google__V1__Location *lc_pprof_location(const lc_pprof_index_t *ix, uint64_t id);
const Google__V1__Function *lc_pprof_function(const lc_pprof_index_t *ix, uint64_t id);
const Google__V1__Mapping *lc_pprof_mapping(const lc_pprof_index_t *ix, uint64_t id);

/* ---- builder: produce a valid pprof from parts, de-duplicating as it goes.
 * Used for format conversion at ingest (folded, lines, ...) and for merged
 * query output. Ids handed out start at 1. */
typedef struct lc_pprof_builder_s lc_pprof_builder_t;

typedef struct lc_pprof_line_s {
    uint64_t function_id;
    int64_t line;
} lc_pprof_line_t;

lc_pprof_builder_t *lc_pprof_builder_new(void);
void lc_pprof_builder_free(lc_pprof_builder_t *b);
int64_t lc_pprof_builder_string(lc_pprof_builder_t *b, const char *s, size_t len);
uint64_t lc_pprof_builder_function(lc_pprof_builder_t *b, const char *name, const char *system_name,
                                   const char *filename, int64_t start_line);
uint64_t lc_pprof_builder_mapping(lc_pprof_builder_t *b, uint64_t memory_start,
                                  uint64_t memory_limit, uint64_t file_offset, const char *filename,
                                  const char *build_id, bool has_functions);
/* lines[0] is the innermost (inlined) function, as in pprof. */
uint64_t lc_pprof_builder_location(lc_pprof_builder_t *b, uint64_t mapping_id, uint64_t address,
                                   const lc_pprof_line_t *lines, size_t n_lines);
/* Adds (type, unit) as the next sample type; returns its index. */
size_t lc_pprof_builder_sample_type(lc_pprof_builder_t *b, const char *type, const char *unit);
void lc_pprof_builder_period(lc_pprof_builder_t *b, const char *type, const char *unit,
                             int64_t period);
void lc_pprof_builder_times(lc_pprof_builder_t *b, int64_t time_nanos, int64_t duration_nanos);
/* Adds a sample; locations are leaf first; values has one entry per sample
 * type. Samples with the same locations and labels are summed. Label pairs
 * (string labels) may be NULL/0. */
void lc_pprof_builder_sample(lc_pprof_builder_t *b, const uint64_t *location_ids,
                             size_t n_locations, const int64_t *values, const char *const *label_kv,
                             size_t n_labels);
/* True once summing a repeated sample wrapped past int64 (the sums wrap, as
 * Go's pprof merge does): a receiver refuses such a profile rather than store
 * a wrapped value. */
bool lc_pprof_builder_sum_wrapped(const lc_pprof_builder_t *b);
/* Errors: LC_EINPUT without sample types or when a sample type was added after
 * the first sample; LC_ETOOBIG when a table passed 2^31 entries (the add
 * calls then return 0) or out's cap would be passed. */
int lc_pprof_builder_encode(lc_pprof_builder_t *b, bool gzip, lc_buf_t *out) LC_MUST_CHECK;

#endif
