/*
 * otlp.c — OTLP profiles in (opentelemetry.proto.collector.profiles.v1development,
 * the layout of OTel Collector v0.165.x and the OTel eBPF profiler):
 * ProfilesService/Export over gRPC, gRPC-Web or Connect, and OTLP/HTTP
 * `POST /v1development/profiles` (application/x-protobuf, application/protobuf
 * or application/json).
 *
 * The request is turned into pprof at the edge and then served exactly like
 * a Push (ing_push_serve_as): the same tenant, rate, label and pprof checks,
 * transport and store. Mapping, as Pyroscope's OTLP receiver does it
 * (pyroscope-api.md §10):
 * - one pprof per profile and per sample-level `service.name`; otherwise the
 *   resource's `service.name`, else `unknown_service[:<process.executable.name>]`;
 * - series labels: `__name__` (below), `service_name`, the resource's then the
 *   scope's string attributes (first one of a key wins), `__delta__="false"`,
 *   `__otel__="true"`;
 * - sample attributes (other than service.name) become pprof labels (strings,
 *   and ints/bools/doubles as text); a link becomes span_id/trace_id labels;
 * - sample type samples/count with period type cpu/nanoseconds becomes
 *   cpu/nanoseconds (values times the period), named process_cpu;
 *   off_cpu/nanoseconds is named off_cpu; another type is named after its
 *   period type, or its own type without one;
 * - a sample's values (one per timestamp) are summed into its pprof value; a
 *   sample with timestamps and no values counts them.
 * A profile that cannot be converted (an index out of range, no value) is
 * rejected alone and counted in partial_success; the others are stored.
 *
 * Threading: the thread pool (offloaded route); everything lives in the
 * request arena.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lc/hash.h"
#include "lc/pbjson.h"
#include "lc/pbstrings.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "receive_int.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    otlp_request_t;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary otlp_dict_t;
typedef Opentelemetry__Proto__Profiles__V1development__Profile otlp_profile_t;
typedef Opentelemetry__Proto__Profiles__V1development__Sample otlp_sample_t;
typedef Opentelemetry__Proto__Common__V1__KeyValue otlp_kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue otlp_any_t;

#define OTLP_SERVICE_KEY "service.name"
#define OTLP_EXE_KEY "process.executable.name"
#define OTLP_ANY_TEXT_MAX 64
#define OTLP_BUILD_ID_KEY "process.executable.build_id.gnu"
#define OTLP_MAX_LABELS 256  /* series labels from attributes */
#define OTLP_MAX_SERVICES 64 /* pprofs one profile splits into (each costs a pass) */

/* ---------------------------------------------------------------- strings */

/* The pprof string table: the dictionary's strings, index for index (so
 * OTLP *_strindex values are pprof indices as they are), then the strings
 * the conversion adds (attribute values, "cpu", ...), deduplicated. */
typedef struct otlp_strings_s {
    const otlp_dict_t *d;
    lc_arena_t *a;
    char **extra;
    size_t n_extra, cap_extra;
    uint32_t *slots; /* open addressing over extra: index + 1, 0 = empty */
    size_t n_slots;  /* a power of two, at least twice n_extra */
} otlp_strings_t;

static uint32_t *otlp_str_slot(const otlp_strings_t *s, const char *text)
{
    size_t mask = s->n_slots - 1, i = (size_t)lc_hash64(text, strlen(text), 0) & mask;
    while (s->slots[i] && strcmp(s->extra[s->slots[i] - 1], text) != 0)
        i = (i + 1) & mask;
    return &s->slots[i];
}

/* Doubles extra and the slot table (both in the arena). */
static int otlp_str_grow(otlp_strings_t *s)
{
    size_t cap = s->cap_extra ? s->cap_extra * 2 : 16;
    char **extra = lc_arena_calloc(s->a, cap, sizeof(*extra));
    uint32_t *slots = lc_arena_calloc(s->a, cap * 2, sizeof(*slots));
    if (!extra || !slots || cap > UINT32_MAX / 2)
        return -1;
    if (s->n_extra)
        memcpy(extra, s->extra, s->n_extra * sizeof(*extra));
    s->extra = extra;
    s->cap_extra = cap;
    s->slots = slots;
    s->n_slots = cap * 2;
    for (size_t i = 0; i < s->n_extra; i++)
        *otlp_str_slot(s, s->extra[i]) = (uint32_t)(i + 1);
    return 0;
}

