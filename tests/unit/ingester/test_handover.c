/*
 * test_handover.c — decoded profiles left for the writer over Redis
 * (handover.h): taken once by ingest id, not kept past the cap, dropped on
 * request, passed over when a later entry of the same stream is taken, and
 * crowded past a quarter of the cap in published profiles. A real pprof from testdata, decoded and
 * checked as the receivers do, so the bytes counted are a real profile's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handover.h"
#include "lc_test.h"

static const char *const PROFILE = "pprof/pyroscope-heap";

/* A fresh arena holding PROFILE decoded and checked; *bytes its size. */
static lc_arena_t *decoded(const lc_pprof_t **p, const lc_pprof_index_t **ix, size_t *bytes)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, PROFILE);
    size_t len;
    unsigned char *data = lc_test_read_file(path, &len);
    if (!data) {
        fprintf(stderr, "  cannot read %s\n", path);
        abort();
    }
    lc_arena_t *a = lc_arena_new((size_t)1 << 30);
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_status_t st = {0};
    lc_pprof_t *pp;
    lc_pprof_index_t *pix;
    if (lc_pprof_decode(data, len, &lim, a, &pp, &st) < 0 ||
        lc_store_check_profile(pp, "t", pp->time_nanos, a, &pix, &st) < 0) {
        fprintf(stderr, "  %s: %s\n", PROFILE, st.msg);
        abort();
    }
    free(data);
    *p = pp;
    *ix = pix;
    if (bytes)
        *bytes = lc_arena_used(a);
    return a;
}

static void id_of(uint8_t id[16], int n)
{
    memset(id, 0, 16);
    id[0] = (uint8_t)n;
}

static void put(ing_handover_t *h, int n, uint32_t partition, const lc_pprof_t **p)
{
    uint8_t id[16];
    const lc_pprof_index_t *ix;
    id_of(id, n);
    lc_arena_t *a = decoded(p, &ix, NULL);
    ing_handover_put(h, id, partition, a, *p, ix);
}

static void published(ing_handover_t *h, int n)
{
    uint8_t id[16];
    id_of(id, n);
    ing_handover_published(h, id);
}

static ing_handover_item_t *take(ing_handover_t *h, int n)
{
    uint8_t id[16];
    id_of(id, n);
    return ing_handover_take(h, id, sizeof(id));
}

static void test_taken_once(void)
{
    ing_handover_t *h = ing_handover_new((size_t)1 << 30, NULL);
    const lc_pprof_t *p;
    put(h, 1, 0, &p);
    ing_handover_item_t *it = take(h, 1);
    if (!it) {
        LC_CHECK(it != NULL);
        return;
    }
    LC_CHECK(ing_handover_profile(it) == p);
    LC_CHECK(ing_handover_index(it) != NULL);
    LC_ASSERT_EQ(ing_handover_profile(it)->n_sample, (size_t)11951); /* MANIFEST.jsonl */
    LC_CHECK(take(h, 1) == NULL); /* a replay of the entry decodes */
    ing_handover_item_free(it);
    LC_CHECK(take(h, 2) == NULL);
    uint8_t short_id[4] = {1};
    LC_CHECK(ing_handover_take(h, short_id, sizeof(short_id)) == NULL);
    ing_handover_free(h);
}

static void test_cap_and_crowded(void)
{
    const lc_pprof_t *p;
    const lc_pprof_index_t *ix;
    size_t one;
    lc_arena_free(decoded(&p, &ix, &one));
    /* room for four; crowded past one published */
    ing_handover_t *h = ing_handover_new(4 * one + one / 2, NULL);
    LC_CHECK(!ing_handover_crowded(h));
    for (int n = 1; n <= 4; n++)
        put(h, n, (uint32_t)n, &p);
    LC_CHECK(!ing_handover_crowded(h)); /* nothing published: nothing to wait for */
    published(h, 1);
    LC_CHECK(!ing_handover_crowded(h));
    published(h, 1); /* counted once */
    LC_CHECK(!ing_handover_crowded(h));
    published(h, 2);
    LC_CHECK(ing_handover_crowded(h));
    put(h, 5, 5, &p); /* past the cap: not kept (its arena is freed: ASan checks) */
    LC_CHECK(take(h, 5) == NULL);
    ing_handover_item_free(take(h, 1));
    LC_CHECK(!ing_handover_crowded(h));
    put(h, 6, 6, &p); /* room again */
    ing_handover_item_t *it = take(h, 6);
    LC_CHECK(it != NULL);
    ing_handover_item_free(it);
    ing_handover_free(h); /* frees 2, 3 and 4, still held */
}

static void test_drop_and_pass(void)
{
    ing_handover_t *h = ing_handover_new((size_t)1 << 30, NULL);
    const lc_pprof_t *p;
    put(h, 1, 7, &p);
    put(h, 2, 8, &p);
    put(h, 3, 7, &p);
    put(h, 4, 7, &p);
    uint8_t id[16];
    id_of(id, 4);
    ing_handover_drop(h, id); /* its publish failed */
    LC_CHECK(take(h, 4) == NULL);
    /* stream 7 delivered 3 here: 1, put before it into stream 7, went elsewhere */
    ing_handover_item_t *it = take(h, 3);
    LC_CHECK(it != NULL);
    ing_handover_item_free(it);
    LC_CHECK(take(h, 1) == NULL);
    it = take(h, 2); /* another stream: still held */
    LC_CHECK(it != NULL);
    ing_handover_item_free(it);
    ing_handover_free(h);
}

LC_TEST_MAIN(test_taken_once, test_cap_and_crowded, test_drop_and_pass)
