/*
 * store_int.h — internals shared by the store's source files (not a public
 * header). The on-disk layout these types read and write is described in
 * docs/internals/store.md; keep the two in step.
 *
 *   store.c         registry of block environments (open, LRU, retention), meta
 *   store_tables.c  the writer's in-memory de-duplication tables and the hash
 *   store_write.c   write batches: symbols, stacks, series, postings, profiles
 *   store_wstate.c  the writer's per-block state and its rebuild from LMDB
 *   store_read.c    readers: series selection, profiles, samples, symbols
 *   store_summary.c per-series summaries of closed blocks (pre-summed samples)
 *   store_rollup.c  6-hour rollups with names resolved (<dir>/rollups/)
 */
#ifndef LC_STORE_INT_H
#define LC_STORE_INT_H

#include <lmdb.h>
#include <pthread.h>

#include "lc/hash.h"
#include "lc/store.h"

/* 2: applied values list profile keys; DB deliveries; profile ids
 * 3: DB summaries (a writer must drop a series' summary with each profile it
 *    adds or deletes, so an older ember may not write to such a block);
 *    profile flag STORE_PF_SCALED.
 * Blocks of version 2 are still read and written; they never get summaries. */
#define STORE_FORMAT_VERSION 3
#define STORE_FORMAT_VERSION_MIN 2
/* 4: a compacted block (store_compact.c): rewritten in key order, profiles'
 * samples may be zstd frames (STORE_PF_ZSTD) with the block's dictionary in
 * DB_META "zdict". Only compaction makes it; new blocks are still 3. */
#define STORE_FORMAT_VERSION_COMPACT 4
/* 5: a compacted block whose DB_SUMMARIES values may be zstd frames too
 * (issue 32: with many series per block the summaries rival the profiles).
 * A separate number so that an ember of version 4 refuses the block instead
 * of failing on each summary it reads. */
#define STORE_FORMAT_VERSION_COMPACT_SUMMARIES 5
/* 6: a compacted block whose symbol tables and stack tree may be packed
 * into DB_META (store_packed.c): an ember of version 5 would find their DBs
 * empty. */
#define STORE_FORMAT_VERSION_COMPACT_PACKED 6
#define STORE_FORMAT_VERSION_MAX STORE_FORMAT_VERSION_COMPACT_PACKED
#define STORE_NODE_CHUNK 1024     /* (parent, location) pairs per LMDB value */
#define STORE_POSTING_KEY_MAX 400 /* longer posting keys are replaced by a hash */
#define STORE_MAX_STRING_BYTES (1u << 20)
#define STORE_MAX_TENANT_BYTES 1024
#define STORE_MAX_TIME_NS ((int64_t)1 << 62) /* a profile's time, either side of 1970 */
#define STORE_MAX_ID 0xfffffff0u             /* ids are u32; leave headroom for sentinels */
#define STORE_READER_ARENA_MAX ((size_t)1 << 30)
#define STORE_MAX_APPLIED_ID 64                /* bytes of an ingest id */
#define STORE_MAX_DELIVERY_ID 400              /* bytes of a transport delivery id */
#define STORE_STACKCACHE_MAX ((size_t)1 << 19) /* stacks cached per block: 16 MiB of slots */

/* Profile value flags (first varint of lc_stored_profile_t._data). */
#define STORE_PF_SPANS 0x1u      /* each sample carries a span id varint */
#define STORE_PF_PROFILE_ID 0x2u /* 16 bytes of profile id (a UUID) follow the flags */
#define STORE_PF_SCALED 0x4u     /* varint scale follows (the id): values are value / scale */
#define STORE_PF_ZSTD                                                                              \
    0x8u /* compacted (format 4): the samples are a zstd frame (store_compact.c) */
#define STORE_PF_ALL (STORE_PF_SPANS | STORE_PF_PROFILE_ID | STORE_PF_SCALED | STORE_PF_ZSTD)
#define STORE_PF_CORRUPT 0x80000000u /* iterator only: the header did not decode */