/* The pprof index of text: one of the first dictionary strings (where the
 * common ones are), or an added string, deduplicated by hash. */
static int64_t otlp_str_add(otlp_strings_t *s, const char *text)
{
    for (size_t i = 0; i < s->d->n_string_table && i < 64; i++)
        if (strcmp(s->d->string_table[i], text) == 0)
            return (int64_t)i;
    if (s->n_slots) {
        uint32_t *slot = otlp_str_slot(s, text);
        if (*slot)
            return (int64_t)(s->d->n_string_table + *slot - 1);
    }
    if (s->n_extra == s->cap_extra && otlp_str_grow(s) != 0)
        return -1;
    s->extra[s->n_extra] = lc_arena_strdup(s->a, text);
    if (!s->extra[s->n_extra])
        return -1;
    *otlp_str_slot(s, text) = (uint32_t)(s->n_extra + 1);
    return (int64_t)(s->d->n_string_table + s->n_extra++);
}

static const char *otlp_str(const otlp_dict_t *d, int32_t i)
{
    return i >= 0 && (size_t)i < d->n_string_table ? d->string_table[i] : NULL;
}

/* ---------------------------------------------------------------- attributes */

/* An attribute value as label text; NULL for an empty or structured value.
 * Inside profiles a string may be a dictionary reference (string_value_strindex). */
static const char *otlp_any_text(const otlp_dict_t *d, const otlp_any_t *v, char *buf, size_t len)
{
    if (!v)
        return NULL;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return v->string_value && v->string_value[0] ? v->string_value : NULL;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX: {
        const char *s = otlp_str(d, v->string_value_strindex);
        return s && s[0] ? s : NULL;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        snprintf(buf, len, "%" PRId64, v->int_value);
        return buf;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        return v->bool_value ? "true" : "false";
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        snprintf(buf, len, "%g", v->double_value);
        return buf;
    default:
        return NULL;
    }
}

/* A resource/scope attribute's key: the text, or (pdata v1.71) a reference
 * into the dictionary's strings. */
static const char *otlp_kv_key(const otlp_dict_t *d, const otlp_kv_t *kv)
{
    if (kv->key && kv->key[0])
        return kv->key;
    const char *s = otlp_str(d, kv->key_strindex);
    return s && s[0] ? s : NULL;
}

/* A resource/scope attribute's string value (inline or referenced), or NULL. */
static const char *otlp_kv_string(const otlp_dict_t *d, const otlp_kv_t *kv)
{
    const otlp_any_t *v = kv->value;
    if (!v)
        return NULL;
    if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
        return v->string_value[0] ? v->string_value : NULL;
    if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX) {
        const char *s = otlp_str(d, v->string_value_strindex);
        return s && s[0] ? s : NULL;
    }
    return NULL;
}

static const char *otlp_string_attr(const otlp_dict_t *d, otlp_kv_t *const *kv, size_t n,
                                    const char *key)
{
    for (size_t i = 0; i < n; i++) {
        const char *k = otlp_kv_key(d, kv[i]);
        if (k && strcmp(k, key) == 0 && otlp_kv_string(d, kv[i]))
            return otlp_kv_string(d, kv[i]);
    }
    return NULL;
}

/* The sample's service.name attribute, "" without one, NULL if an index is bad. */
static const char *otlp_sample_service(const otlp_dict_t *d, const otlp_sample_t *s)
{
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t k = s->attribute_indices[i];
        if (k < 0 || (size_t)k >= d->n_attribute_table)
            return NULL;
        const char *key = otlp_str(d, d->attribute_table[k]->key_strindex);
        const otlp_any_t *v = d->attribute_table[k]->value;
        char buf[OTLP_ANY_TEXT_MAX];
        const char *text = otlp_any_text(d, v, buf, sizeof(buf));
        if (key && strcmp(key, OTLP_SERVICE_KEY) == 0 && text && text != buf)
            return text;
    }
    return "";
}

/* ---------------------------------------------------------------- pprof builder */

typedef enum { OTLP_VALUES_SUM = 0, OTLP_VALUES_TIMES_PERIOD } otlp_values_t;

