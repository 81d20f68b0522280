/*
 * process.h — what happens to a scraped body before it is published: decode
 * (gzip or raw), validate as the receivers do, keep only the configured sample
 * types, turn cumulative profiles into deltas, and wrap the result in an
 * ember.v1.IngestProfile ready for the transport.
 *
 * Threading: runs on the libuv thread pool. Everything it reads is owned by
 * the job for the duration of the call; the delta state belongs to the
 * target, which never has two scrapes in flight.
 */
#ifndef EMBER_SCRAPER_PROCESS_H
#define EMBER_SCRAPER_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "delta.h"
#include "lc/labels.h"
#include "lc/pprof.h"
#include "lc/transport.h"

/* Error kinds, as counted in ember_scrape_errors_total{kind}. */
#define SCR_ERR_INVALID "invalid_profile"
#define SCR_ERR_TOO_LARGE "body_too_large"
#define SCR_ERR_EMPTY "empty_body"

typedef struct scr_process_in_s {
    const uint8_t *body;
    size_t len;
    const char *profile_name;
    bool cumulative; /* subtract the previous scrape (delta != NULL) */
    scr_delta_t *delta;
    const scr_value_type_t *keep; /* keep_sample_type; n_keep == 0 keeps all */
    size_t n_keep;
    const lc_labels_t *series; /* sorted, with __name__ */
    const char *tenant;
    uint32_t partitions;    /* transport partitions (>= 1) */
    bool lean;              /* publish lean entries (lc_transport_wants_lean) */
    int64_t scrape_time_ns; /* used when the profile carries no time */
    lc_pprof_limits_t limits;
} scr_process_in_t;

typedef struct scr_process_out_s {
    uint8_t *msg; /* IngestProfile, packed or a lean entry (lc_free); NULL = nothing to publish */
    size_t len;
    uint32_t partition;
    uint8_t ingest_id[LC_INGEST_ID_BYTES]; /* msg's ingest id: the transport's dedupe id */
    size_t n_samples;                      /* samples published */
    scr_delta_result_t delta;              /* READY unless cumulative */
    const char *error_kind;                /* NULL on success */
    char error[LC_STATUS_MSG_MAX + 64];
} scr_process_out_t;

/* Returns 0, or -1 with out->error_kind and out->error set. */
int scr_process(const scr_process_in_t *in, scr_process_out_t *out);

/* Removes every sample type not listed in keep (type and unit must both
 * match; an empty unit matches any). LC_EINPUT when nothing would be left. */
int scr_keep_sample_types(lc_pprof_t *p, const scr_value_type_t *keep, size_t n_keep,
                          lc_arena_t *arena) LC_MUST_CHECK;

#endif
