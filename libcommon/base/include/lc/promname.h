/*
 * lc/promname.h — Prometheus name syntax, for recording rules (issue 29):
 * a rule's metric name and its group_by/external label names become a
 * remote-write series, and a receiver rejects a name outside this syntax, so
 * ember rejects it when the rule is made instead of when it is exported.
 * Threading: pure functions.
 */
#ifndef LC_PROMNAME_H
#define LC_PROMNAME_H

#include <stdbool.h>
#include <stddef.h>

/* Longest name accepted; every input-driven size has a limit. */
#define LC_PROMNAME_MAX 256

/* A metric name: [a-zA-Z_:][a-zA-Z0-9_:]*, 1..LC_PROMNAME_MAX bytes. */
bool lc_promname_metric_valid(const char *name, size_t len);

/* A label name: [a-zA-Z_][a-zA-Z0-9_]*, 1..LC_PROMNAME_MAX bytes, and not
 * starting with "__" (Prometheus reserves those for itself). */
bool lc_promname_label_valid(const char *name, size_t len);

#endif
