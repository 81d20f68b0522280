/*
 * test_query_summary.c — block summaries give the answers the profiles give.
 *
 * Random profiles (random stacks over a small set of functions, some values
 * negative, some with span ids and profile ids) are written for several pods
 * over five one-hour blocks, summaries are built, a late profile then drops
 * one series' summary, and random merges (ranges inside, across and covering
 * blocks; selectors on pods; call sites; span and profile-id selectors) are
 * answered twice: with summaries allowed and with the profile path forced
 * (lc_query_t.no_summaries). The tree bytes, the merged pprof and SelectSeries
 * (random steps, sum or average, by pod) must be byte-identical. Rollups
 * (6 h and a day) are built too: the first windows hold negative values and
 * are kept unusable, later ones are whole; a late write into a rolled-up
 * window must make its rollups unused until they are rebuilt. The profile path is the oracle: it is
 * what ember answered before summaries existed, and it is checked against Go's pprof elsewhere
 * (test_query_merge.c).
 */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/query.h"
#include "lc_test.h"
#include "lc_test_pprof.h"

#define HOUR_NS 3600000000000LL
#define T0_NS (472222LL * HOUR_NS) /* an hour boundary in 2023 */
#define N_BLOCKS 28 /* hours 22..49 of a day: rollup windows of 6 h and a day whole */
#define N_PODS 4
#define N_FUNCS 24
#define PT "test:cpu:nanoseconds:cpu:nanoseconds"

static lc_store_t *store;
static char dir[] = "/tmp/ember-qsum-XXXXXX";
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static const char *const tenants[] = {"anonymous"};

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t rnd_below(uint64_t n)
{
    return rnd() % n;
}

static char func_names[N_FUNCS][16];

/* ------------------------------------------------------------- writing */

/* Values of pod 3 are whole periods (10^7): stored scaled (STORE_PF_SCALED). */
static bool with_negatives = true; /* the first blocks only: a rollup window keeps none */

static lc_pprof_t *random_pprof(lc_arena_t *a, int pod, size_t *n_samples)
{
    uint64_t locs[N_FUNCS];
    lc_pprof_builder_t *b = lc_test_pprof_app(func_names, N_FUNCS, locs);
    /* unsymbolized frames (no line): "app+0x800" in the app's mapping, and
     * "0x77" in none; both paths must name them alike (issue 31) */
    uint64_t map = lc_pprof_builder_mapping(b, 0x1000, 0x9000, 0, "/bin/app", "", true);
    uint64_t raw[2] = {lc_pprof_builder_location(b, map, 0x1800, NULL, 0),
                       lc_pprof_builder_location(b, 0, 0x77, NULL, 0)};
    size_t n = 5 + rnd_below(20);
    for (size_t s = 0; s < n; s++) {
        uint64_t stack[8];
        size_t depth = 1 + rnd_below(6);
        for (size_t d = 0; d < depth; d++) /* leaf first; a narrow tree: shared prefixes */
            stack[depth - 1 - d] = rnd_below(6) == 0
                                       ? raw[rnd_below(2)]
                                       : locs[d == 0 ? 0 : (d * 3 + rnd_below(3)) % N_FUNCS];
        int64_t v = (int64_t)rnd_below(1000) - (with_negatives && rnd_below(8) == 0 ? 1500 : 0);
        if (pod == 3)
            v *= 10000000;
        lc_pprof_builder_sample(b, stack, depth, &v, NULL, 0);
    }
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    *n_samples = p ? p->n_sample : 0;
    return p;
}

