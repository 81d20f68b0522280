/*
 * process.c — from a scraped body to a packed ember.v1.IngestProfile
 * (process.h), on the thread pool.
 *
 * The message mirrors what the receivers publish (services/ingester
 * publish.c): a random ingest id, the series labels, the validated pprof
 * uncompressed, the profile time, and delta_disabled set together with the
 * label __delta__="false": the scraper has already turned cumulative
 * profiles into deltas, everything else it publishes is a delta or a gauge
 * by nature, and the writer must not subtract again (parca.md §2.3).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ember/v1/ingest.pb-c.h"
#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/store.h"
#include "lc/transport_entry.h"
#include "process.h"

static int scr_fail(scr_process_out_t *out, const char *kind, const char *prefix,
                    const char *detail)
{
    out->error_kind = kind;
    snprintf(out->error, sizeof(out->error), "%s%s", prefix, detail);
    return -1;
}

/* ---------------------------------------------------------------- keep_sample_type */

static bool kept(const lc_pprof_t *p, const Google__V1__ValueType *vt, const scr_value_type_t *keep,
                 size_t n_keep)
{
    const char *type = lc_pprof_str(p, vt->type), *unit = lc_pprof_str(p, vt->unit);
    for (size_t i = 0; i < n_keep; i++)
        if (keep[i].type && strcmp(keep[i].type, type) == 0 &&
            (!keep[i].unit || !keep[i].unit[0] || strcmp(keep[i].unit, unit) == 0))
            return true;
    return false;
}

int scr_keep_sample_types(lc_pprof_t *p, const scr_value_type_t *keep, size_t n_keep,
                          lc_arena_t *arena)
{
    if (!n_keep)
        return 0;
    size_t *idx = lc_arena_calloc(arena, p->n_sample_type ? p->n_sample_type : 1, sizeof(*idx));
    if (!idx)
        return LC_ETOOBIG;
    size_t n = 0;
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (kept(p, p->sample_type[i], keep, n_keep))
            idx[n++] = i;
    if (!n)
        return LC_EINPUT;
    for (size_t i = 0; i < n; i++)
        p->sample_type[i] = p->sample_type[idx[i]];
    for (size_t s = 0; s < p->n_sample; s++) {
        Google__V1__Sample *sm = p->sample[s];
        for (size_t i = 0; i < n; i++)
            sm->value[i] = sm->value[idx[i]]; /* idx[i] >= i: safe in place */
        sm->n_value = n;
    }
    p->n_sample_type = n;
    p->default_sample_type = 0;
    return 0;
}

/* ---------------------------------------------------------------- the message */

static void *scr_heap_alloc(void *ctx, size_t size)
{
    LC_UNUSED(ctx);
    return lc_xmalloc(size);
}

/* The target's labels (after relabelling) meet the rules every receiver
 * applies (lc_label_check: no NUL, valid UTF-8, ...): a target whose
 * discovered labels break them is never scraped into a merged or cut name. */
static int series_labels_check(const lc_labels_t *ls, lc_status_t *st)
{
    for (size_t i = 0; i < ls->n; i++) {
        const lc_label_t *l = &ls->v[i];
        if (lc_label_check(l->name, strlen(l->name), l->value, strlen(l->value), st) != 0)
            return -1;
    }
    return 0;
}

/* The IngestProfile as the transport carries it: lean over Redis (zstd; the
 * pprof here is always re-encoded, never the gzip that was scraped). */
static int pack_message(const scr_process_in_t *in, const lc_pprof_t *p, const lc_buf_t *pprof,
                        scr_process_out_t *out)
{
    uint8_t id[LC_INGEST_ID_BYTES];
    int rc = lc_ingest_id_new(id);
    if (rc)
        return scr_fail(out, "internal", "no random ingest id: ", lc_strerror(rc));
    lc_labels_t ls;
    lc_labels_copy(&ls, in->series);
    lc_labels_set(&ls, "__delta__", "false");
    lc_labels_sort(&ls);
    lc_status_t st = {0};
    if (series_labels_check(&ls, &st) != 0) {
        lc_labels_fini(&ls);
        return scr_fail(out, SCR_ERR_INVALID, "target labels: ", st.msg);
    }
    Types__V1__LabelPair *pairs = lc_xcalloc(ls.n + 1, sizeof(*pairs));
    Types__V1__LabelPair **ptrs = lc_xcalloc(ls.n + 1, sizeof(*ptrs));
    for (size_t i = 0; i < ls.n; i++) {
        types__v1__label_pair__init(&pairs[i]);
        pairs[i].name = ls.v[i].name;
        pairs[i].value = ls.v[i].value;
        ptrs[i] = &pairs[i];
    }
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = (char *)in->tenant;
    m.ingest_id = (ProtobufCBinaryData){LC_INGEST_ID_BYTES, id};
    m.received_unix_nanos = lc_realtime_ns();
    m.labels = ptrs;
    m.n_labels = ls.n;
    m.pprof = (ProtobufCBinaryData){pprof->len, pprof->data};
    m.time_nanos = p->time_nanos ? p->time_nanos : in->scrape_time_ns;
    m.delta_disabled = true;
    out->msg = lc_entry_pack(&m.base, in->lean, scr_heap_alloc, NULL, &out->len);
    out->partition = lc_transport_partition(in->tenant, in->series, in->partitions);
    memcpy(out->ingest_id, id, sizeof(out->ingest_id));
    lc_free(pairs);
    lc_free(ptrs);
    lc_labels_fini(&ls);
    return out->msg ? 0 : scr_fail(out, "internal", "", "cannot encode the stream entry");
}

