/*
 * test_connect.c — Connect unary decisions (pyroscope-api.md §6.1, §6.2):
 * content types, protocol headers, gzip negotiation, error bodies and
 * statuses, then lc_connect_decode / reply / error on hand-built requests,
 * and finally lc_connect_register end to end on a real lc_httpd with a
 * blocking-socket client. Expected bytes are written by hand from the spec.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <uv.h>

#include "lc/alloc.h"
#include "lc/connect.h"
#include "lc/gz.h"
#include "lc_test.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

/* ---- pure decisions ---- */

static int codec_of(const char *ct)
{
    lc_connect_codec_t codec = (lc_connect_codec_t)-1;
    return lc_connect_codec_of(ct, &codec) == 0 ? (int)codec : -1;
}

static void test_content_types_accepted(void)
{
    LC_ASSERT_EQ(codec_of("application/proto"), LC_CONNECT_PROTO);
    LC_ASSERT_EQ(codec_of("application/json"), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of("Application/JSON"), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of("APPLICATION/PROTO"), LC_CONNECT_PROTO);
    LC_ASSERT_EQ(codec_of("application/json; charset=utf-8"), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of("application/json;charset=UTF-8"), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of("application/json; CHARSET=\"utf-8\""), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of("application/json;"), LC_CONNECT_JSON);
    LC_ASSERT_EQ(codec_of(" application/json ; charset = utf-8 "), LC_CONNECT_JSON);
}

static void test_content_types_rejected(void)
{
    static const char *const bad[] = {
        "",
        "application/grpc",
        "application/connect+json",
        "text/json",
        "application/jsonx",
        "application/json charset=utf-8",
        "application/proto; charset=utf-8",
        "application/json; charset=latin1",
        "application/json; foo=bar",
        "application/json; charset=utf-8; charset=utf-8",
        "application/json; charset",
        "application/x-protobuf",
        "application/protobuf",
        "application/json; charset=utf-8; q=1",
    };
    LC_ASSERT_EQ(codec_of(NULL), -1);
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        if (codec_of(bad[i]) != -1)
            fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
        LC_ASSERT_EQ(codec_of(bad[i]), -1);
    }
}

static int check_headers(const char *version, const char *timeout, uint64_t *ms)
{
    lc_status_t st = {0};
    int rc = lc_connect_check_headers(version, timeout, ms, &st);
    LC_ASSERT_EQ(st.code, rc == 0 ? LC_CODE_OK : LC_CODE_INVALID_ARGUMENT);
    return rc;
}

static void test_protocol_headers(void)
{
    uint64_t ms = 99;

    LC_ASSERT_OK(check_headers(NULL, NULL, &ms));
    LC_ASSERT_EQ(ms, 0);
    LC_ASSERT_OK(check_headers("1", NULL, &ms));
    LC_ASSERT_OK(check_headers(" 1 ", NULL, &ms));
    LC_ASSERT_EQ(check_headers("2", NULL, &ms), -1);
    LC_ASSERT_EQ(check_headers("", NULL, &ms), -1);
    LC_ASSERT_EQ(check_headers("1.0", NULL, &ms), -1);
    LC_ASSERT_OK(check_headers("1", "5000", &ms));
    LC_ASSERT_EQ(ms, 5000);
    LC_ASSERT_OK(check_headers(NULL, "9999999999", &ms));
    LC_CHECK(ms == 9999999999ULL);
    LC_ASSERT_EQ(check_headers(NULL, "10000000000", &ms), -1);
    LC_ASSERT_EQ(check_headers(NULL, "0", &ms), -1);
    LC_ASSERT_EQ(check_headers(NULL, "-1", &ms), -1);
    LC_ASSERT_EQ(check_headers(NULL, "+1", &ms), -1);
    LC_ASSERT_EQ(check_headers(NULL, "1.5", &ms), -1);
    LC_ASSERT_EQ(check_headers(NULL, "", &ms), -1);
}

static void test_accept_encoding(void)
{
    LC_CHECK(lc_connect_accepts_gzip("gzip"));
    LC_CHECK(lc_connect_accepts_gzip("GZip"));
    LC_CHECK(lc_connect_accepts_gzip("deflate, gzip;q=0.5"));
    LC_CHECK(lc_connect_accepts_gzip("identity,gzip, br"));
    LC_CHECK(lc_connect_accepts_gzip("gzip;q=1.0"));
    LC_CHECK(lc_connect_accepts_gzip("gzip ; q=0.001"));
    LC_CHECK(!lc_connect_accepts_gzip(NULL));
    LC_CHECK(!lc_connect_accepts_gzip(""));
    LC_CHECK(!lc_connect_accepts_gzip("br"));
    LC_CHECK(!lc_connect_accepts_gzip("gzipx, x-gzip"));
    LC_CHECK(!lc_connect_accepts_gzip("gzip;q=0"));
    LC_CHECK(!lc_connect_accepts_gzip("br, gzip; q=0.000"));
}

