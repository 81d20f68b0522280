/*
 * store_write.c — write batches: turns a decoded pprof into block records.
 *
 * A batch holds one LMDB write transaction per block it touched. Writing a
 * profile interns its symbols and stacks (store_stacks.c), sums samples per
 * (node, span id), and stores them sorted and delta-varint encoded under
 * (series, time, seq); a new series also gets its postings. New stack nodes
 * stay in memory until commit, when the touched node chunks and the meta
 * record are written (store_wstate.c).
 */
#include <stdlib.h>
#include <string.h>

#include "lc/log.h"
#include "store_int.h"

typedef struct txn_block_s {
    store_block_t *b;
    MDB_txn *txn;
    bool wrote; /* profiles or symbols were added: flush on commit */
} txn_block_t;

typedef struct wsample_s {
    uint32_t node;
    uint64_t span;
    int64_t value;
} wsample_t;

struct lc_store_txn_s {
    lc_store_t *s;
    txn_block_t *blocks;
    size_t n_blocks, cap_blocks;
    store_resolver_t res;
    const lc_pprof_t *pinned; /* lc_store_write_pin */
    const lc_pprof_index_t *pinned_ix;
    wsample_t *samples; /* per-write scratch */
    size_t samples_cap;
    uint32_t *picked; /* pprof sample index per wsample */
    size_t picked_cap;
    wsample_t *sort_tmp;
    size_t sort_tmp_cap;
    lc_buf_t enc, key;
    /* Keys of the profiles written since the last lc_store_write_applied:
     * what that message wrote, recorded with its ingest id. */
    lc_buf_t written;
    const store_block_t *written_block;
    bool written_mixed; /* they went to more than one block */
};

/* Everything one lc_store_write_profile call works with. */
typedef struct wctx_s {
    lc_store_txn_t *t;
    txn_block_t *tb;
    store_wstate_t *ws;
    const lc_pprof_t *p;
    const lc_pprof_index_t *ix;
} wctx_t;

/* ---------------------------------------------------------------- batch */

int lc_store_write_begin(lc_store_t *s, lc_store_txn_t **out)
{
    pthread_mutex_lock(&s->mu);
    bool busy = s->writing;
    s->writing = true;
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        LC_LOG_ERROR("store: a write batch is already open");
        return LC_EINPUT;
    }
    lc_store_txn_t *t = lc_xcalloc(1, sizeof(*t));
    t->s = s;
    lc_store__resolver_init(&t->res);
    lc_buf_init(&t->enc, LC_BUF_UNLIMITED);
    lc_buf_init(&t->key, LC_BUF_UNLIMITED);
    lc_buf_init(&t->written, LC_BUF_UNLIMITED);
    *out = t;
    return 0;
}

static void txn_free(lc_store_txn_t *t)
{
    lc_store_t *s = t->s;
    lc_store__resolver_fini(&t->res);
    lc_buf_fini(&t->enc);
    lc_buf_fini(&t->key);
    lc_buf_fini(&t->written);
    lc_free(t->samples);
    lc_free(t->picked);
    lc_free(t->sort_tmp);
    lc_free(t->blocks);
    lc_free(t);
    pthread_mutex_lock(&s->mu);
    s->writing = false;
    pthread_mutex_unlock(&s->mu);
}

/* Aborts one block's transaction. Its in-memory maps may hold symbols the
 * rollback just removed, so they go too (rebuilt from LMDB on next use). */
static void txn_block_abort(lc_store_txn_t *t, txn_block_t *tb)
{
    mdb_txn_abort(tb->txn);
    if (tb->wrote) {
        lc_store__wstate_free(tb->b->ws);
        tb->b->ws = NULL;
    }
    lc_store__release(t->s, tb->b);
}

static int txn_block_commit(lc_store_txn_t *t, txn_block_t *tb)
{
    int rc = tb->wrote ? lc_store__wstate_flush(tb->b->ws, tb->txn, tb->b->dbi) : 0;
    if (rc) {
        txn_block_abort(t, tb);
        return rc;
    }
    rc = mdb_txn_commit(tb->txn);
    if (rc) {
        tb->txn = NULL; /* LMDB frees a transaction whose commit failed */
        lc_store__wstate_free(tb->b->ws);
        tb->b->ws = NULL;
        lc_store__release(t->s, tb->b);
        return lc_store__mdb_fail(rc, "txn commit");
    }
    lc_store__block_written(t->s, tb->b);
    lc_store__release(t->s, tb->b);
    return 0;
}

