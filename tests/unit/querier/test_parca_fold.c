/*
 * test_parca_fold.c — Parca's reports folded straight from store blocks
 * (parca_fold_nodes over lc_query_merge_nodes) against the two things they
 * must equal, on random profiles written across several blocks and series:
 *  - the tree the previous path built: the merged pprof (lc_query_merge_pprof,
 *    encoded and decoded) through parca_tree_add: the FLAMEGRAPH_TABLE trees
 *    (node by frame path, cumulative, diff), TOP rows and the totals must be
 *    the same, for merges, diffs and location_address grouping;
 *  - an oracle kept by the test from the samples it wrote: per frame, flat
 *    (the leaf's) and cumulative (once per stack) sums, against TOP.
 * Random names repeat across files and mappings, locations have 0 to 3
 * lines, stacks recurse, so frame identity is more than a name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/query.h"
#include "lc_test.h"
#include "lc_test_pprof.h"
#include "parca_int.h"

#define T0_NS 1700000000000000000LL
#define HOUR_NS 3600000000000LL
#define N_FUNCS 24
#define N_LOCS 60
#define N_SAMPLES 150
#define N_PROFILES 8
#define MAX_DEPTH 9
#define PT "test:cpu:nanoseconds:cpu:nanoseconds"

static lc_store_t *store;
static char dir[] = "/tmp/ember-parca-fold-XXXXXX";
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* ------------------------------------------------------------- the oracle */

/* A frame as TOP reports it: mapping file, address (lineless locations),
 * function name (module+0xoffset for lineless ones), file and start line. */
typedef struct okey_s {
    char mapping[32], name[32], file[32];
    uint64_t address;
    int64_t start_line;
} okey_t;

typedef struct orow_s {
    okey_t k;
    int64_t flat, cum;
    uint32_t seen; /* stack stamp: cumulative once per stack */
} orow_t;

static orow_t orows[4096];
static size_t n_orows;

static orow_t *orow(const okey_t *k)
{
    for (size_t i = 0; i < n_orows; i++)
        if (memcmp(&orows[i].k, k, sizeof(*k)) == 0)
            return &orows[i];
    LC_CHECK(n_orows < LC_ARRAY_LEN(orows));
    orows[n_orows].k = *k;
    return &orows[n_orows++];
}

/* ------------------------------------------------------- random profiles */

typedef struct rloc_s {
    int map;     /* 0..2 */
    int n_lines; /* 0..3 */
    int funcs[3], lines[3];
    uint64_t address;
} rloc_t;

static const char *const maps[] = {"/bin/app", "/lib/libc.so", "[kernel]"};
static rloc_t rlocs[N_LOCS];

static void func_parts(int f, char *name, char *file, int64_t *start)
{
    /* names repeat across files: f7 in a.go and in b.go are two frames */
    snprintf(name, 32, "f%d", f % 9);
    snprintf(file, 32, "%c.go", 'a' + f % 3);
    *start = f % 4;
}

static void make_locations(void)
{
    for (int i = 0; i < N_LOCS; i++) {
        rloc_t *l = &rlocs[i];
        l->map = (int)rnd(3);
        l->n_lines = i % 11 == 0 ? 0 : 1 + (int)rnd(3);
        l->address = 0x1000 + (uint64_t)i * 16;
        for (int j = 0; j < l->n_lines; j++) {
            l->funcs[j] = (int)rnd(N_FUNCS);
            l->lines[j] = 1 + (int)rnd(50);
        }
    }
}

/* The oracle keys of one location's frames (innermost first). */
static size_t loc_keys(const rloc_t *l, okey_t *out)
{
    if (l->n_lines == 0) { /* named module+0xoffset: every mapping starts at 0x1000, offset 0 */
        memset(&out[0], 0, sizeof(out[0]));
        snprintf(out[0].mapping, 32, "%s", maps[l->map]);
        const char *slash = strrchr(maps[l->map], '/');
        snprintf(out[0].name, 32, "%s+0x%llx", slash ? slash + 1 : maps[l->map],
                 (unsigned long long)(l->address - 0x1000));
        out[0].address = l->address;
        return 1;
    }
    for (int j = 0; j < l->n_lines; j++) {
        memset(&out[j], 0, sizeof(out[j]));
        snprintf(out[j].mapping, 32, "%s", maps[l->map]);
        func_parts(l->funcs[j], out[j].name, out[j].file, &out[j].start_line);
    }
    return (size_t)l->n_lines;
}

static uint32_t stamp;

