/*
 * legacy_json.c — the JSON of /pyroscope/render and render-diff: the
 * flamebearer document Pyroscope's ExportToFlamebearer builds and Go's
 * encoding/json writes (pyroscope-api.md §7.1, §7.2), plus the timeline
 * arithmetic (CalcPointInterval and timeline.New).
 *
 * Byte-for-byte with Go where a client could notice: keys in struct order,
 * omitempty on leftTicks/rightTicks, null for absent timeline/groups/heatmap
 * and for nil watermarks, group keys sorted (Go sorts map keys), strings
 * escaped as encoding/json does (<, >, & and U+2028/9 as \uXXXX, invalid
 * UTF-8 as U+FFFD), and the trailing newline of json.Encoder.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lc/utf8.h"
#include "querier_int.h"

#define TL_RESOLUTION 1500         /* points per range (Grafana's default) */
#define TL_MIN_STEP_MS 15000       /* Pyroscope's minimum step */
#define TL_MAX_SAMPLES (16u << 20) /* cap on timeline length (a 1 y range at 15 s is ~2.1 M) */

/* ------------------------------------------------------------- timeline */

/* Grafana's interval ladder: an interval up to `upto` ms becomes `step` ms. */
static const struct {
    int64_t upto, step;
} ladder[] = {
    {10, 1},
    {15, 10},
    {35, 20},
    {75, 50},
    {150, 100},
    {350, 200},
    {750, 500},
    {1500, 1000},
    {3500, 2000},
    {7500, 5000},
    {12500, 10000},
    {17500, 15000},
    {25000, 20000},
    {45000, 30000},
    {90000, 60000},
    {210000, 120000},
    {450000, 300000},
    {750000, 600000},
    {1050000, 900000},
    {1500000, 1200000},
    {2700000, 1800000},
    {5400000, 3600000},
    {9000000, 7200000},
    {16200000, 10800000},
    {32400000, 21600000},
    {86400000, 43200000},
    {172800000, 86400000},
    {604800000, 86400000},
    {1814400000, 604800000},
};

double qry_calc_point_interval(int64_t from_ms, int64_t until_ms)
{
    /* (until - from) / 1500 in ns, truncated as Go's integer division. */
    __int128 interval_ns = ((__int128)until_ms - from_ms) * 1000000 / TL_RESOLUTION;
    if (interval_ns < (__int128)TL_MIN_STEP_MS * 1000000)
        return TL_MIN_STEP_MS / 1000.0;
    for (size_t i = 0; i < LC_ARRAY_LEN(ladder); i++) {
        if (interval_ns <= (__int128)ladder[i].upto * 1000000)
            return (double)ladder[i].step / 1000.0;
    }
    /* The last rungs: below 6 weeks 30 d, else 1 y. */
    return interval_ns < (__int128)3628800000LL * 1000000 ? 2592000.0 : 31536000.0;
}

/* Buckets between two times: (end s - start s) / step, as Go's sizeToBackfill. */
static int64_t backfill(int64_t start_ms, int64_t end_ms, int64_t step_sec)
{
    return (end_ms / 1000 - start_ms / 1000) / step_sec;
}

static uint64_t json_sample_value(double v)
{
    if (!(v > 0)) /* negative and NaN: nothing sensible to show */
        return 0;
    return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
}

static int tl_push(qry_timeline_t *t, size_t cap, uint64_t v)
{
    if (t->n >= cap)
        return LC_ETOOBIG;
    t->samples[t->n++] = v;
    return 0;
}

static int tl_zeros(qry_timeline_t *t, size_t cap, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (tl_push(t, cap, 0))
            return LC_ETOOBIG;
    }
    return 0;
}

/* The points of s (ascending) inside [start_ms, end_ms), as a range of indices. */
static void tl_window(const Types__V1__Series *s, int64_t start_ms, int64_t end_ms, size_t *first,
                      size_t *last)
{
    size_t n = s ? s->n_points : 0, i = 0, j = n;
    while (i < n && s->points[i]->timestamp < start_ms)
        i++;
    while (j > i && s->points[j - 1]->timestamp >= end_ms)
        j--;
    *first = i;
    *last = j;
}

