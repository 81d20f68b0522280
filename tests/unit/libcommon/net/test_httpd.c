/*
 * test_httpd.c — lc_httpd end to end: a server on its own loop thread, plain
 * blocking sockets as clients. Covers framing (content-length, chunked, gzip,
 * 100-continue, keep-alive, pipelining, HTTP/1.0), caps (413, 431, gzip
 * bomb), errors (400, 404, 405, 415), timeouts (408, idle), handler modes
 * (loop, offload + after, PENDING + lc_http_finish) and the graceful drain.
 * The request helpers (query, headers, JSON errors) are also tested directly
 * through the internal parser, without sockets.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <uv.h>
#include <zlib.h>

#include "../../../../libcommon/net/src/httpd_int.h"
#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc_test.h"

/* ================================================================ server fixture */

typedef struct server_s {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    uv_thread_t loop_thread_id;
    lc_httpd_t *srv;
    int port;
    int closed_calls;
} server_t;

static server_t server;
static atomic_int work_started;
static atomic_int work_on_loop; /* 1 if the offloaded work ran on the loop thread */

static bool on_loop_thread(void)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &server.loop_thread_id) != 0;
}

/* ---- handlers ---- */

/* Echoes method, path, a query value, an optional header and the body. */
static lc_http_result_t h_echo(lc_http_req_t *req, void *data)
{
    const char *q = lc_http_query(req, "q");
    const char *hdr = lc_http_header(req, "x-test");
    lc_buf_t out;
    lc_buf_init(&out, 1 << 20);
    int rc = lc_buf_printf(&out, "%s %s q=%s h=%s len=%zu\n", req->method, req->path, q ? q : "-",
                           hdr ? hdr : "-", req->body_len);
    if (rc == 0)
        rc = lc_buf_append(&out, req->body, req->body_len);
    lc_http_reply(req, 200, "text/plain", out.data, rc == 0 ? out.len : 0);
    lc_http_set_header(req, "X-Handler", "echo");
    lc_buf_fini(&out);
    return LC_HTTP_DONE;
}

/* Offloaded: runs on the pool, sleeping as told by ?sleep_ms=; after replies. */
static lc_http_result_t h_slow_work(lc_http_req_t *req, void *data)
{
    atomic_store(&work_on_loop, on_loop_thread());
    atomic_store(&work_started, 1);
    const char *ms = lc_http_query(req, "sleep_ms");
    if (ms)
        usleep((useconds_t)strtol(ms, NULL, 10) * 1000);
    req->user = lc_arena_strdup(req->arena, "from-work");
    return LC_HTTP_DONE;
}

static lc_http_result_t h_slow_after(lc_http_req_t *req, void *data)
{
    char text[128];
    int n = snprintf(text, sizeof(text), "work_on_loop=%d after_on_loop=%d user=%s",
                     atomic_load(&work_on_loop), on_loop_thread(), (const char *)req->user);
    lc_http_reply(req, 200, "text/plain", text, (size_t)n);
    return LC_HTTP_DONE;
}

/* Loop-side: answers later, from a uv_timer. */
typedef struct later_s {
    uv_timer_t timer;
    lc_http_req_t *req;
} later_t;

static void later_on_closed(uv_handle_t *h)
{
    lc_free(LC_CONTAINER_OF(h, later_t, timer));
}

static void later_on_timer(uv_timer_t *t)
{
    later_t *l = LC_CONTAINER_OF(t, later_t, timer);
    lc_http_reply(l->req, 202, "text/plain", "later", 5);
    lc_http_finish(l->req);
    uv_close((uv_handle_t *)&l->timer, later_on_closed);
}

static lc_http_result_t h_later(lc_http_req_t *req, void *data)
{
    later_t *l = lc_xcalloc(1, sizeof(*l));
    l->req = req;
    uv_timer_init(&server.loop, &l->timer);
    uv_timer_start(&l->timer, later_on_timer, 50, 0);
    return LC_HTTP_PENDING;
}

/* Returns PENDING but finishes before returning: must still answer once. */
static lc_http_result_t h_finish_early(lc_http_req_t *req, void *data)
{
    lc_http_reply(req, 200, "text/plain", "early", 5);
    lc_http_finish(req);
    return LC_HTTP_PENDING;
}

static lc_http_result_t h_error(lc_http_req_t *req, void *data)
{
    lc_status_t st = {0};
    lc_status_set(&st, LC_CODE_INVALID_ARGUMENT, "bad \"thing\"\n");
    lc_http_error(req, &st);
    return LC_HTTP_DONE;
}

static lc_http_result_t h_name(lc_http_req_t *req, void *data)
{
    lc_http_reply(req, 200, "text/plain", data, strlen(data));
    return LC_HTTP_DONE;
}