/* Records one sample (locations leaf first) in the oracle. */
static void oracle_sample(const int *locs, size_t n, int64_t v)
{
    stamp++;
    bool leaf = true;
    for (size_t i = 0; i < n; i++) {
        okey_t ks[3];
        size_t nk = loc_keys(&rlocs[locs[i]], ks);
        for (size_t j = 0; j < nk; j++) {
            orow_t *r = orow(&ks[j]);
            if (leaf)
                r->flat += v;
            leaf = false;
            if (r->seen != stamp) {
                r->seen = stamp;
                r->cum += v;
            }
        }
    }
}

static void write_random(lc_store_txn_t *txn, int64_t time_ns, const char *job, bool oracle)
{
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_pprof_builder_period(b, "cpu", "nanoseconds", 10);
    uint64_t map_ids[3], loc_ids[N_LOCS], func_ids[N_FUNCS];
    for (int i = 0; i < 3; i++)
        map_ids[i] =
            lc_pprof_builder_mapping(b, 0x1000, 0x100000, 0, maps[i], i ? "bid" : "", true);
    for (int f = 0; f < N_FUNCS; f++) {
        char name[32], file[32];
        int64_t start;
        func_parts(f, name, file, &start);
        func_ids[f] = lc_pprof_builder_function(b, name, name, file, start);
    }
    for (int i = 0; i < N_LOCS; i++) {
        lc_pprof_line_t lines[3];
        for (int j = 0; j < rlocs[i].n_lines; j++)
            lines[j] = (lc_pprof_line_t){func_ids[rlocs[i].funcs[j]], rlocs[i].lines[j]};
        loc_ids[i] = lc_pprof_builder_location(b, map_ids[rlocs[i].map], rlocs[i].address, lines,
                                               (size_t)rlocs[i].n_lines);
    }
    for (int s = 0; s < N_SAMPLES; s++) {
        int locs[MAX_DEPTH];
        uint64_t ids[MAX_DEPTH];
        size_t n = 1 + rnd(MAX_DEPTH);
        /* a shared root side makes the stacks a tree, not a fan */
        for (size_t i = 0; i < n; i++)
            locs[n - 1 - i] = i < 2 ? (int)rnd(3) + 1 : (int)rnd(N_LOCS);
        for (size_t i = 0; i < n; i++)
            ids[i] = loc_ids[locs[i]];
        int64_t v = 1 + rnd(1000);
        lc_pprof_builder_sample(b, ids, n, &v, NULL, 0);
        if (oracle)
            oracle_sample(locs, n, v);
    }
    lc_arena_t *a = lc_arena_new(64u << 20);
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    lc_pprof_index_t *ix = NULL;
    LC_ASSERT_OK(p ? lc_pprof_index_new(p, a, &ix) : -1);
    lc_labels_t ls;
    lc_labels_init(&ls);
    lc_labels_add(&ls, "__name__", "test");
    lc_labels_add(&ls, "__profile_type__", PT);
    lc_labels_add(&ls, "job", job);
    lc_labels_sort(&ls);
    lc_store_write_t w = {
        .tenant = "anonymous", .labels = &ls, .time_ns = time_ns, .profile = p, .index = ix};
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    lc_labels_fini(&ls);
    lc_arena_free(a);
}

/* Job "a" (in the oracle) and job "b", spread over hours: several blocks. */
static void setup(void)
{
    LC_CHECK(mkdtemp(dir) != NULL);
    lc_store_opts_t o = {.dir = dir};
    LC_ASSERT_OK(lc_store_open(&o, &store));
    make_locations();
    lc_store_txn_t *txn = NULL;
    LC_ASSERT_OK(lc_store_write_begin(store, &txn));
    for (int k = 0; k < N_PROFILES; k++) {
        write_random(txn, T0_NS + k * 5 * HOUR_NS, "a", true);
        write_random(txn, T0_NS + k * 5 * HOUR_NS + 1000, "b", false);
    }
    LC_ASSERT_OK(lc_store_write_commit(txn));
}

/* ------------------------------------------------------------- the trees */

typedef struct query_s {
    lc_selector_t sel;
    lc_query_t q;
    lc_store_reader_t *r;
} query_t;

static const char *const tenants[] = {"anonymous"};

