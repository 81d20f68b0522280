/*
 * test_tree.c — the tree and trie bodies of /ingest (pyroscope-api.md §2.7,
 * services/ingester/src/tree.c). Bodies are built here from lists of stacks
 * with the test's own varint writer and tree builder, and what the decoder
 * reports must be those stacks; then malformed bodies (truncated at every
 * byte, trailing bytes, oversize names, child counts and values, varint
 * overflow, too deep, too many stack bytes) must fail with a message.
 */
#include "lc_test.h"
#include "receive_int.h"

/* ---------------------------------------------------------------- writer */

typedef struct wbuf_s {
    uint8_t *p;
    size_t n, cap;
} wbuf_t;

static void put_byte(wbuf_t *b, uint8_t c)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->p = realloc(b->p, b->cap);
    }
    b->p[b->n++] = c;
}

static void put_uvarint(wbuf_t *b, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        put_byte(b, (uint8_t)(c | (v ? 0x80 : 0)));
    } while (v);
}

static void put_node(wbuf_t *b, const char *name, size_t name_len, uint64_t value,
                     uint64_t children)
{
    put_uvarint(b, name_len);
    for (size_t i = 0; i < name_len; i++)
        put_byte(b, (uint8_t)name[i]);
    put_uvarint(b, value);
    put_uvarint(b, children);
}

/* A tree built from folded stacks: one node per frame, self values summed. */
typedef struct tnode_s {
    char name[64];
    uint64_t self;
    struct tnode_s *kids[16];
    size_t n_kids;
} tnode_t;

static tnode_t *tnode_child(tnode_t *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->n_kids; i++) {
        if (strlen(n->kids[i]->name) == len && !memcmp(n->kids[i]->name, name, len))
            return n->kids[i];
    }
    tnode_t *k = calloc(1, sizeof(*k));
    memcpy(k->name, name, len);
    n->kids[n->n_kids++] = k;
    return k;
}

static void tnode_insert(tnode_t *root, const char *stack, uint64_t value)
{
    tnode_t *n = root;
    for (const char *f = stack;;) {
        const char *semi = strchr(f, ';');
        size_t len = semi ? (size_t)(semi - f) : strlen(f);
        n = tnode_child(n, f, len);
        if (!semi)
            break;
        f = semi + 1;
    }
    n->self += value;
}

static void tnode_write(wbuf_t *b, const tnode_t *n)
{
    put_node(b, n->name, strlen(n->name), n->self, n->n_kids);
    for (size_t i = 0; i < n->n_kids; i++)
        tnode_write(b, n->kids[i]);
}

static void tnode_free(tnode_t *n)
{
    for (size_t i = 0; i < n->n_kids; i++)
        tnode_free(n->kids[i]);
    free(n);
}

typedef struct stack_s {
    const char *stack;
    uint64_t value;
} stack_t_;

/* The tree format body of the given stacks (the root has an empty name). */
static wbuf_t tree_body(const stack_t_ *stacks, size_t n)
{
    tnode_t *root = calloc(1, sizeof(*root));
    for (size_t i = 0; i < n; i++)
        tnode_insert(root, stacks[i].stack, stacks[i].value);
    wbuf_t b = {0};
    tnode_write(&b, root);
    tnode_free(root);
    return b;
}

/* ---------------------------------------------------------------- collector */

typedef struct got_s {
    char keys[64][256];
    int64_t values[64];
    size_t n;
    int stop_after; /* return -1 from the callback after this many (0: never) */
} got_t;

static int collect(const char *stack, size_t len, int64_t value, void *data)
{
    got_t *g = data;
    if (g->n < 64 && len < 256) {
        memcpy(g->keys[g->n], stack, len);
        g->keys[g->n][len] = '\0';
        g->values[g->n] = value;
    }
    g->n++;
    return g->stop_after && (int)g->n >= g->stop_after ? -1 : 0;
}

/* Sum of the values reported for key (keys may repeat). */
static int64_t got_value(const got_t *g, const char *key)
{
    int64_t v = 0;
    for (size_t i = 0; i < g->n && i < 64; i++)
        v += strcmp(g->keys[i], key) == 0 ? g->values[i] : 0;
    return v;
}

static int decode(const wbuf_t *b, bool trie, got_t *g, lc_status_t *st)
{
    *g = (got_t){0};
    *st = (lc_status_t){0};
    return ing_tree_decode(b->p, b->n, trie, collect, g, st);
}

