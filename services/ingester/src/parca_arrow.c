/*
 * parca_arrow.c — the Parca Agent's v2 record batch (WriteArrow's Arrow IPC
 * stream, docs/internals/parca-agent-wire.md) as pprofs in a Push request, so
 * WriteArrow is served by ing_push_serve like WriteRaw: the same tenant, rate,
 * label and pprof checks, transport and store (a 200 means stored).
 *
 * Why pprof and not our decoded form: the Push path validates, indexes and
 * publishes pprof bytes; building them with lc_pprof_builder costs one extra
 * decode per series (a few ms per agent push) and no second copy of the
 * checks. Mapping, per row (one sample):
 * - one pprof per (series labels, profile type, period, 10 s window of the
 *   row's timestamp);
 * - series labels: every field of the `labels` struct with a value, except
 *   cpu, thread_id and thread_name (one series per core and thread would
 *   multiply a host's series by both), which become pprof sample labels;
 *   `__name__` is the producer ("parca_agent"), `service_name` the comm when
 *   the agent sent none, so Pyroscope's querier groups by process;
 * - sample type sample_type/sample_unit, period type period_type/period_unit
 *   with the row's period, values as sent (the agent's counts);
 * - the stack (leaf first): a location per frame with the frame's address and
 *   a mapping of its file and build id (the agent sends addresses already
 *   relative to the file, so the mapping starts at 0); its lines, when the
 *   agent symbolized the frame, become the location's lines.
 * Every size the input drives is bounded: lc/arrow.h's limits, and here the
 * pprofs per request, the frames walked per request (list_view rows may all
 * name the same long range), the lines per frame and the string bytes.
 * Strings are kept exactly or refused (a NUL byte, past 65535 bytes).
 *
 * Threading: the thread pool (offloaded route); everything lives in the
 * request arena but the pprof builders, freed before returning.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lc/arrow.h"
#include "lc/hash.h"
#include "receive_int.h"

#define PA_WINDOW_NS (10LL * 1000000000LL)
#define PA_MAX_GROUPS 4096                     /* pprofs from one request */
#define PA_MAX_FRAME_VISITS ((int64_t)1 << 24) /* frames and lines walked per request */
#define PA_MAX_LABELS 64                       /* fields of the labels struct */
#define PA_MAX_LINES 256                       /* inlined lines of one frame */
#define PA_MAX_STRING 4096                     /* longer names are cut (pprof keeps 64 KiB) */
#define PA_TYPE_COLUMNS 5

static const char *const TYPE_COLUMNS[PA_TYPE_COLUMNS] = {"producer", "sample_type", "sample_unit",
                                                          "period_type", "period_unit"};
static const char *const SAMPLE_LABELS[] = {"cpu", "thread_id", "thread_name"};

typedef struct pa_cols_s {
    const lc_arrow_array_t *labels, *stacktrace;       /* v2: a struct, a list of frames */
    const lc_arrow_array_t *label_cols[PA_MAX_LABELS]; /* v1: the labels.<name> columns */
    size_t n_label_cols;
    const lc_arrow_array_t *stacktrace_id; /* v1: names a row of the stack trace record */
    const lc_arrow_array_t *value, *timestamp, *period, *duration;
    const lc_arrow_array_t *type[PA_TYPE_COLUMNS];
} pa_cols_t;

/* v1's stack trace record: its rows by stack trace id. */
typedef struct pa_stacks_s {
    const lc_arrow_array_t *ids, *locations;
    uint32_t *slots; /* open addressing: row + 1, 0 empty */
    size_t n_slots;
} pa_stacks_t;

/* One pprof being built: a series in a time window. */
typedef struct pa_group_s {
    uint64_t hash;
    char *key;
    size_t key_len;
    lc_pprof_builder_t *b;
    const char **series; /* name, value pairs (arena) */
    size_t n_series;
    const char *type[PA_TYPE_COLUMNS];
    int64_t time_min, time_max, duration;
} pa_group_t;

/* A string of the current row, cut to PA_MAX_STRING and NUL-terminated. */
typedef struct pa_str_s {
    char s[PA_MAX_STRING + 1];
} pa_str_t;

