/*
 * relabel.h — Prometheus relabel_configs: parse, validate and apply.
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
#ifndef SCR_RELABEL_H
#define SCR_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "lc/err.h"
#include "lc/labels.h"

/* Caps on what one config may declare (larger lists are invalid_argument). */
#define SCR_RELABEL_MAX_RULES 1024
#define SCR_RELABEL_MAX_SOURCE_LABELS 64

typedef enum {
    SCR_RELABEL_REPLACE,
    SCR_RELABEL_KEEP,
    SCR_RELABEL_DROP,
    SCR_RELABEL_KEEPEQUAL,
    SCR_RELABEL_DROPEQUAL,
    SCR_RELABEL_HASHMOD,
    SCR_RELABEL_LABELMAP,
    SCR_RELABEL_LABELDROP,
    SCR_RELABEL_LABELKEEP,
    SCR_RELABEL_LOWERCASE,
    SCR_RELABEL_UPPERCASE,
} scr_relabel_action_t;

/* One rule. Fill the fields (heap strings, owned by the rule) after
 * scr_relabel_rule_init, then scr_relabel_rule_compile. */
typedef struct scr_relabel_rule_s {
    scr_relabel_action_t action;
    char **source_labels;
    size_t n_source_labels;
    char *separator;    /* default ";" */
    char *regex;        /* as written, unanchored; default "(.*)" */
    char *target_label; /* default "" */
    char *replacement;  /* default "$1" */
    uint64_t modulus;   /* hashmod only */
    void *_re;          /* compiled pcre2_code */
} scr_relabel_rule_t;

typedef struct scr_relabel_s {
    scr_relabel_rule_t *rules;
    size_t n;
} scr_relabel_t;

/* Sets the Prometheus defaults (action replace, separator ";", regex "(.*)",
 * replacement "$1"). */
void scr_relabel_rule_init(scr_relabel_rule_t *r);
void scr_relabel_rule_fini(scr_relabel_rule_t *r);
/* Validates the rule as Prometheus does and compiles its regex. Errors are
 * invalid_argument naming the field ("target_label", "regex", ...). */
int scr_relabel_rule_compile(scr_relabel_rule_t *r, lc_status_t *st) LC_MUST_CHECK;

/* Parses a YAML sequence of relabel_config mappings into rl (initialised by
 * the call; free with scr_relabel_fini even after an error). Unknown keys and
 * null entries are errors; messages start with `where` (e.g. `job "api":
 * relabel_configs`) and the index of the rule. */
int scr_relabel_parse_yaml(yaml_document_t *doc, yaml_node_t *seq, const char *where,
                           scr_relabel_t *rl, lc_status_t *st) LC_MUST_CHECK;
void scr_relabel_fini(scr_relabel_t *rl);

/* Runs the rules over ls in place. Returns false when a keep/drop rule dropped
 * the whole set (ls is then in an unspecified state). */
bool scr_relabel_apply(const scr_relabel_t *rl, lc_labels_t *ls);

/* "replace" -> SCR_RELABEL_REPLACE (case-insensitive); -1 when unknown. */
int scr_relabel_action_parse(const char *name);
const char *scr_relabel_action_name(scr_relabel_action_t a);

/* Go regexp.Expand of `tmpl` with the match groups of one match: groups[2i],
 * groups[2i+1] are the byte offsets of group i in subject (-1 when it did not
 * participate), names[i] its name or NULL. Appends to out. Exposed for tests. */
int scr_relabel_expand(const char *tmpl, const char *subject, const long *groups, size_t n_groups,
                       const char *const *names, lc_buf_t *out) LC_MUST_CHECK;

#endif
