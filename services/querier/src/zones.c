/*
 * zones.c — choosing the complete zone a query asks (contract in zones.h).
 *
 * Zones are few and members are tens: plain scans over the sorted lists,
 * no index. The reason text is bounded (QZ_REASON_MAX) because it travels
 * in every 503.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "zones.h"

static int zone_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every zone named by the registry or by a live member, sorted, once each. */
static const char **zone_names(const lc_member_t *live, size_t n_live, const lc_member_t *reg,
                               size_t n_reg, size_t *n_out)
{
    const char **v = lc_xcalloc(n_live + n_reg + 1, sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < n_reg; i++)
        v[n++] = reg[i].zone ? reg[i].zone : "";
    for (size_t i = 0; i < n_live; i++)
        v[n++] = live[i].zone ? live[i].zone : "";
    qsort(v, n, sizeof(*v), zone_str_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || strcmp(v[k - 1], v[i]) != 0)
            v[k++] = v[i];
    *n_out = k;
    return v;
}

static const lc_member_t *find_id(const lc_member_t *v, size_t n, const char *id)
{
    for (size_t i = 0; v && i < n; i++)
        if (strcmp(v[i].id, id) == 0)
            return &v[i];
    return NULL;
}

static bool in_zone(const lc_member_t *m, const char *zone)
{
    return strcmp(m->zone ? m->zone : "", zone) == 0;
}

/* Appends to the bounded reason; "..." once it is full. */
static void reason_add(char *buf, size_t *len, const char *text)
{
    if (*len >= QZ_REASON_MAX - 4)
        return;
    int w = snprintf(buf + *len, QZ_REASON_MAX - *len, "%s", text);
    if (w < 0 || (size_t)w >= QZ_REASON_MAX - *len - 4) {
        snprintf(buf + QZ_REASON_MAX - 4, 4, "...");
        *len = QZ_REASON_MAX;
        return;
    }
    *len += (size_t)w;
}

/* Adds the zone's missing ids to the reason; true when none is missing. */
static bool zone_complete(const char *zone, const lc_member_t *live, size_t n_live,
                          const lc_member_t *reg, size_t n_reg, const lc_member_t *seen,
                          size_t n_seen, char *reason, size_t *len)
{
    bool complete = true;
    char item[512];
    for (size_t i = 0; i < n_reg; i++) {
        if (!in_zone(&reg[i], zone))
            continue;
        const lc_member_t *l = find_id(live, n_live, reg[i].id);
        if (l && in_zone(l, zone))
            continue;
        const lc_member_t *s = find_id(seen, n_seen, reg[i].id);
        const char *sep = complete ? "" : ", ";
        if (s && s->addr && s->addr[0])
            snprintf(item, sizeof(item), "%s%.200s (last seen at %.200s)", sep, reg[i].id, s->addr);
        else
            snprintf(item, sizeof(item), "%s%.200s", sep, reg[i].id);
        if (complete) {
            char head[128];
            snprintf(head, sizeof(head), "%szone \"%.64s\" misses ", *len ? "; " : "", zone);
            reason_add(reason, len, head);
        }
        reason_add(reason, len, item);
        complete = false;
    }
    return complete;
}

/* A live member of the zone carries a note (it lacks what an earlier life of
 * its id held): the first such member, or NULL. */
static const lc_member_t *zone_noted(const char *zone, const lc_member_t *live, size_t n_live)
{
    for (size_t i = 0; i < n_live; i++)
        if (in_zone(&live[i], zone) && live[i].note && live[i].note[0])
            return &live[i];
    return NULL;
}

static void members_free(qz_choice_t *c)
{
    for (size_t i = 0; i < c->n_urls; i++)
        lc_free(c->urls[i]);
    lc_free(c->urls);
    lc_free(c->marks_ms);
    lc_free(c->marks_spec);
    c->urls = NULL;
    c->marks_ms = NULL;
    c->marks_spec = NULL;
    c->n_urls = 0;
}

/* The zone's live members, and below which mark each one's blocks are read
 * from the bucket (those without one answer for everything). */
