/*
 * lc/relabel.h — Prometheus relabel_configs: parse, validate and apply.
 *
 * Semantics follow Prometheus (model/relabel): rules run in order over one
 * label set; a label with an empty value is the same as an absent one; source
 * values are joined with `separator`; `regex` is fully anchored and `.`
 * matches newlines (Prometheus compiles `^(?s:re)$`; ember uses PCRE2, whose
 * syntax covers RE2's); `replacement` and a templated `target_label` expand
 * `$1`, `${1}`, `$name`, `${name}` and `$$` exactly like Go's
 * regexp.Expand. Actions: replace (default), keep, drop, keepequal,
 * dropequal, hashmod (MD5 of the joined value, as Prometheus), labelmap,
 * labeldrop, labelkeep, lowercase, uppercase.
 *
 * Threading: a compiled rule list is read-only and may be applied from several
 * threads at once.
 */
#ifndef LC_RELABEL_H
#define LC_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "lc/err.h"
#include "lc/labels.h"

/* Caps on what one config may declare (larger lists are invalid_argument). */
#define LC_RELABEL_MAX_RULES 1024
#define LC_RELABEL_MAX_SOURCE_LABELS 64

typedef enum {
    LC_RELABEL_REPLACE,
    LC_RELABEL_KEEP,
    LC_RELABEL_DROP,
    LC_RELABEL_KEEPEQUAL,
    LC_RELABEL_DROPEQUAL,
    LC_RELABEL_HASHMOD,
    LC_RELABEL_LABELMAP,
    LC_RELABEL_LABELDROP,
    LC_RELABEL_LABELKEEP,
    LC_RELABEL_LOWERCASE,
    LC_RELABEL_UPPERCASE,
} lc_relabel_action_t;

/* One rule. Fill the fields (heap strings, owned by the rule) after
 * lc_relabel_rule_init, then lc_relabel_rule_compile. */
typedef struct lc_relabel_rule_s {
    lc_relabel_action_t action;
    char **source_labels;
    size_t n_source_labels;
    char *separator;    /* default ";" */
    char *regex;        /* as written, unanchored; default "(.*)" */
    char *target_label; /* default "" */
    char *replacement;  /* default "$1" */
    uint64_t modulus;   /* hashmod only */
    void *_re;          /* compiled pcre2_code */
} lc_relabel_rule_t;

typedef struct lc_relabel_s {
    lc_relabel_rule_t *rules;
    size_t n;
} lc_relabel_t;

/* Sets the Prometheus defaults (action replace, separator ";", regex "(.*)",
 * replacement "$1"). */
void lc_relabel_rule_init(lc_relabel_rule_t *r);
void lc_relabel_rule_fini(lc_relabel_rule_t *r);
/* Validates the rule as Prometheus does and compiles its regex. Errors are
 * invalid_argument naming the field ("target_label", "regex", ...). */
int lc_relabel_rule_compile(lc_relabel_rule_t *r, lc_status_t *st) LC_MUST_CHECK;

/* Parses a YAML sequence of relabel_config mappings into rl (initialised by
 * the call; free with lc_relabel_fini even after an error). Unknown keys and
 * null entries are errors; messages start with `where` (e.g. `job "api":
 * relabel_configs`) and the index of the rule. */
int lc_relabel_parse_yaml(yaml_document_t *doc, yaml_node_t *seq, const char *where,
                          lc_relabel_t *rl, lc_status_t *st) LC_MUST_CHECK;
void lc_relabel_fini(lc_relabel_t *rl);

/* Runs the rules over ls in place. Returns false when a keep/drop rule dropped
 * the whole set (ls is then in an unspecified state). */
bool lc_relabel_apply(const lc_relabel_t *rl, lc_labels_t *ls);

/* "replace" -> LC_RELABEL_REPLACE (case-insensitive); -1 when unknown. */
int lc_relabel_action_parse(const char *name);
const char *lc_relabel_action_name(lc_relabel_action_t a);

/* Go regexp.Expand of `tmpl` with the match groups of one match: groups[2i],
 * groups[2i+1] are the byte offsets of group i in subject (-1 when it did not
 * participate), names[i] its name or NULL. Appends to out. Exposed for tests. */
int lc_relabel_expand(const char *tmpl, const char *subject, const long *groups, size_t n_groups,
                      const char *const *names, lc_buf_t *out) LC_MUST_CHECK;

/* MD5 digest (RFC 1321) of len bytes; hashmod needs exactly Prometheus's hash. */
void lc_md5(const void *data, size_t len, uint8_t digest[16]);

#endif
