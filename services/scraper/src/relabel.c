/*
 * relabel.c — Prometheus relabel_configs behind relabel.h.
 *
 * Written from Prometheus's documented semantics (model/relabel, and Go's
 * regexp.Expand for templates), so that a rule copied from a Prometheus or
 * Parca config behaves the same here. Regexes run on PCRE2 with the flags
 * that give Go's `^(?s:re)$`: anchored at both ends, `.` matching newlines,
 * `$` matching only at the very end. Subjects that are not valid UTF-8 are
 * matched byte-wise where valid and never match inside the bad bytes
 * (PCRE2_MATCH_INVALID_UTF), which is what RE2 does too.
 *
 * hashmod must give Prometheus's numbers, or targets sharded by hashmod would
 * move when a config is moved between Prometheus and ember; it therefore uses
 * MD5 (lc/md5.h, base).
 *
 * Sits on alloc, labels and libyaml's document API (the caller loads the
 * document; this module reads one sequence node of it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lc/alloc.h"
#include "lc/md5.h"
#include "lc/regex.h"
#include "relabel.h"

#define RELABEL_SHOW_MAX 200              /* bytes of a bad value quoted back in errors */
#define RELABEL_MAX_VALUE_BYTES (1 << 20) /* joined source values and expansions */

/* The compiled form behind scr_relabel_rule_t._re. */
typedef struct relabel_re_s {
    lc_regex_t *rx;
    uint32_t n_groups;  /* capture groups + 1 (the whole match) */
    const char **names; /* n_groups entries (owned by rx); NULL for unnamed groups */
} relabel_re_t;

/* Prometheus's sum64: the digest's last 8 bytes, big-endian (the shifts of the
 * first 8 bytes are 64 or more and vanish in Go). */
static uint64_t md5_sum64(const uint8_t digest[16])
{
    uint64_t s = 0;
    for (int i = 8; i < 16; i++)
        s = s << 8 | digest[i];
    return s;
}

/* ---------------------------------------------------------------- names */

static const char *const action_names[] = {
    [SCR_RELABEL_REPLACE] = "replace",     [SCR_RELABEL_KEEP] = "keep",
    [SCR_RELABEL_DROP] = "drop",           [SCR_RELABEL_KEEPEQUAL] = "keepequal",
    [SCR_RELABEL_DROPEQUAL] = "dropequal", [SCR_RELABEL_HASHMOD] = "hashmod",
    [SCR_RELABEL_LABELMAP] = "labelmap",   [SCR_RELABEL_LABELDROP] = "labeldrop",
    [SCR_RELABEL_LABELKEEP] = "labelkeep", [SCR_RELABEL_LOWERCASE] = "lowercase",
    [SCR_RELABEL_UPPERCASE] = "uppercase",
};

