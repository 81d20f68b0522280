/*
 * speedscope.c — speedscope JSON uploads (pyroscope-api.md §2.9), parsed with
 * jansson into stacks of frame indices for the converter.
 *
 * What Pyroscope does, and so what this does: `$schema` must be exactly the
 * speedscope schema URL. Profiles with the same name, type, unit and
 * startValue are merged (their events, samples and weights concatenated), and
 * the merged profiles are ordered by startValue. Units are none, nanoseconds,
 * microseconds, milliseconds, seconds or bytes; every time unit and `none`
 * count 100 ticks per unit (Pyroscope's "precision multiplier"), bytes count
 * 1. Sampled profiles: one stack per sample (frame indices into
 * shared.frames, root first) with its weight. Evented profiles: the time
 * between two events goes to the stack open during it, so each stack gets
 * its self time; frames still open at the end are dropped, a close must
 * match the innermost open frame, and events must not go back in time.
 *
 * Where Pyroscope loses data, this keeps it (docs/internals/ingest.md):
 * weights and time deltas are multiplied by the tick factor before the
 * fraction is dropped (Pyroscope drops it first, so 0.7 ms becomes 0), and
 * the time before an open event is counted in ticks too (Pyroscope forgets
 * the factor there). A frame index is truncated toward zero like Go's int(),
 * but one equal to the frame count is out of range (Pyroscope panics).
 *
 * Caps: the body size and the memory jansson would need (estimated by one
 * scan before parsing), the number of profiles, the stack depth, and the
 * frames handed to the converter in all (an evented profile re-emits its
 * whole open stack at every event).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "receive_int.h"

#define SS_SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define SS_BYTES_PER_VALUE 48   /* jansson: json_t + value + array slot + malloc overhead */
#define SS_BYTES_PER_OBJECT 640 /* jansson: an object's hashtable, measured */

typedef struct ss_unit_s {
    const char *name;
    uint32_t ticks;        /* per unit */
    uint64_t default_rate; /* ticks per second (0: not a time) */
} ss_unit_t;

/* Pyroscope's defaultSampleRate: none counts samples taken at 100 Hz. Its
 * nanoseconds rate (1e11) overflows a uint32 there and zeroes every value;
 * here it stays 1e11, and the converter divides exactly (convert.c). */
static const ss_unit_t ss_units[] = {
    {"none", 100, 100 * 100},
    {"nanoseconds", 100, 100 * 1000000000ULL},
    {"microseconds", 100, 100 * 1000000ULL},
    {"milliseconds", 100, 100 * 1000ULL},
    {"seconds", 100, 100},
    {"bytes", 1, 0},
};

static const ss_unit_t *ss_unit(const char *name)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(ss_units); i++) {
        if (strcmp(ss_units[i].name, name) == 0)
            return &ss_units[i];
    }
    return NULL;
}

uint64_t ing_speedscope_default_rate(const ing_ss_profile_t *p)
{
    const ss_unit_t *u = ss_unit(p->unit);
    return u ? u->default_rate : 0;
}

#define SS_INVALID(st, ...) lc_status_set((st), LC_CODE_INVALID_ARGUMENT, __VA_ARGS__)

/* ---------------------------------------------------------------- JSON fields */

/* Go's encoding/json into a Go struct: a missing field or null is the zero
 * value, a value of another type is an error. */
static int ss_string(json_t *obj, const char *key, const char **out, lc_status_t *st)
{
    json_t *v = json_object_get(obj, key);
    *out = "";
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return SS_INVALID(st, "speedscope: \"%s\" is not a string", key);
    *out = json_string_value(v);
    return 0;
}

static int ss_number_value(json_t *v, const char *what, double *out, lc_status_t *st)
{
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return SS_INVALID(st, "speedscope: %s is not a number", what);
    *out = json_number_value(v);
    return 0;
}

static int ss_number(json_t *obj, const char *key, double *out, lc_status_t *st)
{
    return ss_number_value(json_object_get(obj, key), key, out, st);
}

/* An array field: NULL when missing or null. */
static int ss_array(json_t *obj, const char *key, json_t **out, lc_status_t *st)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return SS_INVALID(st, "speedscope: \"%s\" is not an array", key);
    *out = v;
    return 0;
}

static bool ss_object_or_null(json_t *v)
{
    return !v || json_is_null(v) || json_is_object(v);
}

/* ---------------------------------------------------------------- document */

/* What jansson would allocate, from the counts of values (commas) and
 * objects outside strings, plus the text itself. */
static size_t ss_json_memory(const uint8_t *p, size_t len)
{
    size_t values = 1, objects = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = p[i];
        if (in_string) {
            i += c == '\\';
            in_string = c != '"';
        } else {
            in_string = c == '"';
            values += c == ',';
            objects += c == '{';
        }
    }
    return len + values * SS_BYTES_PER_VALUE + objects * SS_BYTES_PER_OBJECT;
}

