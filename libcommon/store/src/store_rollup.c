/*
 * store_rollup.c — rollups: self-contained flame-graph sums of 6-hour and day windows.
 *
 * A merge over a week touches 168 blocks, and each block costs a few ms
 * whatever its size: its own symbol tables must be read and its names
 * resolved. A rollup sums every series of a window of blocks (6 h or a
 * day, UTC-aligned) once, with the names already resolved: one stack tree per window
 * whose nodes are (parent, frame name), the names themselves, and per series
 * (tenant, labels) the summed self values by tree node. A merge whose range
 * covers a window reads the rollup instead of its blocks.
 *
 * Storage: one LMDB environment, <dir>/rollups/, beside blocks/:
 *   windows: window start (BE64, sign flipped), level -> header, blocks, names, tree
 *   series:  window start (BE64), level, index (BE32) -> series key, points, sums
 * (encodings in docs/internals/store.md). A window is rewritten in one write
 * transaction: a crash leaves the old record or the new one. A window
 * exported as a file of its own (lc_store_rollup_export) can be opened
 * again (lc_rollup_file_t) and added to a reader that lacks its blocks: the
 * object store's read-back, which alone knows that the file sums exactly the
 * blocks it leaves out.
 *
 * Exactness: a window record lists the blocks it summed with the LMDB
 * transaction id of the snapshot it read. Every commit to a block (profiles,
 * forgetting, summaries, compaction) changes that id, so a reader uses a
 * rollup only when its own snapshots of the window's blocks are exactly those
 * (same blocks, same ids) and its range holds every profile of them. Windows
 * whose sums hold a negative value (a merge drops those per block, which a
 * sum over blocks cannot redo) are stored as unusable. Names are those of a
 * reader without a symbolizer: a frame stored without lines in a mapping
 * with a build id is "module+0xoffset" here; such a window is flagged, and a
 * query that symbolizes (issue 31) reads its blocks instead, so a debug file
 * that arrives after the rollup still names the frames. Retention: a window
 * that begins before now - retention is never used (a block dropped there
 * and written again could repeat a transaction id), and is deleted.
 *
 * Threading: lc_store__rollup_pass runs on the summariser's thread (one at a
 * time); readers run on any thread (MDB_NOTLS read transactions).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lc/clock.h"
#include "lc/log.h"
#include "store_int.h"
#include <zstd.h>

#define ROLLUP_LEVELS 2 /* 6-hour windows, and days */
static const int64_t rollup_len_ns[ROLLUP_LEVELS] = {6 * 3600 * 1000000000LL,
                                                     24 * 3600 * 1000000000LL};
#define ROLLUP_MAX_BLOCKS 256 /* blocks per window; windows of more keep no rollup */
/* 2: ROLLUP_FLAG_SYMBOLIZABLE (a version-1 record is rebuilt).
 * 3 (issue 32): a series record's sums may be a zstd frame without a
 * dictionary (flag STORE_PF_ZSTD); an ember that knows only 2 then rebuilds
 * or answers from the blocks instead of misreading them. 2 and 3 are read. */
#define ROLLUP_VERSION 3
#define ROLLUP_VERSION_PLAIN 2 /* the oldest read: sums always plain */
#define ROLLUP_ZSTD_LEVEL 3
#define ROLLUP_FLAG_UNUSABLE 1u     /* a negative sum: answer from blocks */
#define ROLLUP_FLAG_SYMBOLIZABLE 2u /* frames a query's symbolizer may name: blocks answer it */
#define ROLLUP_MAX_NODES ((uint64_t)16 << 20) /* larger windows keep no rollup */
#define ROLLUP_MAX_PAIRS ((size_t)16 << 20)   /* summary entries summed: 192 MiB of scratch */
#define ROLLUP_WIN_KEY_LEN 9                  /* window start BE64, level */
#define ROLLUP_KEY_LEN 13                     /* ... + series index BE32 */

struct store_rollup_s {
    MDB_env *env;
    MDB_dbi windows, series;
};

/* ---------------------------------------------------------------- keys */

static void key_put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static void rollup_key(uint8_t key[ROLLUP_KEY_LEN], int level, int64_t window, uint32_t idx)
{
    key_put_be(key, (uint64_t)window ^ (1ull << 63), 8);
    key[8] = (uint8_t)level;
    key_put_be(key + 9, idx, 4);
}

int64_t lc_store__rollup_window(int level, int64_t t_ns)
{
    int64_t len = rollup_len_ns[level], w = t_ns / len;
    if (t_ns % len < 0)
        w--;
    return w * len;
}

/* ---------------------------------------------------------------- open / close */

int lc_store__rollup_open(lc_store_t *s)
{
    if (s->opts.read_only)
        return 0; /* nothing is written: no summaries, no rollups */
    if (rollup_len_ns[0] % s->opts.block_duration_ns)
        return 0; /* blocks do not tile windows: no rollups (days are whole 6 h) */
    size_t n = strlen(s->dir) + 16;
    char *path = lc_xmalloc(n);
    snprintf(path, n, "%s/rollups", s->dir);
    struct store_rollup_s *ru = lc_xcalloc(1, sizeof(*ru));
    int rc = mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
    if (!rc)
        rc = mdb_env_create(&ru->env);
    if (!rc) {
        (void)mdb_env_set_maxdbs(ru->env, 2);
        (void)mdb_env_set_maxreaders(ru->env, 512); /* one per query: as many as a block */
        (void)mdb_env_set_mapsize(ru->env, s->opts.map_size_bytes);
        rc = mdb_env_open(ru->env, path, MDB_NOTLS, 0644);
    }
    MDB_txn *txn = NULL;
    if (!rc)
        rc = mdb_txn_begin(ru->env, NULL, 0, &txn);
    if (!rc)
        rc = mdb_dbi_open(txn, "windows", MDB_CREATE, &ru->windows);
    if (!rc)
        rc = mdb_dbi_open(txn, "series", MDB_CREATE, &ru->series);
    if (!rc) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn)
        mdb_txn_abort(txn);
    if (rc) {
        /* Not fatal: every query can still be answered from the blocks. */
        LC_LOG_WARN("store: rollups disabled path=%s err=\"%s\"", path, mdb_strerror(rc));
        if (ru->env)
            mdb_env_close(ru->env);
        lc_free(ru);
        ru = NULL;
    }
    lc_free(path);
    s->rollup = ru;
    return 0;
}

void lc_store__rollup_close(lc_store_t *s)
{
    if (!s->rollup)
        return;
    mdb_env_close(s->rollup->env);
    lc_free(s->rollup);
    s->rollup = NULL;
}

/* ---------------------------------------------------------------- the window record */

/* A decoded window record; pointers into the LMDB map. */
typedef struct rollup_rec_s {
    uint32_t flags;
    uint64_t n_blocks;
    const uint8_t *blocks; /* n_blocks x (zz start, varint txnid) */
    uint64_t n_names;
    const uint8_t *names; /* n_names x (varint len, bytes) */
    uint64_t n_nodes;     /* including the root */
    const uint8_t *nodes; /* n_nodes - 1 x (varint id - parent, varint name) */
    const uint8_t *end;
} rollup_rec_t;