static void write_one(lc_store_txn_t *txn, int pod, int64_t t_ns)
{
    lc_arena_t *a = lc_arena_new(16u << 20);
    size_t n;
    lc_pprof_t *p = random_pprof(a, pod, &n);
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
    uint64_t spans[32];
    for (size_t i = 0; i < n; i++)
        spans[i] = rnd_below(3); /* 0 = none */
    uint8_t pid[LC_STORE_PROFILE_ID_BYTES] = {0};
    pid[0] = (uint8_t)rnd_below(4);
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

static void write_all(void)
{
    for (int blk = 0; blk < N_BLOCKS; blk++) {
        with_negatives = blk < 2;
        lc_store_txn_t *txn = NULL;
        LC_ASSERT_OK(lc_store_write_begin(store, &txn));
        for (int k = 0; k < 12; k++)
            for (int pod = 0; pod < N_PODS; pod++)
                write_one(txn, pod,
                          T0_NS + blk * HOUR_NS + k * 300000000000LL +
                              (int64_t)rnd_below(1000000000));
        LC_ASSERT_OK(lc_store_write_commit(txn));
    }
}

/* ------------------------------------------------------------- querying */

typedef struct answer_s {
    lc_buf_t tree, pprof, series;
} answer_t;

static int64_t series_step_ms;
static bool series_average;

/* Every series of s packed, appended to out; how many there were. */
static size_t series_pack(lc_query_series_t *s, lc_buf_t *out)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    Types__V1__Series **ser = NULL;
    size_t n = 0;
    LC_ASSERT_OK(lc_query_series_emit(s, a, &ser, &n));
    for (size_t i = 0; i < n; i++) {
        uint8_t *tmp = malloc(types__v1__series__get_packed_size(ser[i]) + 1);
        size_t len = types__v1__series__pack(ser[i], tmp);
        LC_ASSERT_OK(lc_buf_append(out, tmp, len));
        free(tmp);
    }
    lc_arena_free(a);
    return n;
}

/* SelectSeries by pod over the query's range, every series packed. */
static void answer_series(lc_store_reader_t *r, const lc_query_t *q, lc_buf_t *out)
{
    static const char *const by[] = {"pod"};
    lc_query_series_opts_t o = {.start_ms = q->start_ns / 1000000,
                                .end_ms = q->end_ns / 1000000,
                                .step_ms = series_step_ms,
                                .group_by = by,
                                .n_group_by = 1,
                                .average = series_average};
    lc_query_series_t *s = lc_query_series_new(&o);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_series_collect(r, q, s, &st));
    lc_buf_init(out, LC_BUF_UNLIMITED);
    (void)series_pack(s, out);
    lc_query_series_free(s);
}

static void answer(const lc_query_t *q, answer_t *out)
{
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, q->start_ns, q->end_ns, &r));
    lc_ftree_t *t = lc_ftree_new(0);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_tree(r, q, t, &st));
    lc_buf_init(&out->tree, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_ftree_write_tree(t, 0, &out->tree));
    lc_ftree_free(t);
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    LC_ASSERT_OK(lc_query_merge_pprof(r, q, b, &st));
    lc_buf_init(&out->pprof, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &out->pprof));
    lc_pprof_builder_free(b);
    answer_series(r, q, &out->series);
    lc_store_read_end(r);
}

static void answer_fini(answer_t *a)
{
    lc_buf_fini(&a->tree);
    lc_buf_fini(&a->pprof);
    lc_buf_fini(&a->series);
}

static size_t answers_with_address_frames; /* trees naming "app+0x800" */