int qry_timeline_build(const Types__V1__Series *s, int64_t start_ms, int64_t end_ms,
                       int64_t step_sec, lc_arena_t *a, qry_timeline_t *out)
{
    int64_t step_ms = step_sec * 1000;
    start_ms = start_ms / step_ms * step_ms; /* snapped to the bucket, as Go truncates */
    end_ms = end_ms / step_ms * step_ms;
    *out = (qry_timeline_t){.start_sec = start_ms / 1000, .step_sec = step_sec};
    int64_t n = start_ms < end_ms ? backfill(start_ms, end_ms, step_sec) : 0;
    if (n < 0)
        n = 0;
    size_t first, last;
    tl_window(s, start_ms, end_ms, &first, &last);
    size_t cap = (size_t)n + (last - first) + 1;
    if (cap > TL_MAX_SAMPLES)
        return LC_ETOOBIG;
    out->samples = lc_arena_calloc(a, cap, sizeof(uint64_t));
    if (!out->samples)
        return LC_ETOOBIG;
    if (start_ms >= end_ms)
        return 0;
    int rc = 0;
    if (first < last)
        rc = tl_zeros(out, cap, backfill(start_ms, s->points[first]->timestamp, step_sec));
    for (size_t i = first; rc == 0 && i < last; i++) {
        if (i > first)
            rc = tl_zeros(out, cap,
                          backfill(s->points[i - 1]->timestamp, s->points[i]->timestamp, step_sec) -
                              1);
        if (rc == 0)
            rc = tl_push(out, cap, json_sample_value(s->points[i]->value));
    }
    while (rc == 0 && out->n < (size_t)n)
        rc = tl_push(out, cap, 0);
    return rc;
}

/* --------------------------------------------------------- JSON writing */

/* A JSON writer over a buffer; the first failure sticks, so callers check once. */
typedef struct jw_s {
    lc_buf_t *out;
    int rc;
} jw_t;

static void jw_raw(jw_t *w, const char *s)
{
    if (w->rc == 0)
        w->rc = lc_buf_puts(w->out, s);
}

static void jw_printf_i64(jw_t *w, int64_t v)
{
    if (w->rc == 0)
        w->rc = lc_buf_printf(w->out, "%lld", (long long)v);
}

static void jw_printf_u64(jw_t *w, uint64_t v)
{
    if (w->rc == 0)
        w->rc = lc_buf_printf(w->out, "%llu", (unsigned long long)v);
}

/* One byte below 0x80 as encoding/json writes it inside a string. */
static const char *ascii_escape(unsigned char c, char tmp[8])
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '<':
    case '>':
    case '&':
        break;
    default:
        if (c >= 0x20) {
            tmp[0] = (char)c;
            tmp[1] = '\0';
            return tmp;
        }
    }
    static const char hex[] = "0123456789abcdef";
    memcpy(tmp, "\\u00", 4);
    tmp[4] = hex[c >> 4];
    tmp[5] = hex[c & 15];
    tmp[6] = '\0';
    return tmp;
}

static void jw_string(jw_t *w, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    char tmp[8];
    jw_raw(w, "\"");
    for (size_t i = 0; i < len && w->rc == 0;) {
        uint32_t cp = 0;
        size_t n = p[i] < 0x80 ? 1 : lc_utf8_decode(p + i, len - i, &cp);
        if (p[i] < 0x80)
            jw_raw(w, ascii_escape(p[i], tmp));
        else if (n == 0)
            jw_raw(w, "\\ufffd");
        else if (cp == 0x2028 || cp == 0x2029)
            jw_raw(w, cp == 0x2028 ? "\\u2028" : "\\u2029");
        else if (w->rc == 0)
            w->rc = lc_buf_append(w->out, p + i, n);
        i += n ? n : 1;
    }
    jw_raw(w, "\"");
}

static void jw_cstr(jw_t *w, const char *s)
{
    jw_string(w, s ? s : "", s ? strlen(s) : 0);
}

/* ------------------------------------------------------------ flamebearer */

static void jw_names(jw_t *w, char **names, size_t n)
{
    jw_raw(w, "\"names\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            jw_raw(w, ",");
        jw_cstr(w, names[i]);
    }
    jw_raw(w, "]");
}

/* ember's own "symbolized" (docs/api.md), only when the server named a
 * frame, so a flamebearer without one is Pyroscope's byte for byte. */
static void jw_symbolized(jw_t *w, const int32_t *idx, size_t n)
{
    if (n == 0)
        return;
    jw_raw(w, ",\"symbolized\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            jw_raw(w, ",");
        jw_printf_i64(w, idx[i]);
    }
    jw_raw(w, "]");
}

static void jw_levels(jw_t *w, Querier__V1__Level **levels, size_t n)
{
    jw_raw(w, ",\"levels\":[");
    for (size_t i = 0; i < n; i++) {
        jw_raw(w, i ? ",[" : "[");
        for (size_t k = 0; k < levels[i]->n_values; k++) {
            if (k)
                jw_raw(w, ",");
            jw_printf_i64(w, levels[i]->values[k]);
        }
        jw_raw(w, "]");
    }
    jw_raw(w, "]");
}

static void jw_flamebearer(jw_t *w, const qry_flamebearer_t *fb)
{
    jw_raw(w, "\"flamebearer\":{");
    jw_names(w, fb->names, fb->n_names);
    jw_symbolized(w, fb->symbolized, fb->n_symbolized);
    jw_levels(w, fb->levels, fb->n_levels);
    jw_raw(w, ",\"numTicks\":");
    jw_printf_i64(w, fb->total);
    jw_raw(w, ",\"maxSelf\":");
    jw_printf_i64(w, fb->max_self);
    jw_raw(w, "}");
}