static int skip_varints(const uint8_t **p, const uint8_t *end, uint64_t n, uint64_t per)
{
    for (uint64_t i = 0; i < n * per; i++) {
        uint64_t v;
        if (store_get_uvarint(p, end, &v))
            return LC_ECORRUPT;
    }
    return 0;
}

static int rec_decode(const MDB_val *v, rollup_rec_t *r)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size;
    uint64_t ver, flags;
    *r = (rollup_rec_t){.end = end};
    if (store_get_uvarint(&p, end, &ver) || ver < ROLLUP_VERSION_PLAIN || ver > ROLLUP_VERSION ||
        store_get_uvarint(&p, end, &flags) || store_get_uvarint(&p, end, &r->n_blocks) ||
        r->n_blocks > (uint64_t)(end - p))
        return LC_ECORRUPT;
    r->flags = (uint32_t)flags;
    r->blocks = p;
    if (skip_varints(&p, end, r->n_blocks, 2) || store_get_uvarint(&p, end, &r->n_names) ||
        r->n_names > (uint64_t)(end - p))
        return LC_ECORRUPT;
    r->names = p;
    for (uint64_t i = 0; i < r->n_names; i++) {
        uint64_t len;
        if (store_get_uvarint(&p, end, &len) || len > (uint64_t)(end - p))
            return LC_ECORRUPT;
        p += len;
    }
    if (store_get_uvarint(&p, end, &r->n_nodes) || r->n_nodes == 0 ||
        r->n_nodes > ROLLUP_MAX_NODES || r->n_nodes - 1 > (uint64_t)(end - p) / 2)
        return LC_ECORRUPT;
    r->nodes = p;
    return 0;
}

