/*
 * lc/store.h — profile storage in time-partitioned LMDB blocks
 * (ARCHITECTURE.md §3; layout in docs/internals/store.md).
 *
 * A block covers [start, start + block_duration) and is one LMDB environment
 * in its own directory under <dir>/blocks/. Inside a block:
 *  - symbols are stored once: strings, functions, mappings, locations;
 *  - stacks are nodes of one parent-pointer tree: node = (parent, location).
 *    Node 0 is the virtual root (no location); every other node's id is
 *    greater than its parent's, and ids are dense (0..node_count-1);
 *  - a series is (tenant, label set); its labels include __name__,
 *    __profile_type__, service_name, ... (the writer computes them);
 *  - postings map name=value to series ids for selectors;
 *  - a stored profile is (series id, time) -> total + sorted (node id, value)
 *    pairs, delta-varint encoded, optionally with per-sample span ids and
 *    the profile's own id (Pyroscope's per-profile UUID, 16 bytes).
 * Retention drops whole block directories.
 *
 * Threading: one writer thread at a time (lc_store_write_*). Readers may run
 * on any number of threads at once (LMDB MDB_NOTLS read transactions); a
 * reader never blocks the writer. A reader must be ended before the thread
 * that began it returns to its event loop (transactions never span loop
 * iterations). All pointers a reader hands out are valid until
 * lc_store_read_end() unless noted.
 */
#ifndef LC_STORE_H
#define LC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"
#include "lc/frame_name.h"
#include "lc/labels.h"
#include "lc/pprof.h"
#include "lc/symbolizer.h"

typedef struct lc_store_s lc_store_t;

#define LC_STORE_PROFILE_ID_BYTES 16 /* a stored profile's own id: a UUID's bytes */

typedef struct lc_store_opts_s {
    const char *dir;           /* data directory; created if missing */
    int64_t block_duration_ns; /* default 1 h */
    int64_t retention_ns;      /* 0 = keep forever */
    size_t map_size_bytes;     /* LMDB map size per block (sparse), default 16 GiB */
    size_t max_open_blocks;    /* environments kept open (LRU); 0: a quarter of the
                                * open-file limit at 3 fds each, 64..1024 */
    bool compacts;             /* the owner calls lc_store_compact: rollups wait for it
                                * (a compaction makes a window be summed again) */
    bool read_only;            /* blocks copied from elsewhere, only read: no rollups */
} lc_store_opts_t;

int lc_store_open(const lc_store_opts_t *opts, lc_store_t **out) LC_MUST_CHECK;
void lc_store_close(lc_store_t *s);
/* Drops every block that ends before now_ns - retention. Safe while readers
 * run: a block in use is removed when its last reader ends. */
int lc_store_retention(lc_store_t *s, int64_t now_ns, size_t *dropped) LC_MUST_CHECK;

/* Drops the block of partition start_ns if it was written exactly write_gen
 * times (lc_store_block_states) and no write batch is open: the caller has
 * confirmed that content is kept elsewhere (the object store). -EBUSY when it
 * changed or a batch is open (try later), LC_ENOTFOUND when there is none.
 * Safe while readers run, as lc_store_retention. */
int lc_store_drop_block(lc_store_t *s, int64_t start_ns, uint64_t write_gen) LC_MUST_CHECK;

/* ---------------------------------------------------------------- writing */
typedef struct lc_store_txn_s lc_store_txn_t;

typedef struct lc_store_write_s {
    const char *tenant;
    const lc_labels_t *labels; /* complete series labels, sorted, no duplicates */
    int64_t time_ns;
    const lc_pprof_t *profile;     /* validated */
    const lc_pprof_index_t *index; /* lc_pprof_index_new(profile) */
    size_t value_index;            /* which sample type's values to store */
    const uint32_t *samples;       /* indices into profile->sample; NULL = all */
    size_t n_samples;
    const int64_t *values;     /* optional override, parallel to samples (server-side delta) */
    const uint64_t *span_ids;  /* optional, parallel to samples; 0 = none */
    const uint8_t *profile_id; /* optional: LC_STORE_PROFILE_ID_BYTES (a UUID) */
} lc_store_write_t;