int lc_store_write_commit(lc_store_txn_t *t)
{
    int rc = 0;
    for (size_t i = 0; i < t->n_blocks; i++) {
        if (rc)
            txn_block_abort(t, &t->blocks[i]);
        else
            rc = txn_block_commit(t, &t->blocks[i]);
    }
    txn_free(t);
    return rc;
}

void lc_store_write_abort(lc_store_txn_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_blocks; i++)
        txn_block_abort(t, &t->blocks[i]);
    txn_free(t);
}

/* The batch's transaction on the block of time_ns, begun on first use. */
static int txn_block_get(lc_store_txn_t *t, int64_t time_ns, bool create, txn_block_t **out)
{
    if (time_ns > STORE_MAX_TIME_NS || time_ns < -STORE_MAX_TIME_NS)
        return LC_EINPUT;
    int64_t start = lc_store__partition(t->s, time_ns);
    for (size_t i = 0; i < t->n_blocks; i++) {
        if (t->blocks[i].b->start_ns == start) {
            *out = &t->blocks[i];
            return 0;
        }
    }
    store_block_t *b;
    int rc = lc_store__acquire(t->s, start, create, &b);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_txn_begin(b->env, NULL, 0, &txn);
    if (rc) {
        lc_store__release(t->s, b);
        return lc_store__mdb_fail(rc, "txn begin (write)");
    }
    t->blocks = lc_xgrow(t->blocks, &t->cap_blocks, t->n_blocks + 1, sizeof(*t->blocks));
    t->blocks[t->n_blocks] = (txn_block_t){.b = b, .txn = txn};
    *out = &t->blocks[t->n_blocks++];
    return 0;
}

/* The block's de-dup maps, rebuilt from its tables when missing. */
static int txn_block_wstate(txn_block_t *tb, store_wstate_t **out)
{
    if (!tb->b->ws) {
        int rc = lc_store__wstate_load(tb->txn, tb->b->dbi, &tb->b->ws);
        if (rc) {
            LC_LOG_ERROR("store: cannot load block for writing path=%s err=\"%s\"", tb->b->path,
                         lc_strerror(rc));
            return rc;
        }
    }
    tb->wrote = true;
    *out = tb->b->ws;
    return 0;
}

/* ---------------------------------------------------------------- series */

static int postings_put(wctx_t *c, const char *tenant, const lc_labels_t *ls, uint32_t id)
{
    uint8_t key[STORE_POSTING_BUF];
    MDB_val v = store_val(&id, sizeof(id));
    for (size_t i = 0; i <= ls->n; i++) {
        /* i == n: the tenant's own list (empty name), for selectors with no
         * usable equality matcher. Empty values match as absent: no posting. */
        const char *name = i < ls->n ? ls->v[i].name : "";
        const char *value = i < ls->n ? ls->v[i].value : "";
        if (i < ls->n && !*value)
            continue;
        MDB_val k = store_val(key, lc_store__posting_key(key, tenant, name, value));
        int rc = mdb_put(c->tb->txn, c->tb->b->dbi[DB_POSTINGS], &k, &v, MDB_NODUPDATA);
        if (rc && rc != MDB_KEYEXIST)
            return lc_store__mdb_fail(rc, "posting put");
    }
    return 0;
}

static int series_id(wctx_t *c, const char *tenant, const lc_labels_t *ls, uint32_t *out)
{
    lc_buf_t *key = &c->t->key;
    lc_buf_reset(key);
    int rc = lc_buf_append(key, tenant, strlen(tenant) + 1);
    if (!rc)
        rc = lc_labels_encode(ls, key);
    if (rc)
        return rc;
    bool added;
    rc = lc_store__symtab_intern(&c->ws->series, key->data, key->len, out, &added);
    if (rc || !added)
        return rc;
    MDB_val k = store_val(out, sizeof(*out)), v = store_val(key->data, key->len);
    rc = mdb_put(c->tb->txn, c->tb->b->dbi[DB_SERIES], &k, &v, MDB_APPEND);
    if (rc)
        return lc_store__mdb_fail(rc, "series put");
    return postings_put(c, tenant, ls, *out);
}

