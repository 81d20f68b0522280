/*
 * pprof.c — decoding, validation and encoding of google.v1.Profile.
 *
 * Decoding is pprof_decode.c's, into the caller's arena (gunzipped first when
 * the bytes start with the gzip magic). Validation applies Pyroscope's ingest
 * rules (pyroscope-api.md §3.3 item 5) so that everything downstream — the index,
 * flame graphs, merges — may trust ids and string indices without checking
 * again. It also normalises in place: deep stacks lose their leaf side, long
 * strings are cut at a UTF-8 boundary.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/gz.h"
#include "lc/labels.h"
#include "lc/pprof.h"
#include "lc/utf8.h"
#include "pprof_int.h"

void lc_pprof_limits_default(lc_pprof_limits_t *lim)
{
    lim->max_decompressed_bytes = 64u << 20;
    lim->max_samples = 1000000;
    lim->max_labels_per_sample = 100;
    lim->max_stack_depth = 1024;
    lim->max_symbol_bytes = 65535;
}

/* ---------------------------------------------------------------- decode */

static int decode_gunzip_error(int rc, const lc_pprof_limits_t *lim, lc_status_t *st)
{
    if (rc == LC_ETOOBIG)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: decompressed size over limit (limit %zu bytes)",
                             lim->max_decompressed_bytes);
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "failed to parse pprof: bad gzip data (%s)",
                         lc_strerror(rc));
}

/* The protobuf bytes of a body: `data` itself, or its gunzipped copy in plain. */
static int decode_plain(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                        lc_buf_t *plain, const uint8_t **pb, size_t *pb_len, lc_status_t *st)
{
    if (lc_gz_is_gzip(data, len)) {
        int rc = lc_gunzip(data, len, lim->max_decompressed_bytes, plain);
        if (rc)
            return decode_gunzip_error(rc, lim, st);
        *pb = plain->data;
        *pb_len = plain->len;
        return 0;
    }
    if (len > lim->max_decompressed_bytes)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: %zu bytes (limit %zu bytes)", len,
                             lim->max_decompressed_bytes);
    *pb = data;
    *pb_len = len;
    return 0;
}

/* deflate cannot shrink data more than ~1032:1, so a size hint above this many
 * times the compressed size is a lie not worth allocating for. */
#define GZIP_MAX_RATIO 1040

/* Gunzips straight into the arena when the stream's size hint is believable
 * (1 when it did, 0 to take the general path, <0 with st set on bad data): no
 * growing buffer to copy out of, and arena blocks come from a warm pool. */
static int decode_gunzip_to_arena(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                                  lc_arena_t *arena, const uint8_t **pb, size_t *pb_len,
                                  lc_status_t *st)
{
    size_t hint = lc_gz_size_hint(data, len);
    if (hint == 0 || hint > lim->max_decompressed_bytes || hint / GZIP_MAX_RATIO > len)
        return 0;
    uint8_t *buf = lc_arena_alloc(arena, hint + 1); /* + 1: tells "more than hinted" */
    if (!buf)
        return 0;
    int rc = lc_gunzip_into(data, len, buf, hint + 1, pb_len);
    if (rc == LC_ETOOBIG)
        return 0; /* several members, or a wrong hint */
    if (rc)
        return decode_gunzip_error(rc, lim, st);
    *pb = buf;
    return 1;
}

int lc_pprof_decode_keep(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                         lc_arena_t *arena, lc_pprof_t **out, const uint8_t **pb, size_t *pb_len,
                         lc_status_t *st)
{
    return lc_pprof_decode_apart(data, len, lim, arena, arena, out, pb, pb_len, NULL, st);
}