static int ss_load(const uint8_t *body, size_t len, json_t **doc, lc_status_t *st)
{
    if (len > ING_SPEEDSCOPE_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: speedscope file of %zu bytes (limit %zu)", len,
                             ING_SPEEDSCOPE_MAX_BYTES);
    size_t mem = ss_json_memory(body, len);
    if (mem > ING_SPEEDSCOPE_MAX_JSON_MEMORY)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: speedscope file needs about %zu MiB to parse "
                             "(limit %zu MiB)",
                             mem >> 20, ING_SPEEDSCOPE_MAX_JSON_MEMORY >> 20);
    json_error_t err; /* numbers are doubles, as Go's float64 fields (no integer overflow) */
    *doc = json_loadb((const char *)body, len, JSON_DECODE_INT_AS_REAL, &err);
    if (!*doc)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "speedscope: invalid JSON at line %d column %d: %s", err.line,
                             err.column, err.text);
    if (!json_is_object(*doc))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "speedscope: not a JSON object");
    const char *schema;
    if (ss_string(*doc, "$schema", &schema, st) < 0)
        return -1;
    if (strcmp(schema, SS_SCHEMA) != 0)
        return SS_INVALID(st, "speedscope: unknown $schema \"%s\" (want %s)", schema, SS_SCHEMA);
    return 0;
}

static int ss_frames(json_t *doc, lc_arena_t *arena, ing_speedscope_t *out, lc_status_t *st)
{
    json_t *shared = json_object_get(doc, "shared"), *frames;
    if (!ss_object_or_null(shared))
        return SS_INVALID(st, "speedscope: \"shared\" is not an object");
    if (ss_array(shared, "frames", &frames, st) < 0)
        return -1;
    size_t n = json_array_size(frames);
    out->frame_names = lc_arena_calloc(arena, n ? n : 1, sizeof(*out->frame_names));
    out->frame_lens = lc_arena_calloc(arena, n ? n : 1, sizeof(*out->frame_lens));
    if (!out->frame_names || !out->frame_lens)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(frames, i);
        if (!ss_object_or_null(f))
            return SS_INVALID(st, "speedscope: a frame is not an object");
        if (ss_string(f, "name", &out->frame_names[i], st) < 0)
            return -1;
        out->frame_lens[i] = strlen(out->frame_names[i]);
    }
    out->n_frames = n;
    return 0;
}

/* ---------------------------------------------------------------- profiles */

/* A profile's merge key (Pyroscope's mergeProfiles) and JSON object. */
typedef struct ss_raw_s {
    const char *name, *type, *unit;
    double start_value;
    json_t *obj;
    size_t group;
} ss_raw_t;

static int ss_raw_profile(json_t *obj, ss_raw_t *r, lc_status_t *st)
{
    if (!ss_object_or_null(obj))
        return SS_INVALID(st, "speedscope: a profile is not an object");
    r->obj = obj;
    if (ss_string(obj, "name", &r->name, st) < 0 || ss_string(obj, "type", &r->type, st) < 0 ||
        ss_string(obj, "unit", &r->unit, st) < 0)
        return -1;
    return ss_number(obj, "startValue", &r->start_value, st);
}

static bool ss_same_key(const ss_raw_t *a, const ss_raw_t *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->type, b->type) && !strcmp(a->unit, b->unit) &&
           a->start_value == b->start_value;
}

/* Assigns every raw profile its group (the first profile with its key). */
static size_t ss_assign_groups(ss_raw_t *raw, size_t n, size_t *first_of_group)
{
    size_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        size_t g = 0;
        while (g < groups && !ss_same_key(&raw[first_of_group[g]], &raw[i]))
            g++;
        if (g == groups)
            first_of_group[groups++] = i;
        raw[i].group = g;
    }
    return groups;
}

static int ss_fill_group(ing_ss_profile_t *p, const ss_raw_t *raw, size_t n, size_t g,
                         lc_arena_t *arena, lc_status_t *st)
{
    size_t first = SIZE_MAX, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (raw[i].group == g) {
            first = first == SIZE_MAX ? i : first;
            count++;
        }
    }
    *p = (ing_ss_profile_t){.name = raw[first].name,
                            .unit = raw[first].unit,
                            .evented = !strcmp(raw[first].type, "evented"),
                            .start_value = raw[first].start_value,
                            .members = lc_arena_calloc(arena, count, sizeof(void *))};
    if (!p->members)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < n; i++) {
        if (raw[i].group == g)
            p->members[p->n_members++] = raw[i].obj;
    }
    if (strcmp(raw[first].type, "evented") != 0 && strcmp(raw[first].type, "sampled") != 0)
        return SS_INVALID(st, "speedscope: profile type \"%s\" is not supported (profile \"%s\")",
                          raw[first].type, p->name);
    if (!ss_unit(p->unit))
        return SS_INVALID(st, "speedscope: unknown unit \"%s\" (profile \"%s\")", p->unit, p->name);
    return 0;
}