/* Both paths, compared; returns the tree size (0 = empty answer). */
static size_t compare_paths(lc_query_t *q, const char *what)
{
    answer_t fast, slow;
    static const int64_t steps[] = {1000, 60000, 420000, 3600000, 86400000};
    series_step_ms = steps[rnd_below(LC_ARRAY_LEN(steps))];
    series_average = rnd_below(2);
    q->no_summaries = false;
    answer(q, &fast);
    q->no_summaries = true;
    answer(q, &slow);
    LC_ASSERT_EQ(fast.tree.len, slow.tree.len);
    if (fast.tree.len == slow.tree.len && fast.tree.len) /* empty: no buffer */
        LC_ASSERT_MEM_EQ(fast.tree.data, slow.tree.data, fast.tree.len);
    LC_ASSERT_EQ(fast.pprof.len, slow.pprof.len);
    if (fast.pprof.len == slow.pprof.len && fast.pprof.len)
        LC_ASSERT_MEM_EQ(fast.pprof.data, slow.pprof.data, fast.pprof.len);
    LC_ASSERT_EQ(fast.series.len, slow.series.len);
    if (fast.series.len == slow.series.len && fast.series.len)
        LC_ASSERT_MEM_EQ(fast.series.data, slow.series.data, fast.series.len);
    if (fast.tree.len && memmem(fast.tree.data, fast.tree.len, "app+0x800", 9))
        answers_with_address_frames++;
    if (fast.tree.len != slow.tree.len)
        fprintf(stderr, "differs: %s [%lld, %lld]\n", what, (long long)q->start_ns,
                (long long)q->end_ns);
    size_t n = slow.tree.len;
    answer_fini(&fast);
    answer_fini(&slow);
    return n;
}

/* A range: block-aligned, inside one block, or random, over the data. */
static void random_range(int64_t *start, int64_t *end)
{
    int64_t lo = T0_NS - HOUR_NS, span = (N_BLOCKS + 2) * HOUR_NS;
    switch (rnd_below(3)) {
    case 0: {
        int64_t a = (int64_t)rnd_below(N_BLOCKS + 1), b = a + 1 + (int64_t)rnd_below(N_BLOCKS);
        *start = T0_NS + a * HOUR_NS - (int64_t)rnd_below(2) * HOUR_NS;
        *end = T0_NS + b * HOUR_NS - 1;
        break;
    }
    case 1:
        *start = T0_NS + (int64_t)rnd_below(N_BLOCKS) * HOUR_NS + (int64_t)rnd_below(HOUR_NS / 2);
        *end = *start + (int64_t)rnd_below(HOUR_NS / 2);
        break;
    default:
        *start = lo + (int64_t)rnd_below((uint64_t)span);
        *end = *start + (int64_t)rnd_below((uint64_t)span);
    }
}

static void random_queries(int n)
{
    static const char *const sels[] = {"{}",
                                       "{pod=\"p0\"}",
                                       "{pod!=\"p1\"}",
                                       "{pod=~\"p[12]\"}",
                                       "{pod=\"p2\"}",
                                       "{service_name=\"nobody\"}"};
    static const uint64_t spans[] = {1, 2};
    static const uint8_t pids[2][LC_STORE_PROFILE_ID_BYTES] = {{1}, {3}};
    const char *cs[2] = {func_names[0], func_names[3]};
    size_t nonempty = 0;
    for (int i = 0; i < n; i++) {
        const char *s = sels[rnd_below(LC_ARRAY_LEN(sels))];
        lc_selector_t sel;
        lc_status_t st = {0};
        LC_ASSERT_OK(lc_selector_parse(s, strlen(s), &sel, &st));
        LC_ASSERT_OK(lc_selector_add(&sel, "__profile_type__", LC_MATCH_EQ, PT, &st));
        lc_query_t q = {.tenants = tenants, .n_tenants = 1, .sel = &sel};
        random_range(&q.start_ns, &q.end_ns);
        uint64_t narrow = rnd_below(6);
        if (narrow == 0) {
            q.span_ids = spans;
            q.n_span_ids = 1 + rnd_below(2);
        } else if (narrow == 1) {
            q.profile_ids = pids;
            q.n_profile_ids = 1 + rnd_below(2);
        } else if (narrow == 2) {
            q.call_site = cs;
            q.n_call_site = 1 + rnd_below(2);
        }
        nonempty += compare_paths(&q, s) > 0;
        lc_selector_fini(&sel);
    }
    LC_CHECK(nonempty > (size_t)n / 3); /* the comparisons were not all of empty trees */
}

/* ------------------------------------------------------------- tests */

static void test_setup(void)
{
    for (int i = 0; i < N_FUNCS; i++)
        snprintf(func_names[i], sizeof(func_names[i]), "fn%02d", i);
    LC_CHECK(mkdtemp(dir) != NULL);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    write_all();
}