static void query_begin(query_t *qq, const char *job)
{
    lc_status_t st = {0};
    memset(qq, 0, sizeof(*qq));
    char sel[64];
    snprintf(sel, sizeof(sel), "{job=~\"%s\"}", job);
    LC_ASSERT_OK(lc_selector_parse(sel, strlen(sel), &qq->sel, &st));
    LC_ASSERT_OK(lc_selector_add(&qq->sel, "__profile_type__", LC_MATCH_EQ, PT, &st));
    qq->q = (lc_query_t){.tenants = tenants,
                         .n_tenants = 1,
                         .sel = &qq->sel,
                         .start_ns = T0_NS - HOUR_NS,
                         .end_ns = T0_NS + 100 * HOUR_NS};
    LC_ASSERT_OK(lc_store_read_begin(store, qq->q.start_ns, qq->q.end_ns, &qq->r));
    LC_CHECK(lc_store_reader_count(qq->r) > 1);
}

static void query_end(query_t *qq)
{
    lc_store_read_end(qq->r);
    lc_selector_fini(&qq->sel);
}

/* The previous path: merged pprof, encoded, decoded, added. */
static void add_via_pprof(parca_tree_t *t, const char *job, int sign, int64_t *total, lc_arena_t *a)
{
    query_t qq;
    query_begin(&qq, job);
    lc_pprof_builder_t *b = lc_pprof_builder_new();
    lc_pprof_builder_sample_type(b, "cpu", "nanoseconds");
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_pprof(qq.r, &qq.q, b, &st));
    query_end(&qq);
    lc_pprof_t *p = lc_test_pprof_built(b, a);
    int64_t filtered = 0, ignored = 0;
    if (p)
        LC_ASSERT_OK(parca_tree_add(t, p, sign, NULL, sign > 0 ? total : &ignored, &filtered, &st));
}

static void add_folded(parca_tree_t *t, const char *job, int sign, int64_t *total)
{
    query_t qq;
    query_begin(&qq, job);
    parca_fold_t *f = parca_fold_new(t, sign, total);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_query_merge_nodes(qq.r, &qq.q, parca_fold_nodes, f, &st));
    parca_fold_free(f);
    query_end(&qq);
}

/* ------------------------------------------------------ canonical forms */

/* One table node: its frame path's hash (content, not ids) and values. */
typedef struct cnode_s {
    uint64_t path;
    int64_t cum, diff;
} cnode_t;

static int cnode_cmp(const void *x, const void *y)
{
    const cnode_t *a = x, *b = y;
    if (a->path != b->path)
        return a->path < b->path ? -1 : 1;
    if (a->cum != b->cum)
        return a->cum < b->cum ? -1 : 1;
    return a->diff < b->diff ? -1 : a->diff > b->diff;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

static uint64_t frame_hash_of(const Parca__Query__V1alpha1__Flamegraph *fg, uint32_t li)
{
    const Parca__Metastore__V1alpha1__Location *l = fg->locations[li];
    const Parca__Metastore__V1alpha1__Function *f = fg->function[l->lines[0]->function_index];
    const Parca__Metastore__V1alpha1__Mapping *m = fg->mapping[l->mapping_index];
    uint64_t h = 1469598103934665603ULL;
    h = mix_str(h, fg->string_table[m->file_string_index]);
    h = mix_str(h, fg->string_table[m->build_id_string_index]);
    h = mix_str(h, fg->string_table[f->name_string_index]);
    h = mix_str(h, fg->string_table[f->system_name_string_index]);
    h = mix_str(h, fg->string_table[f->filename_string_index]);
    h = (h ^ l->address) * 1099511628211ULL;
    h = (h ^ (uint64_t)l->lines[0]->line) * 1099511628211ULL;
    return (h ^ (uint64_t)f->start_line) * 1099511628211ULL;
}

static void collect(const Parca__Query__V1alpha1__Flamegraph *fg,
                    Parca__Query__V1alpha1__FlamegraphNode **kids, size_t n, uint64_t parent,
                    cnode_t *out, size_t *n_out, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t path = (parent * 31 + frame_hash_of(fg, kids[i]->meta->location_index)) *
                        0x9e3779b97f4a7c15ULL;
        LC_CHECK(*n_out < cap);
        if (*n_out >= cap)
            return;
        out[(*n_out)++] = (cnode_t){path, kids[i]->cumulative, kids[i]->diff};
        collect(fg, kids[i]->children, kids[i]->n_children, path, out, n_out, cap);
    }
}

/* The table flame graph of t as sorted canonical nodes; *root its root. */
static cnode_t *canonical(parca_tree_t *t, size_t *n, int64_t *root, int64_t *height)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    Parca__Query__V1alpha1__QueryResponse resp = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__INIT;
    lc_status_t st = {0};
    LC_ASSERT_OK(parca_report_flamegraph(t, "nanoseconds", 0, a, &resp, &st));
    size_t cap = 1u << 16;
    cnode_t *out = calloc(cap, sizeof(*out));
    *n = 0;
    collect(resp.flamegraph, resp.flamegraph->root->children, resp.flamegraph->root->n_children, 0,
            out, n, cap);
    *root = resp.flamegraph->root->cumulative;
    *height = resp.flamegraph->height;
    qsort(out, *n, sizeof(*out), cnode_cmp);
    lc_arena_free(a);
    return out;
}

