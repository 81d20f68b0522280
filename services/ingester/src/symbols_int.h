/*
 * symbols_int.h — the ingester's debug files and server-side symbols
 * (issue 31): symbols.c opens the debug-file store (<data.dir>/debuginfo),
 * the symbolizer (debuginfod downloads in <data.dir>/debuginfod-cache) and
 * hands the symbolizer to the store, so every query reading this store names
 * frames stored without lines; with --storage.backend uploads live in the
 * bucket (debuginfo_bucket.h), which the symbolizer reads through copies; debuginfo_api.c and
 * debuginfo_upload.c serve the upload APIs of Pyroscope and Parca on the node's HTTP server.
 *
 * Ownership: ing_symbols_t owns the store of debug files and the symbolizer;
 * free it after the block store is closed (no query runs any more).
 * Threading: start and free on the loop thread; the handlers on the pool.
 */
#ifndef ING_SYMBOLS_INT_H
#define ING_SYMBOLS_INT_H

#include "debuginfo_bucket.h"
#include "ember_process.h"
#include "lc/debuginfo.h"
#include "lc/grpc.h"
#include "lc/httpd.h"
#include "lc/store.h"
#include "lc/symbolizer.h"

typedef struct ing_symbols_s {
    /* the uploads (<data.dir>/debuginfo), or with a bucket this ingester's
     * copies of the bucket's (<data.dir>/debuginfo-bucket-copies) */
    lc_debuginfo_t *files;
    ing_dbucket_t *bucket; /* --storage.backend: where uploads live; NULL = files */
    lc_symbolizer_t *sym;
    bool multitenancy;
} ing_symbols_t;

int ing_symbols_start(const ember_settings_t *s, lc_httpd_t *srv, lc_store_t *store,
                      ing_symbols_t **out) LC_MUST_CHECK;
void ing_symbols_free(ing_symbols_t *y);

/* What both upload APIs store into and answer from: the bucket when there
 * is one (every ingester sees the same files), else the local store.
 * put validates (lc_debuginfo_put, or _file_hash) and stores; on -1 (st set)
 * nothing is stored. build_id as the client sent it (normalised here). */
int ing_symbols_put(ing_symbols_t *y, const char *tenant, const char *build_id, bool file_hash,
                    const uint8_t *data, size_t len, lc_status_t *st) LC_MUST_CHECK;
bool ing_symbols_has(ing_symbols_t *y, const char *tenant, const char *build_id);
/* Deleting what is not there succeeds; -1 with st unavailable when the
 * bucket fails. */
int ing_symbols_delete(ing_symbols_t *y, const char *tenant, const char *build_id,
                       lc_status_t *st) LC_MUST_CHECK;
int ing_symbols_list(ing_symbols_t *y, const char *tenant, lc_debuginfo_list_fn fn,
                     void *data) LC_MUST_CHECK;

/* debuginfo_api.c: registers both services' routes. */
int ing_debuginfo_routes(ing_symbols_t *y, lc_httpd_t *srv) LC_MUST_CHECK;

/* debuginfo_upload.c: the uploads' bodies. */
#define ING_PARCA_DEBUGINFO "/parca.debuginfo.v1alpha1.DebuginfoService/"
#define ING_PYROSCOPE_DEBUGINFO "/debuginfo.v1alpha1.DebuginfoService/"
/* Parca's Upload: a client stream (an UploadInfo, then chunk_data frames),
 * which httpd hands over whole once the stream ends. */
lc_http_result_t ing_parca_upload_work(lc_http_req_t *req, void *data);
/* What the stream carried: the build id of its UploadInfo (in the arena)
 * and the file, its chunks appended (file.max caps it: init it first). */
typedef struct ing_upload_s {
    const char *build_id;
    bool file_hash; /* the upload id says InitiateUpload named a file hash */
    lc_buf_t file;
} ing_upload_t;
/* The prefix of an upload id whose build id is the uploader's file hash
 * (Parca's BUILD_ID_TYPE_HASH), not a GNU build id. */
#define ING_UPLOAD_ID_FILE_HASH "hash-"
/* The stream's gRPC frames (base64-decoded already for gRPC-Web-text;
 * encoding: grpc-encoding, NULL = identity), in order. Returns 0, or -1
 * with st (invalid_argument, resource_exhausted past file.max). Exported for
 * the fuzz target. */
int ing_parca_upload_decode(lc_grpc_kind_t kind, const uint8_t *body, size_t len,
                            const char *encoding, lc_arena_t *a, ing_upload_t *u,
                            lc_status_t *st) LC_MUST_CHECK;
/* Pyroscope's Upload: POST of the file's bytes to .../Upload/<gnu_build_id>. */
lc_http_result_t ing_pyroscope_upload_work(lc_http_req_t *req, void *data);

#endif
