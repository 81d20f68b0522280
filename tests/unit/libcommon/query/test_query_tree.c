/*
 * test_query_tree.c — the name tree, the flame graph encoding (§5.4), max_nodes
 * truncation (§5.5) and tree bytes (§5.7). Every expected value is worked out
 * by hand in the comments next to it.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/query.h"
#include "lc_test.h"

static lc_ftree_t *tree_of(const char *const *stacks, const int64_t *values, size_t n)
{
    lc_ftree_t *t = lc_ftree_new(0);
    for (size_t i = 0; i < n; i++) {
        const char *frames[16];
        size_t nf = 0;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", stacks[i]);
        for (char *save = NULL, *f = strtok_r(buf, ";", &save); f; f = strtok_r(NULL, ";", &save))
            frames[nf++] = f;
        LC_ASSERT_OK(lc_ftree_insert(t, frames, nf, values[i]));
    }
    return t;
}

static void check_names(const Querier__V1__FlameGraph *fg, const char *const *want, size_t n)
{
    LC_ASSERT_EQ(fg->n_names, n);
    for (size_t i = 0; i < n && i < fg->n_names; i++)
        LC_ASSERT_STR_EQ(fg->names[i], want[i]);
}

static void check_level(const Querier__V1__FlameGraph *fg, size_t level, const int64_t *want,
                        size_t n)
{
    LC_CHECK(level < fg->n_levels);
    if (level >= fg->n_levels)
        return;
    LC_ASSERT_EQ(fg->levels[level]->n_values, n);
    for (size_t i = 0; i < n && i < fg->levels[level]->n_values; i++)
        LC_ASSERT_EQ(fg->levels[level]->values[i], want[i]);
}

/* §5.4's worked example: a;b=3, a;c=2, d=1. */
static const char *const ex_stacks[] = {"a;b", "a;c", "d"};
static const int64_t ex_values[] = {3, 2, 1};

static void check_worked_example(const Querier__V1__FlameGraph *fg)
{
    static const char *const names[] = {"total", "d", "a", "c", "b"};
    static const int64_t l0[] = {0, 6, 0, 0};
    static const int64_t l1[] = {0, 5, 0, 2, 0, 1, 1, 1};
    static const int64_t l2[] = {0, 3, 3, 4, 0, 2, 2, 3};
    check_names(fg, names, 5);
    LC_ASSERT_EQ(fg->n_levels, 3);
    check_level(fg, 0, l0, 4);
    check_level(fg, 1, l1, 8);
    check_level(fg, 2, l2, 8);
    LC_ASSERT_EQ(fg->total, 6);
    LC_ASSERT_EQ(fg->max_self, 3);
}

static void test_worked_example(void)
{
    lc_ftree_t *t = tree_of(ex_stacks, ex_values, 3);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 8192, a, &fg));
    check_worked_example(fg);
    LC_ASSERT_EQ(lc_ftree_total(t), 6);
    LC_ASSERT_EQ(lc_ftree_node_count(t), 5); /* root, a, b, c, d */
    lc_arena_free(a);
    lc_ftree_free(t);
}

static void test_empty(void)
{
    lc_ftree_t *t = lc_ftree_new(0);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 0, a, &fg));
    static const char *const names[] = {"total"};
    static const int64_t l0[] = {0, 0, 0, 0};
    check_names(fg, names, 1);
    LC_ASSERT_EQ(fg->n_levels, 1);
    check_level(fg, 0, l0, 4);
    LC_ASSERT_EQ(fg->total, 0);
    LC_ASSERT_EQ(fg->max_self, 0);
    lc_buf_t b;
    lc_buf_init(&b, 1 << 20);
    LC_ASSERT_OK(lc_ftree_write_tree(t, 0, &b));
    LC_ASSERT_EQ(b.len, 0);
    lc_buf_fini(&b);
    lc_arena_free(a);
    lc_ftree_free(t);
}

