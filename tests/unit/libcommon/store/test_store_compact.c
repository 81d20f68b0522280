/*
 * test_store_compact.c — a compacted block answers exactly what it answered
 * before, and a compaction a crash interrupted leaves a block that does.
 *
 * Random profiles (hundreds of samples over a small set of functions, some
 * values negative; one pod with span ids, one with profile ids, one with
 * values in whole periods, stored scaled) go into three closed one-hour
 * blocks. The oracle is the store before compaction: every profile of every
 * series read back sample by sample (time, total, profile id, node, value,
 * span id), plus merged flame trees over ranges that cover whole blocks
 * (summaries) or cut them (profiles), with and without summaries. After
 * lc_store_compact the same dump must be byte-identical, the files smaller
 * and the profiles' samples compressed; then after a late write (a block
 * holding both plain and compressed profiles) and its recompaction; after a
 * reopen; and after the states a kill can leave between the swap's renames.
 * The store compacts (lc_store_opts_t.compacts), so rollups wait for the
 * compaction and are summed once. Retention then drops the compacted blocks whole.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include "lc/query.h"
#include "lc_test.h"
#include "lc_test_pprof.h"

#define HOUR_NS 3600000000000LL
#define T0_NS (472222LL * HOUR_NS) /* an hour boundary in 2023 */
#define N_BLOCKS 3
#define N_PODS 4
#define PER_POD 40
#define N_FUNCS 24
#define MAX_SAMPLES 800
#define PT "test:cpu:nanoseconds:cpu:nanoseconds"
#define NOW_NS (T0_NS + 10 * HOUR_NS)

static lc_store_t *store;
static char dir[] = "/tmp/ember-compact-XXXXXX";
static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static const char *const tenants[] = {"anonymous"};
static char func_names[N_FUNCS][16];

static uint64_t rnd_below(uint64_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % n;
}

/* ------------------------------------------------------------- writing */

static lc_pprof_t *compact_random_pprof(lc_arena_t *a, int pod, size_t *n_samples)
{
    uint64_t locs[N_FUNCS];
    lc_pprof_builder_t *b = lc_test_pprof_app(func_names, N_FUNCS, locs);
    size_t n = 300 + rnd_below(MAX_SAMPLES - 300);
    for (size_t s = 0; s < n; s++) {
        uint64_t stack[8];
        size_t depth = 1 + rnd_below(8);
        for (size_t d = 0; d < depth; d++)
            stack[d] = locs[rnd_below(N_FUNCS)];
        int64_t v = (int64_t)rnd_below(1000) - (rnd_below(8) == 0 ? 1500 : 0);
        if (pod == 3)
            v *= 10000000;
        lc_pprof_builder_sample(b, stack, depth, &v, NULL, 0);
    }
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    *n_samples = p ? p->n_sample : 0;
    return p;
}

static void compact_write_one(lc_store_txn_t *txn, int pod, int64_t t_ns)
{
    lc_arena_t *a = lc_arena_new(16u << 20);
    size_t n;
    lc_pprof_t *p = compact_random_pprof(a, pod, &n);
    lc_pprof_index_t *ix = NULL;
    LC_ASSERT_OK(lc_pprof_index_new(p, a, &ix));
    char podv[16];
    snprintf(podv, sizeof(podv), "p%d", pod);
    lc_labels_t ls;
    lc_labels_init(&ls);
    lc_labels_add(&ls, "__name__", "test");
    lc_labels_add(&ls, "__profile_type__", PT);
    lc_labels_add(&ls, "service_name", "svc");
    lc_labels_add(&ls, "pod", podv);
    lc_labels_sort(&ls);
    static uint64_t spans[MAX_SAMPLES];
    for (size_t i = 0; i < n; i++)
        spans[i] = rnd_below(3); /* 0 = none */
    uint8_t pid[LC_STORE_PROFILE_ID_BYTES] = {0};
    pid[0] = (uint8_t)rnd_below(200);
    lc_store_write_t w = {.tenant = "anonymous",
                          .labels = &ls,
                          .time_ns = t_ns,
                          .profile = p,
                          .index = ix,
                          .span_ids = pod == 1 ? spans : NULL,
                          .profile_id = pod == 2 ? pid : NULL};
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    lc_labels_fini(&ls);
    lc_arena_free(a);
}

