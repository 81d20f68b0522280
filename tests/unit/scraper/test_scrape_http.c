/*
 * test_scrape_http.c — the libcurl-on-libuv client (services/scraper/src/
 * http.c) against lc_httpd on loopback: bodies arrive whole, gzip
 * Content-Encoding is undone, error kinds are told apart (HTTP status,
 * connection refused, timeout, body over the cap), a redirect is an error
 * unless follow_redirects is set, credentials come from the config or
 * (re-read each time) from files, a cancelled request never calls back, and
 * streamed bodies arrive chunk by chunk.
 */
#include <stdio.h>
#include <unistd.h>

#include "http.h"
#include "lc/gz.h"
#include "lc/httpd.h"
#include "lc_test.h"

typedef struct world_s {
    uv_loop_t loop;
    lc_httpd_t *srv;
    scr_http_t *http;
    int port;
    char last_auth[256];
    uv_timer_t slow;
    lc_http_req_t *slow_req;
    int done;
} world_t;

static lc_http_result_t handler(lc_http_req_t *req, void *data);

static void slow_finish(uv_timer_t *t)
{
    world_t *w = t->data;
    lc_http_reply(w->slow_req, 200, "text/plain", "late", 4);
    lc_http_finish(w->slow_req);
    uv_close((uv_handle_t *)t, NULL);
}

static lc_http_result_t handler(lc_http_req_t *req, void *data)
{
    world_t *w = data;
    const char *auth = lc_http_header(req, "authorization");
    snprintf(w->last_auth, sizeof(w->last_auth), "%s", auth ? auth : "");
    if (strcmp(req->path, "/ok") == 0) {
        lc_http_reply(req, 200, "text/plain", "hello", 5);
    } else if (strcmp(req->path, "/big") == 0) {
        static char big[100000];
        memset(big, 'x', sizeof(big));
        lc_http_reply(req, 200, "application/octet-stream", big, sizeof(big));
    } else if (strcmp(req->path, "/gzip") == 0) {
        lc_buf_t gz;
        lc_buf_init(&gz, LC_BUF_UNLIMITED);
        if (lc_gzip((const uint8_t *)"compressed body", 15, 1, &gz))
            abort();
        lc_http_set_header(req, "Content-Encoding", "gzip");
        lc_http_reply(req, 200, "text/plain", gz.data, gz.len);
        lc_buf_fini(&gz);
    } else if (strcmp(req->path, "/moved") == 0) {
        lc_http_set_header(req, "Location", "/ok");
        lc_http_reply(req, 302, "text/plain", "", 0);
    } else if (strcmp(req->path, "/slow") == 0) {
        w->slow_req = req;
        uv_timer_init(&w->loop, &w->slow);
        w->slow.data = w;
        uv_timer_start(&w->slow, slow_finish, 1500, 0);
        return LC_HTTP_PENDING;
    } else {
        lc_http_reply(req, 404, "text/plain", "no", 2);
    }
    return LC_HTTP_DONE;
}

/* ---------------------------------------------------------------- one request */

typedef struct call_s {
    world_t *w;
    const char *kind; /* error kind, or NULL */
    long status;
    char body[64];
    size_t body_len;
    int calls;
    size_t chunks;
} call_t;

static void on_done(scr_http_req_t *req, void *data)
{
    call_t *c = data;
    const scr_http_result_t *r = scr_http_result(req);
    c->calls++;
    c->kind = r->error_kind;
    c->status = r->status;
    if (!c->chunks)
        c->body_len = r->body.len;
    snprintf(c->body, sizeof(c->body), "%.*s", (int)(r->body.len < 63 ? r->body.len : 63),
             (const char *)r->body.data);
    scr_http_req_free(req);
    c->w->done++;
}

static bool on_chunk(scr_http_req_t *req, const char *p, size_t n, void *data)
{
    call_t *c = data;
    LC_UNUSED(req);
    LC_UNUSED(p);
    c->chunks++;
    c->body_len += n;
    return true;
}

static void start(world_t *w, call_t *c, const char *path, const scr_client_t *client,
                  int64_t timeout_ns, size_t cap, bool stream)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", w->port, path);
    c->w = w;
    scr_http_opts_t o = {.url = url,
                         .client = client,
                         .timeout_ns = timeout_ns,
                         .max_body_bytes = cap,
                         .user_agent = "t",
                         .on_done = on_done,
                         .on_chunk = stream ? on_chunk : NULL,
                         .data = c};
    scr_http_req_t *r;
    LC_ASSERT_OK(scr_http_start(w->http, &o, &r));
}

static void run_until(world_t *w, int done)
{
    while (w->done < done && uv_run(&w->loop, UV_RUN_ONCE))
        ;
}

static void setup(world_t *w)
{
    memset(w, 0, sizeof(*w));
    uv_loop_init(&w->loop);
    lc_httpd_opts_t ho = {.address = "127.0.0.1:0"};
    LC_ASSERT_OK(lc_httpd_new(&w->loop, &ho, &w->srv));
    lc_http_route_t r = {.path = "/*", .scope = LC_HTTP_SCOPE_PUBLIC, .work = handler, .data = w};
    LC_ASSERT_OK(lc_httpd_route(w->srv, &r));
    LC_ASSERT_OK(lc_httpd_listen(w->srv));
    w->port = lc_httpd_port(w->srv);
    LC_ASSERT_OK(scr_http_new(&w->loop, &w->http));
}