int scr_relabel_action_parse(const char *name)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(action_names); i++)
        if (strcasecmp(name, action_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *scr_relabel_action_name(scr_relabel_action_t a)
{
    return (size_t)a < LC_ARRAY_LEN(action_names) ? action_names[a] : "?";
}

/* ---------------------------------------------------------------- rule lifecycle */

#define DEFAULT_SEPARATOR ";"
#define DEFAULT_REGEX "(.*)"
#define DEFAULT_REPLACEMENT "$1"

void scr_relabel_rule_init(scr_relabel_rule_t *r)
{
    memset(r, 0, sizeof(*r));
    r->action = SCR_RELABEL_REPLACE;
    r->separator = lc_xstrdup(DEFAULT_SEPARATOR);
    r->regex = lc_xstrdup(DEFAULT_REGEX);
    r->target_label = lc_xstrdup("");
    r->replacement = lc_xstrdup(DEFAULT_REPLACEMENT);
}

static void re_free(relabel_re_t *re)
{
    if (!re)
        return;
    lc_regex_free(re->rx);
    lc_free(re->names);
    lc_free(re);
}

void scr_relabel_rule_fini(scr_relabel_rule_t *r)
{
    for (size_t i = 0; i < r->n_source_labels; i++)
        lc_free(r->source_labels[i]);
    lc_free(r->source_labels);
    lc_free(r->separator);
    lc_free(r->regex);
    lc_free(r->target_label);
    lc_free(r->replacement);
    re_free(r->_re);
    memset(r, 0, sizeof(*r));
}

void scr_relabel_fini(scr_relabel_t *rl)
{
    for (size_t i = 0; i < rl->n; i++)
        scr_relabel_rule_fini(&rl->rules[i]);
    lc_free(rl->rules);
    rl->rules = NULL;
    rl->n = 0;
}

/* ---------------------------------------------------------------- validation */

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Length of a `$name` or `${name}` reference at s (s[0] == '$'), 0 if none. */
static size_t template_ref_len(const char *s)
{
    if (s[1] == '{') {
        size_t i = 2;
        while (is_word(s[i]))
            i++;
        return i > 2 && s[i] == '}' ? i + 1 : 0;
    }
    size_t i = 1;
    while (is_word(s[i]))
        i++;
    return i > 1 ? i : 0;
}

/* Prometheus's relabelTarget: `^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$`,
 * i.e. word characters and references, not starting with a digit. */
static bool valid_label_template(const char *s)
{
    if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; s[i];) {
        if (s[i] == '$') {
            size_t n = template_ref_len(s + i);
            if (!n)
                return false;
            i += n;
        } else if (is_word(s[i])) {
            i++;
        } else {
            return false;
        }
    }
    return true;
}

static int check_target_label(const scr_relabel_rule_t *r, lc_status_t *st)
{
    scr_relabel_action_t a = r->action;
    bool needs = a == SCR_RELABEL_REPLACE || a == SCR_RELABEL_HASHMOD ||
                 a == SCR_RELABEL_LOWERCASE || a == SCR_RELABEL_UPPERCASE ||
                 a == SCR_RELABEL_KEEPEQUAL || a == SCR_RELABEL_DROPEQUAL;
    if (!needs)
        return 0;
    if (!r->target_label[0])
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "target_label: relabel configuration for %s action requires "
                             "'target_label' value",
                             scr_relabel_action_name(a));
    bool ok = a == SCR_RELABEL_REPLACE ? valid_label_template(r->target_label)
                                       : lc_label_name_is_legacy(r->target_label);
    if (!ok)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "target_label: \"%.*s\" is invalid 'target_label' for %s action",
                             RELABEL_SHOW_MAX, r->target_label, scr_relabel_action_name(a));
    return 0;
}

static int check_only_fields(const scr_relabel_rule_t *r, lc_status_t *st)
{
    scr_relabel_action_t a = r->action;
    bool default_rest = r->modulus == 0 && strcmp(r->separator, DEFAULT_SEPARATOR) == 0 &&
                        strcmp(r->replacement, DEFAULT_REPLACEMENT) == 0;
    if ((a == SCR_RELABEL_LABELDROP || a == SCR_RELABEL_LABELKEEP) &&
        (r->n_source_labels || r->target_label[0] || !default_rest))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "action: %s action requires only 'regex', and no other fields",
                             scr_relabel_action_name(a));
    if ((a == SCR_RELABEL_KEEPEQUAL || a == SCR_RELABEL_DROPEQUAL) &&
        (strcmp(r->regex, DEFAULT_REGEX) != 0 || !default_rest))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "action: %s action requires only 'source_labels' and "
                             "'target_label', and no other fields",
                             scr_relabel_action_name(a));
    if ((a == SCR_RELABEL_LOWERCASE || a == SCR_RELABEL_UPPERCASE) &&
        strcmp(r->replacement, DEFAULT_REPLACEMENT) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "replacement: 'replacement' can not be set for %s action",
                             scr_relabel_action_name(a));
    return 0;
}

static int check_rule(const scr_relabel_rule_t *r, lc_status_t *st)
{
    if (r->action == SCR_RELABEL_HASHMOD && r->modulus == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "modulus: relabel configuration for hashmod requires non-zero "
                             "modulus");
    for (size_t i = 0; i < r->n_source_labels; i++)
        if (!lc_label_name_is_legacy(r->source_labels[i]))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "source_labels: \"%.200s\" is not a valid label name",
                                 r->source_labels[i]);
    int rc = check_target_label(r, st);
    if (rc)
        return rc;
    if (r->action == SCR_RELABEL_LABELMAP && !valid_label_template(r->replacement))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "replacement: \"%.*s\" is invalid 'replacement' for labelmap action",
                             RELABEL_SHOW_MAX, r->replacement);
    return check_only_fields(r, st);
}

