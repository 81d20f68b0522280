/*
 * targets.h — from discovered target groups to scrape targets: one per
 * (discovered target, enabled profile), labelled and relabelled as Parca does
 * (parca.md §1.5, §1.8), with its URL and the labels its profiles are
 * published under.
 *
 * Pure: no I/O, no loop. A target set owns everything in it.
 */
#ifndef EMBER_SCRAPER_TARGETS_H
#define EMBER_SCRAPER_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "lc/labels.h"

/* Caps: a discovery source cannot make one job hold more than this. */
#define SCR_MAX_TARGETS_PER_JOB 100000
#define SCR_MAX_DROPPED_PER_JOB 1000 /* kept for /targets; the count is exact */

typedef struct scr_target_spec_s {
    uint64_t key;           /* identity: job, URL and final labels */
    size_t profile;         /* index into job->profiles */
    lc_labels_t discovered; /* before relabeling (shown on /targets) */
    lc_labels_t labels;     /* after relabeling, __meta_* removed */
    lc_labels_t series;     /* published: no `__` labels, + service_name, __name__ */
    char *url;
} scr_target_spec_t;

typedef struct scr_dropped_s {
    lc_labels_t discovered;
    char *reason; /* "relabeling" or the error that dropped it */
} scr_dropped_t;

typedef struct scr_target_set_s {
    scr_target_spec_t *v;
    size_t n;
    scr_dropped_t *dropped; /* at most SCR_MAX_DROPPED_PER_JOB */
    size_t n_dropped;
    size_t n_dropped_total;
    size_t n_over_cap; /* targets not created: the job reached its cap */
} scr_target_set_t;

/* Builds the targets of job from groups (several lists, e.g. static and each
 * discoverer's). Duplicate keys are kept once. out is initialised by the call. */
void scr_targets_build(const scr_job_t *job, const scr_group_t *const *group_lists,
                       const size_t *n_groups, size_t n_lists, scr_target_set_t *out);
void scr_target_set_fini(scr_target_set_t *set);
void scr_target_spec_fini(scr_target_spec_t *t);

/* Appends a port from the scheme when addr has none ("h" -> "h:80",
 * "::1" -> "[::1]:443"); heap string. */
char *scr_address_with_port(const char *addr, const char *scheme);

#endif