typedef struct pa_conv_s {
    lc_arena_t *a;
    size_t max_depth;
    size_t max_bytes; /* one encoded pprof */
    pa_cols_t c;
    pa_group_t *groups;
    size_t n_groups;
    uint32_t *slots; /* open addressing over groups: index + 1, 0 empty */
    size_t n_slots;
    int64_t frame_visits;
    const pa_stacks_t *stacks; /* v1: where stacktrace_id leads; NULL for v2 */
    lc_buf_t key;              /* the current row's group key */
    /* the current row's labels: series (name, value), sample (name, value) */
    const uint8_t *series_name[PA_MAX_LABELS], *series_value[PA_MAX_LABELS];
    size_t series_name_len[PA_MAX_LABELS], series_value_len[PA_MAX_LABELS];
    size_t n_series;
    pa_str_t sample_value[LC_ARRAY_LEN(SAMPLE_LABELS)];
    const char *sample_kv[2 * LC_ARRAY_LEN(SAMPLE_LABELS)];
    size_t n_sample;
    pa_str_t type[PA_TYPE_COLUMNS];
    int64_t period;
    uint64_t *locs;
    pa_str_t file, build_id, name, filename;
    lc_pprof_line_t lines[PA_MAX_LINES];
} pa_conv_t;

static int bad_row(lc_status_t *st, int64_t row, const char *what)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                         "Parca write: row %" PRId64 ": %s; nothing was stored", row, what);
}

static int out_of_memory(lc_status_t *st)
{
    return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "out of request memory");
}

/* ---------------------------------------------------------------- columns */

static const lc_arrow_array_t *column(const lc_arrow_batch_t *b, const char *name)
{
    for (size_t i = 0; i < b->n_columns; i++)
        if (strcmp(b->columns[i].field->name, name) == 0)
            return &b->columns[i];
    return NULL;
}

static int need_column(const lc_arrow_batch_t *b, const char *name, lc_arrow_kind_t kind,
                       const lc_arrow_array_t **out, lc_status_t *st)
{
    *out = column(b, name);
    if (!*out)
        return lc_status_set(
            st, LC_CODE_INVALID_ARGUMENT,
            "Parca write: the record has no \"%s\" column (the Parca Agent's schema "
            "wants it); nothing was stored",
            name);
    const lc_arrow_field_t *f = (*out)->field;
    while (f->kind == LC_ARROW_RUN_END && !f->dict_encoded)
        f = &f->children[1];
    if (!f->dict_encoded && f->kind != kind)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Parca write: column \"%s\" has the wrong type; nothing was stored",
                             name);
    return 0;
}

/* v1: one column per label, named labels.<name>. */
static int find_label_columns(const lc_arrow_batch_t *b, pa_cols_t *c, lc_status_t *st)
{
    c->n_label_cols = 0;
    for (size_t i = 0; i < b->n_columns; i++) {
        if (strncmp(b->columns[i].field->name, "labels.", 7) != 0)
            continue;
        if (c->n_label_cols == PA_MAX_LABELS)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "Write: more than 64 label columns; nothing was stored");
        c->label_cols[c->n_label_cols++] = &b->columns[i];
    }
    return 0;
}

static int find_stack_columns(const lc_arrow_batch_t *b, pa_cols_t *c, bool v1, lc_status_t *st)
{
    if (v1)
        return find_label_columns(b, c, st) ||
               need_column(b, "stacktrace_id", LC_ARROW_BINARY, &c->stacktrace_id, st);
    if (need_column(b, "labels", LC_ARROW_STRUCT, &c->labels, st) ||
        need_column(b, "stacktrace", LC_ARROW_LIST_VIEW, &c->stacktrace, st))
        return -1;
    lc_arrow_kind_t k = c->stacktrace->field->kind;
    if (k != LC_ARROW_LIST && k != LC_ARROW_LIST_VIEW && k != LC_ARROW_LARGE_LIST &&
        k != LC_ARROW_LARGE_LIST_VIEW)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "WriteArrow: column \"stacktrace\" is not a list; nothing was stored");
    return 0;
}

static int find_columns(const lc_arrow_batch_t *b, pa_cols_t *c, bool v1, lc_status_t *st)
{
    if (find_stack_columns(b, c, v1, st) || need_column(b, "value", LC_ARROW_INT, &c->value, st) ||
        need_column(b, "timestamp", LC_ARROW_INT, &c->timestamp, st) ||
        need_column(b, "period", LC_ARROW_INT, &c->period, st) ||
        need_column(b, "duration", LC_ARROW_INT, &c->duration, st))
        return -1;
    for (size_t i = 0; i < PA_TYPE_COLUMNS; i++)
        if (need_column(b, TYPE_COLUMNS[i], LC_ARROW_BINARY, &c->type[i], st))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- values */

/* Names are stored exactly or refused (docs/internals/ingest.md, "Names are
 * exact"): a NUL would end the C string early, a cut would change it. */
static int check_text(const lc_arrow_array_t *a, const uint8_t *p, size_t n, lc_status_t *st)
{
    const char *why = n > PA_MAX_STRING ? "a string longer than 65535 bytes"
                      : memchr(p, 0, n) ? "a string with a NUL byte"
                                        : NULL;
    if (!why)
        return 0;
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                         "Parca write: column \"%s\": %s; nothing was stored", a->field->name, why);
}