static const char *error_body(const lc_status_t *st)
{
    static char text[1024];
    lc_buf_t b;
    lc_buf_init(&b, sizeof(text) - 1);
    LC_ASSERT_OK(lc_connect_error_body(st, &b));
    memcpy(text, b.data, b.len);
    text[b.len] = '\0';
    lc_buf_fini(&b);
    return text;
}

static void test_error_body_and_status(void)
{
    lc_status_t st = {0};

    lc_status_set(&st, LC_CODE_INVALID_ARGUMENT, "bad \"x\"\n\\");
    LC_ASSERT_STR_EQ(error_body(&st),
                     "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"x\\\"\\n\\\\\"}");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 400);

    lc_status_set(&st, LC_CODE_NOT_FOUND, "%s", "");
    LC_ASSERT_STR_EQ(error_body(&st), "{\"code\":\"not_found\"}");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 404);

    memset(&st, 0, sizeof(st));
    LC_ASSERT_STR_EQ(error_body(&st), "{\"code\":\"unknown\"}");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 500);

    /* A legacy http_status override does not leak into Connect. */
    lc_status_set_http(&st, 413, LC_CODE_RESOURCE_EXHAUSTED, "too big");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 429);
    lc_status_set(&st, LC_CODE_UNAVAILABLE, "later");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 503);
    lc_status_set(&st, LC_CODE_DEADLINE_EXCEEDED, "slow");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 504);
    lc_status_set_http(&st, 405, LC_CODE_UNIMPLEMENTED, "GET");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 405);
    lc_status_set_http(&st, 415, LC_CODE_UNIMPLEMENTED, "xml");
    LC_ASSERT_EQ(lc_connect_error_status(&st), 415);
}

/* ---- decode / reply / error on a hand-built request (no socket) ---- */

typedef struct fake_req_s {
    lc_http_req_t req;
    lc_http_header_t headers[8];
} fake_req_t;

static void fake_init(fake_req_t *f, const char *method, const char *content_type, const void *body,
                      size_t len)
{
    memset(f, 0, sizeof(*f));
    f->req.method = method;
    f->req.path = "/querier.v1.QuerierService/ProfileTypes";
    f->req.query = "";
    f->req.headers = f->headers;
    f->req.body = body;
    f->req.body_len = len;
    f->req.arena = lc_arena_new(1 << 20);
    f->req.status = 200;
    lc_buf_init(&f->req.resp_body, 1 << 20);
    if (content_type)
        f->headers[f->req.n_headers++] = (lc_http_header_t){"content-type", content_type};
}

static void fake_add_header(fake_req_t *f, const char *lname, const char *value)
{
    f->headers[f->req.n_headers++] = (lc_http_header_t){lname, value};
}

static void fake_fini(fake_req_t *f)
{
    lc_arena_free(f->req.arena);
    lc_buf_fini(&f->req.resp_body);
    lc_free(f->req._resp_headers); /* owned by the httpd parser in a real server */
}

/* Test-only peek at the response headers the handler set. */
static const char *resp_header(const fake_req_t *f, const char *name)
{
    for (size_t i = 0; i < f->req._n_resp_headers; i++)
        if (strcasecmp(f->req._resp_headers[i].name, name) == 0)
            return f->req._resp_headers[i].value;
    return NULL;
}

static int fake_decode(fake_req_t *f, ProtobufCMessage **msg, lc_connect_codec_t *codec,
                       lc_status_t *st)
{
    memset(st, 0, sizeof(*st));
    return lc_connect_decode(&f->req, &querier__v1__profile_types_request__descriptor, msg, codec,
                             st);
}

static void test_decode_rejects_wrong_method(void)
{
    fake_req_t f;
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st;

    fake_init(&f, "GET", "application/json", "{}", 2);
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.http_status, 405);
    LC_ASSERT_STR_EQ(resp_header(&f, "Allow"), "POST");
    lc_connect_error(&f.req, &st);
    LC_ASSERT_EQ(f.req.status, 405);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Type"), "application/json");
    fake_fini(&f);
}