/* One pprof being built from the samples of one profile and one service. */
typedef struct otlp_pprof_s {
    const otlp_dict_t *d;
    const otlp_profile_t *src;
    lc_arena_t *a;
    otlp_strings_t strings;
    Google__V1__Profile p;
    uint64_t *loc_ids, *fn_ids, *map_ids; /* dictionary index -> pprof id (0: not yet) */
    otlp_values_t values;
    const char *name; /* __name__ */
    const char *service;
} otlp_pprof_t;

static int otlp_fail(lc_status_t *st, const char *what, int64_t index)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s %" PRId64 " is out of range", what,
                         index);
}

static Google__V1__ValueType *otlp_value_type(otlp_pprof_t *b, const char *type, const char *unit)
{
    Google__V1__ValueType *vt = lc_arena_calloc(b->a, 1, sizeof(*vt));
    if (!vt)
        return NULL;
    *vt = (Google__V1__ValueType)GOOGLE__V1__VALUE_TYPE__INIT;
    vt->type = otlp_str_add(&b->strings, type);
    vt->unit = otlp_str_add(&b->strings, unit);
    return vt->type < 0 || vt->unit < 0 ? NULL : vt;
}

/* Sample type, period and the profile's name (see the file comment). */
static int otlp_pprof_types(otlp_pprof_t *b, lc_status_t *st)
{
    const otlp_profile_t *src = b->src;
    if (!src->sample_type)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "profile has no sample_type");
    const char *type = otlp_str(b->d, src->sample_type->type_strindex);
    const char *unit = otlp_str(b->d, src->sample_type->unit_strindex);
    const char *ptype = "", *punit = "";
    if (!type || !unit)
        return otlp_fail(st, "sample_type string index", src->sample_type->type_strindex);
    if (src->period_type && src->period != 0) {
        ptype = otlp_str(b->d, src->period_type->type_strindex);
        punit = otlp_str(b->d, src->period_type->unit_strindex);
        if (!ptype || !punit)
            return otlp_fail(st, "period_type string index", src->period_type->type_strindex);
    }
    if (!strcmp(type, "samples") && !strcmp(unit, "count") && !strcmp(ptype, "cpu") &&
        !strcmp(punit, "nanoseconds")) {
        type = "cpu", unit = "nanoseconds";
        b->values = OTLP_VALUES_TIMES_PERIOD;
        b->name = "process_cpu";
    } else if (!strcmp(type, "off_cpu") && !strcmp(unit, "nanoseconds") && !ptype[0]) {
        b->name = "off_cpu";
    } else {
        b->name = ptype[0] ? ptype : type;
    }
    if (!b->name[0])
        b->name = "process_cpu";
    Google__V1__ValueType **types = lc_arena_calloc(b->a, 1, sizeof(*types));
    if (!types || !(types[0] = otlp_value_type(b, type, unit)))
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    b->p.sample_type = types;
    b->p.n_sample_type = 1;
    b->p.default_sample_type = types[0]->type;
    if (src->period_type && src->period != 0) {
        b->p.period_type = otlp_value_type(b, ptype, punit);
        if (!b->p.period_type)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        b->p.period = src->period;
    }
    return 0;
}

static int otlp_pprof_init(otlp_pprof_t *b, const otlp_dict_t *d, const otlp_profile_t *src,
                           const char *service, lc_arena_t *a, lc_status_t *st)
{
    memset(b, 0, sizeof(*b));
    b->d = d, b->src = src, b->a = a, b->service = service;
    b->strings = (otlp_strings_t){.d = d, .a = a};
    b->p = (Google__V1__Profile)GOOGLE__V1__PROFILE__INIT;
    b->p.time_nanos = (int64_t)src->time_unix_nano;
    b->p.duration_nanos = (int64_t)src->duration_nano;
    b->loc_ids = lc_arena_calloc(a, d->n_location_table + 1, sizeof(uint64_t));
    b->fn_ids = lc_arena_calloc(a, d->n_function_table + 1, sizeof(uint64_t));
    b->map_ids = lc_arena_calloc(a, d->n_mapping_table + 1, sizeof(uint64_t));
    b->p.sample = lc_arena_calloc(a, src->n_samples + 1, sizeof(*b->p.sample));
    b->p.location = lc_arena_calloc(a, d->n_location_table + 1, sizeof(*b->p.location));
    b->p.function = lc_arena_calloc(a, d->n_function_table + 1, sizeof(*b->p.function));
    b->p.mapping = lc_arena_calloc(a, d->n_mapping_table + 1, sizeof(*b->p.mapping));
    if (!b->loc_ids || !b->fn_ids || !b->map_ids || !b->p.sample || !b->p.location ||
        !b->p.function || !b->p.mapping)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    return otlp_pprof_types(b, st);
}