/* First byte of a DB_APPLIED value. */
#define STORE_APPLIED_KEPT 1      /* its profiles are stored (their keys follow) */
#define STORE_APPLIED_FORGOTTEN 2 /* lc_store_write_forget deleted them */

/* Named databases of a block environment. */
typedef enum {
    DB_META,       /* "info" -> store_meta_t (fixed little-endian u64s) */
    DB_STRINGS,    /* u32 id -> bytes (id 0 = "" is implicit) */
    DB_FUNCTIONS,  /* u32 id -> varints */
    DB_MAPPINGS,   /* u32 id -> varints */
    DB_LOCATIONS,  /* u32 id -> varints */
    DB_NODES,      /* u32 chunk index -> STORE_NODE_CHUNK x (u32 parent, u32 location) */
    DB_SERIES,     /* u32 id -> tenant NUL encoded-labels */
    DB_POSTINGS,   /* tenant NUL name NUL value -> dupsort u32 series ids */
    DB_PROFILES,   /* series BE32, time BE64 (sign flipped), seq BE32 -> profile */
    DB_APPLIED,    /* ingest id bytes -> state byte, then the profile keys it wrote */
    DB_DELIVERIES, /* transport delivery id ("<stream>/<entry id>") -> ingest id */
    DB_SUMMARIES,  /* u32 series id -> its samples summed over the block; 0 -> mark */
    DB_COUNT
} store_db_t;

/* Per-block counters and time range, the "info" record of DB_META. Counts of
 * symbols are also the next ids: ids run 1..n (strings 0..n-1, nodes 0..n-1). */
typedef struct store_meta_s {
    uint64_t version;
    int64_t start_ns, duration_ns;
    int64_t min_time_ns, max_time_ns; /* INT64_MAX / INT64_MIN while empty */
    uint64_t series, profiles, samples;
    uint64_t nodes;   /* including the root, node 0 */
    uint64_t strings; /* including "", string 0 */
    uint64_t functions, mappings, locations;
} store_meta_t;

#define STORE_META_FIELDS 13

/* ---- in-memory tables used by the writer (store_tables.c) ---- */

/* Interns byte strings: content -> dense id (1..count), bytes kept for the
 * equality check so a hash collision can never merge two symbols. */
typedef struct store_symtab_entry_s {
    uint64_t off;
    uint32_t len;
    uint32_t hash;
} store_symtab_entry_t;

typedef struct store_symtab_s {
    uint32_t *slots; /* id, 0 = empty; linear probing */
    size_t mask;
    store_symtab_entry_t *entries; /* entries[id - 1] */
    size_t count, cap;
    lc_buf_t bytes;
    uint64_t seed1, seed2; /* of its in-memory hash (symtab_hash), random per table */
} store_symtab_t;

/* The stack tree: (parent, location) -> node id. The pair lives in the slot,
 * so a lookup (the writer's innermost loop, once per stack frame) touches one
 * cache line. Only the nodes since the start of the first unflushed chunk are
 * also kept by id, for writing chunks at commit. */
typedef struct store_nodeslot_s {
    uint32_t parent, location;
    uint32_t id; /* 0 = empty (the root is never a child) */
} store_nodeslot_t;

typedef struct store_nodetab_s {
    store_nodeslot_t *slots;
    size_t mask;
    size_t count;        /* nodes, including the root */
    uint64_t tail_first; /* id of tail[0]: a multiple of STORE_NODE_CHUNK */
    uint64_t *tail;      /* parent << 32 | location, ids tail_first.. */
    size_t tail_cap;
} store_nodetab_t;

/* u64 -> u32 map cleared in O(1) by bumping a generation; the writer's
 * per-profile memo from pprof ids to store ids. */