static void test_decode_rejects_content_type(void)
{
    fake_req_t f;
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st;

    fake_init(&f, "POST", "text/plain", "{}", 2);
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.http_status, 415);
    LC_ASSERT_STR_EQ(resp_header(&f, "Accept-Post"), "application/json, application/proto");
    lc_connect_error(&f.req, &st);
    LC_ASSERT_EQ(f.req.status, 415);
    fake_fini(&f);

    fake_init(&f, "POST", NULL, "", 0);
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.http_status, 415);
    fake_fini(&f);
}

static void test_decode_rejects_protocol_version(void)
{
    fake_req_t f;
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st;

    fake_init(&f, "POST", "application/json", "{}", 2);
    fake_add_header(&f, "connect-protocol-version", "2");
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    lc_connect_error(&f.req, &st);
    LC_ASSERT_EQ(f.req.status, 400);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Type"), "application/json");
    const char *want = "{\"code\":\"invalid_argument\",\"message\":"
                       "\"connect-protocol-version must be \\\"1\\\": got \\\"2\\\"\"}";
    LC_ASSERT_EQ(f.req.resp_body.len, strlen(want));
    LC_ASSERT_MEM_EQ(f.req.resp_body.data, want, strlen(want));
    fake_fini(&f);

    fake_init(&f, "POST", "application/json", "{}", 2);
    fake_add_header(&f, "connect-timeout-ms", "12345678901");
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    fake_fini(&f);
}

static void test_decode_json_and_proto_bodies(void)
{
    static const uint8_t proto[] = {0x08, 0x01, 0x10, 0x02}; /* start=1 end=2 */
    const char *json = "{\"start\":\"1\",\"end\":2}";
    fake_req_t f;
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st;

    fake_init(&f, "POST", "application/json; charset=utf-8", json, strlen(json));
    fake_add_header(&f, "connect-protocol-version", "1");
    fake_add_header(&f, "connect-timeout-ms", "1500");
    LC_ASSERT_OK(fake_decode(&f, &msg, &codec, &st));
    LC_ASSERT_EQ(codec, LC_CONNECT_JSON);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)msg)->end, 2);
    LC_ASSERT_EQ(lc_connect_timeout_ms(&f.req), 1500);
    fake_fini(&f);

    fake_init(&f, "POST", "application/proto", proto, sizeof(proto));
    LC_ASSERT_OK(fake_decode(&f, &msg, &codec, &st));
    LC_ASSERT_EQ(codec, LC_CONNECT_PROTO);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)msg)->start, 1);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)msg)->end, 2);
    LC_ASSERT_EQ(lc_connect_timeout_ms(&f.req), 0);
    fake_fini(&f);
}

static void test_decode_empty_and_bad_bodies(void)
{
    static const uint8_t truncated[] = {0x08};
    fake_req_t f;
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st;

    fake_init(&f, "POST", "application/proto", NULL, 0); /* empty = empty message */
    LC_ASSERT_OK(fake_decode(&f, &msg, &codec, &st));
    LC_CHECK(msg != NULL && ((Querier__V1__ProfileTypesRequest *)msg)->start == 0);
    fake_fini(&f);

    fake_init(&f, "POST", "application/json", "", 0); /* clients send {} */
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    fake_fini(&f);

    fake_init(&f, "POST", "application/proto", truncated, sizeof(truncated));
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    LC_CHECK(strstr(st.msg, "unmarshal") != NULL);
    fake_fini(&f);

    fake_init(&f, "POST", "application/json", "{\"start\":true}", 14);
    LC_ASSERT_EQ(fake_decode(&f, &msg, &codec, &st), -1);
    LC_CHECK(strstr(st.msg, "start") != NULL);
    fake_fini(&f);
}

static void sample_profile_types(Querier__V1__ProfileTypesResponse *resp,
                                 Types__V1__ProfileType *pt, Types__V1__ProfileType **list)
{
    querier__v1__profile_types_response__init(resp);
    types__v1__profile_type__init(pt);
    pt->id = "memory:alloc_space:bytes:space:bytes";
    pt->name = "memory";
    list[0] = pt;
    resp->n_profile_types = 1;
    resp->profile_types = list;
}

