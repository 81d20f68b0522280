/*
 * agt_test_util.h — helpers shared by the agent's unit tests: unpack the
 * IngestProfile messages the agent produced and read their pprof back with
 * libcommon's decoder (an independent path from the builder that wrote it).
 */
#ifndef AGT_TEST_UTIL_H
#define AGT_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent_int.h"
#include "ember/v1/ingest.pb-c.h"
#include "lc/pprof.h"
#include "lc_test.h"

typedef struct agt_decoded_s {
    Ember__V1__IngestProfile *msg;
    lc_arena_t *arena;
    lc_pprof_t *p;
    lc_pprof_index_t *ix;
} agt_decoded_t;

static inline int agt_test_decode(const agt_msg_t *m, agt_decoded_t *out)
{
    memset(out, 0, sizeof(*out));
    out->msg = ember__v1__ingest_profile__unpack(NULL, m->len, m->data);
    if (!out->msg)
        return -1;
    out->arena = lc_arena_new(256u << 20);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    if (lc_pprof_decode(out->msg->pprof.data, out->msg->pprof.len, &lim, out->arena, &out->p,
                        &st) != 0)
        return -1;
    if (lc_pprof_validate(out->p, &lim, &st) != 0) {
        fprintf(stderr, "invalid pprof: %s\n", st.msg);
        return -1;
    }
    return lc_pprof_index_new(out->p, out->arena, &out->ix);
}

static inline void agt_test_decoded_fini(agt_decoded_t *d)
{
    if (d->msg)
        ember__v1__ingest_profile__free_unpacked(d->msg, NULL);
    lc_arena_free(d->arena);
    memset(d, 0, sizeof(*d));
}

static inline const char *agt_test_label(const agt_decoded_t *d, const char *name)
{
    for (size_t i = 0; i < d->msg->n_labels; i++) {
        if (strcmp(d->msg->labels[i]->name, name) == 0)
            return d->msg->labels[i]->value;
    }
    return NULL;
}

/* The function name of frame `k` (0 = leaf) of sample s, or NULL. */
static inline const char *agt_test_frame(const agt_decoded_t *d, const Google__V1__Sample *s,
                                         size_t k)
{
    if (k >= s->n_location_id)
        return NULL;
    const Google__V1__Location *loc = lc_pprof_location(d->ix, s->location_id[k]);
    if (!loc || !loc->n_line)
        return NULL;
    const Google__V1__Function *fn = lc_pprof_function(d->ix, loc->line[0]->function_id);
    return fn ? lc_pprof_str(d->p, fn->name) : NULL;
}

static inline bool agt_test_stack_has(const agt_decoded_t *d, const Google__V1__Sample *s,
                                      const char *name)
{
    for (size_t k = 0; k < s->n_location_id; k++) {
        const char *f = agt_test_frame(d, s, k);
        if (f && strcmp(f, name) == 0)
            return true;
    }
    return false;
}

/* Burns CPU in this very function for `ms` of wall time. */
static inline double agt_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time the kernel accounted to the calling thread, in ms: a busy loop
 * that stops on it gets the same number of samples on an idle or a loaded
 * machine (it just takes longer on the latter). */
static inline double agt_test_thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether `observed` samples fit `expected` (CPU time x rate). A task that
 * holds a CPU for a share of the ticks is sampled like a binomial draw, whose
 * variance is below its mean, so a bound of 4.5 standard deviations of a
 * Poisson count (plus 2 for tiny counts) holds under any load -- a fixed
 * +-25 % band is only 1.3 sigma at 26 samples. A rate off by 2x still fails
 * it once `expected` is above ~100, so callers ask for that many. */
static inline bool agt_test_count_plausible(double observed, double expected)
{
    double bound = 4.5 * sqrt(expected) + 2;
    fprintf(stderr, "samples %.0f, expected %.1f +- %.1f\n", observed, expected, bound);
    return observed >= expected - bound && observed <= expected + bound;
}

#endif
