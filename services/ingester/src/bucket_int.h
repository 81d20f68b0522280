/*
 * bucket_int.h — what the uploader (bucket.c) and the restore
 * (bucket_restore.c) share, in bucket_util.c: the bucket's key names, the
 * local record of what was uploaded, whole-file reads and writes.
 */
#ifndef EMBER_ING_BUCKET_INT_H
#define EMBER_ING_BUCKET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bucket.h"
#include "lc/metrics.h"
#include "lc/objstore.h"
#include "lc/store.h"

#define BKT_NAME_MAX 64    /* "<start>-<life>" */
#define BKT_VERSION_MAX 96 /* what a block held when uploaded */
#define BKT_ING_MAX 96     /* the ingester id as a key segment */
#define BKT_FORMAT "ember-lmdb-block/1"
#define BKT_META_MAX_BYTES 4096 /* an index entry (a few hundred bytes) */
#define BKT_RECORD_MAX_BYTES 512

/* The ingester id as one key segment: [A-Za-z0-9._-] kept, anything else
 * '_', then '-' and 8 hex digits of the id's hash (two ids that differ only
 * in replaced characters stay apart). */
void bkt_ingester_key(const char *id, char out[BKT_ING_MAX]);
/* The store's directory name of a block starting at start_ns. */
void bkt_start_name(int64_t start_ns, char out[32]);
/* "index/<ing>/<name>.json" and "blocks/<ing>/<name>/block.mdb". */
void bkt_index_key(const char *ing, const char *name, char *out, size_t size);
void bkt_data_key(const char *ing, const char *name, char *out, size_t size);

/* The block start and the name "<start>-<life>[-<x>]" of an index key
 * ".../<name>.json"; false when it is not one (a listing is outside input). */
bool bkt_index_key_parse(const char *key, int64_t *start_ns, char name[BKT_NAME_MAX]);

/* <data_dir>/uploads (made if missing) and the data dir's life id (made
 * once: 16 hex digits). */
int bkt_uploads_dir(const char *data_dir, char *out, size_t size) LC_MUST_CHECK;
int bkt_life(const char *uploads, char out[17]) LC_MUST_CHECK;
/* The record of block <start>'s last upload; LC_ENOTFOUND if none. */
int bkt_record_read(const char *uploads, const char *start, char name[BKT_NAME_MAX],
                    char version[BKT_VERSION_MAX]) LC_MUST_CHECK;
int bkt_record_write(const char *uploads, const char *start, const char *name,
                     const char *version) LC_MUST_CHECK;

/* The fields of an index entry (meta object) that the restore needs. */
typedef struct bkt_meta_s {
    char start[32];
    char data[LC_OBJSTORE_KEY_MAX + 1];
    char version[BKT_VERSION_MAX];
    int64_t end_ns;
} bkt_meta_t;
/* Parses an index entry (JSON, at most BKT_META_MAX_BYTES): LC_ECORRUPT unless it is
 * our format with a block name of digits, a valid data key and a version. */
int bkt_meta_parse(const uint8_t *text, size_t len, bkt_meta_t *m) LC_MUST_CHECK;
/* Parses an upload record "<name> <version>\n" (NUL-terminated text). */
int bkt_record_parse(const char *text, char name[BKT_NAME_MAX],
                     char version[BKT_VERSION_MAX]) LC_MUST_CHECK;

/* What a block holds, as the version its upload record and meta name. */
void bkt_version_of(const lc_block_info_t *in, char out[BKT_VERSION_MAX]);

/* ---- --storage.local-retention (bucket_local.c) ---- */
#define BKT_GEN_NONE UINT64_MAX /* a verified entry whose block was dropped */
/* Whether the block starting at start_ns may leave now (besides being old
 * and confirmed in the bucket): the uploader's rollups say (bkt_rollups_settled). */
typedef bool (*bkt_may_drop_fn)(void *ctx, const lc_store_block_state_t *verified, size_t n,
                                int64_t start_ns, int64_t now_ns);
typedef struct bkt_local_s {
    lc_store_t *store;
    lc_objstore_t *os;
    const char *ing, *uploads;
    int64_t retention_ns;     /* 0: blocks stay local for --retention */
    bkt_may_drop_fn may_drop; /* NULL: no other condition */
    void *may_drop_ctx;
} bkt_local_t;
/* Drops the verified blocks that ended before now - retention once the
 * bucket is confirmed to hold their current content and may_drop agrees
 * (the uploader: once their window's rollup was looked at, as a window with
 * a block dropped gets no rollup); their entries get write_gen
 * BKT_GEN_NONE. Returns how many were dropped. */
size_t bkt_local_retention_pass(const bkt_local_t *l, lc_store_block_state_t *verified, size_t n,
                                int64_t now_ns);
/* At start: markers of drops that did not happen are removed. */
void bkt_local_markers_check(const bkt_local_t *l);
/* The gone list of partition <start>: names of its objects whose content is
 * no longer local, "<name>\n" each (lc_free); NULL when none. */