/*
 * Truncation: a;b=5, a;c=1, a;d=1, e=2, f=1 -> nodes a7 b5 c1 d1 e2 f1 (6).
 * max_nodes=3. Min-heap walk: roots pushed a,e,f, popped f(1) e(2) a(7) -> heap
 * {1,2,7}, push b,c,d; pop d(1) and c(1): not > 1, skipped; pop b(5): > 1, so
 * 1 leaves and 5 enters -> {2,5,7}; minVal = 2.
 * Root children: a(7) at x0, e(2) at x7, f(1) < 2 -> other(1) at x9.
 * Pops: other -> names[1]="other"; e -> names[2]; a -> names[3]; a's
 * children: b(5) at x0, c+d -> other(2) at x5; pops other (index 1), b -> 4.
 */
static const char *const tr_stacks[] = {"a;b", "a;c", "a;d", "e", "f"};
static const int64_t tr_values[] = {5, 1, 1, 2, 1};

static void test_truncation(void)
{
    lc_ftree_t *t = tree_of(tr_stacks, tr_values, 5);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 3, a, &fg));
    static const char *const names[] = {"total", "other", "e", "a", "b"};
    static const int64_t l0[] = {0, 10, 0, 0};
    static const int64_t l1[] = {0, 7, 0, 3, 0, 2, 2, 2, 0, 1, 1, 1};
    static const int64_t l2[] = {0, 5, 5, 4, 0, 2, 2, 1};
    check_names(fg, names, 5);
    LC_ASSERT_EQ(fg->n_levels, 3);
    check_level(fg, 0, l0, 4);
    check_level(fg, 1, l1, 12);
    check_level(fg, 2, l2, 8);
    LC_ASSERT_EQ(fg->total, 10);
    LC_ASSERT_EQ(fg->max_self, 5);

    /* Exactly at the node count (6) nothing is cut. */
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 6, a, &fg));
    LC_ASSERT_EQ(fg->n_names, 7);
    LC_ASSERT_EQ(fg->levels[1]->n_values, 12); /* a, e, f */
    lc_arena_free(a);
    lc_ftree_free(t);
}

/* §5.7's example bytes for the worked example tree. */
static const uint8_t ex_tree_bytes[] = {0, 0, 2,   1, 'd', 1, 0,   1, 'a', 0,
                                        2, 1, 'c', 2, 0,   1, 'b', 3, 0};

static void test_tree_bytes(void)
{
    lc_ftree_t *t = tree_of(ex_stacks, ex_values, 3);
    lc_buf_t b;
    lc_buf_init(&b, 1 << 20);
    LC_ASSERT_OK(lc_ftree_write_tree(t, 0, &b));
    LC_ASSERT_EQ(b.len, sizeof(ex_tree_bytes));
    if (b.len == sizeof(ex_tree_bytes))
        LC_ASSERT_MEM_EQ(b.data, ex_tree_bytes, b.len);

    /* Reading them back gives the same flame graph. */
    lc_ftree_t *back = lc_ftree_new(0);
    LC_ASSERT_OK(lc_ftree_read_tree(back, b.data, b.len));
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(back, 0, a, &fg));
    check_worked_example(fg);
    lc_arena_free(a);
    lc_ftree_free(back);
    lc_buf_fini(&b);
    lc_ftree_free(t);
}

/*
 * Tree bytes of the truncation tree with max_nodes=3 (minVal 2): the root has
 * a, e and a new "other"(1) (sorted a < e < other, popped other, e, a); a has
 * b and "other"(2) (popped other, b).
 */
static void test_tree_bytes_truncated(void)
{
    static const uint8_t want[] = {0,   0, 3, 5, 'o', 't', 'h', 'e', 'r', 1, 0, 1, 'e', 2, 0, 1,
                                   'a', 0, 2, 5, 'o', 't', 'h', 'e', 'r', 2, 0, 1, 'b', 5, 0};
    lc_ftree_t *t = tree_of(tr_stacks, tr_values, 5);
    lc_buf_t b;
    lc_buf_init(&b, 1 << 20);
    LC_ASSERT_OK(lc_ftree_write_tree(t, 3, &b));
    LC_ASSERT_EQ(b.len, sizeof(want));
    if (b.len == sizeof(want))
        LC_ASSERT_MEM_EQ(b.data, want, b.len);
    lc_buf_fini(&b);
    lc_ftree_free(t);
}

