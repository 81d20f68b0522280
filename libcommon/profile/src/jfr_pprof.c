/*
 * jfr_pprof.c — the events of a JFR recording (read by jfr.c) become one
 * pprof per event kind, as Pyroscope's converter (grafana/jfr-parser, pprof
 * package) builds them (pyroscope-api.md §2.8):
 *   - execution samples count as cpu unless their thread state is
 *     STATE_SLEEPING (an unknown state does not count), and also as wall when
 *     the agent's `event` setting is "wall"; async-profiler's wall-clock
 *     samples count as wall (x samples) and, when running and event=wall, cpu;
 *     cpu and wall values are x period = 1e9 / sampleRate;
 *   - allocations in / outside TLAB and allocation samples: [1, bytes];
 *   - monitor enter and thread park: [1, duration in ticks, as recorded];
 *   - live objects [1]; malloc [1, size].
 * Samples carry the labels of their context id (the LabelsSnapshot part),
 * plus profile_id (span id, 16 hex digits) and span_name, for the events that
 * carry them (cpu, wall, TLAB allocations, monitor enter).
 *
 * Events are summed per (kind, stack trace, context, span) within a chunk and
 * resolved into locations when the chunk ends, while its pools are valid.
 * Ownership: the builders and the aggregation table are this call's; the
 * result's buffers are the caller's (lc_jfr_result_fini).
 * Threading: one conversion per call; its tables and builders' arrays come
 * from blocks the thread keeps between conversions (jfr.c, lc/jfr.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfr_int.h"
#include "lc/gz.h"
#include "lc/pprof.h"
#include "pprof_int.h"

/* The builders' arrays and maps are kept with the thread too (lc/jfr.h). */
static const lc_pprof__alloc_t kept_alloc = {jfr_keep_calloc, jfr_keep_grow, jfr_keep_free};

#define NS_PER_S 1000000000LL

/* ---------------------------------------------------------------- kinds */

static const struct {
    const char *metric;
    const char *types[2][2]; /* sample types: {type, unit} */
    const char *period[2];
} KINDS[LC_JFR_KINDS_] = {
    [LC_JFR_CPU] = {"process_cpu", {{"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"}},
    [LC_JFR_WALL] = {"wall", {{"wall", "nanoseconds"}}, {"wall", "nanoseconds"}},
    [LC_JFR_ALLOC_IN_TLAB] = {"memory",
                              {{"alloc_in_new_tlab_objects", "count"},
                               {"alloc_in_new_tlab_bytes", "bytes"}},
                              {"space", "bytes"}},
    [LC_JFR_ALLOC_OUTSIDE_TLAB] = {"memory",
                                   {{"alloc_outside_tlab_objects", "count"},
                                    {"alloc_outside_tlab_bytes", "bytes"}},
                                   {"space", "bytes"}},
    [LC_JFR_LOCK] = {"mutex",
                     {{"contentions", "count"}, {"delay", "nanoseconds"}},
                     {"mutex", "count"}},
    [LC_JFR_THREAD_PARK] = {"block",
                            {{"contentions", "count"}, {"delay", "nanoseconds"}},
                            {"block", "count"}},
    [LC_JFR_LIVE_OBJECT] = {"memory", {{"live", "count"}}, {"objects", "count"}},
    [LC_JFR_ALLOC_SAMPLE] = {"memory",
                             {{"alloc_sample_objects", "count"}, {"alloc_sample_bytes", "bytes"}},
                             {"space", "bytes"}},
    [LC_JFR_MALLOC] = {"memory", {{"malloc_objects", "count"}, {"malloc_bytes", "bytes"}}, {0}},
};

static size_t kind_width(lc_jfr_kind_t k)
{
    return KINDS[k].types[1][0] ? 2 : 1;
}

/* ---------------------------------------------------------------- LabelsSnapshot */

typedef struct id_str_s {
    int64_t id;
    const char *s;
    size_t order;
} id_str_t;

typedef struct id_ctx_s {
    int64_t id;
    size_t off, n; /* pairs in labels_kv */
    size_t order;
} id_ctx_t;

typedef struct snapshot_s {
    id_str_t *strs;
    size_t n_strs, cap_strs;
    id_ctx_t *ctxs;
    size_t n_ctxs, cap_ctxs;
    int64_t *kv; /* string ids: key, value, ... */
    size_t n_kv, cap_kv;
} snapshot_t;

typedef struct pb_s {
    const uint8_t *p, *end;
    bool err;
} pb_t;

static uint64_t pb_varint(pb_t *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            break;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80)
            return v;
    }
    r->err = true;
    return 0;
}

