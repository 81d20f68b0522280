/*
 * rules_validate.c — what makes a recording rule acceptable (rules.h):
 * Pyroscope's checks (pkg/settings/recording validateUpsert and
 * pkg/model/recording_rule.go) and ember's caps, each failure a clear
 * invalid_argument, so that a rule that could never be exported is refused
 * when it is made.
 */
#include <ctype.h>
#include <string.h>
#include <sys/random.h>

#include "lc/labels.h"
#include "lc/promname.h"
#include "lc/utf8.h"
#include "rules.h"

#define PROFILE_TYPE_LABEL "__profile_type__"
#define METRIC_NAME_PREFIX "profiles_recorded_" /* Pyroscope requires it */
#define RULE_ID_LABEL "profiles_rule_id"        /* added to every exported series */
#define GENERATED_ID_LEN 10

static int refuse_rule(lc_status_t *st, const char *what, const char *value)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid request: %s%s%.300s", what,
                         value ? " " : "", value ? value : "");
}

static bool id_valid(const char *id)
{
    size_t len = strlen(id);
    if (len == 0 || len > QRY_RULE_ID_MAX_BYTES)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalpha((unsigned char)id[i]))
            return false;
    return true;
}

/* Pyroscope's ids: 10 random ASCII letters. */
static char *generate_id(lc_arena_t *a)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    unsigned char r[GENERATED_ID_LEN];
    char *id = lc_arena_alloc(a, GENERATED_ID_LEN + 1);
    if (!id || getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return NULL;
    for (size_t i = 0; i < GENERATED_ID_LEN; i++)
        id[i] = alphabet[r[i] % (sizeof(alphabet) - 1)];
    id[GENERATED_ID_LEN] = '\0';
    return id;
}

char *qry_rule_trim(char *s, lc_arena_t *a)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    return s[len] ? lc_arena_strndup(a, s, len) : s;
}

static int check_metric_name(const char *name, lc_status_t *st)
{
    if (!name[0])
        return refuse_rule(st, "metric_name is required", NULL);
    if (!lc_promname_metric_valid(name, strlen(name)))
        return refuse_rule(
            st, "metric_name must match [a-zA-Z_:][a-zA-Z0-9_:]* (at most 256 bytes):", name);
    if (strncmp(name, METRIC_NAME_PREFIX, sizeof(METRIC_NAME_PREFIX) - 1) != 0)
        return refuse_rule(st, "metric_name must start with " METRIC_NAME_PREFIX ":", name);
    return 0;
}

/* Parses one matcher string; counts its __profile_type__ matchers, which
 * must be equalities. */
static int check_matcher(const char *m, int *profile_types, lc_status_t *st)
{
    if (strlen(m) > QRY_RULE_MATCHER_MAX_BYTES)
        return refuse_rule(st, "a matcher is longer than 4096 bytes:", m);
    lc_selector_t sel = {0};
    lc_status_t parse = {0};
    if (lc_selector_parse(m, strlen(m), &sel, &parse))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid request: matcher %.300s: %s", m,
                             parse.msg);
    int rc = 0;
    for (size_t i = 0; i < sel.n && rc == 0; i++) {
        if (strcmp(sel.m[i].name, PROFILE_TYPE_LABEL) != 0)
            continue;
        (*profile_types)++;
        if (sel.m[i].op != LC_MATCH_EQ)
            rc = refuse_rule(st, "the " PROFILE_TYPE_LABEL " matcher must be an equality (=):", m);
    }
    lc_selector_fini(&sel);
    return rc;
}

static int check_matchers(char **matchers, size_t n, lc_status_t *st)
{
    if (n > QRY_RULE_MAX_MATCHERS)
        return refuse_rule(st, "a rule has at most 16 matchers", NULL);
    int profile_types = 0;
    for (size_t i = 0; i < n; i++)
        if (check_matcher(matchers[i], &profile_types, st))
            return -1;
    if (profile_types != 1)
        return refuse_rule(st, "matchers must contain exactly one " PROFILE_TYPE_LABEL " matcher",
                           NULL);
    return 0;
}