static void check_error(const wbuf_t *b, bool trie, const char *want)
{
    got_t g;
    lc_status_t st;
    LC_ASSERT_EQ(decode(b, trie, &g, &st), -1);
    if (!strstr(st.msg, want))
        fprintf(stderr, "  want \"%s\" in \"%s\"\n", want, st.msg);
    LC_CHECK(strstr(st.msg, want) != NULL);
}

/* ---------------------------------------------------------------- tree */

static const stack_t_ STACKS[] = {
    {"a;b", 3}, {"a;c", 2}, {"d", 1}, {"a", 4}, {"a;b;e", 300}, {"x y;z(int, int)", 7},
};

static void test_tree_stacks(void)
{
    wbuf_t b = tree_body(STACKS, LC_ARRAY_LEN(STACKS));
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, false, &g, &st));
    LC_ASSERT_EQ(g.n, LC_ARRAY_LEN(STACKS));
    for (size_t i = 0; i < LC_ARRAY_LEN(STACKS); i++)
        LC_ASSERT_EQ(got_value(&g, STACKS[i].stack), STACKS[i].value);
    /* validation only */
    LC_ASSERT_OK(ing_tree_decode(b.p, b.n, false, NULL, NULL, &st));
    free(b.p);
}

/* Written node by node: zero values, repeated siblings, an empty-named child
 * of the root (its own value dropped, as Pyroscope's key of length 0), a name
 * holding ';', a long name (two-byte length varint). */
static void test_tree_details(void)
{
    char long_name[200];
    memset(long_name, 'n', sizeof(long_name));
    wbuf_t b = {0};
    put_node(&b, "", 0, 0, 4);
    put_node(&b, "a", 1, 0, 2);   /* no value: not a stack */
    put_node(&b, "b", 1, 5, 0);   /* a;b 5 */
    put_node(&b, "b", 1, 6, 0);   /* a;b 6 again (the converter sums) */
    put_node(&b, "", 0, 9, 1);    /* key "": dropped */
    put_node(&b, "c", 1, 2, 0);   /* ";c" */
    put_node(&b, "p;q", 3, 1, 0); /* "p;q": two frames once split */
    put_node(&b, long_name, sizeof(long_name), 1, 0);
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, false, &g, &st));
    LC_ASSERT_EQ(g.n, 5);
    LC_ASSERT_EQ(got_value(&g, "a;b"), 11);
    LC_ASSERT_EQ(got_value(&g, ";c"), 2);
    LC_ASSERT_EQ(got_value(&g, "p;q"), 1);
    LC_ASSERT_EQ(got_value(&g, ""), 0);
    LC_ASSERT_EQ(strlen(g.keys[4]), sizeof(long_name));
    free(b.p);
}

static void test_tree_empty_and_root(void)
{
    wbuf_t empty = {0};
    check_error(&empty, false, "tree: truncated");
    wbuf_t b = {0};
    put_node(&b, "", 0, 7, 0); /* a root alone: its value is not a stack */
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, false, &g, &st));
    LC_ASSERT_EQ(g.n, 0);
    free(b.p);
    b = (wbuf_t){0};
    put_node(&b, "root", 4, 0, 1);
    put_node(&b, "a", 1, 1, 0);
    check_error(&b, false, "the root node has a name");
    free(b.p);
}

/* Every proper prefix of a valid body is truncated; one byte more is trailing. */
static void test_tree_truncated_and_trailing(void)
{
    wbuf_t b = tree_body(STACKS, LC_ARRAY_LEN(STACKS));
    for (size_t cut = 0; cut < b.n; cut++) {
        wbuf_t part = {b.p, cut, cut};
        check_error(&part, false, "truncated");
    }
    put_byte(&b, 0);
    check_error(&b, false, "trailing bytes");
    free(b.p);
}

static void test_oversize(void)
{
    wbuf_t b = {0};
    put_node(&b, "", 0, 0, 1);
    put_uvarint(&b, ING_TREE_MAX_NAME + 1); /* only the length: checked before the bytes */
    check_error(&b, false, "exceeds the limit");
    free(b.p);

    b = (wbuf_t){0};
    put_node(&b, "", 0, 0, ING_TREE_MAX_CHILDREN + 1);
    check_error(&b, false, "children exceeds the limit");
    free(b.p);

    b = (wbuf_t){0};
    put_node(&b, "", 0, 0, 1000); /* more children than bytes could hold */
    put_node(&b, "a", 1, 1, 0);
    check_error(&b, false, "more children announced than bytes left");
    free(b.p);

    b = (wbuf_t){0};
    put_node(&b, "", 0, 0, 1);
    put_node(&b, "a", 1, (uint64_t)INT64_MAX + 1, 0);
    check_error(&b, false, "value above 2^63-1");
    free(b.p);

    b = (wbuf_t){0};
    put_node(&b, "", 0, 0, 1);
    put_node(&b, "a", 1, INT64_MAX, 0); /* the largest value is fine */
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, false, &g, &st));
    LC_ASSERT_EQ(g.values[0], INT64_MAX);
    free(b.p);

    b = (wbuf_t){0};
    for (int i = 0; i < 10; i++)
        put_byte(&b, 0xff);
    put_byte(&b, 0x01); /* 11 bytes */
    check_error(&b, false, "varint");
    b.n = 9;
    put_byte(&b, 0x02); /* 10th byte above 1: past 64 bits */
    check_error(&b, false, "varint overflows 64 bits");
    free(b.p);
}

