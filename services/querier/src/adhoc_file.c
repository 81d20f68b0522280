/*
 * adhoc_file.c — an ad-hoc upload's bytes as profiles (adhoc_file.h).
 *
 * The format is found from the content, not the name: a gzip stream is
 * inflated first (bounded like a JFR recording), then "FLR\0" is a JFR
 * recording, bytes that are all text (no control byte but tab, CR and LF)
 * are folded stacks, and anything else must be a pprof. A pprof nearly
 * always holds small varints below 0x20 (tags, lengths), so text is not
 * mistaken for one — and a pprof decoder skips unknown fields, so text
 * would otherwise decode as an empty pprof.
 */
#include <stdio.h>
#include <string.h>

#include "adhoc_file.h"
#include "lc/folded.h"
#include "lc/gz.h"

static bool is_text(const uint8_t *d, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (d[i] < 0x20 && d[i] != '\t' && d[i] != '\n' && d[i] != '\r')
            return false;
    }
    return len > 0;
}

static int file_add_profile(adhoc_file_t *f, const uint8_t *pb, size_t len, lc_arena_t *arena,
                            lc_status_t *st)
{
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_pprof_t *p;
    if (lc_pprof_decode(pb, len, &lim, arena, &p, st) || lc_pprof_validate(p, &lim, st))
        return -1;
    f->profiles[f->n_profiles++] = p;
    return 0;
}

/* names/units/profile_of/type_in over every profile's sample types;
 * prefix[i] (or NULL) goes before profile i's type names with a ':'. */
static int flatten(adhoc_file_t *f, const char *const *prefix, lc_arena_t *arena, lc_status_t *st)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_profiles; i++)
        n += f->profiles[i]->n_sample_type;
    f->names = lc_arena_calloc(arena, n ? n : 1, sizeof(*f->names));
    f->units = lc_arena_calloc(arena, n ? n : 1, sizeof(*f->units));
    f->profile_of = lc_arena_calloc(arena, n ? n : 1, sizeof(*f->profile_of));
    f->type_in = lc_arena_calloc(arena, n ? n : 1, sizeof(*f->type_in));
    if (!f->names || !f->units || !f->profile_of || !f->type_in)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    for (size_t i = 0; i < f->n_profiles; i++) {
        const lc_pprof_t *p = f->profiles[i];
        for (size_t t = 0; t < p->n_sample_type; t++, f->n_types++) {
            const char *name = lc_pprof_str(p, p->sample_type[t]->type);
            f->names[f->n_types] = prefix ? lc_arena_sprintf(arena, "%s:%s", prefix[i], name)
                                          : lc_arena_strdup(arena, name);
            if (!f->names[f->n_types])
                return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
            f->units[f->n_types] = lc_pprof_str(p, p->sample_type[t]->unit);
            f->profile_of[f->n_types] = i;
            f->type_in[f->n_types] = t;
        }
    }
    return 0;
}

static int decode_jfr(adhoc_file_t *f, const uint8_t *d, size_t len, lc_arena_t *arena,
                      lc_status_t *st)
{
    lc_jfr_params_t params = {.sample_rate = ADHOC_JFR_SAMPLE_RATE};
    lc_jfr_result_t r;
    if (lc_jfr_to_pprof(d, len, NULL, 0, &params, arena, &r, st))
        return -1;
    const char *metrics[LC_JFR_KINDS_];
    int rc = r.n ? 0 : lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid jfr: no samples");
    for (size_t i = 0; i < r.n && rc == 0; i++) {
        metrics[i] = r.profiles[i].metric;
        rc = file_add_profile(f, r.profiles[i].pprof.data, r.profiles[i].pprof.len, arena, st);
    }
    lc_jfr_result_fini(&r);
    return rc ? -1 : flatten(f, metrics, arena, st);
}

static int decode_folded(adhoc_file_t *f, const uint8_t *d, size_t len, lc_arena_t *arena,
                         lc_status_t *st)
{
    static const lc_cv_type_t samples = {.sample_type = "samples", .sample_unit = "count"};
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_buf_t pb;
    lc_buf_init(&pb, LC_BUF_UNLIMITED);
    int rc = lc_text_to_pprof(d, len, false, &samples, 0, 0, &lim, arena, &pb, st);
    if (rc == 0)
        rc = file_add_profile(f, pb.data, pb.len, arena, st);
    lc_buf_fini(&pb);
    if (rc == 0 && f->profiles[0]->n_sample == 0)
        rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "no \"frame;frame;... count\" line");
    return rc ? -1 : flatten(f, NULL, arena, st);
}

static int file_decode_plain(adhoc_file_t *f, const uint8_t *d, size_t len, lc_arena_t *arena,
                             lc_status_t *st)
{
    if (len >= 4 && memcmp(d, "FLR", 4) == 0)
        return decode_jfr(f, d, len, arena, st);
    if (is_text(d, len))
        return decode_folded(f, d, len, arena, st);
    if (file_add_profile(f, d, len, arena, st))
        return -1;
    return flatten(f, NULL, arena, st);
}

int adhoc_file_decode(const uint8_t *data, size_t len, lc_arena_t *arena, adhoc_file_t *f,
                      lc_status_t *st)
{
    memset(f, 0, sizeof(*f));
    lc_buf_t plain;
    lc_buf_init(&plain, LC_BUF_UNLIMITED);
    int rc = 0;
    if (lc_gz_is_gzip(data, len)) {
        rc = lc_gunzip(data, len, LC_JFR_MAX_BYTES, &plain);
        if (rc)
            lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "gzip: %s", lc_strerror(rc));
        data = plain.data;
        len = plain.len;
    }
    if (rc == 0 && file_decode_plain(f, data, len, arena, st)) {
        char why[LC_STATUS_MSG_MAX];
        snprintf(why, sizeof(why), "%s", st->msg);
        rc = lc_status_set(
            st, st->code == LC_CODE_RESOURCE_EXHAUSTED ? st->code : LC_CODE_INVALID_ARGUMENT,
            "not a pprof, JFR or folded file (what ember's ad-hoc view reads): %s", why);
    }
    lc_buf_fini(&plain);
    return rc ? -1 : 0;
}

size_t adhoc_file_type(const adhoc_file_t *f, const char *want)
{
    if (!want || !*want)
        return 0;
    for (size_t i = 0; i < f->n_types; i++) {
        if (strcmp(f->names[i], want) == 0)
            return i;
    }
    return f->n_types;
}