/* A message's samples are indexed by uint32 (the writer's split). */
#define LC_STORE_MAX_SAMPLES ((size_t)UINT32_MAX - 1)

/* Everything writing one message (its tenant, time and decoded profile, split
 * into series by the writer) can refuse, checked without writing: the
 * receivers call it before they acknowledge a profile, the writer when it
 * decodes one, so the two never disagree (docs/internals/ingest.md lists the
 * checks). Among them: the tenant's length and the time's range, sample
 * types, unknown locations, mappings and functions, string references and
 * lengths, and values whose sum could overflow int64 per sample across
 * types, per series or per profile. On success *ix (optional) is the
 * profile's index, in arena. Errors: invalid_argument naming the reason;
 * resource_exhausted past the arena's cap. Pure; any thread. */
int lc_store_check_profile(const lc_pprof_t *p, const char *tenant, int64_t time_ns,
                           lc_arena_t *arena, lc_pprof_index_t **ix, lc_status_t *st) LC_MUST_CHECK;
/* lc_store_check_profile for a profile lc_pprof_validate accepted, which
 * checked every sample's locations already: they are not walked again (a
 * walk of every frame of the profile, ~3% of ingest's CPU). */
int lc_store_check_validated(const lc_pprof_t *p, const char *tenant, int64_t time_ns,
                             lc_arena_t *arena, lc_pprof_index_t **ix,
                             lc_status_t *st) LC_MUST_CHECK;

/* Starts a write batch. Each touched block gets one LMDB write transaction;
 * commit commits them all (a profile touches exactly one block, so each
 * profile is atomic). */
int lc_store_write_begin(lc_store_t *s, lc_store_txn_t **out) LC_MUST_CHECK;
/* Samples with value 0 are skipped; a profile whose samples are all 0 is still
 * stored (total 0) so the series exists. */
int lc_store_write_profile(lc_store_txn_t *t, const lc_store_write_t *w) LC_MUST_CHECK;
/* Records an applied ingest id in the block of time_ns (same transaction),
 * together with the keys of the profiles written since the previous call in
 * this batch (one message's profiles: they must all be in that block, else
 * LC_EINPUT), so that lc_store_write_forget can remove exactly them later.
 * delivery (optional, NULL or "" = none; at most 400 bytes) is the transport's
 * id of the message (lc_transport_msg_t.delivery), recorded -> id in the same
 * block so the message can be found by it. */
int lc_store_write_applied(lc_store_txn_t *t, int64_t time_ns, const uint8_t *id, size_t len,
                           const char *delivery) LC_MUST_CHECK;
/* True if the id was recorded in the block of time_ns (committed or in t) and
 * not forgotten since. */
int lc_store_write_is_applied(lc_store_txn_t *t, int64_t time_ns, const uint8_t *id, size_t len,
                              bool *applied) LC_MUST_CHECK;
/* Forgets messages applied under the given delivery ids: deletes the profiles
 * recorded with each (meta counts follow) and marks its ingest id forgotten,
 * so is_applied answers false and the message is applied again if this
 * writer is ever handed it again (it then owns it: docs/internals/redis.md).
 * Unknown or already forgotten deliveries are skipped; *forgotten counts the
 * others. The block of a delivery is not known, so every block is searched:
 * a rare path (a consumer lost entries it had applied). Call it in a batch of
 * its own or between messages, never between a message's profiles and its
 * lc_store_write_applied. */
int lc_store_write_forget(lc_store_txn_t *t, const char *const *deliveries, size_t n,
                          size_t *forgotten) LC_MUST_CHECK;
int lc_store_write_commit(lc_store_txn_t *t) LC_MUST_CHECK;
void lc_store_write_abort(lc_store_txn_t *t);
/* Optional speed-up for one pprof written as several series (sample types,
 * label groups): while p is pinned, writes of p resolve each symbol and stack
 * once and reuse them. p and ix must stay alive and unchanged until
 * lc_store_write_unpin(), which must come before commit/abort. */
void lc_store_write_pin(lc_store_txn_t *t, const lc_pprof_t *p, const lc_pprof_index_t *ix);
void lc_store_write_unpin(lc_store_txn_t *t);

