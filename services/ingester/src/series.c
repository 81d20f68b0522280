/*
 * series.c — the labels of one stored series: the profile's series labels
 * plus, per sample type, the internal labels Pyroscope adds
 * (pyroscope-api.md §3.3 item 7, §4.2): __profile_type__, __type__, __unit__,
 * __period_type__, __period_unit__ and __service_name__; __delta__ is only a
 * hint for the writer and is removed.
 */
#include <string.h>

#include "write_int.h"

/* Period type and unit; both "" when the profile has no period type. */
static void period_parts(const Google__V1__Profile *p, const char **type, const char **unit)
{
    *type = p->period_type ? ing_pprof_str(p, p->period_type->type) : "";
    *unit = p->period_type ? ing_pprof_str(p, p->period_type->unit) : "";
}

const char *ing_profile_type_id(const Google__V1__Profile *p, const char *metric, size_t i,
                                lc_arena_t *arena)
{
    const char *ptype, *punit;
    period_parts(p, &ptype, &punit);
    const Google__V1__ValueType *vt = p->sample_type[i];
    return lc_arena_sprintf(arena, "%s:%s:%s:%s:%s", metric, ing_pprof_str(p, vt->type),
                            ing_pprof_str(p, vt->unit), ptype, punit);
}

/* An empty label value means "absent" in the Prometheus model, so it is not stored. */
static void set_if_present(lc_labels_t *ls, const char *name, const char *value)
{
    if (value && *value)
        lc_labels_set(ls, name, value);
}

void ing_series_labels(lc_labels_t *ls, const Google__V1__Profile *p, size_t i, lc_arena_t *arena)
{
    const char *metric = lc_labels_get(ls, "__name__");
    const char *ptype, *punit;
    period_parts(p, &ptype, &punit);
    const char *id = ing_profile_type_id(p, metric ? metric : "", i, arena);
    lc_labels_set(ls, "__profile_type__", id ? id : "");
    set_if_present(ls, "__type__", ing_pprof_str(p, p->sample_type[i]->type));
    set_if_present(ls, "__unit__", ing_pprof_str(p, p->sample_type[i]->unit));
    set_if_present(ls, "__period_type__", ptype);
    set_if_present(ls, "__period_unit__", punit);
    const char *service = lc_labels_get(ls, "service_name");
    if (service)
        lc_labels_set(ls, "__service_name__", service);
    lc_labels_del(ls, "__delta__");
    lc_labels_sort(ls);
}