/* ---------------------------------------------------------------- regex */

static int scr_re_compile(scr_relabel_rule_t *r, lc_status_t *st)
{
    char msg[200];
    lc_regex_t *rx;
    if (lc_regex_compile(r->regex, LC_REGEX_DOLLAR_ENDONLY, &rx, msg, sizeof(msg)) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "regex: invalid regular expression \"%.*s\": %s", RELABEL_SHOW_MAX,
                             r->regex, msg);
    relabel_re_t *re = lc_xcalloc(1, sizeof(*re));
    re->rx = rx;
    re->n_groups = lc_regex_groups(rx);
    re->names = lc_xcalloc(re->n_groups, sizeof(char *));
    for (uint32_t i = 0; i < re->n_groups; i++)
        re->names[i] = lc_regex_group_name(rx, i);
    re_free(r->_re);
    r->_re = re;
    return 0;
}

int scr_relabel_rule_compile(scr_relabel_rule_t *r, lc_status_t *st)
{
    int rc = check_rule(r, st);
    return rc ? rc : scr_re_compile(r, st);
}

/* Matches subject; on success fills groups (2 * n_groups offsets, -1 unset).
 * A match PCRE2 cannot decide (LC_EREGEX, only past the match limit now that
 * JIT overflows fall back to the interpreter) counts as no match here, as in
 * Prometheus, whose RE2 has no such limit to hit: relabelling has no error
 * path back to a client, and keep/drop must stay total. */
static bool re_match(const relabel_re_t *re, const char *subject, long *groups)
{
    return lc_regex_match(re->rx, subject, strlen(subject), groups) > 0;
}

/* ---------------------------------------------------------------- expansion */

/* Go's regexp extract(): parses `$name` / `${name}` at s. Returns the length
 * consumed (0 = malformed), the name span and its number (-1 if not a number). */
static size_t expand_ref(const char *s, const char **name, size_t *name_len, long *num)
{
    size_t len = template_ref_len(s);
    if (!len)
        return 0;
    bool brace = s[1] == '{';
    *name = s + (brace ? 2 : 1);
    *name_len = len - (brace ? 3 : 1);
    *num = 0;
    for (size_t i = 0; i < *name_len; i++) {
        char c = (*name)[i];
        if (c < '0' || c > '9' || *num >= 100000000) {
            *num = -1;
            break;
        }
        *num = *num * 10 + (c - '0');
    }
    if ((*name)[0] == '0' && *name_len > 1)
        *num = -1; /* Go disallows leading zeros */
    return len;
}