typedef struct store_idmap_slot_s {
    uint64_t key;
    uint32_t val;
    uint32_t gen;
} store_idmap_slot_t;

typedef struct store_idmap_s {
    store_idmap_slot_t *slots;
    size_t mask, count;
    uint32_t gen;
} store_idmap_t;

/* Whole stacks -> node id: a stack seen before (the same service sends the
 * same stacks profile after profile) is found with one probe instead of one
 * per frame. A stack is known by 96 bits of two hashes of its location ids,
 * seeded at random per cache, so that no one can aim for a collision. Valid
 * while the node table it points into is: it lives and dies with the wstate. */
typedef struct store_stackkey_s {
    uint64_t h1;
    uint32_t h2;
} store_stackkey_t;

typedef struct store_stackslot_s {
    uint64_t h1;
    uint32_t h2;
    uint32_t node; /* 0 = empty: an empty stack is the root and never cached */
} store_stackslot_t;

typedef struct store_stackcache_s {
    store_stackslot_t *slots;
    size_t mask, count;
    uint64_t seed1, seed2; /* where the key's two chains start */
    uint64_t step1, step2; /* xored into each step's second operand; high half all ones */
} store_stackcache_t;

uint64_t lc_store__hash(const void *p, size_t len, uint64_t seed);

void lc_store__symtab_init(store_symtab_t *t);
void lc_store__symtab_fini(store_symtab_t *t);
/* Finds or adds; *added says which. Fails with LC_ETOOBIG past STORE_MAX_ID. */
int lc_store__symtab_intern(store_symtab_t *t, const void *p, size_t len, uint32_t *id,
                            bool *added) LC_MUST_CHECK;
const uint8_t *lc_store__symtab_bytes(const store_symtab_t *t, uint32_t id, size_t *len);
/* One item of a batch lookup; hash is set by the lookup. */
typedef struct store_symkey_s {
    const void *p;
    size_t len;
    uint32_t hash;
} store_symkey_t;
/* Looks n items up without adding any: ids[i] = the id, 0 when absent. */
void lc_store__symtab_find_many(const store_symtab_t *t, store_symkey_t *keys, size_t n,
                                uint32_t *ids);

void lc_store__nodetab_init(store_nodetab_t *t);
void lc_store__nodetab_fini(store_nodetab_t *t);
/* hash = store_pair_hash(parent, location), computed once by the caller. */
int lc_store__nodetab_child(store_nodetab_t *t, uint32_t parent, uint32_t location, uint64_t hash,
                            uint32_t *id) LC_MUST_CHECK;
/* The pair of node id, which must be >= tail_first. */
uint64_t lc_store__nodetab_pair(const store_nodetab_t *t, uint64_t id);
/* Forgets the tail before the chunk holding node `keep_from`. */
void lc_store__nodetab_trim(store_nodetab_t *t, uint64_t keep_from);

void lc_store__stackcache_init(store_stackcache_t *c);
void lc_store__stackcache_fini(store_stackcache_t *c);
bool lc_store__stackcache_get(const store_stackcache_t *c, const store_stackkey_t *k,
                              uint32_t *node);
/* Past STORE_STACKCACHE_MAX entries the cache starts over empty. */
void lc_store__stackcache_put(store_stackcache_t *c, const store_stackkey_t *k, uint32_t node);

void lc_store__idmap_init(store_idmap_t *m);
void lc_store__idmap_fini(store_idmap_t *m);
void lc_store__idmap_clear(store_idmap_t *m);
bool lc_store__idmap_get(const store_idmap_t *m, uint64_t key, uint32_t *val);
void lc_store__idmap_put(store_idmap_t *m, uint64_t key, uint32_t val);

/* ---- the writer's per-block state (store_wstate.c) ---- */
typedef struct store_wstate_s {
    store_meta_t meta;
    store_symtab_t strings, functions, mappings, locations, series;
    store_nodetab_t nodes;
    store_stackcache_t stacks;
    uint64_t nodes_committed; /* nodes already in DB_NODES */
} store_wstate_t;

