/*
 * test_settings_rpc.c — the settings.v1, version.v1 and capabilities.v1
 * handlers called directly (no HTTP) over a settings store in a temporary
 * dir: responses field by field, tenancy (one tenant, "a|b" refused, 401
 * without X-Scope-OrgID in multi-tenant mode), Pyroscope's status codes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capabilities/v1/featureflags.pb-c.h"
#include "lc_test.h"
#include "services_extra.h"
#include "settings/v1/setting.pb-c.h"
#include "version/v1/version.pb-c.h"

static char dir[] = "/tmp/ember-settings-rpc-XXXXXX";
static qry_extra_t *owner;        /* what qry_extra_new returned: owns the store */
static qry_extra_t single, multi; /* copies with multitenancy off / on */

/* ------------------------------------------------------------- harness */

typedef struct call_s {
    lc_http_req_t req;
    lc_http_header_t headers[1];
    lc_status_t st;
    ProtobufCMessage *out;
    int rc;
} call_t;

static void call_run(call_t *c, const char *org, lc_connect_unary_fn fn, const void *msg,
                     qry_extra_t *x)
{
    memset(c, 0, sizeof(*c));
    c->req.arena = lc_arena_new(16u << 20);
    c->req.headers = c->headers;
    if (org)
        c->headers[c->req.n_headers++] = (lc_http_header_t){"x-scope-orgid", org};
    c->rc = fn(&c->req, msg, &c->out, &c->st, x);
}

static void call_fini(call_t *c)
{
    lc_arena_free(c->req.arena);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Set(name, value, at) as `org` on x; returns the call (caller finis it). */
static void call_set(call_t *c, qry_extra_t *x, const char *org, const char *name,
                     const char *value, int64_t at)
{
    Settings__V1__Setting s = SETTINGS__V1__SETTING__INIT;
    s.name = (char *)name;
    s.value = (char *)value;
    s.modifiedat = at;
    Settings__V1__SetSettingsRequest r = SETTINGS__V1__SET_SETTINGS_REQUEST__INIT;
    r.setting = &s;
    call_run(c, org, qry_settings_set, &r, x);
}

static void call_delete(call_t *c, qry_extra_t *x, const char *org, const char *name)
{
    Settings__V1__DeleteSettingsRequest r = SETTINGS__V1__DELETE_SETTINGS_REQUEST__INIT;
    r.name = (char *)name;
    call_run(c, org, qry_settings_delete, &r, x);
}

/* Get as `org`, rendered "name=value@ms;" per setting. */
static void get_listing(qry_extra_t *x, const char *org, char *out, size_t cap)
{
    Settings__V1__GetSettingsRequest r = SETTINGS__V1__GET_SETTINGS_REQUEST__INIT;
    call_t c;
    call_run(&c, org, qry_settings_get, &r, x);
    LC_ASSERT_OK(c.rc);
    out[0] = '\0';
    if (c.rc == 0) {
        const Settings__V1__GetSettingsResponse *g = (void *)c.out;
        size_t used = 0;
        for (size_t i = 0; i < g->n_settings && used < cap; i++)
            used += (size_t)snprintf(out + used, cap - used, "%s=%s@%lld;", g->settings[i]->name,
                                     g->settings[i]->value, (long long)g->settings[i]->modifiedat);
    }
    call_fini(&c);
}

/* Builds the services the way ember does (qry_extra_new on a real, never
 * listening server: the routes register), then uses copies of the result
 * with multitenancy off and on over the same store. */
static void test_setup(void)
{
    LC_CHECK(mkdtemp(dir) != NULL);
    uv_loop_t loop;
    LC_ASSERT_OK(uv_loop_init(&loop));
    lc_httpd_opts_t ho = {.address = "127.0.0.1:0"};
    lc_httpd_t *srv = NULL;
    LC_ASSERT_OK(lc_httpd_new(&loop, &ho, &srv));
    qry_extra_opts_t o = {.multitenancy = false, .data_dir = dir};
    LC_ASSERT_OK(qry_extra_new(&loop, &o, srv, &owner));
    lc_httpd_close(srv, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&loop));
    if (!owner)
        exit(1);
    single = multi = *owner;
    multi.multitenancy = true;
}

