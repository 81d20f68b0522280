/*
 * http.c — libcurl multi on libuv (http.h).
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to
 * call back for timeouts (CURLMOPT_TIMERFUNCTION); we answer with a uv_poll
 * per socket and one uv_timer, and on every event call
 * curl_multi_socket_action, then collect finished transfers. curl is never
 * called from inside its own callbacks: the timer callback only arms the uv
 * timer (even for a timeout of 0), and completions are handled after
 * curl_multi_socket_action returns.
 *
 * Client settings follow Prometheus's HTTP client: no proxy unless proxy_url
 * (environment proxies are ignored), no redirects unless follow_redirects,
 * HTTP/1.1 unless enable_http2, secrets re-read from their files on every
 * request so rotated tokens take effect, and tls_config.server_name both as
 * SNI and as the name verified (the URL's host is swapped for it and curl is
 * told where to connect instead).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "http.h"
#include "lc/clock.h"
#include "lc/log.h"

#define MAX_REDIRECTS 10

typedef struct http_sock_s {
    uv_poll_t poll;
    curl_socket_t fd;
    scr_http_t *h;
    struct http_sock_s *next, *prev; /* every socket, for close */
} http_sock_t;

struct scr_http_s {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    http_sock_t *socks;
    scr_http_req_t *reqs; /* running requests */
    int open_handles;     /* timer + closing polls */
    bool closing;
    void (*close_cb)(void *data);
    void *close_data;
};

struct scr_http_req_s {
    scr_http_t *h;
    CURL *easy;
    struct curl_slist *headers;
    struct curl_slist *connect_to;
    char *url;
    char errbuf[CURL_ERROR_SIZE];
    size_t max_body_bytes;
    bool over_cap;
    bool running;
    int64_t start_ns;
    scr_http_chunk_cb on_chunk;
    scr_http_done_cb on_done;
    void *data;
    scr_http_result_t result;
    scr_http_req_t *next, *prev;
};

/* ---------------------------------------------------------------- secrets */

int scr_read_secret(const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    char *buf = lc_xmalloc(SCR_HTTP_MAX_SECRET_BYTES + 1);
    size_t n = fread(buf, 1, SCR_HTTP_MAX_SECRET_BYTES + 1, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err || n > SCR_HTTP_MAX_SECRET_BYTES) {
        lc_free(buf);
        return err ? LC_EINPUT : LC_ETOOBIG;
    }
    size_t start = 0;
    while (start < n && isspace((unsigned char)buf[start]))
        start++;
    while (n > start && isspace((unsigned char)buf[n - 1]))
        n--;
    *out = lc_xstrndup(buf + start, n - start);
    lc_free(buf);
    return 0;
}

/* ---------------------------------------------------------------- sockets and timer */

static void process_completions(scr_http_t *h);

static void sock_on_closed(uv_handle_t *handle)
{
    http_sock_t *s = handle->data;
    scr_http_t *h = s->h;
    lc_free(s);
    if (--h->open_handles == 0 && h->closing) {
        void (*cb)(void *) = h->close_cb;
        void *data = h->close_data;
        lc_free(h);
        if (cb)
            cb(data);
    }
}

static void sock_close(scr_http_t *h, http_sock_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, sock_on_closed);
}

static void sock_on_event(uv_poll_t *poll, int status, int events)
{
    http_sock_t *s = poll->data;
    scr_http_t *h = s->h;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    int running;
    curl_multi_socket_action(h->multi, s->fd, flags, &running);
    process_completions(h);
}

static int curl_on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    scr_http_t *h = userp;
    http_sock_t *s = socketp;
    LC_UNUSED(easy);
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            curl_multi_assign(h->multi, fd, NULL);
            sock_close(h, s);
        }
        return 0;
    }
    if (!s) {
        s = lc_xcalloc(1, sizeof(*s));
        s->fd = fd;
        s->h = h;
        s->poll.data = s;
        if (uv_poll_init_socket(h->loop, &s->poll, fd) != 0) {
            lc_free(s);
            return -1;
        }
        h->open_handles++;
        s->next = h->socks;
        if (h->socks)
            h->socks->prev = s;
        h->socks = s;
        curl_multi_assign(h->multi, fd, s);
    }
    int events = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    return uv_poll_start(&s->poll, events, sock_on_event) == 0 ? 0 : -1;
}

