/*
 * rules_store.c — recording rules kept as settings (rules.h): one setting
 * per rule, named QRY_RULE_SETTING_PREFIX + id, holding the rule's JSON.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "lc/clock.h"
#include "lc/log.h"
#include "lc/pbjson.h"
#include "rules.h"

/* Serialises read-check-write of upsert and delete in this process: the
 * generation check and the tenant cap need the list they checked to be the
 * one they change. Across processes sharing one store (distributed queriers
 * on Redis) the write itself is conditional on the stored value being the
 * one checked (lc_settings_store_set_if), so of two writers of one
 * generation exactly one wins there too. */
static pthread_mutex_t rules_write_lock = PTHREAD_MUTEX_INITIALIZER;

bool qry_rule_setting_name(const char *name)
{
    return strncmp(name, QRY_RULE_SETTING_PREFIX, sizeof(QRY_RULE_SETTING_PREFIX) - 1) == 0;
}

/* Maps a settings-store error to a client status. */
static int rules_store_fail(lc_status_t *st, int rc)
{
    switch (rc) {
    case LC_ETOOBIG:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "the rule is too large to store (at most %u bytes as JSON)",
                             LC_SETTINGS_VALUE_MAX_BYTES);
    case LC_EFULL:
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the tenant's settings store is full (%d settings and rules)",
                             LC_SETTINGS_MAX_PER_TENANT);
    case -EEXIST:
        return lc_status_set(st, LC_CODE_ALREADY_EXISTS, "conflicting update, please try again");
    case -ENOTCONN: /* a shared backend (Redis) is down: retry later */
        return lc_status_set(st, LC_CODE_UNAVAILABLE, "the settings store cannot be reached");
    default:
        return lc_status_set(st, LC_CODE_INTERNAL, "settings store: %s", lc_strerror(rc));
    }
}

/* Decodes one stored rule; a value that is not a rule (written by an older
 * or broken ember) is logged and skipped rather than failing every list. */
static Settings__V1__RecordingRuleStore *decode_rule(const lc_setting_t *s, lc_arena_t *a)
{
    ProtobufCAllocator alloc;
    ProtobufCMessage *m = NULL;
    lc_status_t st = {0};
    lc_arena_pb_allocator(a, &alloc);
    if (lc_pbjson_decode(&settings__v1__recording_rule_store__descriptor, (const uint8_t *)s->value,
                         strlen(s->value), &alloc, &m, &st)) {
        LC_LOG_WARN("skipping a stored recording rule that does not decode name=\"%s\" err=\"%s\"",
                    s->name, st.msg);
        return NULL;
    }
    return (Settings__V1__RecordingRuleStore *)m;
}

/* The tenant's rules sorted by id and, when values is not NULL, each one's
 * stored JSON (what a conditional write expects to find). */
static int rules_read(lc_settings_store_t *s, const char *tenant, lc_arena_t *a,
                      Settings__V1__RecordingRuleStore ***out, const char ***values, size_t *n,
                      lc_status_t *st)
{
    lc_setting_t *all;
    size_t n_all;
    int rc = lc_settings_store_list(s, tenant, a, &all, &n_all);
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the answer exceeds the request memory");
    if (rc)
        return rules_store_fail(st, rc);
    Settings__V1__RecordingRuleStore **v = lc_arena_calloc(a, n_all ? n_all : 1, sizeof(*v));
    const char **raw = lc_arena_calloc(a, n_all ? n_all : 1, sizeof(*raw));
    if (!v || !raw)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the answer exceeds the request memory");
    size_t k = 0;
    for (size_t i = 0; i < n_all; i++) {
        if (!qry_rule_setting_name(all[i].name))
            continue;
        v[k] = decode_rule(&all[i], a);
        raw[k] = all[i].value;
        k += v[k] != NULL;
    }
    *out = v; /* settings come sorted by name, so rules come sorted by id */
    if (values)
        *values = raw;
    *n = k;
    return 0;
}

int qry_rules_list(lc_settings_store_t *s, const char *tenant, lc_arena_t *a,
                   Settings__V1__RecordingRuleStore ***out, size_t *n, lc_status_t *st)
{
    return rules_read(s, tenant, a, out, NULL, n, st);
}

/* The index of the rule with id among list[0..n), or n. */
static size_t find_index(Settings__V1__RecordingRuleStore **list, size_t n, const char *id)
{
    size_t i = 0;
    while (i < n && strcmp(list[i]->id, id) != 0)
        i++;
    return i;
}