static void compact_write_all(void)
{
    for (int blk = 0; blk < N_BLOCKS; blk++) {
        lc_store_txn_t *txn = NULL;
        LC_ASSERT_OK(lc_store_write_begin(store, &txn));
        for (int k = 0; k < PER_POD; k++)
            for (int pod = 0; pod < N_PODS; pod++) /* interleaved, as pods send */
                compact_write_one(txn, pod, T0_NS + blk * HOUR_NS + k * 60000000000LL + pod);
        LC_ASSERT_OK(lc_store_write_commit(txn));
    }
}

/* ------------------------------------------------------------- the dump */

typedef struct dump_s {
    lc_buf_t *out;
    uint32_t ids[64];
    size_t n_ids;
    size_t compressed; /* profiles whose stored samples are a zstd frame */
} dump_t;

static int dump_series_cb(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                          void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(tenant);
    LC_UNUSED(ls);
    dump_t *d = data;
    if (d->n_ids < LC_ARRAY_LEN(d->ids))
        d->ids[d->n_ids++] = id;
    return 0;
}

static void dump_add(dump_t *d, const void *p, size_t n)
{
    LC_ASSERT_OK(lc_buf_append(d->out, p, n));
}

static int dump_profile_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    dump_t *d = data;
    /* flags are the first varint of _data; 8 = compressed (one byte: < 0x80) */
    d->compressed += p->_len > 0 && (p->_data[0] & 0x8);
    dump_add(d, &p->series_id, sizeof(p->series_id));
    dump_add(d, &p->time_ns, sizeof(p->time_ns));
    dump_add(d, &p->total, sizeof(p->total));
    dump_add(d, &p->n_samples, sizeof(p->n_samples));
    dump_add(d, &p->has_profile_id, 1);
    if (p->has_profile_id) /* else the bytes are not set */
        dump_add(d, p->profile_id, sizeof(p->profile_id));
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    uint32_t n = 0;
    for (;;) {
        uint32_t node;
        int64_t value;
        uint64_t span;
        int rc = lc_sample_iter_next(&it, &node, &value, &span);
        LC_CHECK(rc >= 0);
        if (rc != 1)
            break;
        dump_add(d, &node, sizeof(node));
        dump_add(d, &value, sizeof(value));
        dump_add(d, &span, sizeof(span));
        n++;
    }
    LC_ASSERT_EQ(n, p->n_samples);
    return 0;
}

static void dump_tree(lc_buf_t *out, int64_t start, int64_t end, bool no_summaries)
{
    lc_selector_t sel;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_selector_parse("{}", 2, &sel, &st));
    LC_ASSERT_OK(lc_selector_add(&sel, "__profile_type__", LC_MATCH_EQ, PT, &st));
    lc_query_t q = {.tenants = tenants,
                    .n_tenants = 1,
                    .sel = &sel,
                    .start_ns = start,
                    .end_ns = end,
                    .no_summaries = no_summaries};
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, start, end, &r));
    lc_ftree_t *t = lc_ftree_new(0);
    LC_ASSERT_OK(lc_query_merge_tree(r, &q, t, &st));
    LC_ASSERT_OK(lc_ftree_write_tree(t, 0, out));
    lc_ftree_free(t);
    lc_store_read_end(r);
    lc_selector_fini(&sel);
}

/* Every profile sample by sample, then merged trees; *compressed counts the
 * profiles stored compressed. */