/* A label name that becomes part of an exported series. */
static int check_label_name(const char *what, const char *name, lc_status_t *st)
{
    if (!lc_promname_label_valid(name, strlen(name)))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid request: %s %.300s must match [a-zA-Z_][a-zA-Z0-9_]* "
                             "without a __ prefix",
                             what, name);
    if (strcmp(name, RULE_ID_LABEL) == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid request: %s " RULE_ID_LABEL " is set by ember", what);
    return 0;
}

static int check_labels(const Settings__V1__UpsertRecordingRuleRequest *r, lc_status_t *st)
{
    if (r->n_group_by > QRY_RULE_MAX_LABELS || r->n_external_labels > QRY_RULE_MAX_LABELS)
        return refuse_rule(st, "a rule has at most 16 group_by labels and 16 external labels",
                           NULL);
    for (size_t i = 0; i < r->n_group_by; i++)
        if (check_label_name("group_by label", r->group_by[i], st))
            return -1;
    for (size_t i = 0; i < r->n_external_labels; i++) {
        const Types__V1__LabelPair *l = r->external_labels[i];
        if (check_label_name("external_labels name", l->name, st))
            return -1;
        if (strlen(l->value) > QRY_RULE_LABEL_VALUE_MAX_BYTES || !lc_utf8_valid_str(l->value))
            return refuse_rule(
                st, "external_labels value must be valid UTF-8 of at most 1024 bytes:", l->name);
        for (size_t j = 0; j < r->n_group_by; j++)
            if (strcmp(r->group_by[j], l->name) == 0)
                return refuse_rule(st,
                                   "a label is both in group_by and in external_labels:", l->name);
    }
    return 0;
}

static int check_filter(const Settings__V1__StacktraceFilter *f, lc_status_t *st)
{
    if (!f || !f->function_name)
        return 0;
    const char *fn = f->function_name->function_name;
    if (strlen(fn) > QRY_RULE_FUNCTION_MAX_BYTES || !lc_utf8_valid_str(fn))
        return refuse_rule(
            st, "stacktrace_filter function_name must be valid UTF-8 of at most 1024 bytes", NULL);
    if (f->function_name->metric_type != SETTINGS__V1__METRIC_TYPE__TOTAL)
        return refuse_rule(st, "stacktrace_filter metric_type must be TOTAL", NULL);
    return 0;
}

int qry_rule_validate(Settings__V1__UpsertRecordingRuleRequest *r, lc_arena_t *a, lc_status_t *st)
{
    if (!r->id[0]) {
        r->id = generate_id(a);
        r->generation = 1;
        if (!r->id)
            return lc_status_set(st, LC_CODE_INTERNAL, "cannot generate a rule id");
    }
    if (!id_valid(r->id))
        return refuse_rule(st, "id must match ^[a-zA-Z]+$ (at most 64 letters):", r->id);
    r->metric_name = qry_rule_trim(r->metric_name, a);
    if (!r->metric_name)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "the request memory is exhausted");
    if (check_metric_name(r->metric_name, st) || check_matchers(r->matchers, r->n_matchers, st) ||
        check_labels(r, st) || check_filter(r->stacktrace_filter, st))
        return -1;
    if (r->generation < 0)
        return refuse_rule(st, "generation must be positive", NULL);
    return 0;
}

const char *qry_rule_profile_type(const Settings__V1__RecordingRuleStore *rule, lc_arena_t *a)
{
    for (size_t i = 0; i < rule->n_matchers; i++) {
        lc_selector_t sel = {0};
        lc_status_t st = {0};
        if (lc_selector_parse(rule->matchers[i], strlen(rule->matchers[i]), &sel, &st))
            continue;
        const char *found = NULL;
        for (size_t k = 0; k < sel.n && !found; k++)
            if (strcmp(sel.m[k].name, PROFILE_TYPE_LABEL) == 0 && sel.m[k].op == LC_MATCH_EQ)
                found = lc_arena_strdup(a, sel.m[k].value ? sel.m[k].value : "");
        lc_selector_fini(&sel);
        if (found)
            return found;
    }
    return "unknown";
}
