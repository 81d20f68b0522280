/*
 * test_zones.c — the zone a distributed query asks (zones.h): the first
 * complete zone by name; a registered id that is not live makes its zone
 * incomplete; with none complete, the reason names every missing id (with
 * its last address when known); unregistered live members count in the
 * default zone; an empty cluster is no zone at all; a complete zone with a
 * member that lacks profiles (a note) gives way to one without.
 */
#include <string.h>

#include "lc_test.h"
#include "zones.h"

#define M(id, addr, zone)                                                                          \
    {                                                                                              \
        id, addr, zone                                                                             \
    }

static void test_first_complete_zone_by_name(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b")};
    lc_member_t live[] = {M("a1", "http://a1", "a"), M("a2", "http://a2", "a"),
                          M("b1", "http://b1", "b")};
    qz_choice_t c;
    qz_choose(live, 3, reg, 3, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_ASSERT_EQ(c.n_urls, 2);
    LC_ASSERT_STR_EQ(c.urls[0], "http://a1");
    LC_ASSERT_STR_EQ(c.urls[1], "http://a2");
    LC_ASSERT_EQ(c.n_zones, 2);
    LC_ASSERT_EQ(c.n_complete, 2);
    LC_CHECK(c.reason == NULL);
    qz_choice_fini(&c);
}

static void test_incomplete_zone_is_skipped(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b"), M("b2", "", "b")};
    lc_member_t live[] = {M("a2", "http://a2", "a"), M("b1", "http://b1", "b"),
                          M("b2", "http://b2", "b")}; /* a1 is dead */
    qz_choice_t c;
    qz_choose(live, 3, reg, 4, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "b");
    LC_ASSERT_EQ(c.n_urls, 2);
    LC_ASSERT_STR_EQ(c.urls[0], "http://b1");
    LC_ASSERT_EQ(c.n_complete, 1);
    qz_choice_fini(&c);
    /* The operator removed a1 from the registry: zone a is complete again and
     * first by name (its copy lacks a1's profiles: see ARCHITECTURE.md). */
    qz_choose(live, 3, reg + 1, 3, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_ASSERT_EQ(c.n_urls, 1);
    LC_ASSERT_STR_EQ(c.urls[0], "http://a2");
    qz_choice_fini(&c);
}

static void test_no_complete_zone_names_the_missing(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b")};
    lc_member_t live[] = {M("a2", "http://a2", "a")};
    lc_member_t seen[] = {M("b1", "http://10.0.0.9:4040", NULL), M("a2", "http://a2", NULL)};
    qz_choice_t c;
    qz_choose(live, 1, reg, 3, seen, 2, false, &c);
    LC_CHECK(c.zone == NULL);
    LC_ASSERT_EQ(c.n_urls, 0);
    LC_ASSERT_EQ(c.n_complete, 0);
    LC_CHECK(c.reason != NULL);
    LC_CHECK(strstr(c.reason, "zone \"a\" misses a1") != NULL);
    LC_CHECK(strstr(c.reason, "zone \"b\" misses b1 (last seen at http://10.0.0.9:4040)"));
    LC_CHECK(strstr(c.reason, "a2") == NULL); /* live: not missing */
    qz_choice_fini(&c);
}

static void test_default_zone_and_unregistered(void)
{
    /* Before zones: nobody registered (older ingesters): one default zone of all. */
    lc_member_t live[] = {M("i0", "http://i0", ""), M("i1", "http://i1", "")};
    qz_choice_t c;
    qz_choose(live, 2, NULL, 0, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "");
    LC_ASSERT_EQ(c.n_urls, 2);
    qz_choice_fini(&c);
    /* A registered default-zone member that died: 503, naming it. */
    lc_member_t reg[] = {M("i0", "", ""), M("i1", "", ""), M("i2", "", "")};
    qz_choose(live, 2, reg, 3, NULL, 0, false, &c);
    LC_CHECK(c.zone == NULL);
    LC_CHECK(c.reason && strstr(c.reason, "zone \"\" misses i2"));
    qz_choice_fini(&c);
    /* Nobody at all: no zone, no reason (the fan-out says "no live ingester"). */
    qz_choose(NULL, 0, NULL, 0, NULL, 0, false, &c);
    LC_CHECK(c.zone == NULL && c.reason == NULL && c.n_zones == 0);
    qz_choice_fini(&c);
}

static void test_reason_is_bounded(void)
{
    enum { N = 200 };
    static lc_member_t reg[N];
    static char ids[N][64];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "ingester-with-a-long-name-%03d", i);
        reg[i] = (lc_member_t)M(ids[i], "", "z");
    }
    qz_choice_t c;
    qz_choose(NULL, 0, reg, N, NULL, 0, false, &c);
    LC_CHECK(c.reason && strlen(c.reason) < QZ_REASON_MAX + 64);
    LC_CHECK(strstr(c.reason, "..."));
    qz_choice_fini(&c);
}

