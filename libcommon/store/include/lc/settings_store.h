/*
 * lc/settings_store.h — per-tenant settings (name -> value, modified-at ms),
 * the storage behind settings.v1.SettingsService (pyroscope-api.md §8.2).
 *
 * One interface, several backends: the all-in-one process keeps settings in a
 * small LMDB environment of its own (<data.dir>/settings/); distributed
 * queriers share theirs in Redis (settings_redis.c), so a setting written
 * through one is read through every other. The public calls check the caps
 * below before any backend sees the input, so every backend enforces the same
 * limits.
 *
 * Rules (Pyroscope's settings store): a write carrying an older modified-at
 * than the stored one loses (-EEXIST); listing is sorted by name, byte-wise;
 * deleting a missing name succeeds. Threading: every call may run on any
 * thread concurrently with the others; backends do their own locking.
 */
#ifndef LC_SETTINGS_STORE_H
#define LC_SETTINGS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/alloc.h"
#include "lc/err.h"

/* Caps on client input. The name cap also keeps an LMDB key (tenant, NUL,
 * name) under LMDB's 511-byte key limit with the longest tenant id (150). */
#define LC_SETTINGS_NAME_MAX_BYTES 256
#define LC_SETTINGS_VALUE_MAX_BYTES (64u << 10)
#define LC_SETTINGS_MAX_PER_TENANT 1024
#define LC_SETTINGS_TENANT_MAX_BYTES 150

/* Settings named with this prefix hold recording rules (issue 29): written
 * only by settings.v1.RecordingRulesService, read by the rule evaluator. */
#define LC_SETTINGS_RULE_PREFIX "recording_rule.v1/"

typedef struct lc_setting_s {
    const char *name;  /* 1..LC_SETTINGS_NAME_MAX_BYTES bytes */
    const char *value; /* 0..LC_SETTINGS_VALUE_MAX_BYTES bytes */
    int64_t modified_at_ms;
} lc_setting_t;

typedef struct lc_settings_store_s lc_settings_store_t;

/* A condition on what is stored, checked atomically with a write, so that a
 * read-check-write (recording rules' generations) holds across processes
 * sharing one backend. */
typedef struct lc_settings_expect_s {
    bool absent;       /* the name must not be stored, or else */
    const char *value; /* the stored value must be exactly this */
} lc_settings_expect_t;

/* ---- backends ---- */

typedef struct lc_settings_ops_s {
    int (*list)(lc_settings_store_t *s, const char *tenant, lc_arena_t *a, lc_setting_t **out,
                size_t *n);
    /* expect NULL: no condition */
    int (*set)(lc_settings_store_t *s, const char *tenant, const lc_setting_t *setting,
               const lc_settings_expect_t *expect);
    int (*del)(lc_settings_store_t *s, const char *tenant, const char *name, int64_t now_ms);
    void (*free)(lc_settings_store_t *s);
} lc_settings_ops_t;

struct lc_settings_store_s {
    const lc_settings_ops_t *ops; /* first member of every backend's struct */
};

/* Opens (creating it if needed) the LMDB backend in dir. LC_ESTORE on LMDB
 * failures (logged with LMDB's text), -errno when dir cannot be created. */
int lc_settings_store_open_lmdb(const char *dir, lc_settings_store_t **out) LC_MUST_CHECK;
/* The Redis backend at url (redis://[[user]:password@]host[:port][/db]): one
 * hash per tenant, "ember:settings:<tenant>". Connects on first use (so it
 * opens while Redis is down) with timeout_ms (0: 2000) on connect and on every
 * command; LC_EINPUT for a bad URL. Its calls return -ENOTCONN while Redis
 * cannot be reached and LC_ESTORE (logged) when Redis answers an error. */
int lc_settings_store_open_redis(const char *url, uint32_t timeout_ms,
                                 lc_settings_store_t **out) LC_MUST_CHECK;
void lc_settings_store_free(lc_settings_store_t *s);

/* ---- operations ---- */

/* The tenant's settings sorted by name; *out and the strings live in a.
 * LC_ETOOBIG when the arena is full. */
int lc_settings_store_list(lc_settings_store_t *s, const char *tenant, lc_arena_t *a,
                           lc_setting_t **out, size_t *n) LC_MUST_CHECK;
/* Stores setting unless the stored one has a newer modified_at_ms (-EEXIST).
 * LC_EINPUT for an empty name, LC_ETOOBIG past the name/value caps, LC_EFULL
 * when the tenant already has LC_SETTINGS_MAX_PER_TENANT other settings. */
int lc_settings_store_set(lc_settings_store_t *s, const char *tenant,
                          const lc_setting_t *setting) LC_MUST_CHECK;
/* lc_settings_store_set, done only when expect holds (-EEXIST else, as for a
 * newer write: the caller lost a race and may read again). */
int lc_settings_store_set_if(lc_settings_store_t *s, const char *tenant,
                             const lc_setting_t *setting,
                             const lc_settings_expect_t *expect) LC_MUST_CHECK;
/* Removes name; 0 when it was not there. -EEXIST when the stored setting was
 * modified after now_ms (a newer write wins over this delete). */
int lc_settings_store_delete(lc_settings_store_t *s, const char *tenant, const char *name,
                             int64_t now_ms) LC_MUST_CHECK;

#endif