int lc_pprof_decode_apart(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                          lc_arena_t *bytes_arena, lc_arena_t *arena, lc_pprof_t **out,
                          const uint8_t **pb, size_t *pb_len, lc_pprof_seen_t *seen,
                          lc_status_t *st)
{
    lc_pprof__decode_err_t why;
    int rc = decode_gunzip_to_arena(data, len, lim, bytes_arena, pb, pb_len, st);
    if (rc != 0)
        return rc < 0 ? rc
                      : lc_pprof__decode_pb_seen(*pb, *pb_len, lim, arena, out, seen, &why, st);
    lc_buf_t plain;
    lc_buf_init(&plain, lim->max_decompressed_bytes);
    rc = decode_plain(data, len, lim, &plain, pb, pb_len, st);
    if (rc == 0)
        rc = lc_pprof__decode_pb_seen(*pb, *pb_len, lim, arena, out, seen, &why, st);
    if (rc == 0 && plain.data) {
        /* The profile holds copies of what it needs; the bytes must outlive plain. */
        uint8_t *kept = lc_arena_alloc(bytes_arena, plain.len);
        if (kept)
            memcpy(kept, plain.data, plain.len);
        else
            rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, LC_PPROF__MSG_MALFORMED);
        *pb = kept;
    }
    lc_buf_fini(&plain);
    return rc;
}

int lc_pprof_decode(const uint8_t *data, size_t len, const lc_pprof_limits_t *lim,
                    lc_arena_t *arena, lc_pprof_t **out, lc_status_t *st)
{
    lc_buf_t plain;
    lc_buf_init(&plain, lim->max_decompressed_bytes);
    const uint8_t *pb;
    size_t pb_len;
    lc_pprof__decode_err_t why;
    int rc = decode_plain(data, len, lim, &plain, &pb, &pb_len, st);
    if (rc == 0)
        rc = lc_pprof__decode_pb(pb, pb_len, lim, arena, out, &why, st);
    lc_buf_fini(&plain);
    return rc;
}

/* ---------------------------------------------------------------- encode */

int lc_pprof_encode(const lc_pprof_t *p, bool gzip, lc_buf_t *out)
{
    size_t n = protobuf_c_message_get_packed_size(&p->base);
    if (!gzip) {
        int rc = lc_buf_reserve(out, n);
        if (rc)
            return rc;
        out->len += protobuf_c_message_pack(&p->base, out->data + out->len);
        return 0;
    }
    lc_buf_t raw;
    lc_buf_init(&raw, LC_BUF_UNLIMITED);
    int rc = lc_buf_reserve(&raw, n);
    if (rc == 0) {
        raw.len = protobuf_c_message_pack(&p->base, raw.data);
        rc = lc_gzip(raw.data, raw.len, LC_PPROF__GZIP_LEVEL, out);
    }
    lc_buf_fini(&raw);
    return rc;
}

/* ---------------------------------------------------------------- validation helpers */

static int invalid(lc_status_t *st, const char *fmt, ...) LC_PRINTF(2, 3);

static int invalid(lc_status_t *st, const char *fmt, ...)
{
    char msg[LC_STATUS_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid pprof: %s", msg);
}

/* Cuts a valid UTF-8 string to at most max bytes without splitting a character. */
static void utf8_truncate(char *s, size_t max)
{
    while (max > 0 && ((uint8_t)s[max] & 0xc0) == 0x80)
        max--;
    s[max] = '\0';
}

static int check_string_table(lc_pprof_t *p, const lc_pprof_limits_t *lim, bool *changed,
                              lc_status_t *st)
{
    if (p->n_string_table == 0 || p->string_table[0][0] != '\0')
        return invalid(st, "string_table[0] must be the empty string");
    for (size_t i = 1; i < p->n_string_table; i++) {
        char *s = p->string_table[i];
        size_t len = strlen(s);
        if (!lc_utf8_valid(s, len))
            return invalid(st, "string_table[%zu] is not valid UTF-8", i);
        if (lim->max_symbol_bytes && len > lim->max_symbol_bytes) {
            utf8_truncate(s, lim->max_symbol_bytes);
            *changed = true;
        }
    }
    return 0;
}

static bool str_ok(const lc_pprof_t *p, int64_t idx)
{
    return idx >= 0 && (uint64_t)idx < p->n_string_table;
}

/* Reports the first of `n` indices that falls outside the string table. */
static int check_str_refs(const lc_pprof_t *p, const int64_t *idx, size_t n, const char *what,
                          uint64_t owner, lc_status_t *st)
{
    for (size_t i = 0; i < n; i++)
        if (!str_ok(p, idx[i]))
            return invalid(st,
                           "%s %" PRIu64 ": string index %" PRId64
                           " out of range (string table has %zu entries)",
                           what, owner, idx[i], p->n_string_table);
    return 0;
}

static int check_value_types(const lc_pprof_t *p, lc_status_t *st)
{
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const Google__V1__ValueType *vt = p->sample_type[i];
        int64_t idx[] = {vt->type, vt->unit};
        if (check_str_refs(p, idx, 2, "sample type", i, st))
            return -1;
        if (strchr(p->string_table[vt->type], '-') || strchr(p->string_table[vt->unit], '-'))
            return invalid(st, "sample type %s/%s contains '-'", p->string_table[vt->type],
                           p->string_table[vt->unit]);
    }
    if (p->period_type) {
        int64_t idx[] = {p->period_type->type, p->period_type->unit};
        return check_str_refs(p, idx, 2, "period type", 0, st);
    }
    return 0;
}