static long group_by_name(const char *const *names, size_t n_groups, const char *name, size_t len)
{
    for (size_t i = 0; names && i < n_groups; i++)
        if (names[i] && strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
            return (long)i;
    return -1;
}

int scr_relabel_expand(const char *tmpl, const char *subject, const long *groups, size_t n_groups,
                       const char *const *names, lc_buf_t *out)
{
    for (const char *p = tmpl; *p;) {
        const char *dollar = strchr(p, '$');
        size_t lit = dollar ? (size_t)(dollar - p) : strlen(p);
        int rc = lc_buf_append(out, p, lit);
        if (rc || !dollar)
            return rc;
        p = dollar;
        if (p[1] == '$') {
            rc = lc_buf_putc(out, '$');
            p += 2;
            if (rc)
                return rc;
            continue;
        }
        const char *name;
        size_t name_len;
        long num;
        size_t used = expand_ref(p, &name, &name_len, &num);
        if (!used) { /* malformed: the '$' is literal text */
            rc = lc_buf_putc(out, '$');
            p++;
            if (rc)
                return rc;
            continue;
        }
        p += used;
        long g = num >= 0 ? num : group_by_name(names, n_groups, name, name_len);
        if (g >= 0 && (size_t)g < n_groups && groups[2 * g] >= 0) {
            rc = lc_buf_append(out, subject + groups[2 * g],
                               (size_t)(groups[2 * g + 1] - groups[2 * g]));
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Expands tmpl for one match into a NUL-terminated heap string (NULL if too big). */
static char *expand_string(const relabel_re_t *re, const char *tmpl, const char *subject,
                           const long *groups)
{
    lc_buf_t b;
    lc_buf_init(&b, RELABEL_MAX_VALUE_BYTES);
    if (scr_relabel_expand(tmpl, subject, groups, re->n_groups, (const char *const *)re->names,
                           &b) ||
        lc_buf_putc(&b, '\0')) {
        lc_buf_fini(&b);
        return NULL;
    }
    size_t len;
    return (char *)lc_buf_steal(&b, &len);
}

/* ---------------------------------------------------------------- applying */

static const char *get_value(const lc_labels_t *ls, const char *name)
{
    const char *v = lc_labels_get(ls, name);
    return v ? v : "";
}

/* Prometheus's labels.Builder.Set: an empty value deletes. */
static void set_value(lc_labels_t *ls, const char *name, const char *value)
{
    if (value[0])
        lc_labels_set(ls, name, value);
    else
        lc_labels_del(ls, name);
}

/* The source label values joined by the separator (heap; NULL past the cap). */
static char *joined_sources(const scr_relabel_rule_t *r, const lc_labels_t *ls)
{
    lc_buf_t b;
    lc_buf_init(&b, RELABEL_MAX_VALUE_BYTES);
    int rc = 0;
    for (size_t i = 0; i < r->n_source_labels && !rc; i++) {
        if (i)
            rc = lc_buf_puts(&b, r->separator);
        if (!rc)
            rc = lc_buf_puts(&b, get_value(ls, r->source_labels[i]));
    }
    if (!rc)
        rc = lc_buf_putc(&b, '\0');
    size_t len;
    char *s = rc ? NULL : (char *)lc_buf_steal(&b, &len);
    lc_buf_fini(&b);
    return s;
}

static void apply_replace(const scr_relabel_rule_t *r, const char *val, lc_labels_t *ls)
{
    const relabel_re_t *re = r->_re;
    long *groups = lc_xcalloc(2 * (size_t)re->n_groups, sizeof(long));
    if (re_match(re, val, groups)) {
        char *target = expand_string(re, r->target_label, val, groups);
        char *res = target ? expand_string(re, r->replacement, val, groups) : NULL;
        if (target && res && lc_label_name_is_legacy(target))
            set_value(ls, target, res);
        lc_free(target);
        lc_free(res);
    }
    lc_free(groups);
}

static void apply_case(const scr_relabel_rule_t *r, const char *val, lc_labels_t *ls, bool upper)
{
    char *s = lc_xstrdup(val);
    for (char *p = s; *p; p++) {
        if (upper && *p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
        else if (!upper && *p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    }
    set_value(ls, r->target_label, s);
    lc_free(s);
}

static void apply_hashmod(const scr_relabel_rule_t *r, const char *val, lc_labels_t *ls)
{
    uint8_t digest[16];
    lc_md5(val, strlen(val), digest);
    char num[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)(md5_sum64(digest) % r->modulus));
    set_value(ls, r->target_label, num);
}

/* Names of ls copied, so rules may change ls while iterating. */
static char **snapshot_names(const lc_labels_t *ls)
{
    char **names = lc_xcalloc(ls->n + 1, sizeof(char *));
    for (size_t i = 0; i < ls->n; i++)
        names[i] = lc_xstrdup(ls->v[i].name);
    return names;
}

static void free_names(char **names)
{
    for (size_t i = 0; names[i]; i++)
        lc_free(names[i]);
    lc_free(names);
}

static void apply_labelmap(const scr_relabel_rule_t *r, lc_labels_t *ls)
{
    const relabel_re_t *re = r->_re;
    char **names = snapshot_names(ls);
    long *groups = lc_xcalloc(2 * (size_t)re->n_groups, sizeof(long));
    for (size_t i = 0; names[i]; i++) {
        if (!re_match(re, names[i], groups))
            continue;
        char *res = expand_string(re, r->replacement, names[i], groups);
        const char *value = lc_labels_get(ls, names[i]);
        if (res && value && lc_label_name_is_legacy(res)) {
            char *copy = lc_xstrdup(value);
            set_value(ls, res, copy);
            lc_free(copy);
        }
        lc_free(res);
    }
    lc_free(groups);
    free_names(names);
}

static void apply_labelfilter(const scr_relabel_rule_t *r, lc_labels_t *ls, bool keep_matching)
{
    char **names = snapshot_names(ls);
    for (size_t i = 0; names[i]; i++)
        if (re_match(r->_re, names[i], NULL) != keep_matching)
            lc_labels_del(ls, names[i]);
    free_names(names);
}

/* One rule; false when it dropped the set. */
static bool apply_rule(const scr_relabel_rule_t *r, lc_labels_t *ls)
{
    char *val = joined_sources(r, ls);
    if (!val)
        return true; /* a value past the cap matches nothing a rule could mean */
    bool keep = true;
    switch (r->action) {
    case SCR_RELABEL_REPLACE:
        apply_replace(r, val, ls);
        break;
    case SCR_RELABEL_KEEP:
        keep = re_match(r->_re, val, NULL);
        break;
    case SCR_RELABEL_DROP:
        keep = !re_match(r->_re, val, NULL);
        break;
    case SCR_RELABEL_KEEPEQUAL:
        keep = strcmp(get_value(ls, r->target_label), val) == 0;
        break;
    case SCR_RELABEL_DROPEQUAL:
        keep = strcmp(get_value(ls, r->target_label), val) != 0;
        break;
    case SCR_RELABEL_HASHMOD:
        apply_hashmod(r, val, ls);
        break;
    case SCR_RELABEL_LABELMAP:
        apply_labelmap(r, ls);
        break;
    case SCR_RELABEL_LABELDROP:
        apply_labelfilter(r, ls, false);
        break;
    case SCR_RELABEL_LABELKEEP:
        apply_labelfilter(r, ls, true);
        break;
    case SCR_RELABEL_LOWERCASE:
        apply_case(r, val, ls, false);
        break;
    case SCR_RELABEL_UPPERCASE:
        apply_case(r, val, ls, true);
        break;
    }
    lc_free(val);
    return keep;
}

bool scr_relabel_apply(const scr_relabel_t *rl, lc_labels_t *ls)
{
    for (size_t i = 0; i < rl->n; i++)
        if (!apply_rule(&rl->rules[i], ls))
            return false;
    return true;
}

/* ---------------------------------------------------------------- YAML */

typedef struct yaml_ctx_s {
    yaml_document_t *doc;
    const char *where;
    size_t index;
    lc_status_t *st;
} yaml_ctx_t;

static int yfail(const yaml_ctx_t *c, const yaml_node_t *n, const char *fmt, const char *field)
{
    return lc_status_set(c->st, LC_CODE_INVALID_ARGUMENT, "%s[%zu]: %s%s%s (line %zu)", c->where,
                         c->index, field ? field : "", field ? ": " : "", fmt,
                         n ? (size_t)n->start_mark.line + 1 : (size_t)0);
}

static const char *yscalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int ystring(const yaml_ctx_t *c, yaml_node_t *n, const char *field, char **out)
{
    const char *s = yscalar(n);
    if (!s)
        return yfail(c, n, "expected a string", field);
    lc_free(*out);
    *out = lc_xstrdup(s);
    return 0;
}

static int ysource_labels(const yaml_ctx_t *c, yaml_node_t *n, scr_relabel_rule_t *r)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return yfail(c, n, "expected a list of label names", "source_labels");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count > SCR_RELABEL_MAX_SOURCE_LABELS)
        return yfail(c, n, "too many source labels", "source_labels");
    if (r->source_labels) /* as Prometheus' YAML: a key once per rule */
        return yfail(c, n, "given twice in one rule", "source_labels");
    r->source_labels = lc_xcalloc(count ? count : 1, sizeof(char *));
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        const char *s = yscalar(item);
        if (!s)
            return yfail(c, item, "expected a label name", "source_labels");
        r->source_labels[r->n_source_labels++] = lc_xstrdup(s);
    }
    return 0;
}

static int ymodulus(const yaml_ctx_t *c, yaml_node_t *n, scr_relabel_rule_t *r)
{
    const char *s = yscalar(n);
    char *end = NULL;
    unsigned long long v = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!s || !end || *end)
        return yfail(c, n, "expected a non-negative integer", "modulus");
    r->modulus = v;
    return 0;
}

static int yaction(const yaml_ctx_t *c, yaml_node_t *n, scr_relabel_rule_t *r)
{
    const char *s = yscalar(n);
    if (!s || !s[0])
        return yfail(c, n, "relabel action cannot be empty", "action");
    int a = scr_relabel_action_parse(s);
    if (a < 0) {
        char msg[LC_STATUS_MSG_MAX];
        snprintf(msg, sizeof(msg), "unknown relabel action \"%.*s\"", RELABEL_SHOW_MAX, s);
        return yfail(c, n, msg, "action");
    }
    r->action = (scr_relabel_action_t)a;
    return 0;
}

static int yfield(const yaml_ctx_t *c, const char *key, yaml_node_t *v, scr_relabel_rule_t *r)
{
    if (strcmp(key, "source_labels") == 0)
        return ysource_labels(c, v, r);
    if (strcmp(key, "separator") == 0)
        return ystring(c, v, key, &r->separator);
    if (strcmp(key, "regex") == 0)
        return ystring(c, v, key, &r->regex);
    if (strcmp(key, "target_label") == 0)
        return ystring(c, v, key, &r->target_label);
    if (strcmp(key, "replacement") == 0)
        return ystring(c, v, key, &r->replacement);
    if (strcmp(key, "modulus") == 0)
        return ymodulus(c, v, r);
    if (strcmp(key, "action") == 0)
        return yaction(c, v, r);
    char msg[LC_STATUS_MSG_MAX];
    snprintf(msg, sizeof(msg), "field %.*s not found in type relabel.Config", RELABEL_SHOW_MAX,
             key);
    return yfail(c, v, msg, NULL);
}

static int yrule(const yaml_ctx_t *c, yaml_node_t *n, scr_relabel_rule_t *r)
{
    if (!n || n->type != YAML_MAPPING_NODE)
        return yfail(c, n, "empty or null relabeling rule in config", NULL);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const char *key = yscalar(yaml_document_get_node(c->doc, p->key));
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!key)
            return yfail(c, n, "keys must be strings", NULL);
        int rc = yfield(c, key, v, r);
        if (rc)
            return rc;
    }
    lc_status_t inner = {0};
    if (scr_relabel_rule_compile(r, &inner))
        return yfail(c, n, inner.msg, NULL);
    return 0;
}