/* A string cell into out (NUL-terminated): 0, 1 for null, -1. */
static int get_str(const lc_arrow_array_t *a, int64_t row, pa_str_t *out, lc_status_t *st)
{
    const uint8_t *p;
    size_t n;
    int rc = a ? lc_arrow_get_bytes(a, row, &p, &n, st) : 1;
    if (rc != 0) {
        out->s[0] = '\0';
        return rc;
    }
    if (check_text(a, p, n, st))
        return -1;
    memcpy(out->s, p, n);
    out->s[n] = '\0';
    return 0;
}

/* A non-null integer cell. */
static int get_int(const lc_arrow_array_t *a, int64_t row, const char *what, int64_t *out,
                   lc_status_t *st)
{
    int rc = lc_arrow_get_int(a, row, out, st);
    if (rc == 1)
        return bad_row(st, row, what);
    return rc;
}

static int64_t to_ns(const lc_arrow_field_t *f, int64_t v)
{
    static const int64_t per_unit[] = {1000000000LL, 1000000LL, 1000LL, 1LL};
    while (f->kind == LC_ARROW_RUN_END)
        f = &f->children[1];
    if (!f->is_timestamp || f->time_unit < 0 || f->time_unit > 3)
        return v;
    int64_t ns;
    return __builtin_mul_overflow(v, per_unit[f->time_unit], &ns) ? INT64_MAX : ns;
}

static bool is_sample_label(const char *name, size_t len, size_t *which)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(SAMPLE_LABELS); i++)
        if (strlen(SAMPLE_LABELS[i]) == len && memcmp(SAMPLE_LABELS[i], name, len) == 0) {
            *which = i;
            return true;
        }
    return false;
}

/* Label column col at row r, named name: a series or a sample label; a null
 * or an empty value is no label. */
static int row_label(pa_conv_t *cv, const char *name, const lc_arrow_array_t *col, int64_t r,
                     lc_status_t *st)
{
    const uint8_t *v;
    size_t n, which;
    int rc = lc_arrow_get_bytes(col, r, &v, &n, st);
    if (rc != 0 || n == 0)
        return rc < 0 ? -1 : 0;
    if (check_text(col, v, n, st))
        return -1;
    if (is_sample_label(name, strlen(name), &which)) {
        pa_str_t *out = &cv->sample_value[cv->n_sample];
        memcpy(out->s, v, n);
        out->s[n] = '\0';
        cv->sample_kv[2 * cv->n_sample] = SAMPLE_LABELS[which];
        cv->sample_kv[2 * cv->n_sample + 1] = out->s;
        cv->n_sample++;
        return 0;
    }
    cv->series_name[cv->n_series] = (const uint8_t *)name;
    cv->series_name_len[cv->n_series] = strlen(name);
    cv->series_value[cv->n_series] = v;
    cv->series_value_len[cv->n_series] = n;
    cv->n_series++;
    return 0;
}

/* The row's labels (v2: the labels struct's fields; v1: the labels.*
 * columns), split into series and sample labels. */