/* Stable insertion sort by startValue (few profiles; equal keys keep file order). */
static void ss_sort_by_start(ing_ss_profile_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        ing_ss_profile_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1].start_value > x.start_value; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static int ss_profiles(json_t *doc, lc_arena_t *arena, ing_speedscope_t *out, lc_status_t *st)
{
    json_t *profiles;
    if (ss_array(doc, "profiles", &profiles, st) < 0)
        return -1;
    size_t n = json_array_size(profiles);
    if (n > ING_SPEEDSCOPE_MAX_PROFILES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: more than %d speedscope profiles",
                             ING_SPEEDSCOPE_MAX_PROFILES);
    ss_raw_t *raw = lc_arena_calloc(arena, n ? n : 1, sizeof(*raw));
    size_t *first = lc_arena_calloc(arena, n ? n : 1, sizeof(*first));
    out->profiles = lc_arena_calloc(arena, n ? n : 1, sizeof(*out->profiles));
    if (!raw || !first || !out->profiles)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
    for (size_t i = 0; i < n; i++) {
        if (ss_raw_profile(json_array_get(profiles, i), &raw[i], st) < 0)
            return -1;
    }
    out->n_profiles = ss_assign_groups(raw, n, first);
    for (size_t g = 0; g < out->n_profiles; g++) {
        if (ss_fill_group(&out->profiles[g], raw, n, g, arena, st) < 0)
            return -1;
    }
    ss_sort_by_start(out->profiles, out->n_profiles);
    return 0;
}

int ing_speedscope_parse(const uint8_t *body, size_t len, lc_arena_t *arena, ing_speedscope_t *out,
                         lc_status_t *st)
{
    *out = (ing_speedscope_t){0};
    json_t *doc = NULL;
    int rc = ss_load(body, len, &doc, st);
    out->doc = doc;
    if (rc == 0)
        rc = ss_frames(doc, arena, out, st);
    if (rc == 0)
        rc = ss_profiles(doc, arena, out, st);
    for (size_t i = 0; rc == 0 && i < out->n_profiles; i++)
        rc = ing_speedscope_stacks(out, i, NULL, NULL, st);
    if (rc != 0) {
        ing_speedscope_fini(out);
        return -1;
    }
    return 0;
}

void ing_speedscope_fini(ing_speedscope_t *ss)
{
    json_decref(ss->doc);
    *ss = (ing_speedscope_t){0};
}

/* ---------------------------------------------------------------- stacks */

typedef struct ss_walk_s {
    const ing_speedscope_t *ss;
    const ing_ss_profile_t *p;
    uint32_t ticks; /* per unit */
    uint32_t *stack;
    size_t depth, cap;
    size_t emitted_frames;
    ing_frames_cb cb;
    void *data;
    lc_status_t *st;
} ss_walk_t;

static int ss_walk_fail(ss_walk_t *w, const char *fmt, ...) LC_PRINTF(2, 3);
static int ss_walk_fail(ss_walk_t *w, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return SS_INVALID(w->st, "speedscope: profile \"%s\": %s", w->p->name, what);
}

/* Units -> ticks, truncated toward zero after the multiplication. */
static int ss_ticks(ss_walk_t *w, double units, int64_t *out)
{
    double t = units * w->ticks;
    *out = 0;
    if (!(t < 0x1p63))
        return ss_walk_fail(w, "value %g is too large", units);
    *out = (int64_t)t;
    return 0;
}

/* Hands the open stack (or a sample's) to the callback, if it has a value. */
static int ss_emit(ss_walk_t *w, double units)
{
    int64_t value;
    if (ss_ticks(w, units, &value) < 0)
        return -1;
    if (value == 0)
        return 0;
    w->emitted_frames += w->depth;
    if (w->emitted_frames > ING_SPEEDSCOPE_MAX_STACK_FRAMES)
        return SS_INVALID(w->st,
                          "profile too large: speedscope stacks of more than %zu frames in all",
                          ING_SPEEDSCOPE_MAX_STACK_FRAMES);
    return w->cb ? w->cb(w->stack, w->depth, value, w->data) : 0;
}