static void assert_same_trees(parca_tree_t *x, parca_tree_t *y)
{
    size_t nx, ny;
    int64_t rx, ry, hx, hy;
    cnode_t *cx = canonical(x, &nx, &rx, &hx), *cy = canonical(y, &ny, &ry, &hy);
    LC_CHECK(nx > 100);
    LC_ASSERT_EQ(nx, ny);
    LC_ASSERT_EQ(rx, ry);
    LC_ASSERT_EQ(hx, hy);
    if (nx == ny)
        LC_ASSERT_MEM_EQ(cx, cy, nx * sizeof(*cx));
    free(cx);
    free(cy);
}

/* ----------------------------------------------------------------- tests */

static void check_merge(bool by_address)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    parca_tree_t *old = parca_tree_new(by_address, a), *fold = parca_tree_new(by_address, a);
    int64_t t_old = 0, t_fold = 0;
    add_via_pprof(old, "a|b", 1, &t_old, a);
    add_folded(fold, "a|b", 1, &t_fold);
    LC_CHECK(t_old > 0);
    LC_ASSERT_EQ(t_old, t_fold);
    assert_same_trees(old, fold);
    lc_arena_free(a);
    parca_tree_free(old);
    parca_tree_free(fold);
}

static void test_merge_equals_pprof_path(void)
{
    check_merge(false);
}

static void test_merge_by_address_equals_pprof_path(void)
{
    check_merge(true);
}

/* A diff: job a is the base (diff only), job b the compared side. */
static void test_diff_equals_pprof_path(void)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    parca_tree_t *old = parca_tree_new(false, a), *fold = parca_tree_new(false, a);
    int64_t t_old = 0, t_fold = 0;
    add_via_pprof(old, "a", -1, &t_old, a);
    add_via_pprof(old, "b", 1, &t_old, a);
    add_folded(fold, "a", -1, &t_fold);
    add_folded(fold, "b", 1, &t_fold);
    LC_ASSERT_EQ(t_old, t_fold);
    assert_same_trees(old, fold);
    lc_arena_free(a);
    parca_tree_free(old);
    parca_tree_free(fold);
}

/* TOP of the folded tree of job a against the oracle's sums. */
static void test_top_matches_oracle(void)
{
    lc_arena_t *a = lc_arena_new(64u << 20);
    parca_tree_t *t = parca_tree_new(false, a);
    int64_t total = 0;
    add_folded(t, "a", 1, &total);
    Parca__Query__V1alpha1__QueryResponse resp = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__INIT;
    lc_status_t st = {0};
    LC_ASSERT_OK(parca_report_top(t, "nanoseconds", a, &resp, &st));
    int64_t want_total = 0;
    size_t want_rows = 0;
    for (size_t i = 0; i < n_orows; i++) {
        want_total += orows[i].flat;
        want_rows += orows[i].cum != 0;
    }
    LC_ASSERT_EQ(total, want_total);
    LC_ASSERT_EQ(resp.top->n_list, want_rows);
    size_t matched = 0;
    for (size_t i = 0; i < resp.top->n_list; i++) {
        const Parca__Query__V1alpha1__TopNode *n = resp.top->list[i];
        okey_t k = {0};
        snprintf(k.mapping, 32, "%s", n->meta->mapping->file);
        snprintf(k.name, 32, "%s", n->meta->function->name);
        snprintf(k.file, 32, "%s", n->meta->function->filename);
        k.address = n->meta->location->address;
        k.start_line = n->meta->function->start_line;
        for (size_t j = 0; j < n_orows; j++) {
            if (memcmp(&orows[j].k, &k, sizeof(k)) != 0)
                continue;
            LC_ASSERT_EQ(n->flat, orows[j].flat);
            LC_ASSERT_EQ(n->cumulative, orows[j].cum);
            matched++;
        }
    }
    LC_ASSERT_EQ(matched, resp.top->n_list);
    lc_arena_free(a);
    parca_tree_free(t);
}

static void test_setup(void)
{
    setup();
}

static void test_teardown(void)
{
    lc_store_close(store);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(test_setup, test_merge_equals_pprof_path, test_merge_by_address_equals_pprof_path,
             test_diff_equals_pprof_path, test_top_matches_oracle, test_teardown)
