/*
 * stconfig.c — sample_type_config: per pprof sample type, how an SDK wants it
 * shown (pyroscope-api.md §2.5). Only display-name changes what ember does (it
 * picks `__name__`); units, aggregation and cumulative travel along in the
 * IngestProfile for completeness.
 *
 * The JSON is decoded like Go's encoding/json into map[string]*Config: field
 * names match case-insensitively, unknown fields are ignored, a null entry is
 * an entry without settings, a top-level null means "no config", and a field
 * of the wrong JSON type is an error.
 */
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "receive_int.h"

#define ST_ENTRY(type, display, units, aggregation, cumulative)                                    \
    {                                                                                              \
        PROTOBUF_C_MESSAGE_INIT(&ember__v1__sample_type_config__descriptor), (char *)(type),       \
            (char *)(display), (char *)(units), (char *)(aggregation), (cumulative)                \
    }

/* Pyroscope's built-in table (tree.DefaultSampleTypeMapping). */
static Ember__V1__SampleTypeConfig st_builtin_entries[] = {
    ST_ENTRY("samples", "cpu", "samples", "", 0),
    ST_ENTRY("inuse_objects", "", "objects", "average", 0),
    ST_ENTRY("alloc_objects", "", "objects", "", 1),
    ST_ENTRY("inuse_space", "", "bytes", "average", 0),
    ST_ENTRY("alloc_space", "", "bytes", "", 1),
    ST_ENTRY("goroutine", "goroutines", "goroutines", "average", 0),
    ST_ENTRY("contentions", "mutex_count", "lock_samples", "", 1),
    ST_ENTRY("delay", "mutex_duration", "lock_nanoseconds", "", 1),
};

static Ember__V1__SampleTypeConfig *st_builtin_ptrs[] = {
    &st_builtin_entries[0], &st_builtin_entries[1], &st_builtin_entries[2], &st_builtin_entries[3],
    &st_builtin_entries[4], &st_builtin_entries[5], &st_builtin_entries[6], &st_builtin_entries[7],
};
_Static_assert(LC_ARRAY_LEN(st_builtin_ptrs) == LC_ARRAY_LEN(st_builtin_entries),
               "one pointer per built-in entry");
static const ing_stconfig_t st_builtin = {st_builtin_ptrs, LC_ARRAY_LEN(st_builtin_ptrs)};

const ing_stconfig_t *ing_stconfig_builtin(void)
{
    return &st_builtin;
}

const Ember__V1__SampleTypeConfig *ing_stconfig_find(const ing_stconfig_t *c, const char *type)
{
    for (size_t i = 0; c && i < c->n; i++) {
        if (strcmp(c->v[i]->sample_type, type) == 0)
            return c->v[i];
    }
    return NULL;
}

static int st_error(lc_status_t *st, const char *key, const char *what)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "sample_type_config: %s%s%s", key,
                         *key ? ": " : "", what);
}

static int st_string(json_t *v, const char *key, lc_arena_t *arena, char **out, lc_status_t *st)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return st_error(st, key, "expected a string");
    *out = lc_arena_strndup(arena, json_string_value(v), json_string_length(v));
    return *out ? 0 : st_error(st, key, "out of request memory");
}

static int st_bool(json_t *v, const char *key, protobuf_c_boolean *out, lc_status_t *st)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return st_error(st, key, "expected a boolean");
    *out = json_is_true(v);
    return 0;
}

static int st_field(Ember__V1__SampleTypeConfig *c, const char *field, json_t *v, lc_arena_t *arena,
                    lc_status_t *st)
{
    if (strcasecmp(field, "display-name") == 0)
        return st_string(v, c->sample_type, arena, &c->display_name, st);
    if (strcasecmp(field, "units") == 0)
        return st_string(v, c->sample_type, arena, &c->units, st);
    if (strcasecmp(field, "aggregation") == 0)
        return st_string(v, c->sample_type, arena, &c->aggregation, st);
    if (strcasecmp(field, "cumulative") == 0)
        return st_bool(v, c->sample_type, &c->cumulative, st);
    if (strcasecmp(field, "sampled") == 0) {
        protobuf_c_boolean ignored;
        return st_bool(v, c->sample_type, &ignored, st);
    }
    return 0;
}

static int st_entry(const char *type, json_t *obj, lc_arena_t *arena,
                    Ember__V1__SampleTypeConfig **out, lc_status_t *st)
{
    Ember__V1__SampleTypeConfig *c = lc_arena_alloc(arena, sizeof(*c));
    if (!c)
        return st_error(st, "", "out of request memory");
    ember__v1__sample_type_config__init(c);
    c->sample_type = lc_arena_strdup(arena, type);
    if (!c->sample_type)
        return st_error(st, "", "out of request memory");
    *out = c;
    if (json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return st_error(st, type, "expected an object");
    const char *field;
    json_t *v;
    json_object_foreach(obj, field, v)
    {
        if (st_field(c, field, v, arena, st) < 0)
            return -1;
    }
    return 0;
}

static int st_entries(json_t *root, lc_arena_t *arena, ing_stconfig_t *out, lc_status_t *st)
{
    if (!json_is_object(root))
        return st_error(st, "", "expected a JSON object");
    size_t n = json_object_size(root);
    if (n > ING_STCONFIG_MAX_ENTRIES)
        return st_error(st, "", "too many entries");
    out->v = lc_arena_calloc(arena, n ? n : 1, sizeof(*out->v));
    if (!out->v)
        return st_error(st, "", "out of request memory");
    const char *type;
    json_t *v;
    json_object_foreach(root, type, v)
    {
        if (st_entry(type, v, arena, &out->v[out->n], st) < 0)
            return -1;
        out->n++;
    }
    return 0;
}

int ing_stconfig_parse(const uint8_t *json, size_t len, lc_arena_t *arena, ing_stconfig_t *out,
                       bool *is_null, lc_status_t *st)
{
    *out = (ing_stconfig_t){0};
    *is_null = false;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)json, len, JSON_DECODE_ANY, &jerr);
    if (!root)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "sample_type_config: %s", jerr.text);
    int rc = 0;
    if (json_is_null(root))
        *is_null = true;
    else
        rc = st_entries(root, arena, out, st);
    json_decref(root);
    return rc;
}
