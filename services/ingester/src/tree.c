/*
 * tree.c — the binary tree formats of /ingest (pyroscope-api.md §2.7):
 * `format=tree` and `format=trie` (the "transport trie").
 *
 * Both are a depth-first, pre-order stream of nodes, each
 *   uvarint name length, name bytes, uvarint value, uvarint child count,
 * with a node's children right after it. They differ in what a name is:
 *   - tree: one frame; the root has an empty name, and a node's stack is the
 *     path of names below the root. Nodes with a non-zero self value and a
 *     non-empty key are stacks (Pyroscope skips a key of length 0, so the
 *     value of an empty-named child of the root is dropped there too).
 *   - trie: a fragment of the folded key; a node's key is the concatenation
 *     of the fragments from the root, and every node with a value > 0 is a
 *     stack (key split on ';' later, like folded text).
 * Either way the decoder walks the bytes once, keeping the current key in one
 * buffer and, per open node, its remaining child count and the key length to
 * restore when it closes. Nothing is built: each stack goes to the callback.
 *
 * Stricter than Pyroscope, on purpose (each a 422 with a message saying what
 * is wrong): a body that ends before the last promised child (Pyroscope's
 * trie reader accepts a cut at a node boundary), bytes after the root's last
 * descendant (Pyroscope ignores them for tree and reads them as more nodes
 * for trie), a tree root with a name (Pyroscope then mangles every key), and
 * a value above 2^63-1 (a pprof value is an int64). An empty trie body is an
 * empty profile, an empty tree body is truncated, as in Pyroscope.
 */
#include <string.h>

#include "receive_int.h"

typedef struct tr_level_s {
    uint64_t children_left; /* children of this node not read yet */
    size_t key_len_before;  /* key length before this node's name was added */
} tr_level_t;

typedef struct tr_dec_s {
    const uint8_t *start, *p, *end;
    bool trie;
    char *key; /* the current node's key (not NUL-terminated) */
    size_t key_len, cap_key;
    tr_level_t *levels; /* open nodes with children left, root first */
    size_t n_levels, cap_levels;
    size_t nodes, stack_bytes;
    lc_stack_cb cb;
    void *data;
    lc_status_t *st;
} tr_dec_t;

/* One node as read from the stream. */
typedef struct tr_node_s {
    const uint8_t *name;
    size_t name_len;
    uint64_t value, children;
} tr_node_t;

static const char *tr_format(const tr_dec_t *d)
{
    return d->trie ? "trie" : "tree";
}

static int tr_malformed(tr_dec_t *d, const char *what)
{
    return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT, "%s: %s at byte %zu", tr_format(d), what,
                         (size_t)(d->p - d->start));
}

/* Go's binary.Uvarint: 7 bits per byte, low first, at most 10 bytes. */
static int tr_uvarint(tr_dec_t *d, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (d->p == d->end)
            return tr_malformed(d, "truncated varint");
        uint8_t b = *d->p++;
        if (shift == 63 && b > 1)
            return tr_malformed(d, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return tr_malformed(d, "varint longer than 10 bytes");
}

static int tr_read_node(tr_dec_t *d, tr_node_t *n)
{
    uint64_t name_len;
    if (tr_uvarint(d, &name_len) < 0)
        return -1;
    if (name_len > ING_TREE_MAX_NAME)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT,
                             "%s: node name of %llu bytes exceeds the limit of %d", tr_format(d),
                             (unsigned long long)name_len, ING_TREE_MAX_NAME);
    if (name_len > (uint64_t)(d->end - d->p))
        return tr_malformed(d, "truncated node name");
    n->name = d->p;
    n->name_len = (size_t)name_len;
    d->p += name_len;
    if (tr_uvarint(d, &n->value) < 0 || tr_uvarint(d, &n->children) < 0)
        return -1;
    if (n->value > INT64_MAX)
        return tr_malformed(d, "value above 2^63-1");
    return 0;
}

/* Appends the node's name to the key: trie fragments as they are, tree names
 * after a ';' from depth 2 on (depth-1 names start the key). */
