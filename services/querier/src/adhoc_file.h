/*
 * adhoc_file.h — an ad-hoc upload's bytes as profiles: a pprof (raw or
 * gzip), a JFR recording (raw or gzip; one pprof per event kind, converted
 * by lc/jfr.h as the ingester converts `format=jfr`) or folded text
 * ("a;b;c 12" lines, lc/folded.h; one sample type, samples:count).
 *
 * Ownership: everything lives in the caller's arena. Threading: pure; the
 * file is decoded again for every Get/Diff from the stored bytes, so the
 * store keeps what was uploaded, not a conversion.
 */
#ifndef EMBER_QUERIER_ADHOC_FILE_H
#define EMBER_QUERIER_ADHOC_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/jfr.h"
#include "lc/pprof.h"

/* A JFR recording has no sampling rate of its own: cpu and wall events
 * count 1e9 / this many nanoseconds each, the Java agent's default rate. */
#define ADHOC_JFR_SAMPLE_RATE 100

/* The file's sample types, flattened over its profiles in order: names[i]
 * is what profile_types lists (a pprof's own type names; a JFR kind's as
 * "<metric>:<type>", since two kinds share names such as delay). */
typedef struct adhoc_file_s {
    lc_pprof_t *profiles[LC_JFR_KINDS_];
    size_t n_profiles;
    char **names;
    const char **units;
    size_t *profile_of, *type_in; /* per flattened type: its profile and index there */
    size_t n_types;
} adhoc_file_t;

/* Decodes and validates data as one of the formats above. Errors:
 * invalid_argument naming every format tried and why the likeliest failed;
 * resource_exhausted past the arena. */
int adhoc_file_decode(const uint8_t *data, size_t len, lc_arena_t *arena, adhoc_file_t *f,
                      lc_status_t *st) LC_MUST_CHECK;

/* The flattened type named want ("" or NULL: the first); n_types if none. */
size_t adhoc_file_type(const adhoc_file_t *f, const char *want);

#endif
