/*
 * fuzz_selector.c — lc_selector_parse and lc_selector_parse_query on arbitrary
 * bytes. A selector that parses must respect the caps, and each matcher must
 * be the exact negation of its opposite (= vs !=, =~ vs !~) on any value,
 * including its own value and the empty string (a missing label).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_selector: broken promise: %s\n", what);
        abort();
    }
}

static lc_match_op_t negated(lc_match_op_t op)
{
    switch (op) {
    case LC_MATCH_EQ:
        return LC_MATCH_NEQ;
    case LC_MATCH_NEQ:
        return LC_MATCH_EQ;
    case LC_MATCH_RE:
        return LC_MATCH_NRE;
    case LC_MATCH_NRE:
        return LC_MATCH_RE;
    }
    return LC_MATCH_EQ;
}

static void check_matcher(const lc_matcher_t *m)
{
    lc_selector_t opposite = {0};
    lc_status_t st = {0};
    require(lc_selector_add(&opposite, m->name, negated(m->op), m->value, &st) == 0,
            "a parsed matcher can be added again");
    const char *values[] = {m->value, "", "x", "service-a", NULL};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        int a = lc_matcher_match(m, values[i]), b = lc_matcher_match(&opposite.m[0], values[i]);
        /* Undecided (LC_EREGEX) is undecided both ways; otherwise they disagree. */
        require(a < 0 ? b < 0 : b >= 0 && a != b, "matcher and its negation disagree");
    }
    if (m->op == LC_MATCH_EQ)
        require(lc_matcher_match(m, m->value) == 1, "= matches its own value");
    lc_selector_fini(&opposite);
}

/* A label set made of the selector's own pairs: every = matcher whose name
 * appears once must then match. */
static void check_selector(const lc_selector_t *sel)
{
    require(sel->n <= LC_SELECTOR_MAX_MATCHERS, "matcher cap");
    lc_labels_t ls;
    lc_labels_init(&ls);
    for (size_t i = 0; i < sel->n; i++) {
        check_matcher(&sel->m[i]);
        lc_labels_set(&ls, sel->m[i].name, sel->m[i].value);
    }
    bool all_eq_unique = true;
    for (size_t i = 0; i < sel->n; i++)
        for (size_t j = 0; j < sel->n; j++)
            all_eq_unique &= sel->m[i].op == LC_MATCH_EQ &&
                             (i == j || strcmp(sel->m[i].name, sel->m[j].name) != 0);
    if (all_eq_unique)
        require(lc_selector_match(sel, &ls) == 1, "a selector matches its own labels");
    lc_labels_fini(&ls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_selector_t sel;
    lc_status_t st = {0};
    if (lc_selector_parse((const char *)data, size, &sel, &st) == 0) {
        check_selector(&sel);
        lc_selector_fini(&sel);
    } else {
        require(st.code == LC_CODE_INVALID_ARGUMENT && st.msg[0], "errors say what is wrong");
    }
    char *profile_type = NULL;
    memset(&st, 0, sizeof(st));
    if (lc_selector_parse_query((const char *)data, size, &profile_type, &sel, &st) == 0) {
        require(profile_type && profile_type[0], "query has a profile type");
        check_selector(&sel);
        lc_selector_fini(&sel);
        lc_free(profile_type);
    } else {
        require(profile_type == NULL && st.msg[0], "failed query leaves nothing behind");
    }
    return 0;
}