#define BKT_GONE_MAX_BYTES 65536
char *bkt_gone_read(const char *uploads, const char *start);
bool bkt_gone_lists(const char *gone, const char *name); /* gone may be NULL */
/* The name a block without an upload record goes up under: <start>-<life>,
 * or with a unique suffix when the partition was dropped before. */
void bkt_upload_name(const char *start, const char *life, bool gone, char name[BKT_NAME_MAX]);

/* ---- the windows' rollups beside the blocks (bucket_rollup.c; read back
 * by bucket_read.c) ---- */
#define BKT_ROLLUP_FORMAT "ember-lmdb-rollup/1"
#define BKT_ROLLUP_LEVELS 2        /* LC_ROLLUP_LEVEL_6H, LC_ROLLUP_LEVEL_DAY */
#define BKT_ROLLUP_MAX_OBJECTS 256 /* blocks of a window (the store's bound too) */
#define BKT_ROLLUP_ENTRY_MAX_BYTES (BKT_ROLLUP_MAX_OBJECTS * 256 + 4096)
/* A window's length at a level (0 for no level). */
int64_t bkt_rollup_level_ns(int level);
typedef struct bkt_rollup_object_s {
    char name[BKT_NAME_MAX];
    char version[BKT_VERSION_MAX];
} bkt_rollup_object_t;
/* A rollup's index entry: the window, its data object and the block
 * objects, with their versions, that the rollup sums. */
typedef struct bkt_rollup_entry_s {
    int level;
    bool guarded; /* written under bkt_rollups_unguard's rule: names suffice */
    int64_t start_ns;
    char data[LC_OBJSTORE_KEY_MAX + 1];
    char data_name[BKT_NAME_MAX]; /* the data key's "<window>-<level>-<life>-<sig>" */
    size_t n;
    bkt_rollup_object_t objs[BKT_ROLLUP_MAX_OBJECTS];
} bkt_rollup_entry_t;
/* Parses an entry (JSON, at most BKT_ROLLUP_ENTRY_MAX_BYTES): LC_ECORRUPT
 * unless it is our format with a level, a window start of that level, a
 * data key "rollups/<ing>/<name>/rollup.mdb" and 1..max objects that fit. */
int bkt_rollup_entry_parse(const uint8_t *text, size_t len, bkt_rollup_entry_t *e) LC_MUST_CHECK;
/* The window and level of a rollup index key ".../<secs>-<level>-<life>.json". */
bool bkt_rollup_index_key_parse(const char *key, int64_t *window_ns, int *level);

typedef struct bkt_rollup_done_s {
    int level;
    int64_t start_ns;
    uint64_t sig; /* of its blocks' write counts when last done */
} bkt_rollup_done_t;
typedef struct bkt_rollups_s {
    lc_store_t *store;
    lc_objstore_t *os;
    const char *ing, *uploads, *life, *id, *zone;
    int64_t block_ns;
    lc_metric_t *uploaded;
    bkt_rollup_done_t *done; /* windows looked at, by the write counts seen */
    size_t n_done, cap_done;
} bkt_rollups_t;
/* Uploads the rollup of every ended window whose blocks (verified: in the
 * bucket at their current content) changed since it was last looked at and
 * whose local rollup sums exactly those objects. 0, or an error when an
 * upload failed (the next pass tries again). */
int bkt_rollups_pass(bkt_rollups_t *ru, const lc_store_block_state_t *verified, size_t n,
                     int64_t now_ns) LC_MUST_CHECK;
void bkt_rollups_fini(bkt_rollups_t *ru);
/* Whether a block starting at start_ns may leave the data dir as far as
 * rollups go: its 6-hour window has not ended (it gets no rollup: blocks
 * answer it), or the last pass looked at the window as verified is now
 * (uploaded, or no rollup to keep), or the window ended over 6 hours ago
 * (a rollup that never came, say too large, keeps no block forever). */
bool bkt_rollups_settled(const bkt_rollups_t *ru, const lc_store_block_state_t *verified, size_t n,
                         int64_t start_ns, int64_t now_ns);
/* Before the object of the partition at start_ns goes up again under its
 * name: deletes the entries of the ended windows that hold it (they may
 * name it); 0, or the failure (the upload waits for the next pass). */
int bkt_rollups_unguard(const bkt_rollups_t *ru, int64_t start_ns, int64_t now_ns) LC_MUST_CHECK;
/* Deletes the rollup entries (first) and objects of windows that ended
 * before oldest_ns; 0 or the first failure. */
int bkt_rollups_expire(const bkt_rollups_t *ru, int64_t oldest_ns) LC_MUST_CHECK;

/* A whole file into memory (lc_free), at most max bytes. */
int bkt_file_read(const char *path, size_t max, uint8_t **data, size_t *len) LC_MUST_CHECK;
/* Writes data to path durably: a temp file beside it, fsync, rename, the
 * directory synced. */
int bkt_file_write(const char *path, const void *data, size_t len) LC_MUST_CHECK;
/* Writes data to path, not durably: for the read-back cache, emptied at
 * every start, where the two fsyncs of bkt_file_write were most of a cold
 * query's time on a busy disk (bench/README.md, "bucket query"). */
int bkt_cache_file_write(const char *path, const void *data, size_t len) LC_MUST_CHECK;

#endif