static int row_labels(pa_conv_t *cv, int64_t row, lc_status_t *st)
{
    cv->n_series = cv->n_sample = 0;
    if (cv->stacks) {
        for (size_t i = 0; i < cv->c.n_label_cols; i++) {
            const lc_arrow_array_t *col = cv->c.label_cols[i];
            if (row_label(cv, col->field->name + 7, col, row, st))
                return -1;
        }
        return 0;
    }
    const lc_arrow_array_t *s;
    int64_t r;
    int rc = lc_arrow_get_struct(cv->c.labels, row, &s, &r, st);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (s->n_children > PA_MAX_LABELS)
        return bad_row(st, row, "more than 64 labels");
    for (size_t i = 0; i < s->n_children; i++)
        if (row_label(cv, s->children[i].field->name, &s->children[i], r, st))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- groups */

static uint64_t pa_key_hash(const uint8_t *p, size_t n)
{
    return lc_hash64(p, n, 0);
}

/* series labels, profile type, period and window, each part NUL-ended. */
static int row_key(pa_conv_t *cv, int64_t window)
{
    lc_buf_t *k = &cv->key;
    lc_buf_reset(k);
    for (size_t i = 0; i < cv->n_series; i++)
        if (lc_buf_append(k, cv->series_name[i], cv->series_name_len[i]) || lc_buf_putc(k, '\0') ||
            lc_buf_append(k, cv->series_value[i], cv->series_value_len[i]) || lc_buf_putc(k, '\0'))
            return -1;
    for (size_t i = 0; i < PA_TYPE_COLUMNS; i++)
        if (lc_buf_puts(k, cv->type[i].s) || lc_buf_putc(k, '\0'))
            return -1;
    return lc_buf_printf(k, "%" PRId64 "/%" PRId64, cv->period, window);
}

static int group_init(pa_conv_t *cv, pa_group_t *g, uint64_t h, lc_status_t *st)
{
    *g = (pa_group_t){
        .hash = h, .key_len = cv->key.len, .time_min = INT64_MAX, .time_max = INT64_MIN};
    g->key = lc_arena_alloc(cv->a, cv->key.len);
    g->series = lc_arena_calloc(cv->a, 2 * cv->n_series + 1, sizeof(*g->series));
    if (!g->key || !g->series)
        return out_of_memory(st);
    memcpy(g->key, cv->key.data, cv->key.len);
    for (size_t i = 0; i < cv->n_series; i++) {
        g->series[2 * i] =
            lc_arena_strndup(cv->a, (const char *)cv->series_name[i], cv->series_name_len[i]);
        g->series[2 * i + 1] =
            lc_arena_strndup(cv->a, (const char *)cv->series_value[i], cv->series_value_len[i]);
        if (!g->series[2 * i] || !g->series[2 * i + 1])
            return out_of_memory(st);
    }
    g->n_series = cv->n_series;
    for (size_t i = 0; i < PA_TYPE_COLUMNS; i++)
        if (!(g->type[i] = lc_arena_strdup(cv->a, cv->type[i].s)))
            return out_of_memory(st);
    if (!(g->b = lc_pprof_builder_new()))
        return out_of_memory(st);
    lc_pprof_builder_sample_type(g->b, g->type[1], g->type[2]);
    lc_pprof_builder_period(g->b, g->type[3], g->type[4], cv->period);
    return 0;
}

/* The group of the current row's key, made on first sight. */
static pa_group_t *row_group(pa_conv_t *cv, int64_t row, lc_status_t *st)
{
    uint64_t h = pa_key_hash(cv->key.data, cv->key.len);
    size_t mask = cv->n_slots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t slot = cv->slots[i];
        if (slot == 0) {
            if (cv->n_groups == PA_MAX_GROUPS) {
                bad_row(st, row, "more than 4096 series and time windows in one request");
                return NULL;
            }
            pa_group_t *g = &cv->groups[cv->n_groups++];
            cv->slots[i] = (uint32_t)cv->n_groups;
            return group_init(cv, g, h, st) ? NULL : g;
        }
        pa_group_t *g = &cv->groups[slot - 1];
        if (g->hash == h && g->key_len == cv->key.len &&
            memcmp(g->key, cv->key.data, g->key_len) == 0)
            return g;
    }
}

/* ---------------------------------------------------------------- v1 stacks */

/* The row of id in the stack trace record, -2 when it has none, -1 on a
 * read error. */
static int64_t stacks_find(const pa_stacks_t *sx, const uint8_t *id, size_t n, lc_status_t *st)
{
    size_t mask = sx->n_slots - 1;
    for (size_t i = pa_key_hash(id, n) & mask;; i = (i + 1) & mask) {
        uint32_t slot = sx->slots[i];
        if (slot == 0)
            return -2;
        const uint8_t *p;
        size_t len;
        if (lc_arrow_get_bytes(sx->ids, slot - 1, &p, &len, st) < 0)
            return -1;
        if (len == n && memcmp(p, id, n) == 0)
            return slot - 1;
    }
}