/* Nothing summarised yet: summaries absent, both paths read profiles. */
static void test_before_summaries(void)
{
    random_queries(40);
}

static bool has_summary(int64_t t_ns, uint32_t series)
{
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, t_ns, t_ns, &r));
    lc_stored_profile_t p;
    int rc = lc_block_summary(lc_store_reader_block(r, 0), series, &p);
    LC_CHECK(rc == 0 || rc == LC_ENOTFOUND);
    lc_store_read_end(r);
    return rc == 0;
}

/* Usable rollups for a merge over [start, end]. */
static size_t rollups_for(int64_t start, int64_t end)
{
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, start, end, &r));
    lc_rollups_t *rs = NULL;
    LC_ASSERT_OK(lc_store_rollups_begin(r, start, end, &rs));
    size_t n = lc_rollups_count(rs);
    lc_store_rollups_end(rs);
    lc_store_read_end(r);
    return n;
}

typedef struct sums_seen_s {
    size_t series, packed;
} sums_seen_t;

static int count_sums(const lc_rollup_series_t *se, void *data)
{
    sums_seen_t *seen = data;
    seen->series++;
    /* flags are the first varint of _data; 8 = a zstd frame (one byte: < 0x80) */
    seen->packed += se->sums._len > 0 && (se->sums._data[0] & 0x8);
    return 0;
}

/* The series records of the usable rollups over [start, end], and how many
 * hold their sums compressed. Their values are checked by random_queries
 * against merges that read the blocks. */
static sums_seen_t rollup_sums(int64_t start, int64_t end)
{
    sums_seen_t seen = {0};
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, start, end, &r));
    lc_rollups_t *rs = NULL;
    LC_ASSERT_OK(lc_store_rollups_begin(r, start, end, &rs));
    for (size_t i = 0; i < lc_rollups_count(rs); i++)
        LC_ASSERT_OK(lc_rollup_series(rs, i, tenants, 1, NULL, count_sums, &seen));
    lc_store_rollups_end(rs);
    lc_store_read_end(r);
    return seen;
}

/* T0 is hour 22 of a day. Window [T0 + 2 h, T0 + 8 h) is whole, the one
 * before holds negative values; so is the day [T0 + 2 h, T0 + 26 h). */
#define WIN_B_START (T0_NS + 2 * HOUR_NS)
#define WIN_B_END (T0_NS + 8 * HOUR_NS - 1)
#define DAY_END (T0_NS + 26 * HOUR_NS - 1)

static void test_summaries_built(void)
{
    lc_store_summarize_stats_t st;
    /* The last block has not ended yet at this "now". */
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + (N_BLOCKS - 1) * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.blocks_done, N_BLOCKS - 1);
    LC_ASSERT_EQ(st.series_done, (N_BLOCKS - 1) * N_PODS);
    LC_ASSERT_EQ(st.blocks_pending, 0);
    /* 6 h: hours 18-23 (unusable: negative sums), 24-29 .. 42-47; days: 0-23
     * (unusable), 24-47 */
    LC_ASSERT_EQ(st.rollups_done, 7);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 1);               /* the day */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END + 6 * HOUR_NS), 1); /* + hours 48, 49 */
    LC_ASSERT_EQ(rollups_for(WIN_B_START + HOUR_NS, DAY_END), 3);     /* 30-35 .. 42-47 */
    LC_ASSERT_EQ(rollups_for(T0_NS - 4 * HOUR_NS, WIN_B_END), 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START + 1, WIN_B_END), 1); /* no profile at the edge */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END - HOUR_NS / 2), 0);
    LC_CHECK(has_summary(T0_NS, 1));
    LC_CHECK(!has_summary(T0_NS + (N_BLOCKS - 1) * HOUR_NS, 1));
    sums_seen_t day = rollup_sums(WIN_B_START, DAY_END);
    fprintf(stderr, "day rollup: %zu of %zu series sums compressed\n", day.packed, day.series);
    LC_ASSERT_EQ(day.series, N_PODS);
    LC_ASSERT_EQ(day.packed, day.series);
    /* A second pass finds nothing to do. */
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + (N_BLOCKS - 1) * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.series_done, 0);
    LC_ASSERT_EQ(st.rollups_done, 0);
    answers_with_address_frames = 0;
    random_queries(300);
    LC_CHECK(answers_with_address_frames > 0); /* the unsymbolized frames were compared */
}