static void teardown(world_t *w)
{
    scr_http_close(w->http, NULL, NULL);
    lc_httpd_close(w->srv, NULL, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    LC_ASSERT_OK(uv_loop_close(&w->loop));
}

/* ---------------------------------------------------------------- tests */

static void test_bodies_and_errors(void)
{
    static world_t w;
    setup(&w);
    call_t ok = {0}, gz = {0}, missing = {0}, big = {0}, moved = {0}, follow = {0};
    scr_client_t redirects = {.follow_redirects = true};
    start(&w, &ok, "/ok", NULL, 5000000000LL, 1024, false);
    start(&w, &gz, "/gzip", NULL, 5000000000LL, 1024, false);
    start(&w, &missing, "/nope", NULL, 5000000000LL, 1024, false);
    start(&w, &big, "/big", NULL, 5000000000LL, 1024, false);
    start(&w, &moved, "/moved", NULL, 5000000000LL, 1024, false);
    start(&w, &follow, "/moved", &redirects, 5000000000LL, 1024, false);
    run_until(&w, 6);
    LC_CHECK(ok.kind == NULL);
    LC_ASSERT_STR_EQ(ok.body, "hello");
    LC_CHECK(gz.kind == NULL);
    LC_ASSERT_STR_EQ(gz.body, "compressed body");
    LC_ASSERT_STR_EQ(missing.kind, SCR_HTTP_ERR_STATUS);
    LC_ASSERT_EQ(missing.status, 404);
    LC_ASSERT_STR_EQ(big.kind, SCR_HTTP_ERR_TOO_LARGE);
    LC_ASSERT_STR_EQ(moved.kind, SCR_HTTP_ERR_STATUS);
    LC_ASSERT_EQ(moved.status, 302);
    LC_CHECK(follow.kind == NULL);
    LC_ASSERT_STR_EQ(follow.body, "hello");
    teardown(&w);
}

static void test_timeout_refused_and_cancel(void)
{
    static world_t w;
    setup(&w);
    call_t slow = {0}, refused = {0}, cancelled = {0};
    start(&w, &slow, "/slow", NULL, 300000000LL, 1024, false);
    /* A port nobody listens on: the httpd's own port once closed is racy, so
     * use port 1 (privileged, never listening in tests). */
    char url[64] = "http://127.0.0.1:1/x";
    scr_http_opts_t o = {.url = url,
                         .timeout_ns = 5000000000LL,
                         .max_body_bytes = 1024,
                         .on_done = on_done,
                         .data = &refused};
    refused.w = &w;
    scr_http_req_t *r;
    LC_ASSERT_OK(scr_http_start(w.http, &o, &r));
    o.data = &cancelled;
    cancelled.w = &w;
    LC_ASSERT_OK(scr_http_start(w.http, &o, &r));
    scr_http_cancel(r);
    run_until(&w, 2);
    LC_ASSERT_STR_EQ(slow.kind, SCR_HTTP_ERR_TIMEOUT);
    LC_ASSERT_STR_EQ(refused.kind, SCR_HTTP_ERR_CONNECT);
    LC_ASSERT_EQ(cancelled.calls, 0);
    teardown(&w); /* the server's drain waits for the slow handler */
}

static void test_credentials(void)
{
    static world_t w;
    setup(&w);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/scr-token-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs("  tok-1\n", f);
    fclose(f);
    scr_client_t bearer = {.credentials_file = path};
    scr_client_t basic = {.basic_auth = true, .username = "user", .password = "pass"};
    scr_client_t custom = {.auth_type = "Token", .credentials = "abc"};
    call_t c = {0};
    start(&w, &c, "/ok", &bearer, 5000000000LL, 1024, false);
    run_until(&w, 1);
    LC_ASSERT_STR_EQ(w.last_auth, "Bearer tok-1");
    f = fopen(path, "w"); /* rotated: the next request reads the new one */
    fputs("tok-2", f);
    fclose(f);
    start(&w, &c, "/ok", &bearer, 5000000000LL, 1024, false);
    run_until(&w, 2);
    LC_ASSERT_STR_EQ(w.last_auth, "Bearer tok-2");
    start(&w, &c, "/ok", &basic, 5000000000LL, 1024, false);
    run_until(&w, 3);
    LC_ASSERT_STR_EQ(w.last_auth, "Basic dXNlcjpwYXNz"); /* base64("user:pass") */
    start(&w, &c, "/ok", &custom, 5000000000LL, 1024, false);
    run_until(&w, 4);
    LC_ASSERT_STR_EQ(w.last_auth, "Token abc");
    unlink(path);
    /* A missing secret file fails the start, not a callback. */
    scr_client_t gone = {.credentials_file = path};
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok", w.port);
    scr_http_opts_t o = {.url = url, .client = &gone, .on_done = on_done, .data = &c};
    scr_http_req_t *r;
    LC_CHECK(scr_http_start(w.http, &o, &r) != 0);
    teardown(&w);
}

static void test_stream(void)
{
    static world_t w;
    setup(&w);
    call_t c = {0};
    start(&w, &c, "/big", NULL, 5000000000LL, 0, true);
    run_until(&w, 1);
    LC_CHECK(c.kind == NULL);
    LC_ASSERT_EQ(c.body_len, 100000);
    LC_CHECK(c.chunks >= 1);
    teardown(&w);
}

LC_TEST_MAIN(test_bodies_and_errors, test_timeout_refused_and_cancel, test_credentials, test_stream)
