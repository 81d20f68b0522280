/*
 * delta.h — turns successive scrapes of a cumulative profile (Go's allocs,
 * block and mutex endpoints without ?seconds=) into deltas, as Grafana Alloy
 * does before sending (parca.md §2.3, pyroscope-api.md §4.5).
 *
 * Every sample type except the `inuse_*` gauges is subtracted. A sample is
 * identified by its stack (addresses and symbolised lines) and its labels,
 * string and numeric, which is how `go tool pprof -base` matches samples, so
 * the result equals `pprof -base previous current`. The first scrape only
 * records the baseline; a counter that went down (the process restarted)
 * resets the baseline and drops that scrape.
 *
 * Threading: one state per target, used by one thread at a time (the scraper
 * runs at most one scrape per target).
 */
#ifndef EMBER_SCRAPER_DELTA_H
#define EMBER_SCRAPER_DELTA_H

#include <stddef.h>

#include "lc/pprof.h"

typedef struct scr_delta_s scr_delta_t;

typedef enum {
    SCR_DELTA_READY, /* p now holds the differences; publish it */
    SCR_DELTA_FIRST, /* baseline recorded; nothing to publish */
    SCR_DELTA_RESET, /* a counter went down: new baseline, nothing to publish */
    SCR_DELTA_EMPTY, /* nothing changed since the previous scrape */
} scr_delta_result_t;

scr_delta_t *scr_delta_new(void);
void scr_delta_free(scr_delta_t *d);
/* Forgets the baseline (the next scrape is a first one again). */
void scr_delta_forget(scr_delta_t *d);
/* Memory held by the baseline, for the caller's accounting. */
size_t scr_delta_bytes(const scr_delta_t *d);

/* Replaces the cumulative values of p (decoded and validated, indexed by ix)
 * with their increase since the previous call, removes samples left all zero,
 * and remembers p's values as the next baseline. LC_ETOOBIG when arena runs
 * out; the baseline is then unchanged. */
int scr_delta_apply(scr_delta_t *d, lc_pprof_t *p, const lc_pprof_index_t *ix, lc_arena_t *arena,
                    scr_delta_result_t *result) LC_MUST_CHECK;

#endif
