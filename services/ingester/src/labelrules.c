/*
 * labelrules.c — series labels at the edge (pyroscope-api.md §2.5, §2.10,
 * §3.3 items 3-4): the labels /ingest derives from its query parameters, the
 * defaults and relabel rules applied to Push series, and the checks every
 * series passes before it is published (a name, no duplicates, the size
 * limits, valid UTF-8). Labels with an empty value are dropped first: in the
 * Prometheus model an empty value is the same as an absent label.
 */
#include <stdio.h>
#include <string.h>

#include "receive_int.h"

#define GODELTAPROF_PREFIX "godeltaprof_"

bool ing_label_allowed(const char *name)
{
    return strncmp(name, "__", 2) != 0 || strcmp(name, "__session_id__") == 0;
}

void ing_ingest_labels(lc_labels_t *ls, const char *metric, const char *spy, const char *service,
                       const ing_labelset_t *set, bool app_name_label)
{
    lc_labels_init(ls);
    lc_labels_set(ls, "__name__", metric);
    lc_labels_set(ls, "__delta__", "false");
    lc_labels_set(ls, "pyroscope_spy", spy);
    for (size_t i = 0; i < set->n; i++) {
        if (ing_label_allowed(set->v[i].name))
            lc_labels_set(ls, set->v[i].name, set->v[i].value);
    }
    if (!ing_labelset_get(set, "service_name"))
        lc_labels_set(ls, "service_name", service);
    else if (app_name_label && !ing_labelset_get(set, "app_name"))
        lc_labels_set(ls, "app_name", service);
}

/* The default relabel rules (§3.3 item 4), in their documented order. */
static void relabel_defaults(lc_labels_t *ls)
{
    const char *name = lc_labels_get(ls, "__name__");
    if (name && strncmp(name, GODELTAPROF_PREFIX, strlen(GODELTAPROF_PREFIX)) == 0) {
        char *rest = lc_xstrdup(name + strlen(GODELTAPROF_PREFIX));
        lc_labels_set(ls, "__name__", rest);
        lc_labels_set(ls, "__delta__", "false");
        lc_free(rest);
    }
    name = lc_labels_get(ls, "__name__");
    const char *type = lc_labels_get(ls, "__type__");
    if (name && type && !strcmp(name, "wall") && !strcmp(type, "cpu"))
        lc_labels_set(ls, "__name__", "process_cpu");
}

static void drop_empty_values(lc_labels_t *ls)
{
    size_t w = 0;
    for (size_t r = 0; r < ls->n; r++) {
        if (*ls->v[r].value) {
            ls->v[w++] = ls->v[r];
        } else {
            lc_free(ls->v[r].name);
            lc_free(ls->v[r].value);
        }
    }
    ls->n = w;
}

int ing_labels_finish(lc_labels_t *ls, const ing_label_limits_t *lim, lc_status_t *st)
{
    drop_empty_values(ls);
    lc_labels_sort(ls);
    return ing_labels_check(ls, lim, st);
}

int ing_push_labels_normalize(lc_labels_t *ls, const ing_label_limits_t *lim, lc_status_t *st)
{
    drop_empty_values(ls);
    if (!lc_labels_get(ls, "service_name"))
        lc_labels_set(ls, "service_name", "unknown_service");
    relabel_defaults(ls);
    return ing_labels_finish(ls, lim, st);
}

/* ---------------------------------------------------------------- checks */

static int check_one(const lc_label_t *l, const ing_label_limits_t *lim, lc_status_t *st)
{
    if (lc_label_check(l->name, strlen(l->name), l->value, strlen(l->value), st) < 0)
        return -1;
    if (strlen(l->name) > lim->max_name_bytes)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "label name %.64s... is longer than %zu bytes", l->name,
                             lim->max_name_bytes);
    if (strlen(l->value) > lim->max_value_bytes)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "value of label %.64s is longer than %zu bytes", l->name,
                             lim->max_value_bytes);
    return 0;
}

int ing_labels_check(const lc_labels_t *ls, const ing_label_limits_t *lim, lc_status_t *st)
{
    const char *name = lc_labels_get(ls, "__name__");
    if (!name || !*name)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid labels: the __name__ label (profile metric name) is missing");
    if (ls->n > lim->max_names)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile series of %s has %zu label names; limit %zu", name, ls->n,
                             lim->max_names);
    const char *dup = lc_labels_duplicate(ls);
    if (dup)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "duplicate label name %.64s", dup);
    for (size_t i = 0; i < ls->n; i++) {
        if (check_one(&ls->v[i], lim, st) < 0)
            return -1;
    }
    return 0;
}