static int check_profile_str_refs(const lc_pprof_t *p, lc_status_t *st)
{
    int64_t idx[] = {p->drop_frames, p->keep_frames, p->default_sample_type};
    if (check_str_refs(p, idx, LC_ARRAY_LEN(idx), "profile field", 0, st))
        return -1;
    if (check_str_refs(p, p->comment, p->n_comment, "comment", 0, st))
        return -1;
    for (size_t i = 0; i < p->n_mapping; i++) {
        const Google__V1__Mapping *m = p->mapping[i];
        int64_t mi[] = {m->filename, m->build_id};
        if (check_str_refs(p, mi, 2, "mapping", m->id, st))
            return -1;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const Google__V1__Function *f = p->function[i];
        int64_t fi[] = {f->name, f->system_name, f->filename};
        if (check_str_refs(p, fi, 3, "function", f->id, st))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- id sets */

/* The ids of one kind of element. Producers almost always number them 1..n
 * in order ("dense"), which needs no memory; otherwise a sorted copy. */
typedef struct id_set_s {
    size_t n;
    uint64_t *sorted; /* NULL when dense */
} id_set_t;

static uint64_t elem_id(void *const *elems, size_t i, size_t id_offset)
{
    return *(const uint64_t *)((const char *)elems[i] + id_offset);
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Returns false, with *dup set, when an id occurs twice. */
static bool id_set_init(id_set_t *set, void *const *elems, size_t n, size_t id_offset,
                        uint64_t *dup)
{
    set->n = n;
    set->sorted = NULL;
    size_t i = 0;
    while (i < n && elem_id(elems, i, id_offset) == i + 1)
        i++;
    if (i == n)
        return true;
    set->sorted = lc_xmalloc(n * sizeof(uint64_t));
    for (i = 0; i < n; i++)
        set->sorted[i] = elem_id(elems, i, id_offset);
    qsort(set->sorted, n, sizeof(uint64_t), u64_cmp);
    for (i = 1; i < n; i++) {
        if (set->sorted[i] == set->sorted[i - 1]) {
            *dup = set->sorted[i];
            return false;
        }
    }
    return true;
}

static bool id_set_has_sorted(const id_set_t *set, uint64_t id)
{
    return bsearch(&id, set->sorted, set->n, sizeof(uint64_t), u64_cmp) != NULL;
}

/* Inline: it runs once per location id of every sample. */
static inline bool id_set_has(const id_set_t *set, uint64_t id)
{
    if (!set->sorted)
        return id >= 1 && id <= set->n;
    return id_set_has_sorted(set, id);
}

static void id_set_fini(id_set_t *set)
{
    lc_free(set->sorted);
    set->sorted = NULL;
}

typedef struct id_sets_s {
    id_set_t mappings, locations, functions;
} id_sets_t;

static int check_zero_ids(const lc_pprof_t *p, lc_status_t *st)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == 0)
            return invalid(st, "location %zu has id 0", i);
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == 0)
            return invalid(st, "function %zu has id 0", i);
    return 0;
}