static bool ynull(const yaml_node_t *n)
{
    const char *s = yscalar(n);
    return !n || (s && (!s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0) &&
                  n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE);
}

int scr_relabel_parse_yaml(yaml_document_t *doc, yaml_node_t *seq, const char *where,
                           scr_relabel_t *rl, lc_status_t *st)
{
    rl->rules = NULL;
    rl->n = 0;
    yaml_ctx_t c = {.doc = doc, .where = where, .st = st};
    if (ynull(seq))
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: expected a list (line %zu)", where,
                             (size_t)seq->start_mark.line + 1);
    size_t count = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (count > SCR_RELABEL_MAX_RULES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: more than %d rules", where,
                             SCR_RELABEL_MAX_RULES);
    rl->rules = lc_xcalloc(count ? count : 1, sizeof(*rl->rules));
    for (size_t i = 0; i < count; i++) {
        c.index = i;
        yaml_node_t *n = yaml_document_get_node(doc, seq->data.sequence.items.start[i]);
        scr_relabel_rule_init(&rl->rules[i]);
        rl->n++;
        if (ynull(n))
            return yfail(&c, n, "empty or null relabeling rule in config", NULL);
        int rc = yrule(&c, n, &rl->rules[i]);
        if (rc)
            return rc;
    }
    return 0;
}
