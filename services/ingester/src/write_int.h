/*
 * write_int.h — the writer room of the ingester: what writer.c composes to
 * turn one decoded profile into stored series (split.c: samples into series by
 * their string labels; series.c: series labels and profile type ids; delta.c:
 * the server-side delta rule). Pure functions over arena memory, except the
 * delta state, which the writer thread owns.
 */
#ifndef EMBER_WRITE_INT_H
#define EMBER_WRITE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/v1/ingest.pb-c.h"
#include "google/v1/profile.pb-c.h"
#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/labels.h"
#include "lc/pprof.h"

#include "ingester.h"

/* ---------------------------------------------------------------- split.c */
/* One series' worth of samples: those sharing the same string sample labels. */
typedef struct ing_group_s {
    ing_kv_t *labels; /* sorted by name; trace_id/span_id/profile_id excluded */
    size_t n_labels;
    uint32_t *samples;  /* indices into p->sample */
    uint64_t *span_ids; /* parallel to samples; 0 = none */
    size_t n_samples;
    bool has_span_ids;
} ing_group_t;

int ing_split_samples(const Google__V1__Profile *p, lc_arena_t *arena, ing_group_t **out,
                      size_t *n_out) LC_MUST_CHECK;
/* 16 hex digits -> id; 0 when s is not exactly that. */
uint64_t ing_parse_span_id(const char *s);

/* ---------------------------------------------------------------- series.c */
/* `<name>:<type>:<unit>:<period_type>:<period_unit>` for sample type i (arena). */
const char *ing_profile_type_id(const Google__V1__Profile *p, const char *metric, size_t i,
                                lc_arena_t *arena);
/* Adds the per-sample-type internal labels, removes __delta__, sorts. */
void ing_series_labels(lc_labels_t *ls, const Google__V1__Profile *p, size_t i, lc_arena_t *arena);

/* ---------------------------------------------------------------- delta.c */
/* Server-side delta (§4.5, the v1 rule) across profiles of one series.
 * Changes are staged per batch: commit makes them permanent, discard drops
 * them (the batch will be redelivered). Owned by the writer thread. */
typedef struct ing_delta_s ing_delta_t;

ing_delta_t *ing_delta_new(size_t max_entries);
void ing_delta_free(ing_delta_t *d);
/* Whether the rule applies to a series (metric name, sample type, flag) of a
 * profile covering duration_nanos (0: a snapshot since process start). */
bool ing_delta_applies(const char *metric, const char *sample_type, bool delta_disabled,
                       int64_t duration_nanos);
/* For the n samples (stack keys + values) of a series profile: returns true and
 * fills out_values (delta values) when the profile is to be stored; false when
 * it is dropped (first profile of the series, or a reset). */
bool ing_delta_apply(ing_delta_t *d, uint64_t series_fp, const uint64_t *stack_keys,
                     const int64_t *values, size_t n, int64_t *out_values);
void ing_delta_commit(ing_delta_t *d);
void ing_delta_discard(ing_delta_t *d);
/* A key for a sample's stack that is stable across profiles (symbol-based). */
uint64_t ing_stack_key(const Google__V1__Profile *p, const Google__V1__Sample *s,
                       const lc_pprof_index_t *ix);

#endif