/* ---- a rollup exported as a file of its own (lc_store_rollup_export) ---- */

static char export_dir[] = "/tmp/ember-qsum-export-XXXXXX";

/* Exports (level, window) as seen by a reader over the window; the rc. */
static int export_window(int level, int64_t window, int64_t len, const char *file)
{
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, window, window + len - 1, &r));
    char path[256];
    snprintf(path, sizeof path, "%s/%s", export_dir, file);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    LC_CHECK(fd >= 0);
    int rc = lc_store_rollup_export(r, level, window, export_dir, fd);
    close(fd);
    lc_store_read_end(r);
    return rc;
}

/* Every record of db in txn whose key begins with prefix, in key order:
 * "<key hex>=<value hex>;" each, into out (the raw LMDB view, not ember's). */
static void records_dump(MDB_txn *txn, const char *db, const uint8_t *prefix, size_t plen,
                         lc_buf_t *out)
{
    MDB_dbi dbi;
    LC_ASSERT_EQ(mdb_dbi_open(txn, db, 0, &dbi), 0);
    MDB_cursor *cur;
    LC_ASSERT_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
    MDB_val k, v;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)
            continue;
        char hex[3];
        for (size_t i = 0; i < k.mv_size + v.mv_size; i++) {
            const uint8_t *p = i < k.mv_size ? (const uint8_t *)k.mv_data + i
                                             : (const uint8_t *)v.mv_data + (i - k.mv_size);
            snprintf(hex, sizeof hex, "%02x", *p);
            LC_ASSERT_OK(lc_buf_append(out, hex, 2));
            if (i + 1 == k.mv_size)
                LC_ASSERT_OK(lc_buf_append(out, "=", 1));
        }
        LC_ASSERT_OK(lc_buf_append(out, ";", 1));
    }
    mdb_cursor_close(cur);
}

