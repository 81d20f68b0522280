/*
 * lc/labels.h — label sets and Prometheus-style selectors.
 *
 * A label set owns its strings (heap). Canonical form: sorted by name, names
 * unique. Selectors: `{name="v", name!="v", name=~"re", name!~"re"}` with
 * Prometheus string escapes; names may be bare ([a-zA-Z_][a-zA-Z0-9_.]*) or
 * quoted; regexes are PCRE2, fully anchored. A missing label matches as "".
 * The query form `<profile type id>{...}` (render, AnalyzeQuery) splits into a
 * profile type and a selector. Threading: a compiled selector may be matched
 * from several threads at once.
 */
#ifndef LC_LABELS_H
#define LC_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/hash.h" /* lc_hash64, which callers of this header have always found here */

typedef struct lc_label_s {
    char *name;
    char *value;
} lc_label_t;

typedef struct lc_labels_s {
    lc_label_t *v;
    size_t n;
    size_t cap;
} lc_labels_t;

void lc_labels_init(lc_labels_t *ls);
void lc_labels_fini(lc_labels_t *ls);
void lc_labels_copy(lc_labels_t *dst, const lc_labels_t *src); /* dst initialised by the call */
/* Appends (copies); does not check for duplicates. */
void lc_labels_add(lc_labels_t *ls, const char *name, const char *value);
/* Replaces the value of an existing name or appends. */
void lc_labels_set(lc_labels_t *ls, const char *name, const char *value);
const char *lc_labels_get(const lc_labels_t *ls, const char *name); /* NULL if absent */
bool lc_labels_del(lc_labels_t *ls, const char *name);
void lc_labels_sort(lc_labels_t *ls);
/* After sorting: the first duplicated name, or NULL. */
const char *lc_labels_duplicate(const lc_labels_t *ls);
/* Compact binary form (varint lengths) for storage and hashing. */
int lc_labels_encode(const lc_labels_t *ls, lc_buf_t *out) LC_MUST_CHECK;
int lc_labels_decode(const uint8_t *p, size_t len, lc_labels_t *out) LC_MUST_CHECK;
uint64_t lc_labels_hash(const lc_labels_t *ls);
int lc_labels_cmp(const lc_labels_t *a, const lc_labels_t *b);
/* Legacy Prometheus label name rule [a-zA-Z_][a-zA-Z0-9_]*. */
bool lc_label_name_is_legacy(const char *name);

/* The rule every label name and value meets wherever it enters ember (Push,
 * /ingest, pprof sample labels, OTLP attributes, JFR contexts, Parca writes,
 * scraper targets; docs/internals/ingest.md "Names are exact"): valid UTF-8
 * without a NUL byte and without U+FFFD (what a decoder put where bytes were
 * not text: the original is lost); a name is also non-empty and holds no
 * control character (U+0001..U+001F, U+007F). Length-aware, so that bytes can
 * be checked before they become a C string that a NUL would cut. Returns 0,
 * or -1 with st invalid_argument naming the label and what is wrong. */
int lc_label_check(const char *name, size_t name_len, const char *value, size_t value_len,
                   lc_status_t *st) LC_MUST_CHECK;

/* ---- selectors ---- */
/* Caps on client-supplied selectors (longer or larger ones are invalid_argument). */
#define LC_SELECTOR_MAX_BYTES (64 * 1024)
#define LC_SELECTOR_MAX_MATCHERS 64

typedef enum { LC_MATCH_EQ, LC_MATCH_NEQ, LC_MATCH_RE, LC_MATCH_NRE } lc_match_op_t;

typedef struct lc_matcher_s {
    char *name;
    char *value;
    lc_match_op_t op;
    struct lc_regex_s *_re; /* compiled pattern for RE/NRE (lc/regex.h) */
} lc_matcher_t;

/* A zeroed lc_selector_t ({0}) is the empty selector, ready for lc_selector_add. */
typedef struct lc_selector_s {
    lc_matcher_t *m;
    size_t n;
} lc_selector_t;

/* Parses "{...}" (whitespace allowed; "" and "{}" match everything). */
int lc_selector_parse(const char *s, size_t len, lc_selector_t *out, lc_status_t *st) LC_MUST_CHECK;
/* Parses "<profile_type>{...}"; *profile_type is heap-allocated (lc_free). */
int lc_selector_parse_query(const char *s, size_t len, char **profile_type, lc_selector_t *out,
                            lc_status_t *st) LC_MUST_CHECK;
void lc_selector_fini(lc_selector_t *sel);
/* Adds a matcher (copies strings; compiles regexes). */
int lc_selector_add(lc_selector_t *sel, const char *name, lc_match_op_t op, const char *value,
                    lc_status_t *st) LC_MUST_CHECK;
/* value NULL = "". Regexes use PCRE2 with `.` matching newlines (Prometheus'
 * `^(?s:re)$`); bytes of invalid UTF-8 in a value are matched by no pattern item.
 * Both return 1 (match), 0 (no match) or LC_EREGEX when a regex could not be
 * decided within its limits: the caller must answer with an error then, never
 * treat it as a miss (test `> 0`, not truthiness). */
int lc_matcher_match(const lc_matcher_t *m, const char *value) LC_MUST_CHECK;
int lc_selector_match(const lc_selector_t *sel, const lc_labels_t *ls) LC_MUST_CHECK;

#endif