/* Whether the record summed exactly these snapshots of the window's blocks. */
static bool rec_matches(const rollup_rec_t *r, const int64_t *starts, const uint64_t *txnids,
                        size_t n)
{
    if (r->n_blocks != n)
        return false;
    const uint8_t *p = r->blocks;
    for (size_t i = 0; i < n; i++) {
        uint64_t start, txnid;
        if (store_get_uvarint(&p, r->end, &start) || store_get_uvarint(&p, r->end, &txnid) ||
            store_unzigzag(start) != starts[i] || txnid != txnids[i])
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- building */

typedef struct rb_series_s {
    uint32_t *node;
    int64_t *val;
    size_t n, cap;
    int64_t *pt_time, *pt_total; /* every profile's time and total, in time order */
    size_t n_pts, pts_cap;
} rb_series_t;

typedef struct rb_s {
    store_symtab_t names, keys; /* frame names; series keys (tenant NUL labels) */
    store_nodetab_t tree;       /* (parent, name) -> node */
    rb_series_t *series;        /* by series key id - 1 */
    size_t series_cap;
    bool negative, not_ready;
    bool symbolizable; /* a frame is module+0xoffset of a build id (ROLLUP_FLAG_SYMBOLIZABLE) */
    size_t n_pairs;    /* summary entries added, over all series (ROLLUP_MAX_PAIRS) */
    uint32_t *parents, *locs, *map; /* by block node */
    size_t nodes_cap;
    uint32_t *loc_first, *loc_len; /* by location: offset into frames + 1 */
    size_t loc_cap;
    uint32_t *frames;
    size_t n_frames, frames_cap;
    int64_t starts[ROLLUP_MAX_BLOCKS];
    uint64_t txnids[ROLLUP_MAX_BLOCKS];
    size_t n_blocks;
} rb_t;

static void rb_init(rb_t *rb)
{
    memset(rb, 0, sizeof(*rb));
    lc_store__symtab_init(&rb->names);
    lc_store__symtab_init(&rb->keys);
    lc_store__nodetab_init(&rb->tree);
}

static void rb_fini(rb_t *rb)
{
    for (size_t i = 0; i < rb->series_cap; i++) {
        lc_free(rb->series[i].node);
        lc_free(rb->series[i].val);
        lc_free(rb->series[i].pt_time);
        lc_free(rb->series[i].pt_total);
    }
    lc_store__symtab_fini(&rb->names);
    lc_store__symtab_fini(&rb->keys);
    lc_store__nodetab_fini(&rb->tree);
    lc_free(rb->series);
    lc_free(rb->parents);
    lc_free(rb->locs);
    lc_free(rb->map);
    lc_free(rb->loc_first);
    lc_free(rb->loc_len);
    lc_free(rb->frames);
}

/* The window names of a location's frames, root side first, memoised. */
static int rb_location(rb_t *rb, lc_block_t *b, uint32_t loc, const uint32_t **frames, uint32_t *n)
{
    if (!rb->loc_first[loc]) {
        lc_store_location_t l;
        int rc = lc_block_location(b, loc, &l);
        if (rc)
            return rc;
        rb->symbolizable |= lc_block_location_symbolizable(b, &l);
        size_t n_frames = lc_block_frame_count(b, &l);
        rb->frames =
            lc_xgrow(rb->frames, &rb->frames_cap, rb->n_frames + n_frames, sizeof(*rb->frames));
        for (size_t j = 0; j < n_frames; j++) {
            char scratch[LC_FRAME_NAME_MAX];
            const char *s;
            size_t len;
            uint32_t id;
            bool added;
            rc = lc_block_frame_name(b, &l, j, scratch, &s, &len);
            if (!rc)
                rc = lc_store__symtab_intern(&rb->names, s, len, &id, &added);
            if (rc)
                return rc;
            rb->frames[rb->n_frames + j] = id;
        }
        rb->loc_first[loc] = (uint32_t)rb->n_frames + 1;
        rb->loc_len[loc] = (uint32_t)n_frames;
        rb->n_frames += n_frames;
    }
    *frames = rb->frames + rb->loc_first[loc] - 1;
    *n = rb->loc_len[loc];
    return 0;
}

/* Maps every node of the block to a window tree node. */
static int rb_map_block(rb_t *rb, lc_block_t *b, const lc_block_info_t *info)
{
    size_t n = info->nodes;
    if (n > rb->nodes_cap) {
        rb->parents = lc_xrealloc(rb->parents, n * sizeof(uint32_t));
        rb->locs = lc_xrealloc(rb->locs, n * sizeof(uint32_t));
        rb->map = lc_xrealloc(rb->map, n * sizeof(uint32_t));
        rb->nodes_cap = n;
    }
    size_t nl = info->locations + 1;
    if (nl > rb->loc_cap) {
        lc_free(rb->loc_first);
        lc_free(rb->loc_len);
        rb->loc_first = lc_xmalloc(nl * sizeof(uint32_t));
        rb->loc_len = lc_xmalloc(nl * sizeof(uint32_t));
        rb->loc_cap = nl;
    }
    memset(rb->loc_first, 0, nl * sizeof(uint32_t));
    rb->n_frames = 0;
    int rc = lc_block_nodes(b, rb->parents, rb->locs, n);
    if (n)
        rb->map[0] = 0;
    for (size_t i = 1; !rc && i < n; i++) {
        const uint32_t *frames;
        uint32_t nf, cur = rb->map[rb->parents[i]];
        rc = rb_location(rb, b, rb->locs[i], &frames, &nf);
        for (uint32_t j = 0; !rc && j < nf; j++)
            rc = lc_store__nodetab_child(&rb->tree, cur, frames[j], store_pair_hash(cur, frames[j]),
                                         &cur);
        rb->map[i] = cur;
    }
    if (!rc && rb->tree.count > ROLLUP_MAX_NODES)
        rc = LC_ETOOBIG;
    return rc;
}

static rb_series_t *rb_series(rb_t *rb, const MDB_val *key, int *rc)
{
    uint32_t id;
    bool added;
    *rc = lc_store__symtab_intern(&rb->keys, key->mv_data, key->mv_size, &id, &added);
    if (*rc)
        return NULL;
    if (id > rb->series_cap) {
        size_t old = rb->series_cap;
        rb->series = lc_xgrow(rb->series, &rb->series_cap, id, sizeof(*rb->series));
        memset(rb->series + old, 0, (rb->series_cap - old) * sizeof(*rb->series));
    }
    return &rb->series[id - 1];
}

static int rb_add_summary(rb_t *rb, rb_series_t *se, const lc_stored_profile_t *p, uint64_t nodes)
{
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, p);
    for (;;) {
        uint32_t node;
        int64_t v;
        int rc = lc_sample_iter_next(&it, &node, &v, NULL);
        if (rc != 1)
            return rc;
        if (node >= nodes)
            return LC_ECORRUPT;
        rb->negative |= v < 0;
        if (++rb->n_pairs > ROLLUP_MAX_PAIRS)
            return LC_ETOOBIG;
        if (se->n == se->cap) {
            se->node = lc_xgrow(se->node, &se->cap, se->n + 1, sizeof(*se->node));
            se->val = lc_xrealloc(se->val, se->cap * sizeof(*se->val));
        }
        se->node[se->n] = rb->map[node];
        se->val[se->n++] = v;
    }
}

static int rb_point(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    rb_series_t *se = data;
    if (se->n_pts == se->pts_cap) {
        se->pt_time = lc_xgrow(se->pt_time, &se->pts_cap, se->n_pts + 1, sizeof(*se->pt_time));
        se->pt_total = lc_xrealloc(se->pt_total, se->pts_cap * sizeof(*se->pt_total));
    }
    se->pt_time[se->n_pts] = p->time_ns;
    se->pt_total[se->n_pts++] = p->total;
    return 0;
}

static int rb_any_profile(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    LC_UNUSED(b);
    LC_UNUSED(p);
    *(bool *)data = true;
    return 1; /* stop */
}

typedef struct rb_block_s {
    rb_t *rb;
    lc_block_t *b;
    uint64_t nodes;
} rb_block_t;

/* One series of the block: its summary; one without (a late write, not
 * summarised yet) makes the window not ready, and the rest is skipped. */
static int rb_add_series(void *arg, uint32_t id, const MDB_val *v)
{
    rb_block_t *rbb = arg;
    rb_t *rb = rbb->rb;
    if (rb->not_ready)
        return 0;
    lc_stored_profile_t p;
    int rc = lc_block_summary(rbb->b, id, &p);
    if (rc == LC_ENOTFOUND) {
        bool any = false;
        rc = lc_block_profiles(rbb->b, id, INT64_MIN, INT64_MAX, rb_any_profile, &any);
        rb->not_ready |= any;
        return rc == 1 ? 0 : rc;
    }
    rb_series_t *se = rc ? NULL : rb_series(rb, v, &rc);
    if (se)
        rc = rb_add_summary(rb, se, &p, rbb->nodes);
    if (se && !rc) /* its profiles' totals, for SelectSeries: the headers only */
        rc = lc_block_profiles(rbb->b, id, INT64_MIN, INT64_MAX, rb_point, se);
    return rc;
}

/* Adds every series' summary of the block. */
static int rb_add_block(rb_t *rb, lc_block_t *b)
{
    lc_block_info_t info;
    int rc = lc_block_info(b, &info);
    if (!rc && info.nodes > ROLLUP_MAX_NODES)
        rc = LC_ETOOBIG;
    if (!rc)
        rc = rb_map_block(rb, b, &info);
    rb_block_t rbb = {.rb = rb, .b = b, .nodes = info.nodes};
    if (!rc)
        rc = lc_store__table_each(lc_store__block_txn(b), lc_store__block_ref(b)->dbi, DB_SERIES,
                                  info.series, rb_add_series, &rbb);
    return rc;
}

static void rb_put_varint(lc_buf_t *out, uint64_t v, int *rc)
{
    uint8_t tmp[10];
    if (!*rc)
        *rc = lc_buf_append(out, tmp, (size_t)(store_put_uvarint(tmp, v) - tmp));
}

static void rb_put_bytes(lc_buf_t *out, const void *p, size_t len, int *rc)
{
    rb_put_varint(out, len, rc);
    if (!*rc && len)
        *rc = lc_buf_append(out, p, len);
}

static int rb_encode_window(const rb_t *rb, lc_buf_t *out)
{
    int rc = 0;
    out->len = 0;
    rb_put_varint(out, ROLLUP_VERSION, &rc);
    rb_put_varint(out,
                  (rb->negative ? ROLLUP_FLAG_UNUSABLE : 0) |
                      (rb->symbolizable ? ROLLUP_FLAG_SYMBOLIZABLE : 0),
                  &rc);
    rb_put_varint(out, rb->n_blocks, &rc);
    for (size_t i = 0; i < rb->n_blocks; i++) {
        rb_put_varint(out, store_zigzag(rb->starts[i]), &rc);
        rb_put_varint(out, rb->txnids[i], &rc);
    }
    rb_put_varint(out, rb->names.count, &rc);
    for (uint32_t id = 1; id <= rb->names.count; id++) {
        size_t len;
        const uint8_t *s = lc_store__symtab_bytes(&rb->names, id, &len);
        rb_put_bytes(out, s, len, &rc);
    }
    rb_put_varint(out, rb->tree.count, &rc);
    for (uint64_t i = 1; i < rb->tree.count; i++) {
        uint64_t pair = lc_store__nodetab_pair(&rb->tree, i);
        rb_put_varint(out, i - (pair >> 32), &rc);
        rb_put_varint(out, (uint32_t)pair, &rc);
    }
    return rc;
}

static int u32_val_cmp(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The series key, then its sums by window node as a profile value. */
static int rb_encode_series(const rb_t *rb, uint32_t id, lc_buf_t *out, size_t *flags_at)
{
    const rb_series_t *se = &rb->series[id - 1];
    uint64_t *pairs = lc_xmalloc((se->n ? se->n : 1) * sizeof(uint64_t));
    int64_t *vals = lc_xmalloc((se->n ? se->n : 1) * sizeof(int64_t));
    /* sort (node, index) so that equal nodes sum in a fixed order */
    for (size_t i = 0; i < se->n; i++)
        pairs[i] = (uint64_t)se->node[i] << 32 | (uint32_t)i;
    qsort(pairs, se->n, sizeof(*pairs), u32_val_cmp);
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < se->n;) {
        uint32_t node = (uint32_t)(pairs[i] >> 32);
        uint64_t sum = 0;
        for (; i < se->n && (uint32_t)(pairs[i] >> 32) == node; i++)
            sum += (uint64_t)se->val[(uint32_t)pairs[i]];
        if (sum) {
            pairs[n] = node;
            vals[n++] = (int64_t)sum;
            total += sum;
        }
    }
    int rc = 0;
    size_t klen;
    const uint8_t *key = lc_store__symtab_bytes(&rb->keys, id, &klen);
    out->len = 0;
    rb_put_bytes(out, key, klen, &rc);
    rb_put_varint(out, se->n_pts, &rc);
    int64_t prev_t = 0;
    for (size_t i = 0; i < se->n_pts; i++) {
        rb_put_varint(out, store_zigzag((int64_t)((uint64_t)se->pt_time[i] - (uint64_t)prev_t)),
                      &rc);
        rb_put_varint(out, store_zigzag(se->pt_total[i]), &rc);
        prev_t = se->pt_time[i];
    }
    rb_put_varint(out, store_zigzag((int64_t)total), &rc);
    rb_put_varint(out, n, &rc);
    *flags_at = out->len;
    rb_put_varint(out, 0, &rc); /* flags: no span ids, no profile id, not scaled */
    uint32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        rb_put_varint(out, (uint32_t)pairs[i] - prev, &rc);
        rb_put_varint(out, store_zigzag(vals[i]), &rc);
        prev = (uint32_t)pairs[i];
    }
    lc_free(pairs);
    lc_free(vals);
    return rc;
}