/* ---------------------------------------------------------------- steps */

static int decode(const scr_process_in_t *in, lc_arena_t *arena, lc_pprof_t **p,
                  scr_process_out_t *out)
{
    if (!in->len)
        return scr_fail(out, SCR_ERR_EMPTY, "", "empty response body");
    lc_status_t st = {0};
    if (lc_pprof_decode(in->body, in->len, &in->limits, arena, p, &st) != 0)
        return scr_fail(out, strstr(st.msg, "too large") ? SCR_ERR_TOO_LARGE : SCR_ERR_INVALID, "",
                        st.msg);
    if (lc_pprof_validate(*p, &in->limits, &st) != 0)
        return scr_fail(out, SCR_ERR_INVALID, "invalid pprof: ", st.msg);
    return 0;
}

static int shape(const scr_process_in_t *in, lc_arena_t *arena, lc_pprof_t *p,
                 scr_process_out_t *out)
{
    int rc = scr_keep_sample_types(p, in->keep, in->n_keep, arena);
    if (rc == LC_EINPUT)
        return scr_fail(out, SCR_ERR_INVALID, "",
                        "keep_sample_type matches none of the profile's sample types");
    if (rc)
        return scr_fail(out, SCR_ERR_TOO_LARGE, "", "profile too large to process");
    out->delta = SCR_DELTA_READY;
    if (!in->cumulative || !in->delta)
        return 0;
    lc_pprof_index_t *ix;
    rc = lc_pprof_index_new(p, arena, &ix);
    if (!rc)
        rc = scr_delta_apply(in->delta, p, ix, arena, &out->delta);
    if (rc)
        return scr_fail(out, SCR_ERR_TOO_LARGE, "", "profile too large to subtract");
    return 0;
}

/* What the writer would refuse (lc_store_check_profile) is refused here, as
 * every receiver does: a published profile is one the writer can apply. */
static int writable(const scr_process_in_t *in, lc_arena_t *arena, const lc_pprof_t *p,
                    scr_process_out_t *out)
{
    lc_status_t st = {0};
    int64_t time_ns = p->time_nanos ? p->time_nanos : in->scrape_time_ns;
    if (lc_store_check_profile(p, in->tenant, time_ns, arena, NULL, &st) != 0)
        return scr_fail(out, SCR_ERR_INVALID, "invalid pprof: ", st.msg);
    return 0;
}

int scr_process(const scr_process_in_t *in, scr_process_out_t *out)
{
    memset(out, 0, sizeof(*out));
    /* The decoded form takes a few times the wire size; the arena's cap is
     * virtual until used. */
    lc_arena_t *arena = lc_arena_new(in->limits.max_decompressed_bytes * 8 + ((size_t)64 << 20));
    lc_pprof_t *p = NULL;
    int rc = decode(in, arena, &p, out);
    if (!rc)
        rc = shape(in, arena, p, out);
    if (!rc && out->delta == SCR_DELTA_READY)
        rc = writable(in, arena, p, out);
    if (!rc && out->delta == SCR_DELTA_READY) {
        lc_buf_t pprof;
        lc_buf_init(&pprof, in->limits.max_decompressed_bytes * 2);
        if (lc_pprof_encode(p, false, &pprof) != 0)
            rc = scr_fail(out, SCR_ERR_TOO_LARGE, "", "profile too large to re-encode");
        else
            rc = pack_message(in, p, &pprof, out);
        out->n_samples = p->n_sample;
        lc_buf_fini(&pprof);
    }
    lc_arena_free(arena);
    return rc;
}