/* The next field: its number and, for length-delimited ones, a sub-reader. */
static bool pb_field(pb_t *r, uint32_t *num, uint64_t *v, pb_t *sub)
{
    if (r->err || r->p >= r->end)
        return false;
    uint64_t key = pb_varint(r);
    *num = (uint32_t)(key >> 3);
    /* a field of the wrong wire type reads as 0 / an empty message */
    *v = 0;
    *sub = (pb_t){r->p, r->p, false};
    switch (key & 7) {
    case 0:
        *v = pb_varint(r);
        break;
    case 1:
    case 5: {
        size_t n = (key & 7) == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            r->err = true;
        else
            r->p += n;
        *num = 0; /* never one of ours */
        break;
    }
    case 2: {
        uint64_t n = pb_varint(r);
        if (r->err || n > (uint64_t)(r->end - r->p)) {
            r->err = true;
            break;
        }
        *sub = (pb_t){r->p, r->p + n, false};
        r->p += n;
        break;
    }
    default:
        r->err = true;
    }
    return !r->err;
}

static bool snap_string(snapshot_t *s, pb_t e, lc_arena_t *arena)
{
    int64_t id = 0;
    const char *str = "";
    uint32_t num;
    uint64_t v;
    pb_t sub;
    while (pb_field(&e, &num, &v, &sub)) {
        if (num == 1)
            id = (int64_t)v;
        else if (num == 2 &&
                 !(str = lc_arena_strndup(arena, (const char *)sub.p, (size_t)(sub.end - sub.p))))
            return false;
    }
    if (e.err)
        return false;
    s->strs = jfr_keep_grow(s->strs, &s->cap_strs, s->n_strs + 1, sizeof(*s->strs));
    s->strs[s->n_strs] = (id_str_t){id, str, s->n_strs};
    s->n_strs++;
    return true;
}

static bool snap_context(snapshot_t *s, pb_t e)
{
    id_ctx_t c = {.off = s->n_kv / 2, .order = s->n_ctxs};
    uint32_t num;
    uint64_t v;
    pb_t sub;
    while (pb_field(&e, &num, &v, &sub)) {
        if (num == 1) {
            c.id = (int64_t)v;
            continue;
        }
        if (num != 2)
            continue;
        pb_t lab, pair;
        while (pb_field(&sub, &num, &v, &lab)) { /* Context: 1 = labels map entries */
            if (num != 1)
                continue;
            int64_t kv[2] = {0, 0};
            while (pb_field(&lab, &num, &v, &pair)) {
                if (num == 1 || num == 2)
                    kv[num - 1] = (int64_t)v;
            }
            if (lab.err || s->n_kv / 2 >= LC_JFR_MAX_CONTEXTS * 4)
                return false;
            s->kv = jfr_keep_grow(s->kv, &s->cap_kv, s->n_kv + 2, sizeof(*s->kv));
            s->kv[s->n_kv++] = kv[0];
            s->kv[s->n_kv++] = kv[1];
            c.n++;
        }
        if (sub.err)
            return false;
    }
    if (e.err)
        return false;
    s->ctxs = jfr_keep_grow(s->ctxs, &s->cap_ctxs, s->n_ctxs + 1, sizeof(*s->ctxs));
    s->ctxs[s->n_ctxs++] = c;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    const id_str_t *x = a, *y = b;
    return x->id != y->id ? (x->id < y->id ? -1 : 1) : (x->order < y->order ? -1 : 1);
}

static int cmp_ctx(const void *a, const void *b)
{
    const id_ctx_t *x = a, *y = b;
    return x->id != y->id ? (x->id < y->id ? -1 : 1) : (x->order < y->order ? -1 : 1);
}

/* Sorted by id; of repeated map keys the last one wins, as in protobuf. */
static void snap_sort(snapshot_t *s)
{
    if (s->n_strs) /* an empty snapshot has NULL arrays, which qsort may not take */
        qsort(s->strs, s->n_strs, sizeof(*s->strs), cmp_str);
    if (s->n_ctxs)
        qsort(s->ctxs, s->n_ctxs, sizeof(*s->ctxs), cmp_ctx);
    size_t n = 0;
    for (size_t i = 0; i < s->n_strs; i++) {
        if (n && s->strs[n - 1].id == s->strs[i].id)
            n--;
        s->strs[n++] = s->strs[i];
    }
    s->n_strs = n;
    n = 0;
    for (size_t i = 0; i < s->n_ctxs; i++) {
        if (n && s->ctxs[n - 1].id == s->ctxs[i].id)
            n--;
        s->ctxs[n++] = s->ctxs[i];
    }
    s->n_ctxs = n;
}

static int snap_parse(snapshot_t *s, const uint8_t *data, size_t len, lc_arena_t *arena,
                      lc_status_t *st)
{
    pb_t r = {data, data + len, false}, e;
    uint32_t num;
    uint64_t v;
    while (pb_field(&r, &num, &v, &e)) {
        if (s->n_strs + s->n_ctxs >= LC_JFR_MAX_CONTEXTS)
            return lc_status_set_http(st, 413, LC_CODE_INVALID_ARGUMENT,
                                      "profile too large: jfr labels (limit %zu entries)",
                                      LC_JFR_MAX_CONTEXTS);
        if ((num == 1 && !snap_context(s, e)) || (num == 2 && !snap_string(s, e, arena)))
            r.err = true;
    }
    if (r.err)
        return lc_status_set_http(st, 422, LC_CODE_INVALID_ARGUMENT,
                                  "invalid labels: not a LabelsSnapshot protobuf");
    snap_sort(s);
    return 0;
}