static void take_members(const char *zone, const lc_member_t *live, size_t n_live, qz_choice_t *out)
{
    lc_free(out->zone);
    members_free(out);
    out->zone = lc_xstrdup(zone);
    out->urls = lc_xcalloc(n_live + 1, sizeof(*out->urls));
    out->marks_ms = lc_xcalloc(n_live + 1, sizeof(*out->marks_ms));
    size_t spec_len = 0;
    for (size_t i = 0; i < n_live; i++) {
        if (!in_zone(&live[i], zone))
            continue;
        bool marked = lc_marks_spec_add(&out->marks_spec, &spec_len, &live[i]);
        out->marks_ms[out->n_urls] = marked ? live[i].mark_ms : LC_MEMBER_NO_MARK;
        out->urls[out->n_urls++] = lc_xstrdup(live[i].addr);
    }
}

/* Below which mark (ms) the zone's missing members hold nothing only they
 * have: the lowest of their marks; INT64_MIN when one has none. */
static int64_t zone_history_below(const char *zone, const lc_member_t *live, size_t n_live,
                                  const lc_member_t *reg, size_t n_reg)
{
    int64_t below = INT64_MAX;
    for (size_t i = 0; i < n_reg; i++) {
        const lc_member_t *l = find_id(live, n_live, reg[i].id);
        if (!in_zone(&reg[i], zone) || (l && in_zone(l, zone)))
            continue;
        if (reg[i].mark_ms == LC_MEMBER_NO_MARK)
            return INT64_MIN;
        if (reg[i].mark_ms < below)
            below = reg[i].mark_ms;
    }
    return below;
}

/* The zone that answers the longest history while none is complete: its
 * live members, and its missing ones in the spec (the bucket below them). */
static void take_history(const char **zones, size_t n_zones, const lc_member_t *live, size_t n_live,
                         const lc_member_t *reg, size_t n_reg, qz_choice_t *out)
{
    size_t best = n_zones;
    int64_t best_below = INT64_MIN;
    for (size_t z = 0; z < n_zones; z++) {
        int64_t below = zone_history_below(zones[z], live, n_live, reg, n_reg);
        if (below != INT64_MIN && below != INT64_MAX && below > best_below) {
            best = z;
            best_below = below;
        }
    }
    if (best == n_zones)
        return;
    take_members(zones[best], live, n_live, out);
    size_t spec_len = out->marks_spec ? strlen(out->marks_spec) : 0;
    for (size_t i = 0; i < n_reg; i++) {
        const lc_member_t *l = find_id(live, n_live, reg[i].id);
        if (in_zone(&reg[i], zones[best]) && !(l && in_zone(l, zones[best])))
            (void)lc_marks_spec_add(&out->marks_spec, &spec_len, &reg[i]);
    }
    out->history_below_ms = best_below;
}

void qz_choose(const lc_member_t *live, size_t n_live, const lc_member_t *reg, size_t n_reg,
               const lc_member_t *seen, size_t n_seen, bool reads_bucket, qz_choice_t *out)
{
    *out = (qz_choice_t){.history_below_ms = INT64_MIN};
    const char **zones = zone_names(live, n_live, reg, n_reg, &out->n_zones);
    char reason[QZ_REASON_MAX];
    size_t len = 0;
    reason[0] = '\0';
    const lc_member_t *noted = NULL; /* of the zone taken, when every complete one has one */
    for (size_t z = 0; z < out->n_zones; z++) {
        if (!zone_complete(zones[z], live, n_live, reg, n_reg, seen, n_seen, reason, &len))
            continue;
        out->n_complete++;
        const lc_member_t *n = zone_noted(zones[z], live, n_live);
        if (!out->zone || (noted && !n)) {
            take_members(zones[z], live, n_live, out);
            noted = n;
        }
    }
    if (noted) {
        char *w = lc_xmalloc(QZ_REASON_MAX);
        snprintf(w, QZ_REASON_MAX,
                 "every complete zone has a member that lacks profiles: %.200s "
                 "(%.600s)",
                 noted->id, noted->note);
        out->lacking = w;
    }
    if (!out->zone && out->n_zones) {
        char *r = lc_xmalloc(len + 64);
        snprintf(r, len + 64, "no zone has all its ingesters live: %s", reason);
        out->reason = r;
        if (reads_bucket)
            take_history(zones, out->n_zones, live, n_live, reg, n_reg, out);
    }
    lc_free(zones);
}

void qz_choice_fini(qz_choice_t *c)
{
    members_free(c);
    lc_free(c->zone);
    lc_free(c->reason);
    lc_free(c->lacking);
    *c = (qz_choice_t){0};
}
