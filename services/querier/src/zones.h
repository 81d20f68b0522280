/*
 * zones.h — which ingesters a distributed query asks: the live members of
 * ONE complete zone (ARCHITECTURE.md, "Replication by zones").
 *
 * Every zone's consumer group reads every stream entry, so every zone holds
 * a full copy of every acknowledged profile, spread over its members. An
 * ingester id registered in a zone (lc_members_registry) that is not live
 * holds profiles no other member of its zone has: the zone is incomplete
 * until it is back, or until an operator removes it from the registry
 * (declaring its profiles gone from that zone).
 *
 * The rule: the first complete zone by name ("" — the default zone — sorts
 * first) whose live members carry no note (lc_member_t.note: an ingester
 * that restarted without profiles an earlier life of its id held, e.g. after
 * its volume was lost, lacks them for good); when every complete zone has
 * such a member, the first complete zone, and `lacking` says who. A live member that is not
 * registered (an older ingester) counts in the default zone and is never "missing". With no
 * complete zone there is no answer: the reason names the missing ids per zone, with the address
 * each was last seen at when known, except for queries that end below the
 * marks of a zone's missing members (history_below_ms): their history is in
 * the bucket, which the querier reads.
 *
 * Pure functions, no threads, no I/O.
 */
#ifndef EMBER_ZONES_H
#define EMBER_ZONES_H

#include <stdbool.h>
#include <stddef.h>

#include "lc/members.h"

#define QZ_REASON_MAX 1024

typedef struct qz_choice_s {
    char *zone;        /* the chosen zone; NULL when no zone is complete */
    char **urls;       /* the chosen zone's live members' addresses, sorted by id */
    int64_t *marks_ms; /* each one's mark (lc_members.h; LC_MEMBER_NO_MARK: none) */
    char *marks_spec;  /* the same marks for the bucket shard (lc_marks_spec_add); NULL: none */
    size_t n_urls;
    size_t n_zones, n_complete;
    char *reason; /* no complete zone although some exists: who is missing */
    /* With no complete zone, a zone whose missing members all have marks
     * still answers what ends below the lowest of them (issue 27: history is
     * in the bucket): then zone, urls and marks are its, marks_spec names its
     * missing members too, and history_below_ms is that bound; else INT64_MIN. */
    int64_t history_below_ms;
    char *lacking; /* the zone chosen has a noted member (none was whole): who */
} qz_choice_t;

/* live and reg sorted by id (as lc_members gives them); seen: id -> last
 * address (addr), any order, may be NULL; reads_bucket: the querier reads
 * below the marks (else no history answers). out must be zeroed or finished. */
void qz_choose(const lc_member_t *live, size_t n_live, const lc_member_t *reg, size_t n_reg,
               const lc_member_t *seen, size_t n_seen, bool reads_bucket, qz_choice_t *out);

void qz_choice_fini(qz_choice_t *c);

#endif