/* The series record's sums as a zstd frame (flag STORE_PF_ZSTD, varint raw
 * length, frame) when that is smaller: with many series per window the
 * rollups' sums were the largest table (bench/scale.py --shape random). */
static int rb_pack_series(ZSTD_CCtx *cctx, lc_buf_t *out, size_t flags_at, lc_buf_t *scratch)
{
    const uint8_t *samples = out->data + flags_at + 1; /* flags 0: one byte */
    size_t raw = out->len - flags_at - 1, bound = ZSTD_compressBound(raw);
    if (!cctx || raw < 64 || raw > STORE_MAX_UNPACKED)
        return 0;
    lc_buf_reset(scratch);
    int rc = lc_buf_reserve(scratch, bound);
    if (rc)
        return rc;
    size_t z = ZSTD_compressCCtx(cctx, scratch->data, bound, samples, raw, ROLLUP_ZSTD_LEVEL);
    if (ZSTD_isError(z) || z + 10 >= raw)
        return 0;
    out->len = flags_at;
    uint8_t tmp[10];
    rb_put_varint(out, STORE_PF_ZSTD, &rc);
    if (!rc)
        rc = lc_buf_append(out, tmp, (size_t)(store_put_uvarint(tmp, raw) - tmp));
    if (!rc)
        rc = lc_buf_append(out, scratch->data, z);
    return rc;
}

/* Deletes the window's record and series (in txn). */
static int rollup_delete(const struct store_rollup_s *ru, MDB_txn *txn, int level, int64_t window)
{
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN);
    int rc = mdb_del(txn, ru->windows, &k, NULL);
    if (rc && rc != MDB_NOTFOUND)
        return lc_store__mdb_fail(rc, "rollup del");
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, ru->series, &cur)))
        return lc_store__mdb_fail(rc, "cursor open (rollup del)");
    MDB_val sk = store_val(key, ROLLUP_KEY_LEN), v;
    for (rc = mdb_cursor_get(cur, &sk, &v, MDB_SET_RANGE);
         !rc && sk.mv_size == ROLLUP_KEY_LEN && memcmp(sk.mv_data, key, ROLLUP_WIN_KEY_LEN) == 0;
         rc = mdb_cursor_get(cur, &sk, &v, MDB_NEXT))
        rc = mdb_cursor_del(cur, 0);
    mdb_cursor_close(cur);
    return rc && rc != MDB_NOTFOUND ? lc_store__mdb_fail(rc, "rollup del series") : 0;
}

static int rb_write(const struct store_rollup_s *ru, const rb_t *rb, int level, int64_t window)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(ru->env, NULL, 0, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (rollup)");
    lc_buf_t enc;
    lc_buf_init(&enc, LC_BUF_UNLIMITED);
    rc = rollup_delete(ru, txn, level, window);
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window, 0);
    if (!rc)
        rc = rb_encode_window(rb, &enc);
    if (!rc) {
        MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v = store_val(enc.data, enc.len);
        if ((rc = mdb_put(txn, ru->windows, &k, &v, 0)))
            rc = lc_store__mdb_fail(rc, "rollup put");
    }
    ZSTD_CCtx *cctx = rb->negative ? NULL : ZSTD_createCCtx();
    lc_buf_t zbuf;
    lc_buf_init(&zbuf, LC_BUF_UNLIMITED);
    for (uint32_t id = 1; !rc && !rb->negative && id <= rb->keys.count; id++) {
        size_t flags_at = 0;
        rc = rb_encode_series(rb, id, &enc, &flags_at);
        if (!rc)
            rc = rb_pack_series(cctx, &enc, flags_at, &zbuf);
        rollup_key(key, level, window, id);
        MDB_val k = store_val(key, ROLLUP_KEY_LEN), v = store_val(enc.data, enc.len);
        if (!rc && (rc = mdb_put(txn, ru->series, &k, &v, 0)))
            rc = lc_store__mdb_fail(rc, "rollup series put");
    }
    ZSTD_freeCCtx(cctx);
    lc_buf_fini(&zbuf);
    lc_buf_fini(&enc);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc ? lc_store__mdb_fail(rc, "txn commit (rollup)") : 0;
}

/* Whether the stored record already matches the reader's snapshots. */
static bool rollup_current(const struct store_rollup_s *ru, int level, int64_t window,
                           const rb_t *rb)
{
    MDB_txn *txn;
    if (mdb_txn_begin(ru->env, NULL, MDB_RDONLY, &txn))
        return false;
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
    rollup_rec_t rec;
    bool ok = mdb_get(txn, ru->windows, &k, &v) == 0 && rec_decode(&v, &rec) == 0 &&
              rec_matches(&rec, rb->starts, rb->txnids, rb->n_blocks);
    mdb_txn_abort(txn);
    return ok;
}