static int id_sets_init(id_sets_t *ids, const lc_pprof_t *p, lc_status_t *st)
{
    uint64_t dup = 0;
    memset(ids, 0, sizeof(*ids));
    if (!id_set_init(&ids->mappings, (void *const *)p->mapping, p->n_mapping,
                     offsetof(Google__V1__Mapping, id), &dup))
        return invalid(st, "duplicate mapping id %" PRIu64, dup);
    if (!id_set_init(&ids->locations, (void *const *)p->location, p->n_location,
                     offsetof(Google__V1__Location, id), &dup))
        return invalid(st, "duplicate location id %" PRIu64, dup);
    if (!id_set_init(&ids->functions, (void *const *)p->function, p->n_function,
                     offsetof(Google__V1__Function, id), &dup))
        return invalid(st, "duplicate function id %" PRIu64, dup);
    return 0;
}

static void id_sets_fini(id_sets_t *ids)
{
    id_set_fini(&ids->mappings);
    id_set_fini(&ids->locations);
    id_set_fini(&ids->functions);
}

static int check_locations(const lc_pprof_t *p, const id_sets_t *ids, lc_status_t *st)
{
    for (size_t i = 0; i < p->n_location; i++) {
        const Google__V1__Location *loc = p->location[i];
        if (loc->mapping_id && !id_set_has(&ids->mappings, loc->mapping_id))
            return invalid(st, "location %" PRIu64 " references unknown mapping %" PRIu64, loc->id,
                           loc->mapping_id);
        for (size_t k = 0; k < loc->n_line; k++)
            if (!id_set_has(&ids->functions, loc->line[k]->function_id))
                return invalid(st, "location %" PRIu64 " references unknown function %" PRIu64,
                               loc->id, loc->line[k]->function_id);
    }
    return 0;
}

/* ---------------------------------------------------------------- samples */

/* Per string index: LABEL_NAME_OK once it passed as a label name,
 * LABEL_VALUE_OK as a value (samples repeat their label strings: each is
 * checked once per profile). */
enum { LABEL_NAME_OK = 1, LABEL_VALUE_OK = 2 };

/* A string label becomes a series label (the writer splits on them), so it
 * meets the label rules (lc_label_check): a NUL the decoder turned into
 * U+FFFD is refused here, not stored as a changed name. Numeric labels and
 * empty ones (the writer ignores them) are not names. */
static int check_string_label(const lc_pprof_t *p, const Google__V1__Label *l, size_t i,
                              uint8_t *label_ok, lc_status_t *st)
{
    const char *key = lc_pprof_str(p, l->key), *value = lc_pprof_str(p, l->str);
    if (!l->str || !*key || !*value)
        return 0;
    if ((label_ok[l->key] & LABEL_NAME_OK) && (label_ok[l->str] & LABEL_VALUE_OK))
        return 0;
    if (lc_label_check(key, strlen(key), value, strlen(value), st) == 0) {
        label_ok[l->key] |= LABEL_NAME_OK;
        label_ok[l->str] |= LABEL_VALUE_OK;
        return 0;
    }
    return invalid(st, "sample %zu: %s", i, st->msg);
}

static int check_sample_labels(const lc_pprof_t *p, const Google__V1__Sample *s, size_t i,
                               const lc_pprof_limits_t *lim, uint8_t *label_ok, lc_status_t *st)
{
    if (lim->max_labels_per_sample && s->n_label > lim->max_labels_per_sample)
        return invalid(st, "sample %zu has %zu labels (limit %zu)", i, s->n_label,
                       lim->max_labels_per_sample);
    for (size_t k = 0; k < s->n_label; k++) {
        const Google__V1__Label *l = s->label[k];
        int64_t idx[] = {l->key, l->str, l->num_unit};
        if (check_str_refs(p, idx, 3, "label of sample", i, st))
            return -1;
        if (check_string_label(p, l, i, label_ok, st))
            return -1;
    }
    return 0;
}