/* Both databases of an LMDB environment (a directory, or one file). */
static void env_dump(const char *path, unsigned flags, const uint8_t *prefix, size_t plen,
                     lc_buf_t *out)
{
    MDB_env *env;
    LC_ASSERT_EQ(mdb_env_create(&env), 0);
    LC_ASSERT_EQ(mdb_env_set_maxdbs(env, 2), 0);
    LC_ASSERT_EQ(mdb_env_open(env, path, flags | MDB_RDONLY | MDB_NOLOCK, 0644), 0);
    MDB_txn *txn;
    LC_ASSERT_EQ(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    records_dump(txn, "windows", prefix, plen, out);
    LC_ASSERT_OK(lc_buf_append(out, "|", 1));
    records_dump(txn, "series", prefix, plen, out);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* The exported day holds exactly the store's records of that window, as
 * LMDB itself reads both files (the store closed meanwhile: one process may
 * not open an environment twice); a window whose rollup is unusable (its
 * sums hold negative values) or not built yet exports nothing, each said
 * apart. */
static void test_rollup_export(void)
{
    LC_CHECK(mkdtemp(export_dir) != NULL);
    LC_ASSERT_EQ(export_window(LC_ROLLUP_LEVEL_DAY, WIN_B_START, 24 * HOUR_NS, "day.mdb"), 0);
    LC_ASSERT_EQ(export_window(LC_ROLLUP_LEVEL_6H, WIN_B_START, 6 * HOUR_NS, "6h.mdb"), 0);
    LC_ASSERT_EQ(export_window(LC_ROLLUP_LEVEL_6H, T0_NS - 4 * HOUR_NS, 6 * HOUR_NS, "neg.mdb"),
                 LC_EUNSUPPORTED); /* its sums hold negative values: kept unusable */
    LC_ASSERT_EQ(
        export_window(LC_ROLLUP_LEVEL_6H, WIN_B_START + 24 * HOUR_NS, 6 * HOUR_NS, "open.mdb"),
        LC_ENOTFOUND); /* hours 48, 49: the last one has not ended */
    LC_ASSERT_EQ(export_window(LC_ROLLUP_LEVEL_DAY, WIN_B_START + HOUR_NS, 24 * HOUR_NS, "x.mdb"),
                 LC_EINPUT);
    lc_store_close(store);
    uint8_t prefix[9];
    uint64_t key = (uint64_t)WIN_B_START ^ (1ull << 63); /* window start BE64, sign flipped */
    for (int i = 7; i >= 0; i--, key >>= 8)
        prefix[i] = (uint8_t)key;
    prefix[8] = LC_ROLLUP_LEVEL_DAY;
    lc_buf_t in_store, exported, whole;
    lc_buf_init(&in_store, LC_BUF_UNLIMITED);
    lc_buf_init(&exported, LC_BUF_UNLIMITED);
    lc_buf_init(&whole, LC_BUF_UNLIMITED);
    char path[256];
    snprintf(path, sizeof path, "%s/rollups", dir);
    env_dump(path, 0, prefix, sizeof prefix, &in_store);
    snprintf(path, sizeof path, "%s/day.mdb", export_dir);
    env_dump(path, MDB_NOSUBDIR, prefix, sizeof prefix, &exported);
    env_dump(path, MDB_NOSUBDIR, prefix, 0, &whole); /* nothing but the day */
    LC_CHECK(in_store.len > 2 * (9 + N_PODS * 13));  /* the window and its series */
    LC_CHECK(in_store.len == exported.len &&
             memcmp(in_store.data, exported.data, in_store.len) == 0);
    LC_CHECK(whole.len == exported.len && memcmp(whole.data, exported.data, whole.len) == 0);
    lc_buf_fini(&in_store);
    lc_buf_fini(&exported);
    lc_buf_fini(&whole);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
}

/* A flame graph and series (sums and counts) of r over q, serialized. */
static void tree_and_series(lc_store_reader_t *r, const lc_query_t *q, lc_buf_t *tree,
                            lc_buf_t *series)
{
    lc_ftree_t *t = lc_ftree_new(0);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_tree(r, q, t, &st));
    lc_buf_init(tree, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_ftree_write_tree(t, 0, tree));
    lc_ftree_free(t);
    const char *by[] = {"pod"};
    lc_query_series_opts_t o = {.start_ms = q->start_ns / 1000000,
                                .end_ms = q->end_ns / 1000000,
                                .step_ms = 1800000,
                                .group_by = by,
                                .n_group_by = 1};
    lc_query_series_t *sums = lc_query_series_new(&o), *counts = lc_query_series_new(&o);
    LC_ASSERT_OK(lc_query_series_collect_counted(r, q, sums, counts, &st));
    lc_buf_init(series, LC_BUF_UNLIMITED);
    LC_CHECK(series_pack(sums, series) == N_PODS);
    LC_CHECK(series_pack(counts, series) == N_PODS);
    lc_query_series_free(sums);
    lc_query_series_free(counts);
}

/* The exported day, opened as a rollup file and added to a reader of a store
 * that holds none of its blocks (as the bucket's read-back does), answers a
 * flame graph and series over the day exactly as the day's blocks do; a
 * window the file does not hold, or one that is not a window, is refused. */
static void test_rollup_file(void)
{
    lc_selector_t sel;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_selector_parse("{}", 2, &sel, &st));
    LC_ASSERT_OK(lc_selector_add(&sel, "__profile_type__", LC_MATCH_EQ, PT, &st));
    lc_query_t q = {.tenants = tenants,
                    .n_tenants = 1,
                    .sel = &sel,
                    .start_ns = WIN_B_START,
                    .end_ns = DAY_END,
                    .no_summaries = true};
    lc_buf_t want_tree, want_series, got_tree, got_series;
    lc_store_reader_t *r = NULL;
    LC_ASSERT_OK(lc_store_read_begin(store, q.start_ns, q.end_ns, &r));
    LC_CHECK(lc_store_reader_count(r) > 0);
    tree_and_series(r, &q, &want_tree, &want_series); /* from the blocks */
    lc_store_read_end(r);

    char empty_dir[] = "/tmp/ember-qsum-empty-XXXXXX", path[256];
    LC_CHECK(mkdtemp(empty_dir) != NULL);
    lc_store_opts_t o = {.dir = empty_dir};
    lc_store_t *empty = NULL;
    LC_ASSERT_OK(lc_store_open(&o, &empty));
    snprintf(path, sizeof path, "%s/day.mdb", export_dir);
    lc_rollup_file_t *f = NULL;
    LC_ASSERT_OK(lc_rollup_file_open(path, &f));
    LC_ASSERT_OK(lc_store_read_begin(empty, q.start_ns, q.end_ns, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 0);
    LC_ASSERT_EQ(lc_store_reader_add_rollup(r, f, LC_ROLLUP_LEVEL_6H, WIN_B_START), LC_ENOTFOUND);
    LC_ASSERT_EQ(lc_store_reader_add_rollup(r, f, LC_ROLLUP_LEVEL_DAY, WIN_B_START + HOUR_NS),
                 LC_EINPUT);
    LC_ASSERT_OK(lc_store_reader_add_rollup(r, f, LC_ROLLUP_LEVEL_DAY, WIN_B_START));
    q.no_summaries = false;
    tree_and_series(r, &q, &got_tree, &got_series);
    lc_store_read_end(r);
    LC_CHECK(want_tree.len > 0 && want_series.len > 0);
    LC_ASSERT_EQ(got_tree.len, want_tree.len);
    if (got_tree.len == want_tree.len)
        LC_ASSERT_MEM_EQ(got_tree.data, want_tree.data, want_tree.len);
    LC_ASSERT_EQ(got_series.len, want_series.len);
    if (got_series.len == want_series.len)
        LC_ASSERT_MEM_EQ(got_series.data, want_series.data, want_series.len);
    lc_buf_fini(&want_tree);
    lc_buf_fini(&want_series);
    lc_buf_fini(&got_tree);
    lc_buf_fini(&got_series);
    lc_rollup_file_close(f);
    lc_store_close(empty);
    lc_selector_fini(&sel);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", empty_dir);
    LC_CHECK(system(cmd) == 0);
}

/* A late profile drops its series' summary in the same transaction; the
 * answers stay exact, and the next pass builds it again. */
static void test_late_write(void)
{
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    write_one(txn, 0, T0_NS + HOUR_NS + 123);
    write_one(txn, 1, T0_NS + 3 * HOUR_NS + 123); /* into the rolled-up window */
    LC_ASSERT_OK(lc_store_write_commit(txn));
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 0); /* its block changed */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 3);   /* the day's other windows */
    LC_ASSERT_EQ(export_window(LC_ROLLUP_LEVEL_DAY, WIN_B_START, 24 * HOUR_NS, "late.mdb"),
                 LC_ENOTFOUND); /* it no longer sums what the blocks hold */
    LC_ASSERT_EQ(
        export_window(LC_ROLLUP_LEVEL_6H, WIN_B_START + 6 * HOUR_NS, 6 * HOUR_NS, "late6.mdb"),
        0); /* a window the late write did not touch */
    int dropped = 0;
    for (uint32_t s = 1; s <= N_PODS; s++)
        dropped += !has_summary(T0_NS + HOUR_NS, s);
    LC_ASSERT_EQ(dropped, 1);
    random_queries(150);
    lc_store_summarize_stats_t st;
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.series_done, 2 + N_PODS); /* those series, and the last block's */
    LC_ASSERT_EQ(st.rollups_done, 4);         /* both 6-hour windows and both days */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 1);
    random_queries(150);
}