/* The mapping's GNU build id attribute as a pprof string index, 0 without
 * one: kept so unsymbolized frames stay resolvable (issue 31). */
static int64_t
otlp_mapping_build_id(otlp_pprof_t *b,
                      const Opentelemetry__Proto__Profiles__V1development__Mapping *om)
{
    for (size_t j = 0; j < om->n_attribute_indices; j++) {
        int32_t k = om->attribute_indices[j];
        if (k < 0 || (size_t)k >= b->d->n_attribute_table)
            continue;
        const char *key = otlp_str(b->d, b->d->attribute_table[k]->key_strindex);
        char buf[32];
        const char *v = otlp_any_text(b->d, b->d->attribute_table[k]->value, buf, sizeof(buf));
        if (key && v && strcmp(key, OTLP_BUILD_ID_KEY) == 0)
            return otlp_str_add(&b->strings, v);
    }
    return 0;
}

static int otlp_mapping(otlp_pprof_t *b, int32_t i, uint64_t *id, lc_status_t *st)
{
    if (i < 0 || (size_t)i >= b->d->n_mapping_table)
        return otlp_fail(st, "mapping_index", i);
    if (!b->map_ids[i]) {
        const Opentelemetry__Proto__Profiles__V1development__Mapping *om = b->d->mapping_table[i];
        if (!otlp_str(b->d, om->filename_strindex))
            return otlp_fail(st, "mapping filename_strindex", om->filename_strindex);
        Google__V1__Mapping *m = lc_arena_calloc(b->a, 1, sizeof(*m));
        if (!m)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        *m = (Google__V1__Mapping)GOOGLE__V1__MAPPING__INIT;
        m->id = b->p.n_mapping + 1;
        m->memory_start = om->memory_start;
        m->memory_limit = om->memory_limit;
        m->file_offset = om->file_offset;
        m->filename = om->filename_strindex;
        m->build_id = otlp_mapping_build_id(b, om);
        if (m->build_id < 0)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        m->has_functions = true;
        b->p.mapping[b->p.n_mapping++] = m;
        b->map_ids[i] = m->id;
    }
    *id = b->map_ids[i];
    return 0;
}

static int otlp_function(otlp_pprof_t *b, int32_t i, uint64_t *id, lc_status_t *st)
{
    if (i < 0 || (size_t)i >= b->d->n_function_table)
        return otlp_fail(st, "function_index", i);
    if (!b->fn_ids[i]) {
        const Opentelemetry__Proto__Profiles__V1development__Function *of = b->d->function_table[i];
        if (!otlp_str(b->d, of->name_strindex) || !otlp_str(b->d, of->system_name_strindex) ||
            !otlp_str(b->d, of->filename_strindex))
            return otlp_fail(st, "function string index", of->name_strindex);
        Google__V1__Function *f = lc_arena_calloc(b->a, 1, sizeof(*f));
        if (!f)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        *f = (Google__V1__Function)GOOGLE__V1__FUNCTION__INIT;
        f->id = b->p.n_function + 1;
        f->name = of->name_strindex;
        f->system_name = of->system_name_strindex;
        f->filename = of->filename_strindex;
        f->start_line = of->start_line;
        b->p.function[b->p.n_function++] = f;
        b->fn_ids[i] = f->id;
    }
    *id = b->fn_ids[i];
    return 0;
}

