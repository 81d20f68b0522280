/*
 * lc/objstore.h — a small blocking object store: S3-compatible (libcurl with
 * its own SigV4 signing) or a local directory, behind one API (issue 27).
 *
 * Ownership: lc_objstore_open() copies every option; the store owns its CURL
 * handle (reused across requests, so connections are kept alive) and frees it
 * in lc_objstore_close(). Buffers handed out (get, list) belong to the caller
 * and are freed with lc_free / lc_objstore_list_free.
 *
 * Threading: every call blocks (network, disk) and is meant for a worker
 * thread, never the libuv loop. One store is used by one thread at a time;
 * threads that need parallel transfers open one store each.
 *
 * Integrity: every object carries the SHA-256 of its bytes (S3: the user
 * metadata x-amz-meta-ember-sha256; filesystem: a header line), and a whole
 * get verifies it: a missing or wrong digest is LC_ECORRUPT. S3 uploads also
 * send Content-MD5 per request, which the server checks. A ranged get cannot
 * be verified against the whole-object digest and says so in its name.
 *
 * Atomicity: an object is visible whole or not at all. S3: a single PUT, or a
 * multipart upload that is only visible after CompleteMultipartUpload (and is
 * aborted on failure); filesystem: written to a temp file, fsynced, renamed.
 */
#ifndef LC_OBJSTORE_H
#define LC_OBJSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lc/err.h"

/* Keys: 1..LC_OBJSTORE_KEY_MAX bytes of [A-Za-z0-9._-/], no empty, "." or
 * ".." segment, no leading or trailing '/'. */
#define LC_OBJSTORE_KEY_MAX 512

typedef enum {
    LC_OBJSTORE_NONE = 0, /* --storage.backend unset: local-only, no object store */
    LC_OBJSTORE_FILESYSTEM,
    LC_OBJSTORE_S3,
} lc_objstore_backend_t;

typedef struct {
    lc_objstore_backend_t backend;
    const char *prefix; /* prepended to every key with a '/', may be NULL */
    const char *fs_dir; /* filesystem: the root directory (created if absent) */
    /* s3: */
    const char *endpoint; /* host[:port], or a URL with http:// or https:// */
    const char *bucket;
    const char *region; /* default "us-east-1" */
    const char *access_key_id;
    const char *secret_access_key;
    bool insecure;         /* plain http when the endpoint has no scheme */
    bool force_path_style; /* endpoint/bucket/key instead of bucket.endpoint/key */
    /* limits (0 = the default in parentheses): */
    size_t max_object_bytes;    /* put and get (1 GiB) */
    size_t multipart_threshold; /* puts at or above go multipart (16 MiB) */
    size_t part_bytes;          /* multipart part size, >= 5 MiB (8 MiB) */
    size_t max_list_keys;       /* keys one list may return (1,000,000) */
    int list_page_keys;         /* keys per ListObjectsV2 page (1,000; tests use less) */
    int timeout_ms;             /* per request (60,000) */
    int connect_timeout_ms;     /* (5,000) */
    int retries;                /* retries on transport errors and 5xx (4) */
    int backoff_ms;             /* first retry delay, doubled each time (100) */
    /* Called after each multipart part is stored (tests use it to crash
     * mid-upload); may be NULL. */
    void (*on_part)(void *arg, int part_number);
    void *on_part_arg;
} lc_objstore_opts_t;

typedef struct lc_objstore lc_objstore_t;

typedef struct {
    char **keys;     /* without the store's prefix, in the server's (lexical) order */
    uint64_t *sizes; /* sizes[i]: keys[i]'s object size in bytes, as the listing says */
    size_t n;
} lc_objstore_list_t;

/* Parses "filesystem", "s3" or "" (none). */
int lc_objstore_backend_parse(const char *s, lc_objstore_backend_t *out) LC_MUST_CHECK;
/* Checks the options without opening anything; writes a reason to why. */
int lc_objstore_opts_check(const lc_objstore_opts_t *o, char *why, size_t why_len) LC_MUST_CHECK;
bool lc_objstore_key_valid(const char *key);

int lc_objstore_open(const lc_objstore_opts_t *o, lc_objstore_t **out) LC_MUST_CHECK;
void lc_objstore_close(lc_objstore_t *s);

int lc_objstore_put(lc_objstore_t *s, const char *key, const void *data, size_t len) LC_MUST_CHECK;
/* The whole object, checksum verified. *data is the caller's (lc_free). */
int lc_objstore_get(lc_objstore_t *s, const char *key, uint8_t **data, size_t *len) LC_MUST_CHECK;
/* Bytes [off, off+n) (fewer at the end of the object), NOT verified. */
int lc_objstore_get_range_unverified(lc_objstore_t *s, const char *key, uint64_t off, uint64_t n,
                                     uint8_t **data, size_t *len) LC_MUST_CHECK;
/* The object's size; LC_ENOTFOUND if absent. */
int lc_objstore_head(lc_objstore_t *s, const char *key, uint64_t *size) LC_MUST_CHECK;
/* Deleting an absent key succeeds (S3 semantics). */
int lc_objstore_delete(lc_objstore_t *s, const char *key) LC_MUST_CHECK;
/* Every key starting with key_prefix (may be ""), with its size (S3's
 * ListObjectsV2 carries it: no HEAD per key is needed). */
int lc_objstore_list(lc_objstore_t *s, const char *key_prefix,
                     lc_objstore_list_t *out) LC_MUST_CHECK;
void lc_objstore_list_free(lc_objstore_list_t *l);
/* The last error's detail (server message, path), for logs. */
const char *lc_objstore_last_error(const lc_objstore_t *s);

#endif
