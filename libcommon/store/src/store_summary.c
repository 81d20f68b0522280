/*
 * store_summary.c — per-series summaries of closed blocks.
 *
 * A summary is one series' samples summed over every profile it has in the
 * block, stored in DB_SUMMARIES under the series id with the encoding of a
 * profile value (flags 0: no span ids, no profile id). A merge whose range
 * covers the whole block reads one summary per series instead of every
 * profile, so its cost follows the block's distinct stacks, not its profiles.
 *
 * Exactness rests on one rule: whoever adds or deletes a profile drops its
 * series' summary in the same LMDB transaction (lc_store__summary_drop, from
 * store_write.c). So in any snapshot a summary that exists equals the sum of
 * the profiles beside it; a series without one is read from its profiles.
 * Building summaries is one write transaction per block: a crash in the middle
 * leaves the block as it was, and the next pass builds them again.
 *
 * Which blocks to look at is kept in memory per block (store_block_t):
 * write_gen counts the writer's commits, summarized_gen the write_gen a
 * complete pass saw. A pass reads write_gen before its transaction begins, so
 * a commit it did not see leaves the block marked for the next pass.
 *
 * Threading: lc_store_summarize runs on one thread at a time, beside the
 * writer (LMDB serialises the two writers of one block) and the readers.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/clock.h"
#include "lc/log.h"
#include "store_int.h"

#define SUMMARY_MAX_NODES ((uint64_t)64 << 20) /* larger blocks keep no summaries */

/* Scratch reused across series and blocks. */
typedef struct summ_scratch_s {
    uint64_t *acc; /* by node id: the running sum (wrapping, as the readers' sums) */
    size_t acc_cap;
    uint32_t *touched; /* node ids with a sample, unsorted */
    size_t n_touched, touched_cap;
    uint8_t *seen; /* by node id */
    size_t seen_cap;
    lc_buf_t enc;
} summ_scratch_t;

void lc_store__block_written(lc_store_t *s, store_block_t *b)
{
    pthread_mutex_lock(&s->mu);
    b->write_gen++;
    b->last_write_ns = lc_monotonic_ns();
    pthread_mutex_unlock(&s->mu);
}

int lc_store__summary_drop(MDB_txn *txn, const store_block_t *b, uint32_t series)
{
    if (!b->has_summaries)
        return 0;
    unsigned key = series;
    MDB_val k = store_val(&key, sizeof(key));
    int rc = mdb_del(txn, b->dbi[DB_SUMMARIES], &k, NULL);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : lc_store__mdb_fail(rc, "summary del");
}

/* ---------------------------------------------------------------- building */

static void scratch_reserve(summ_scratch_t *sc, uint64_t nodes)
{
    if (nodes > sc->acc_cap) {
        size_t old = sc->acc_cap;
        sc->acc = lc_xgrow(sc->acc, &sc->acc_cap, nodes, sizeof(*sc->acc));
        memset(sc->acc + old, 0, (sc->acc_cap - old) * sizeof(*sc->acc));
    }
    if (nodes > sc->seen_cap) {
        size_t old = sc->seen_cap;
        sc->seen = lc_xgrow(sc->seen, &sc->seen_cap, nodes, 1);
        memset(sc->seen + old, 0, sc->seen_cap - old);
    }
}

