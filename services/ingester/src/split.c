/*
 * split.c — one pprof becomes one series per distinct set of string sample
 * labels (pyroscope-api.md §3.3 item 6).
 *
 * Numeric labels are ignored. trace_id and span_id never become series
 * labels; span_id (and profile_id, its older name) is kept per sample as a
 * span id when it is 16 hex digits. A sample's labels are sorted by name
 * (a repeated name keeps its first value) and hashed; samples with equal
 * label sets land in the same group, groups in order of first appearance.
 */
#include <stdlib.h>
#include <string.h>

#include "write_int.h"

typedef struct sp_sample_s {
    ing_kv_t *kv;
    size_t n;
    uint64_t span_id;
    uint64_t hash;
} sp_sample_t;

static int sp_kv_cmp(const void *a, const void *b)
{
    return strcmp(((const ing_kv_t *)a)->name, ((const ing_kv_t *)b)->name);
}

uint64_t ing_parse_span_id(const char *s)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; s[i] && i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    return i == 16 && !s[i] ? v : 0;
}

static uint64_t sp_hash(const ing_kv_t *kv, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over name\0value\0... */
    for (size_t i = 0; i < n; i++) {
        for (const char *c = kv[i].name;; c++) {
            h = (h ^ (uint8_t)*c) * 1099511628211ULL;
            if (!*c)
                break;
        }
        for (const char *c = kv[i].value;; c++) {
            h = (h ^ (uint8_t)*c) * 1099511628211ULL;
            if (!*c)
                break;
        }
    }
    return h;
}

/* Sorts by name, stably (the first of a repeated name stays first); a sample
 * has a few labels, for which insertion beats qsort's calls by far. */
static void sp_sort_kv(ing_kv_t *kv, size_t n)
{
    if (n > 16) {
        qsort(kv, n, sizeof(*kv), sp_kv_cmp);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        ing_kv_t x = kv[i];
        size_t j = i;
        for (; j > 0 && strcmp(kv[j - 1].name, x.name) > 0; j--)
            kv[j] = kv[j - 1];
        kv[j] = x;
    }
}

/* Collects one sample's string labels (span ids aside) sorted by name. */
static int sp_read_sample(const Google__V1__Profile *p, const Google__V1__Sample *s,
                          lc_arena_t *arena, sp_sample_t *out)
{
    *out = (sp_sample_t){.hash = sp_hash(NULL, 0)};
    size_t strings = 0;
    for (size_t i = 0; i < s->n_label; i++)
        strings += s->label[i]->str != 0;
    if (strings == 0)
        return 0; /* most samples (a heap profile's have a numeric label each): nothing
                   * to allocate, sort or hash */
    out->kv = lc_arena_calloc(arena, strings, sizeof(*out->kv));
    if (!out->kv)
        return LC_ETOOBIG;
    uint64_t profile_id = 0;
    for (size_t i = 0; i < s->n_label; i++) {
        const Google__V1__Label *l = s->label[i];
        if (l->str == 0)
            continue; /* numeric label (or an empty string value) */
        const char *k = ing_pprof_str(p, l->key), *v = ing_pprof_str(p, l->str);
        if (!strcmp(k, "span_id"))
            out->span_id = ing_parse_span_id(v);
        else if (!strcmp(k, "profile_id"))
            profile_id = ing_parse_span_id(v);
        else if (strcmp(k, "trace_id") != 0)
            out->kv[out->n++] = (ing_kv_t){k, v};
    }
    if (!out->span_id)
        out->span_id = profile_id;
    sp_sort_kv(out->kv, out->n);
    size_t w = 0;
    for (size_t r = 0; r < out->n; r++) {
        if (w == 0 || strcmp(out->kv[w - 1].name, out->kv[r].name) != 0)
            out->kv[w++] = out->kv[r];
    }
    out->n = w;
    out->hash = sp_hash(out->kv, out->n);
    return 0;
}

/* Whether two samples carry the same label fields (string indices and
 * numbers): pprof writers emit one label set for many samples in a row, and
 * those then share one read. */
static bool sp_same_label_fields(const Google__V1__Sample *a, const Google__V1__Sample *b)
{
    if (a->n_label != b->n_label)
        return false;
    for (size_t i = 0; i < a->n_label; i++) {
        const Google__V1__Label *x = a->label[i], *y = b->label[i];
        if (x->key != y->key || x->str != y->str || x->num != y->num || x->num_unit != y->num_unit)
            return false;
    }
    return true;
}

/* Every sample's labels, reading a label set once per run of samples that
 * repeat it. */