/* Indexes the record's rows by stacktrace_id; a repeated id keeps its first. */
static int stacks_index(pa_stacks_t *sx, const lc_arrow_batch_t *b, lc_arena_t *a, lc_status_t *st)
{
    if (need_column(b, "stacktrace_id", LC_ARROW_BINARY, &sx->ids, st) ||
        need_column(b, "locations", LC_ARROW_LIST, &sx->locations, st))
        return -1;
    sx->n_slots = 16;
    while (sx->n_slots < 2 * (size_t)b->length)
        sx->n_slots *= 2;
    if (!(sx->slots = lc_arena_calloc(a, sx->n_slots, sizeof(*sx->slots))))
        return out_of_memory(st);
    size_t mask = sx->n_slots - 1;
    for (int64_t row = 0; row < b->length; row++) {
        const uint8_t *id;
        size_t n;
        int rc = lc_arrow_get_bytes(sx->ids, row, &id, &n, st);
        if (rc < 0)
            return -1;
        if (rc == 1 || stacks_find(sx, id, n, st) != -2)
            continue;
        size_t i = pa_key_hash(id, n) & mask;
        while (sx->slots[i])
            i = (i + 1) & mask;
        sx->slots[i] = (uint32_t)row + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- frames */

static int count_visit(pa_conv_t *cv, int64_t row, lc_status_t *st)
{
    if (++cv->frame_visits > PA_MAX_FRAME_VISITS)
        return bad_row(st, row, "more than 16777216 frames and lines in one request");
    return 0;
}

/* A v1 line: function_name, function_system_name, function_filename and
 * function_start_line beside line and column. */
static int frame_line_v1(pa_conv_t *cv, pa_group_t *g, const lc_arrow_array_t *l, int64_t lr,
                         int64_t line, lc_pprof_line_t *out, lc_status_t *st)
{
    int64_t start_line = 0;
    const lc_arrow_array_t *start = lc_arrow_child(l, "function_start_line");
    if (start && lc_arrow_get_int(start, lr, &start_line, st) < 0)
        return -1;
    if (get_str(lc_arrow_child(l, "function_name"), lr, &cv->name, st) < 0 ||
        get_str(lc_arrow_child(l, "function_system_name"), lr, &cv->build_id, st) < 0 ||
        get_str(lc_arrow_child(l, "function_filename"), lr, &cv->filename, st) < 0)
        return -1;
    const char *name = cv->name.s[0] ? cv->name.s : cv->build_id.s;
    out->function_id =
        lc_pprof_builder_function(g->b, name, cv->build_id.s, cv->filename.s, start_line);
    out->line = line;
    return 0;
}

/* One `lines` element: its function in g's builder. */
static int frame_line(pa_conv_t *cv, pa_group_t *g, const lc_arrow_array_t *lines, int64_t i,
                      int64_t row, lc_pprof_line_t *out, lc_status_t *st)
{
    const lc_arrow_array_t *l, *fn;
    int64_t lr, fr, line = 0, start_line = 0;
    int rc = lc_arrow_get_struct(lines, i, &l, &lr, st);
    if (rc != 0)
        return rc < 0 ? -1 : bad_row(st, row, "a null line");
    const lc_arrow_array_t *line_col = lc_arrow_child(l, "line");
    if (line_col && lc_arrow_get_int(line_col, lr, &line, st) < 0)
        return -1;
    const lc_arrow_array_t *fn_col = lc_arrow_child(l, "function");
    if (!fn_col) /* v1: the function's columns are the line's */
        return frame_line_v1(cv, g, l, lr, line, out, st);
    rc = lc_arrow_get_struct(fn_col, lr, &fn, &fr, st);
    if (rc != 0)
        return rc < 0 ? -1 : bad_row(st, row, "a line without a function");
    const lc_arrow_array_t *start = lc_arrow_child(fn, "start_line");
    if (start && lc_arrow_get_int(start, fr, &start_line, st) < 0)
        return -1;
    if (get_str(lc_arrow_child(fn, "system_name"), fr, &cv->name, st) < 0 ||
        get_str(lc_arrow_child(fn, "filename"), fr, &cv->filename, st) < 0)
        return -1;
    out->function_id =
        lc_pprof_builder_function(g->b, cv->name.s, cv->name.s, cv->filename.s, start_line);
    out->line = line;
    return 0;
}

/* The lines of frame row fr of f (none when null or absent). */
static int frame_lines(pa_conv_t *cv, pa_group_t *g, const lc_arrow_array_t *f, int64_t fr,
                       int64_t row, size_t *n, lc_status_t *st)
{
    const lc_arrow_array_t *col = lc_arrow_child(f, "lines"), *child;
    int64_t start, count;
    *n = 0;
    int rc = col ? lc_arrow_get_list(col, fr, &child, &start, &count, st) : 1;
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (count > PA_MAX_LINES)
        return bad_row(st, row, "a frame with more than 256 lines");
    for (int64_t i = 0; i < count; i++) {
        if (count_visit(cv, row, st) || frame_line(cv, g, child, start + i, row, &cv->lines[i], st))
            return -1;
    }
    *n = (size_t)count;
    return 0;
}

/* v1's mapping_start, mapping_limit and mapping_offset (absent or null: 0). */
static int frame_mapping_range(const lc_arrow_array_t *f, int64_t fr, uint64_t *start,
                               uint64_t *limit, uint64_t *offset, lc_status_t *st)
{
    const char *names[] = {"mapping_start", "mapping_limit", "mapping_offset"};
    uint64_t *out[] = {start, limit, offset};
    for (size_t i = 0; i < 3; i++) {
        const lc_arrow_array_t *col = lc_arrow_child(f, names[i]);
        if (col && lc_arrow_get_uint(col, fr, out[i], st) < 0)
            return -1;
    }
    return 0;
}

/* Frame i of the frames array: its location in g's builder. */
static int pa_frame_location(pa_conv_t *cv, pa_group_t *g, const lc_arrow_array_t *frames,
                             int64_t i, int64_t row, uint64_t *loc, lc_status_t *st)
{
    const lc_arrow_array_t *f;
    int64_t fr;
    uint64_t address = 0;
    int rc = lc_arrow_get_struct(frames, i, &f, &fr, st);
    if (rc != 0)
        return rc < 0 ? -1 : bad_row(st, row, "a null frame");
    const lc_arrow_array_t *addr = lc_arrow_child(f, "address");
    if (!addr)
        return bad_row(st, row, "a frame without an address");
    if (lc_arrow_get_uint(addr, fr, &address, st) < 0)
        return -1;
    if (get_str(lc_arrow_child(f, "mapping_file"), fr, &cv->file, st) < 0 ||
        get_str(lc_arrow_child(f, "mapping_build_id"), fr, &cv->build_id, st) < 0)
        return -1;
    uint64_t start = 0, limit = 0, offset = 0; /* v1 only; v2 addresses are the file's */
    if (frame_mapping_range(f, fr, &start, &limit, &offset, st))
        return -1;
    size_t n_lines;
    if (frame_lines(cv, g, f, fr, row, &n_lines, st))
        return -1;
    uint64_t mapping = lc_pprof_builder_mapping(g->b, start, limit, offset, cv->file.s,
                                                cv->build_id.s, n_lines > 0);
    *loc = lc_pprof_builder_location(g->b, mapping, address, cv->lines, n_lines);
    return 0;
}

/* v1: the locations of the stack trace record row named by the row's
 * stacktrace_id. */
static int stack_by_id(pa_conv_t *cv, int64_t row, const lc_arrow_array_t **frames, int64_t *start,
                       int64_t *count, lc_status_t *st)
{
    const uint8_t *id;
    size_t n;
    int rc = lc_arrow_get_bytes(cv->c.stacktrace_id, row, &id, &n, st);
    if (rc != 0)
        return rc < 0 ? -1 : bad_row(st, row, "no stacktrace_id");
    int64_t r = stacks_find(cv->stacks, id, n, st);
    if (r < 0)
        return r == -1 ? -1 : bad_row(st, row, "a stacktrace_id the stack trace record lacks");
    return lc_arrow_get_list(cv->stacks->locations, r, frames, start, count, st);
}

/* The row's stack, leaf first; deeper than max_depth keeps the root side. */
static int row_stack(pa_conv_t *cv, pa_group_t *g, int64_t row, size_t *n, lc_status_t *st)
{
    const lc_arrow_array_t *frames;
    int64_t start, count;
    *n = 0;
    int rc = cv->stacks ? stack_by_id(cv, row, &frames, &start, &count, st)
                        : lc_arrow_get_list(cv->c.stacktrace, row, &frames, &start, &count, st);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if ((uint64_t)count > cv->max_depth) {
        start += count - (int64_t)cv->max_depth;
        count = (int64_t)cv->max_depth;
    }
    for (int64_t i = 0; i < count; i++)
        if (count_visit(cv, row, st) ||
            pa_frame_location(cv, g, frames, start + i, row, &cv->locs[i], st))
            return -1;
    *n = (size_t)count;
    return 0;
}

/* ---------------------------------------------------------------- rows */

static int row_type(pa_conv_t *cv, int64_t row, lc_status_t *st)
{
    for (size_t i = 0; i < PA_TYPE_COLUMNS; i++) {
        int rc = get_str(cv->c.type[i], row, &cv->type[i], st);
        if (rc < 0)
            return -1;
        if (rc == 1 || !cv->type[i].s[0]) {
            char what[64];
            snprintf(what, sizeof(what), "no %s", TYPE_COLUMNS[i]);
            return bad_row(st, row, what);
        }
    }
    if (get_int(cv->c.period, row, "no period", &cv->period, st))
        return -1;
    return 0;
}

static int convert_row(pa_conv_t *cv, int64_t row, lc_status_t *st)
{
    int64_t ts, value, duration;
    if (get_int(cv->c.timestamp, row, "no timestamp", &ts, st) ||
        get_int(cv->c.value, row, "no value", &value, st) ||
        get_int(cv->c.duration, row, "no duration", &duration, st) || row_type(cv, row, st) ||
        row_labels(cv, row, st))
        return -1;
    ts = to_ns(cv->c.timestamp->field, ts);
    if (ts <= 0)
        return bad_row(st, row, "a timestamp before 1970");
    if (row_key(cv, ts / PA_WINDOW_NS))
        return bad_row(st, row, "labels too long");
    pa_group_t *g = row_group(cv, row, st);
    size_t depth;
    if (!g || row_stack(cv, g, row, &depth, st))
        return -1;
    lc_pprof_builder_sample(g->b, cv->locs, depth, &value, cv->sample_kv, cv->n_sample);
    g->time_min = ts < g->time_min ? ts : g->time_min;
    g->time_max = ts > g->time_max ? ts : g->time_max;
    g->duration = duration > g->duration ? duration : g->duration;
    return 0;
}

/* ---------------------------------------------------------------- output */

static bool has_label(const pa_group_t *g, const char *name)
{
    for (size_t i = 0; i < g->n_series; i++)
        if (strcmp(g->series[2 * i], name) == 0)
            return true;
    return false;
}

static const char *pa_label_value(const pa_group_t *g, const char *name)
{
    for (size_t i = 0; i < g->n_series; i++)
        if (strcmp(g->series[2 * i], name) == 0)
            return g->series[2 * i + 1];
    return NULL;
}

static int add_pair(lc_arena_t *a, Types__V1__LabelPair **pairs, size_t *n, const char *name,
                    const char *value)
{
    Types__V1__LabelPair *p = lc_arena_calloc(a, 1, sizeof(*p));
    if (!p)
        return -1;
    *p = (Types__V1__LabelPair)TYPES__V1__LABEL_PAIR__INIT;
    p->name = (char *)name;
    p->value = (char *)value;
    pairs[(*n)++] = p;
    return 0;
}

static int pa_group_labels(lc_arena_t *a, const pa_group_t *g, Push__V1__RawProfileSeries *s)
{
    Types__V1__LabelPair **pairs = lc_arena_calloc(a, g->n_series + 3, sizeof(*pairs));
    if (!pairs)
        return -1;
    size_t n = 0;
    if (add_pair(a, pairs, &n, "__name__", g->type[0]))
        return -1;
    const char *comm = pa_label_value(g, "comm");
    if (!has_label(g, "service_name") &&
        add_pair(a, pairs, &n, "service_name", comm ? comm : "parca_agent"))
        return -1;
    for (size_t i = 0; i < g->n_series; i++)
        if (strcmp(g->series[2 * i], "__name__") != 0 &&
            add_pair(a, pairs, &n, g->series[2 * i], g->series[2 * i + 1]))
            return -1;
    s->labels = pairs;
    s->n_labels = n;
    return 0;
}

/* The group's pprof, encoded into the arena, as one series of the push. */
static int group_series(lc_arena_t *a, size_t max_bytes, pa_group_t *g,
                        Push__V1__RawProfileSeries *s, lc_status_t *st)
{
    int64_t span = g->time_max - g->time_min;
    lc_pprof_builder_times(g->b, g->time_min, span > g->duration ? span : g->duration);
    if (lc_pprof_builder_sum_wrapped(g->b))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Parca write: the values of one stack add up past 2^63; nothing was "
                             "stored");
    lc_buf_t out;
    lc_buf_init(&out, max_bytes);
    int rc = lc_pprof_builder_encode(g->b, false, &out);
    uint8_t *data = rc ? NULL : lc_arena_alloc(a, out.len ? out.len : 1);
    if (data)
        memcpy(data, out.data, out.len);
    size_t len = out.len;
    lc_buf_fini(&out);
    if (rc)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Parca write: a profile too large to encode; nothing was stored");
    Push__V1__RawSample *sample = lc_arena_calloc(a, 1, sizeof(*sample));
    Push__V1__RawSample **samples = lc_arena_calloc(a, 1, sizeof(*samples));
    if (!data || !sample || !samples || pa_group_labels(a, g, s))
        return out_of_memory(st);
    *sample = (Push__V1__RawSample)PUSH__V1__RAW_SAMPLE__INIT;
    sample->raw_profile.data = data;
    sample->raw_profile.len = len;
    samples[0] = sample;
    s->samples = samples;
    s->n_samples = 1;
    return 0;
}

static int conv_output(pa_conv_t *cv, Push__V1__PushRequest *push, lc_status_t *st)
{
    Push__V1__RawProfileSeries *series = lc_arena_calloc(cv->a, cv->n_groups + 1, sizeof(*series));
    Push__V1__RawProfileSeries **ptrs = lc_arena_calloc(cv->a, cv->n_groups + 1, sizeof(*ptrs));
    if (!series || !ptrs)
        return out_of_memory(st);
    for (size_t i = 0; i < cv->n_groups; i++) {
        series[i] = (Push__V1__RawProfileSeries)PUSH__V1__RAW_PROFILE_SERIES__INIT;
        if (group_series(cv->a, cv->max_bytes, &cv->groups[i], &series[i], st))
            return -1;
        ptrs[i] = &series[i];
    }
    *push = (Push__V1__PushRequest)PUSH__V1__PUSH_REQUEST__INIT;
    push->series = ptrs;
    push->n_series = cv->n_groups;
    return 0;
}

/* ---------------------------------------------------------------- entry */

static int pa_conv_init(pa_conv_t *cv, lc_arena_t *a, const lc_pprof_limits_t *lim, lc_status_t *st)
{
    cv->a = a;
    cv->max_depth = lim->max_stack_depth ? lim->max_stack_depth : 1024;
    cv->max_bytes = lim->max_decompressed_bytes;
    cv->n_slots = 2 * PA_MAX_GROUPS;
    cv->groups = lc_arena_calloc(a, PA_MAX_GROUPS, sizeof(*cv->groups));
    cv->slots = lc_arena_calloc(a, cv->n_slots, sizeof(*cv->slots));
    cv->locs = lc_arena_calloc(a, cv->max_depth, sizeof(*cv->locs));
    lc_buf_init(&cv->key, 1 << 20);
    if (!cv->groups || !cv->slots || !cv->locs)
        return out_of_memory(st);
    return 0;
}

static void pa_conv_fini(pa_conv_t *cv)
{
    for (size_t i = 0; i < cv->n_groups; i++)
        lc_pprof_builder_free(cv->groups[i].b);
    lc_buf_fini(&cv->key);
}

static int check_schema(const lc_arrow_schema_t *s, const char *want, lc_status_t *st)
{
    for (size_t i = 0; i < s->n_meta; i++)
        if (strcmp(s->meta_keys[i], "parca_write_schema_version") == 0) {
            if (strcmp(s->meta_values[i], want) == 0)
                return 0;
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "%s: schema version \"%s\", this method reads %s (WriteArrow "
                                 "v2, Write v1); nothing was stored",
                                 strcmp(want, "v2") == 0 ? "WriteArrow" : "Write",
                                 s->meta_values[i], want);
        }
    return 0; /* no version: read by column names, as Parca does */
}