static int otlp_location(otlp_pprof_t *b, int32_t i, uint64_t *id, lc_status_t *st)
{
    if (i < 0 || (size_t)i >= b->d->n_location_table)
        return otlp_fail(st, "location index", i);
    if (b->loc_ids[i]) {
        *id = b->loc_ids[i];
        return 0;
    }
    const Opentelemetry__Proto__Profiles__V1development__Location *ol = b->d->location_table[i];
    Google__V1__Location *l = lc_arena_calloc(b->a, 1, sizeof(*l));
    Google__V1__Line **lines = lc_arena_calloc(b->a, ol->n_lines + 1, sizeof(*lines));
    Google__V1__Line *line = lc_arena_calloc(b->a, ol->n_lines + 1, sizeof(*line));
    if (!l || !lines || !line)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    *l = (Google__V1__Location)GOOGLE__V1__LOCATION__INIT;
    if (otlp_mapping(b, ol->mapping_index, &l->mapping_id, st))
        return -1;
    l->address = ol->address;
    for (size_t k = 0; k < ol->n_lines; k++) {
        line[k] = (Google__V1__Line)GOOGLE__V1__LINE__INIT;
        if (otlp_function(b, ol->lines[k]->function_index, &line[k].function_id, st))
            return -1;
        line[k].line = ol->lines[k]->line;
        lines[k] = &line[k];
    }
    l->line = lines;
    l->n_line = ol->n_lines;
    l->id = b->p.n_location + 1;
    b->p.location[b->p.n_location++] = l;
    *id = b->loc_ids[i] = l->id;
    return 0;
}

static int otlp_label(otlp_pprof_t *b, Google__V1__Sample *gs, const char *key, const char *value)
{
    Google__V1__Label *l = lc_arena_calloc(b->a, 1, sizeof(*l));
    if (!l)
        return -1;
    *l = (Google__V1__Label)GOOGLE__V1__LABEL__INIT;
    l->key = otlp_str_add(&b->strings, key);
    l->str = otlp_str_add(&b->strings, value);
    if (l->key < 0 || l->str < 0)
        return -1;
    gs->label[gs->n_label++] = l;
    return 0;
}

static void otlp_hex(const ProtobufCBinaryData *id, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < id->len; i++) {
        out[2 * i] = digits[id->data[i] >> 4];
        out[2 * i + 1] = digits[id->data[i] & 15];
    }
    out[2 * id->len] = '\0';
}

static int otlp_sample_labels(otlp_pprof_t *b, const otlp_sample_t *os, Google__V1__Sample *gs,
                              lc_status_t *st)
{
    char buf[OTLP_ANY_TEXT_MAX], hex[2 * 16 + 1];
    gs->label = lc_arena_calloc(b->a, os->n_attribute_indices + 2, sizeof(*gs->label));
    if (!gs->label)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < os->n_attribute_indices; i++) {
        int32_t k = os->attribute_indices[i];
        if (k < 0 || (size_t)k >= b->d->n_attribute_table)
            return otlp_fail(st, "attribute index", k);
        const char *key = otlp_str(b->d, b->d->attribute_table[k]->key_strindex);
        if (!key)
            return otlp_fail(st, "attribute key_strindex", b->d->attribute_table[k]->key_strindex);
        const char *v = otlp_any_text(b->d, b->d->attribute_table[k]->value, buf, sizeof(buf));
        if (!v || strcmp(key, OTLP_SERVICE_KEY) == 0)
            continue;
        if (otlp_label(b, gs, key, v))
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    }
    if (os->link_index == 0)
        return 0;
    if (os->link_index < 0 || (size_t)os->link_index >= b->d->n_link_table)
        return otlp_fail(st, "link_index", os->link_index);
    const Opentelemetry__Proto__Profiles__V1development__Link *link =
        b->d->link_table[os->link_index];
    if (link->span_id.len == 8) {
        otlp_hex(&link->span_id, hex);
        if (otlp_label(b, gs, "span_id", hex))
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    }
    if (link->trace_id.len == 16) {
        otlp_hex(&link->trace_id, hex);
        if (otlp_label(b, gs, "trace_id", hex))
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    }
    return 0;
}