/* Builds (or keeps) the rollup of one window; *done when one was written. */
static int rollup_window(lc_store_t *s, int level, int64_t window, bool *done)
{
    *done = false;
    lc_store_reader_t *r;
    int rc = lc_store_read_begin(s, window, window + rollup_len_ns[level] - 1, &r);
    if (rc)
        return rc;
    rb_t rb;
    rb_init(&rb);
    rb.n_blocks = lc_store_reader_count(r);
    for (size_t i = 0; i < rb.n_blocks && i < LC_ARRAY_LEN(rb.starts); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        rb.starts[i] = lc_store__block_ref(b)->start_ns;
        rb.txnids[i] = mdb_txn_id(lc_store__block_txn(b));
    }
    if (rb.n_blocks > LC_ARRAY_LEN(rb.starts) || rollup_current(s->rollup, level, window, &rb))
        goto out;
    for (size_t i = 0; !rc && !rb.not_ready && i < rb.n_blocks; i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        rc = rb_add_block(&rb, b);
        lc_block_drop_cache(b);
    }
    if (rc == LC_ETOOBIG) {
        LC_LOG_WARN("store: window too large for a rollup start=%lld", (long long)window);
        rb.negative = true; /* stored as unusable: not tried again until a block changes */
        rc = 0;
    }
    if (!rc && !rb.not_ready) {
        rc = rb_write(s->rollup, &rb, level, window);
        *done = rc == 0;
    }
out:
    rb_fini(&rb);
    lc_store_read_end(r);
    return rc;
}

int lc_store__rollup_forget_block(lc_store_t *s, int64_t start_ns)
{
    const struct store_rollup_s *ru = s->rollup;
    if (!ru)
        return 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(ru->env, NULL, 0, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (rollup forget)");
    for (int lv = 0; lv < ROLLUP_LEVELS && !rc; lv++)
        rc = rollup_delete(ru, txn, lv, lc_store__rollup_window(lv, start_ns));
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc ? lc_store__mdb_fail(rc, "txn commit (rollup forget)") : 0;
}

/* ---------------------------------------------------------------- the pass */

/* Summarised since its last commit and, in a store that compacts, compact at
 * it: a rollup summed before the compaction's swap would be summed again. */
static bool block_settled(const lc_store_t *s, const store_block_t *b)
{
    return !b->dropped && b->summarized_gen == b->write_gen &&
           (!s->opts.compacts || b->compacted_gen == b->write_gen);
}

typedef struct rollup_todo_s {
    int level;
    int64_t window;
} rollup_todo_t;

/* Windows that ended, whose blocks are all summarised, and one of whose
 * blocks changed (or was not checked) since the last look at that level. */
static size_t rollup_candidates(lc_store_t *s, int64_t now_ns, rollup_todo_t **out)
{
    int64_t oldest = s->opts.retention_ns ? now_ns - s->opts.retention_ns : INT64_MIN;
    pthread_mutex_lock(&s->mu);
    rollup_todo_t *w = lc_xcalloc(s->n_blocks ? 2 * s->n_blocks : 1, sizeof(*w));
    size_t n = 0;
    for (int lv = 0; lv < ROLLUP_LEVELS; lv++) {
        for (size_t i = 0; i < s->n_blocks;) {
            int64_t win = lc_store__rollup_window(lv, s->blocks[i]->start_ns);
            bool settled = true, changed = false;
            for (; i < s->n_blocks && lc_store__rollup_window(lv, s->blocks[i]->start_ns) == win;
                 i++) {
                const store_block_t *b = s->blocks[i];
                settled &= block_settled(s, b);
                changed |= b->rollup_seen[lv] != b->write_gen + 1;
            }
            if (settled && changed && win >= oldest && win + rollup_len_ns[lv] <= now_ns)
                w[n++] = (rollup_todo_t){lv, win};
        }
    }
    pthread_mutex_unlock(&s->mu);
    *out = w;
    return n;
}

/* Marks the window's blocks as looked at, as of the generations the pass saw
 * settled (a commit since then marks them again). */
static void rollup_mark(lc_store_t *s, int level, int64_t window)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_blocks; i++) {
        store_block_t *b = s->blocks[i];
        if (lc_store__rollup_window(level, b->start_ns) == window && block_settled(s, b))
            b->rollup_seen[level] = b->write_gen + 1;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Deletes windows that begin before now - retention. */
static int rollup_expire(lc_store_t *s, int64_t now_ns)
{
    if (!s->opts.retention_ns)
        return 0;
    const struct store_rollup_s *ru = s->rollup;
    int64_t oldest = now_ns - s->opts.retention_ns;
    MDB_txn *txn;
    int rc = mdb_txn_begin(ru->env, NULL, 0, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (rollup expire)");
    size_t n = 0;
    for (;;) {
        MDB_cursor *cur;
        if ((rc = mdb_cursor_open(txn, ru->windows, &cur)))
            break;
        MDB_val k, v;
        rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
        mdb_cursor_close(cur);
        if (rc || k.mv_size != ROLLUP_WIN_KEY_LEN)
            break;
        int64_t win = 0;
        for (int i = 0; i < 8; i++)
            win = (int64_t)((uint64_t)win << 8 | ((const uint8_t *)k.mv_data)[i]);
        win = (int64_t)((uint64_t)win ^ (1ull << 63));
        if (win >= oldest)
            break;
        if ((rc = rollup_delete(ru, txn, ((const uint8_t *)k.mv_data)[8], win)))
            break;
        n++;
    }
    if (rc && rc != MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        return rc > 0 ? lc_store__mdb_fail(rc, "rollup expire") : rc;
    }
    if (!n) {
        mdb_txn_abort(txn);
        return 0;
    }
    rc = mdb_txn_commit(txn);
    return rc ? lc_store__mdb_fail(rc, "txn commit (rollup expire)") : 0;
}

int lc_store__rollup_pass(lc_store_t *s, int64_t now_ns, size_t *built)
{
    *built = 0;
    if (!s->rollup)
        return 0;
    int rc = rollup_expire(s, now_ns);
    rollup_todo_t *wins;
    size_t n = rollup_candidates(s, now_ns, &wins);
    for (size_t i = 0; i < n && !rc; i++) {
        bool done;
        rc = rollup_window(s, wins[i].level, wins[i].window, &done);
        if (!rc)
            rollup_mark(s, wins[i].level, wins[i].window);
        *built += done;
    }
    lc_free(wins);
    return rc;
}

/* ---------------------------------------------------------------- export */

/* Whether the rollup of (level, window) in txn summed exactly r's snapshots
 * of the window's blocks (all of r's blocks in the window): 0 when it did
 * and is usable, LC_EUNSUPPORTED when it did but is stored as unusable,
 * LC_ENOTFOUND when it did not (not built yet, or a block changed since). */
static int export_matches(const struct store_rollup_s *ru, MDB_txn *txn, lc_store_reader_t *r,
                          int level, int64_t window)
{
    int64_t starts[ROLLUP_MAX_BLOCKS];
    uint64_t txnids[ROLLUP_MAX_BLOCKS];
    size_t n = 0;
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        int64_t start = lc_store__block_ref(b)->start_ns;
        if (lc_store__rollup_window(level, start) != window)
            continue;
        if (n == LC_ARRAY_LEN(starts))
            return LC_ENOTFOUND;
        starts[n] = start;
        txnids[n++] = mdb_txn_id(lc_store__block_txn(b));
    }
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
    rollup_rec_t rec;
    if (n == 0 || mdb_get(txn, ru->windows, &k, &v) != 0 || rec_decode(&v, &rec) != 0 ||
        !rec_matches(&rec, starts, txnids, n))
        return LC_ENOTFOUND;
    return rec.flags & ROLLUP_FLAG_UNUSABLE ? LC_EUNSUPPORTED : 0;
}

/* The window's record and series records, byte for byte, from src into dst. */
static int export_copy(const struct store_rollup_s *ru, MDB_txn *src, MDB_txn *dst,
                       MDB_dbi dst_windows, MDB_dbi dst_series, int level, int64_t window)
{
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
    int rc = mdb_get(src, ru->windows, &k, &v);
    if (!rc)
        rc = mdb_put(dst, dst_windows, &k, &v, 0);
    MDB_cursor *cur = NULL;
    if (!rc)
        rc = mdb_cursor_open(src, ru->series, &cur);
    MDB_val sk = store_val(key, ROLLUP_KEY_LEN);
    int more = rc ? rc : mdb_cursor_get(cur, &sk, &v, MDB_SET_RANGE);
    for (; !rc && !more && sk.mv_size == ROLLUP_KEY_LEN &&
           memcmp(sk.mv_data, key, ROLLUP_WIN_KEY_LEN) == 0;
         more = mdb_cursor_get(cur, &sk, &v, MDB_NEXT))
        rc = mdb_put(dst, dst_series, &sk, &v, MDB_APPEND); /* keys come sorted */
    if (cur)
        mdb_cursor_close(cur);
    if (!rc && more && more != MDB_NOTFOUND)
        rc = more;
    return rc ? lc_store__mdb_fail(rc, "rollup export copy") : 0;
}

/* A fresh environment in scratch_dir holding the window's records. */
static int export_env(const lc_store_t *s, MDB_txn *src, int level, int64_t window,
                      const char *scratch_dir, MDB_env **out)
{
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc)
        return lc_store__mdb_fail(rc, "env create (rollup export)");
    (void)mdb_env_set_maxdbs(env, 2);
    (void)mdb_env_set_mapsize(env, s->opts.map_size_bytes);
    MDB_txn *dst = NULL;
    MDB_dbi windows, series;
    rc = mdb_env_open(env, scratch_dir, MDB_NOSYNC, 0644);
    if (!rc)
        rc = mdb_txn_begin(env, NULL, 0, &dst);
    if (!rc)
        rc = mdb_dbi_open(dst, "windows", MDB_CREATE, &windows);
    if (!rc)
        rc = mdb_dbi_open(dst, "series", MDB_CREATE, &series);
    if (rc)
        rc = lc_store__mdb_fail(rc, "env open (rollup export)");
    if (!rc)
        rc = export_copy(s->rollup, src, dst, windows, series, level, window);
    if (!rc && (rc = mdb_txn_commit(dst)))
        rc = lc_store__mdb_fail(rc, "txn commit (rollup export)");
    else if (rc && dst)
        mdb_txn_abort(dst);
    if (rc) {
        mdb_env_close(env);
        return rc;
    }
    *out = env;
    return 0;
}