static void routes_add(lc_httpd_t *srv)
{
    const lc_http_route_t routes[] = {
        {.path = "/echo", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_echo},
        {.path = "/only-post", .methods = "POST", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_echo},
        {.path = "/only-post", .methods = "PUT", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_echo},
        {.path = "/slow",
         .methods = "GET,POST",
         .scope = LC_HTTP_SCOPE_PUBLIC,
         .work = h_slow_work,
         .after = h_slow_after,
         .offload = true},
        {.path = "/later", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_later},
        {.path = "/early", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_finish_early},
        {.path = "/error", .scope = LC_HTTP_SCOPE_PUBLIC, .work = h_error},
        {.path = "/static/*",
         .methods = "GET",
         .scope = LC_HTTP_SCOPE_PUBLIC,
         .work = h_name,
         .data = "prefix"},
        {.path = "/static/exact",
         .methods = "GET",
         .scope = LC_HTTP_SCOPE_PUBLIC,
         .work = h_name,
         .data = "exact"},
        {.path = "/static/deeper/*",
         .methods = "GET",
         .scope = LC_HTTP_SCOPE_PUBLIC,
         .work = h_name,
         .data = "deeper"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(routes); i++)
        LC_ASSERT_OK(lc_httpd_route(srv, &routes[i]));
}

static void server_on_closed(void *data)
{
    ((server_t *)data)->closed_calls++;
}

static void server_on_stop(uv_async_t *a)
{
    lc_httpd_close(server.srv, server_on_closed, &server);
    uv_close((uv_handle_t *)a, NULL);
}

static void server_run(void *arg)
{
    server.loop_thread_id = uv_thread_self();
    uv_run(&server.loop, UV_RUN_DEFAULT);
}

static lc_httpd_opts_t small_opts(void)
{
    return (lc_httpd_opts_t){
        .address = "127.0.0.1:0",
        .max_header_bytes = 2048,
        .max_body_bytes = 64 * 1024,
        .max_decompressed_bytes = 1 << 20,
        .idle_timeout_ms = 5000,
        .read_timeout_ms = 5000,
    };
}

static void server_start(const lc_httpd_opts_t *opts)
{
    memset(&server, 0, sizeof(server));
    atomic_store(&work_started, 0);
    LC_ASSERT_OK(uv_loop_init(&server.loop));
    LC_ASSERT_OK(lc_httpd_new(&server.loop, opts, &server.srv));
    routes_add(server.srv);
    LC_ASSERT_OK(lc_httpd_listen(server.srv));
    server.port = lc_httpd_port(server.srv);
    LC_CHECK(server.port > 0);
    LC_ASSERT_OK(uv_async_init(&server.loop, &server.stop, server_on_stop));
    LC_ASSERT_OK(uv_thread_create(&server.thread, server_run, NULL));
}

static void server_request_stop(void)
{
    uv_async_send(&server.stop);
}

static void server_join(void)
{
    uv_thread_join(&server.thread);
    LC_ASSERT_EQ(server.closed_calls, 1);
    LC_ASSERT_OK(uv_loop_close(&server.loop)); /* no handle leaked */
}

static void server_stop(void)
{
    server_request_stop();
    server_join();
}

/* ================================================================ client */

typedef struct client_s {
    int fd;
    char buf[256 * 1024];
    size_t len;
} client_t;

typedef struct resp_s {
    int status;
    char head[8192];
    char body[64 * 1024];
    size_t body_len;
} resp_t;

static client_t *client_open(void)
{
    client_t *c = lc_xcalloc(1, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    LC_ASSERT_OK(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)));
    return c;
}

static void client_close(client_t *c)
{
    close(c->fd);
    lc_free(c);
}

static void client_send(client_t *c, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the server may have closed on purpose; reads will tell */
        p += w;
        n -= (size_t)w;
    }
}

static void client_sends(client_t *c, const char *s)
{
    client_send(c, s, strlen(s));
}

/* Reads more bytes into the buffer; false on EOF, error or timeout. */
static bool client_fill(client_t *c)
{
    if (c->len == sizeof(c->buf))
        return false;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    if (n <= 0)
        return false;
    c->len += (size_t)n;
    return true;
}

/* True when the server closed the connection (EOF or reset) with nothing more. */
static bool client_sees_eof(client_t *c)
{
    if (c->len > 0)
        return false;
    char b;
    ssize_t n = recv(c->fd, &b, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static const char *find_header(const char *head, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *eol = strstr(head, "\r\n"); eol && eol[2]; eol = strstr(eol + 2, "\r\n")) {
        const char *l = eol + 2;
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = strcspn(v, "\r");
            snprintf(out, cap, "%.*s", (int)vl, v);
            return out;
        }
    }
    return NULL;
}