/* ---------------------------------------------------------------- samples */

static int wsample_cmp(const void *a, const void *b)
{
    const wsample_t *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->span < y->span ? -1 : x->span > y->span;
}

static int sample_value(const lc_store_write_t *w, const Google__V1__Sample *smp, size_t k,
                        int64_t *value)
{
    if (w->values) {
        *value = w->values[k];
        return 0;
    }
    if (w->value_index >= smp->n_value)
        return LC_EINPUT;
    *value = smp->value[w->value_index];
    return 0;
}

/* Picks the non-zero samples as (span, value) and remembers their pprof
 * sample index; their stack nodes are filled in afterwards, all at once. */
static int samples_pick(wctx_t *c, const lc_store_write_t *w, size_t *n_out)
{
    lc_store_txn_t *t = c->t;
    size_t n = w->samples ? w->n_samples : c->p->n_sample, k_out = 0;
    t->samples = lc_xgrow(t->samples, &t->samples_cap, n + 1, sizeof(*t->samples));
    t->picked = lc_xgrow(t->picked, &t->picked_cap, n + 1, sizeof(*t->picked));
    for (size_t k = 0; k < n; k++) {
        size_t si = w->samples ? w->samples[k] : k;
        if (si >= c->p->n_sample)
            return LC_EINPUT;
        wsample_t *ws = &t->samples[k_out];
        int rc = sample_value(w, c->p->sample[si], k, &ws->value);
        if (rc)
            return rc;
        if (ws->value == 0)
            continue;
        ws->span = w->span_ids ? w->span_ids[k] : 0;
        t->picked[k_out++] = (uint32_t)si;
    }
    *n_out = k_out;
    return 0;
}

/* The non-zero samples as (node, span, value), unsorted. */
static int samples_collect(wctx_t *c, const lc_store_write_t *w, size_t *n_out)
{
    lc_store_txn_t *t = c->t;
    int rc = samples_pick(c, w, n_out);
    if (!rc)
        rc = lc_store__resolve_stacks(&t->res, t->picked, *n_out);
    for (size_t k = 0; !rc && k < *n_out; k++)
        t->samples[k].node = t->res.sample_node[t->picked[k]];
    return rc;
}

#define RADIX_BITS 11

/* One stable counting pass on the node digit at `shift`. */
static void radix_pass(const wsample_t *src, wsample_t *dst, size_t n, unsigned shift)
{
    size_t pos[1u << RADIX_BITS] = {0};
    const uint32_t mask = (1u << RADIX_BITS) - 1;
    for (size_t i = 0; i < n; i++)
        pos[(src[i].node >> shift) & mask]++;
    for (size_t d = 0, sum = 0; d <= mask; d++) {
        size_t c = pos[d];
        pos[d] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++)
        dst[pos[(src[i].node >> shift) & mask]++] = src[i];
}

/* By (node, span). Node ids are dense, so an LSD radix sort with as many
 * passes as the largest id needs beats qsort several times over; span ids
 * (rare) keep the comparison sort. */
static void samples_sort(lc_store_txn_t *t, size_t n, bool spans)
{
    if (spans || n < 256) {
        qsort(t->samples, n, sizeof(*t->samples), wsample_cmp);
        return;
    }
    uint32_t all = 0;
    for (size_t i = 0; i < n; i++)
        all |= t->samples[i].node;
    t->sort_tmp = lc_xgrow(t->sort_tmp, &t->sort_tmp_cap, n, sizeof(*t->sort_tmp));
    wsample_t *src = t->samples, *dst = t->sort_tmp;
    for (unsigned shift = 0; shift < 32 && (all >> shift); shift += RADIX_BITS) {
        radix_pass(src, dst, n, shift);
        wsample_t *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != t->samples)
        memcpy(t->samples, src, n * sizeof(*src));
}