/* Summaries survive a reopen (they are in the block) and keep answering. */
static void test_reopen(void)
{
    lc_store_close(store);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    LC_CHECK(has_summary(T0_NS, 1));
    lc_store_summarize_stats_t st;
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.series_done, 0);
    LC_ASSERT_EQ(st.rollups_done, 0); /* checked against the blocks, still current */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 1);
    random_queries(100);
}

/* With retention, a window that begins before now - retention is never used
 * (its blocks may have been dropped and written again) and the next pass
 * deletes it; the answers come from the blocks and stay exact. */
static void test_retention(void)
{
    lc_store_close(store);
    lc_store_opts_t o = {.dir = dir, .retention_ns = 24 * HOUR_NS}; /* the data is from 2023 */
    LC_ASSERT_OK(lc_store_open(&o, &store));
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 0);
    random_queries(60);
    lc_store_summarize_stats_t st;
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.rollups_done, 0);
    /* Back without retention: that pass (now = hour 50, so now - retention is
     * hour 26) deleted the windows that begin before hour 26 (6 h: 18, 24; days:
     * 0, 24) and kept 30-35 .. 42-47; the deleted ones are built again. */
    lc_store_close(store);
    o.retention_ns = 0;
    LC_ASSERT_OK(lc_store_open(&o, &store));
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 3);
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.rollups_done, 4);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 1);
}