static void export_scratch_clear(const char *scratch_dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/data.mdb", scratch_dir);
    (void)unlink(path);
    snprintf(path, sizeof path, "%s/lock.mdb", scratch_dir);
    (void)unlink(path);
}

int lc_store_rollup_export(lc_store_reader_t *r, int level, int64_t window_ns,
                           const char *scratch_dir, int fd)
{
    lc_store_t *s = lc_store__reader_store(r);
    if (level < 0 || level >= ROLLUP_LEVELS ||
        lc_store__rollup_window(level, window_ns) != window_ns)
        return LC_EINPUT;
    if (!s->rollup || lc_store__reader_added(r))
        return LC_ENOTFOUND; /* rollups sum this store's blocks only */
    MDB_txn *src;
    int rc = mdb_txn_begin(s->rollup->env, NULL, MDB_RDONLY, &src);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (rollup export)");
    MDB_env *env = NULL;
    rc = export_matches(s->rollup, src, r, level, window_ns);
    if (!rc)
        rc = export_env(s, src, level, window_ns, scratch_dir, &env);
    mdb_txn_abort(src);
    if (!rc && (rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT)))
        rc = lc_store__mdb_fail(rc, "env copy (rollup export)");
    if (env)
        mdb_env_close(env);
    export_scratch_clear(scratch_dir);
    return rc;
}

/* ---------------------------------------------------------------- rollup files */

struct lc_rollup_file_s {
    struct store_rollup_s ru;
};