/* Sums equal (node, span) pairs of sorted samples in place; drops zero sums. */
static int samples_merge(wsample_t *v, size_t n, size_t *n_out, int64_t *total)
{
    size_t out = 0;
    *total = 0;
    for (size_t i = 0; i < n;) {
        wsample_t acc = v[i++];
        for (; i < n && v[i].node == acc.node && v[i].span == acc.span; i++)
            if (__builtin_add_overflow(acc.value, v[i].value, &acc.value))
                return LC_EINPUT;
        if (acc.value == 0)
            continue;
        if (__builtin_add_overflow(*total, acc.value, total))
            return LC_EINPUT;
        v[out++] = acc;
    }
    *n_out = out;
    return 0;
}

/* The greatest common divisor of the values (non-zero after samples_merge),
 * or 1. A CPU profile's values are whole sampling periods (10 ms = 10^7 ns),
 * so dividing by it turns 4-5 byte varints into 1-byte ones. */
static int64_t values_scale(const wsample_t *v, size_t n)
{
    uint64_t g = 0;
    for (size_t i = 0; i < n && g != 1; i++) {
        uint64_t a = v[i].value < 0 ? -(uint64_t)v[i].value : (uint64_t)v[i].value, b = g;
        while (b) {
            uint64_t r = a % b;
            a = b;
            b = r;
        }
        g = a;
    }
    return g == 0 || g > INT64_MAX ? 1 : (int64_t)g;
}

/* total, n_samples, flags[, profile id][, scale], then per sample: node
 * delta, value / scale[, span id]. */
static int profile_encode(lc_buf_t *enc, const wsample_t *v, size_t n, int64_t total, bool spans,
                          const uint8_t *profile_id, bool scaled /* format 3 */)
{
    lc_buf_reset(enc);
    int rc = lc_buf_reserve(enc, 40 + LC_STORE_PROFILE_ID_BYTES + n * 30);
    if (rc)
        return rc;
    int64_t scale = scaled ? values_scale(v, n) : 1;
    uint8_t *e = enc->data;
    e = store_put_uvarint(e, store_zigzag(total));
    e = store_put_uvarint(e, n);
    e = store_put_uvarint(e, (spans ? STORE_PF_SPANS : 0) | (profile_id ? STORE_PF_PROFILE_ID : 0) |
                                 (scale > 1 ? STORE_PF_SCALED : 0));
    if (profile_id) {
        memcpy(e, profile_id, LC_STORE_PROFILE_ID_BYTES);
        e += LC_STORE_PROFILE_ID_BYTES;
    }
    if (scale > 1)
        e = store_put_uvarint(e, (uint64_t)scale);
    uint32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        e = store_put_uvarint(e, v[i].node - prev);
        e = store_put_uvarint(e, store_zigzag(v[i].value / scale));
        if (spans)
            e = store_put_uvarint(e, v[i].span);
        prev = v[i].node;
    }
    enc->len = (size_t)(e - enc->data);
    return 0;
}

/* The next free seq for (series, time): profiles of one series may share a
 * timestamp (a replayed or duplicated push), each keeps its own record. */
static int profile_seq(MDB_txn *txn, MDB_dbi dbi, uint32_t series, int64_t time_ns, uint32_t *seq)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (seq)");
    uint8_t first[STORE_PROFILE_KEY_LEN];
    lc_store__profile_key(first, series, time_ns, 0);
    MDB_val k = store_val(first, sizeof(first)), v;
    *seq = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != STORE_PROFILE_KEY_LEN || memcmp(k.mv_data, first, 12) != 0)
            break;
        *seq = lc_store__profile_key_seq(k.mv_data) + 1;
    }
    mdb_cursor_close(cur);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : lc_store__mdb_fail(rc, "profile seq");
}

/* Remembers a written profile's key for the applied record of its message. */
static int written_add(lc_store_txn_t *t, const store_block_t *b, const uint8_t *key)
{
    if (t->written.len && t->written_block != b)
        t->written_mixed = true;
    t->written_block = b;
    return lc_buf_append(&t->written, key, STORE_PROFILE_KEY_LEN);
}