/* ---------------------------------------------------------------- reading */
typedef struct lc_store_reader_s lc_store_reader_t;
typedef struct lc_block_s lc_block_t;

/* Opens read transactions on every block overlapping [start_ns, end_ns]. */
int lc_store_read_begin(lc_store_t *s, int64_t start_ns, int64_t end_ns,
                        lc_store_reader_t **out) LC_MUST_CHECK;
void lc_store_read_end(lc_store_reader_t *r);
size_t lc_store_reader_count(const lc_store_reader_t *r);
/* Frees what the block decoded so far (the location cache): a caller done
 * with a block calls it so that a reader over many blocks holds one block's
 * decoded symbols at a time. Pointers from lc_block_location become invalid;
 * the block stays readable (it decodes again on demand). */
void lc_block_drop_cache(lc_block_t *b);
lc_block_t *lc_store_reader_block(lc_store_reader_t *r, size_t i);
/* Server-side symbols (issue 31): the store's symbolizer (not owned; NULL =
 * none) names the frames stored without lines for readers that ask with
 * lc_store_reader_symbolize: a query's, with its tenants, whose uploaded debug
 * files it may use. Readers that do not ask (rollups, built for every tenant
 * in the background) keep module+0xoffset. Set before queries run. */
void lc_store_set_symbolizer(lc_store_t *s, lc_symbolizer_t *sym);
/* tenants must outlive the reader. */
void lc_store_reader_symbolize(lc_store_reader_t *r, const char *const *tenants, size_t n_tenants);

/* ---- blocks of other stores in one reader (issue 27: blocks read back from
 * the object store, each kept in a read-only store of its own) ---- */
/* Adds the blocks of `other` overlapping [start_ns, end_ns] to r, in block
 * start order among r's (start times may repeat: other ingesters' or older
 * copies' blocks). `other` must stay open until r ends (lc_store_reader_on_end).
 * A reader with added blocks uses no rollups. */
int lc_store_reader_add(lc_store_reader_t *r, lc_store_t *other, int64_t start_ns,
                        int64_t end_ns) LC_MUST_CHECK;
/* fn(arg) runs in lc_store_read_end, after every block was released. */
void lc_store_reader_on_end(lc_store_reader_t *r, void (*fn)(void *arg), void *arg);
/* What a query reads of its reader: its blocks (any query), or only what
 * lc_store_rollups_begin gives plus the blocks no rollup covers (a flame
 * graph or series collection that takes rollups): then a source may answer whole
 * windows by rollup files instead of blocks (lc_store_reader_add_rollup). */
typedef enum { LC_READ_BLOCKS = 0, LC_READ_ROLLUPS_SUFFICE = 1 } lc_read_need_t;
/* What one query reads besides its range. from_ns (issue 27): the partitions
 * that start before it are read elsewhere (a querier reads them from the
 * bucket, below the mark this store's floor published): none of their blocks,
 * local or read back, is in the reader; INT64_MIN = none is. */
typedef struct lc_read_scope_s {
    lc_read_need_t need;
    int64_t from_ns;
    const char *bucket; /* for the source alone: which other ingesters' objects
                           below which marks (the querier's own shard: the
                           x-ember-bucket header, lc/members.h); NULL = none */
} lc_read_scope_t;
/* A source of more blocks for lc_store_read_begin_all: begins the reader of
 * s (lc_store_read_begin, at the moment that suits it) and adds its blocks;
 * its range already leaves out what the scope's from_ns does. */
typedef int (*lc_store_source_fn)(void *ctx, lc_store_t *s, int64_t start_ns, int64_t end_ns,
                                  const lc_read_scope_t *scope, lc_store_reader_t **out);
/* Set once, before any reader (the ingester's bucket reader, bucket_read.c). */
void lc_store_set_source(lc_store_t *s, lc_store_source_fn fn, void *ctx);
/* The source's reader, or lc_store_read_begin without one: what queries read. */
int lc_store_read_begin_all(lc_store_t *s, int64_t start_ns, int64_t end_ns,
                            const lc_read_scope_t *scope, lc_store_reader_t **out) LC_MUST_CHECK;