/* ------------------------------------------------------------- settings */

static void test_set_returns_stored_setting(void)
{
    call_t c;
    call_set(&c, &single, NULL, "pluginSettings", "{\"collapsed\":true}", 1700000000123);
    LC_ASSERT_OK(c.rc);
    const Settings__V1__SetSettingsResponse *r = (void *)c.out;
    LC_CHECK(r && r->setting);
    if (r && r->setting) {
        LC_ASSERT_STR_EQ(r->setting->name, "pluginSettings");
        LC_ASSERT_STR_EQ(r->setting->value, "{\"collapsed\":true}");
        LC_ASSERT_EQ(r->setting->modifiedat, 1700000000123);
    }
    call_fini(&c);

    /* no modifiedAt: stamped with the time of the call (ms) */
    int64_t before = wall_ms();
    call_set(&c, &single, NULL, "now", "v", 0);
    int64_t after = wall_ms();
    LC_ASSERT_OK(c.rc);
    r = (void *)c.out;
    LC_CHECK(r->setting->modifiedat >= before && r->setting->modifiedat <= after);
    call_fini(&c);
    call_set(&c, &single, NULL, "negative", "v", -5); /* <= 0 counts as unset */
    LC_CHECK(((Settings__V1__SetSettingsResponse *)c.out)->setting->modifiedat >= before);
    call_fini(&c);
}

static void test_get_sorted(void)
{
    call_t c;
    call_set(&c, &single, NULL, "b", "2", 20);
    call_fini(&c);
    call_set(&c, &single, NULL, "a", "1", 10);
    call_fini(&c);
    call_delete(&c, &single, NULL, "now");
    call_fini(&c);
    call_delete(&c, &single, NULL, "negative");
    call_fini(&c);
    char got[256];
    get_listing(&single, NULL, got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "a=1@10;b=2@20;pluginSettings={\"collapsed\":true}@1700000000123;");
}

static void test_conflicts_and_deletes(void)
{
    call_t c;
    call_set(&c, &single, NULL, "a", "older", 9);
    LC_ASSERT_EQ(c.rc, -1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_ALREADY_EXISTS);
    LC_ASSERT_STR_EQ(c.st.msg, "failed to update a: newer update already written");
    call_fini(&c);

    call_delete(&c, &single, NULL, "does-not-exist");
    LC_ASSERT_OK(c.rc);
    LC_CHECK(c.out && c.out->descriptor == &settings__v1__delete_settings_response__descriptor);
    call_fini(&c);
    call_delete(&c, &single, NULL, "a");
    LC_ASSERT_OK(c.rc);
    call_fini(&c);
    call_delete(&c, &single, NULL, "");
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_ASSERT_STR_EQ(c.st.msg, "no setting name provided");
    call_fini(&c);

    /* a setting stamped in the future cannot be deleted "now" (newer wins) */
    call_set(&c, &single, NULL, "future", "v", wall_ms() + 3600 * 1000);
    call_fini(&c);
    call_delete(&c, &single, NULL, "future");
    LC_ASSERT_EQ(c.st.code, LC_CODE_ALREADY_EXISTS);
    call_fini(&c);

    char got[256];
    get_listing(&single, NULL, got, sizeof(got));
    LC_CHECK(strncmp(got, "b=2@20;future=v@", 16) == 0);
}