/* Rebuilds the de-dup maps by scanning the block's tables in txn. */
int lc_store__wstate_load(MDB_txn *txn, const MDB_dbi *dbi, store_wstate_t **out) LC_MUST_CHECK;
void lc_store__wstate_free(store_wstate_t *ws);
/* Puts the node chunks touched since the last commit and the meta record. */
int lc_store__wstate_flush(store_wstate_t *ws, MDB_txn *txn, const MDB_dbi *dbi) LC_MUST_CHECK;

/* ---- symbol and stack resolution for the writer (store_stacks.c) ---- */

/* pprof id -> store id for one profile. Producers nearly always number ids
 * 1..n, so those go in an array; any other id goes to the hash map. */
typedef struct store_memo_s {
    uint32_t *dense; /* [id] = store id + 1; 0 = not yet */
    size_t n_dense, cap;
    store_idmap_t sparse;
} store_memo_t;

/* Scratch of the resolver's batch lookups (store_stacks.c, "warm-up"). */
typedef struct store_warm_s {
    store_symkey_t *keys;
    uint32_t *ids;
    uint64_t *refs; /* the pprof string index or id of keys[i] */
    size_t *offs;   /* where keys[i]'s encoding starts in enc */
    size_t cap;
    lc_buf_t enc;
} store_warm_t;

/* Translates one pprof into one block's ids. Its memos hold for one (profile,
 * block) pair: across writes while the profile is pinned, else one write. */
typedef struct store_resolver_s {
    store_memo_t locs, fns, maps;
    uint32_t *strs; /* pprof string index -> store id + 1 */
    size_t strs_cap;
    uint32_t *sample_node; /* by pprof sample index; UINT32_MAX = not yet */
    size_t sample_node_cap;
    uint32_t *todo;              /* samples whose stacks still need resolving */
    store_stackkey_t *todo_keys; /* ... and their stack cache keys */
    size_t todo_cap, todo_keys_cap;
    lc_buf_t enc;
    store_warm_t warm;
    const lc_pprof_t *p; /* what the memos describe (NULL: nothing) */
    const lc_pprof_index_t *ix;
    const void *block;
    MDB_txn *txn; /* where new symbols go */
    const MDB_dbi *dbi;
    store_wstate_t *ws;
} store_resolver_t;

void lc_store__resolver_init(store_resolver_t *r);
void lc_store__resolver_fini(store_resolver_t *r);
/* Targets p at block (txn, dbi, ws); keeps the memos when `keep` and neither
 * the profile nor the block changed. */
void lc_store__resolver_bind(store_resolver_t *r, const lc_pprof_t *p, const lc_pprof_index_t *ix,
                             const void *block, MDB_txn *txn, const MDB_dbi *dbi,
                             store_wstate_t *ws, bool keep);
void lc_store__resolver_forget(store_resolver_t *r);
/* Fills r->sample_node[] for the given pprof sample indices. */
int lc_store__resolve_stacks(store_resolver_t *r, const uint32_t *samples, size_t n) LC_MUST_CHECK;

/* ---- registry (store.c) ---- */
typedef struct store_block_s {
    int64_t start_ns, end_ns; /* partition [start, end) */
    char *path;
    MDB_env *env; /* NULL while closed (LRU) */
    MDB_dbi dbi[DB_COUNT];
    unsigned refs;      /* readers + the writer batch holding it */
    uint64_t last_used; /* LRU tick */
    bool dropped;       /* retention removed it; delete on last release */
    store_wstate_t *ws; /* writer thread only; freed with the env */
    bool has_summaries; /* the env has DB_SUMMARIES (format 3); set when opened */
    /* Summaries bookkeeping (store_summary.c), in memory only: write_gen
     * counts committed write batches, summarized_gen is the write_gen the last
     * complete summarising saw (UINT64_MAX = not checked since open). */
    uint64_t write_gen, summarized_gen;
    int64_t last_write_ns;   /* monotonic clock of the last commit */
    uint64_t rollup_seen[2]; /* store_rollup.c, per level: write_gen + 1 its window was
                              * checked at; 0 = not since open */
    /* Compaction (store_compact.c), in memory only: the write_gen the block
     * was last found compact at, and the write_gen of a rewrite that waits
     * (built, not swapped in yet); UINT64_MAX = none. */
    uint64_t compacted_gen, compact_ready_gen;
} store_block_t;