static void test_zone_lacking_profiles_gives_way(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b"), M("c1", "", "c")};
    lc_member_t live[] = {M("a1", "http://a1", "a"), M("a2", "http://a2", "a"),
                          M("b1", "http://b1", "b"), M("c1", "http://c1", "c")};
    live[1].note = "lost its volume";
    qz_choice_t c;
    qz_choose(live, 4, reg, 4, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "b"); /* a is complete but a2 lacks profiles */
    LC_ASSERT_EQ(c.n_urls, 1);
    LC_ASSERT_STR_EQ(c.urls[0], "http://b1");
    LC_ASSERT_EQ(c.n_complete, 3);
    LC_CHECK(c.lacking == NULL);
    qz_choice_fini(&c);
    /* b lacks profiles too: c, the first whole one */
    live[2].note = "lost its volume";
    qz_choose(live, 4, reg, 4, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "c");
    qz_choice_fini(&c);
    /* c is down: every complete zone lacks some, the first complete one answers */
    qz_choose(live, 3, reg, 4, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_ASSERT_EQ(c.n_urls, 2);
    LC_CHECK(c.lacking && strstr(c.lacking, "a2") && strstr(c.lacking, "lost its volume"));
    qz_choice_fini(&c);
    /* an empty note is no note */
    live[1].note = live[2].note = "";
    qz_choose(live, 4, reg, 4, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_CHECK(c.lacking == NULL);
    qz_choice_fini(&c);
}

/* issue 27: the chosen zone's marks, per member and as the bucket shard's
 * spec; a member without one is asked for everything and left out of it. */
static void test_marks_of_the_chosen_zone(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b")};
    lc_member_t live[] = {M("a1", "http://a1", "a"), M("a2", "http://a2", "a"),
                          M("b1", "http://b1", "b")};
    live[0].mark_ms = 1795935600000;
    live[0].mark_gen = 4;
    live[1].mark_ms = LC_MEMBER_NO_MARK;
    live[2].mark_ms = 7;
    qz_choice_t c;
    qz_choose(live, 3, reg, 3, NULL, 0, false, &c);
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_ASSERT_EQ(c.marks_ms[0], 1795935600000);
    LC_ASSERT_EQ(c.marks_ms[1], LC_MEMBER_NO_MARK);
    LC_ASSERT_STR_EQ(c.marks_spec, "4:1795935600000:6131"); /* "a1" in hex; b1 is not asked */
    const char *p = c.marks_spec;
    lc_marks_entry_t e;
    LC_ASSERT_EQ(lc_marks_spec_next(&p, &e), 0);
    LC_ASSERT_STR_EQ(e.id, "a1");
    LC_ASSERT_EQ(e.gen, 4);
    LC_ASSERT_EQ(lc_marks_spec_next(&p, &e), 1);
    qz_choice_fini(&c);
    live[0].mark_ms = LC_MEMBER_NO_MARK;
    qz_choose(live, 3, reg, 3, NULL, 0, false, &c);
    LC_CHECK(c.marks_spec == NULL); /* no mark: no bucket shard */
    qz_choice_fini(&c);
    const char *bad[] = {"x:1:61", "1:2:6", "1:2:", "1:2:0061", "1:2:61,1:x:62"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p = bad[i];
        int rc = lc_marks_spec_next(&p, &e);
        if (i == 4) /* the first entry is fine, the second is not */
            rc = lc_marks_spec_next(&p, &e);
        LC_ASSERT_EQ(rc, LC_EINPUT);
    }
}

/* issue 27: no zone is complete, but the history below the missing members'
 * marks is in the bucket: the zone with the longest such history answers it
 * (its missing members in the spec), if the querier reads the bucket. */
static void test_history_zone_without_a_complete_one(void)
{
    lc_member_t reg[] = {M("a1", "", "a"), M("a2", "", "a"), M("b1", "", "b"), M("b2", "", "b")};
    lc_member_t live[] = {M("a2", "http://a2", "a"), M("b2", "http://b2", "b")};
    reg[0].mark_ms = 100; /* a1: dead, its history below 100 is in the bucket */
    reg[2].mark_ms = 50;  /* b1: dead, below 50 */
    reg[1].mark_ms = reg[3].mark_ms = LC_MEMBER_NO_MARK;
    live[0].mark_ms = 200;
    live[1].mark_ms = LC_MEMBER_NO_MARK;
    qz_choice_t c;
    qz_choose(live, 2, reg, 4, NULL, 0, true, &c);
    LC_CHECK(c.reason != NULL); /* still no complete zone: later queries are 503 */
    LC_ASSERT_STR_EQ(c.zone, "a");
    LC_ASSERT_EQ(c.history_below_ms, 100);
    LC_ASSERT_EQ(c.n_urls, 1);
    LC_ASSERT_STR_EQ(c.urls[0], "http://a2");
    LC_ASSERT_STR_EQ(c.marks_spec, "0:200:6132,0:100:6131"); /* a2 then the missing a1 */
    qz_choice_fini(&c);
    qz_choose(live, 2, reg, 4, NULL, 0, false, &c); /* the querier reads no bucket */
    LC_CHECK(c.zone == NULL && c.history_below_ms == INT64_MIN && c.n_urls == 0);
    qz_choice_fini(&c);
    reg[0].mark_ms = LC_MEMBER_NO_MARK; /* a1 without a mark: only zone b's history */
    qz_choose(live, 2, reg, 4, NULL, 0, true, &c);
    LC_ASSERT_STR_EQ(c.zone, "b");
    LC_ASSERT_EQ(c.history_below_ms, 50);
    qz_choice_fini(&c);
}

LC_TEST_MAIN(test_first_complete_zone_by_name, test_incomplete_zone_is_skipped,
             test_no_complete_zone_names_the_missing, test_default_zone_and_unregistered,
             test_reason_is_bounded, test_zone_lacking_profiles_gives_way,
             test_marks_of_the_chosen_zone, test_history_zone_without_a_complete_one)
