/*
 * test_members.c — membership through a real redis-server: members join and
 * a watcher lists them sorted by id; a closed member leaves at once; a member
 * that stops heartbeating (its field written by hand with a short expiry)
 * expires and its field is pruned; roles do not mix; after Redis loses its
 * data (restart without persistence) heartbeats bring everyone back; the
 * zone registry keeps every id that joined a zone until an operator's HDEL;
 * a lost note is recorded only for an id registered before, stands across
 * the member's restarts and goes when its time is up; and rendezvous hashing is stable, balanced
 * and moves only a leaver's keys.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lc/members.h"
#include "lc_test.h"
#include "test_redis_server.h"

typedef struct watch_s {
    int changes;
    size_t n;
    char ids[8][32], addrs[8][32];
    bool closed;
} watch_t;

static void on_change(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    watch_t *w = data;
    LC_UNUSED(m);
    w->changes++;
    w->n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        snprintf(w->ids[i], sizeof(w->ids[i]), "%s", live[i].id);
        snprintf(w->addrs[i], sizeof(w->addrs[i]), "%s", live[i].addr);
    }
}

static void on_closed(void *data)
{
    ((watch_t *)data)->closed = true;
}

typedef struct want_s {
    watch_t *w;
    size_t n;
} want_t;

static bool has_n(void *arg)
{
    want_t *x = arg;
    return x->w->changes > 0 && x->w->n == x->n;
}

static lc_members_t *open_members(uv_loop_t *loop, const test_redis_t *srv, const char *role,
                                  const char *id, const char *addr, watch_t *w)
{
    lc_members_opts_t o = {.url = srv->url,
                           .role = role,
                           .self_id = id,
                           .self_addr = addr,
                           .heartbeat_ms = 50,
                           .ttl_ms = 300,
                           .on_change = w ? on_change : NULL,
                           .change_data = w};
    lc_members_t *m = NULL;
    LC_ASSERT_OK(lc_members_new(loop, &o, &m));
    return m;
}

static void close_members(uv_loop_t *loop, lc_members_t *m, watch_t *w)
{
    lc_members_close(m, on_closed, w);
    while (!w->closed && uv_run(loop, UV_RUN_ONCE))
        ;
    LC_CHECK(w->closed);
}

static void test_join_list_leave(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wa = {0}, wb = {0}, wq = {0}, ws = {0};
    lc_members_t *a = open_members(&loop, &srv, "ingester", "ingester-1", "10.0.0.2:4040", &wa);
    lc_members_t *b = open_members(&loop, &srv, "ingester", "ingester-0", "10.0.0.1:4040", &wb);
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq); /* querier */
    lc_members_t *s = open_members(&loop, &srv, "scraper", "scraper-0", "10.0.0.9:1", &ws);
    want_t two = {&wq, 2};
    LC_CHECK(test_run_until(&loop, has_n, &two, 3000));
    LC_ASSERT_STR_EQ(wq.ids[0], "ingester-0"); /* sorted by id */
    LC_ASSERT_STR_EQ(wq.addrs[0], "10.0.0.1:4040");
    LC_ASSERT_STR_EQ(wq.ids[1], "ingester-1");
    LC_ASSERT_STR_EQ(wq.addrs[1], "10.0.0.2:4040");
    LC_CHECK(lc_members_is_up(q));
    const lc_member_t *list;
    LC_ASSERT_EQ(lc_members_list(q, &list), 2);
    LC_ASSERT_STR_EQ(list[1].id, "ingester-1");
    want_t self = {&wa, 2};
    LC_CHECK(test_run_until(&loop, has_n, &self, 3000)); /* members see themselves too */
    want_t scr = {&ws, 1};
    LC_CHECK(test_run_until(&loop, has_n, &scr, 3000)); /* roles do not mix */
    LC_ASSERT_STR_EQ(ws.ids[0], "scraper-0");
    int changes = wq.changes;
    close_members(&loop, a, &wa); /* leaves with HDEL */
    want_t one = {&wq, 1};
    LC_CHECK(test_run_until(&loop, has_n, &one, 200)); /* well before the 300 ms ttl */
    LC_ASSERT_STR_EQ(wq.ids[0], "ingester-0");
    LC_ASSERT_EQ(wq.changes, changes + 1);
    close_members(&loop, b, &wb);
    close_members(&loop, q, &wq);
    close_members(&loop, s, &ws);
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester"), 0);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static long long server_ms(const test_redis_t *srv)
{
    redisContext *c = test_redis_connect(srv);
    redisReply *r = redisCommand(c, "TIME");
    long long ms =
        strtoll(r->element[0]->str, NULL, 10) * 1000 + strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    redisFree(c);
    return ms;
}