struct lc_store_s {
    lc_store_opts_t opts;
    char *dir, *blocks_dir;
    pthread_mutex_t mu;     /* guards everything below */
    store_block_t **blocks; /* sorted by start_ns */
    size_t n_blocks, cap_blocks;
    size_t n_open;
    uint64_t tick;
    uint64_t trash_seq;
    bool writing;                  /* a write batch is open */
    struct store_rollup_s *rollup; /* store_rollup.c; NULL: no rollups */
    lc_symbolizer_t *symbolizer;   /* not owned; NULL: no server-side symbols */
    lc_store_source_fn source;     /* lc_store_set_source; NULL: local blocks only */
    void *source_ctx;
    struct store_floor_s {         /* lc_store_set_floor (store.c) */
        pthread_mutex_t mu;        /* held across publish and the block it guards */
        lc_store_floor_fn publish; /* NULL: no floor */
        void *ctx;
        int64_t ns; /* published; INT64_MAX before the first */
    } floor;
};

/* store.c, for lc_store_open/lc_store_close (store_open.c): the registry of
 * opts->dir (checked settings, blocks/ made, trash/ emptied), its scan of
 * blocks/, and its end (every block closed; callers ended every reader). */
int lc_store__registry_new(const lc_store_opts_t *opts, lc_store_t **out) LC_MUST_CHECK;
int lc_store__registry_scan(lc_store_t *s) LC_MUST_CHECK;
void lc_store__registry_free(lc_store_t *s);
int64_t lc_store__partition(const lc_store_t *s, int64_t time_ns);
/* Called by the writer after a block's transaction committed (mu not held). */
void lc_store__block_written(lc_store_t *s, store_block_t *b);
/* Takes a reference on the block of partition start_ns, opening its
 * environment; creates the block when `create`, else LC_ENOTFOUND. */
int lc_store__acquire(lc_store_t *s, int64_t start_ns, bool create,
                      store_block_t **out) LC_MUST_CHECK;
/* References every block overlapping [start_ns, end_ns], in time order. */
int lc_store__acquire_range(lc_store_t *s, int64_t start_ns, int64_t end_ns, store_block_t ***out,
                            size_t *n) LC_MUST_CHECK;
void lc_store__release(lc_store_t *s, store_block_t *b);
/* The passes over closed blocks (summaries, compaction): due() picks the
 * blocks under the registry mutex, then fn runs on each in turn, acquired
 * (a block dropped meanwhile is skipped), with the write_gen it had when
 * picked, until the first error. lc_store__count counts what due() picks. */
typedef bool (*store_due_fn)(const store_block_t *b, const void *arg);
typedef int (*store_pass_fn)(lc_store_t *s, store_block_t *b, uint64_t gen, void *ctx);
int lc_store__pass(lc_store_t *s, store_due_fn due, const void *arg, store_pass_fn fn,
                   void *ctx) LC_MUST_CHECK;
size_t lc_store__count(lc_store_t *s, store_due_fn due, const void *arg);

/* Logs the LMDB failure and returns LC_ESTORE. */
int lc_store__mdb_fail(int rc, const char *what);
int lc_store__meta_get(MDB_txn *txn, MDB_dbi dbi, store_meta_t *m) LC_MUST_CHECK;
int lc_store__meta_put(MDB_txn *txn, MDB_dbi dbi, const store_meta_t *m) LC_MUST_CHECK;
void lc_store__meta_init(store_meta_t *m, int64_t start_ns, int64_t duration_ns);

