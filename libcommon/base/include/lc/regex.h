/*
 * lc/regex.h — the one place ember sets up PCRE2: compile with Prometheus'
 * semantics (UTF, anchored at both ends, `.` matches newlines) and match with
 * bounded work and an answer that is never a silent "no".
 *
 * Matching runs the JIT with a per-thread stack sized for long label values;
 * a JIT stack overflow is retried with the interpreter (heap-backed, bounded
 * by PCRE2's heap and match limits). Any PCRE2 error other than "no match"
 * comes back as LC_EREGEX so the caller answers with an error, not with an
 * empty result: a wrong 200 is worse than a 4xx.
 *
 * Ownership: lc_regex_compile returns a regex the caller frees with
 * lc_regex_free. Threading: a compiled regex is read-only and may be matched
 * from any number of threads at once; each thread has its own match data,
 * match context and JIT stack (freed when the thread exits).
 */
#ifndef LC_REGEX_H
#define LC_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"

typedef struct lc_regex_s lc_regex_t;

/* Compile flags beyond the defaults. */
#define LC_REGEX_DOLLAR_ENDONLY 0x1u /* `$` matches only at the very end (Go's RE2) */

/* Backtracking steps per match: enough for any sane pattern over a label
 * value, small enough that a hostile one cannot stall a thread. */
#define LC_REGEX_MATCH_LIMIT 1000000u
/* Largest JIT stack one thread may use. Patterns such as (a)+b need ~32 bytes
 * of JIT stack per subject byte, so 1 MiB covers values up to ~32 KiB; past
 * that the interpreter takes over (see lc_regex_match). Reserved, not
 * touched, until a match needs it. */
#define LC_REGEX_JIT_STACK_MAX (1u << 20)

/* Compiles pattern (NUL-terminated). On failure returns LC_EINPUT and writes
 * PCRE2's message and the offset as "<msg> at offset N" into err. */
int lc_regex_compile(const char *pattern, uint32_t flags, lc_regex_t **out, char *err,
                     size_t err_size) LC_MUST_CHECK;
void lc_regex_free(lc_regex_t *re); /* NULL-safe */

/* Capture groups + 1 (the whole match). */
uint32_t lc_regex_groups(const lc_regex_t *re);
/* The name of group i, or NULL when it has none. */
const char *lc_regex_group_name(const lc_regex_t *re, uint32_t i);

/* Matches s[0, len). Returns 1 on a match, 0 on none, LC_EREGEX when PCRE2
 * could not decide (match or heap limit, internal error). When groups is not
 * NULL and the regex matched, fills 2 * lc_regex_groups() offsets (-1 unset). */
int lc_regex_match(const lc_regex_t *re, const char *s, size_t len, long *groups) LC_MUST_CHECK;

/* The PCRE2 error code behind the last LC_EREGEX on this thread (for messages). */
int lc_regex_last_error(void);

#endif