static void timer_on_fire(uv_timer_t *t)
{
    scr_http_t *h = t->data;
    int running;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    process_completions(h);
}

static int curl_on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    scr_http_t *h = userp;
    LC_UNUSED(multi);
    if (timeout_ms < 0)
        uv_timer_stop(&h->timer);
    else
        uv_timer_start(&h->timer, timer_on_fire, (uint64_t)timeout_ms, 0);
    return 0;
}

/* ---------------------------------------------------------------- lifecycle */

/* curl_global_init must run once before any other curl call. */
static void curl_init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        abort();
}

int scr_http_new(uv_loop_t *loop, scr_http_t **out)
{
    static uv_once_t once = UV_ONCE_INIT;
    uv_once(&once, curl_init_once);
    scr_http_t *h = lc_xcalloc(1, sizeof(*h));
    h->loop = loop;
    h->multi = curl_multi_init();
    if (!h->multi) {
        lc_free(h);
        return LC_EINPUT;
    }
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, curl_on_socket);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, curl_on_timer);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->open_handles = 1;
    *out = h;
    return 0;
}

static void timer_on_closed(uv_handle_t *handle)
{
    scr_http_t *h = handle->data;
    if (--h->open_handles == 0) {
        void (*cb)(void *) = h->close_cb;
        void *data = h->close_data;
        lc_free(h);
        if (cb)
            cb(data);
    }
}

void scr_http_close(scr_http_t *h, void (*cb)(void *data), void *data)
{
    h->closing = true;
    h->close_cb = cb;
    h->close_data = data;
    while (h->reqs)
        scr_http_cancel(h->reqs);
    curl_multi_cleanup(h->multi);
    h->multi = NULL;
    while (h->socks)
        sock_close(h, h->socks);
    uv_close((uv_handle_t *)&h->timer, timer_on_closed);
}

/* ---------------------------------------------------------------- requests */

static size_t on_write(char *p, size_t size, size_t n, void *userp)
{
    scr_http_req_t *r = userp;
    size_t len = size * n;
    if (r->on_chunk)
        return r->on_chunk(r, p, len, r->data) ? len : 0;
    if (r->result.body.len + len > r->max_body_bytes) {
        r->over_cap = true;
        return 0;
    }
    return lc_buf_append(&r->result.body, p, len) == 0 ? len : 0;
}

static int add_header(scr_http_req_t *r, const char *line)
{
    struct curl_slist *l = curl_slist_append(r->headers, line);
    if (!l)
        return LC_EINPUT;
    r->headers = l;
    return 0;
}

/* A secret from its value or its file; *owned is set when read from a file. */
static int secret(const char *value, const char *file, char **owned, const char **out)
{
    *owned = NULL;
    *out = value ? value : "";
    if (!file || !file[0])
        return 0;
    int rc = scr_read_secret(file, owned);
    if (!rc)
        *out = *owned;
    return rc;
}