static int profile_put(wctx_t *c, uint32_t series, int64_t time_ns, const lc_buf_t *enc)
{
    uint32_t seq = 0;
    int rc = profile_seq(c->tb->txn, c->tb->b->dbi[DB_PROFILES], series, time_ns, &seq);
    if (rc)
        return rc;
    uint8_t key[STORE_PROFILE_KEY_LEN];
    lc_store__profile_key(key, series, time_ns, seq);
    MDB_val k = store_val(key, sizeof(key)), v = store_val(enc->data, enc->len);
    rc = mdb_put(c->tb->txn, c->tb->b->dbi[DB_PROFILES], &k, &v, 0);
    if (rc)
        return lc_store__mdb_fail(rc, "profile put");
    rc = lc_store__summary_drop(c->tb->txn, c->tb->b, series);
    return rc ? rc : written_add(c->t, c->tb->b, key);
}

static void meta_add_profile(store_meta_t *m, int64_t time_ns, size_t n_samples)
{
    m->profiles++;
    m->samples += n_samples;
    if (time_ns < m->min_time_ns)
        m->min_time_ns = time_ns;
    if (time_ns > m->max_time_ns)
        m->max_time_ns = time_ns;
}

/* ---------------------------------------------------------------- profiles */

static int write_check(const lc_store_write_t *w)
{
    if (!w->tenant || !w->labels || !w->profile || !w->index)
        return LC_EINPUT;
    if (strlen(w->tenant) > STORE_MAX_TENANT_BYTES)
        return LC_ETOOBIG;
    if (!w->values && w->value_index >= w->profile->n_sample_type)
        return LC_EINPUT;
    return 0;
}

static int write_samples(wctx_t *c, const lc_store_write_t *w, uint32_t series)
{
    size_t n;
    int64_t total;
    int rc = samples_collect(c, w, &n);
    if (!rc) {
        samples_sort(c->t, n, w->span_ids != NULL);
        rc = samples_merge(c->t->samples, n, &n, &total);
    }
    if (!rc)
        rc = profile_encode(&c->t->enc, c->t->samples, n, total, w->span_ids != NULL, w->profile_id,
                            c->ws->meta.version >= 3);
    if (!rc)
        rc = profile_put(c, series, w->time_ns, &c->t->enc);
    if (!rc)
        meta_add_profile(&c->ws->meta, w->time_ns, n);
    return rc;
}

int lc_store_write_profile(lc_store_txn_t *t, const lc_store_write_t *w)
{
    wctx_t c = {.t = t, .p = w->profile, .ix = w->index};
    int rc = write_check(w);
    if (!rc)
        rc = txn_block_get(t, w->time_ns, true, &c.tb);
    if (!rc)
        rc = txn_block_wstate(c.tb, &c.ws);
    if (rc)
        return rc;
    bool keep = t->pinned == w->profile && t->pinned_ix == w->index;
    lc_store__resolver_bind(&t->res, w->profile, w->index, c.tb->b, c.tb->txn, c.tb->b->dbi, c.ws,
                            keep);
    uint32_t series;
    rc = series_id(&c, w->tenant, w->labels, &series);
    if (!rc)
        rc = write_samples(&c, w, series);
    return rc;
}

void lc_store_write_pin(lc_store_txn_t *t, const lc_pprof_t *p, const lc_pprof_index_t *ix)
{
    t->pinned = p;
    t->pinned_ix = ix;
    lc_store__resolver_forget(&t->res); /* a new pin never trusts older memos */
}

void lc_store_write_unpin(lc_store_txn_t *t)
{
    t->pinned = NULL;
    t->pinned_ix = NULL;
    lc_store__resolver_forget(&t->res);
}

/* ---------------------------------------------------------------- applied ids */

static int applied_check(const uint8_t *id, size_t len)
{
    return id && len > 0 && len <= STORE_MAX_APPLIED_ID ? 0 : LC_EINPUT;
}

static int delivery_put(txn_block_t *tb, const char *delivery, const uint8_t *id, size_t len)
{
    size_t dlen = strlen(delivery);
    if (dlen > STORE_MAX_DELIVERY_ID)
        return LC_EINPUT;
    MDB_val k = store_val(delivery, dlen), v = store_val(id, len);
    int rc = mdb_put(tb->txn, tb->b->dbi[DB_DELIVERIES], &k, &v, 0);
    return rc ? lc_store__mdb_fail(rc, "delivery put") : 0;
}

