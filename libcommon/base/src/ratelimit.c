/*
 * ratelimit.c — per-tenant token buckets (lc/ratelimit.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/hash.h"
#include "lc/ratelimit.h"

typedef struct bucket_s {
    double level;    /* tokens now */
    int64_t last_ns; /* when level was computed */
} bucket_t;

/* A tenant's active series: open addressing on the series hash (0 stands
 * for an empty slot, so a hash of 0 is stored as 1), with when each was
 * last seen. */
typedef struct series_set_s {
    uint64_t *keys;
    int64_t *seen_ns;
    size_t n, cap;    /* cap: 0 or a power of two */
    int64_t swept_ns; /* last removal of expired series */
} series_set_t;

typedef struct tenant_s {
    char *name; /* NULL: free slot */
    bucket_t bytes, profiles;
    int64_t inflight;    /* lc_inflight_*: queries running now */
    series_set_t series; /* lc_serieslimit_* */
} tenant_t;

/* One table type for the three limits; each constructor sets its part. */
struct lc_ratelimit_s {
    lc_ratelimit_opts_t o;
    pthread_mutex_t mu;
    tenant_t *slots;
    size_t n, cap; /* cap: a power of two */
    int64_t max_inflight;
    int64_t max_series, series_window_ns;
};

static lc_ratelimit_t *table_new(void)
{
    lc_ratelimit_t *rl = lc_xcalloc(1, sizeof(*rl));
    pthread_mutex_init(&rl->mu, NULL);
    rl->cap = 16;
    rl->slots = lc_xcalloc(rl->cap, sizeof(*rl->slots));
    return rl;
}

lc_ratelimit_t *lc_ratelimit_new(const lc_ratelimit_opts_t *opts)
{
    if (opts->bytes_per_s <= 0 && opts->profiles_per_s <= 0)
        return NULL;
    lc_ratelimit_t *rl = table_new();
    rl->o = *opts;
    if (rl->o.bytes_burst <= 0)
        rl->o.bytes_burst = rl->o.bytes_per_s;
    if (rl->o.profiles_burst <= 0)
        rl->o.profiles_burst = rl->o.profiles_per_s;
    return rl;
}

void lc_ratelimit_free(lc_ratelimit_t *rl)
{
    if (!rl)
        return;
    for (size_t i = 0; i < rl->cap; i++) {
        lc_free(rl->slots[i].name);
        lc_free(rl->slots[i].series.keys);
        lc_free(rl->slots[i].series.seen_ns);
    }
    lc_free(rl->slots);
    pthread_mutex_destroy(&rl->mu);
    lc_free(rl);
}

static tenant_t *probe(tenant_t *slots, size_t cap, const char *name)
{
    for (size_t i = lc_hash64(name, strlen(name), 0) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!slots[i].name || strcmp(slots[i].name, name) == 0)
            return &slots[i];
}

static void grow(lc_ratelimit_t *rl)
{
    size_t cap = rl->cap * 2;
    tenant_t *slots = lc_xcalloc(cap, sizeof(*slots));
    for (size_t i = 0; i < rl->cap; i++)
        if (rl->slots[i].name)
            *probe(slots, cap, rl->slots[i].name) = rl->slots[i];
    lc_free(rl->slots);
    rl->slots = slots;
    rl->cap = cap;
}

/* A new tenant starts with full buckets. */
static tenant_t *tenant_of(lc_ratelimit_t *rl, const char *name, int64_t now_ns)
{
    if ((rl->n + 1) * 4 > rl->cap * 3)
        grow(rl);
    tenant_t *t = probe(rl->slots, rl->cap, name);
    if (!t->name) {
        t->name = lc_xstrdup(name);
        t->bytes = (bucket_t){rl->o.bytes_burst, now_ns};
        t->profiles = (bucket_t){rl->o.profiles_burst, now_ns};
        rl->n++;
    }
    return t;
}

static void refill(bucket_t *b, double rate, double burst, int64_t now_ns)
{
    if (now_ns > b->last_ns) {
        b->level += rate * (double)(now_ns - b->last_ns) / 1e9;
        if (b->level > burst)
            b->level = burst;
    }
    b->last_ns = now_ns;
}

/* Seconds until `want` tokens are there (0 = now; INFINITY = never). */
static double wait_s(const bucket_t *b, double rate, double burst, double want)
{
    if (rate <= 0 || want <= b->level)
        return 0;
    if (want > burst)
        return burst / rate; /* never passes: say how long a full bucket takes */
    return (want - b->level) / rate;
}

int64_t lc_ratelimit_take(lc_ratelimit_t *rl, const char *tenant, double bytes, double profiles,
                          int64_t now_ns)
{
    pthread_mutex_lock(&rl->mu);
    tenant_t *t = tenant_of(rl, tenant, now_ns);
    refill(&t->bytes, rl->o.bytes_per_s, rl->o.bytes_burst, now_ns);
    refill(&t->profiles, rl->o.profiles_per_s, rl->o.profiles_burst, now_ns);
    double w1 = wait_s(&t->bytes, rl->o.bytes_per_s, rl->o.bytes_burst, bytes);
    double w2 = wait_s(&t->profiles, rl->o.profiles_per_s, rl->o.profiles_burst, profiles);
    double w = w1 > w2 ? w1 : w2;
    if (w <= 0) {
        if (rl->o.bytes_per_s > 0)
            t->bytes.level -= bytes;
        if (rl->o.profiles_per_s > 0)
            t->profiles.level -= profiles;
    }
    pthread_mutex_unlock(&rl->mu);
    return w <= 0 ? 0 : (int64_t)ceil(w) < 1 ? 1 : (int64_t)ceil(w);
}