/* ---- encoding helpers ---- */

/* Builds a posting key into buf (STORE_POSTING_KEY_MAX + 32 bytes); returns its length. */
size_t lc_store__posting_key(uint8_t *buf, const char *tenant, const char *name, const char *value);
#define STORE_POSTING_BUF (STORE_POSTING_KEY_MAX + 32)

#define STORE_PROFILE_KEY_LEN 16
void lc_store__profile_key(uint8_t key[STORE_PROFILE_KEY_LEN], uint32_t series, int64_t time_ns,
                           uint32_t seq);
int64_t lc_store__profile_key_time(const uint8_t *key);
uint32_t lc_store__profile_key_series(const uint8_t *key);
uint32_t lc_store__profile_key_seq(const uint8_t *key);

/* ---- compacted blocks (store_compact.c) ---- */

/* Unpacks STORE_PF_ZSTD samples of one transaction's block: the dictionary is
 * read from DB_META on first use. One buffer: what it returned is valid until
 * the next call (a profile callback's duration). One thread at a time. */
/* An unpacked sample list is at most this long (store_unpack.c refuses more;
 * store_compact.c packs nothing longer). */
#define STORE_MAX_UNPACKED ((uint64_t)1 << 30)
typedef struct store_unpack_s {
    MDB_txn *txn;
    MDB_dbi meta;
    struct ZSTD_DCtx_s *dctx;
    struct ZSTD_DDict_s *ddict;
    bool loaded; /* the dictionary was looked up */
    uint8_t *buf;
    size_t cap;
} store_unpack_t;

void lc_store__unpack_init(store_unpack_t *u, MDB_txn *txn, MDB_dbi meta);
/* An unpacker for frames made without a dictionary (the rollups' series). */
void lc_store__unpack_init_plain(store_unpack_t *u);
void lc_store__unpack_fini(store_unpack_t *u);
/* Decompresses [src, src + len) (varint raw length, zstd frame). */
int lc_store__unpack(store_unpack_t *u, const uint8_t *src, size_t len, const uint8_t **out,
                     size_t *out_len) LC_MUST_CHECK;
/* ---- packed tables of compacted blocks (store_packed.c, format 6) ---- */

#define STORE_PACKED_MAX ((uint64_t)64 << 20) /* raw bytes of one packed table */
#define STORE_PACKED_KEY_MAX 32               /* "packed." + a DB name */

/* A symbol table's (or the series') packed records, decoded: ids 1..n. */
typedef struct store_packed_s {
    uint32_t n;
    uint32_t *offs;      /* n + 1 offsets into data */
    const uint8_t *data; /* in raw */
    uint8_t *raw;
} store_packed_t;

/* Reads db's packed form (n == 0 when it has none); count is the table's
 * size in the meta record, which a packed table may not exceed. */
int lc_store__packed_load(MDB_txn *txn, MDB_dbi meta, store_db_t db, uint64_t count,
                          store_packed_t *t) LC_MUST_CHECK;
void lc_store__packed_fini(store_packed_t *t);
static inline void lc_store__packed_get(const store_packed_t *t, uint32_t id, MDB_val *v)
{
    v->mv_data = (void *)(t->data + t->offs[id - 1]);
    v->mv_size = t->offs[id] - t->offs[id - 1];
}
/* The parsers of the meta values under the two above, for the fuzz target:
 * a table of at most count records; nodes [0, want) of a tree of at most
 * m->nodes with locations up to m->locations (*n: how many it packs). */
int lc_store__packed_parse_table(const MDB_val *v, uint64_t count, store_packed_t *t) LC_MUST_CHECK;
int lc_store__packed_parse_nodes(const MDB_val *v, const store_meta_t *m, uint32_t *parents,
                                 uint32_t *locations, size_t want, uint64_t *n) LC_MUST_CHECK;