int lc_rollup_file_open(const char *path, lc_rollup_file_t **out)
{
    lc_rollup_file_t *f = lc_xcalloc(1, sizeof(*f));
    MDB_txn *txn = NULL;
    int rc = mdb_env_create(&f->ru.env);
    if (!rc) {
        (void)mdb_env_set_maxdbs(f->ru.env, 2);
        (void)mdb_env_set_maxreaders(f->ru.env, 512);
        /* no lock file: nothing ever writes it */
        rc =
            mdb_env_open(f->ru.env, path, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOTLS, 0644);
    }
    if (!rc)
        rc = mdb_txn_begin(f->ru.env, NULL, MDB_RDONLY, &txn);
    if (!rc)
        rc = mdb_dbi_open(txn, "windows", 0, &f->ru.windows);
    if (!rc)
        rc = mdb_dbi_open(txn, "series", 0, &f->ru.series);
    if (!rc) { /* a commit keeps the handles a read-only transaction opened */
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn)
        mdb_txn_abort(txn);
    if (rc) {
        rc = lc_store__mdb_fail(rc, "rollup file open");
        lc_rollup_file_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void lc_rollup_file_close(lc_rollup_file_t *f)
{
    if (!f)
        return;
    if (f->ru.env)
        mdb_env_close(f->ru.env);
    lc_free(f);
}

int lc_store_reader_add_rollup(lc_store_reader_t *r, lc_rollup_file_t *f, int level,
                               int64_t window_ns)
{
    if (level < 0 || level >= ROLLUP_LEVELS ||
        lc_store__rollup_window(level, window_ns) != window_ns)
        return LC_EINPUT;
    MDB_txn *txn;
    int rc = mdb_txn_begin(f->ru.env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return lc_store__mdb_fail(rc, "txn begin (rollup file)");
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, level, window_ns, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
    rollup_rec_t rec;
    rc = mdb_get(txn, f->ru.windows, &k, &v);
    if (rc == MDB_NOTFOUND)
        rc = LC_ENOTFOUND;
    else if (rc)
        rc = lc_store__mdb_fail(rc, "rollup file read");
    else if (!(rc = rec_decode(&v, &rec)) &&
             rec.flags & (ROLLUP_FLAG_UNUSABLE | ROLLUP_FLAG_SYMBOLIZABLE))
        rc = LC_EUNSUPPORTED;
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    lc_store__reader_rollup_push(
        r, &(store_reader_rollup_t){.ru = &f->ru, .txn = txn, .level = level, .window = window_ns});
    return 0;
}

/* ---------------------------------------------------------------- reading */

typedef struct rollup_view_s {
    int level;
    int64_t window;
    MDB_txn *txn; /* the rollup's: the store's (rs->txn) or a file's (the reader's) */
    const struct store_rollup_s *ru;
    rollup_rec_t rec;
    uint32_t *parents, *names; /* decoded on first use */
    const uint8_t **name_at;
} rollup_view_t;

struct lc_rollups_s {
    MDB_txn *txn;
    const struct store_rollup_s *ru;
    rollup_view_t *v;
    size_t n;
    bool *covered; /* by reader block */
    size_t n_blocks;
    store_unpack_t unpack; /* compressed sums, valid during a series callback */
};

/* Whether window [w, w + W) of the reader (blocks lo..hi-1) has a usable
 * rollup; fills *view. */
static bool rollup_usable(lc_rollups_t *rs, lc_store_reader_t *r, size_t lo, size_t hi,
                          int64_t start_ns, int64_t end_ns, rollup_view_t *view)
{
    int64_t starts[ROLLUP_MAX_BLOCKS];
    uint64_t txnids[ROLLUP_MAX_BLOCKS];
    if (hi - lo > LC_ARRAY_LEN(starts))
        return false;
    for (size_t i = lo; i < hi; i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        if (lc_store__block_store(b) != lc_store__reader_store(r) ||
            !lc_block_covers(b, start_ns, end_ns))
            return false; /* another store's block: the rollup did not sum it */
        starts[i - lo] = lc_store__block_ref(b)->start_ns;
        txnids[i - lo] = mdb_txn_id(lc_store__block_txn(b));
    }
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, view->level, view->window, 0);
    MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
    view->txn = rs->txn;
    view->ru = rs->ru;
    return mdb_get(rs->txn, rs->ru->windows, &k, &v) == 0 && rec_decode(&v, &view->rec) == 0 &&
           !(view->rec.flags & ROLLUP_FLAG_UNUSABLE) &&
           !(view->rec.flags & ROLLUP_FLAG_SYMBOLIZABLE && lc_store_reader_symbolizes(r)) &&
           rec_matches(&view->rec, starts, txnids, hi - lo);
}

static int64_t rollup_block_start(lc_store_reader_t *r, size_t i)
{
    return lc_store__block_ref(lc_store_reader_block(r, i))->start_ns;
}

/* The windows of this store's blocks that its rollups answer (days first;
 * then 6-hour windows among the blocks no day covers). */
static void rollups_of_store(lc_rollups_t *rs, lc_store_reader_t *r, int64_t start_ns,
                             int64_t end_ns)
{
    lc_store_t *s = lc_store__reader_store(r);
    size_t nb = rs->n_blocks;
    rs->ru = s->rollup;
    int rc = mdb_txn_begin(rs->ru->env, NULL, MDB_RDONLY, &rs->txn);
    if (rc) { /* the blocks still answer: no rollups for this query */
        rs->txn = NULL;
        (void)lc_store__mdb_fail(rc, "txn begin (rollup read)");
        return;
    }
    int64_t oldest = s->opts.retention_ns ? lc_realtime_ns() - s->opts.retention_ns : INT64_MIN;
    for (int lv = ROLLUP_LEVELS - 1; lv >= 0; lv--) {
        for (size_t lo = 0; lo < nb;) {
            if (rs->covered[lo]) {
                lo++;
                continue;
            }
            int64_t win = lc_store__rollup_window(lv, rollup_block_start(r, lo));
            size_t hi = lo;
            while (hi < nb && !rs->covered[hi] &&
                   lc_store__rollup_window(lv, rollup_block_start(r, hi)) == win)
                hi++;
            rollup_view_t view = {.level = lv, .window = win};
            if (win >= oldest && rollup_usable(rs, r, lo, hi, start_ns, end_ns, &view)) {
                rs->v[rs->n++] = view;
                for (size_t i = lo; i < hi; i++)
                    rs->covered[i] = true;
            }
            lo = hi;
        }
    }
}

/* The windows the reader answers by rollup files instead of blocks: they
 * are part of every merge of the reader (lc_store_reader_add_rollup). */
static int rollups_of_files(lc_rollups_t *rs, const store_reader_rollup_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rollup_view_t view = {
            .level = f[i].level, .window = f[i].window, .txn = f[i].txn, .ru = f[i].ru};
        uint8_t key[ROLLUP_KEY_LEN];
        rollup_key(key, view.level, view.window, 0);
        MDB_val k = store_val(key, ROLLUP_WIN_KEY_LEN), v;
        int rc = mdb_get(view.txn, view.ru->windows, &k, &v);
        if (rc)
            return lc_store__mdb_fail(rc, "rollup file read");
        if ((rc = rec_decode(&v, &view.rec)))
            return rc;
        rs->v[rs->n++] = view;
    }
    return 0;
}

int lc_store_rollups_begin(lc_store_reader_t *r, int64_t start_ns, int64_t end_ns,
                           lc_rollups_t **out)
{
    lc_store_t *s = lc_store__reader_store(r);
    size_t nb = lc_store_reader_count(r);
    const store_reader_rollup_t *files;
    size_t n_files = lc_store__reader_rollups(r, &files);
    lc_rollups_t *rs = lc_xcalloc(1, sizeof(*rs));
    rs->covered = lc_xcalloc(nb ? nb : 1, sizeof(bool));
    rs->n_blocks = nb;
    rs->v = lc_xcalloc(nb + n_files + 1, sizeof(*rs->v));
    lc_store__unpack_init_plain(&rs->unpack);
    *out = rs;
    int rc = rollups_of_files(rs, files, n_files);
    if (!rc && s->rollup && nb > 0)
        rollups_of_store(rs, r, start_ns, end_ns);
    return rc;
}

void lc_store_rollups_end(lc_rollups_t *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n; i++) {
        lc_free(rs->v[i].parents);
        lc_free(rs->v[i].names);
        lc_free(rs->v[i].name_at);
    }
    if (rs->txn)
        mdb_txn_abort(rs->txn);
    lc_store__unpack_fini(&rs->unpack);
    lc_free(rs->v);
    lc_free(rs->covered);
    lc_free(rs);
}

size_t lc_rollups_count(const lc_rollups_t *rs)
{
    return rs->n;
}

bool lc_rollups_cover_block(const lc_rollups_t *rs, size_t i)
{
    return i < rs->n_blocks && rs->covered[i];
}

