/*
 * lc/members.h — group membership through Redis, for any role.
 *
 * A group is a role name ("ingester", "scraper", ...). Its members live in
 * one Redis hash, <key_prefix><role> (default ember:members:<role>), field
 * <id> = "<address>|<expiry in Redis server ms>". A member heartbeats every
 * heartbeat_ms, pushing its expiry to Redis's clock + ttl_ms (a Lua script
 * reads TIME on the server, so host clocks may disagree); it leaves with an
 * HDEL on close. Anyone, member or not, reads the hash every refresh_ms and
 * keeps the fields not yet expired; expired ones are removed (only if
 * unchanged since read, so a member that just came back is not erased).
 *
 * One lc_members_t serves one role: with self_id set it joins (heartbeats)
 * and watches; without, it only watches. The querier watches "ingester" to
 * find the shard APIs; a scraper joins and watches "scraper" and splits
 * targets with lc_members_rendezvous(), so adding a replica moves only its
 * share. on_change gets the live members sorted by id (self included once
 * its first heartbeat landed) on the first successful read and on every
 * change; joins and leaves are logged. While Redis is down the last list
 * stands (nobody can tell who left), and lc_members_is_up() says so.
 *
 * Zones (replication, ARCHITECTURE.md): a member that joins with a zone is
 * also recorded in the durable registry <key_prefix><role>:registry, a hash
 * id -> zone written by the heartbeat script itself and never expiring, so
 * a member that died for good is still known to its zone ("missing"). Only
 * an operator removes an id (HDEL). Watchers read the registry along with
 * the live hash (one script, one consistent read); on_change also fires
 * when the registry changes, and registrations, removals and zone changes
 * are logged.
 *
 * Notes: a zoned member that starts without what an earlier life of its id
 * held (an ingester whose volume was lost) joins with lost_note. The
 * heartbeat script records it in <key_prefix><role>:notes (id -> note) only
 * if the id was registered before, in the same call that makes the member
 * live, so watchers never see it live without its note; the note stands
 * lost_note_ttl_ms (0 = until an operator HDELs it), whatever the member
 * does later. Watchers get it as lc_member_t.note (the querier prefers a
 * zone whose members have none).
 *
 * Marks (issue 27): a joined member sets its own mark (lc_members_set_mark:
 * a time in ms with a generation the script bumps at every write) in
 * <key_prefix><role>:marks; watchers read them with the registry into
 * lc_member_t.mark_ms / mark_gen, for live and registered ids alike. The
 * ingester's mark is the partition start below which its blocks are all in
 * the bucket (lc_store_set_floor): queriers read those from there.
 *
 * Threading: loop thread only. Every Redis command has a timeout (lc/redis.h).
 */
#ifndef LC_MEMBERS_H
#define LC_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lc/err.h"

typedef struct lc_members_s lc_members_t;

typedef struct lc_member_s {
    const char *id;
    const char *addr;  /* "" in the registry */
    const char *zone;  /* the registered zone; "" = default zone or not registered */
    const char *note;  /* what this id lacks (a standing lost_note); "" = nothing */
    int64_t mark_ms;   /* its mark; LC_MEMBER_NO_MARK = none */
    uint64_t mark_gen; /* bumped at every write of the mark */
} lc_member_t;

#define LC_MEMBER_NO_MARK INT64_MIN

#define LC_MEMBERS_ZONE_MAX 64

/* live[0..n) sorted by id; borrowed until the callback returns. */
typedef void (*lc_members_change_cb)(lc_members_t *m, const lc_member_t *live, size_t n,
                                     void *data);

typedef struct lc_members_opts_s {
    const char *url;         /* required: redis://... */
    const char *role;        /* required: the group */
    const char *self_id;     /* join under this id (e.g. the pod name); NULL = watch only */
    const char *self_addr;   /* how others reach this member (host:port); required to join */
    const char *zone;        /* join: register self_id in this zone ("" = default);
                                NULL = no registry (e.g. scrapers) */
    uint32_t heartbeat_ms;   /* default 1000 */
    uint32_t ttl_ms;         /* gone when unseen this long; default 5000; > heartbeat_ms */
    uint32_t refresh_ms;     /* list read interval; default heartbeat_ms */
    uint32_t cmd_timeout_ms; /* default 2000 */
    const char *key_prefix;  /* default "ember:members:" */
    bool cluster;            /* Redis Cluster: url lists seeds; the registry is {<key>}:registry */
    const char *lost_note;   /* zoned join: this life lacks what an earlier one held; NULL = no */
    uint64_t lost_note_ttl_ms;      /* how long a recorded lost_note stands; 0 = no end */
    lc_members_change_cb on_change; /* optional */
    void *change_data;
    void (*on_state)(bool up, void *data); /* optional: the Redis link went up/down */
    void *state_data;
} lc_members_opts_t;

/* LC_EINPUT for a bad URL, an empty role, self_id without self_addr, a zone
 * without self_id or longer than LC_MEMBERS_ZONE_MAX, or ttl <= heartbeat. */
int lc_members_new(uv_loop_t *loop, const lc_members_opts_t *opts,
                   lc_members_t **out) LC_MUST_CHECK;

/* Leaves the group (HDEL, bounded by the command timeout) when joined and
 * connected, closes the link, frees m, then calls cb (optional). */
void lc_members_close(lc_members_t *m, void (*cb)(void *data), void *data);

/* The current live members, sorted by id; valid until the next change or close. */
size_t lc_members_list(const lc_members_t *m, const lc_member_t **out);

/* Every registered id with its zone (addr ""), live or not, sorted by id;
 * valid until the next change or close. */
size_t lc_members_registry(const lc_members_t *m, const lc_member_t **out);

bool lc_members_is_up(const lc_members_t *m);

/* Sets this member's mark to mark_ms (lower: only moves an existing mark
 * down; without one nothing is written). cb(status, data) once: 0 when Redis
 * applied it (or had nothing to do), else the link's error (lc/redis.h: the
 * outcome of LC_REDIS_ELOST and LC_ETIMEOUT is unknown). Non-zero return
 * (not joined, closing, link down): cb is never called. */
typedef void (*lc_members_mark_cb)(int status, void *data);
int lc_members_set_mark(lc_members_t *m, int64_t mark_ms, bool lower, lc_members_mark_cb cb,
                        void *data) LC_MUST_CHECK;

/* Rendezvous (highest random weight) hashing: the index in live[] of the
 * member that owns key, or SIZE_MAX when n == 0. Depends only on the ids, so
 * every process with the same list agrees, and a join or leave moves only
 * the keys of that member. */
size_t lc_members_rendezvous(const lc_member_t *live, size_t n, const void *key, size_t key_len);

/* The marks a querier reads the bucket below, as one value (the shard API's
 * x-ember-bucket header, issue 27): "<generation>:<mark ms>:<id in hex>"
 * entries joined by ','. lc_marks_spec_add appends one (ids of at most
 * LC_MARKS_ID_MAX bytes; longer ones are left out: that id is then asked
 * for everything); lc_marks_spec_next reads the entry at *p and moves *p past
 * it: 0, 1 at the end, LC_EINPUT when malformed. */
#define LC_MARKS_ID_MAX 255
#define LC_MARKS_HEADER "x-ember-bucket"
typedef struct lc_marks_entry_s {
    uint64_t gen;
    int64_t mark_ms;
    char id[LC_MARKS_ID_MAX + 1];
} lc_marks_entry_t;
bool lc_marks_spec_add(char **spec, size_t *len, const lc_member_t *m);
int lc_marks_spec_next(const char **p, lc_marks_entry_t *out) LC_MUST_CHECK;

#endif