static int ss_push(ss_walk_t *w, uint32_t frame)
{
    if (w->depth >= ING_SPEEDSCOPE_MAX_DEPTH)
        return ss_walk_fail(w, "a stack deeper than %d frames", ING_SPEEDSCOPE_MAX_DEPTH);
    w->stack = lc_xgrow(w->stack, &w->cap, w->depth + 1, sizeof(*w->stack));
    w->stack[w->depth++] = frame;
    return 0;
}

/* Go's int(float64) truncates toward zero; the result must index a frame. */
static int ss_frame_index(ss_walk_t *w, json_t *v, uint32_t *out)
{
    double x;
    if (ss_number_value(v, "a frame index", &x, w->st) < 0)
        return -1;
    x = trunc(x);
    if (!(x >= 0 && x < (double)w->ss->n_frames))
        return ss_walk_fail(w, "frame index %g is out of range (%zu frames)", x, w->ss->n_frames);
    *out = (uint32_t)x;
    return 0;
}

/* ---- evented: O opens a frame, C closes the innermost one. */
static int ss_event(ss_walk_t *w, json_t *ev, double *last)
{
    double at;
    const char *type;
    uint32_t frame;
    if (!ss_object_or_null(ev))
        return ss_walk_fail(w, "an event is not an object");
    if (ss_number(ev, "at", &at, w->st) < 0)
        return -1;
    if (at < *last)
        return ss_walk_fail(w, "events out of order (%g after %g)", at, *last);
    if (ss_frame_index(w, json_object_get(ev, "frame"), &frame) < 0 ||
        ss_string(ev, "type", &type, w->st) < 0)
        return -1;
    double elapsed = at - *last;
    *last = at;
    if (!strcmp(type, "C")) {
        if (w->depth == 0)
            return ss_walk_fail(w, "frame %u closed at %g with no frame open", frame, at);
        if (w->stack[w->depth - 1] != frame)
            return ss_walk_fail(w, "frame %u closed at %g while frame %u is open", frame, at,
                                w->stack[w->depth - 1]);
        if (ss_emit(w, elapsed) < 0)
            return -1;
        w->depth--;
        return 0;
    }
    if (!strcmp(type, "O"))
        return (w->depth > 0 && ss_emit(w, elapsed) < 0) ? -1 : ss_push(w, frame);
    return ss_walk_fail(w, "unknown event type \"%.20s\" (O or C)", type);
}

static int ss_evented(ss_walk_t *w)
{
    double last = w->p->start_value;
    for (size_t m = 0; m < w->p->n_members; m++) {
        json_t *events;
        if (ss_array(w->p->members[m], "events", &events, w->st) < 0)
            return -1;
        for (size_t i = 0; i < json_array_size(events); i++) {
            if (ss_event(w, json_array_get(events, i), &last) < 0)
                return -1;
        }
    }
    return 0;
}

/* ---- sampled: samples[i] (frame indices, root first) weighs weights[i]. */
static int ss_sample(ss_walk_t *w, json_t *sample, json_t *weight)
{
    double units;
    if (ss_number_value(weight, "a weight", &units, w->st) < 0)
        return -1;
    if (units < 0)
        return ss_walk_fail(w, "negative weight %g", units);
    if (sample && !json_is_null(sample) && !json_is_array(sample))
        return ss_walk_fail(w, "a sample is not an array");
    w->depth = 0;
    for (size_t k = 0; k < json_array_size(sample); k++) {
        uint32_t frame;
        if (ss_frame_index(w, json_array_get(sample, k), &frame) < 0 || ss_push(w, frame) < 0)
            return -1;
    }
    return ss_emit(w, units);
}

static int ss_sampled(ss_walk_t *w)
{
    for (size_t m = 0; m < w->p->n_members; m++) {
        json_t *samples, *weights;
        if (ss_array(w->p->members[m], "samples", &samples, w->st) < 0 ||
            ss_array(w->p->members[m], "weights", &weights, w->st) < 0)
            return -1;
        size_t n = json_array_size(samples);
        if (n != json_array_size(weights))
            return ss_walk_fail(w, "%zu samples but %zu weights", n, json_array_size(weights));
        for (size_t i = 0; i < n; i++) {
            if (ss_sample(w, json_array_get(samples, i), json_array_get(weights, i)) < 0)
                return -1;
        }
    }
    return 0;
}

int ing_speedscope_stacks(const ing_speedscope_t *ss, size_t i, ing_frames_cb cb, void *data,
                          lc_status_t *st)
{
    const ing_ss_profile_t *p = &ss->profiles[i];
    ss_walk_t w = {
        .ss = ss, .p = p, .ticks = ss_unit(p->unit)->ticks, .cb = cb, .data = data, .st = st};
    int rc = p->evented ? ss_evented(&w) : ss_sampled(&w);
    lc_free(w.stack);
    return rc;
}