/*
 * A real function named "other" is always folded into the synthetic "other" of
 * the flame graph (Pyroscope skips children named "other"): other=4, x=1 -> the
 * root's children: x (1, kept) then "other" (4) at x 1.
 */
static void test_real_other_folded(void)
{
    static const char *const stacks[] = {"other", "x"};
    static const int64_t values[] = {4, 1};
    lc_ftree_t *t = tree_of(stacks, values, 2);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 0, a, &fg));
    static const char *const names[] = {"total", "other", "x"};
    static const int64_t l1[] = {0, 1, 1, 2, 0, 4, 4, 1};
    check_names(fg, names, 3);
    check_level(fg, 1, l1, 8);
    LC_ASSERT_EQ(fg->max_self, 4);
    lc_arena_free(a);
    lc_ftree_free(t);
}

/* Merging two trees equals inserting all stacks into one. */
static void test_merge(void)
{
    lc_ftree_t *left = tree_of(ex_stacks, ex_values, 2);          /* a;b=3 a;c=2 */
    lc_ftree_t *right = tree_of(ex_stacks + 1, ex_values + 1, 2); /* a;c=2 d=1 */
    lc_ftree_t *dst = lc_ftree_new(0);
    LC_ASSERT_OK(lc_ftree_merge(dst, left));
    LC_ASSERT_OK(lc_ftree_merge(dst, right));
    LC_ASSERT_EQ(lc_ftree_total(dst), 8);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(dst, 0, a, &fg));
    /* a;b=3 a;c=4 d=1: row 1 a(7) d(1); row 2 b(3) c(4). */
    static const int64_t l1[] = {0, 7, 0, 2, 0, 1, 1, 1};
    static const int64_t l2[] = {0, 3, 3, 4, 0, 4, 4, 3};
    check_level(fg, 1, l1, 8);
    check_level(fg, 2, l2, 8);
    lc_arena_free(a);
    lc_ftree_free(dst);
    lc_ftree_free(left);
    lc_ftree_free(right);
}

/* Names sort byte-wise: "B" (0x42) < "a" (0x61) < "ab"; names are indexed in
 * descending pop order: ab, a, B. */
static void test_bytewise_order(void)
{
    static const char *const stacks[] = {"a", "B", "ab"};
    static const int64_t values[] = {1, 2, 3};
    lc_ftree_t *t = tree_of(stacks, values, 3);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(t, 0, a, &fg));
    static const char *const names[] = {"total", "ab", "a", "B"};
    static const int64_t l1[] = {0, 2, 2, 3, 0, 1, 1, 2, 0, 3, 3, 1};
    check_names(fg, names, 4);
    check_level(fg, 1, l1, 12);
    lc_arena_free(a);
    lc_ftree_free(t);
}

static void test_read_corrupt(void)
{
    lc_ftree_t *t = lc_ftree_new(0);
    static const uint8_t truncated[] = {0, 0, 2, 1, 'd', 1, 0};
    static const uint8_t bad_len[] = {0, 0, 1, 9, 'd', 1, 0};
    static const uint8_t trailing[] = {0, 0, 0, 7};
    LC_ASSERT_EQ(lc_ftree_read_tree(t, truncated, sizeof(truncated)), LC_ECORRUPT);
    LC_ASSERT_EQ(lc_ftree_read_tree(t, bad_len, sizeof(bad_len)), LC_ECORRUPT);
    LC_ASSERT_EQ(lc_ftree_read_tree(t, trailing, sizeof(trailing)), LC_ECORRUPT);
    lc_ftree_free(t);
}

static void test_node_cap(void)
{
    lc_ftree_t *t = lc_ftree_new(3); /* root + 2 */
    const char *frames[] = {"a", "b", "c"};
    LC_ASSERT_EQ(lc_ftree_insert(t, frames, 3, 1), LC_ETOOBIG);
    lc_ftree_free(t);
}