/* ---- the floor (issue 27): below it, queriers read the bucket ----
 * An ingester that uploads its blocks publishes a mark: the partition start
 * below which a querier reads this ingester's blocks from the bucket instead
 * of asking it (lc_read_scope_t.from_ns, the querier's half). The store keeps
 * its floor true: no block below it is local, so every profile it stored
 * there is in the bucket already. A write into a partition below the floor
 * first calls publish(ctx, partition start, lower = true): the mark becomes
 * the lower of the two, and must be known before publish returns 0 (else the
 * write fails with its error and stores nothing). lc_store_floor_update sets
 * the floor to the oldest local block's start, at most limit_ns (aligned
 * down to a partition), publishing it (lower = false: the mark becomes it)
 * when it changed (a raise counts as made before publish: should it fail
 * yet land, writes below it still publish first). Both hold the floor's lock
 * across publish and the registry, so an update never misses a block a write
 * is creating. Threading: any thread (set it before the writer's first write
 * that must see it); publish runs on the writer's thread or the updater's,
 * one at a time, and must not wait for the thread that calls set. */
typedef int (*lc_store_floor_fn)(void *ctx, int64_t floor_ns, bool lower);
void lc_store_set_floor(lc_store_t *s, lc_store_floor_fn publish, void *ctx);
int lc_store_floor_update(lc_store_t *s, int64_t limit_ns) LC_MUST_CHECK;
/* The floor last published; INT64_MAX before the first. */
int64_t lc_store_floor(lc_store_t *s);

typedef struct lc_block_info_s {
    int64_t start_ns, end_ns;         /* the block's time partition */
    int64_t min_time_ns, max_time_ns; /* of stored profiles */
    uint64_t series, profiles, samples, nodes, locations, functions, strings;
    uint64_t bytes; /* LMDB file size */
} lc_block_info_t;
int lc_block_info(lc_block_t *b, lc_block_info_t *out) LC_MUST_CHECK;

/* Series of the given tenants whose labels match sel (NULL = all). Uses the
 * postings for equality matchers. labels is valid during the callback only.
 * A callback returning non-zero stops the walk and is returned. */
typedef int (*lc_block_series_cb)(lc_block_t *b, uint32_t series_id, const char *tenant,
                                  const lc_labels_t *labels, void *data);
int lc_block_series(lc_block_t *b, const char *const *tenants, size_t n_tenants,
                    const lc_selector_t *sel, lc_block_series_cb cb, void *data) LC_MUST_CHECK;

typedef struct lc_stored_profile_s {
    uint32_t series_id;
    int64_t time_ns;
    int64_t total; /* sum of values: SelectSeries needs nothing else */
    uint32_t n_samples;
    bool has_profile_id; /* the writer was given a profile id */
    uint8_t profile_id[LC_STORE_PROFILE_ID_BYTES];
    const uint8_t *_data; /* encoded samples; valid during the callback */
    size_t _len;
    void *_unpack; /* the block's unpacker for compacted samples (store_compact.c) */
} lc_stored_profile_t;

/* Profiles of one series with start_ns <= time <= end_ns, in time order. */
typedef int (*lc_block_profile_cb)(lc_block_t *b, const lc_stored_profile_t *p, void *data);
int lc_block_profiles(lc_block_t *b, uint32_t series_id, int64_t start_ns, int64_t end_ns,
                      lc_block_profile_cb cb, void *data) LC_MUST_CHECK;

/* ---- summaries: a series' samples summed over a whole block ----
 * A closed block gets, per series, one pre-summed "profile": every node's
 * values summed over all the series' profiles in the block (span ids and
 * profile ids are not kept). A summary is exact for the snapshot it is read
 * in: adding or deleting a profile drops its series' summary in the same
 * transaction; lc_store_summarize builds the missing ones later. */

/* True when [start_ns, end_ns] holds every profile of the block (then a
 * summary answers for the whole series). */
bool lc_block_covers(lc_block_t *b, int64_t start_ns, int64_t end_ns);
/* The series' summary as a stored profile (walk it with lc_sample_iter_*;
 * time_ns is the block's first profile time, has_profile_id false), or
 * LC_ENOTFOUND when there is none: read its profiles then. */
int lc_block_summary(lc_block_t *b, uint32_t series_id, lc_stored_profile_t *out) LC_MUST_CHECK;

