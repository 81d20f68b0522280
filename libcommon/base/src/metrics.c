/*
 * metrics.c — the Prometheus registry behind lc/metrics.h.
 *
 * A family is one metric name with its help text and type; it owns the label
 * sets registered under that name, kept in registration order so the
 * exposition is stable. A hash table over (name, labels) makes repeated
 * lookups cheap, since callers may register lazily on hot paths.
 *
 * Registration and rendering take the registry mutex. Updates never do: a
 * counter or gauge is a double stored as its bit pattern in an atomic uint64
 * and changed with a compare-and-swap loop; a histogram keeps one atomic count
 * per bucket (not cumulative, so an observation touches one bucket) plus an
 * atomic sum. Rendering accumulates the buckets and prints their total as
 * _count, so the +Inf bucket always equals _count even while observations
 * race with the scrape.
 *
 * Sits on alloc (copies, lc_buf_t) and log (registration conflicts).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/hash.h"
#include "lc/log.h"
#include "lc/metrics.h"

#define METRICS_MIN_SLOTS 64

typedef enum { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type_t;

typedef struct family_s {
    char *name;
    char *help;
    metric_type_t type;
    lc_metric_t *first, *last; /* label sets in registration order */
    struct family_s *next;     /* families in registration order */
} family_t;

struct lc_metric_s {
    family_t *family;
    char *labels;                /* `k="v",...` or "" */
    _Atomic uint64_t value_bits; /* counter/gauge value, or histogram sum, as double bits */
    double *bounds;              /* histogram upper bounds, strictly increasing, no +Inf */
    size_t n_bounds;
    _Atomic uint64_t *buckets; /* n_bounds + 1 per-bucket counts; the last is +Inf */
    lc_metric_t *next_in_family;
    lc_metric_t *next_in_slot; /* hash chain */
    size_t refs;               /* registrations not released; guarded by the lock */
};

struct lc_metrics_s {
    pthread_mutex_t lock; /* registration and rendering; never updates */
    family_t *families, *families_last;
    lc_metric_t **slots; /* hash of (name, labels) */
    size_t n_slots, n_metrics;
};

static const double default_bounds[] = {.001, .0025, .005, .01, .025, .05, .1, .25,
                                        .5,   1,     2.5,  5,   10,   30,  60};

static const char *const type_names[] = {"counter", "gauge", "histogram"};

/* ---- doubles in atomics ---------------------------------------------------------------------- */

static uint64_t double_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}

static double bits_double(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof(v));
    return v;
}