/* A chain: root, then `levels` nodes named "f", each the only child of the previous. */
static wbuf_t chain(size_t levels, uint64_t leaf_value)
{
    wbuf_t b = {0};
    put_node(&b, "", 0, 0, levels ? 1 : 0);
    for (size_t i = 0; i < levels; i++)
        put_node(&b, "f", 1, i + 1 == levels ? leaf_value : 0, i + 1 == levels ? 0 : 1);
    return b;
}

static void test_deep(void)
{
    /* ING_TREE_MAX_DEPTH open levels: the root and MAX-1 frames, then the leaf. */
    wbuf_t b = chain(ING_TREE_MAX_DEPTH, 1);
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, false, &g, &st));
    LC_ASSERT_EQ(g.n, 1);
    free(b.p);
    b = chain(ING_TREE_MAX_DEPTH + 1, 1);
    check_error(&b, false, "deeper than");
    free(b.p);
}

/* Names of 60,000 bytes: a key passes 1 MiB after 18 levels; under a key of
 * ~1 MiB, 300 leaves hand the converter more than 256 MiB. */
static void test_key_and_stack_bytes(void)
{
    static char big[60000];
    memset(big, 'x', sizeof(big));
    wbuf_t b = {0};
    put_node(&b, "", 0, 0, 1);
    for (int i = 0; i < 18; i++)
        put_node(&b, big, sizeof(big), 0, 1);
    put_node(&b, "a", 1, 1, 0);
    check_error(&b, false, "a stack of more than");
    free(b.p);

    b = (wbuf_t){0};
    put_node(&b, "", 0, 0, 1);
    for (int i = 0; i < 17; i++)
        put_node(&b, big, sizeof(big), 0, i == 16 ? 300 : 1);
    for (int i = 0; i < 300; i++)
        put_node(&b, "a", 1, 1, 0);
    lc_status_t st = {0};
    LC_ASSERT_EQ(ing_tree_decode(b.p, b.n, false, NULL, NULL, &st), -1);
    LC_CHECK(strncmp(st.msg, "profile too large", 17) == 0);
    free(b.p);
}

static void test_callback_stops(void)
{
    wbuf_t b = tree_body(STACKS, LC_ARRAY_LEN(STACKS));
    got_t g = {.stop_after = 2};
    lc_status_t st = {0};
    LC_ASSERT_EQ(ing_tree_decode(b.p, b.n, false, collect, &g, &st), -1);
    LC_ASSERT_EQ(g.n, 2);
    free(b.p);
}

/* ---------------------------------------------------------------- trie */

/* Keys are concatenated fragments: "" -> "a;" -> {"b;" -> {"c" 5, "d" 2}, "e" 1},
 * "" -> "fo" -> "o;bar" 7 (a fragment ending mid-frame), "x;y" 3 -> ";z" 4
 * (a value on an inner node). */
static wbuf_t trie_body(void)
{
    wbuf_t b = {0};
    put_node(&b, "", 0, 0, 3);
    put_node(&b, "a;", 2, 0, 2);
    put_node(&b, "b;", 2, 0, 2);
    put_node(&b, "c", 1, 5, 0);
    put_node(&b, "d", 1, 2, 0);
    put_node(&b, "e", 1, 1, 0);
    put_node(&b, "fo", 2, 0, 1);
    put_node(&b, "o;bar", 5, 7, 0);
    put_node(&b, "x;y", 3, 3, 1);
    put_node(&b, ";z", 2, 4, 0);
    return b;
}

