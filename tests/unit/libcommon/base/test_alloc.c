/*
 * test_alloc.c — arenas: alignment, the cap, big allocations, and the block
 * pool that hands a reset arena's blocks to the next arena (alloc.c).
 */
#include <pthread.h>

#include "lc/alloc.h"
#include "lc_test.h"

/* alloc.c pools nothing under AddressSanitizer; the same test decides here. */
#if defined(__SANITIZE_ADDRESS__)
#define POOLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOLED 0
#endif
#endif
#ifndef POOLED
#define POOLED 1
#endif

static void test_alignment_and_cap(void)
{
    lc_arena_t *a = lc_arena_new(104);
    uint8_t *p = lc_arena_alloc(a, 3), *q = lc_arena_alloc(a, 1);
    LC_CHECK(p && q);
    LC_ASSERT_EQ((uintptr_t)p % 8, 0);
    LC_ASSERT_EQ((uintptr_t)q % 8, 0);
    LC_ASSERT_EQ(lc_arena_used(a), 16);      /* sizes round up to 8 */
    LC_CHECK(lc_arena_alloc(a, 89) == NULL); /* 16 + 96 > 104 */
    LC_CHECK(lc_arena_alloc(a, 88) != NULL);
    LC_ASSERT_EQ(lc_arena_used(a), 104);
    LC_CHECK(lc_arena_alloc(a, 1) == NULL);
    LC_CHECK(lc_arena_calloc(a, SIZE_MAX / 2, 4) == NULL); /* overflow, not a tiny block */
    lc_arena_reset(a);
    LC_ASSERT_EQ(lc_arena_used(a), 0);
    LC_CHECK(lc_arena_alloc(a, 104) != NULL);
    lc_arena_free(a);
}

/* Blocks of every size class and past them hold what was written. */
static void test_sizes(void)
{
    static const size_t sizes[] = {1,       4000,    16 << 10,      (16 << 10) + 1, 100 << 10,
                                   3 << 20, 4 << 20, (4 << 20) + 8, 9 << 20,        24};
    lc_arena_t *a = lc_arena_new(SIZE_MAX);
    uint8_t *blocks[LC_ARRAY_LEN(sizes)];
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < LC_ARRAY_LEN(sizes); i++) {
            blocks[i] = lc_arena_alloc(a, sizes[i]);
            LC_CHECK(blocks[i] != NULL);
            memset(blocks[i], (int)i + 1, sizes[i]);
        }
        for (size_t i = 0; i < LC_ARRAY_LEN(sizes); i++) {
            LC_ASSERT_EQ(blocks[i][0], (uint8_t)(i + 1));
            LC_ASSERT_EQ(blocks[i][sizes[i] - 1], (uint8_t)(i + 1));
        }
        lc_arena_reset(a);
    }
    lc_arena_free(a);
}

/* A block let go of by one arena is the next arena's. */
static void test_reset_blocks_are_reused(void)
{
    lc_arena_t *a = lc_arena_new(SIZE_MAX), *b = lc_arena_new(SIZE_MAX);
    void *first = lc_arena_alloc(a, 1 << 20);
    LC_CHECK(first != NULL);
    lc_arena_reset(a);
    void *again = lc_arena_alloc(b, 1 << 20);
    LC_CHECK(again != NULL);
    if (POOLED)
        LC_CHECK(again == first);
    memset(again, 0xab, 1 << 20);
    lc_arena_free(a);
    lc_arena_free(b);
}

static void *churn(void *arg)
{
    lc_arena_t *a = lc_arena_new(64 << 20);
    uintptr_t seed = (uintptr_t)arg;
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)((seed * 2654435761u + (uintptr_t)i * 40503u) % (2u << 20)) + 1;
        uint8_t *p = lc_arena_alloc(a, n);
        if (!p)
            return arg;
        memset(p, (int)seed, n);
        if (p[n - 1] != (uint8_t)seed)
            return arg;
        if (i % 3 == 0)
            lc_arena_reset(a);
    }
    lc_arena_free(a);
    return NULL;
}

/* The pool is shared by every thread's arenas. */
static void test_threads_share_the_pool(void)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        LC_ASSERT_OK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)));
    for (int i = 0; i < 4; i++) {
        void *failed;
        LC_ASSERT_OK(pthread_join(t[i], &failed));
        LC_CHECK(failed == NULL);
    }
}

LC_TEST_MAIN(test_alignment_and_cap, test_sizes, test_reset_blocks_are_reused,
             test_threads_share_the_pool)