/* Reads one response (head + Content-Length body). Returns false on EOF. */
static bool client_read(client_t *c, resp_t *r)
{
    char *end;
    memset(r, 0, sizeof(*r));
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        if (!client_fill(c))
            return false;
    size_t head_len = (size_t)(end - c->buf) + 4;
    snprintf(r->head, sizeof(r->head), "%.*s", (int)head_len, c->buf);
    r->status = (int)strtol(r->head + 9, NULL, 10);
    char cl[32];
    size_t body_len =
        find_header(r->head, "content-length", cl, sizeof(cl)) ? (size_t)strtoull(cl, NULL, 10) : 0;
    while (c->len < head_len + body_len)
        if (!client_fill(c))
            return false;
    r->body_len = body_len < sizeof(r->body) - 1 ? body_len : sizeof(r->body) - 1;
    memcpy(r->body, c->buf + head_len, r->body_len);
    memmove(c->buf, c->buf + head_len + body_len, c->len - head_len - body_len);
    c->len -= head_len + body_len;
    return true;
}

static bool resp_header_is(const resp_t *r, const char *name, const char *want)
{
    char v[256];
    return find_header(r->head, name, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* One request on a fresh connection. */
static void roundtrip(const char *request, size_t len, resp_t *r)
{
    client_t *c = client_open();
    client_send(c, request, len);
    LC_CHECK(client_read(c, r));
    client_close(c);
}

/* A gzip stream built with zlib directly, independent of lc_gzip. */
static size_t zlib_gzip(const void *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    deflateInit2(&zs, 9, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    LC_ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t len = cap - zs.avail_out;
    deflateEnd(&zs);
    return len;
}

/* ================================================================ tests: framing */

static void test_get_and_post(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    const char get[] = "GET /echo?q=a%20b+c&x=1 HTTP/1.1\r\nHost: t\r\nX-Test:  hi  \r\n\r\n";
    roundtrip(get, sizeof(get) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_STR_EQ(r.body, "GET /echo q=a b c h=hi len=0\n");
    LC_CHECK(resp_header_is(&r, "content-type", "text/plain"));
    LC_CHECK(resp_header_is(&r, "x-handler", "echo"));
    LC_CHECK(resp_header_is(&r, "connection", "keep-alive"));

    const char post[] = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    roundtrip(post, sizeof(post) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_STR_EQ(r.body, "POST /echo q=- h=- len=5\nhello");
    server_stop();
}

static void test_chunked_post(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    client_t *c = client_open();
    /* Sent in pieces, as connect-es does, without a Content-Length. */
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    usleep(20000);
    client_sends(c, "4\r\nwiki\r\n");
    usleep(20000);
    client_sends(c, "6;ext=1\r\npedia \r\n0\r\nTrailer: x\r\n\r\n");
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_STR_EQ(r.body, "POST /echo q=- h=- len=10\nwikipedia ");
    client_close(c);
    server_stop();
}

static void test_gzip_post(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    uint8_t gz[1024];
    const char text[] = "compressed profile bytes, compressed profile bytes";
    size_t gz_len = zlib_gzip(text, sizeof(text) - 1, gz, sizeof(gz));
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Encoding: gzip\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      gz_len);
    client_t *c = client_open();
    client_send(c, head, (size_t)hl);
    client_send(c, gz, gz_len);
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 200);
    char want[256];
    snprintf(want, sizeof(want), "POST /echo q=- h=- len=%zu\n%s", sizeof(text) - 1, text);
    LC_ASSERT_STR_EQ(r.body, want);

    /* Corrupt gzip on the same connection: 400, then the connection stays usable. */
    gz[gz_len / 2] ^= 0xff;
    client_send(c, head, (size_t)hl);
    client_send(c, gz, gz_len);
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 400);
    LC_CHECK(strstr(r.body, "\"code\":\"invalid_argument\"") != NULL);

    /* Unsupported encodings are refused before the body is read. */
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Encoding: br\r\n"
                    "Content-Length: 3\r\n\r\nabc");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 501);
    LC_CHECK(strstr(r.body, "\"code\":\"unimplemented\"") != NULL);
    LC_CHECK(resp_header_is(&r, "connection", "close"));
    LC_CHECK(client_sees_eof(c));
    client_close(c);
    server_stop();
}

static void test_gzip_bomb(void)
{
    lc_httpd_opts_t o = small_opts(); /* decompressed cap: 1 MiB */
    server_start(&o);
    size_t n = 16u << 20;
    uint8_t *zeros = lc_xcalloc(1, n);
    uint8_t *gz = lc_xmalloc(64 * 1024);
    size_t gz_len = zlib_gzip(zeros, n, gz, 64 * 1024);
    lc_free(zeros);
    LC_CHECK(gz_len < (size_t)o.max_body_bytes);
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Encoding: gzip\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      gz_len);
    client_t *c = client_open();
    client_send(c, head, (size_t)hl);
    client_send(c, gz, gz_len);
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 413);
    LC_CHECK(strstr(r.body, "too large") != NULL);
    LC_ASSERT_EQ(atomic_load(&work_started), 0); /* the handler never saw it */
    lc_free(gz);
    client_close(c);
    server_stop();
}

/* More gzip bodies than inflate slots wait for one (in order) instead of
 * being refused: with one slot, four offloaded requests that each hold it
 * for 100 ms all succeed, and take at least 400 ms between them, because the
 * slot covers the request's whole offloaded work. */