static int otlp_pprof_sample(otlp_pprof_t *b, const otlp_sample_t *os, lc_status_t *st)
{
    int64_t value = 0;
    bool overflow = false;
    for (size_t i = 0; i < os->n_values; i++)
        overflow |= __builtin_add_overflow(value, os->values[i], &value);
    if (os->n_values == 0)
        value = (int64_t)os->n_timestamps_unix_nano;
    if (os->n_values == 0 && os->n_timestamps_unix_nano == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "a sample has neither values nor timestamps");
    if (b->values == OTLP_VALUES_TIMES_PERIOD)
        overflow |= __builtin_mul_overflow(value, b->src->period, &value);
    if (overflow)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "a sample's value overflows int64");
    if (os->stack_index < 0 || (size_t)os->stack_index >= b->d->n_stack_table)
        return otlp_fail(st, "stack_index", os->stack_index);
    const Opentelemetry__Proto__Profiles__V1development__Stack *stack =
        b->d->stack_table[os->stack_index];
    Google__V1__Sample *gs = lc_arena_calloc(b->a, 1, sizeof(*gs));
    int64_t *v = lc_arena_calloc(b->a, 1, sizeof(*v));
    uint64_t *locs = lc_arena_calloc(b->a, stack->n_location_indices + 1, sizeof(*locs));
    if (!gs || !v || !locs)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    *gs = (Google__V1__Sample)GOOGLE__V1__SAMPLE__INIT;
    *v = value;
    gs->value = v;
    gs->n_value = 1;
    for (size_t i = 0; i < stack->n_location_indices; i++)
        if (otlp_location(b, stack->location_indices[i], &locs[i], st))
            return -1;
    gs->location_id = locs;
    gs->n_location_id = stack->n_location_indices;
    if (otlp_sample_labels(b, os, gs, st))
        return -1;
    b->p.sample[b->p.n_sample++] = gs;
    return 0;
}

/* The string table in place, then the pprof's bytes. */
static int otlp_pprof_encode(otlp_pprof_t *b, ProtobufCBinaryData *out, lc_status_t *st)
{
    size_t n = b->d->n_string_table + b->strings.n_extra;
    char **table = lc_arena_calloc(b->a, n + 1, sizeof(*table));
    if (!table)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    memcpy(table, b->d->string_table, b->d->n_string_table * sizeof(*table));
    if (b->strings.n_extra)
        memcpy(table + b->d->n_string_table, b->strings.extra, b->strings.n_extra * sizeof(*table));
    b->p.string_table = table;
    b->p.n_string_table = n;
    size_t len = protobuf_c_message_get_packed_size(&b->p.base);
    uint8_t *data = lc_arena_alloc(b->a, len ? len : 1);
    if (!data)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    out->len = protobuf_c_message_pack(&b->p.base, data);
    out->data = data;
    return 0;
}

/* ---------------------------------------------------------------- series */

typedef struct otlp_out_s {
    lc_arena_t *a;
    Push__V1__RawProfileSeries **series;
    size_t n, cap;
} otlp_out_t;

static Types__V1__LabelPair *otlp_pair(lc_arena_t *a, const char *name, const char *value)
{
    Types__V1__LabelPair *p = lc_arena_calloc(a, 1, sizeof(*p));
    if (p) {
        *p = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
        p->name = (char *)name;
        p->value = (char *)value;
    }
    return p;
}

static bool otlp_has_label(Types__V1__LabelPair **pairs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pairs[i]->name, name) == 0)
            return true;
    return false;
}

/* Resource then scope attributes with a string value; the first of a key wins. */
static void otlp_attr_labels(const otlp_dict_t *d, otlp_kv_t *const *kv, size_t n, lc_arena_t *a,
                             Types__V1__LabelPair **pairs, size_t *np)
{
    for (size_t i = 0; i < n && *np < OTLP_MAX_LABELS; i++) {
        const char *k = otlp_kv_key(d, kv[i]), *v = otlp_kv_string(d, kv[i]);
        if (!k || !v || otlp_has_label(pairs, *np, k))
            continue;
        Types__V1__LabelPair *p = otlp_pair(a, k, v);
        if (p)
            pairs[(*np)++] = p;
    }
}

typedef struct otlp_scope_s {
    const otlp_dict_t *d;
    const Opentelemetry__Proto__Resource__V1__Resource *resource;
    const Opentelemetry__Proto__Common__V1__InstrumentationScope *scope;
    const char *resource_service;
} otlp_scope_t;

