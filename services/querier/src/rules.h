/*
 * rules.h — recording rules (settings.v1.RecordingRulesService, issue 29):
 * their validation and their durable storage.
 *
 * A rule is kept in the tenant's settings store (lc/settings_store.h: LMDB in
 * the all-in-one process, Redis for distributed queriers) as one setting named
 * QRY_RULE_SETTING_PREFIX + id whose value is the rule's RecordingRuleStore in
 * JSON. Sharing the settings store gives rules the same durability and the
 * same sharing between queriers as settings, without a second store; the
 * prefix is reserved, so SettingsService neither lists nor writes those names.
 *
 * Pyroscope's rules (pkg/settings/recording): an id is [a-zA-Z]+, generated
 * (10 letters) when an upsert has none; a new rule gets generation 1; an
 * upsert of an existing id must carry the stored generation (else
 * already_exists) and stores generation + 1; deleting a missing id is
 * not_found; a tenant has at most QRY_RULES_MAX_PER_TENANT rules.
 *
 * Ownership: everything returned lives in the caller's arena. Threading: any
 * thread; upsert and delete are serialised within the process, so two
 * writers of one generation cannot both win here (across distributed queriers
 * sharing Redis the last write wins; docs/internals/recording-rules.md).
 */
#ifndef EMBER_QRY_RULES_H
#define EMBER_QRY_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "lc/settings_store.h"
#include "settings/v1/recording_rules.pb-c.h"

/* Names of settings that hold rules; SettingsService leaves them alone. */
#define QRY_RULE_SETTING_PREFIX LC_SETTINGS_RULE_PREFIX
/* Pyroscope's default -recording-rules.max-rules-per-tenant. */
#define QRY_RULES_MAX_PER_TENANT 25

/* Caps on a rule's parts (every input-driven size has a limit); the stored
 * JSON must also fit a setting value (LC_SETTINGS_VALUE_MAX_BYTES). */
#define QRY_RULE_ID_MAX_BYTES 64
#define QRY_RULE_MAX_MATCHERS 16
#define QRY_RULE_MATCHER_MAX_BYTES 4096
#define QRY_RULE_MAX_LABELS 16 /* group_by, and external_labels */
#define QRY_RULE_LABEL_VALUE_MAX_BYTES 1024
#define QRY_RULE_FUNCTION_MAX_BYTES 1024

/* Whether a setting name belongs to the rules (and not to SettingsService). */
bool qry_rule_setting_name(const char *name);

/* Checks an upsert and normalises it in place (trims the metric name, fills
 * a missing id): Pyroscope's validation plus ember's caps. -1 with st
 * invalid_argument naming every fault found first. */
int qry_rule_validate(Settings__V1__UpsertRecordingRuleRequest *r, lc_arena_t *a,
                      lc_status_t *st) LC_MUST_CHECK;

/* s without leading and trailing white space (a copy in a when the end is
 * cut; NULL when a is full). */
char *qry_rule_trim(char *s, lc_arena_t *a);

/* The profile type a rule records: the value of its __profile_type__="..."
 * matcher, or "unknown" (as Pyroscope answers for a rule it cannot parse). */
const char *qry_rule_profile_type(const Settings__V1__RecordingRuleStore *rule, lc_arena_t *a);

/* The tenant's rules sorted by id. */
int qry_rules_list(lc_settings_store_t *s, const char *tenant, lc_arena_t *a,
                   Settings__V1__RecordingRuleStore ***out, size_t *n,
                   lc_status_t *st) LC_MUST_CHECK;
/* One rule; not_found when there is none with that id. */
int qry_rules_get(lc_settings_store_t *s, const char *tenant, const char *id, lc_arena_t *a,
                  Settings__V1__RecordingRuleStore **out, lc_status_t *st) LC_MUST_CHECK;
/* Stores rule (validated) with the generation rules above; rule->generation
 * is the observed one on entry and the stored one on return. */
int qry_rules_upsert(lc_settings_store_t *s, const char *tenant,
                     Settings__V1__RecordingRuleStore *rule, lc_arena_t *a,
                     lc_status_t *st) LC_MUST_CHECK;
int qry_rules_delete(lc_settings_store_t *s, const char *tenant, const char *id, lc_arena_t *a,
                     lc_status_t *st) LC_MUST_CHECK;

#endif