static int convert_batches(pa_conv_t *cv, lc_arrow_stream_t *s, lc_status_t *st)
{
    const lc_arrow_batch_t *b;
    int rc;
    while ((rc = lc_arrow_stream_next(s, &b, st)) == 1) {
        if (find_columns(b, &cv->c, cv->stacks != NULL, st))
            return -1;
        for (int64_t row = 0; row < b->length; row++)
            if (convert_row(cv, row, st))
                return -1;
    }
    return rc;
}

/* The samples stream of ipc into out; stacks is v1's stack trace record
 * (NULL: v2, stacks inline). */
static int arrow_to_push(const uint8_t *ipc, size_t len, const pa_stacks_t *stacks,
                         const lc_pprof_limits_t *lim, lc_arena_t *a, Push__V1__PushRequest *out,
                         lc_status_t *st)
{
    lc_arrow_limits_t alim;
    lc_arrow_limits_default(&alim);
    pa_conv_t *cv = lc_arena_calloc(a, 1, sizeof(*cv));
    if (!cv)
        return out_of_memory(st);
    cv->stacks = stacks;
    lc_arrow_stream_t *s = NULL;
    int rc = pa_conv_init(cv, a, lim, st);
    if (rc == 0)
        rc = lc_arrow_stream_open(&s, ipc, len, &alim, a, st);
    if (rc == 0)
        rc = check_schema(lc_arrow_stream_schema(s), stacks ? "v1" : "v2", st);
    if (rc == 0)
        rc = convert_batches(cv, s, st);
    if (rc == 0)
        rc = conv_output(cv, out, st);
    if (s)
        lc_arrow_stream_close(s);
    pa_conv_fini(cv);
    return rc ? -1 : 0;
}