typedef struct lc_store_summarize_stats_s {
    size_t blocks_done;    /* blocks whose summaries were (re)built */
    size_t series_done;    /* series summaries written */
    size_t blocks_pending; /* closed blocks still without complete summaries */
    size_t rollups_done;   /* 6-hour rollups (re)built (store_rollup.c) */
} lc_store_summarize_stats_t;
/* Builds the missing summaries of every block that ended at or before now_ns
 * and had no write for quiet_ns (monotonic clock), one LMDB write transaction
 * per block (a crash leaves the block as it was). Call it from one thread at
 * a time; it runs beside the writer and readers. */
int lc_store_summarize(lc_store_t *s, int64_t now_ns, int64_t quiet_ns,
                       lc_store_summarize_stats_t *stats) LC_MUST_CHECK;

/* ---- rollups (store_rollup.c): 6-hour windows summed with names resolved.
 * lc_store_summarize also builds them (windows that ended and whose blocks
 * are all summarised). A reader's window is answered by its rollup when the
 * range holds every profile of the window's blocks and the rollup summed
 * exactly the reader's snapshots of them; the merge then skips those blocks.
 * Rollups keep no span ids, profile ids, per-profile times or locations:
 * merges narrowed by those (or by a call site) read the blocks. */
typedef struct lc_rollups_s lc_rollups_t;
/* Finds the usable rollups of the reader for a merge over [start_ns, end_ns];
 * none when the store keeps none. End it before the reader. */
int lc_store_rollups_begin(lc_store_reader_t *r, int64_t start_ns, int64_t end_ns,
                           lc_rollups_t **out) LC_MUST_CHECK;
void lc_store_rollups_end(lc_rollups_t *rs);
size_t lc_rollups_count(const lc_rollups_t *rs);
/* Whether reader block i is answered by one of the rollups (skip it). */
bool lc_rollups_cover_block(const lc_rollups_t *rs, size_t i);
/* Rollup i's stack tree: node 0 is the root; parents[n] < n; names[n] is a
 * name id in 1..n_names (lc_rollup_name). Valid until lc_store_rollups_end. */
typedef struct lc_rollup_tree_s {
    const uint32_t *parents, *names;
    uint32_t n_nodes, n_names;
} lc_rollup_tree_t;
int lc_rollup_tree(lc_rollups_t *rs, size_t i, lc_rollup_tree_t *out) LC_MUST_CHECK;
/* A name's bytes (not NUL-terminated); after lc_rollup_tree of the same i. */
int lc_rollup_name(lc_rollups_t *rs, size_t i, uint32_t name, const char **s,
                   size_t *len) LC_MUST_CHECK;
/* One series of a rollup: its values summed over the window by tree node
 * (walk sums with lc_sample_iter_*; node ids are tree nodes, values are never
 * 0 or negative), and every profile's (time, total) in time order
 * (lc_rollup_points_*). */
typedef struct lc_rollup_series_s {
    const char *tenant;
    const lc_labels_t *labels;
    lc_stored_profile_t sums;
    uint64_t n_points;
    const uint8_t *_pts;
    size_t _pts_len;
} lc_rollup_series_t;
typedef struct lc_rollup_points_s {
    const uint8_t *p, *end;
    int64_t time_ns;
} lc_rollup_points_t;
void lc_rollup_points_init(lc_rollup_points_t *it, const lc_rollup_series_t *se);
/* 1 and the next point, 0 at the end, LC_ECORRUPT on bad data. */
int lc_rollup_points_next(lc_rollup_points_t *it, int64_t *time_ns, int64_t *total);
/* Calls cb for each series of rollup i of one of the tenants matching sel. */
typedef int (*lc_rollup_series_cb)(const lc_rollup_series_t *se, void *data);
int lc_rollup_series(lc_rollups_t *rs, size_t i, const char *const *tenants, size_t n_tenants,
                     const lc_selector_t *sel, lc_rollup_series_cb cb, void *data) LC_MUST_CHECK;
/* ---- a rollup as a file of its own (issue 27: rollups kept beside the
 * blocks they sum in the object store) ---- */