static int otlp_add_series(otlp_out_t *o, const otlp_scope_t *sc, const otlp_pprof_t *b,
                           ProtobufCBinaryData raw, lc_status_t *st)
{
    lc_arena_t *a = o->a;
    Types__V1__LabelPair **pairs =
        lc_arena_calloc(a, OTLP_MAX_LABELS + 4, sizeof(*pairs)); /* + the 4 set here */
    Push__V1__RawProfileSeries *s = lc_arena_calloc(a, 1, sizeof(*s));
    Push__V1__RawSample *sample = lc_arena_calloc(a, 1, sizeof(*sample));
    Push__V1__RawSample **samples = lc_arena_calloc(a, 1, sizeof(*samples));
    if (!pairs || !s || !sample || !samples)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    size_t np = 0;
    pairs[np++] = otlp_pair(a, "__name__", b->name);
    pairs[np++] = otlp_pair(a, "service_name", b->service[0] ? b->service : sc->resource_service);
    pairs[np++] = otlp_pair(a, "__delta__", "false");
    pairs[np++] = otlp_pair(a, "__otel__", "true");
    for (size_t i = 0; i < np; i++)
        if (!pairs[i])
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    if (sc->resource)
        otlp_attr_labels(sc->d, sc->resource->attributes, sc->resource->n_attributes, a, pairs,
                         &np);
    if (sc->scope)
        otlp_attr_labels(sc->d, sc->scope->attributes, sc->scope->n_attributes, a, pairs, &np);
    *s = (Push__V1__RawProfileSeries)PUSH__V1__RAW_PROFILE_SERIES__INIT;
    *sample = (Push__V1__RawSample)PUSH__V1__RAW_SAMPLE__INIT;
    sample->raw_profile = raw;
    samples[0] = sample;
    s->labels = pairs;
    s->n_labels = np;
    s->samples = samples;
    s->n_samples = 1;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        Push__V1__RawProfileSeries **grown = lc_arena_calloc(a, cap, sizeof(*grown));
        if (!grown)
            return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
        if (o->n)
            memcpy(grown, o->series, o->n * sizeof(*grown));
        o->series = grown;
        o->cap = cap;
    }
    if (o->n >= ING_OTLP_MAX_PROFILES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "more than %d profiles (per service) in one request",
                             ING_OTLP_MAX_PROFILES);
    o->series[o->n++] = s;
    return 0;
}

/* One pprof per distinct sample service.name of the profile. */
static int otlp_convert_profile(otlp_out_t *o, const otlp_scope_t *sc, const otlp_dict_t *d,
                                const otlp_profile_t *src, lc_status_t *st)
{
    size_t n = src->n_samples;
    const char **services = lc_arena_calloc(o->a, n + 1, sizeof(*services));
    bool *done = lc_arena_calloc(o->a, n + 1, sizeof(*done));
    if (!services || !done)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < n; i++)
        if (!(services[i] = otlp_sample_service(d, src->samples[i])))
            return otlp_fail(st, "sample attribute index", (int64_t)i);
    size_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        if (++groups > OTLP_MAX_SERVICES)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "more than %d service.name values in one profile",
                                 OTLP_MAX_SERVICES);
        otlp_pprof_t b;
        ProtobufCBinaryData raw = {0, NULL};
        if (otlp_pprof_init(&b, d, src, services[i], o->a, st))
            return -1;
        for (size_t k = i; k < n; k++) {
            if (done[k] || strcmp(services[k], services[i]) != 0)
                continue;
            done[k] = true;
            if (otlp_pprof_sample(&b, src->samples[k], st))
                return -1;
        }
        if (otlp_pprof_encode(&b, &raw, st) || otlp_add_series(o, sc, &b, raw, st))
            return -1;
    }
    return 0;
}

static const char *otlp_resource_service(const otlp_dict_t *d,
                                         const Opentelemetry__Proto__Resource__V1__Resource *r,
                                         lc_arena_t *a)
{
    const char *svc =
        r ? otlp_string_attr(d, r->attributes, r->n_attributes, OTLP_SERVICE_KEY) : NULL;
    if (svc)
        return svc;
    const char *exe = r ? otlp_string_attr(d, r->attributes, r->n_attributes, OTLP_EXE_KEY) : NULL;
    if (!exe)
        return "unknown_service";
    size_t len = strlen("unknown_service:") + strlen(exe) + 1;
    char *s = lc_arena_alloc(a, len);
    if (s)
        snprintf(s, len, "unknown_service:%s", exe);
    return s ? s : "unknown_service";
}