static int tr_key_push(tr_dec_t *d, const tr_node_t *n)
{
    bool sep = !d->trie && d->n_levels >= 2;
    size_t need = d->key_len + sep + n->name_len;
    if (need > ING_TREE_MAX_KEY_BYTES)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT, "%s: a stack of more than %zu bytes",
                             tr_format(d), ING_TREE_MAX_KEY_BYTES);
    d->key = lc_xgrow(d->key, &d->cap_key, need ? need : 1, 1);
    if (sep)
        d->key[d->key_len++] = ';';
    if (n->name_len)
        memcpy(d->key + d->key_len, n->name, n->name_len);
    d->key_len = need;
    return 0;
}

static bool tr_is_stack(const tr_dec_t *d, const tr_node_t *n)
{
    if (d->trie)
        return n->value > 0;
    return n->value != 0 && d->key_len > 0;
}

static int tr_emit(tr_dec_t *d, const tr_node_t *n)
{
    if (!tr_is_stack(d, n))
        return 0;
    d->stack_bytes += d->key_len + 1;
    if (d->stack_bytes > ING_TREE_MAX_STACK_BYTES)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: %s stacks of more than %zu bytes in all",
                             tr_format(d), ING_TREE_MAX_STACK_BYTES);
    return d->cb ? d->cb(d->key, d->key_len, (int64_t)n->value, d->data) : 0;
}

/* A node with children becomes an open level. Every child takes at least
 * three bytes, which bounds a claimed count by what is left of the body. */
static int tr_open(tr_dec_t *d, const tr_node_t *n, size_t key_len_before)
{
    if (n->children > ING_TREE_MAX_CHILDREN)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT,
                             "%s: a node with %llu children exceeds the limit of %d", tr_format(d),
                             (unsigned long long)n->children, ING_TREE_MAX_CHILDREN);
    if (n->children > (uint64_t)(d->end - d->p) / 3)
        return tr_malformed(d, "truncated (more children announced than bytes left)");
    if (d->n_levels >= ING_TREE_MAX_DEPTH)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT, "%s: deeper than %d levels",
                             tr_format(d), ING_TREE_MAX_DEPTH);
    d->levels = lc_xgrow(d->levels, &d->cap_levels, d->n_levels + 1, sizeof(*d->levels));
    d->levels[d->n_levels++] = (tr_level_t){n->children, key_len_before};
    return 0;
}

/* A leaf closes itself and every ancestor whose last child it was. */
static void tr_close(tr_dec_t *d, size_t key_len_before)
{
    d->key_len = key_len_before;
    while (d->n_levels > 0 && d->levels[d->n_levels - 1].children_left == 0)
        d->key_len = d->levels[--d->n_levels].key_len_before;
}

static int ing_tr_node(tr_dec_t *d)
{
    tr_node_t n;
    if (++d->nodes > ING_TREE_MAX_NODES)
        return lc_status_set(d->st, LC_CODE_INVALID_ARGUMENT,
                             "profile too large: more than %zu %s nodes", ING_TREE_MAX_NODES,
                             tr_format(d));
    if (tr_read_node(d, &n) < 0)
        return -1;
    if (d->nodes == 1 && !d->trie && n.name_len > 0)
        return tr_malformed(d, "the root node has a name (it must be empty)");
    if (d->n_levels > 0)
        d->levels[d->n_levels - 1].children_left--;
    size_t key_len_before = d->key_len;
    if (tr_key_push(d, &n) < 0)
        return -1;
    int rc = tr_emit(d, &n);
    if (rc != 0)
        return rc;
    if (n.children > 0)
        return tr_open(d, &n, key_len_before);
    tr_close(d, key_len_before);
    return 0;
}

static int tr_walk(tr_dec_t *d)
{
    if (d->p == d->end && d->trie)
        return 0; /* an empty trie: no stacks */
    do {
        if (d->p == d->end)
            return tr_malformed(d, "truncated (a node is missing)");
        int rc = ing_tr_node(d);
        if (rc != 0)
            return rc;
    } while (d->n_levels > 0);
    return d->p == d->end ? 0 : tr_malformed(d, "trailing bytes after the root's last descendant");
}

int ing_tree_decode(const uint8_t *body, size_t len, bool trie, lc_stack_cb cb, void *data,
                    lc_status_t *st)
{
    tr_dec_t d = {.start = body,
                  .p = body,
                  .end = body + len,
                  .trie = trie,
                  .cb = cb,
                  .data = data,
                  .st = st};
    int rc = tr_walk(&d);
    lc_free(d.key);
    lc_free(d.levels);
    return rc < 0 ? -1 : rc;
}