static int set_auth(scr_http_req_t *r, const scr_client_t *c)
{
    char *owned_user = NULL, *owned_pass = NULL;
    const char *user, *pass;
    int rc = 0;
    if (c->basic_auth) {
        rc = secret(c->username, c->username_file, &owned_user, &user);
        if (!rc)
            rc = secret(c->password, c->password_file, &owned_pass, &pass);
        if (!rc) {
            curl_easy_setopt(r->easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
            curl_easy_setopt(r->easy, CURLOPT_USERNAME, user);
            curl_easy_setopt(r->easy, CURLOPT_PASSWORD, pass);
        }
    } else if (c->auth_type || c->credentials || c->credentials_file) {
        rc = secret(c->credentials, c->credentials_file, &owned_pass, &pass);
        if (!rc) {
            size_t len = strlen(pass) + 64 + (c->auth_type ? strlen(c->auth_type) : 0);
            char *line = lc_xmalloc(len);
            snprintf(line, len, "Authorization: %s %s", c->auth_type ? c->auth_type : "Bearer",
                     pass);
            rc = add_header(r, line);
            lc_free(line);
        }
    }
    lc_free(owned_user);
    lc_free(owned_pass);
    return rc;
}

/* tls_config.server_name: request https://<server_name>:<port>/... and let
 * curl connect to the original host, so SNI and verification use the name. */
static int set_server_name(scr_http_req_t *r, const char *server_name)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *url = NULL;
    int rc = LC_EINPUT;
    if (curl_url_set(u, CURLUPART_URL, r->url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_HOST, server_name, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &url, 0) == CURLUE_OK) {
        char line[512];
        snprintf(line, sizeof(line), "%s:%s:%s:%s", server_name, port, host, port);
        r->connect_to = curl_slist_append(NULL, line);
        lc_free(r->url);
        r->url = lc_xstrdup(url);
        curl_easy_setopt(r->easy, CURLOPT_CONNECT_TO, r->connect_to);
        rc = 0;
    }
    curl_free(host);
    curl_free(port);
    curl_free(url);
    curl_url_cleanup(u);
    return rc;
}

static void set_tls(scr_http_req_t *r, const scr_client_t *c)
{
    if (c->ca_file && c->ca_file[0])
        curl_easy_setopt(r->easy, CURLOPT_CAINFO, c->ca_file);
    if (c->ca && c->ca[0]) {
        struct curl_blob blob = {c->ca, strlen(c->ca), CURL_BLOB_COPY};
        curl_easy_setopt(r->easy, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (c->cert_file && c->cert_file[0])
        curl_easy_setopt(r->easy, CURLOPT_SSLCERT, c->cert_file);
    if (c->key_file && c->key_file[0])
        curl_easy_setopt(r->easy, CURLOPT_SSLKEY, c->key_file);
    if (c->cert && c->cert[0]) {
        struct curl_blob blob = {c->cert, strlen(c->cert), CURL_BLOB_COPY};
        curl_easy_setopt(r->easy, CURLOPT_SSLCERT_BLOB, &blob);
    }
    if (c->key && c->key[0]) {
        struct curl_blob blob = {c->key, strlen(c->key), CURL_BLOB_COPY};
        curl_easy_setopt(r->easy, CURLOPT_SSLKEY_BLOB, &blob);
    }
    if (c->insecure_skip_verify) {
        curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    static const long versions[] = {CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_TLSv1_1,
                                    CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_TLSv1_3};
    if (c->min_tls >= 10 && c->min_tls <= 13)
        curl_easy_setopt(r->easy, CURLOPT_SSLVERSION, versions[c->min_tls - 10]);
}

static int set_client(scr_http_req_t *r, const scr_client_t *c)
{
    curl_easy_setopt(r->easy, CURLOPT_PROXY, c && c->proxy_url ? c->proxy_url : "");
    if (!c)
        return 0;
    if (c->follow_redirects) {
        curl_easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(r->easy, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
    }
    curl_easy_setopt(r->easy, CURLOPT_HTTP_VERSION,
                     c->enable_http2 ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
    set_tls(r, c);
    if (c->server_name && c->server_name[0] && set_server_name(r, c->server_name))
        return LC_EINPUT;
    return set_auth(r, c);
}

static int configure(scr_http_req_t *r, const scr_http_opts_t *o)
{
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* curl decodes what it offered */
    if (o->user_agent)
        curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent);
    if (o->timeout_ns > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(o->timeout_ns / 1000000));
    if (!o->on_chunk && o->max_body_bytes)
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)o->max_body_bytes);
    for (size_t i = 0; i < o->n_headers; i++)
        if (add_header(r, o->headers[i]))
            return LC_EINPUT;
    if (o->post_body) {
        /* Copied, so the caller's buffer may go right away; "Expect:" stops
         * curl's 100-continue round trip before large bodies. */
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->post_len);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, (const char *)o->post_body);
        if (add_header(r, "Expect:"))
            return LC_EINPUT;
    }
    int rc = set_client(r, o->client);
    if (rc)
        return rc;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    return 0;
}