static const char *snap_str(const snapshot_t *s, int64_t id)
{
    id_str_t key = {.id = id};
    size_t lo = 0, hi = s->n_strs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->strs[mid].id < key.id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_strs && s->strs[lo].id == id ? s->strs[lo].s : "";
}

static const id_ctx_t *snap_ctx(const snapshot_t *s, int64_t id)
{
    size_t lo = 0, hi = s->n_ctxs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ctxs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_ctxs && s->ctxs[lo].id == id ? &s->ctxs[lo] : NULL;
}

static void snap_free(snapshot_t *s)
{
    jfr_keep_free(s->strs);
    jfr_keep_free(s->ctxs);
    jfr_keep_free(s->kv);
}

/* ---------------------------------------------------------------- aggregation */

typedef struct agg_s {
    uint64_t stack, ctx, span, span_name;
    uint32_t kind;
    bool used;
    int64_t v[2];
} agg_t;

/* ---------------------------------------------------------------- id cache */

/* (method, line) -> a builder id, one map per kind; id 0 marks a free
 * slot. 16 bytes a slot, so the lookup done for every frame of every
 * sample touches one cache line. (Lines are the uint32 Pyroscope reads.) */
typedef struct identry_s {
    uint64_t method;
    uint32_t line;
    uint32_t id; /* builder ids stay below UINT32_MAX / 2 */
} identry_t;

typedef struct methods_map_s {
    identry_t *e;
    size_t cap, n;
} methods_map_t;