static int view_decode(rollup_view_t *v)
{
    if (v->parents)
        return 0;
    const rollup_rec_t *r = &v->rec;
    v->name_at = lc_xmalloc((r->n_names + 1) * sizeof(*v->name_at));
    const uint8_t *p = r->names;
    for (uint64_t i = 0; i < r->n_names; i++) {
        uint64_t len;
        v->name_at[i + 1] = p;
        if (store_get_uvarint(&p, r->end, &len))
            return LC_ECORRUPT;
        p += len; /* checked by rec_decode */
    }
    v->parents = lc_xmalloc(r->n_nodes * sizeof(uint32_t));
    v->names = lc_xmalloc(r->n_nodes * sizeof(uint32_t));
    v->parents[0] = v->names[0] = 0;
    p = r->nodes;
    for (uint64_t i = 1; i < r->n_nodes; i++) {
        uint64_t d, name;
        if (store_get_uvarint(&p, r->end, &d) || store_get_uvarint(&p, r->end, &name) || d == 0 ||
            d > i || name == 0 || name > r->n_names)
            return LC_ECORRUPT;
        v->parents[i] = (uint32_t)(i - d);
        v->names[i] = (uint32_t)name;
    }
    return 0;
}

int lc_rollup_tree(lc_rollups_t *rs, size_t i, lc_rollup_tree_t *out)
{
    if (i >= rs->n)
        return LC_EINPUT;
    rollup_view_t *v = &rs->v[i];
    int rc = view_decode(v);
    if (rc)
        return rc;
    *out = (lc_rollup_tree_t){.parents = v->parents,
                              .names = v->names,
                              .n_nodes = (uint32_t)v->rec.n_nodes,
                              .n_names = (uint32_t)v->rec.n_names};
    return 0;
}

static int view_name(const rollup_view_t *v, uint32_t name, const char **s, size_t *len)
{
    if (!v->name_at || name == 0 || name > v->rec.n_names)
        return LC_EINPUT;
    const uint8_t *p = v->name_at[name];
    uint64_t l;
    if (store_get_uvarint(&p, v->rec.end, &l))
        return LC_ECORRUPT;
    *s = (const char *)p;
    *len = (size_t)l;
    return 0;
}

int lc_rollup_name(lc_rollups_t *rs, size_t i, uint32_t name, const char **s, size_t *len)
{
    return i < rs->n ? view_name(&rs->v[i], name, s, len) : LC_EINPUT;
}

int lc_store__rollup_window_record(const MDB_val *v, lc_rollup_name_cb cb, void *data,
                                   lc_rollup_tree_t *tree)
{
    rollup_view_t view = {0};
    int rc = rec_decode(v, &view.rec);
    if (rc == 0)
        rc = view_decode(&view);
    for (uint32_t i = 1; rc == 0 && i <= view.rec.n_names; i++) {
        const char *name;
        size_t len;
        rc = view_name(&view, i, &name, &len);
        if (rc == 0)
            cb(name, len, data);
    }
    if (rc == 0) { /* the record is the caller's, and so are the arrays */
        *tree = (lc_rollup_tree_t){.parents = view.parents,
                                   .names = view.names,
                                   .n_nodes = (uint32_t)view.rec.n_nodes,
                                   .n_names = (uint32_t)view.rec.n_names};
    } else {
        lc_free(view.parents);
        lc_free(view.names);
    }
    lc_free(view.name_at);
    return rc;
}

/* One series record: tenant check, labels, selector, then the callback. */
int lc_store__rollup_series_record(const MDB_val *v, const char *const *tenants, size_t n_tenants,
                                   const lc_selector_t *sel, store_unpack_t *up,
                                   lc_rollup_series_cb cb, void *data)
{
    const uint8_t *p = v->mv_data, *end = p + v->mv_size;
    uint64_t klen;
    if (store_get_uvarint(&p, end, &klen) || klen > (uint64_t)(end - p))
        return LC_ECORRUPT;
    const uint8_t *key = p, *nul = memchr(key, 0, klen);
    if (!nul)
        return LC_ECORRUPT;
    size_t tl = (size_t)(nul - key);
    const char *tenant = NULL;
    for (size_t t = 0; t < n_tenants && !tenant; t++)
        if (strlen(tenants[t]) == tl && memcmp(tenants[t], key, tl) == 0)
            tenant = tenants[t];
    if (!tenant)
        return 0;
    lc_labels_t ls;
    if (lc_labels_decode(nul + 1, klen - tl - 1, &ls))
        return LC_ECORRUPT;
    int hit = sel ? lc_selector_match(sel, &ls) : 1;
    int rc = hit < 0 ? hit : 0;
    if (hit > 0) {
        lc_rollup_series_t se = {.tenant = tenant, .labels = &ls};
        p += klen;
        uint64_t n;
        rc = store_get_uvarint(&p, end, &n) || n > (uint64_t)(end - p) / 2 ? LC_ECORRUPT : 0;
        se.n_points = n;
        se._pts = p;
        if (!rc)
            rc = skip_varints(&p, end, n, 2);
        se._pts_len = (size_t)(p - se._pts);
        MDB_val pv = store_val(p, (size_t)(end - p));
        if (!rc)
            rc = lc_store__profile_value_decode(&pv, &se.sums);
        se.sums._unpack = up;
        if (!rc)
            rc = se.sums.has_profile_id ? LC_ECORRUPT : cb(&se, data);
    }
    lc_labels_fini(&ls);
    return rc;
}

int lc_rollup_series(lc_rollups_t *rs, size_t i, const char *const *tenants, size_t n_tenants,
                     const lc_selector_t *sel, lc_rollup_series_cb cb, void *data)
{
    if (i >= rs->n)
        return LC_EINPUT;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(rs->v[i].txn, rs->v[i].ru->series, &cur);
    if (rc)
        return lc_store__mdb_fail(rc, "cursor open (rollup read)");
    uint8_t key[ROLLUP_KEY_LEN];
    rollup_key(key, rs->v[i].level, rs->v[i].window, 0);
    MDB_val k = store_val(key, ROLLUP_KEY_LEN), v;
    int ret = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
         !rc && !ret && k.mv_size == ROLLUP_KEY_LEN &&
         memcmp(k.mv_data, key, ROLLUP_WIN_KEY_LEN) == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        ret = lc_store__rollup_series_record(&v, tenants, n_tenants, sel, &rs->unpack, cb, data);
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND)
        return lc_store__mdb_fail(rc, "rollup read");
    return ret;
}

void lc_rollup_points_init(lc_rollup_points_t *it, const lc_rollup_series_t *se)
{
    *it = (lc_rollup_points_t){.p = se->_pts, .end = se->_pts + se->_pts_len};
}

int lc_rollup_points_next(lc_rollup_points_t *it, int64_t *time_ns, int64_t *total)
{
    if (it->p == it->end)
        return 0;
    uint64_t dt, v;
    if (store_get_uvarint(&it->p, it->end, &dt) || store_get_uvarint(&it->p, it->end, &v))
        return LC_ECORRUPT;
    it->time_ns = (int64_t)((uint64_t)it->time_ns + (uint64_t)store_unzigzag(dt));
    *time_ns = it->time_ns;
    *total = store_unzigzag(v);
    return 1;
}