static void req_link(scr_http_t *h, scr_http_req_t *r)
{
    r->next = h->reqs;
    if (h->reqs)
        h->reqs->prev = r;
    h->reqs = r;
    r->running = true;
}

static void req_unlink(scr_http_req_t *r)
{
    scr_http_t *h = r->h;
    if (!r->running)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
    r->running = false;
    curl_multi_remove_handle(h->multi, r->easy);
}

int scr_http_start(scr_http_t *h, const scr_http_opts_t *o, scr_http_req_t **out)
{
    if (h->closing)
        return LC_ECLOSED;
    scr_http_req_t *r = lc_xcalloc(1, sizeof(*r));
    r->h = h;
    r->url = lc_xstrdup(o->url);
    r->max_body_bytes = o->max_body_bytes ? o->max_body_bytes : LC_BUF_UNLIMITED;
    r->on_chunk = o->on_chunk;
    r->on_done = o->on_done;
    r->data = o->data;
    lc_buf_init(&r->result.body, r->max_body_bytes);
    r->easy = curl_easy_init();
    int rc = r->easy ? configure(r, o) : LC_EINPUT;
    if (!rc && curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
        rc = LC_EINPUT;
    if (rc) {
        scr_http_req_free(r);
        return rc == LC_EINPUT ? LC_EINPUT : rc;
    }
    r->start_ns = lc_monotonic_ns();
    req_link(h, r);
    *out = r;
    return 0;
}

void scr_http_req_free(scr_http_req_t *r)
{
    if (!r)
        return;
    req_unlink(r);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    curl_slist_free_all(r->connect_to);
    lc_buf_fini(&r->result.body);
    lc_free(r->url);
    lc_free(r);
}

void scr_http_cancel(scr_http_req_t *r)
{
    scr_http_req_free(r);
}

const scr_http_result_t *scr_http_result(const scr_http_req_t *r)
{
    return &r->result;
}

void scr_http_take_body(scr_http_req_t *r, lc_buf_t *out)
{
    *out = r->result.body;
    lc_buf_init(&r->result.body, r->max_body_bytes);
}

/* ---------------------------------------------------------------- completion */

static const char *error_kind(CURLcode c, bool over_cap)
{
    switch (c) {
    case CURLE_OPERATION_TIMEDOUT:
        return SCR_HTTP_ERR_TIMEOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return SCR_HTTP_ERR_DNS;
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
        return SCR_HTTP_ERR_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return SCR_HTTP_ERR_TLS;
    case CURLE_FILESIZE_EXCEEDED:
        return SCR_HTTP_ERR_TOO_LARGE;
    case CURLE_WRITE_ERROR:
        return over_cap ? SCR_HTTP_ERR_TOO_LARGE : SCR_HTTP_ERR_OTHER;
    default:
        return SCR_HTTP_ERR_OTHER;
    }
}

static void scr_finish(scr_http_req_t *r, CURLcode code)
{
    scr_http_result_t *res = &r->result;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res->status);
    res->duration_s = (double)(lc_monotonic_ns() - r->start_ns) / 1e9;
    if (code != CURLE_OK) {
        res->error_kind = error_kind(code, r->over_cap);
        if (strcmp(res->error_kind, SCR_HTTP_ERR_TOO_LARGE) == 0)
            snprintf(res->error, sizeof(res->error), "response body larger than %zu bytes",
                     r->max_body_bytes);
        else
            snprintf(res->error, sizeof(res->error), "%s",
                     r->errbuf[0] ? r->errbuf : curl_easy_strerror(code));
    } else if (res->status != 200 && !r->on_chunk) {
        res->error_kind = SCR_HTTP_ERR_STATUS;
        snprintf(res->error, sizeof(res->error), "server returned HTTP status %ld%s", res->status,
                 res->status == 308 ? " (the server is being redirected; set follow_redirects "
                                      "or use the destination path)"
                                    : "");
    }
}

static void process_completions(scr_http_t *h)
{
    CURLMsg *msg;
    int left;
    while (h->multi && (msg = curl_multi_info_read(h->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        scr_http_req_t *r = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        CURLcode code = msg->data.result;
        req_unlink(r);
        scr_finish(r, code);
        r->on_done(r, r->data);
    }
}