static inline size_t methods_slot(const methods_map_t *m, uint64_t method, uint32_t line)
{
    uint64_t h = (method * 0x9E3779B97F4A7C15ull) ^ (line * 0xff51afd7ed558ccdull);
    size_t i = (size_t)(h >> 20) & (m->cap - 1);
    while (m->e[i].id && (m->e[i].method != method || m->e[i].line != line))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void methods_grow(methods_map_t *m)
{
    methods_map_t old = *m;
    m->cap = old.cap ? old.cap * 2 : 1024;
    m->e = jfr_keep_calloc(m->cap, sizeof(*m->e));
    for (size_t i = 0; i < old.cap; i++) {
        if (old.e[i].id)
            m->e[methods_slot(m, old.e[i].method, old.e[i].line)] = old.e[i];
    }
    jfr_keep_free(old.e);
}

/* The entry of (method, line): its id 0 when absent, for the caller to
 * fill with methods_set; room for one more. */
static inline identry_t *methods_find(methods_map_t *m, uint64_t method, uint32_t line)
{
    if ((m->n + 1) * 2 > m->cap)
        methods_grow(m);
    return &m->e[methods_slot(m, method, line)];
}

static void methods_set(methods_map_t *m, identry_t *at, uint64_t method, uint32_t line,
                        uint64_t id)
{
    *at = (identry_t){method, line, (uint32_t)id};
    m->n++;
}

static void methods_clear(methods_map_t *m)
{
    if (m->cap)
        memset(m->e, 0, m->cap * sizeof(*m->e));
    m->n = 0;
}

/* A key of at most 40 bits -> a builder id below 2^24, in one 8-byte slot
 * (the id in the top 24 bits; 0 marks a free slot), half the bytes of a
 * methods_map_t entry: the frame lookups of a large recording miss the
 * cache, and fewer bytes miss it less (goland-multichunk's maps hold 20 k
 * keys a kind). Location ids stay below 2^24: a builder makes one per
 * (function, line) of the frames held, at most LC_JFR_MAX_FRAMES (2^23). */
#define CKEY_BITS 40
#define CKEY_MASK ((1ull << CKEY_BITS) - 1)
#define CID_LIMIT (1ull << (64 - CKEY_BITS))

typedef struct cmap_s {
    uint64_t *e;
    size_t cap, n;
} cmap_t;

static inline size_t cmap_home(const cmap_t *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
}

/* The id of key, 0 when absent (or the map empty). */
static inline uint64_t cmap_get(const cmap_t *m, uint64_t key)
{
    if (!m->cap)
        return 0;
    for (size_t i = cmap_home(m, key);; i = (i + 1) & (m->cap - 1)) {
        uint64_t e = m->e[i];
        if (!e || (e & CKEY_MASK) == key)
            return e >> CKEY_BITS;
    }
}

static void cmap_insert(cmap_t *m, uint64_t e)
{
    size_t i = cmap_home(m, e & CKEY_MASK);
    while (m->e[i])
        i = (i + 1) & (m->cap - 1);
    m->e[i] = e;
}

/* key (absent) -> id; an id past CID_LIMIT is not kept (never met, see
 * above: the caller then asks the builder again, which finds it). */
static void cmap_put(cmap_t *m, uint64_t key, uint64_t id)
{
    if (id >= CID_LIMIT)
        return;
    if ((m->n + 1) * 2 > m->cap) {
        cmap_t old = *m;
        m->cap = old.cap ? old.cap * 2 : 1024;
        m->e = jfr_keep_calloc(m->cap, sizeof(*m->e));
        for (size_t i = 0; i < old.cap; i++) {
            if (old.e[i])
                cmap_insert(m, old.e[i]);
        }
        jfr_keep_free(old.e);
    }
    cmap_insert(m, key | id << CKEY_BITS);
    m->n++;
}

static void cmap_clear(cmap_t *m)
{
    if (m->cap)
        memset(m->e, 0, m->cap * sizeof(*m->e));
    m->n = 0;
}

typedef struct conv_s {
    const lc_jfr_params_t *params;
    int64_t period;
    lc_arena_t *arena;
    lc_status_t *st;
    snapshot_t snap;
    lc_pprof_builder_t *b[LC_JFR_KINDS_];
    uint64_t mapping[LC_JFR_KINDS_];
    agg_t *agg;
    size_t cap_agg, n_agg;
    bool resolved; /* the aggregates (and maps below) are of a chunk already resolved */
    const char *event;
    bool wall; /* event is "wall" */
    size_t n_events;
    uint64_t *locs;
    size_t cap_locs;
    /* on_chunk_end's: stack order << 32 | aggregate slot (cap_agg is at
     * most 2 x LC_JFR_MAX_EVENTS, below 2^32) */
    uint64_t *order, *sorted;
    size_t cap_order, cap_sorted;
    uint32_t *counts; /* order_aggregates' counting sort */
    size_t cap_counts;
    const char **kv;
    size_t cap_kv;
    /* (kind, method) -> pprof function id and (kind, method, line) ->
     * location id, so the builder hashes a frame's name and location once,
     * not once per frame of every sample. Method ids belong to a chunk: the
     * maps are kept into the next one only while jfr_renames says every
     * method named so far keeps its name (renames: its count they hold for). */
    methods_map_t fns[LC_JFR_KINDS_], locs_of[LC_JFR_KINDS_];
    /* locs_of's pairs of a method id below 2^24 and a line below 2^16 (the
     * JDK's nearly all), as method | line << 24 */
    cmap_t pairs_of[LC_JFR_KINDS_];
    uint64_t renames;
    /* (kind, a located frame's key, jfr_frame_key) -> location id: a
     * located stack's frames are looked up undecoded, keys of 5 bytes or
     * fewer (the JDK's nearly all) in short_keys_of, the others in keys_of
     * (as method = the key, line 0) */
    cmap_t short_keys_of[LC_JFR_KINDS_];
    methods_map_t keys_of[LC_JFR_KINDS_];
} conv_t;

static uint64_t agg_hash(const agg_t *k)
{
    uint64_t h = (k->stack ^ (uint64_t)k->kind << 59) * 0xff51afd7ed558ccdull;
    h = (h ^ k->ctx) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ k->span) * 0xff51afd7ed558ccdull;
    h = (h ^ k->span_name) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static agg_t *agg_find(conv_t *cv, const agg_t *k);
static void chunk_reset(conv_t *cv, const jfr_t *j);

static void agg_grow(conv_t *cv)
{
    agg_t *old = cv->agg;
    size_t old_cap = cv->cap_agg;
    cv->cap_agg = old_cap ? old_cap * 2 : 256; /* a small recording pays only for what it has */
    cv->agg = jfr_keep_calloc(cv->cap_agg, sizeof(*cv->agg));
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].used)
            *agg_find(cv, &old[i]) = old[i];
    }
    jfr_keep_free(old);
}

static agg_t *agg_find(conv_t *cv, const agg_t *k)
{
    size_t i = agg_hash(k) & (cv->cap_agg - 1);
    for (;; i = (i + 1) & (cv->cap_agg - 1)) {
        agg_t *e = &cv->agg[i];
        if (!e->used || (e->kind == k->kind && e->stack == k->stack && e->ctx == k->ctx &&
                         e->span == k->span && e->span_name == k->span_name))
            return e;
    }
}

static void agg_add(conv_t *cv, const jfr_t *j, lc_jfr_kind_t kind, const jfr_event_t *ev,
                    bool correlated, int64_t v0, int64_t v1)
{
    if (cv->resolved)
        chunk_reset(cv, j);
    if ((cv->n_agg + 1) * 2 > cv->cap_agg)
        agg_grow(cv);
    agg_t k = {.stack = ev->stack, .kind = kind};
    if (correlated) {
        k.ctx = ev->context_id;
        k.span = ev->span_id;
        k.span_name = ev->span_name;
    }
    agg_t *e = agg_find(cv, &k);
    if (!e->used) {
        *e = k;
        e->used = true;
        cv->n_agg++;
    }
    e->v[0] = (int64_t)((uint64_t)e->v[0] + (uint64_t)v0);
    e->v[1] = (int64_t)((uint64_t)e->v[1] + (uint64_t)v1);
    if (!cv->b[kind]) { /* a kind exists once one of its events was seen */
        lc_pprof_builder_t *b = cv->b[kind] = lc_pprof__builder_new_alloc(&kept_alloc);
        for (size_t t = 0; t < kind_width(kind); t++)
            lc_pprof_builder_sample_type(b, KINDS[kind].types[t][0], KINDS[kind].types[t][1]);
        if (KINDS[kind].period[0])
            lc_pprof_builder_period(b, KINDS[kind].period[0], KINDS[kind].period[1],
                                    kind == LC_JFR_CPU || kind == LC_JFR_WALL ? cv->period : 0);
        lc_pprof_builder_times(b, cv->params->start_ns, cv->params->end_ns - cv->params->start_ns);
        cv->mapping[kind] = lc_pprof_builder_mapping(b, 0, 0, 0, "", "", true);
    }
}