static void test_gzip_waits_for_a_slot(void)
{
    lc_httpd_opts_t o = small_opts();
    o.max_inflating = 1;
    server_start(&o);
    uint8_t gz[256];
    const char text[] = "a compressed body";
    size_t gz_len = zlib_gzip(text, sizeof(text) - 1, gz, sizeof(gz));
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "POST /slow?sleep_ms=100 HTTP/1.1\r\nHost: t\r\nContent-Encoding: gzip\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      gz_len);
    enum { N = 4 };
    client_t *c[N];
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < N; i++) {
        c[i] = client_open();
        client_send(c[i], head, (size_t)hl);
        client_send(c[i], gz, gz_len);
    }
    for (int i = 0; i < N; i++) {
        resp_t r;
        LC_CHECK(client_read(c[i], &r));
        LC_ASSERT_EQ(r.status, 200);
        LC_ASSERT_STR_EQ(r.body, "work_on_loop=0 after_on_loop=1 user=from-work");
        client_close(c[i]);
    }
    LC_CHECK(uv_hrtime() - t0 >= (uint64_t)N * 100 * 1000000ull);
    server_stop();
}

static void test_expect_continue(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    client_t *c = client_open();
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                    "Content-Length: 4\r\n\r\n");
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 100);
    client_sends(c, "body");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_STR_EQ(r.body, "POST /echo q=- h=- len=4\nbody");
    client_close(c);
    server_stop();
}

static void test_keep_alive_and_pipelining(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    client_t *c = client_open();
    client_sends(c, "GET /echo?q=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "GET /echo q=1 h=- len=0\n");
    client_sends(c, "GET /echo?q=2 HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "GET /echo q=2 h=- len=0\n");

    /* Three requests in one write, a slow offloaded one first: answers in order. */
    client_sends(c, "GET /slow?sleep_ms=50 HTTP/1.1\r\nHost: t\r\n\r\n"
                    "POST /echo?q=3 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi"
                    "GET /later HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(strstr(r.body, "user=from-work") != NULL);
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "POST /echo q=3 h=- len=2\nhi");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 202);
    LC_ASSERT_STR_EQ(r.body, "later");
    client_close(c);
    server_stop();
}

static void test_http10(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    client_t *c = client_open();
    client_sends(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_CHECK(resp_header_is(&r, "connection", "keep-alive"));
    client_sends(c, "GET /echo?q=x HTTP/1.0\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "GET /echo q=x h=- len=0\n");
    LC_CHECK(resp_header_is(&r, "connection", "close"));
    LC_CHECK(client_sees_eof(c));
    client_close(c);
    server_stop();
}

/* ================================================================ tests: limits and errors */

static void test_body_too_large(void)
{
    lc_httpd_opts_t o = small_opts();
    o.max_body_bytes = 1024;
    server_start(&o);
    resp_t r;
    /* Declared length over the cap: 413 at once, the body is never read. */
    client_t *c = client_open();
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 413);
    LC_CHECK(resp_header_is(&r, "content-type", "application/json"));
    LC_CHECK(strstr(r.body, "\"code\":\"invalid_argument\"") != NULL);
    LC_CHECK(client_sees_eof(c));
    client_close(c);

    /* Chunked: the cap is found while reading. */
    char chunk[700];
    memset(chunk, 'x', sizeof(chunk));
    c = client_open();
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 2; i++) {
        client_sends(c, "2bc\r\n");
        client_send(c, chunk, sizeof(chunk));
        client_sends(c, "\r\n");
    }
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 413);
    client_close(c);
    server_stop();
}

static void test_headers_too_large(void)
{
    lc_httpd_opts_t o = small_opts(); /* 2 KiB of headers */
    server_start(&o);
    char big[3000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    client_t *c = client_open();
    client_sends(c, "GET /echo HTTP/1.1\r\nHost: t\r\nX-Big: ");
    client_sends(c, big);
    client_sends(c, "\r\n\r\n");
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 431);
    LC_CHECK(strstr(r.body, "\"code\":\"resource_exhausted\"") != NULL);
    LC_CHECK(client_sees_eof(c));
    client_close(c);

    /* Many small headers count too. */
    c = client_open();
    client_sends(c, "GET /echo HTTP/1.1\r\n");
    for (int i = 0; i < 400; i++)
        client_sends(c, "A: b\r\n");
    client_sends(c, "\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 431);
    client_close(c);
    server_stop();
}

static void test_bad_request(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    client_t *c = client_open();
    client_sends(c, "GET /echo HTTP/1.1\r\nBad Header\r\n\r\n");
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 400);
    LC_CHECK(resp_header_is(&r, "connection", "close"));
    LC_CHECK(client_sees_eof(c));
    client_close(c);
    server_stop();
}