/* Every record of a symbol table (or DB_SERIES) in id order, packed ones
 * first; ids must run 1..count without a gap. */
typedef int (*store_record_fn)(void *arg, uint32_t id, const MDB_val *v);
int lc_store__table_each(MDB_txn *txn, const MDB_dbi *dbi, store_db_t db, uint64_t count,
                         store_record_fn fn, void *arg) LC_MUST_CHECK;
/* Parents and locations of nodes [0, n) (either array may be NULL), checked:
 * parent < id, location in [1, m->locations]. */
int lc_store__nodes_read(MDB_txn *txn, const MDB_dbi *dbi, const store_meta_t *m, uint32_t *parents,
                         uint32_t *locations, size_t n) LC_MUST_CHECK;
/* Compaction: db's records (count of them) from the old block packed into
 * the new one's DB_META, or copied as records when too large to pack. */
int lc_store__packed_write_table(MDB_txn *rtxn, const MDB_dbi *rdbi, store_db_t db, uint64_t count,
                                 MDB_txn *wtxn, const MDB_dbi *wdbi, int level) LC_MUST_CHECK;
int lc_store__packed_write_nodes(MDB_txn *rtxn, const MDB_dbi *rdbi, const store_meta_t *m,
                                 MDB_txn *wtxn, const MDB_dbi *wdbi, int level) LC_MUST_CHECK;
/* At open: finishes or discards rewrites a crash interrupted (blocks/.compact*). */
void lc_store__compact_recover(const char *blocks_dir);
/* Swaps a built rewrite (`ready`, a directory) in for block b when only the
 * caller holds it and no commit happened since gen: closes the environment,
 * moves the old directory to *old_out (for the caller to delete) and the new
 * one into place. -EBUSY when in use or written meanwhile (store.c; takes mu). */
int lc_store__block_swap(lc_store_t *s, store_block_t *b, uint64_t gen, const char *ready,
                         char **old_out) LC_MUST_CHECK;
const char *lc_store__db_name(int db);
unsigned lc_store__db_flags(int db);
/* Deletes a directory tree, logging what it cannot delete. */
void lc_store__rm_tree(const char *path);
/* store_helpers.c: directories (errors logged, -errno returned) and paths. */
int lc_store__mkdir_one(const char *path);
int lc_store__mkdir_parents(const char *path);
char *lc_store__path_join(const char *a, const char *b); /* lc_free it */

/* Calls fn for each profile of the series with start_ns <= time <= end_ns,
 * in key order, in any transaction (store_read.c). Non-zero from fn stops.
 * up (may be NULL for blocks that are not compacted) unpacks their samples. */
typedef int (*store_profile_fn)(const lc_stored_profile_t *p, void *data);
int lc_store__profiles_scan(MDB_txn *txn, MDB_dbi dbi, store_unpack_t *up, uint32_t series_id,
                            int64_t start_ns, int64_t end_ns, store_profile_fn fn,
                            void *data) LC_MUST_CHECK;

/* Decodes a DB_PROFILES (or DB_SUMMARIES) value's header into p (store_read.c). */
int lc_store__profile_value_decode(const MDB_val *v, lc_stored_profile_t *p) LC_MUST_CHECK;
/* Drops the series' summary (a profile of it was added or deleted); a no-op
 * for blocks without summaries. Same transaction as the change. */
int lc_store__summary_drop(MDB_txn *txn, const store_block_t *b, uint32_t series) LC_MUST_CHECK;