/* ---------------------------------------------------------------- events */

static int64_t mul_period(const conv_t *cv, int64_t v)
{
    return (int64_t)((uint64_t)v * (uint64_t)cv->period);
}

static int jfr_on_event(jfr_t *j, const jfr_event_t *ev, void *data)
{
    conv_t *cv = data;
    jfr_state_t state;
    cv->n_events++;
    switch (ev->kind) {
    case JFR_EV_EXECUTION_SAMPLE:
        state = jfr_thread_state(j, ev->state);
        if (state != JFR_STATE_UNKNOWN && state != JFR_STATE_SLEEPING)
            agg_add(cv, j, LC_JFR_CPU, ev, true, mul_period(cv, 1), 0);
        if (cv->wall)
            agg_add(cv, j, LC_JFR_WALL, ev, true, mul_period(cv, 1), 0);
        break;
    case JFR_EV_WALL_CLOCK_SAMPLE:
        state = jfr_thread_state(j, ev->state);
        if (state == JFR_STATE_RUNNABLE && cv->wall)
            agg_add(cv, j, LC_JFR_CPU, ev, true, mul_period(cv, ev->value), 0);
        agg_add(cv, j, LC_JFR_WALL, ev, true, mul_period(cv, ev->value), 0);
        break;
    case JFR_EV_ALLOC_IN_NEW_TLAB:
        agg_add(cv, j, LC_JFR_ALLOC_IN_TLAB, ev, true, 1, ev->value);
        break;
    case JFR_EV_ALLOC_OUTSIDE_TLAB:
        agg_add(cv, j, LC_JFR_ALLOC_OUTSIDE_TLAB, ev, true, 1, ev->value);
        break;
    case JFR_EV_ALLOC_SAMPLE:
        agg_add(cv, j, LC_JFR_ALLOC_SAMPLE, ev, false, 1, ev->value);
        break;
    case JFR_EV_MONITOR_ENTER:
        agg_add(cv, j, LC_JFR_LOCK, ev, true, 1, ev->value);
        break;
    case JFR_EV_THREAD_PARK:
        agg_add(cv, j, LC_JFR_THREAD_PARK, ev, false, 1, ev->value);
        break;
    case JFR_EV_LIVE_OBJECT:
        agg_add(cv, j, LC_JFR_LIVE_OBJECT, ev, false, 1, 0);
        break;
    case JFR_EV_MALLOC:
        agg_add(cv, j, LC_JFR_MALLOC, ev, false, 1, ev->value);
        break;
    case JFR_EV_ACTIVE_SETTING:
        if (!strcmp(ev->name, "event")) {
            cv->event = ev->setting;
            cv->wall = !strcmp(cv->event, "wall"); /* asked for every sample */
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---------------------------------------------------------------- resolving a chunk */

/* A span id as "%016llx" writes it, without printf's cost (a fifth of a
 * small recording's conversion when its samples carry spans:
 * new_spancontext); NULL when the arena is full. */
static const char *span_hex(lc_arena_t *arena, uint64_t span)
{
    char *s = lc_arena_alloc(arena, 17);
    if (!s)
        return NULL;
    for (int i = 15; i >= 0; i--, span >>= 4)
        s[i] = "0123456789abcdef"[span & 15];
    s[16] = 0;
    return s;
}

/* The labels of a sample, as key/value pointers in cv->kv; returns pairs. */
static size_t sample_labels(conv_t *cv, const agg_t *a)
{
    const id_ctx_t *c = a->ctx ? snap_ctx(&cv->snap, (int64_t)a->ctx) : NULL;
    size_t n = c ? c->n : 0, k = 0;
    cv->kv = jfr_keep_grow(cv->kv, &cv->cap_kv, 2 * n + 4, sizeof(*cv->kv));
    for (size_t i = 0; i < n; i++) {
        const char *key = snap_str(&cv->snap, cv->snap.kv[2 * (c->off + i)]);
        const char *val = snap_str(&cv->snap, cv->snap.kv[2 * (c->off + i) + 1]);
        if (*key && *val) { /* an empty label is no label */
            cv->kv[2 * k] = key;
            cv->kv[2 * k++ + 1] = val;
        }
    }
    const char *span_id = a->span ? span_hex(cv->arena, a->span) : NULL;
    if (span_id) {
        cv->kv[2 * k] = "profile_id";
        cv->kv[2 * k++ + 1] = span_id;
    }
    const char *span_name = a->span_name ? snap_str(&cv->snap, (int64_t)a->span_name) : "";
    if (*span_name) {
        cv->kv[2 * k] = "span_name";
        cv->kv[2 * k++ + 1] = span_name;
    }
    return k;
}

/* The builder's function id of a method for a kind; 0 when the method or
 * its class is unknown (the frame is dropped, as in Pyroscope). */
static uint64_t function_of(conv_t *cv, jfr_t *j, uint32_t kind, uint64_t method)
{
    identry_t *at = methods_find(&cv->fns[kind], method, 0);
    if (at->id)
        return at->id;
    const char *name = jfr_method_name(j, method);
    uint64_t id = name ? lc_pprof_builder_function(cv->b[kind], name, "", "", 0) : 0;
    if (id)
        methods_set(&cv->fns[kind], at, method, 0, id);
    return id;
}

/* The builder's location id of a frame, which the builder makes once per
 * (function, line); 0 when its method is unknown. */
static uint64_t make_location(conv_t *cv, jfr_t *j, uint32_t kind, const jfr_frame_t *fr)
{
    uint64_t fn = function_of(cv, j, kind, fr->method);
    if (!fn)
        return 0;
    lc_pprof_line_t line = {fn, fr->line};
    return lc_pprof_builder_location(cv->b[kind], cv->mapping[kind], 0, &line, 1);
}

/* make_location for a frame not in locs_of yet; at: its entry there. */
static uint64_t new_location(conv_t *cv, jfr_t *j, uint32_t kind, const jfr_frame_t *fr,
                             identry_t *at)
{
    uint64_t id = make_location(cv, j, kind, fr);
    /* function_of may have grown its own map, never this one: at still holds */
    if (id)
        methods_set(&cv->locs_of[kind], at, fr->method, (uint32_t)fr->line, id);
    return id;
}

/* A short pair's location: cmap_get missed. */
static uint64_t new_pair_location(conv_t *cv, jfr_t *j, uint32_t kind, const jfr_frame_t *fr,
                                  uint64_t pair)
{
    uint64_t id = make_location(cv, j, kind, fr);
    if (id)
        cmap_put(&cv->pairs_of[kind], pair, id);
    return id;
}

/* The location id of a decoded frame, looked up by (method, line) first
 * (inlined: done for every frame of a copied stack). */
static inline __attribute__((always_inline)) uint64_t
location_of(conv_t *cv, jfr_t *j, uint32_t kind, const jfr_frame_t *fr)
{
    if (fr->method < (1ull << 24) && (uint64_t)fr->line < (1ull << 16)) {
        uint64_t pair = fr->method | (uint64_t)fr->line << 24;
        uint64_t id = cmap_get(&cv->pairs_of[kind], pair);
        return id ? id : new_pair_location(cv, j, kind, fr, pair);
    }
    identry_t *at = methods_find(&cv->locs_of[kind], fr->method, (uint32_t)fr->line);
    return at->id ? at->id : new_location(cv, j, kind, fr, at);
}

/* A frame key's location id the first time a kind meets the key: the frame
 * decoded and looked up by (method, line), made when new; 0 for an unknown
 * method. Through locs_of, so that a location made for a copied stack (a
 * smaller pool of another chunk) or for another key of the same pair is
 * found, not asked of the builder again. */
static uint64_t key_location(conv_t *cv, jfr_t *j, uint32_t kind, const uint8_t *p, size_t fields,
                             uint64_t key)
{
    jfr_frame_t fr;
    jfr_frame_decode(p, fields, &fr);
    uint64_t loc = location_of(cv, j, kind, &fr);
    if (loc && key <= CKEY_MASK)
        cmap_put(&cv->short_keys_of[kind], key, loc);
    else if (loc)
        methods_set(&cv->keys_of[kind], methods_find(&cv->keys_of[kind], key, 0), key, 0, loc);
    return loc;
}

/* The location ids of a located stack's n frames into cv->locs; returns
 * how many (a frame of an unknown method is dropped). A frame's key is
 * looked up before anything is decoded: a recording names a few thousand
 * (method, line) pairs in millions of frames. Inlined twice, once for
 * frames of 4 fields (method, line, bytecode index, type: the JDK's and
 * async-profiler's), whose ends are then found without a loop. */
static inline __attribute__((always_inline)) size_t
keyed_locations(conv_t *cv, jfr_t *j, uint32_t kind, const uint8_t *p, size_t n, size_t fields)
{
    methods_map_t *m = &cv->keys_of[kind];
    const cmap_t *c = &cv->short_keys_of[kind];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t key, loc;
        const uint8_t *next = jfr_frame_key(p, fields, &key);
        if (next) {
            loc = key <= CKEY_MASK ? cmap_get(c, key)
                  : m->cap         ? m->e[methods_slot(m, key, 0)].id
                                   : 0;
            if (!loc)
                loc = key_location(cv, j, kind, p, fields, key);
            p = next;
        } else { /* longer than a word: decoded */
            jfr_frame_t fr;
            p = jfr_frame_decode(p, fields, &fr);
            loc = location_of(cv, j, kind, &fr);
        }
        if (loc) /* else an unknown method or class: the frame is dropped */
            cv->locs[k++] = loc;
    }
    return k;
}

static void resolve_sample(conv_t *cv, jfr_t *j, const agg_t *a, uint32_t stack_order)
{
    const uint8_t *raw;
    size_t n, fields;
    const jfr_frame_t *fr = NULL;
    if (!jfr_stack_raw(j, stack_order, &raw, &n, &fields) &&
        !(fr = jfr_stack_at(j, stack_order, &n)))
        return; /* Pyroscope drops samples of unknown stacks */
    lc_pprof_builder_t *b = cv->b[a->kind];
    cv->locs = jfr_keep_grow(cv->locs, &cv->cap_locs, n ? n : 1, sizeof(*cv->locs));
    size_t k = 0;
    if (!fr) {
        k = fields == 4 ? keyed_locations(cv, j, a->kind, raw, n, 4)
                        : keyed_locations(cv, j, a->kind, raw, n, fields);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t loc = location_of(cv, j, a->kind, &fr[i]);
            if (loc) /* else an unknown method or class: the frame is dropped */
                cv->locs[k++] = loc;
        }
    }
    size_t pairs = sample_labels(cv, a);
    lc_pprof_builder_sample(b, cv->locs, k, a->v, pairs ? cv->kv : NULL, pairs);
}

static int cmp_stack_order(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* cv->order's n entries (stack order << 32 | slot, slots ascending) by
 * stack order, into cv->sorted: counted, since places are below
 * jfr_stack_places (UINT32_MAX, an unknown stack, counts as that), and
 * stable, so equal orders keep their slots' order, as the sort of whole
 * entries did. */
static const uint64_t *count_sort(conv_t *cv, size_t n, size_t places)
{
    cv->counts = jfr_keep_grow(cv->counts, &cv->cap_counts, places + 2, sizeof(*cv->counts));
    cv->sorted = jfr_keep_grow(cv->sorted, &cv->cap_sorted, n ? n : 1, sizeof(*cv->sorted));
    memset(cv->counts, 0, (places + 2) * sizeof(*cv->counts));
    for (size_t k = 0; k < n; k++) {
        uint32_t o = (uint32_t)(cv->order[k] >> 32);
        cv->counts[(o < places ? o : places) + 1]++;
    }
    for (size_t p = 1; p < places + 2; p++)
        cv->counts[p] += cv->counts[p - 1];
    for (size_t k = 0; k < n; k++) {
        uint32_t o = (uint32_t)(cv->order[k] >> 32);
        cv->sorted[cv->counts[o < places ? o : places]++] = cv->order[k];
    }
    return cv->sorted;
}

/* The aggregates' entries by stack order: counted when the places are
 * not many more than the aggregates (a chunk of few events after large
 * pools would clear its counts for nothing), else sorted. */
static const uint64_t *order_aggregates(conv_t *cv, const jfr_t *j, size_t n)
{
    size_t places = jfr_stack_places(j);
    if (places <= 4 * n + 1024)
        return count_sort(cv, n, places);
    qsort(cv->order, n, sizeof(*cv->order), cmp_stack_order);
    return cv->order;
}

/* The aggregates are resolved in the order their stacks lie in the pool,
 * not the hash table's: a large recording's frames are then read front to
 * back (a stack's kinds, contexts and spans one after the other), where the
 * table's order missed the cache on each stack (goland.jfr: 37 k stacks
 * over 20 MB). */
static int on_chunk_end(jfr_t *j, void *data)
{
    conv_t *cv = data;
    if (cv->resolved)
        return 0; /* no event since the last chunk: its samples are in already */
    cv->order =
        jfr_keep_grow(cv->order, &cv->cap_order, cv->n_agg ? cv->n_agg : 1, sizeof(*cv->order));
    size_t n = 0;
    for (size_t i = 0; i < cv->cap_agg && n < cv->n_agg; i++) {
        if (cv->agg[i].used) /* unknown stacks (UINT32_MAX) last: they are dropped */
            cv->order[n++] = (uint64_t)jfr_stack_order(j, cv->agg[i].stack) << 32 | i;
    }
    const uint64_t *order = order_aggregates(cv, j, n);
    for (size_t k = 0; k < n; k++)
        resolve_sample(cv, j, &cv->agg[(uint32_t)order[k]], (uint32_t)(order[k] >> 32));
    cv->resolved = true;
    return 0;
}

/* The first event after a chunk was resolved: its aggregates are cleared
 * now, not at the chunk's end, so a recording of one chunk never pays for
 * it; and the maps of method ids too when a method named before has another
 * name in this chunk (the next chunk's pools are read by now). */
static void chunk_reset(conv_t *cv, const jfr_t *j)
{
    if (cv->cap_agg)
        memset(cv->agg, 0, cv->cap_agg * sizeof(*cv->agg));
    cv->n_agg = 0;
    cv->resolved = false;
    if (cv->renames == jfr_renames(j))
        return;
    cv->renames = jfr_renames(j);
    for (size_t k = 0; k < LC_JFR_KINDS_; k++) {
        methods_clear(&cv->fns[k]);
        methods_clear(&cv->locs_of[k]);
        methods_clear(&cv->keys_of[k]);
        cmap_clear(&cv->pairs_of[k]);
        cmap_clear(&cv->short_keys_of[k]);
    }
}

/* ---------------------------------------------------------------- the call */

static int gunzip_part(const uint8_t **data, size_t *len, size_t cap, lc_buf_t *keep,
                       const char *what, lc_status_t *st)
{
    if (!lc_gz_is_gzip(*data, *len))
        return 0;
    int rc = lc_gunzip(*data, *len, cap, keep);
    if (rc == LC_ETOOBIG)
        return lc_status_set_http(st, 413, LC_CODE_INVALID_ARGUMENT,
                                  "profile too large: %s over %zu bytes decompressed", what, cap);
    if (rc != 0)
        return lc_status_set_http(st, 422, LC_CODE_INVALID_ARGUMENT, "invalid %s: bad gzip", what);
    *data = keep->data;
    *len = keep->len;
    return 0;
}

static int encode_all(conv_t *cv, lc_jfr_result_t *out)
{
    for (int k = 0; k < LC_JFR_KINDS_; k++) {
        if (!cv->b[k])
            continue;
        lc_jfr_profile_t *p = &out->profiles[out->n++];
        p->kind = (lc_jfr_kind_t)k;
        p->metric = KINDS[k].metric;
        lc_buf_init(&p->pprof, LC_BUF_UNLIMITED);
        if (lc_pprof_builder_sum_wrapped(cv->b[k]))
            return lc_status_set(cv->st, LC_CODE_INVALID_ARGUMENT,
                                 "jfr %s profile: the values of a repeated stack sum past int64",
                                 KINDS[k].metric);
        if (lc_pprof_builder_encode(cv->b[k], false, &p->pprof) != 0)
            return lc_status_set_http(cv->st, 413, LC_CODE_INVALID_ARGUMENT,
                                      "profile too large: jfr %s profile", KINDS[k].metric);
    }
    return 0;
}

static void conv_fini(conv_t *cv)
{
    for (int k = 0; k < LC_JFR_KINDS_; k++)
        lc_pprof_builder_free(cv->b[k]);
    snap_free(&cv->snap);
    jfr_keep_free(cv->agg);
    jfr_keep_free(cv->locs);
    jfr_keep_free(cv->order);
    jfr_keep_free(cv->sorted);
    jfr_keep_free(cv->counts);
    jfr_keep_free(cv->kv);
    for (size_t k = 0; k < LC_JFR_KINDS_; k++) {
        jfr_keep_free(cv->fns[k].e);
        jfr_keep_free(cv->locs_of[k].e);
        jfr_keep_free(cv->keys_of[k].e);
        jfr_keep_free(cv->pairs_of[k].e);
        jfr_keep_free(cv->short_keys_of[k].e);
    }
}

int lc_jfr_to_pprof(const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                    const lc_jfr_params_t *params, lc_arena_t *arena, lc_jfr_result_t *out,
                    lc_status_t *st)
{
    memset(out, 0, sizeof(*out));
    out->event = "";
    conv_t cv = {.params = params, .arena = arena, .st = st, .event = ""};
    cv.period = params->sample_rate ? NS_PER_S / (int64_t)params->sample_rate : 0;
    lc_buf_t jfr_buf, labels_buf;
    lc_buf_init(&jfr_buf, LC_JFR_MAX_BYTES);
    lc_buf_init(&labels_buf, LC_JFR_MAX_LABELS_BYTES);
    int rc = gunzip_part(&jfr, &jfr_len, LC_JFR_MAX_BYTES, &jfr_buf, "jfr", st);
    if (rc == 0 && labels && labels_len)
        rc = gunzip_part(&labels, &labels_len, LC_JFR_MAX_LABELS_BYTES, &labels_buf, "labels", st);
    if (rc == 0 && labels && labels_len)
        rc = snap_parse(&cv.snap, labels, labels_len, arena, st);
    if (rc == 0)
        rc = jfr_read(jfr, jfr_len, params->lazy_stacks_min_bytes, arena, jfr_on_event,
                      on_chunk_end, &cv, st);
    if (rc == 0)
        rc = encode_all(&cv, out);
    out->event = cv.event;
    out->n_events = cv.n_events;
    conv_fini(&cv);
    lc_buf_fini(&jfr_buf);
    lc_buf_fini(&labels_buf);
    if (rc != 0)
        lc_jfr_result_fini(out);
    return rc == 0 ? 0 : -1;
}

void lc_jfr_result_fini(lc_jfr_result_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        lc_buf_fini(&r->profiles[i].pprof);
    r->n = 0;
}