static void test_routing(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    const char nf[] = "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(nf, sizeof(nf) - 1, &r);
    LC_ASSERT_EQ(r.status, 404);
    LC_CHECK(resp_header_is(&r, "content-type", "application/json"));
    LC_CHECK(strstr(r.body, "\"code\":\"unimplemented\"") != NULL);

    const char wrong[] = "GET /only-post?x=1 HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(wrong, sizeof(wrong) - 1, &r);
    LC_ASSERT_EQ(r.status, 405);
    LC_CHECK(resp_header_is(&r, "allow", "POST, PUT"));
    LC_ASSERT_STR_EQ(r.body, "{\"code\":\"unknown\",\"message\":\"method not allowed\"}");

    const char put[] = "PUT /only-post HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    roundtrip(put, sizeof(put) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);

    /* Exact beats prefix, longer prefix beats shorter; the query is ignored. */
    const struct {
        const char *path, *want;
    } cases[] = {
        {"/static/exact?v=1", "exact"}, {"/static/a/b", "prefix"},
        {"/static/deeper/x", "deeper"}, {"/static/", "prefix"},
        {"/static/exactly", "prefix"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        char req[256];
        int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", cases[i].path);
        roundtrip(req, (size_t)n, &r);
        LC_ASSERT_EQ(r.status, 200);
        LC_ASSERT_STR_EQ(r.body, cases[i].want);
    }
    const char no_prefix[] = "GET /static HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(no_prefix, sizeof(no_prefix) - 1, &r);
    LC_ASSERT_EQ(r.status, 404);
    const char longer[] = "GET /echo/more HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(longer, sizeof(longer) - 1, &r);
    LC_ASSERT_EQ(r.status, 404);

    /* A gRPC call of a path nobody serves, or with a method the path does
     * not take: HTTP 200 and grpc-status 12, in the headers for native gRPC
     * (Trailers-Only), in a trailer frame for gRPC-Web (issue 28). */
    const char grpc_nf[] = "POST /parca.debuginfo.v1alpha1.DebuginfoService/Upload HTTP/1.1\r\n"
                           "Host: t\r\nContent-Type: application/grpc\r\n"
                           "Content-Length: 5\r\n\r\n\0\0\0\0\0";
    roundtrip(grpc_nf, sizeof(grpc_nf) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(resp_header_is(&r, "grpc-status", "12"));
    LC_CHECK(resp_header_is(&r, "content-type", "application/grpc+proto"));
    LC_CHECK(resp_header_is(&r, "content-length", "0"));
    const char grpc_405[] = "GET /only-post HTTP/1.1\r\nHost: t\r\n"
                            "Content-Type: application/grpc+proto\r\nContent-Length: 0\r\n\r\n";
    roundtrip(grpc_405, sizeof(grpc_405) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(resp_header_is(&r, "grpc-status", "12"));
    const char web_nf[] = "POST /nope.v1.Nope/Call HTTP/1.1\r\nHost: t\r\n"
                          "Content-Type: application/grpc-web+proto\r\nContent-Length: 0\r\n\r\n";
    roundtrip(web_nf, sizeof(web_nf) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(resp_header_is(&r, "content-type", "application/grpc-web+proto"));
    LC_CHECK((unsigned char)r.body[0] == 0x80);
    LC_CHECK(strstr(r.body + 5, "grpc-status: 12\r\n") != NULL);

    const char err[] = "GET /error HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(err, sizeof(err) - 1, &r);
    LC_ASSERT_EQ(r.status, 400);
    LC_ASSERT_STR_EQ(r.body,
                     "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"thing\\\"\\u000a\"}");

    server_stop();
}

static void test_head_request(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    const char head[] = "HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\nGET /echo HTTP/1.1\r\n\r\n";
    client_t *c = client_open();
    client_send(c, head, sizeof(head) - 1);
    /* HEAD: Content-Length of the would-be body, no body bytes; the next
     * response on the stream starts right after the head. */
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        LC_CHECK(client_fill(c));
    LC_CHECK(strncmp(c->buf, "HTTP/1.1 200", 12) == 0);
    size_t head_len = (size_t)(end - c->buf) + 4;
    memmove(c->buf, c->buf + head_len, c->len - head_len);
    c->len -= head_len;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "GET /echo q=- h=- len=0\n");
    client_close(c);
    server_stop();
}

/* ================================================================ tests: handlers */

static void test_offload_and_after(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    const char req[] = "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n";
    roundtrip(req, sizeof(req) - 1, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_STR_EQ(r.body, "work_on_loop=0 after_on_loop=1 user=from-work");
    server_stop();
}

static void test_pending_finish(void)
{
    lc_httpd_opts_t o = small_opts();
    server_start(&o);
    resp_t r;
    client_t *c = client_open();
    client_sends(c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 202);
    LC_ASSERT_STR_EQ(r.body, "later");
    client_sends(c, "GET /early HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "early");
    client_sends(c, "GET /early HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_STR_EQ(r.body, "early");
    client_close(c);
    server_stop();
}

/* ================================================================ tests: timeouts and drain */

static void test_read_timeout(void)
{
    lc_httpd_opts_t o = small_opts();
    o.read_timeout_ms = 200;
    server_start(&o);
    client_t *c = client_open();
    client_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    uint64_t t0 = uv_hrtime();
    resp_t r;
    LC_CHECK(client_read(c, &r));
    LC_ASSERT_EQ(r.status, 408);
    LC_CHECK(uv_hrtime() - t0 >= 150 * 1000000ull);
    LC_CHECK(resp_header_is(&r, "connection", "close"));
    LC_CHECK(client_sees_eof(c));
    client_close(c);
    server_stop();
}

static void test_idle_timeout(void)
{
    lc_httpd_opts_t o = small_opts();
    o.idle_timeout_ms = 200;
    server_start(&o);
    client_t *c = client_open();
    resp_t r;
    client_sends(c, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(c, &r));
    uint64_t t0 = uv_hrtime();
    LC_CHECK(client_sees_eof(c)); /* closed by the server, well before SO_RCVTIMEO */
    LC_CHECK(uv_hrtime() - t0 < 3000 * 1000000ull);
    client_close(c);
    server_stop();
}

static void test_graceful_close(void)
{
    lc_httpd_opts_t o = small_opts();
    o.idle_timeout_ms = 60000; /* only the drain may close the idle connection */
    o.read_timeout_ms = 60000; /* ... and cut the half-received request short */
    server_start(&o);
    client_t *idle = client_open();
    resp_t r;
    client_sends(idle, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    LC_CHECK(client_read(idle, &r));
    client_t *partial = client_open();
    client_sends(partial, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\nabc");

    client_t *busy = client_open();
    client_sends(busy, "GET /slow?sleep_ms=300 HTTP/1.1\r\nHost: t\r\n\r\n");
    while (!atomic_load(&work_started))
        usleep(1000);
    uint64_t t0 = uv_hrtime();
    server_request_stop();
    LC_CHECK(client_sees_eof(idle));               /* idle: closed at once */
    LC_CHECK(uv_hrtime() - t0 < 250 * 1000000ull); /* before the busy one is done */
    LC_CHECK(client_read(busy, &r));               /* in flight: finished */
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(strstr(r.body, "user=from-work") != NULL);
    LC_CHECK(resp_header_is(&r, "connection", "close"));
    LC_CHECK(client_sees_eof(busy));
    /* The half-received request gets the drain's grace (5 s), not its 60 s. */
    struct timeval tv = {.tv_sec = 8};
    setsockopt(partial->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    LC_CHECK(client_read(partial, &r));
    LC_ASSERT_EQ(r.status, 408);
    LC_CHECK(uv_hrtime() - t0 < 7000 * 1000000ull);
    server_join();
    client_close(idle);
    client_close(busy);
    client_close(partial);
}

static double counter_value(lc_metrics_t *m, const char *labels)
{
    return lc_metric_value(lc_metrics_counter(m, "ember_http_requests_total", "", labels));
}

static void test_metrics(void)
{
    lc_httpd_opts_t o = small_opts();
    o.metrics = lc_metrics_new();
    server_start(&o);
    resp_t r;
    const char two[] = "GET /echo HTTP/1.1\r\n\r\nGET /echo HTTP/1.1\r\n\r\n";
    client_t *c = client_open();
    client_send(c, two, sizeof(two) - 1);
    LC_CHECK(client_read(c, &r));
    LC_CHECK(client_read(c, &r));
    client_close(c);
    const char nf[] = "POST /nope HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    roundtrip(nf, sizeof(nf) - 1, &r);
    server_stop();

    LC_ASSERT_EQ(counter_value(o.metrics, "route=\"/echo\",method=\"GET\",status=\"200\""), 2);
    LC_ASSERT_EQ(counter_value(o.metrics, "route=\"none\",method=\"POST\",status=\"404\""), 1);
    lc_buf_t text;
    lc_buf_init(&text, 1 << 20);
    LC_ASSERT_OK(lc_metrics_render(o.metrics, &text));
    LC_ASSERT_OK(lc_buf_putc(&text, '\0'));
    LC_CHECK(strstr((const char *)text.data,
                    "ember_http_request_duration_seconds_count{route=\"/echo\"} 2\n") != NULL);
    LC_CHECK(strstr((const char *)text.data,
                    "ember_http_request_duration_seconds_count{route=\"none\"} 1\n") != NULL);
    lc_buf_fini(&text);
    lc_metrics_free(o.metrics);
}

/* ======================================================== tests: helpers without sockets */

static const lc_httpd__limits_t test_limits = {
    .max_header_bytes = 4096,
    .max_body_bytes = 4096,
    .max_decompressed_bytes = 4096,
    .max_response_bytes = 256,
    .arena_cap_bytes = 1 << 20,
};

static void feed_request(lc_httpd__parser_t *p, const char *text)
{
    size_t used;
    LC_ASSERT_EQ(lc_httpd__parser_feed(p, text, strlen(text), &used), LC_HTTPD__REQUEST);
    LC_ASSERT_EQ(used, strlen(text));
}

static void test_query_and_headers(void)
{
    lc_httpd__parser_t p;
    lc_httpd__parser_init(&p, &test_limits);
    feed_request(&p, "GET /q?a=1&b=x+y&a=%32&c&name%5B%5D=v&bad=%zz%4&e= HTTP/1.1\r\n"
                     "Content-TYPE: text/x\r\nX-Empty:\r\nX-Dup: one\r\nx-dup: two\r\n"
                     "X-Blank: \t \r\n\r\n");
    lc_http_req_t *req = &p.req;
    LC_ASSERT_STR_EQ(req->path, "/q");
    LC_ASSERT_STR_EQ(lc_http_query(req, "a"), "1");
    LC_ASSERT_STR_EQ(lc_http_query(req, "b"), "x y");
    LC_ASSERT_STR_EQ(lc_http_query(req, "c"), "");
    LC_ASSERT_STR_EQ(lc_http_query(req, "name[]"), "v");
    LC_ASSERT_STR_EQ(lc_http_query(req, "bad"), "%zz%4");
    LC_ASSERT_STR_EQ(lc_http_query(req, "e"), "");
    LC_CHECK(lc_http_query(req, "missing") == NULL);
    LC_CHECK(lc_http_query(req, "") == NULL);
    const char **all;
    LC_ASSERT_EQ(lc_http_query_all(req, "a", &all), 2);
    LC_ASSERT_STR_EQ(all[0], "1");
    LC_ASSERT_STR_EQ(all[1], "2");
    LC_ASSERT_EQ(lc_http_query_all(req, "zzz", &all), 0);
    LC_ASSERT_STR_EQ(lc_http_header(req, "content-type"), "text/x");
    LC_ASSERT_STR_EQ(lc_http_header(req, "Content-Type"), "text/x");
    LC_ASSERT_STR_EQ(lc_http_header(req, "x-dup"), "one");
    LC_ASSERT_STR_EQ(lc_http_header(req, "x-empty"), "");
    LC_ASSERT_STR_EQ(lc_http_header(req, "x-blank"), "");
    LC_ASSERT_EQ(req->n_headers, 5);
    LC_ASSERT_STR_EQ(req->headers[0].name, "content-type");
    LC_CHECK(lc_http_header(req, "absent") == NULL);

    /* The next request on the same parser starts clean. */
    lc_httpd__parser_next(&p);
    feed_request(&p, "GET /r HTTP/1.1\r\n\r\n");
    LC_ASSERT_STR_EQ(p.req.path, "/r");
    LC_ASSERT_STR_EQ(p.req.query, "");
    LC_ASSERT_EQ(p.req.n_headers, 0);
    LC_CHECK(lc_http_query(&p.req, "a") == NULL);
    lc_httpd__parser_fini(&p);
}

static void test_response_head(void)
{
    lc_httpd__parser_t p;
    lc_httpd__parser_init(&p, &test_limits);
    feed_request(&p, "GET / HTTP/1.1\r\n\r\n");
    lc_http_req_t *req = &p.req;
    lc_http_reply(req, 201, "text/a", "xyz", 3);
    lc_http_set_header(req, "content-type", "text/b"); /* replaces */
    lc_http_set_header(req, "X-Multi", "1");
    lc_http_set_header(req, "X-Multi", "2\r\nInjected: yes"); /* CR/LF neutralised */
    lc_http_set_header(req, "Content-Length", "999");         /* framing is the server's */
    LC_ASSERT_OK(lc_httpd__format_head(req, true, &p.head));
    LC_ASSERT_OK(lc_buf_putc(&p.head, '\0'));
    LC_ASSERT_STR_EQ((const char *)p.head.data,
                     "HTTP/1.1 201 Created\r\nContent-Type: text/b\r\nX-Multi: 1\r\n"
                     "X-Multi: 2  Injected: yes\r\nContent-Length: 3\r\n"
                     "Connection: keep-alive\r\n\r\n");

    /* A body past max_response_bytes turns into a 500 JSON error. */
    char big[300];
    memset(big, 'b', sizeof(big));
    lc_http_reply(req, 200, "text/plain", big, sizeof(big));
    LC_ASSERT_EQ(req->status, 500);
    const char *body = (const char *)req->resp_body.data;
    LC_CHECK(strncmp(body, "{\"code\":\"unknown\"", 17) == 0);
    lc_httpd__parser_fini(&p);
}

/* A response with trailers goes out chunked (RFC 9112 §7.1), to an
 * HTTP/1.1 client only, and never for a bodyless answer. */
static void test_chunked_response(void)
{
    lc_httpd__parser_t p;
    lc_httpd__parser_init(&p, &test_limits);
    feed_request(&p, "POST /g HTTP/1.1\r\n\r\n");
    lc_http_req_t *req = &p.req;
    lc_http_reply(req, 200, "application/grpc", "0123456789abcdefg", 17);
    LC_CHECK(!lc_httpd__chunked(req, true)); /* no trailers: Content-Length */
    lc_http_set_trailer(req, "grpc-status", "0");
    lc_http_set_trailer(req, "grpc-message", "a\r\nInjected: yes");
    lc_http_set_trailer(req, "Content-Length", "3"); /* framing is the server's */
    LC_CHECK(lc_httpd__chunked(req, true));
    LC_CHECK(!lc_httpd__chunked(req, false));
    size_t body_at = 0;
    LC_ASSERT_OK(lc_httpd__format_chunked(req, true, &p.head, &body_at));
    const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n"
                        "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n11\r\n";
    const char tail[] = "\r\n0\r\ngrpc-status: 0\r\ngrpc-message: a  Injected: yes\r\n\r\n";
    LC_ASSERT_EQ(body_at, sizeof(head) - 1);
    LC_ASSERT_EQ(p.head.len, body_at + sizeof(tail) - 1);
    LC_CHECK(memcmp(p.head.data, head, body_at) == 0);
    LC_CHECK(memcmp(p.head.data + body_at, tail, sizeof(tail) - 1) == 0);

    /* An empty body has no data chunk: the last chunk follows the head. */
    lc_http_reply(req, 200, NULL, "", 0);
    LC_ASSERT_OK(lc_httpd__format_chunked(req, false, &p.head, &body_at));
    const char empty_tail[] = "0\r\ngrpc-status: 0\r\ngrpc-message: a  Injected: yes\r\n\r\n";
    LC_ASSERT_EQ(p.head.len - body_at, sizeof(empty_tail) - 1);
    LC_CHECK(memcmp(p.head.data + body_at, empty_tail, sizeof(empty_tail) - 1) == 0);
    LC_CHECK(memcmp(p.head.data + body_at - 4, "\r\n\r\n", 4) == 0);

    /* A JSON error replaces the whole answer, trailers included. */
    lc_status_t st;
    lc_status_set(&st, LC_CODE_INTERNAL, "boom");
    lc_http_error(req, &st);
    LC_CHECK(!lc_httpd__chunked(req, true));
    lc_httpd__parser_fini(&p);
}

static void feed_gzip_request(lc_httpd__parser_t *p, const uint8_t *gz, size_t len)
{
    char head[128];
    snprintf(head, sizeof(head),
             "POST / HTTP/1.1\r\nContent-Encoding: GZIP\r\nContent-Length: %zu\r\n\r\n", len);
    size_t used;
    LC_ASSERT_EQ(lc_httpd__parser_feed(p, head, strlen(head), &used), LC_HTTPD__MORE);
    if (len > 0)
        LC_ASSERT_EQ(lc_httpd__parser_feed(p, (const char *)gz, len, &used), LC_HTTPD__REQUEST);
}

static void test_decode_body(void)
{
    lc_httpd__parser_t p;
    lc_httpd__parser_init(&p, &test_limits); /* 4 KiB decompressed */
    uint8_t gz[1024], plain[5000];
    memset(plain, 'p', sizeof(plain));
    size_t n = zlib_gzip(plain, 4096, gz, sizeof(gz));
    feed_gzip_request(&p, gz, n);
    LC_ASSERT_OK(lc_httpd__parser_decode_body(&p, test_limits.max_decompressed_bytes));
    LC_ASSERT_EQ(p.req.body_len, 4096);
    LC_ASSERT_MEM_EQ(p.req.body, plain, 4096);
    lc_httpd__parser_next(&p);

    n = zlib_gzip(plain, 4097, gz, sizeof(gz));
    feed_gzip_request(&p, gz, n);
    LC_ASSERT_EQ(lc_httpd__parser_decode_body(&p, test_limits.max_decompressed_bytes), -1);
    LC_ASSERT_EQ(p.req.status, 413);
    lc_httpd__parser_next(&p);

    gz[n - 1] ^= 1; /* ISIZE no longer matches */
    feed_gzip_request(&p, gz, n);
    LC_ASSERT_EQ(lc_httpd__parser_decode_body(&p, test_limits.max_decompressed_bytes), -1);
    LC_ASSERT_EQ(p.req.status, 400);
    lc_httpd__parser_next(&p);

    size_t used;
    const char empty[] = "POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n";
    LC_ASSERT_EQ(lc_httpd__parser_feed(&p, empty, sizeof(empty) - 1, &used), LC_HTTPD__REQUEST);
    LC_ASSERT_OK(lc_httpd__parser_decode_body(&p, test_limits.max_decompressed_bytes));
    LC_ASSERT_EQ(p.req.body_len, 0);
    lc_httpd__parser_fini(&p);
}

LC_TEST_MAIN(test_query_and_headers, test_response_head, test_chunked_response, test_decode_body,
             test_get_and_post, test_chunked_post, test_gzip_post, test_gzip_bomb,
             test_gzip_waits_for_a_slot, test_expect_continue, test_keep_alive_and_pipelining,
             test_http10, test_body_too_large, test_headers_too_large, test_bad_request,
             test_routing, test_head_request, test_offload_and_after, test_pending_finish,
             test_read_timeout, test_idle_timeout, test_graceful_close, test_metrics)
