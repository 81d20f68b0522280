/*
 * folded.h — stacks as text (folded "a;b;c 12" lines, or one stack per line)
 * and the converter that turns stacks into a single-sample-type pprof
 * (pyroscope-api.md §2.6, §2.10). The ingester feeds it uploads of every
 * stack format (folded, lines, tree, trie, speedscope); the querier's ad-hoc
 * view feeds it folded files.
 *
 * Ownership: lc_folded_parse keeps nothing (stack text points into the body
 * or the caller's arena); an lc_cv_t owns its builder and scratch, freed by
 * lc_cv_free. Threading: pure; one converter per thread.
 */
#ifndef LC_FOLDED_H
#define LC_FOLDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/pprof.h"

#define LC_FOLDED_MAX_LINE 65535 /* Go's bufio.Scanner token limit, minus '\n' */

/* One stack: root-first frames separated by ';' (not NUL-terminated). */
typedef int (*lc_stack_cb)(const char *stack, size_t len, int64_t value, void *data);

/* folded ("a;b;c 12" per line) or, with lines_format, one stack per line whose
 * identical lines are counted. cb returning non-zero stops with that value.
 * Errors: a bad count (invalid_argument, the caller answers 422). */
int lc_folded_parse(const uint8_t *body, size_t len, bool lines_format, lc_arena_t *arena,
                    lc_stack_cb cb, void *data, lc_status_t *st) LC_MUST_CHECK;

/* The one sample type of a converted profile. With rate_scaled and a
 * non-zero sample rate, values are counts turned into nanoseconds: the
 * sample type becomes cpu:nanoseconds (wall:nanoseconds when metric is
 * "wall") with the period 1e9 / rate (1e9 / rate exactly, not 0, for a rate
 * above 1e9, where Pyroscope's period of 0 zeroes every value). */
typedef struct lc_cv_type_s {
    const char *metric; /* only "wall" matters */
    const char *sample_type, *sample_unit;
    bool rate_scaled;
} lc_cv_type_t;

typedef struct lc_cv_s lc_cv_t;

lc_cv_t *lc_cv_new(const lc_cv_type_t *t, uint64_t sample_rate, int64_t time_ns,
                   const lc_pprof_limits_t *lim, lc_status_t *st);
void lc_cv_free(lc_cv_t *cv);
/* An lc_stack_cb (data is the lc_cv_t): a folded stack, split on ';'. */
int lc_cv_stack(const char *stack, size_t len, int64_t value, void *data);
/* The location of one frame name (interned: the same name, the same id). */
uint64_t lc_cv_location(lc_cv_t *cv, const char *name, size_t len);
/* One sample; locs are root first (stacks deeper than the limit keep the root side). */
int lc_cv_sample(lc_cv_t *cv, const uint64_t *locs, size_t n, int64_t value);
/* Encodes the profile (uncompressed) into out. Errors: "profile too large". */
int lc_cv_encode(lc_cv_t *cv, lc_buf_t *out) LC_MUST_CHECK;

/* folded/lines text -> an uncompressed single-sample-type pprof in out. */
int lc_text_to_pprof(const uint8_t *body, size_t len, bool lines_format, const lc_cv_type_t *t,
                     uint32_t sample_rate, int64_t time_ns, const lc_pprof_limits_t *lim,
                     lc_arena_t *arena, lc_buf_t *out, lc_status_t *st) LC_MUST_CHECK;

#endif