static void atomic_add_double(_Atomic uint64_t *bits, double v)
{
    uint64_t old = atomic_load_explicit(bits, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(bits, &old, double_bits(bits_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

lc_metrics_t *lc_metrics_new(void)
{
    lc_metrics_t *m = lc_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
    m->n_slots = METRICS_MIN_SLOTS;
    m->slots = lc_xcalloc(m->n_slots, sizeof(*m->slots));
    return m;
}

static void metric_free(lc_metric_t *x)
{
    lc_free(x->labels);
    lc_free(x->bounds);
    lc_free((void *)x->buckets);
    lc_free(x);
}

void lc_metrics_free(lc_metrics_t *m)
{
    if (!m)
        return;
    for (family_t *f = m->families, *next_f; f; f = next_f) {
        next_f = f->next;
        for (lc_metric_t *x = f->first, *next_x; x; x = next_x) {
            next_x = x->next_in_family;
            metric_free(x);
        }
        lc_free(f->name);
        lc_free(f->help);
        lc_free(f);
    }
    lc_free(m->slots);
    pthread_mutex_destroy(&m->lock);
    lc_free(m);
}

/* ---- lookup ---------------------------------------------------------------------------------- */

/* Name, a separator no name contains, then labels. */
static size_t key_hash(const char *name, const char *labels)
{
    static const uint8_t sep = 0xff;
    uint64_t h = lc_fnv1a64(LC_FNV64_OFFSET, name, strlen(name));
    h = lc_fnv1a64(h, &sep, 1);
    return (size_t)lc_mix64(lc_fnv1a64(h, labels, strlen(labels)));
}

static lc_metric_t *find_metric(const lc_metrics_t *m, const char *name, const char *labels)
{
    lc_metric_t *x = m->slots[key_hash(name, labels) & (m->n_slots - 1)];
    for (; x; x = x->next_in_slot) {
        if (strcmp(x->family->name, name) == 0 && strcmp(x->labels, labels) == 0)
            return x;
    }
    return NULL;
}

static family_t *find_family(const lc_metrics_t *m, const char *name)
{
    for (family_t *f = m->families; f; f = f->next) {
        if (strcmp(f->name, name) == 0)
            return f;
    }
    return NULL;
}

static void slot_insert(lc_metric_t **slots, size_t n_slots, lc_metric_t *x)
{
    size_t i = key_hash(x->family->name, x->labels) & (n_slots - 1);
    x->next_in_slot = slots[i];
    slots[i] = x;
}

/* Doubles the table once it holds as many metrics as slots. */
static void slots_grow(lc_metrics_t *m)
{
    if (m->n_metrics < m->n_slots)
        return;
    size_t n = m->n_slots * 2;
    lc_metric_t **slots = lc_xcalloc(n, sizeof(*slots));
    for (family_t *f = m->families; f; f = f->next) {
        for (lc_metric_t *x = f->first; x; x = x->next_in_family)
            slot_insert(slots, n, x);
    }
    lc_free(m->slots);
    m->slots = slots;
    m->n_slots = n;
}

/* ---- registration ---------------------------------------------------------------------------- */

static bool valid_name(const char *name)
{
    if (!name || !*name || (*name >= '0' && *name <= '9'))
        return false;
    for (const char *p = name; *p; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '_' || *p == ':';
        if (!ok)
            return false;
    }
    return true;
}

/* Histogram bounds must increase strictly; a trailing +Inf is implied and dropped. */
static bool valid_bounds(const double *bounds, size_t *n)
{
    if (*n > 0 && isinf(bounds[*n - 1]) && bounds[*n - 1] > 0)
        (*n)--;
    for (size_t i = 0; i < *n; i++) {
        if (isnan(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))
            return false;
    }
    return true;
}

static family_t *family_new(lc_metrics_t *m, const char *name, const char *help, metric_type_t type)
{
    family_t *f = lc_xcalloc(1, sizeof(*f));
    f->name = lc_xstrdup(name);
    f->help = lc_xstrdup(help ? help : "");
    f->type = type;
    if (m->families_last)
        m->families_last->next = f;
    else
        m->families = f;
    m->families_last = f;
    return f;
}

static lc_metric_t *metric_new(lc_metrics_t *m, family_t *f, const char *labels,
                               const double *bounds, size_t n_bounds)
{
    lc_metric_t *x = lc_xcalloc(1, sizeof(*x));
    x->family = f;
    x->labels = lc_xstrdup(labels);
    atomic_init(&x->value_bits, double_bits(0));
    if (f->type == METRIC_HISTOGRAM) {
        x->n_bounds = n_bounds;
        x->bounds = lc_xcalloc(n_bounds ? n_bounds : 1, sizeof(*x->bounds));
        memcpy(x->bounds, bounds, n_bounds * sizeof(*bounds));
        /* calloc'd zero bytes are a valid zero for the lock-free atomics used here */
        x->buckets = lc_xcalloc(n_bounds + 1, sizeof(*x->buckets));
    }
    /* Grow before linking x, since growing re-inserts every linked metric. */
    slots_grow(m);
    if (f->last)
        f->last->next_in_family = x;
    else
        f->first = x;
    f->last = x;
    slot_insert(m->slots, m->n_slots, x);
    m->n_metrics++;
    return x;
}

/* Returns the existing metric for (name, labels), or a new one; NULL on a conflict. */
static lc_metric_t *metrics_register(lc_metrics_t *m, const char *name, const char *help,
                                     const char *labels, metric_type_t type, const double *bounds,
                                     size_t n_bounds)
{
    labels = labels ? labels : "";
    if (!valid_name(name) || strchr(labels, '\n')) {
        LC_LOG_ERROR("metric not registered: invalid name or labels name=%s", name ? name : "");
        return NULL;
    }
    pthread_mutex_lock(&m->lock);
    lc_metric_t *x = find_metric(m, name, labels);
    family_t *f = x ? x->family : find_family(m, name);
    if (f && f->type != type) {
        LC_LOG_ERROR("metric not registered: name already used by another type name=%s "
                     "registered=%s requested=%s",
                     name, type_names[f->type], type_names[type]);
        x = NULL;
    } else if (!x) {
        if (!f)
            f = family_new(m, name, help, type);
        x = metric_new(m, f, labels, bounds, n_bounds);
    }
    if (x)
        x->refs++;
    pthread_mutex_unlock(&m->lock);
    return x;
}

lc_metric_t *lc_metrics_counter(lc_metrics_t *m, const char *name, const char *help,
                                const char *labels)
{
    return metrics_register(m, name, help, labels, METRIC_COUNTER, NULL, 0);
}

lc_metric_t *lc_metrics_gauge(lc_metrics_t *m, const char *name, const char *help,
                              const char *labels)
{
    return metrics_register(m, name, help, labels, METRIC_GAUGE, NULL, 0);
}

lc_metric_t *lc_metrics_histogram(lc_metrics_t *m, const char *name, const char *help,
                                  const char *labels, const double *bounds, size_t n_bounds)
{
    if (!bounds) {
        bounds = default_bounds;
        n_bounds = LC_ARRAY_LEN(default_bounds);
    }
    if (!valid_bounds(bounds, &n_bounds)) {
        LC_LOG_ERROR("metric not registered: histogram bounds must increase name=%s",
                     name ? name : "");
        return NULL;
    }
    return metrics_register(m, name, help, labels, METRIC_HISTOGRAM, bounds, n_bounds);
}

/* ---- release --------------------------------------------------------------------------------- */

static void slot_unlink(lc_metrics_t *m, lc_metric_t *x)
{
    lc_metric_t **at = &m->slots[key_hash(x->family->name, x->labels) & (m->n_slots - 1)];
    while (*at != x)
        at = &(*at)->next_in_slot;
    *at = x->next_in_slot;
}

/* The family stays, even empty: its HELP and TYPE lines are still valid. */
static void family_unlink(family_t *f, lc_metric_t *x)
{
    lc_metric_t *prev = NULL;
    for (lc_metric_t *y = f->first; y != x; y = y->next_in_family)
        prev = y;
    if (prev)
        prev->next_in_family = x->next_in_family;
    else
        f->first = x->next_in_family;
    if (f->last == x)
        f->last = prev;
}

void lc_metrics_release(lc_metrics_t *m, lc_metric_t *x)
{
    if (!m || !x)
        return;
    pthread_mutex_lock(&m->lock);
    bool last = --x->refs == 0;
    if (last) {
        slot_unlink(m, x);
        family_unlink(x->family, x);
        m->n_metrics--;
    }
    pthread_mutex_unlock(&m->lock);
    if (last)
        metric_free(x);
}

/* ---- updates --------------------------------------------------------------------------------- */

/* A NULL metric (a failed registration, already logged) is ignored so that a
 * metrics mistake never takes the service down; using the wrong kind is a bug. */

void lc_metric_add(lc_metric_t *c, double v)
{
    if (!c)
        return;
    LC_ASSERT(c->family->type != METRIC_HISTOGRAM);
    /* A counter that went down would read as a restart to Prometheus' rate(). */
    if (c->family->type == METRIC_COUNTER && !(v >= 0))
        return;
    atomic_add_double(&c->value_bits, v);
}

void lc_metric_set(lc_metric_t *g, double v)
{
    if (!g)
        return;
    LC_ASSERT(g->family->type == METRIC_GAUGE);
    atomic_store_explicit(&g->value_bits, double_bits(v), memory_order_relaxed);
}

/* Index of the first bound >= v (le is inclusive), or n_bounds for +Inf. */
static size_t bucket_index(const lc_metric_t *h, double v)
{
    size_t lo = 0, hi = h->n_bounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v <= h->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void lc_metric_observe(lc_metric_t *h, double v)
{
    if (!h)
        return;
    LC_ASSERT(h->family->type == METRIC_HISTOGRAM);
    atomic_fetch_add_explicit(&h->buckets[bucket_index(h, v)], 1, memory_order_relaxed);
    atomic_add_double(&h->value_bits, v);
}

/* For a histogram this is the sum of observations. */
double lc_metric_value(const lc_metric_t *c)
{
    if (!c)
        return 0;
    return bits_double(atomic_load_explicit(&((lc_metric_t *)c)->value_bits, memory_order_relaxed));
}

/* ---- exposition ------------------------------------------------------------------------------ */

/* Go-style float text that Prometheus parses back exactly: integral values
 * without an exponent, otherwise the shortest %g that round-trips. */
static void format_double(double v, char *out, size_t len)
{
    if (isnan(v)) {
        snprintf(out, len, "NaN");
    } else if (isinf(v)) {
        snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, len, "%.0f", v);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, len, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                break;
        }
    }
}

/* HELP text escapes backslash and newline (exposition format 0.0.4). */
static int render_help(lc_buf_t *out, const family_t *f)
{
    int rc = lc_buf_printf(out, "# HELP %s ", f->name);
    for (const char *p = f->help; *p && rc == 0; p++) {
        if (*p == '\\')
            rc = lc_buf_puts(out, "\\\\");
        else if (*p == '\n')
            rc = lc_buf_puts(out, "\\n");
        else
            rc = lc_buf_putc(out, *p);
    }
    if (rc == 0)
        rc = lc_buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
    return rc;
}

/* One sample line: name[suffix]{labels[,extra]} value. */
static int render_sample(lc_buf_t *out, const lc_metric_t *x, const char *suffix, const char *extra,
                         double v)
{
    char num[32];
    format_double(v, num, sizeof(num));
    const char *labels = x->labels;
    const char *comma = *labels && *extra ? "," : "";
    if (!*labels && !*extra)
        return lc_buf_printf(out, "%s%s %s\n", x->family->name, suffix, num);
    return lc_buf_printf(out, "%s%s{%s%s%s} %s\n", x->family->name, suffix, labels, comma, extra,
                         num);
}

static int render_histogram(lc_buf_t *out, const lc_metric_t *h)
{
    uint64_t cumulative = 0;
    int rc = 0;
    for (size_t i = 0; i <= h->n_bounds && rc == 0; i++) {
        char le[48], bound[32];
        cumulative += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        format_double(i < h->n_bounds ? h->bounds[i] : INFINITY, bound, sizeof(bound));
        snprintf(le, sizeof(le), "le=\"%s\"", bound);
        rc = render_sample(out, h, "_bucket", le, (double)cumulative);
    }
    if (rc == 0)
        rc = render_sample(out, h, "_sum", "", lc_metric_value(h));
    if (rc == 0)
        rc = render_sample(out, h, "_count", "", (double)cumulative);
    return rc;
}

static int render_family(lc_buf_t *out, const family_t *f)
{
    int rc = render_help(out, f);
    for (const lc_metric_t *x = f->first; x && rc == 0; x = x->next_in_family) {
        if (f->type == METRIC_HISTOGRAM)
            rc = render_histogram(out, x);
        else
            rc = render_sample(out, x, "", "", lc_metric_value(x));
    }
    return rc;
}

int lc_metrics_render(lc_metrics_t *m, lc_buf_t *out)
{
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    for (const family_t *f = m->families; f && rc == 0; f = f->next)
        rc = render_family(out, f);
    pthread_mutex_unlock(&m->lock);
    return rc;
}