/* A member that crashed stops heartbeating: it expires and its field is pruned. */
static void test_silent_member_expires(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wq = {0};
    char value[64];
    snprintf(value, sizeof(value), "10.0.0.7:4040|%lld", server_ms(&srv) + 400);
    redisContext *c = test_redis_connect(&srv);
    freeReplyObject(redisCommand(c, "HSET ember:members:ingester ghost %s", value));
    freeReplyObject(redisCommand(c, "HSET ember:members:ingester junk no-expiry-here"));
    redisFree(c);
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq);
    want_t one = {&wq, 1};
    LC_CHECK(test_run_until(&loop, has_n, &one, 3000));
    LC_ASSERT_STR_EQ(wq.ids[0], "ghost");
    LC_ASSERT_STR_EQ(wq.addrs[0], "10.0.0.7:4040");
    want_t none = {&wq, 0};
    LC_CHECK(test_run_until(&loop, has_n, &none, 3000));
    uv_sleep(100);
    uv_run(&loop, UV_RUN_NOWAIT);
    LC_ASSERT_EQ(test_redis_int(&srv, "HEXISTS ember:members:ingester ghost"), 0);
    LC_ASSERT_EQ(test_redis_int(&srv, "HEXISTS ember:members:ingester junk"), 0);
    close_members(&loop, q, &wq);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

typedef struct watcher_s {
    lc_members_t *m;
    watch_t *w;
    const test_redis_t *srv;
} watcher_t;

/* The watcher is connected and the member's heartbeat is back in Redis. */
static bool up_with_one(void *arg)
{
    watcher_t *x = arg;
    return lc_members_is_up(x->m) && x->w->n == 1 &&
           test_redis_int(x->srv, "HEXISTS ember:members:ingester ingester-0") == 1;
}

/* Redis restarted without persistence: the hash is gone until heartbeats refill it;
 * meanwhile (while down) watchers keep the last list. */