/* ---- rollups (store_rollup.c) ---- */
/* Opens <dir>/rollups (on failure logs and keeps none); closes it. */
int lc_store__rollup_open(lc_store_t *s) LC_MUST_CHECK;
void lc_store__rollup_close(lc_store_t *s);
/* Builds the rollups of windows that are due (from lc_store_summarize). */
int lc_store__rollup_pass(lc_store_t *s, int64_t now_ns, size_t *built) LC_MUST_CHECK;
int64_t lc_store__rollup_window(int level, int64_t t_ns); /* level 0: 6 h, 1: a day */
/* Deletes the rollups of the windows holding the block that starts at
 * start_ns, before a compaction swaps a rewrite of it in: a rewrite's LMDB
 * transaction ids start again as a fresh file's do, so a rollup summed from
 * an earlier rewrite could match them and answer without what came since. */
int lc_store__rollup_forget_block(lc_store_t *s, int64_t start_ns) LC_MUST_CHECK;
/* A rollup's records as a reader decodes them, for the fuzz target
 * (tests/fuzz/fuzz_rollup.c). A window record: header, tree and names
 * (cb for each name, in id order); its tree's arrays are the caller's to
 * free (lc_free) on success. A series record: as lc_rollup_series does; up
 * (lc_store__unpack_init_plain) unpacks its compressed sums. */
typedef void (*lc_rollup_name_cb)(const char *name, size_t len, void *data);
int lc_store__rollup_window_record(const MDB_val *v, lc_rollup_name_cb cb, void *data,
                                   lc_rollup_tree_t *tree) LC_MUST_CHECK;
int lc_store__rollup_series_record(const MDB_val *v, const char *const *tenants, size_t n_tenants,
                                   const lc_selector_t *sel, store_unpack_t *up,
                                   lc_rollup_series_cb cb, void *data) LC_MUST_CHECK;
/* A reader block's transaction and registry entry; a reader's store (store_read.c). */
MDB_txn *lc_store__block_txn(lc_block_t *b);
store_block_t *lc_store__block_ref(lc_block_t *b);
lc_store_t *lc_store__reader_store(lc_store_reader_t *r);
lc_store_t *lc_store__block_store(lc_block_t *b);
/* Whether the reader holds blocks of other stores (no rollups then). */
bool lc_store__reader_added(const lc_store_reader_t *r);
/* A window a reader answers by a rollup file (lc_store_reader_add_rollup):
 * the file's rollup and the read transaction the reader holds on it
 * (aborted in lc_store_read_end, before the reader's on_end functions). */
struct store_rollup_s;
typedef struct store_reader_rollup_s {
    const struct store_rollup_s *ru;
    MDB_txn *txn;
    int level;
    int64_t window;
} store_reader_rollup_t;
void lc_store__reader_rollup_push(lc_store_reader_t *r, const store_reader_rollup_t *rr);
size_t lc_store__reader_rollups(const lc_store_reader_t *r, const store_reader_rollup_t **out);

static inline uint64_t store_pair_hash(uint32_t parent, uint32_t location)
{
    return lc_mix64((uint64_t)parent << 32 | location);
}

/* Starts loading the slot that a node-table lookup with this hash probes first. */
static inline void store_nodetab_prefetch(const store_nodetab_t *t, uint64_t hash)
{
    __builtin_prefetch(&t->slots[hash & t->mask]);
}

/* Starts loading the slot that a stack cache lookup of this key probes first. */
static inline void lc_store__stackcache_prefetch(const store_stackcache_t *c,
                                                 const store_stackkey_t *k)
{
    __builtin_prefetch(&c->slots[k->h1 & c->mask]);
}

static inline uint64_t store_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t store_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Appends a varint to a fixed buffer the caller sized (10 bytes per value). */
static inline uint8_t *store_put_uvarint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Varint decode with a one-byte fast path (most node deltas and small values). */
static inline int store_get_uvarint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    if (*p < end && **p < 0x80) {
        *out = *(*p)++;
        return 0;
    }
    return lc_uvarint_get(p, end, out);
}

static inline MDB_val store_val(const void *p, size_t len)
{
    MDB_val v = {.mv_size = len, .mv_data = (void *)p};
    return v;
}

#endif