/* The applied record: STORE_APPLIED_KEPT, then the keys of what was written. */
static int applied_put(lc_store_txn_t *t, txn_block_t *tb, const uint8_t *id, size_t len)
{
    if (t->written.len && (t->written_mixed || t->written_block != tb->b))
        return LC_EINPUT; /* a message's profiles all share its time, hence its block */
    lc_buf_reset(&t->enc);
    uint8_t state = STORE_APPLIED_KEPT;
    int rc = lc_buf_append(&t->enc, &state, 1);
    if (!rc)
        rc = lc_buf_append(&t->enc, t->written.data, t->written.len);
    if (rc)
        return rc;
    MDB_val k = store_val(id, len), v = store_val(t->enc.data, t->enc.len);
    rc = mdb_put(tb->txn, tb->b->dbi[DB_APPLIED], &k, &v, 0);
    return rc ? lc_store__mdb_fail(rc, "applied put") : 0;
}

int lc_store_write_applied(lc_store_txn_t *t, int64_t time_ns, const uint8_t *id, size_t len,
                           const char *delivery)
{
    txn_block_t *tb = NULL;
    int rc = applied_check(id, len);
    if (!rc)
        rc = txn_block_get(t, time_ns, true, &tb);
    if (!rc)
        rc = applied_put(t, tb, id, len);
    if (!rc && delivery && *delivery)
        rc = delivery_put(tb, delivery, id, len);
    lc_buf_reset(&t->written); /* the next message starts afresh */
    t->written_mixed = false;
    return rc;
}

int lc_store_write_is_applied(lc_store_txn_t *t, int64_t time_ns, const uint8_t *id, size_t len,
                              bool *applied)
{
    txn_block_t *tb = NULL;
    *applied = false;
    int rc = applied_check(id, len);
    if (!rc)
        rc = txn_block_get(t, time_ns, false, &tb);
    if (rc == LC_ENOTFOUND)
        return 0; /* no block for that time: nothing was ever applied there */
    if (rc)
        return rc;
    MDB_val k = store_val(id, len), v;
    rc = mdb_get(tb->txn, tb->b->dbi[DB_APPLIED], &k, &v);
    if (rc == 0) /* an empty value cannot occur in this format; treat it as kept */
        *applied = v.mv_size == 0 || ((const uint8_t *)v.mv_data)[0] != STORE_APPLIED_FORGOTTEN;
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : lc_store__mdb_fail(rc, "applied get");
}

/* ---------------------------------------------------------------- forgetting */

/* Deletes one stored profile and takes it out of the meta counts. The time
 * range in meta stays as it was: a bound, not necessarily tight. */
static int forget_profile(txn_block_t *tb, store_wstate_t *ws, const uint8_t *key)
{
    MDB_val k = store_val(key, STORE_PROFILE_KEY_LEN), v;
    int rc = mdb_get(tb->txn, tb->b->dbi[DB_PROFILES], &k, &v);
    if (rc == MDB_NOTFOUND)
        return 0; /* already gone: forgetting is idempotent */
    if (rc)
        return lc_store__mdb_fail(rc, "profile get (forget)");
    const uint8_t *p = v.mv_data, *end = p + v.mv_size;
    uint64_t total, n_samples;
    if (store_get_uvarint(&p, end, &total) || store_get_uvarint(&p, end, &n_samples) ||
        ws->meta.profiles == 0 || ws->meta.samples < n_samples)
        return LC_ECORRUPT;
    rc = mdb_del(tb->txn, tb->b->dbi[DB_PROFILES], &k, NULL);
    if (rc)
        return lc_store__mdb_fail(rc, "profile del");
    rc = lc_store__summary_drop(tb->txn, tb->b, lc_store__profile_key_series(key));
    if (rc)
        return rc;
    ws->meta.profiles--;
    ws->meta.samples -= n_samples;
    return 0;
}