int ing_parca_arrow_to_push(const uint8_t *ipc, size_t len, const lc_pprof_limits_t *lim,
                            lc_arena_t *a, Push__V1__PushRequest *out, lc_status_t *st)
{
    return arrow_to_push(ipc, len, NULL, lim, a, out, st);
}

/* The stack trace record (v1's second message): one batch, indexed by id. */
static int stacks_read(const uint8_t *ipc, size_t len, lc_arena_t *a, pa_stacks_t *sx,
                       lc_arrow_stream_t **s, lc_status_t *st)
{
    lc_arrow_limits_t alim;
    lc_arrow_limits_default(&alim);
    const lc_arrow_batch_t *b;
    if (lc_arrow_stream_open(s, ipc, len, &alim, a, st))
        return -1;
    int rc = lc_arrow_stream_next(*s, &b, st);
    if (rc == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "Write: the stack trace record holds no batch; nothing was stored");
    return rc < 0 ? -1 : stacks_index(sx, b, a, st);
}

int ing_parca_v1_to_push(const uint8_t *samples, size_t samples_len, const uint8_t *stacks,
                         size_t stacks_len, const lc_pprof_limits_t *lim, lc_arena_t *a,
                         Push__V1__PushRequest *out, lc_status_t *st)
{
    pa_stacks_t *sx = lc_arena_calloc(a, 1, sizeof(*sx));
    if (!sx)
        return out_of_memory(st);
    lc_arrow_stream_t *s = NULL;
    int rc = stacks_read(stacks, stacks_len, a, sx, &s, st);
    if (rc == 0)
        rc = arrow_to_push(samples, samples_len, sx, lim, a, out, st);
    if (s)
        lc_arrow_stream_close(s);
    return rc;
}