static void test_reply_json_plain_and_gzip(void)
{
    const char *want = "{\"profileTypes\":[{\"ID\":\"memory:alloc_space:bytes:space:bytes\","
                       "\"name\":\"memory\"}]}";
    Querier__V1__ProfileTypesResponse resp;
    Types__V1__ProfileType pt, *list[1];
    fake_req_t f;
    lc_buf_t plain;

    sample_profile_types(&resp, &pt, list);
    fake_init(&f, "POST", "application/json", "{}", 2);
    lc_connect_reply(&f.req, LC_CONNECT_JSON, &resp.base);
    LC_ASSERT_EQ(f.req.status, 200);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Type"), "application/json");
    LC_CHECK(resp_header(&f, "Content-Encoding") == NULL);
    LC_ASSERT_EQ(f.req.resp_body.len, strlen(want));
    LC_ASSERT_MEM_EQ(f.req.resp_body.data, want, strlen(want));
    fake_fini(&f);

    fake_init(&f, "POST", "application/json", "{}", 2);
    fake_add_header(&f, "accept-encoding", "br, gzip");
    lc_connect_reply(&f.req, LC_CONNECT_JSON, &resp.base);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Encoding"), "gzip");
    LC_CHECK(lc_gz_is_gzip(f.req.resp_body.data, f.req.resp_body.len));
    lc_buf_init(&plain, 1 << 16);
    LC_ASSERT_OK(lc_gunzip(f.req.resp_body.data, f.req.resp_body.len, 1 << 16, &plain));
    LC_ASSERT_EQ(plain.len, strlen(want));
    LC_ASSERT_MEM_EQ(plain.data, want, strlen(want));
    lc_buf_fini(&plain);
    fake_fini(&f);
}

static void test_reply_proto(void)
{
    Querier__V1__ProfileTypesRequest msg = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    static const uint8_t want[] = {0x08, 0x96, 0x01, 0x10, 0x7f}; /* start=150 end=127 */
    fake_req_t f;

    msg.start = 150;
    msg.end = 127;
    fake_init(&f, "POST", "application/proto", NULL, 0);
    lc_connect_reply(&f.req, LC_CONNECT_PROTO, &msg.base);
    LC_ASSERT_EQ(f.req.status, 200);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Type"), "application/proto");
    LC_ASSERT_EQ(f.req.resp_body.len, sizeof(want));
    LC_ASSERT_MEM_EQ(f.req.resp_body.data, want, sizeof(want));
    fake_fini(&f);
}

static void test_reply_too_large_becomes_error(void)
{
    Querier__V1__ProfileTypesResponse resp;
    Types__V1__ProfileType pt, *list[1];
    fake_req_t f;

    sample_profile_types(&resp, &pt, list);
    fake_init(&f, "POST", "application/json", "{}", 2);
    f.req.resp_body.max = 75; /* the message needs 82 bytes, the error 67 */
    lc_connect_reply(&f.req, LC_CONNECT_JSON, &resp.base);
    LC_ASSERT_EQ(f.req.status, 429);
    LC_ASSERT_STR_EQ(resp_header(&f, "Content-Type"), "application/json");
    fake_fini(&f);
}

/* ---- end to end: lc_connect_register on a real lc_httpd ---- */

typedef struct e2e_server_s {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    lc_httpd_t *srv;
    int port;
} e2e_server_t;

static e2e_server_t e2e;

/* ProfileTypes stand-in: answers one type whose ID is "<start>-<end>";
 * start 404 fails with not_found, start 7 takes 30 ms. */
static int e2e_profile_types(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                             lc_status_t *st, void *data)
{
    const Querier__V1__ProfileTypesRequest *r = (const void *)in;
    LC_UNUSED(data);
    if (r->start == 404)
        return lc_status_set(st, LC_CODE_NOT_FOUND, "no such \"thing\"");
    if (r->start == 7)
        usleep(30000);
    Querier__V1__ProfileTypesResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Types__V1__ProfileType *pt = lc_arena_alloc(req->arena, sizeof(*pt));
    Types__V1__ProfileType **list = lc_arena_alloc(req->arena, sizeof(*list));
    querier__v1__profile_types_response__init(resp);
    types__v1__profile_type__init(pt);
    pt->id = lc_arena_sprintf(req->arena, "%lld-%lld", (long long)r->start, (long long)r->end);
    list[0] = pt;
    resp->n_profile_types = 1;
    resp->profile_types = list;
    *out = &resp->base;
    return 0;
}

static void e2e_on_closed(void *data)
{
    LC_UNUSED(data);
}