static void dump_all(lc_buf_t *out, size_t *compressed)
{
    lc_buf_init(out, LC_BUF_UNLIMITED);
    dump_t d = {.out = out};
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, T0_NS, T0_NS + N_BLOCKS * HOUR_NS - 1, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), N_BLOCKS);
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        d.n_ids = 0;
        LC_ASSERT_OK(lc_block_series(b, tenants, 1, NULL, dump_series_cb, &d));
        LC_ASSERT_EQ(d.n_ids, N_PODS);
        for (size_t k = 0; k < d.n_ids; k++)
            LC_ASSERT_OK(lc_block_profiles(b, d.ids[k], INT64_MIN, INT64_MAX, dump_profile_cb, &d));
    }
    lc_store_read_end(r);
    for (int ns = 0; ns < 2; ns++) {
        dump_tree(out, T0_NS, T0_NS + N_BLOCKS * HOUR_NS - 1, ns); /* whole blocks */
        dump_tree(out, T0_NS + HOUR_NS / 3, T0_NS + 2 * HOUR_NS + HOUR_NS / 2, ns);
        dump_tree(out, T0_NS + HOUR_NS + 7 * 60000000000LL, T0_NS + HOUR_NS + 9 * 60000000000LL,
                  ns);
    }
    *compressed = d.compressed;
}

/* How many series summaries are stored compressed, and how many there are.
 * Their sums are checked by dump_tree over whole blocks against the oracle,
 * which was taken before any summary existed (so from the profiles). */
static size_t summaries_compressed(size_t *total)
{
    dump_t d = {0};
    size_t zs = 0;
    *total = 0;
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, T0_NS, T0_NS + N_BLOCKS * HOUR_NS - 1, &r));
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        d.n_ids = 0;
        LC_ASSERT_OK(lc_block_series(b, tenants, 1, NULL, dump_series_cb, &d));
        for (size_t k = 0; k < d.n_ids; k++) {
            lc_stored_profile_t p;
            if (lc_block_summary(b, d.ids[k], &p) != 0)
                continue;
            (*total)++;
            zs += p._len > 0 && (p._data[0] & 0x8); /* flags, as in dump_profile_cb */
        }
    }
    lc_store_read_end(r);
    return zs;
}

static lc_buf_t oracle;

static void check_same(size_t *compressed)
{
    lc_buf_t now;
    dump_all(&now, compressed);
    LC_ASSERT_EQ(now.len, oracle.len);
    if (now.len == oracle.len)
        LC_ASSERT_MEM_EQ(now.data, oracle.data, now.len);
    lc_buf_fini(&now);
}

static void take_oracle(void)
{
    lc_buf_fini(&oracle);
    size_t compressed;
    dump_all(&oracle, &compressed);
}

/* What the ingester does every 2 s; the rollups that pass built. */
static size_t compact_pass(lc_store_compact_stats_t *cs)
{
    lc_store_summarize_stats_t ss;
    LC_ASSERT_OK(lc_store_summarize(store, NOW_NS, 0, &ss));
    LC_ASSERT_OK(lc_store_compact(store, NOW_NS, cs));
    return ss.rollups_done;
}

static void reopen(void)
{
    lc_store_close(store);
    lc_store_opts_t o = {.dir = dir, .compacts = true};
    LC_ASSERT_OK(lc_store_open(&o, &store));
}