static void check_diff_level(const Querier__V1__FlameGraphDiff *fg, size_t level,
                             const int64_t *want, size_t n)
{
    LC_CHECK(level < fg->n_levels);
    if (level >= fg->n_levels)
        return;
    LC_ASSERT_EQ(fg->levels[level]->n_values, n);
    for (size_t i = 0; i < n && i < fg->levels[level]->n_values; i++)
        LC_ASSERT_EQ(fg->levels[level]->values[i], want[i]);
}

/*
 * Diff: left a;b=3 a;c=2, right a;b=1 d=4. Union: root[a, d], a[b, c].
 * Totals left/right: root 5/5, a 5/1, b 3/1, c 2/0, d 0/4. Pops: root, d, a,
 * c, b -> names total, d, a, c, b. Row 1 (a, d): a at 0/0; d at left 5
 * (gap 0), right 1 (gap 0). Row 2 (b, c): b at 0/0; c at 3/1 (gaps 0).
 */
static const char *const dl_stacks[] = {"a;b", "a;c"};
static const int64_t dl_values[] = {3, 2};
static const char *const dr_stacks[] = {"a;b", "d"};
static const int64_t dr_values[] = {1, 4};

static void test_diff(void)
{
    lc_ftree_t *l = tree_of(dl_stacks, dl_values, 2), *r = tree_of(dr_stacks, dr_values, 2);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraphDiff *fg = NULL;
    LC_ASSERT_OK(lc_ftree_diff(l, r, 0, a, &fg));
    static const char *const names[] = {"total", "d", "a", "c", "b"};
    static const int64_t l0[] = {0, 5, 0, 0, 5, 0, 0};
    static const int64_t l1[] = {0, 5, 0, 0, 1, 0, 2, 0, 0, 0, 0, 4, 4, 1};
    static const int64_t l2[] = {0, 3, 3, 0, 1, 1, 4, 0, 2, 2, 0, 0, 0, 3};
    LC_ASSERT_EQ(fg->n_names, 5);
    for (size_t i = 0; i < 5 && i < fg->n_names; i++)
        LC_ASSERT_STR_EQ(fg->names[i], names[i]);
    LC_ASSERT_EQ(fg->n_levels, 3);
    check_diff_level(fg, 0, l0, 7);
    check_diff_level(fg, 1, l1, 14);
    check_diff_level(fg, 2, l2, 14);
    LC_ASSERT_EQ(fg->total, 10);
    LC_ASSERT_EQ(fg->leftticks, 5);
    LC_ASSERT_EQ(fg->rightticks, 5);
    LC_ASSERT_EQ(fg->max_self, 4);
    lc_arena_free(a);
    lc_ftree_free(l);
    lc_ftree_free(r);
}

/*
 * Same trees, max_nodes 3 (5 nodes with the root). Pre-order heap of
 * max(left, right): root 5, a 5, b 3 (full), c 2 rejected, d 4 replaces 3 ->
 * minVal 4. a keeps nothing: b (3/1) and c (2/0) fold into other (5/1).
 */
static void test_diff_truncated(void)
{
    lc_ftree_t *l = tree_of(dl_stacks, dl_values, 2), *r = tree_of(dr_stacks, dr_values, 2);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraphDiff *fg = NULL;
    LC_ASSERT_OK(lc_ftree_diff(l, r, 3, a, &fg));
    static const char *const names[] = {"total", "d", "a", "other"};
    static const int64_t l1[] = {0, 5, 0, 0, 1, 0, 2, 0, 0, 0, 0, 4, 4, 1};
    static const int64_t l2[] = {0, 5, 5, 0, 1, 1, 3};
    LC_ASSERT_EQ(fg->n_names, 4);
    for (size_t i = 0; i < 4 && i < fg->n_names; i++)
        LC_ASSERT_STR_EQ(fg->names[i], names[i]);
    check_diff_level(fg, 1, l1, 14);
    check_diff_level(fg, 2, l2, 7);
    LC_ASSERT_EQ(fg->max_self, 5);
    lc_arena_free(a);
    lc_ftree_free(l);
    lc_ftree_free(r);
}