static void test_trie_stacks(void)
{
    wbuf_t b = trie_body();
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&b, true, &g, &st));
    LC_ASSERT_EQ(g.n, 6);
    LC_ASSERT_EQ(got_value(&g, "a;b;c"), 5);
    LC_ASSERT_EQ(got_value(&g, "a;b;d"), 2);
    LC_ASSERT_EQ(got_value(&g, "a;e"), 1);
    LC_ASSERT_EQ(got_value(&g, "foo;bar"), 7);
    LC_ASSERT_EQ(got_value(&g, "x;y"), 3);
    LC_ASSERT_EQ(got_value(&g, "x;y;z"), 4);
    free(b.p);
}

static void test_trie_root_and_empty(void)
{
    wbuf_t empty = {0};
    got_t g;
    lc_status_t st;
    LC_ASSERT_OK(decode(&empty, true, &g, &st)); /* an empty trie, as Pyroscope */
    LC_ASSERT_EQ(g.n, 0);
    wbuf_t b = {0};
    put_node(&b, "main;", 5, 2, 1); /* a trie root may hold a fragment and a value */
    put_node(&b, "run", 3, 1, 0);
    LC_ASSERT_OK(decode(&b, true, &g, &st));
    LC_ASSERT_EQ(g.n, 2);
    LC_ASSERT_EQ(got_value(&g, "main;"), 2);
    LC_ASSERT_EQ(got_value(&g, "main;run"), 1);
    free(b.p);
}

static void test_trie_truncated_and_trailing(void)
{
    wbuf_t b = trie_body();
    for (size_t cut = 1; cut < b.n; cut++) {
        wbuf_t part = {b.p, cut, cut};
        check_error(&part, true, "trie: truncated");
    }
    put_node(&b, "a", 1, 1, 0); /* a second root */
    check_error(&b, true, "trailing bytes");
    free(b.p);
}

/* ---------------------------------------------------------------- conversion */

static const char *fn_name(const lc_pprof_t *p, uint64_t loc_id)
{
    for (size_t i = 0; i < p->n_location; i++) {
        if (p->location[i]->id != loc_id)
            continue;
        for (size_t j = 0; j < p->n_function; j++) {
            if (p->function[j]->id == p->location[i]->line[0]->function_id)
                return ing_pprof_str(p, p->function[j]->name);
        }
    }
    return "?";
}

static int64_t pprof_stack_value(const lc_pprof_t *p, const char *want)
{
    int64_t total = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        char buf[256] = "";
        size_t len = 0;
        const Google__V1__Sample *s = p->sample[i];
        for (size_t k = s->n_location_id; k > 0; k--)
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
                                    fn_name(p, s->location_id[k - 1]), k > 1 ? ";" : "");
        total += strcmp(buf, want) == 0 ? s->value[0] : 0;
    }
    return total;
}

/* A trie through the converter: keys split into frames, values x the period. */
static void test_trie_to_pprof(void)
{
    lc_arena_t *arena = lc_arena_new((size_t)1 << 24);
    lc_status_t st = {0};
    ing_app_type_t t;
    LC_ASSERT_OK(ing_app_type("app.wall", arena, &t, &st));
    lc_pprof_limits_t lim;
    lc_pprof_limits_default(&lim);
    lc_cv_t *cv = ing_cv_new(&t, 100, 1700000000000000000LL, &lim, &st);
    wbuf_t b = trie_body();
    LC_ASSERT_OK(ing_tree_decode(b.p, b.n, true, lc_cv_stack, cv, &st));
    lc_buf_t out;
    lc_buf_init(&out, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_cv_encode(cv, &out));
    lc_pprof_t *p = NULL;
    LC_ASSERT_OK(lc_pprof_decode(out.data, out.len, &lim, arena, &p, &st));
    LC_ASSERT_OK(lc_pprof_validate(p, &lim, &st));
    LC_ASSERT_EQ(p->period, 10000000);
    LC_ASSERT_STR_EQ(ing_pprof_str(p, p->sample_type[0]->type), "wall");
    LC_ASSERT_EQ(pprof_stack_value(p, "a;b;c"), 5 * 10000000LL);
    LC_ASSERT_EQ(pprof_stack_value(p, "foo;bar"), 7 * 10000000LL);
    LC_ASSERT_EQ(pprof_stack_value(p, "x;y;z"), 4 * 10000000LL);
    LC_ASSERT_EQ(p->n_sample, 6);
    lc_buf_fini(&out);
    lc_cv_free(cv);
    free(b.p);
    lc_arena_free(arena);
}

LC_TEST_MAIN(test_tree_stacks, test_tree_details, test_tree_empty_and_root,
             test_tree_truncated_and_trailing, test_oversize, test_deep, test_key_and_stack_bytes,
             test_callback_stops, test_trie_stacks, test_trie_root_and_empty,
             test_trie_truncated_and_trailing, test_trie_to_pprof)
