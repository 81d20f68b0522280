/*
 * http.h — an HTTP client on the libuv loop: libcurl's multi interface driven
 * by uv_poll (one per socket curl asks about) and one uv_timer (curl's
 * timeout), with curl_multi_socket_action. Used for scrapes and for the
 * Kubernetes API (whose watch responses stream).
 *
 * Contract (the libuv rule): scr_http_start returning 0 means `on_done` runs
 * exactly once, later, on the loop, unless scr_http_cancel is called first,
 * in which case it never runs. The request belongs to the caller from
 * on_done onwards and is freed with scr_http_req_free (also inside on_done).
 *
 * Threading: loop thread only.
 */
#ifndef EMBER_SCRAPER_HTTP_H
#define EMBER_SCRAPER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "lc/alloc.h"
#include "lc/err.h"

#define SCR_HTTP_MAX_SECRET_BYTES (64 * 1024) /* password, token and credentials files */

typedef struct scr_http_s scr_http_t;
typedef struct scr_http_req_s scr_http_req_t;

typedef void (*scr_http_done_cb)(scr_http_req_t *req, void *data);
/* Streaming bodies: each chunk as it arrives; false aborts the transfer. */
typedef bool (*scr_http_chunk_cb)(scr_http_req_t *req, const char *p, size_t n, void *data);

typedef struct scr_http_opts_s {
    const char *url;
    const scr_client_t *client; /* auth, TLS, proxy; may be NULL */
    int64_t timeout_ns;         /* whole transfer; 0 = none (watch streams) */
    size_t max_body_bytes;      /* accumulated body cap (not for streams) */
    const char *user_agent;
    const char *const *headers; /* extra "Name: value" lines */
    size_t n_headers;
    /* set: a POST with this body (copied at start), as ember-load's RPCs */
    const void *post_body;
    size_t post_len;
    scr_http_chunk_cb on_chunk; /* set: the body is streamed, not kept */
    scr_http_done_cb on_done;
    void *data;
} scr_http_opts_t;

typedef struct scr_http_result_s {
    const char *error_kind; /* NULL on success; see SCR_HTTP_ERR_* */
    char error[320];
    long status;   /* HTTP status, 0 when none arrived */
    lc_buf_t body; /* the response body (empty for streams) */
    double duration_s;
} scr_http_result_t;

#define SCR_HTTP_ERR_TIMEOUT "timeout"
#define SCR_HTTP_ERR_DNS "dns"
#define SCR_HTTP_ERR_CONNECT "connect"
#define SCR_HTTP_ERR_TLS "tls"
#define SCR_HTTP_ERR_STATUS "http_status"
#define SCR_HTTP_ERR_TOO_LARGE "body_too_large"
#define SCR_HTTP_ERR_AUTH "auth_file"
#define SCR_HTTP_ERR_OTHER "http"

int scr_http_new(uv_loop_t *loop, scr_http_t **out) LC_MUST_CHECK;
/* Cancels what is still running (no callbacks), then frees h once its
 * handles are closed and calls cb (may be NULL). */
void scr_http_close(scr_http_t *h, void (*cb)(void *data), void *data);

int scr_http_start(scr_http_t *h, const scr_http_opts_t *o, scr_http_req_t **out) LC_MUST_CHECK;
/* Stops a running request; its on_done will not run; frees it. */
void scr_http_cancel(scr_http_req_t *r);
const scr_http_result_t *scr_http_result(const scr_http_req_t *r);
/* Moves the body out of the result (the caller frees it with lc_buf_fini). */
void scr_http_take_body(scr_http_req_t *r, lc_buf_t *out);
void scr_http_req_free(scr_http_req_t *r);

/* Reads a secret file (trimmed of surrounding white space), as Prometheus does
 * for password_file, bearer_token_file and credentials_file. Heap string. */
int scr_read_secret(const char *path, char **out) LC_MUST_CHECK;

#endif