static void test_redis_restart_rejoins(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wa = {0}, wq = {0};
    lc_members_t *a = open_members(&loop, &srv, "ingester", "ingester-0", "h:1", &wa);
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq);
    want_t one = {&wq, 1};
    LC_CHECK(test_run_until(&loop, has_n, &one, 3000));
    watcher_t wq_up = {q, &wq, &srv};
    test_redis_stop(&srv, SIGKILL);
    uv_sleep(500);
    for (int i = 0; i < 50; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    LC_CHECK(!lc_members_is_up(q));
    LC_ASSERT_EQ(wq.n, 1); /* last list stands */
    LC_ASSERT_OK(test_redis_restart(&srv));
    int changes = wq.changes;
    LC_CHECK(test_run_until(&loop, up_with_one, &wq_up, 5000));
    LC_ASSERT_EQ(test_redis_int(&srv, "HEXISTS ember:members:ingester ingester-0"), 1);
    uint64_t end = uv_hrtime() + 300 * 1000000ull; /* then it stays put */
    while (uv_hrtime() < end)
        uv_run(&loop, UV_RUN_ONCE);
    LC_ASSERT_EQ(wq.n, 1);
    LC_CHECK(wq.changes <= changes + 2); /* at most a blip (q read before a's heartbeat) */
    close_members(&loop, a, &wa);
    close_members(&loop, q, &wq);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

/* ---- zones: a durable registry of every id that ever joined a zone */

typedef struct reg_want_s {
    lc_members_t *m;
    size_t n;
} reg_want_t;

static bool registry_has_n(void *arg)
{
    reg_want_t *x = arg;
    const lc_member_t *reg;
    return lc_members_registry(x->m, &reg) == x->n;
}

static lc_members_t *open_noted(uv_loop_t *loop, const test_redis_t *srv, const char *id,
                                const char *zone, watch_t *w, const char *lost_note,
                                uint64_t note_ttl_ms)
{
    lc_members_opts_t o = {.url = srv->url,
                           .role = "ingester",
                           .self_id = id,
                           .self_addr = "h:1",
                           .zone = zone,
                           .heartbeat_ms = 50,
                           .ttl_ms = 300,
                           .on_change = on_change,
                           .change_data = w,
                           .lost_note = lost_note,
                           .lost_note_ttl_ms = note_ttl_ms};
    lc_members_t *m = NULL;
    LC_ASSERT_OK(lc_members_new(loop, &o, &m));
    return m;
}

static lc_members_t *open_zoned(uv_loop_t *loop, const test_redis_t *srv, const char *id,
                                const char *zone, watch_t *w)
{
    return open_noted(loop, srv, id, zone, w, NULL, 0);
}

static void test_zone_registry(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wa = {0}, wb = {0}, wd = {0}, wq = {0}, ws = {0};
    lc_members_t *a = open_zoned(&loop, &srv, "ing-a", "a", &wa);
    lc_members_t *b = open_zoned(&loop, &srv, "ing-b", "b", &wb);
    lc_members_t *d = open_zoned(&loop, &srv, "ing-d", "", &wd); /* the default zone */
    lc_members_t *s = open_members(&loop, &srv, "ingester", "old", "h:2", &ws); /* no zone */
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq);
    want_t four = {&wq, 4};
    LC_CHECK(test_run_until(&loop, has_n, &four, 3000));
    reg_want_t three = {q, 3};
    LC_CHECK(test_run_until(&loop, registry_has_n, &three, 3000));
    const lc_member_t *live, *reg;
    LC_ASSERT_EQ(lc_members_list(q, &live), 4);
    LC_ASSERT_STR_EQ(live[0].id, "ing-a");
    LC_ASSERT_STR_EQ(live[0].zone, "a");
    LC_ASSERT_STR_EQ(live[1].zone, "b");
    LC_ASSERT_STR_EQ(live[2].zone, "");
    LC_ASSERT_STR_EQ(live[3].id, "old");
    LC_ASSERT_STR_EQ(live[3].zone, ""); /* never registered: counted in the default zone */
    LC_ASSERT_EQ(lc_members_registry(q, &reg), 3);
    LC_ASSERT_STR_EQ(reg[0].id, "ing-a");
    LC_ASSERT_STR_EQ(reg[0].zone, "a");
    LC_ASSERT_STR_EQ(reg[2].id, "ing-d");
    LC_ASSERT_STR_EQ(reg[2].zone, "");
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:registry"), 3);

    /* A member that leaves (or dies) stays registered: its zone misses it. */
    close_members(&loop, b, &wb);
    want_t three_live = {&wq, 3};
    LC_CHECK(test_run_until(&loop, has_n, &three_live, 3000));
    LC_ASSERT_EQ(lc_members_registry(q, &reg), 3);
    LC_ASSERT_STR_EQ(reg[1].id, "ing-b");

    /* Only an operator's HDEL removes it; the watcher sees the change. */
    int changes = wq.changes;
    LC_ASSERT_EQ(test_redis_int(&srv, "HDEL ember:members:ingester:registry ing-b"), 1);
    reg_want_t two = {q, 2};
    LC_CHECK(test_run_until(&loop, registry_has_n, &two, 3000));
    LC_CHECK(wq.changes > changes);

    /* The same id restarted in another zone moves there (the log says so). */
    close_members(&loop, a, &wa);
    wa = (watch_t){0};
    a = open_zoned(&loop, &srv, "ing-a", "b", &wa);
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (uv_hrtime() < end && (lc_members_list(q, &live) < 1 || strcmp(live[0].zone, "b") != 0))
        uv_run(&loop, UV_RUN_ONCE);
    LC_ASSERT_STR_EQ(live[0].id, "ing-a");
    LC_ASSERT_STR_EQ(live[0].zone, "b");
    close_members(&loop, a, &wa);
    close_members(&loop, d, &wd);
    close_members(&loop, s, &ws);
    close_members(&loop, q, &wq);
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester"), 0);
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:registry"), 2);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

typedef struct note_want_s {
    lc_members_t *m;
    const char *note;
} note_want_t;

/* The watcher lists exactly one member and it carries this note. */
static bool note_is(void *arg)
{
    note_want_t *x = arg;
    const lc_member_t *live;
    return lc_members_list(x->m, &live) == 1 && strcmp(live[0].note, x->note) == 0;
}

static void test_lost_note(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wx = {0}, wq = {0};
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq);
    /* a first life: nothing earlier to lack, so no note is recorded */
    lc_members_t *x = open_noted(&loop, &srv, "ing-x", "a", &wx, "lost it", 0);
    want_t one = {&wq, 1};
    LC_CHECK(test_run_until(&loop, has_n, &one, 3000));
    note_want_t none = {q, ""};
    LC_CHECK(test_run_until(&loop, note_is, &none, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:notes"), 0);
    close_members(&loop, x, &wx);

    /* a later life on a new volume: recorded, seen with the member, for 600 ms */
    wx = (watch_t){0};
    x = open_noted(&loop, &srv, "ing-x", "a", &wx, "lost it", 600);
    note_want_t lost = {q, "lost it"};
    LC_CHECK(test_run_until(&loop, note_is, &lost, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:notes"), 1);
    /* its time is up: the watcher drops it and prunes the field */
    LC_CHECK(test_run_until(&loop, note_is, &none, 3000));
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (uv_hrtime() < end && test_redis_int(&srv, "HLEN ember:members:ingester:notes") != 0)
        uv_run(&loop, UV_RUN_ONCE);
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:notes"), 0);
    close_members(&loop, x, &wx);

    /* without an end it stands, also when the id restarts on an intact volume */
    wx = (watch_t){0};
    x = open_noted(&loop, &srv, "ing-x", "a", &wx, "lost again", 0);
    note_want_t again = {q, "lost again"};
    LC_CHECK(test_run_until(&loop, note_is, &again, 3000));
    close_members(&loop, x, &wx);
    wx = (watch_t){0};
    x = open_noted(&loop, &srv, "ing-x", "a", &wx, NULL, 0);
    LC_CHECK(test_run_until(&loop, has_n, &one, 3000));
    for (int i = 0; i < 10; i++) /* a few heartbeats and lists */
        uv_run(&loop, UV_RUN_ONCE);
    LC_CHECK(note_is(&again));
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:notes"), 1);
    close_members(&loop, x, &wx);
    close_members(&loop, q, &wq);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

typedef struct mark_done_s {
    int calls, status;
} mark_done_t;

static void on_mark(int status, void *data)
{
    mark_done_t *d = data;
    d->calls++;
    d->status = status;
}

static bool mark_answered(void *arg)
{
    return ((mark_done_t *)arg)->calls > 0;
}

/* Sets (or lowers) x's mark and waits for Redis's answer. */
static void set_mark(uv_loop_t *loop, lc_members_t *x, int64_t ms, bool lower)
{
    mark_done_t d = {0};
    LC_ASSERT_OK(lc_members_set_mark(x, ms, lower, on_mark, &d));
    LC_CHECK(test_run_until(loop, mark_answered, &d, 3000));
    LC_ASSERT_EQ(d.calls, 1);
    LC_ASSERT_EQ(d.status, 0);
}

typedef struct mark_want_s {
    lc_members_t *q;
    int64_t ms;
    uint64_t gen;
} mark_want_t;

/* The watcher's registry (one id) and live list both carry this mark. */
static bool mark_is(void *arg)
{
    mark_want_t *x = arg;
    const lc_member_t *live, *reg;
    return lc_members_registry(x->q, &reg) == 1 && reg[0].mark_ms == x->ms &&
           reg[0].mark_gen == x->gen && lc_members_list(x->q, &live) == 1 &&
           live[0].mark_ms == x->ms && live[0].mark_gen == x->gen;
}

/* issue 27: a lower without a mark writes none; a set writes one with the
 * next generation; a lower moves it only down; watchers see it, also for a
 * member that left (the registry keeps it). */
static void test_marks(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    watch_t wx = {0}, wq = {0};
    lc_members_t *q = open_members(&loop, &srv, "ingester", NULL, NULL, &wq);
    lc_members_t *x = open_zoned(&loop, &srv, "ing-x", "a", &wx);
    want_t one = {&wq, 1};
    LC_CHECK(test_run_until(&loop, has_n, &one, 3000));
    mark_want_t none = {q, LC_MEMBER_NO_MARK, 0};
    LC_CHECK(test_run_until(&loop, mark_is, &none, 3000));
    mark_done_t d = {0};
    LC_ASSERT_EQ(lc_members_set_mark(q, 5, false, on_mark, &d), LC_EINPUT); /* not joined */

    set_mark(&loop, x, 7200000, true); /* no mark yet: a lower writes none */
    LC_ASSERT_EQ(test_redis_int(&srv, "HLEN ember:members:ingester:marks"), 0);
    set_mark(&loop, x, 1764403200000, false);
    mark_want_t first = {q, 1764403200000, 1};
    LC_CHECK(test_run_until(&loop, mark_is, &first, 3000));
    set_mark(&loop, x, 1764406800000, true); /* above it: unchanged */
    set_mark(&loop, x, -3600000, true);      /* below it (and negative): moved */
    mark_want_t low = {q, -3600000, 2};
    LC_CHECK(test_run_until(&loop, mark_is, &low, 3000));
    set_mark(&loop, x, 1764410400000, false); /* a set may raise it */
    mark_want_t high = {q, 1764410400000, 3};
    LC_CHECK(test_run_until(&loop, mark_is, &high, 3000));

    /* Gone from the live list, kept with the registry. */
    close_members(&loop, x, &wx);
    want_t zero = {&wq, 0};
    LC_CHECK(test_run_until(&loop, has_n, &zero, 3000));
    const lc_member_t *reg;
    LC_ASSERT_EQ(lc_members_registry(q, &reg), 1);
    LC_ASSERT_EQ(reg[0].mark_ms, 1764410400000);
    /* A malformed field is no mark. */
    LC_ASSERT_EQ(test_redis_int(&srv, "HSET ember:members:ingester:marks ing-x 4|x9"), 0);
    uint64_t end = uv_hrtime() + 3000 * 1000000ull;
    while (uv_hrtime() < end && lc_members_registry(q, &reg) == 1 &&
           reg[0].mark_ms != LC_MEMBER_NO_MARK)
        uv_run(&loop, UV_RUN_ONCE);
    LC_ASSERT_EQ(reg[0].mark_ms, LC_MEMBER_NO_MARK);
    close_members(&loop, q, &wq);
    LC_ASSERT_OK(uv_loop_close(&loop));
    test_redis_finish(&srv);
}

static void test_rendezvous(void)
{
    lc_member_t four[] = {{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}};
    lc_member_t three[] = {{"a", ""}, {"b", ""}, {"d", ""}}; /* "c" left */
    int per[4] = {0}, moved = 0, owned_by_c = 0;
    LC_ASSERT_EQ(lc_members_rendezvous(four, 0, "k", 1), SIZE_MAX);
    for (int i = 0; i < 4000; i++) {
        char key[64];
        int len = snprintf(key, sizeof(key), "http://target-%d:6060/debug/pprof", i);
        size_t o4 = lc_members_rendezvous(four, 4, key, (size_t)len);
        size_t o3 = lc_members_rendezvous(three, 3, key, (size_t)len);
        LC_ASSERT_EQ(o4, lc_members_rendezvous(four, 4, key, (size_t)len)); /* stable */
        per[o4]++;
        if (strcmp(four[o4].id, "c") == 0)
            owned_by_c++;
        else if (strcmp(four[o4].id, three[o3].id) != 0)
            moved++;
    }
    for (int i = 0; i < 4; i++)
        LC_CHECK(per[i] > 800 && per[i] < 1200); /* about 1000 each */
    LC_ASSERT_EQ(moved, 0);                      /* only c's keys moved */
    LC_CHECK(owned_by_c > 0);
}

static void test_bad_options(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_members_t *m = NULL;
    lc_members_opts_t o = {.url = "redis://h", .role = ""};
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    o.role = "ingester";
    o.self_id = "x"; /* no address */
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    o.self_addr = "h:1";
    o.heartbeat_ms = 1000;
    o.ttl_ms = 500; /* would expire between beats */
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    o.ttl_ms = 0;
    o.zone = "zone-name-longer-than-sixty-four-characters-is-refused-by-members-new";
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    o.zone = "a";
    o.self_id = NULL; /* a zone needs a member to register */
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    o.zone = NULL;
    o.self_id = "x";
    o.url = "redis:/h";
    o.ttl_ms = 0;
    LC_ASSERT_EQ(lc_members_new(&loop, &o, &m), LC_EINPUT);
    LC_CHECK(m == NULL);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

LC_TEST_MAIN(test_bad_options, test_rendezvous, test_join_list_leave, test_silent_member_expires,
             test_redis_restart_rejoins, test_zone_registry, test_lost_note, test_marks)