/* The rule with id among list[0..n), or NULL. */
static Settings__V1__RecordingRuleStore *find_rule(Settings__V1__RecordingRuleStore **list,
                                                   size_t n, const char *id)
{
    size_t i = find_index(list, n, id);
    return i < n ? list[i] : NULL;
}

static int not_found(lc_status_t *st, const char *id)
{
    return lc_status_set(st, LC_CODE_NOT_FOUND, "no rule with id='%.64s' found", id);
}

int qry_rules_get(lc_settings_store_t *s, const char *tenant, const char *id, lc_arena_t *a,
                  Settings__V1__RecordingRuleStore **out, lc_status_t *st)
{
    Settings__V1__RecordingRuleStore **list;
    size_t n;
    if (qry_rules_list(s, tenant, a, &list, &n, st))
        return -1;
    *out = find_rule(list, n, id);
    return *out ? 0 : not_found(st, id);
}

static char *setting_name(lc_arena_t *a, const char *id)
{
    return lc_arena_sprintf(a, "%s%s", QRY_RULE_SETTING_PREFIX, id);
}

/* Decides the generation to store, or fails on a stale one or a full tenant. */
static int next_generation(Settings__V1__RecordingRuleStore **list, size_t n,
                           Settings__V1__RecordingRuleStore *rule, lc_status_t *st)
{
    const Settings__V1__RecordingRuleStore *stored = find_rule(list, n, rule->id);
    if (!stored) {
        if (n >= QRY_RULES_MAX_PER_TENANT)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                                 "recording rules limit (%d) exceeded for this tenant",
                                 QRY_RULES_MAX_PER_TENANT);
        rule->generation = 1; /* by definition, whatever the client observed */
        return 0;
    }
    if (rule->generation != stored->generation)
        return lc_status_set(st, LC_CODE_ALREADY_EXISTS, "conflicting update, please try again");
    rule->generation = stored->generation + 1;
    return 0;
}

/* Stores rule if what is stored under its id is still expect. */
static int store_rule(lc_settings_store_t *s, const char *tenant,
                      const Settings__V1__RecordingRuleStore *rule,
                      const lc_settings_expect_t *expect, lc_arena_t *a, lc_status_t *st)
{
    lc_buf_t json;
    lc_buf_init(&json, LC_SETTINGS_VALUE_MAX_BYTES + 1);
    int rc = lc_pbjson_encode(&rule->base, &json);
    if (rc == 0)
        rc = lc_buf_putc(&json, '\0');
    if (rc) {
        lc_buf_fini(&json);
        return rules_store_fail(st, rc);
    }
    lc_setting_t setting = {.name = setting_name(a, rule->id),
                            .value = (const char *)json.data,
                            .modified_at_ms = lc_realtime_ns() / 1000000};
    rc = setting.name ? lc_settings_store_set_if(s, tenant, &setting, expect) : LC_ETOOBIG;
    lc_buf_fini(&json);
    return rc ? rules_store_fail(st, rc) : 0;
}

int qry_rules_upsert(lc_settings_store_t *s, const char *tenant,
                     Settings__V1__RecordingRuleStore *rule, lc_arena_t *a, lc_status_t *st)
{
    Settings__V1__RecordingRuleStore **list;
    const char **values;
    size_t n;
    pthread_mutex_lock(&rules_write_lock);
    int rc = rules_read(s, tenant, a, &list, &values, &n, st);
    size_t at = rc == 0 ? find_index(list, n, rule->id) : 0;
    lc_settings_expect_t expect = {.absent = at == n, .value = at < n ? values[at] : NULL};
    if (rc == 0)
        rc = next_generation(list, n, rule, st);
    if (rc == 0)
        rc = store_rule(s, tenant, rule, &expect, a, st);
    pthread_mutex_unlock(&rules_write_lock);
    return rc;
}

int qry_rules_delete(lc_settings_store_t *s, const char *tenant, const char *id, lc_arena_t *a,
                     lc_status_t *st)
{
    Settings__V1__RecordingRuleStore *rule;
    pthread_mutex_lock(&rules_write_lock);
    int rc = qry_rules_get(s, tenant, id, a, &rule, st);
    if (rc == 0) { /* a rule deleted meanwhile elsewhere is deleted all the same */
        const char *name = setting_name(a, id);
        rc = name ? lc_settings_store_delete(s, tenant, name, lc_realtime_ns() / 1000000)
                  : LC_ETOOBIG;
        if (rc)
            rc = rules_store_fail(st, rc);
    }
    pthread_mutex_unlock(&rules_write_lock);
    return rc;
}