/* ---------------------------------------------------------------- in flight */

lc_inflight_t *lc_inflight_new(int64_t max_per_tenant)
{
    if (max_per_tenant <= 0)
        return NULL;
    lc_ratelimit_t *rl = table_new();
    rl->max_inflight = max_per_tenant;
    return rl;
}

void lc_inflight_free(lc_inflight_t *f)
{
    lc_ratelimit_free(f);
}

bool lc_inflight_acquire(lc_inflight_t *f, const char *const *tenants, size_t n)
{
    pthread_mutex_lock(&f->mu);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = tenant_of(f, tenants[i], 0)->inflight < f->max_inflight;
    for (size_t i = 0; i < n && ok; i++)
        tenant_of(f, tenants[i], 0)->inflight++;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

void lc_inflight_release(lc_inflight_t *f, const char *const *tenants, size_t n)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < n; i++) {
        tenant_t *t = tenant_of(f, tenants[i], 0);
        if (t->inflight > 0)
            t->inflight--;
    }
    pthread_mutex_unlock(&f->mu);
}

/* ---------------------------------------------------------------- series */

lc_serieslimit_t *lc_serieslimit_new(int64_t max_per_tenant, int64_t window_ns)
{
    if (max_per_tenant <= 0)
        return NULL;
    lc_ratelimit_t *rl = table_new();
    rl->max_series = max_per_tenant;
    rl->series_window_ns = window_ns > 0 ? window_ns : 1;
    return rl;
}

void lc_serieslimit_free(lc_serieslimit_t *s)
{
    lc_ratelimit_free(s);
}

static size_t series_slot(const series_set_t *set, uint64_t key)
{
    size_t i = (size_t)lc_mix64(key) & (set->cap - 1);
    while (set->keys[i] && set->keys[i] != key)
        i = (i + 1) & (set->cap - 1);
    return i;
}

static bool series_has(const series_set_t *set, uint64_t key)
{
    return set->cap && set->keys[series_slot(set, key)] == key;
}

/* Rebuilds the table at cap, keeping the series seen since cutoff_ns. */
static void series_rehash(series_set_t *set, size_t cap, int64_t cutoff_ns)
{
    series_set_t next = {lc_xcalloc(cap, sizeof(uint64_t)), lc_xcalloc(cap, sizeof(int64_t)), 0,
                         cap, set->swept_ns};
    for (size_t i = 0; i < set->cap; i++) {
        if (!set->keys[i] || set->seen_ns[i] < cutoff_ns)
            continue;
        size_t j = series_slot(&next, set->keys[i]);
        next.keys[j] = set->keys[i];
        next.seen_ns[j] = set->seen_ns[i];
        next.n++;
    }
    lc_free(set->keys);
    lc_free(set->seen_ns);
    *set = next;
}

static void series_put(series_set_t *set, uint64_t key, int64_t now_ns)
{
    if ((set->n + 1) * 2 > set->cap)
        series_rehash(set, set->cap ? set->cap * 2 : 16, INT64_MIN);
    size_t i = series_slot(set, key);
    set->n += set->keys[i] == 0;
    set->keys[i] = key;
    set->seen_ns[i] = now_ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct keys of the request not active yet (keys sorted). */
static size_t series_new_count(const series_set_t *set, const uint64_t *keys, size_t n)
{
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || keys[i] != keys[i - 1]) && !series_has(set, keys[i]))
            fresh++;
    return fresh;
}

static uint64_t series_key(uint64_t hash)
{
    return hash ? hash : 1;
}

bool lc_serieslimit_admit(lc_serieslimit_t *s, const char *tenant, const uint64_t *series, size_t n,
                          int64_t now_ns, size_t *active)
{
    uint64_t *keys = lc_xmalloc((n ? n : 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i++)
        keys[i] = series_key(series[i]);
    qsort(keys, n, sizeof(*keys), cmp_u64);
    pthread_mutex_lock(&s->mu);
    series_set_t *set = &tenant_of(s, tenant, now_ns)->series;
    int64_t cutoff = now_ns - s->series_window_ns;
    size_t fresh = series_new_count(set, keys, n);
    /* Expired series are dropped before a refusal (so a refusal is exact)
     * and every quarter window (so the count stays near the active one). */
    if (set->cap && (set->n + fresh > (size_t)s->max_series ||
                     now_ns - set->swept_ns > s->series_window_ns / 4)) {
        series_rehash(set, set->cap, cutoff);
        set->swept_ns = now_ns;
        fresh = series_new_count(set, keys, n);
    }
    bool ok = set->n + fresh <= (size_t)s->max_series;
    for (size_t i = 0; ok && i < n; i++)
        series_put(set, keys[i], now_ns);
    *active = set->n;
    pthread_mutex_unlock(&s->mu);
    lc_free(keys);
    return ok;
}