static void test_bad_input(void)
{
    call_t c;
    Settings__V1__SetSettingsRequest empty = SETTINGS__V1__SET_SETTINGS_REQUEST__INIT;
    call_run(&c, NULL, qry_settings_set, &empty, &single);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_ASSERT_STR_EQ(c.st.msg, "no setting values provided");
    call_fini(&c);

    call_set(&c, &single, NULL, "", "v", 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    call_set(&c, &single, NULL, "k", "bad \xc3\x28 utf8", 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    LC_ASSERT_STR_EQ(c.st.msg, "setting value is not valid UTF-8");
    call_fini(&c);
    call_set(&c, &single, NULL, "\xed\xa0\x80", "v", 1); /* a UTF-16 surrogate */
    LC_ASSERT_STR_EQ(c.st.msg, "setting name is not valid UTF-8");
    call_fini(&c);
    call_set(&c, &single, NULL, "caf\xc3\xa9", "\xf0\x9f\x94\xa5", 1); /* "café" = "🔥" is fine */
    LC_ASSERT_OK(c.rc);
    call_fini(&c);

    char name[LC_SETTINGS_NAME_MAX_BYTES + 2];
    memset(name, 'x', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    call_set(&c, &single, NULL, name, "v", 1);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
}

static void test_tenancy(void)
{
    call_t c;
    call_set(&c, &multi, "tenant-a", "theme", "dark", 5);
    LC_ASSERT_OK(c.rc);
    call_fini(&c);
    call_set(&c, &multi, "tenant-b", "theme", "light", 6);
    LC_ASSERT_OK(c.rc);
    call_fini(&c);
    char got[256];
    get_listing(&multi, "tenant-a", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "theme=dark@5;");
    get_listing(&multi, "tenant-b", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "theme=light@6;");

    /* settings belong to one tenant, also on reads */
    Settings__V1__GetSettingsRequest g = SETTINGS__V1__GET_SETTINGS_REQUEST__INIT;
    call_run(&c, "tenant-a|tenant-b", qry_settings_get, &g, &multi);
    LC_ASSERT_EQ(c.st.code, LC_CODE_INVALID_ARGUMENT);
    call_fini(&c);
    call_run(&c, NULL, qry_settings_get, &g, &multi);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);
    call_set(&c, &multi, NULL, "theme", "x", 7);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);
    call_delete(&c, &multi, NULL, "theme");
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);

    /* deleting in tenant-a leaves tenant-b's */
    call_delete(&c, &multi, "tenant-a", "theme");
    LC_ASSERT_OK(c.rc);
    call_fini(&c);
    get_listing(&multi, "tenant-a", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "");
    get_listing(&multi, "tenant-b", got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "theme=light@6;");
    /* multitenancy off: the header is ignored, everything is "anonymous" */
    get_listing(&single, "tenant-b", got, sizeof(got));
    LC_CHECK(strstr(got, "theme=") == NULL);
}

/* ---------------------------------------------------- version, flags */

static void test_version(void)
{
    Version__V1__VersionRequest r = VERSION__V1__VERSION_REQUEST__INIT;
    call_t c;
    call_run(&c, NULL, qry_version, &r, &multi); /* no tenant needed, as in Pyroscope */
    LC_ASSERT_OK(c.rc);
    LC_ASSERT_EQ(((Version__V1__VersionResponse *)c.out)->querierapi, 1);
    call_fini(&c);
}

static void test_feature_flags(void)
{
    Capabilities__V1__GetFeatureFlagsRequest r = CAPABILITIES__V1__GET_FEATURE_FLAGS_REQUEST__INIT;
    call_t c;
    call_run(&c, NULL, qry_feature_flags, &r, &multi);
    LC_ASSERT_EQ(c.st.code, LC_CODE_UNAUTHENTICATED);
    call_fini(&c);
    call_run(&c, "a|b", qry_feature_flags, &r, &multi);
    LC_ASSERT_OK(c.rc);
    const Capabilities__V1__GetFeatureFlagsResponse *f = (void *)c.out;
    static const char *const names[] = {"pyroscopeRuler", "pyroscopeRulerFunctions",
                                        "utf8LabelNames", "v2StorageLayer"};
    static const bool enabled[] = {false, false, true, true};
    LC_ASSERT_EQ(f->n_feature_flags, 4);
    for (size_t i = 0; i < f->n_feature_flags && i < 4; i++) {
        LC_ASSERT_STR_EQ(f->feature_flags[i]->name, names[i]);
        LC_ASSERT_EQ(f->feature_flags[i]->enabled, enabled[i]);
        LC_CHECK(f->feature_flags[i]->description[0] != '\0');
    }
    call_fini(&c);
}

static void test_teardown(void)
{
    qry_extra_free(owner);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(test_setup, test_set_returns_stored_setting, test_get_sorted,
             test_conflicts_and_deletes, test_bad_input, test_tenancy, test_version,
             test_feature_flags, test_teardown)