static void e2e_on_stop(uv_async_t *a)
{
    lc_httpd_close(e2e.srv, e2e_on_closed, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static void e2e_run(void *arg)
{
    LC_UNUSED(arg);
    uv_run(&e2e.loop, UV_RUN_DEFAULT);
}

static void e2e_start(void)
{
    lc_httpd_opts_t o = {
        .address = "127.0.0.1:0", .idle_timeout_ms = 5000, .read_timeout_ms = 5000};
    memset(&e2e, 0, sizeof(e2e));
    LC_ASSERT_OK(uv_loop_init(&e2e.loop));
    LC_ASSERT_OK(lc_httpd_new(&e2e.loop, &o, &e2e.srv));
    LC_ASSERT_OK(lc_connect_register(
        e2e.srv, "/querier.v1.QuerierService/ProfileTypes", LC_HTTP_SCOPE_READ,
        &querier__v1__profile_types_request__descriptor, e2e_profile_types, NULL));
    LC_ASSERT_OK(lc_httpd_listen(e2e.srv));
    e2e.port = lc_httpd_port(e2e.srv);
    LC_ASSERT_OK(uv_async_init(&e2e.loop, &e2e.stop, e2e_on_stop));
    LC_ASSERT_OK(uv_thread_create(&e2e.thread, e2e_run, NULL));
}

static void e2e_stop(void)
{
    uv_async_send(&e2e.stop);
    uv_thread_join(&e2e.thread);
    LC_ASSERT_OK(uv_loop_close(&e2e.loop));
}

typedef struct e2e_resp_s {
    int status;
    char head[4096];
    uint8_t body[16384];
    size_t body_len;
} e2e_resp_t;

/* Sends head (with "Connection: close" added) and body on a new connection
 * and reads the response until the server closes. */
static void e2e_call(const char *head, const void *body, size_t body_len, e2e_resp_t *r)
{
    static char raw[32768];
    char req_head[2048];
    size_t got = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e2e.port)};
    struct timeval tv = {.tv_sec = 5};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(r, 0, sizeof(*r));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    LC_ASSERT_OK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    int n = snprintf(req_head, sizeof(req_head),
                     "%sHost: t\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     head, body_len);
    LC_CHECK(send(fd, req_head, (size_t)n, MSG_NOSIGNAL) == n);
    if (body_len)
        LC_CHECK(send(fd, body, body_len, MSG_NOSIGNAL) == (ssize_t)body_len);
    for (ssize_t k; (k = recv(fd, raw + got, sizeof(raw) - got, 0)) > 0;)
        got += (size_t)k;
    close(fd);
    const char *end = memmem(raw, got, "\r\n\r\n", 4);
    LC_CHECK(end != NULL);
    if (!end)
        return;
    size_t head_len = (size_t)(end - raw) + 4;
    snprintf(r->head, sizeof(r->head), "%.*s", (int)head_len, raw);
    r->status = (int)strtol(r->head + 9, NULL, 10);
    r->body_len = got - head_len < sizeof(r->body) ? got - head_len : sizeof(r->body);
    memcpy(r->body, raw + head_len, r->body_len);
}

/* True if the response head has the header line "name: value" (name any case). */
static bool e2e_has_header(const e2e_resp_t *r, const char *name, const char *value)
{
    char line[512];
    snprintf(line, sizeof(line), "\r\n%s: %s\r\n", name, value);
    return strcasestr(r->head, line) != NULL;
}

static void e2e_expect_body(const e2e_resp_t *r, const char *want)
{
    LC_ASSERT_EQ(r->body_len, strlen(want));
    if (r->body_len == strlen(want))
        LC_ASSERT_MEM_EQ(r->body, want, r->body_len);
    else
        fprintf(stderr, "  body: %.*s\n", (int)r->body_len, (const char *)r->body);
}

#define E2E_POST "POST /querier.v1.QuerierService/ProfileTypes HTTP/1.1\r\n"

static void test_e2e_json_and_proto(void)
{
    static const uint8_t req_proto[] = {0x08, 0x05, 0x10, 0x06}; /* start=5 end=6 */
    /* ProfileTypesResponse{profile_types: [{ID: "5-6"}]}: field 1 (len 5) holding field 1 "5-6" */
    static const uint8_t resp_proto[] = {0x0a, 0x05, 0x0a, 0x03, '5', '-', '6'};
    const char *json = "{\"start\":\"1\",\"end\":2}";
    e2e_resp_t r;

    e2e_start();
    e2e_call(E2E_POST "Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\n", json,
             strlen(json), &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(e2e_has_header(&r, "Content-Type", "application/json"));
    e2e_expect_body(&r, "{\"profileTypes\":[{\"ID\":\"1-2\"}]}");

    e2e_call(E2E_POST "Content-Type: application/proto\r\n", req_proto, sizeof(req_proto), &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(e2e_has_header(&r, "Content-Type", "application/proto"));
    LC_ASSERT_EQ(r.body_len, sizeof(resp_proto));
    LC_ASSERT_MEM_EQ(r.body, resp_proto, sizeof(resp_proto));
    e2e_stop();
}

static void test_e2e_gzip_both_ways(void)
{
    const char *json = "{\"start\":3,\"end\":4}";
    lc_buf_t zipped, plain;
    e2e_resp_t r;

    lc_buf_init(&zipped, 1 << 16);
    lc_buf_init(&plain, 1 << 16);
    LC_ASSERT_OK(lc_gzip((const uint8_t *)json, strlen(json), 0, &zipped));
    e2e_start();
    e2e_call(E2E_POST "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
                      "Accept-Encoding: gzip\r\n",
             zipped.data, zipped.len, &r);
    LC_ASSERT_EQ(r.status, 200);
    LC_CHECK(e2e_has_header(&r, "Content-Encoding", "gzip"));
    LC_ASSERT_OK(lc_gunzip(r.body, r.body_len, 1 << 16, &plain));
    LC_ASSERT_OK(lc_buf_putc(&plain, '\0'));
    LC_ASSERT_STR_EQ((const char *)plain.data, "{\"profileTypes\":[{\"ID\":\"3-4\"}]}");
    e2e_stop();
    lc_buf_fini(&zipped);
    lc_buf_fini(&plain);
}

static void test_e2e_protocol_errors(void)
{
    e2e_resp_t r;

    e2e_start();
    e2e_call("GET /querier.v1.QuerierService/ProfileTypes HTTP/1.1\r\n", NULL, 0, &r);
    LC_ASSERT_EQ(r.status, 405);
    LC_CHECK(e2e_has_header(&r, "Allow", "POST"));

    e2e_call(E2E_POST "Content-Type: application/xml\r\n", "<a/>", 4, &r);
    LC_ASSERT_EQ(r.status, 415);
    LC_CHECK(e2e_has_header(&r, "Accept-Post", "application/json, application/proto"));

    e2e_call(E2E_POST "Content-Type: application/json\r\n", "", 0, &r);
    LC_ASSERT_EQ(r.status, 400);
    LC_CHECK(e2e_has_header(&r, "Content-Type", "application/json"));

    e2e_call(E2E_POST "Content-Type: application/json\r\nConnect-Protocol-Version: 2\r\n", "{}", 2,
             &r);
    LC_ASSERT_EQ(r.status, 400);
    e2e_expect_body(&r, "{\"code\":\"invalid_argument\",\"message\":"
                        "\"connect-protocol-version must be \\\"1\\\": got \\\"2\\\"\"}");
    e2e_stop();
}

static void test_e2e_handler_error_and_deadline(void)
{
    e2e_resp_t r;

    e2e_start();
    e2e_call(E2E_POST "Content-Type: application/json\r\n", "{\"start\":404}", 13, &r);
    LC_ASSERT_EQ(r.status, 404);
    LC_CHECK(e2e_has_header(&r, "Content-Type", "application/json"));
    e2e_expect_body(&r, "{\"code\":\"not_found\",\"message\":\"no such \\\"thing\\\"\"}");

    e2e_call(E2E_POST "Content-Type: application/json\r\nConnect-Timeout-Ms: 5\r\n",
             "{\"start\":7}", 11, &r);
    LC_ASSERT_EQ(r.status, 504);
    LC_CHECK(strstr((const char *)r.body, "deadline_exceeded") != NULL);

    e2e_call(E2E_POST "Content-Type: application/json\r\nConnect-Timeout-Ms: 5000\r\n",
             "{\"start\":7}", 11, &r);
    LC_ASSERT_EQ(r.status, 200);
    e2e_stop();
}

LC_TEST_MAIN(test_content_types_accepted, test_content_types_rejected, test_protocol_headers,
             test_accept_encoding, test_error_body_and_status, test_decode_rejects_wrong_method,
             test_decode_rejects_content_type, test_decode_rejects_protocol_version,
             test_decode_json_and_proto_bodies, test_decode_empty_and_bad_bodies,
             test_reply_json_plain_and_gzip, test_reply_proto, test_reply_too_large_becomes_error,
             test_e2e_json_and_proto, test_e2e_gzip_both_ways, test_e2e_protocol_errors,
             test_e2e_handler_error_and_deadline)