/* location_id[0] is the leaf: dropping from the front keeps the root side,
 * so the truncated stack still aggregates under the right callers. */
static void truncate_stack(Google__V1__Sample *s, size_t max_depth, bool *changed)
{
    if (!max_depth || s->n_location_id <= max_depth)
        return;
    *changed = true;
    memmove(s->location_id, s->location_id + (s->n_location_id - max_depth),
            max_depth * sizeof(*s->location_id));
    s->n_location_id = max_depth;
}

static int check_sample(const lc_pprof_t *p, Google__V1__Sample *s, size_t i, const id_sets_t *ids,
                        bool frames_known, const lc_pprof_limits_t *lim, uint8_t *label_ok,
                        bool *changed, lc_status_t *st)
{
    if (s->n_value != p->n_sample_type)
        return invalid(st, "sample %zu has %zu values, expected %zu (one per sample type)", i,
                       s->n_value, p->n_sample_type);
    if (check_sample_labels(p, s, i, lim, label_ok, st))
        return -1;
    truncate_stack(s, lim->max_stack_depth, changed);
    for (size_t k = 0; !frames_known && k < s->n_location_id; k++)
        if (!id_set_has(&ids->locations, s->location_id[k]))
            return invalid(st, "sample %zu references unknown location %" PRIu64, i,
                           s->location_id[k]);
    return 0;
}

/* Whether seen, from decoding p, already shows every sample's locations
 * known: ids 1..n (a dense set) and none of the samples' ids 0 or above n. */
static bool frames_known_from(const lc_pprof_t *p, const lc_pprof_seen_t *seen,
                              const id_sets_t *ids)
{
    return seen && seen->profile == p && !ids->locations.sorted && !seen->location_id_zero &&
           seen->location_id_max <= ids->locations.n;
}

static int check_graph(lc_pprof_t *p, const lc_pprof_limits_t *lim, const lc_pprof_seen_t *seen,
                       bool *changed, lc_status_t *st)
{
    id_sets_t ids;
    int rc = check_zero_ids(p, st);
    if (rc == 0)
        rc = id_sets_init(&ids, p, st);
    else
        memset(&ids, 0, sizeof(ids));
    if (rc == 0)
        rc = check_locations(p, &ids, st);
    bool frames_known = rc == 0 && frames_known_from(p, seen, &ids);
    uint8_t *label_ok = lc_xcalloc(p->n_string_table + 1, 1);
    for (size_t i = 0; i < p->n_sample && rc == 0; i++)
        rc = check_sample(p, p->sample[i], i, &ids, frames_known, lim, label_ok, changed, st);
    lc_free(label_ok);
    id_sets_fini(&ids);
    return rc;
}

int lc_pprof_validate(lc_pprof_t *p, const lc_pprof_limits_t *lim, lc_status_t *st)
{
    bool changed;
    return lc_pprof_validate_normalized(p, lim, &changed, st);
}

int lc_pprof_validate_normalized(lc_pprof_t *p, const lc_pprof_limits_t *lim, bool *changed,
                                 lc_status_t *st)
{
    return lc_pprof_validate_seen(p, lim, NULL, changed, st);
}

int lc_pprof_validate_seen(lc_pprof_t *p, const lc_pprof_limits_t *lim, const lc_pprof_seen_t *seen,
                           bool *changed, lc_status_t *st)
{
    *changed = false;
    if (p->n_sample_type == 0)
        return invalid(st, "profile has no sample types");
    if (lim->max_samples && p->n_sample > lim->max_samples)
        return invalid(st, "profile has %zu samples (limit %zu)", p->n_sample, lim->max_samples);
    if (check_string_table(p, lim, changed, st) || check_value_types(p, st) ||
        check_profile_str_refs(p, st))
        return -1;
    return check_graph(p, lim, seen, changed, st);
}
