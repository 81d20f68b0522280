/*
 * lc/attime.h — Graphite-style times ("attime") as Pyroscope reads them in
 * /ingest `from`/`until` and /pyroscope/render* `from`/`until`/`leftFrom`/...
 * (pyroscope-api.md §7.6). Shared by the ingester and the querier so both
 * endpoints read a time the same way. Pure and thread-safe.
 */
#ifndef LC_ATTIME_H
#define LC_ATTIME_H

#include <stdint.h>

/* Longest input looked at; the rest is ignored (inputs are query parameters). */
#define LC_ATTIME_MAX_LEN 256

/* The time s names, as Unix nanoseconds; now_ns stands for "now". Never fails:
 * an unparseable (or NULL) string is now_ns. Arithmetic saturates. */
int64_t lc_attime_parse(const char *s, int64_t now_ns);

#endif