static char *block_dir(int blk, const char *prefix)
{
    static char paths[2][256]; /* two live at once: cp/mv from one to the other */
    static int next;
    char *path = paths[next++ % 2];
    snprintf(path, sizeof(paths[0]), "%s/blocks/%s%012lld", dir, prefix,
             (long long)((T0_NS + blk * HOUR_NS) / 1000000000LL));
    return path;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ------------------------------------------------------------- tests */

static void test_setup(void)
{
    for (int i = 0; i < N_FUNCS; i++)
        snprintf(func_names[i], sizeof(func_names[i]), "fn%02d", i);
    LC_CHECK(mkdtemp(dir) != NULL);
    lc_store_opts_t o = {.dir = dir, .compacts = true}; /* as the ingester opens it */
    LC_ASSERT_OK(lc_store_open(&o, &store));
    compact_write_all();
    take_oracle();
}

static void test_compact(void)
{
    lc_store_compact_stats_t cs;
    /* The rollups of the 3 windows that ended wait for the compaction: summed
     * before its swap, they would be summed again after it. */
    LC_ASSERT_EQ(compact_pass(&cs), 0);
    LC_ASSERT_EQ(cs.blocks_done, N_BLOCKS);
    LC_ASSERT_EQ(cs.blocks_pending, 0);
    LC_CHECK(cs.bytes_after < cs.bytes_before); /* random samples: little to compress */
    fprintf(stderr, "compacted: %llu -> %llu bytes\n", (unsigned long long)cs.bytes_before,
            (unsigned long long)cs.bytes_after);
    size_t compressed;
    check_same(&compressed);
    LC_ASSERT_EQ(compressed, (size_t)N_BLOCKS * N_PODS * PER_POD);
    size_t n_summaries, zsummaries = summaries_compressed(&n_summaries);
    fprintf(stderr, "summaries: %zu of %zu compressed\n", zsummaries, n_summaries);
    LC_ASSERT_EQ(n_summaries, (size_t)N_BLOCKS * N_PODS);
    LC_ASSERT_EQ(zsummaries, n_summaries); /* a summary sums 40 profiles: it compresses */
    /* Nothing left to do but the rollups, once each. */
    LC_ASSERT_EQ(compact_pass(&cs), 3);
    LC_ASSERT_EQ(cs.blocks_done, 0);
    LC_ASSERT_EQ(compact_pass(&cs), 0);
}

/* A late profile lands in a compacted block among compressed ones: read
 * together, summarised again, and the block is compacted again. */
static void test_late_write(void)
{
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    /* a name the block lacks: a string, function and location past the
     * packed tables, and nodes past the packed tree */
    snprintf(func_names[N_FUNCS - 1], sizeof(func_names[0]), "late_fn");
    compact_write_one(txn, 1, T0_NS + HOUR_NS + 8 * 60000000000LL + 5);
    snprintf(func_names[N_FUNCS - 1], sizeof(func_names[0]), "fn%02d", N_FUNCS - 1);
    LC_ASSERT_OK(lc_store_write_commit(txn));
    take_oracle(); /* read with the block half compressed, half plain */
    LC_CHECK(memmem(oracle.data, oracle.len, "late_fn", 7) != NULL);
    size_t compressed;
    check_same(&compressed);
    LC_ASSERT_EQ(compressed, (size_t)N_BLOCKS * N_PODS * PER_POD);
    lc_store_compact_stats_t cs;
    compact_pass(&cs);
    LC_ASSERT_EQ(cs.blocks_done, 1);
    check_same(&compressed);
    LC_ASSERT_EQ(compressed, (size_t)N_BLOCKS * N_PODS * PER_POD + 1);
}

/* After a restart the blocks are known compact from their records. */
static void test_reopen(void)
{
    reopen();
    size_t compressed;
    check_same(&compressed);
    lc_store_compact_stats_t cs;
    compact_pass(&cs);
    LC_ASSERT_EQ(cs.blocks_done, 0);
    LC_ASSERT_EQ(cs.blocks_pending, 0);
}

/* Counts the entries of a DB of block blk's file, and whether its meta has
 * a key (the store is closed: LMDB allows one open per process). */
static size_t block_entries(int blk, const char *db, const char *meta_key, bool *has_key)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi, meta;
    MDB_stat st;
    LC_CHECK(mdb_env_create(&env) == 0);
    LC_CHECK(mdb_env_set_maxdbs(env, 16) == 0);
    LC_CHECK(mdb_env_open(env, block_dir(blk, ""), MDB_RDONLY, 0644) == 0);
    LC_CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0);
    LC_CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
    LC_CHECK(mdb_dbi_open(txn, "meta", 0, &meta) == 0);
    LC_CHECK(mdb_stat(txn, dbi, &st) == 0);
    MDB_val k = {strlen(meta_key), (void *)meta_key}, v;
    *has_key = mdb_get(txn, meta, &k, &v) == 0;
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return st.ms_entries;
}