#define LC_ROLLUP_LEVEL_6H 0
#define LC_ROLLUP_LEVEL_DAY 1
/* Writes the rollup of one window (level LC_ROLLUP_LEVEL_*, window_ns its
 * UTC-aligned start) to fd as a compacted LMDB file laid out as
 * <dir>/rollups (databases "windows" and "series", the window's records byte
 * for byte), when that rollup is usable and summed exactly r's snapshots of
 * the window's blocks: what the file holds is then what those snapshots
 * hold. LC_EUNSUPPORTED when the rollup of those snapshots is kept unusable
 * (negative sums, too large: so until a block changes); LC_ENOTFOUND when
 * none summed them (not built yet, or a block changed since); LC_EINPUT for
 * a level or start that is not a window. scratch_dir: an
 * existing directory of the caller's for the temporary environment (emptied
 * again). */
int lc_store_rollup_export(lc_store_reader_t *r, int level, int64_t window_ns,
                           const char *scratch_dir, int fd) LC_MUST_CHECK;
/* An exported rollup opened read-only (the file lc_store_rollup_export
 * wrote, fetched back from the object store): a reader may answer one of
 * its windows by it instead of blocks it does not hold. Safe to read from
 * any number of threads; close it after every reader that added it ended. */
typedef struct lc_rollup_file_s lc_rollup_file_t;
int lc_rollup_file_open(const char *path, lc_rollup_file_t **out) LC_MUST_CHECK;
void lc_rollup_file_close(lc_rollup_file_t *f); /* NULL-safe */
/* Adds the window (level, window_ns) of f to r: every merge of r through
 * lc_store_rollups_begin includes it, whatever its range. So it is for a
 * reader that only such merges read (LC_READ_ROLLUPS_SUFFICE) and whose
 * range holds every profile the rollup summed; r holds none of the blocks
 * it summed. LC_ENOTFOUND when f has no such window, LC_EUNSUPPORTED when
 * its sums cannot answer (a negative sum; frames a symbolizer may name):
 * read the blocks then. */
int lc_store_reader_add_rollup(lc_store_reader_t *r, lc_rollup_file_t *f, int level,
                               int64_t window_ns) LC_MUST_CHECK;
/* ---- compaction: closed blocks rewritten smaller (store_compact.c) ---- */
typedef struct lc_store_compact_stats_s {
    size_t blocks_done;                 /* rewritten and swapped in */
    size_t blocks_waiting;              /* rewritten, but in use: swapped in by a later call */
    uint64_t bytes_before, bytes_after; /* data files of the blocks done */
    size_t blocks_pending; /* closed blocks not known compact: to summarise, rewrite or check */
} lc_store_compact_stats_t;
/* Rewrites every block that ended at or before now_ns and whose summaries are
 * complete since its last commit (lc_store_summarize) and that is not compact
 * yet: key order in full LMDB pages, samples zstd-compressed with a per-block
 * dictionary. A kill at any point leaves the old or the new block (recovered
 * at open). Call it from the thread that calls lc_store_summarize, after it. */
int lc_store_compact(lc_store_t *s, int64_t now_ns, lc_store_compact_stats_t *stats) LC_MUST_CHECK;

/* ---- export (store_export.c): closed blocks copied out whole ---- */
/* Every block's partition and write count (write batches committed since the
 * store opened: a block whose count is unchanged holds what it held), no
 * environment opened: for passes over many blocks that only want the ones
 * that changed. *out is the caller's (lc_free), sorted by start_ns. */
typedef struct lc_store_block_state_s {
    int64_t start_ns, end_ns;
    uint64_t write_gen;
} lc_store_block_state_t;
int lc_store_block_states(lc_store_t *s, lc_store_block_state_t **out, size_t *n) LC_MUST_CHECK;
/* Whether reader block i is settled: its latest commit is summarised and
 * compacted (lc_store_compact), so its bytes stay as they are until a late
 * write. The uploader to the object store waits for this. */
bool lc_block_settled(lc_store_reader_t *r, size_t i);
/* Writes a consistent copy of the block's LMDB file (one snapshot, taken
 * now: it holds at least what the reader sees) to fd. */
int lc_block_copy(lc_block_t *b, int fd) LC_MUST_CHECK;