/* metadata per ExportToFlamebearer: units and sample rate from the type. */
static void jw_metadata(jw_t *w, const char *format, const char *sample_type,
                        const char *sample_unit)
{
    const char *units = sample_unit;
    uint64_t rate = 100;
    static const char *const objects[] = {"inuse_objects", "alloc_objects", "goroutine", "samples"};
    for (size_t i = 0; i < LC_ARRAY_LEN(objects); i++) {
        if (strcmp(sample_type, objects[i]) == 0)
            units = "objects";
    }
    if (strcmp(sample_type, "cpu") == 0) {
        units = "samples";
        rate = 1000000000;
    }
    jw_raw(w, ",\"metadata\":{\"format\":");
    jw_cstr(w, format);
    jw_raw(w, ",\"spyName\":\"\",\"sampleRate\":");
    jw_printf_u64(w, rate);
    jw_raw(w, ",\"units\":");
    jw_cstr(w, units);
    jw_raw(w, ",\"name\":");
    jw_cstr(w, sample_type);
    jw_raw(w, "}");
}

static void jw_timeline(jw_t *w, const qry_timeline_t *t)
{
    jw_raw(w, "{\"startTime\":");
    jw_printf_i64(w, t->start_sec);
    jw_raw(w, ",\"samples\":[");
    for (size_t i = 0; i < t->n; i++) {
        if (i)
            jw_raw(w, ",");
        jw_printf_u64(w, t->samples[i]);
    }
    jw_raw(w, "],\"durationDelta\":");
    jw_printf_i64(w, t->step_sec);
    jw_raw(w, ",\"watermarks\":null}");
}

static int group_cmp(const void *a, const void *b)
{
    const qry_group_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Go encodes a map with sorted keys; a repeated key (series lacking the label
 * all map to "*") keeps the value assigned last, the last series. */
static void jw_groups(jw_t *w, qry_group_t *groups, size_t n)
{
    if (n)
        qsort(groups, n, sizeof(*groups), group_cmp);
    jw_raw(w, "{");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && strcmp(groups[i].key, groups[i + 1].key) == 0)
            continue;
        if (!first)
            jw_raw(w, ",");
        first = false;
        jw_cstr(w, groups[i].key);
        jw_raw(w, ":");
        jw_timeline(w, &groups[i].timeline);
    }
    jw_raw(w, "}");
}

void qry_flamebearer_set_graph(qry_flamebearer_t *fb, const Querier__V1__FlameGraph *fg)
{
    if (!fg)
        return;
    fb->names = fg->names;
    fb->n_names = fg->n_names;
    fb->symbolized = fg->symbolized;
    fb->n_symbolized = fg->n_symbolized;
    fb->levels = fg->levels;
    fb->n_levels = fg->n_levels;
    fb->total = fg->total;
    fb->max_self = fg->max_self;
}

void qry_flamebearer_set_diff(qry_flamebearer_t *fb, const Querier__V1__FlameGraphDiff *fg)
{
    fb->diff = true;
    if (!fg)
        return;
    fb->names = fg->names;
    fb->n_names = fg->n_names;
    fb->levels = fg->levels;
    fb->n_levels = fg->n_levels;
    fb->total = fg->total;
    fb->max_self = fg->max_self;
    fb->left_ticks = fg->leftticks;
    fb->right_ticks = fg->rightticks;
}

int qry_flamebearer_json(const qry_flamebearer_t *fb, lc_buf_t *out)
{
    jw_t w = {.out = out};
    jw_raw(&w, "{\"version\":1,");
    jw_flamebearer(&w, fb);
    jw_metadata(&w, fb->diff ? "double" : "single", fb->sample_type, fb->sample_unit);
    jw_raw(&w, ",\"timeline\":");
    if (fb->timeline)
        jw_timeline(&w, fb->timeline);
    else
        jw_raw(&w, "null");
    jw_raw(&w, ",\"groups\":");
    if (fb->has_groups)
        jw_groups(&w, fb->groups, fb->n_groups);
    else
        jw_raw(&w, "null");
    jw_raw(&w, ",\"heatmap\":null");
    if (fb->left_ticks) { /* omitempty */
        jw_raw(&w, ",\"leftTicks\":");
        jw_printf_u64(&w, (uint64_t)fb->left_ticks);
    }
    if (fb->right_ticks) {
        jw_raw(&w, ",\"rightTicks\":");
        jw_printf_u64(&w, (uint64_t)fb->right_ticks);
    }
    jw_raw(&w, "}\n");
    return w.rc;
}

int qry_string_array_json(char **v, size_t n, lc_buf_t *out)
{
    jw_t w = {.out = out};
    if (n == 0) {
        jw_raw(&w, "null\n"); /* a nil Go slice */
        return w.rc;
    }
    jw_raw(&w, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            jw_raw(&w, ",");
        jw_cstr(&w, v[i]);
    }
    jw_raw(&w, "]\n");
    return w.rc;
}
