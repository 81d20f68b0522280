/*
 * ratelimit.c — per-tenant token buckets (lc/ratelimit.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/ratelimit.h"

typedef struct bucket_s {
    double level;    /* tokens now */
    int64_t last_ns; /* when level was computed */
} bucket_t;

typedef struct tenant_s {
    char *name; /* NULL: free slot */
    bucket_t bytes, profiles;
    int64_t inflight; /* lc_inflight_*: queries running now */
} tenant_t;

struct lc_ratelimit_s {
    lc_ratelimit_opts_t o;
    pthread_mutex_t mu;
    tenant_t *slots;
    size_t n, cap; /* cap: a power of two */
    int64_t max_inflight;
};

lc_ratelimit_t *lc_ratelimit_new(const lc_ratelimit_opts_t *opts)
{
    if (opts->bytes_per_s <= 0 && opts->profiles_per_s <= 0)
        return NULL;
    lc_ratelimit_t *rl = lc_xcalloc(1, sizeof(*rl));
    rl->o = *opts;
    if (rl->o.bytes_burst <= 0)
        rl->o.bytes_burst = rl->o.bytes_per_s;
    if (rl->o.profiles_burst <= 0)
        rl->o.profiles_burst = rl->o.profiles_per_s;
    pthread_mutex_init(&rl->mu, NULL);
    rl->cap = 16;
    rl->slots = lc_xcalloc(rl->cap, sizeof(*rl->slots));
    return rl;
}

void lc_ratelimit_free(lc_ratelimit_t *rl)
{
    if (!rl)
        return;
    for (size_t i = 0; i < rl->cap; i++)
        lc_free(rl->slots[i].name);
    lc_free(rl->slots);
    pthread_mutex_destroy(&rl->mu);
    lc_free(rl);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static tenant_t *probe(tenant_t *slots, size_t cap, const char *name)
{
    for (size_t i = hash_str(name) & (cap - 1);; i = (i + 1) & (cap - 1))
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
    lc_ratelimit_t *rl = lc_xcalloc(1, sizeof(*rl));
    rl->max_inflight = max_per_tenant;
    pthread_mutex_init(&rl->mu, NULL);
    rl->cap = 16;
    rl->slots = lc_xcalloc(rl->cap, sizeof(*rl->slots));
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
