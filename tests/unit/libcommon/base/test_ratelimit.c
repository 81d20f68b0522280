/*
 * test_ratelimit.c — per-tenant token buckets: burst, refill, both buckets
 * or neither, Retry-After, tenants apart, requests larger than a burst.
 */
#include "lc/ratelimit.h"
#include "lc_test.h"

#define S 1000000000LL

static void test_off_without_rates(void)
{
    lc_ratelimit_opts_t o = {0};
    LC_CHECK(lc_ratelimit_new(&o) == NULL);
}

static void test_burst_refill_and_tenants(void)
{
    lc_ratelimit_opts_t o = {
        .bytes_per_s = 1000, .bytes_burst = 2000, .profiles_per_s = 2, .profiles_burst = 4};
    lc_ratelimit_t *rl = lc_ratelimit_new(&o);
    int64_t t = 100 * S;
    for (int i = 0; i < 4; i++)
        LC_ASSERT_EQ(lc_ratelimit_take(rl, "a", 100, 1, t), 0);     /* burst of 4 profiles */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "a", 100, 1, t), 1);         /* 0.5 s -> Retry-After 1 */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "b", 100, 1, t), 0);         /* another tenant: unaffected */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "a", 100, 1, t + S / 2), 0); /* refilled one */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "a", 1700, 0, t + S / 2), 0); /* 2000 - 400 + 500 - 100 */
    LC_CHECK(lc_ratelimit_take(rl, "a", 1000, 0, t + S / 2) >= 1);
    /* refused requests take nothing: the profile bucket still has its token */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "a", 0, 1, t + S), 0);
    /* larger than the burst: never passes, Retry-After = a full bucket's time */
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "c", 5000, 1, t), 2);
    for (int i = 0; i < 100; i++) { /* many tenants: the table grows */
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        LC_ASSERT_EQ(lc_ratelimit_take(rl, name, 1, 1, t), 0);
    }
    LC_ASSERT_EQ(lc_ratelimit_take(rl, "b", 100, 1, t), 0);
    lc_ratelimit_free(rl);
}

static void test_inflight(void)
{
    LC_CHECK(lc_inflight_new(0) == NULL);
    lc_inflight_t *f = lc_inflight_new(2);
    const char *a[] = {"a"}, *ab[] = {"a", "b"}, *b[] = {"b"};
    LC_CHECK(lc_inflight_acquire(f, a, 1));
    LC_CHECK(lc_inflight_acquire(f, ab, 2));
    LC_CHECK(!lc_inflight_acquire(f, ab, 2)); /* a is full: b is not taken either */
    LC_CHECK(lc_inflight_acquire(f, b, 1));
    LC_CHECK(!lc_inflight_acquire(f, b, 1));
    lc_inflight_release(f, ab, 2);
    LC_CHECK(lc_inflight_acquire(f, a, 1));
    LC_CHECK(lc_inflight_acquire(f, b, 1));
    lc_inflight_free(f);
}

/* Active series: new series past the maximum refuse the whole request and
 * record nothing; known series always pass; duplicates count once; series
 * unseen for a window stop counting; tenants apart. */
static void test_series_limit(void)
{
    LC_CHECK(lc_serieslimit_new(0, S) == NULL);
    lc_serieslimit_t *sl = lc_serieslimit_new(3, 60 * S);
    int64_t t = 1000 * S;
    size_t active = 0;
    uint64_t ab[] = {11, 12, 11};
    LC_CHECK(lc_serieslimit_admit(sl, "a", ab, 3, t, &active));
    LC_ASSERT_EQ(active, 2);
    uint64_t cd[] = {13, 14}; /* 2 + 2 > 3: refused, nothing recorded */
    LC_CHECK(!lc_serieslimit_admit(sl, "a", cd, 2, t, &active));
    LC_ASSERT_EQ(active, 2);
    LC_CHECK(lc_serieslimit_admit(sl, "a", cd, 1, t + S, &active)); /* 13 alone fits */
    LC_ASSERT_EQ(active, 3);
    LC_CHECK(lc_serieslimit_admit(sl, "a", ab, 2, t + 2 * S, &active)); /* known: pass */
    LC_CHECK(!lc_serieslimit_admit(sl, "a", cd + 1, 1, t + 2 * S, &active));
    LC_CHECK(lc_serieslimit_admit(sl, "b", cd, 2, t, &active)); /* another tenant */
    LC_ASSERT_EQ(active, 2);
    uint64_t zero = 0; /* a hash of 0 is a series like any other */
    LC_CHECK(lc_serieslimit_admit(sl, "b", &zero, 1, t, &active));
    LC_ASSERT_EQ(active, 3);
    /* 13 was last seen at t + 1 s, 11 and 12 at t + 2 s: a window after 13,
     * 14 takes its place */
    LC_CHECK(!lc_serieslimit_admit(sl, "a", cd + 1, 1, t + 60 * S, &active));
    LC_CHECK(lc_serieslimit_admit(sl, "a", cd + 1, 1, t + 61 * S + 1, &active));
    LC_ASSERT_EQ(active, 3);
    lc_serieslimit_t *big = lc_serieslimit_new(5000, 60 * S); /* the table grows */
    for (uint64_t j = 1; j <= 5000; j++)                      /* (0 and 1 are the same series) */
        LC_CHECK(lc_serieslimit_admit(big, "c", &j, 1, t, &active));
    uint64_t over = 5001;
    LC_CHECK(!lc_serieslimit_admit(big, "c", &over, 1, t, &active));
    LC_ASSERT_EQ(active, 5000);
    lc_serieslimit_free(big);
    lc_serieslimit_free(sl);
}

LC_TEST_MAIN(test_off_without_rates, test_burst_refill_and_tenants, test_inflight,
             test_series_limit)