/* Forgets what the applied record of ingest id (in this block) lists. */
static int forget_applied(txn_block_t *tb, const MDB_val *id, bool *done)
{
    MDB_val v;
    *done = false;
    int rc = mdb_get(tb->txn, tb->b->dbi[DB_APPLIED], (MDB_val *)id, &v);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return lc_store__mdb_fail(rc, "applied get (forget)");
    const uint8_t *rec = v.mv_data;
    if (v.mv_size == 0 || rec[0] == STORE_APPLIED_FORGOTTEN)
        return 0;
    if (rec[0] != STORE_APPLIED_KEPT || (v.mv_size - 1) % STORE_PROFILE_KEY_LEN)
        return LC_ECORRUPT;
    store_wstate_t *ws;
    rc = txn_block_wstate(tb, &ws); /* meta counts change: flushed at commit */
    /* The value points into the map, which the deletes below may change. */
    size_t n_keys = (v.mv_size - 1) / STORE_PROFILE_KEY_LEN;
    uint8_t *keys = lc_xmalloc(n_keys * STORE_PROFILE_KEY_LEN + 1);
    memcpy(keys, rec + 1, n_keys * STORE_PROFILE_KEY_LEN);
    for (size_t i = 0; !rc && i < n_keys; i++)
        rc = forget_profile(tb, ws, keys + i * STORE_PROFILE_KEY_LEN);
    lc_free(keys);
    uint8_t state = STORE_APPLIED_FORGOTTEN;
    MDB_val nv = store_val(&state, 1);
    if (!rc && (rc = mdb_put(tb->txn, tb->b->dbi[DB_APPLIED], (MDB_val *)id, &nv, 0)) != 0)
        return lc_store__mdb_fail(rc, "applied put (forget)");
    *done = rc == 0;
    return rc;
}

/* Forgets the deliveries this block knows; counts them in *forgotten. */
static int forget_in_block(txn_block_t *tb, const char *const *deliveries, size_t n,
                           size_t *forgotten)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t dlen = strlen(deliveries[i]);
        if (dlen == 0 || dlen > STORE_MAX_DELIVERY_ID)
            continue;
        MDB_val k = store_val(deliveries[i], dlen), id;
        rc = mdb_get(tb->txn, tb->b->dbi[DB_DELIVERIES], &k, &id);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc)
            return lc_store__mdb_fail(rc, "delivery get");
        uint8_t idbuf[STORE_MAX_APPLIED_ID];
        if (applied_check(id.mv_data, id.mv_size))
            return LC_ECORRUPT;
        memcpy(idbuf, id.mv_data, id.mv_size); /* stable across the deletes */
        MDB_val idv = store_val(idbuf, id.mv_size);
        bool done;
        rc = forget_applied(tb, &idv, &done);
        *forgotten += done;
    }
    return rc;
}

/* Ends a block's transaction early when this call opened it and changed
 * nothing: searching every block must not hold all of them open. */
static void txn_block_drop_last(lc_store_txn_t *t)
{
    txn_block_t *tb = &t->blocks[--t->n_blocks];
    mdb_txn_abort(tb->txn);
    lc_store__release(t->s, tb->b);
}

int lc_store_write_forget(lc_store_txn_t *t, const char *const *deliveries, size_t n,
                          size_t *forgotten)
{
    *forgotten = 0;
    if (n == 0)
        return 0;
    store_block_t **blocks;
    size_t n_blocks;
    int rc = lc_store__acquire_range(t->s, INT64_MIN, INT64_MAX, &blocks, &n_blocks);
    if (rc)
        return rc;
    for (size_t i = 0; i < n_blocks && !rc; i++) {
        size_t before = t->n_blocks, found = 0;
        txn_block_t *tb;
        rc = txn_block_get(t, blocks[i]->start_ns, false, &tb);
        if (rc == LC_ENOTFOUND) { /* dropped by retention meanwhile */
            rc = 0;
            continue;
        }
        if (!rc)
            rc = forget_in_block(tb, deliveries, n, &found);
        *forgotten += found;
        if (!rc && !found && t->n_blocks > before && !tb->wrote)
            txn_block_drop_last(t);
    }
    for (size_t i = 0; i < n_blocks; i++)
        lc_store__release(t->s, blocks[i]);
    lc_free(blocks);
    return rc;
}