static void test_diff_empty(void)
{
    lc_ftree_t *l = lc_ftree_new(0), *r = lc_ftree_new(0);
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraphDiff *fg = NULL;
    LC_ASSERT_OK(lc_ftree_diff(l, r, 8192, a, &fg));
    static const int64_t l0[] = {0, 0, 0, 0, 0, 0, 0};
    LC_ASSERT_EQ(fg->n_names, 1);
    check_diff_level(fg, 0, l0, 7);
    LC_ASSERT_EQ(fg->total, 0);
    lc_arena_free(a);
    lc_ftree_free(l);
    lc_ftree_free(r);
}

/* The names a flame graph lists as symbolized (by its indices), joined by ','
 * in index order. */
static void symbolized_list(const Querier__V1__FlameGraph *fg, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0; i < fg->n_symbolized; i++) {
        LC_CHECK(fg->symbolized[i] >= 0 && (size_t)fg->symbolized[i] < fg->n_names);
        if (fg->symbolized[i] < 0 || (size_t)fg->symbolized[i] >= fg->n_names)
            return;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", len ? "," : "", fg->names[fg->symbolized[i]]);
    }
}

/* Symbolized marks: merges keep them (c from the left, d from the right); the
 * flame graph lists only emitted names (zzz has no node), the names list for
 * a shard answer every marked one; tree bytes carry none. */
static void test_symbolized_marks(void)
{
    lc_ftree_t *left = tree_of(ex_stacks, ex_values, 2);          /* a;b=3 a;c=2 */
    lc_ftree_t *right = tree_of(ex_stacks + 1, ex_values + 1, 2); /* a;c=2 d=1 */
    LC_ASSERT_OK(lc_ftree_mark_symbolized_name(left, "c", 1));
    LC_ASSERT_OK(lc_ftree_mark_symbolized_name(right, "d", 1));
    LC_ASSERT_OK(lc_ftree_mark_symbolized_name(right, "zzz", 3));
    lc_ftree_t *dst = lc_ftree_new(0);
    LC_ASSERT_OK(lc_ftree_merge(dst, left));
    LC_ASSERT_OK(lc_ftree_merge(dst, right));
    lc_arena_t *a = lc_arena_new(1 << 20);
    Querier__V1__FlameGraph *fg = NULL;
    LC_ASSERT_OK(lc_ftree_flamegraph(dst, 0, a, &fg));
    /* Names in pop order, as in the worked example: total, d, a, c, b. */
    char got[64];
    symbolized_list(fg, got, sizeof(got));
    LC_ASSERT_STR_EQ(got, "d,c");
    char **names = NULL;
    size_t n = 0;
    LC_ASSERT_OK(lc_ftree_symbolized_names(dst, a, &names, &n));
    LC_ASSERT_EQ(n, 3);
    if (n == 3) {
        LC_ASSERT_STR_EQ(names[0], "c");
        LC_ASSERT_STR_EQ(names[1], "d");
        LC_ASSERT_STR_EQ(names[2], "zzz");
    }
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_ftree_write_tree(dst, 0, &buf));
    lc_ftree_t *back = lc_ftree_new(0);
    LC_ASSERT_OK(lc_ftree_read_tree(back, buf.data, buf.len));
    LC_ASSERT_OK(lc_ftree_symbolized_names(back, a, &names, &n));
    LC_ASSERT_EQ(n, 0);
    lc_buf_fini(&buf);
    lc_arena_free(a);
    lc_ftree_free(back);
    lc_ftree_free(dst);
    lc_ftree_free(left);
    lc_ftree_free(right);
}

LC_TEST_MAIN(test_worked_example, test_empty, test_truncation, test_tree_bytes,
             test_tree_bytes_truncated, test_real_other_folded, test_merge, test_bytewise_order,
             test_read_corrupt, test_node_cap, test_diff, test_diff_truncated, test_diff_empty,
             test_symbolized_marks)