static int sp_read_samples(const Google__V1__Profile *p, lc_arena_t *arena, sp_sample_t *samples)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        if (i > 0 && sp_same_label_fields(p->sample[i], p->sample[i - 1]))
            samples[i] = samples[i - 1];
        else if (sp_read_sample(p, p->sample[i], arena, &samples[i]) < 0)
            return LC_ETOOBIG;
    }
    return 0;
}

static bool sp_same(const ing_group_t *g, const sp_sample_t *s)
{
    if (g->n_labels != s->n)
        return false;
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(g->labels[i].name, s->kv[i].name) != 0 ||
            strcmp(g->labels[i].value, s->kv[i].value) != 0)
            return false;
    }
    return true;
}

typedef struct sp_state_s {
    ing_group_t *groups;
    uint64_t *hashes;
    size_t n;
    uint32_t *slots; /* open addressing: group index + 1, 0 = empty */
    size_t cap;
} sp_state_t;

static ing_group_t *sp_group_for(sp_state_t *s, const sp_sample_t *smp)
{
    size_t i = (size_t)smp->hash & (s->cap - 1);
    for (; s->slots[i]; i = (i + 1) & (s->cap - 1)) {
        ing_group_t *g = &s->groups[s->slots[i] - 1];
        if (s->hashes[s->slots[i] - 1] == smp->hash && sp_same(g, smp))
            return g;
    }
    s->slots[i] = (uint32_t)(s->n + 1);
    s->hashes[s->n] = smp->hash;
    ing_group_t *g = &s->groups[s->n++];
    *g = (ing_group_t){.labels = smp->kv, .n_labels = smp->n};
    return g;
}

/* n elements of size bytes from the arena, uninitialised: each is written
 * before it is read. NULL on overflow or when the arena is full. */
static void *sp_alloc(lc_arena_t *arena, size_t n, size_t size)
{
    return n > SIZE_MAX / size ? NULL : lc_arena_alloc(arena, (n ? n : 1) * size);
}

/* Second pass: each group's sample and span id arrays, sized by its count
 * (counted in n_samples, then refilled). */
static int sp_fill(const Google__V1__Profile *p, sp_state_t *s, sp_sample_t *samples,
                   lc_arena_t *arena)
{
    ing_group_t **of = sp_alloc(arena, p->n_sample, sizeof(*of));
    if (!of)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_sample; i++) {
        of[i] = i > 0 && samples[i].kv == samples[i - 1].kv && samples[i].n == samples[i - 1].n
                    ? of[i - 1] /* the same label set as the sample before */
                    : sp_group_for(s, &samples[i]);
        of[i]->n_samples++;
    }
    for (size_t g = 0; g < s->n; g++) {
        s->groups[g].samples = sp_alloc(arena, s->groups[g].n_samples, sizeof(uint32_t));
        s->groups[g].span_ids = sp_alloc(arena, s->groups[g].n_samples, sizeof(uint64_t));
        if (!s->groups[g].samples || !s->groups[g].span_ids)
            return LC_ETOOBIG;
        s->groups[g].n_samples = 0;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        ing_group_t *g = of[i];
        g->span_ids[g->n_samples] = samples[i].span_id;
        g->has_span_ids |= samples[i].span_id != 0;
        g->samples[g->n_samples++] = (uint32_t)i;
    }
    return 0;
}

int ing_split_samples(const Google__V1__Profile *p, lc_arena_t *arena, ing_group_t **out,
                      size_t *n_out)
{
    size_t n = p->n_sample;
    sp_state_t s = {.cap = 16};
    while (s.cap < 2 * n)
        s.cap *= 2;
    sp_sample_t *samples = sp_alloc(arena, n, sizeof(*samples));
    s.groups = sp_alloc(arena, n, sizeof(*s.groups));
    s.hashes = sp_alloc(arena, n, sizeof(*s.hashes));
    s.slots = lc_arena_calloc(arena, s.cap, sizeof(*s.slots));
    if (!samples || !s.groups || !s.hashes || !s.slots || n > UINT32_MAX - 1)
        return LC_ETOOBIG;
    int rc = sp_read_samples(p, arena, samples);
    if (rc == 0)
        rc = sp_fill(p, &s, samples, arena);
    if (rc < 0)
        return rc;
    /* A profile without samples still yields its (empty) series, so that the
     * series and its profile type exist for queries. */
    if (n == 0)
        s.groups[s.n++] = (ing_group_t){.labels = NULL, .n_labels = 0};
    *out = s.groups;
    *n_out = s.n;
    return 0;
}