static int summ_add_profile(summ_scratch_t *sc, const lc_stored_profile_t *p, uint64_t nodes)
{
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    for (;;) {
        uint32_t node;
        int64_t value;
        int rc = lc_sample_iter_next(&it, &node, &value, NULL);
        if (rc != 1)
            return rc;
        if (node >= nodes)
            return LC_ECORRUPT;
        if (!sc->seen[node]) {
            sc->seen[node] = 1;
            sc->touched =
                lc_xgrow(sc->touched, &sc->touched_cap, sc->n_touched + 1, sizeof(*sc->touched));
            sc->touched[sc->n_touched++] = node;
        }
        sc->acc[node] += (uint64_t)value;
    }
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The greatest common divisor of the non-zero sums (as signed values), or 1:
 * stored values are divided by it, as the writer does (STORE_PF_SCALED). */
static uint64_t summ_scale(const summ_scratch_t *sc)
{
    uint64_t g = 0;
    for (size_t i = 0; i < sc->n_touched && g != 1; i++) {
        int64_t v = (int64_t)sc->acc[sc->touched[i]];
        uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v, b = g;
        while (b) {
            uint64_t r = a % b;
            a = b;
            b = r;
        }
        g = a;
    }
    return g == 0 || g > INT64_MAX ? 1 : g;
}

/* Encodes the sums as a profile value (non-zero sums only, ascending node)
 * and clears the scratch for the next series. */
static int summ_encode(summ_scratch_t *sc)
{
    qsort(sc->touched, sc->n_touched, sizeof(*sc->touched), u32_cmp);
    uint64_t total = 0, n = 0;
    for (size_t i = 0; i < sc->n_touched; i++) {
        uint64_t v = sc->acc[sc->touched[i]];
        total += v;
        n += v != 0;
    }
    int64_t scale = (int64_t)summ_scale(sc);
    uint8_t tmp[40], *p = tmp;
    p = store_put_uvarint(p, store_zigzag((int64_t)total));
    p = store_put_uvarint(p, n);
    /* flags: no span ids, no profile id */
    p = store_put_uvarint(p, scale > 1 ? STORE_PF_SCALED : 0);
    if (scale > 1)
        p = store_put_uvarint(p, (uint64_t)scale);
    sc->enc.len = 0;
    int rc = lc_buf_append(&sc->enc, tmp, (size_t)(p - tmp));
    uint32_t prev = 0;
    for (size_t i = 0; i < sc->n_touched; i++) {
        uint32_t node = sc->touched[i];
        int64_t v = (int64_t)sc->acc[node];
        sc->acc[node] = 0;
        sc->seen[node] = 0;
        if (rc || v == 0)
            continue;
        p = store_put_uvarint(tmp, node - prev);
        p = store_put_uvarint(p, store_zigzag(v / scale));
        prev = node;
        rc = lc_buf_append(&sc->enc, tmp, (size_t)(p - tmp));
    }
    sc->n_touched = 0;
    return rc;
}

typedef struct summ_walk_s {
    summ_scratch_t *sc;
    uint64_t nodes;
    size_t profiles;
} summ_walk_t;

static int summ_profile(const lc_stored_profile_t *p, void *data)
{
    summ_walk_t *w = data;
    w->profiles++;
    return summ_add_profile(w->sc, p, w->nodes);
}

/* Sums the profiles of one series into its summary; a series without
 * profiles gets none. */
static int summ_series(MDB_txn *txn, const store_block_t *b, uint32_t series, uint64_t nodes,
                       summ_scratch_t *sc, bool *wrote)
{
    *wrote = false;
    summ_walk_t w = {.sc = sc, .nodes = nodes};
    store_unpack_t up; /* a late write into a compacted block */
    lc_store__unpack_init(&up, txn, b->dbi[DB_META]);
    int ret = lc_store__profiles_scan(txn, b->dbi[DB_PROFILES], &up, series, INT64_MIN, INT64_MAX,
                                      summ_profile, &w);
    lc_store__unpack_fini(&up);
    if (!ret)
        ret = summ_encode(sc);
    else
        (void)summ_encode(sc); /* clears the scratch */
    if (ret || w.profiles == 0)
        return ret;
    unsigned key = series;
    MDB_val sk = store_val(&key, sizeof(key)), sv = store_val(sc->enc.data, sc->enc.len);
    int rc = mdb_put(txn, b->dbi[DB_SUMMARIES], &sk, &sv, 0);
    if (rc)
        return lc_store__mdb_fail(rc, "summary put");
    *wrote = true;
    return 0;
}

/* Builds every missing summary of the block in one transaction. */
static int summ_block(store_block_t *b, summ_scratch_t *sc, size_t *series_done)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(b->env, NULL, 0, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (summary)");
    store_meta_t m;
    rc = lc_store__meta_get(txn, b->dbi[DB_META], &m);
    if (!rc && (m.nodes > SUMMARY_MAX_NODES || m.series >= STORE_MAX_ID)) {
        LC_LOG_WARN("store: block too large for summaries path=%s nodes=%llu", b->path,
                    (unsigned long long)m.nodes);
        mdb_txn_abort(txn);
        return 0;
    }
    if (!rc)
        scratch_reserve(sc, m.nodes);
    size_t done = 0;
    for (uint32_t id = 1; !rc && id <= m.series; id++) {
        unsigned key = id;
        MDB_val k = store_val(&key, sizeof(key)), v;
        rc = mdb_get(txn, b->dbi[DB_SUMMARIES], &k, &v);
        if (rc == 0)
            continue;
        if (rc != MDB_NOTFOUND) {
            rc = lc_store__mdb_fail(rc, "summary get");
            break;
        }
        bool wrote;
        rc = summ_series(txn, b, id, m.nodes, sc, &wrote);
        done += wrote;
    }
    if (rc || done == 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn commit (summary)");
    *series_done += done;
    return 0;
}

/* ---------------------------------------------------------------- the pass */

/* When a summarising pass runs: a block is due once closed and not
 * summarised since its last commit, and taken once also quiet for quiet_ns
 * (a block never written is quiet). */
typedef struct summ_when_s {
    int64_t now_ns, quiet_ns, mono_ns;
} summ_when_t;

static bool summ_due(const store_block_t *b, const void *arg)
{
    const summ_when_t *w = arg;
    return !b->dropped && b->end_ns <= w->now_ns && b->summarized_gen != b->write_gen;
}

static bool summ_due_quiet(const store_block_t *b, const void *arg)
{
    const summ_when_t *w = arg;
    return summ_due(b, arg) && (b->write_gen == 0 || w->mono_ns - b->last_write_ns >= w->quiet_ns);
}

/* Also frees the writer's de-dup state of the block when nothing holds it:
 * a closed, quiet block is rarely written again, and its tables (symbols,
 * stack nodes, stack cache) would otherwise stay in memory until the LRU
 * closes the environment. A late write rebuilds them from LMDB. Safe under
 * mu with no other reference: the writer reads b->ws only while it holds one. */
static void summ_mark(lc_store_t *s, store_block_t *b, uint64_t gen)
{
    pthread_mutex_lock(&s->mu);
    b->summarized_gen = gen;
    if (b->refs == 1 && b->write_gen == gen) { /* ours only, and no commit since */
        lc_store__wstate_free(b->ws);
        b->ws = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

typedef struct summ_pass_s {
    summ_scratch_t sc;
    lc_store_summarize_stats_t *st;
} summ_pass_t;

/* One block of the pass (lc_store__pass). */
static int summ_one(lc_store_t *s, store_block_t *b, uint64_t gen, void *ctx)
{
    summ_pass_t *p = ctx;
    size_t before = p->st->series_done;
    int rc = b->has_summaries ? summ_block(b, &p->sc, &p->st->series_done) : 0;
    if (!rc)
        summ_mark(s, b, gen);
    p->st->blocks_done += p->st->series_done > before;
    return rc;
}

int lc_store_summarize(lc_store_t *s, int64_t now_ns, int64_t quiet_ns,
                       lc_store_summarize_stats_t *stats)
{
    lc_store_summarize_stats_t st = {0};
    summ_when_t when = {now_ns, quiet_ns, lc_monotonic_ns()};
    summ_pass_t pass = {.st = &st};
    lc_buf_init(&pass.sc.enc, LC_BUF_UNLIMITED);
    int rc = lc_store__pass(s, summ_due_quiet, &when, summ_one, &pass);
    lc_free(pass.sc.acc);
    lc_free(pass.sc.touched);
    lc_free(pass.sc.seen);
    lc_buf_fini(&pass.sc.enc);
    st.blocks_pending = lc_store__count(s, summ_due, &when);
    if (!rc)
        rc = lc_store__rollup_pass(s, now_ns, &st.rollups_done); /* store_rollup.c */
    if (stats)
        *stats = st;
    return rc;
}