/* Walks the samples of a stored profile in ascending node id. */
typedef struct lc_sample_iter_s {
    const uint8_t *p, *end;
    uint32_t node;
    uint32_t flags;
    int64_t scale; /* stored values are multiplied by it */
} lc_sample_iter_t;
void lc_sample_iter_init(lc_sample_iter_t *it, const lc_stored_profile_t *p);
/* Returns 1 and fills the outputs, 0 at the end, LC_ECORRUPT on bad data.
 * span_id may be NULL; it is 0 when the sample had none. */
int lc_sample_iter_next(lc_sample_iter_t *it, uint32_t *node, int64_t *value, uint64_t *span_id);

/* ---- the stack tree and symbols of a block ---- */
uint32_t lc_block_node_count(lc_block_t *b);
/* Fills parents[i] and locations[i] for node ids [0, n); node 0 has parent 0
 * and location 0. Either array may be NULL. */
int lc_block_nodes(lc_block_t *b, uint32_t *parents, uint32_t *locations, size_t n) LC_MUST_CHECK;

typedef struct lc_store_line_s {
    uint32_t function_id;
    int64_t line;
} lc_store_line_t;

typedef struct lc_store_location_s {
    uint32_t mapping_id; /* 0 = none */
    uint64_t address;
    size_t n_lines;
    const lc_store_line_t *lines; /* lines[0] innermost, as in pprof */
} lc_store_location_t;

typedef struct lc_store_function_s {
    uint32_t name, system_name, filename; /* string ids */
    int64_t start_line;
} lc_store_function_t;

typedef struct lc_store_mapping_s {
    uint64_t memory_start, memory_limit, file_offset;
    uint32_t filename, build_id; /* string ids */
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} lc_store_mapping_t;

int lc_block_location(lc_block_t *b, uint32_t id, lc_store_location_t *out) LC_MUST_CHECK;
int lc_block_function(lc_block_t *b, uint32_t id, lc_store_function_t *out) LC_MUST_CHECK;
int lc_block_mapping(lc_block_t *b, uint32_t id, lc_store_mapping_t *out) LC_MUST_CHECK;
/* String id 0 is "". *s is not NUL-terminated; use len. */
int lc_block_string(lc_block_t *b, uint32_t id, const char **s, size_t *len) LC_MUST_CHECK;

/* A location's frames, root side first: one per line (lines[n_lines-1]
 * first, each its function's name), or, for a location without lines (not
 * symbolized), the frames the reader's symbolizer finds for its mapping's
 * build id and offset (lc_store_reader_symbolize, lc/symbolizer.h), else the
 * one name lc_frame_address_name gives ("libc.so.6+0x1f2e0",
 * lc/frame_name.h). Every query path names frames through this, so block
 * folds, rollups and call sites agree. */
size_t lc_block_frame_count(lc_block_t *b, const lc_store_location_t *l);
/* Frame j (< lc_block_frame_count) of l: *s points into the block or into
 * scratch, valid until the block's cache is dropped or scratch reused. */
int lc_block_frame_name(lc_block_t *b, const lc_store_location_t *l, size_t j,
                        char scratch[LC_FRAME_NAME_MAX], const char **s, size_t *len) LC_MUST_CHECK;
/* The frames the reader's symbolizer finds for a location without lines
 * (innermost first, as pprof lines: function, file, line), for paths that
 * keep more than names (the merged pprof, Parca's tree). out->n == 0: the
 * location has lines, or nothing names it (yet); it shows as
 * lc_block_frame_name's module+0xoffset. Valid until the block's cache is
 * dropped. */
int lc_block_symbols(lc_block_t *b, const lc_store_location_t *l, lc_symbols_t *out) LC_MUST_CHECK;
/* Whether a location is one lc_block_symbols could name: no lines, a
 * mapping with a build id. Such frames must not be named ahead of a query
 * (rollups), where a debug file that arrives later could not name them. */
bool lc_block_location_symbolizable(lc_block_t *b, const lc_store_location_t *l);
/* Whether the reader names frames (lc_store_reader_symbolize with a symbolizer). */
bool lc_store_reader_symbolizes(const lc_store_reader_t *r);

#endif