/* Compaction leaves the symbol tables and the tree packed into the meta DB
 * (format 6), the late write's records included once it ran again. */
static void test_tables_packed(void)
{
    lc_store_close(store);
    static const char *const dbs[] = {"strings",   "functions", "mappings",
                                      "locations", "series",    "nodes"};
    for (int blk = 0; blk < N_BLOCKS; blk++)
        for (size_t i = 0; i < LC_ARRAY_LEN(dbs); i++) {
            char key[32];
            bool packed;
            snprintf(key, sizeof(key), "packed.%s", dbs[i]);
            LC_ASSERT_EQ(block_entries(blk, dbs[i], key, &packed), 0);
            LC_CHECK(packed);
        }
    lc_store_opts_t o = {.dir = dir, .compacts = true};
    LC_ASSERT_OK(lc_store_open(&o, &store));
}

/* The states a kill leaves: a half-built rewrite; a complete one beside the
 * block (before the swap); the block moved aside and the rewrite not yet in
 * place (between the renames); the old copy left after the swap. */
static void test_crash_states(void)
{
    char cmd[1024];
    /* half built: junk in .compact-<b0>; an old copy of b1 after its swap */
    LC_CHECK(mkdir(block_dir(0, ".compact-"), 0755) == 0);
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s.3'", block_dir(1, ""), block_dir(1, ".old-"));
    LC_CHECK(system(cmd) == 0);
    /* between the renames: b2 only exists as .compacted-<b2> */
    snprintf(cmd, sizeof(cmd), "mv '%s' '%s'", block_dir(2, ""), block_dir(2, ".compacted-"));
    LC_CHECK(system(cmd) == 0);
    reopen();
    LC_CHECK(!exists(block_dir(0, ".compact-")));
    char old1[300];
    snprintf(old1, sizeof(old1), "%s.3", block_dir(1, ".old-"));
    LC_CHECK(!exists(old1));
    LC_CHECK(exists(block_dir(2, "")));
    LC_CHECK(!exists(block_dir(2, ".compacted-")));
    size_t compressed;
    check_same(&compressed);
    /* a complete rewrite beside its block (killed before the swap): dropped */
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", block_dir(0, ""), block_dir(0, ".compacted-"));
    LC_CHECK(system(cmd) == 0);
    /* the block moved aside, its rewrite lost: the old copy is put back */
    snprintf(cmd, sizeof(cmd), "mv '%s' '%s.9'", block_dir(1, ""), block_dir(1, ".old-"));
    LC_CHECK(system(cmd) == 0);
    reopen();
    LC_CHECK(!exists(block_dir(0, ".compacted-")));
    LC_CHECK(exists(block_dir(1, "")));
    check_same(&compressed);
}

/* Retention drops compacted blocks whole, as any block. */
static void test_retention(void)
{
    lc_store_close(store);
    lc_store_opts_t o = {.dir = dir, .retention_ns = HOUR_NS};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    size_t dropped = 0;
    LC_ASSERT_OK(lc_store_retention(store, NOW_NS, &dropped));
    LC_ASSERT_EQ(dropped, N_BLOCKS);
    char blocks[300];
    snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", blocks);
    LC_CHECK(system(cmd) == 0); /* no block, no rewrite, no old copy */
}

static void test_teardown(void)
{
    lc_store_close(store);
    lc_buf_fini(&oracle);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(test_setup, test_compact, test_late_write, test_reopen, test_tables_packed,
             test_crash_states, test_retention, test_teardown)