/* Compaction rewrites the blocks into new files (new transaction ids), so the
 * rollups summed from the old files are no longer used until the next pass
 * sums the compacted blocks again; answers stay exact on both paths. */
static void test_compaction(void)
{
    lc_store_compact_stats_t cs;
    LC_ASSERT_OK(lc_store_compact(store, T0_NS + N_BLOCKS * HOUR_NS, &cs));
    LC_ASSERT_EQ(cs.blocks_done, N_BLOCKS);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 0);
    random_queries(100);
    lc_store_summarize_stats_t st;
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.series_done, 0);  /* summaries were copied with the blocks */
    LC_ASSERT_EQ(st.rollups_done, 7); /* every window again, as in the first pass */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, DAY_END), 1);
    random_queries(100);
}

/* In a store that compacts (as the ingester's does), a late write into a
 * compacted block: its windows wait for the block to be compacted again, and
 * the rewrite's transaction ids, which start again as the previous rewrite's
 * did, must not revive the rollups summed without the late profile. */
static void test_late_write_compacting(void)
{
    lc_store_close(store);
    lc_store_opts_t o = {.dir = dir, .compacts = true};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    lc_store_summarize_stats_t st;
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    write_one(txn, 2, T0_NS + 4 * HOUR_NS + 321); /* a compacted block of window B */
    LC_ASSERT_OK(lc_store_write_commit(txn));
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 0);
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.rollups_done, 0); /* the block is due for compaction: wait */
    lc_store_compact_stats_t cs;
    LC_ASSERT_OK(lc_store_compact(store, T0_NS + N_BLOCKS * HOUR_NS, &cs));
    LC_ASSERT_EQ(cs.blocks_done, 1);
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 0); /* not the one without it */
    random_queries(100);
    LC_ASSERT_OK(lc_store_summarize(store, T0_NS + N_BLOCKS * HOUR_NS, 0, &st));
    LC_ASSERT_EQ(st.rollups_done, 2); /* window B and its day, once each */
    LC_ASSERT_EQ(rollups_for(WIN_B_START, WIN_B_END), 1);
    random_queries(100);
}

static void test_teardown(void)
{
    lc_store_close(store);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, export_dir);
    LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(test_setup, test_before_summaries, test_summaries_built, test_rollup_export,
             test_rollup_file, test_late_write, test_reopen, test_retention, test_compaction,
             test_late_write_compacting, test_teardown)