int ing_otlp_to_push(const otlp_request_t *in, lc_arena_t *a, const Push__V1__PushRequest **out,
                     lc_status_t *st)
{
    const otlp_dict_t *d = in->dictionary;
    if (!d || d->n_string_table == 0 || d->string_table[0][0] != '\0')
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "missing profile dictionary (or its string_table[0] is not \"\")");
    otlp_out_t o = {.a = a};
    size_t n_profiles = 0, n_bad = 0;
    lc_status_t first = {0};
    for (size_t i = 0; i < in->n_resource_profiles; i++) {
        const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
            in->resource_profiles[i];
        otlp_scope_t sc = {.d = d,
                           .resource = rp->resource,
                           .resource_service = otlp_resource_service(d, rp->resource, a)};
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            sc.scope = rp->scope_profiles[j]->scope;
            for (size_t k = 0; k < rp->scope_profiles[j]->n_profiles; k++) {
                lc_status_t pst = {0};
                size_t before = o.n;
                n_profiles++;
                if (otlp_convert_profile(&o, &sc, d, rp->scope_profiles[j]->profiles[k], &pst)) {
                    o.n = before; /* the profile is rejected alone */
                    if (n_bad++ == 0)
                        first = pst;
                    if (pst.code == LC_CODE_RESOURCE_EXHAUSTED)
                        return lc_status_set(st, pst.code, "%s", pst.msg);
                }
            }
        }
    }
    if (n_profiles == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no profiles received");
    if (o.n == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%zu of %zu profiles rejected: %s",
                             n_bad, n_profiles, first.msg);
    ing_otlp_push_t *res = lc_arena_calloc(a, 1, sizeof(*res));
    if (!res)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    res->push = (Push__V1__PushRequest)PUSH__V1__PUSH_REQUEST__INIT;
    res->push.series = o.series;
    res->push.n_series = o.n;
    res->rejected = n_bad;
    res->why = first;
    *out = &res->push;
    return 0;
}

/* ---------------------------------------------------------------- routes */

static int otlp_decode_export(lc_http_req_t *req, const Push__V1__PushRequest **out,
                              lc_connect_codec_t *codec, lc_status_t *st)
{
    ProtobufCMessage *msg;
    if (lc_connect_decode(
            req,
            &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
            &msg, codec, st) != 0)
        return -1;
    return ing_otlp_to_push((const otlp_request_t *)msg, req->arena, out, st);
}

/* OTLP/HTTP: application/x-protobuf (or application/protobuf) and
 * application/json (protobuf JSON); no Connect headers. */
static int otlp_decode_http(lc_http_req_t *req, const Push__V1__PushRequest **out,
                            lc_connect_codec_t *codec, lc_status_t *st)
{
    const char *ct = lc_http_header(req, "content-type");
    size_t len = ct ? strcspn(ct, "; ") : 0;
    ProtobufCAllocator alloc;
    ProtobufCMessage *msg = NULL;
    const ProtobufCMessageDescriptor *desc =
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor;
    lc_arena_pb_allocator(req->arena, &alloc);
    if (ct && ((len == 22 && !strncasecmp(ct, "application/x-protobuf", len)) ||
               (len == 20 && !strncasecmp(ct, "application/protobuf", len)))) {
        *codec = LC_CONNECT_PROTO;
        msg = protobuf_c_message_unpack(desc, &alloc, req->body_len,
                                        req->body_len ? req->body : (const uint8_t *)"");
        if (!msg)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "unmarshal into %s: invalid protobuf data", desc->name);
        if (lc_pb_strings_check(desc, req->body, req->body_len, st) != 0)
            return -1;
    } else if (ct && len == 16 && !strncasecmp(ct, "application/json", len)) {
        *codec = LC_CONNECT_JSON;
        if (lc_pbjson_decode(desc, req->body, req->body_len, &alloc, &msg, st) != 0)
            return -1;
    } else {
        return lc_status_set_http(st, 415, LC_CODE_INVALID_ARGUMENT,
                                  "OTLP/HTTP takes application/x-protobuf, application/protobuf "
                                  "or application/json, not \"%.64s\"",
                                  ct ? ct : "");
    }
    return ing_otlp_to_push((const otlp_request_t *)msg, req->arena, out, st);
}

lc_http_result_t ing_otlp_export_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve_as(req, data, otlp_decode_export, ING_ROUTE_OTLP);
}

lc_http_result_t ing_otlp_http_work(lc_http_req_t *req, void *data)
{
    return ing_push_serve_as(req, data, otlp_decode_http, ING_ROUTE_OTLP_HTTP);
}
