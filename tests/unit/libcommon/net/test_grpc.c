/*
 * test_grpc.c — gRPC / gRPC-Web framing (lc/grpc.h) and its use by
 * lc_connect_decode / reply / error on hand-built requests. Expected bytes
 * are written by hand from the gRPC-Web spec (PROTOCOL-WEB.md: frame = flag
 * byte + 4-byte big-endian length; trailers frame flag 0x80).
 */
#include <strings.h>

#include "lc/alloc.h"
#include "lc/base64.h"
#include "lc/connect.h"
#include "lc/grpc.h"
#include "lc/gz.h"
#include "lc_test.h"
#include "querier/v1/querier.pb-c.h"

static void test_kinds(void)
{
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc-web"), LC_GRPC_WEB);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc-web+proto"), LC_GRPC_WEB);
    LC_ASSERT_EQ(lc_grpc_kind_of("Application/GRPC-Web-Text"), LC_GRPC_WEB_TEXT);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc-web-text+proto; charset=x"), LC_GRPC_WEB_TEXT);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc"), LC_GRPC_NATIVE);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc+proto"), LC_GRPC_NATIVE);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/grpc-web+json"), LC_GRPC_NONE);
    LC_ASSERT_EQ(lc_grpc_kind_of("application/proto"), LC_GRPC_NONE);
    LC_ASSERT_EQ(lc_grpc_kind_of(NULL), LC_GRPC_NONE);
}

static void test_base64(void)
{
    lc_arena_t *a = lc_arena_new(1 << 16);
    lc_status_t st;
    uint8_t *out;
    size_t n;
    LC_ASSERT_OK(lc_grpc_base64_decode((const uint8_t *)"aGVsbG8=", 8, a, &out, &n, &st));
    LC_ASSERT_EQ(n, 5);
    LC_ASSERT_MEM_EQ(out, "hello", 5);
    /* two padded chunks, as a streaming client writes them */
    LC_ASSERT_OK(lc_grpc_base64_decode((const uint8_t *)"aGk=aGk=", 8, a, &out, &n, &st));
    LC_ASSERT_EQ(n, 4);
    LC_ASSERT_MEM_EQ(out, "hihi", 4);
    LC_ASSERT_EQ(lc_grpc_base64_decode((const uint8_t *)"aGk", 3, a, &out, &n, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    LC_ASSERT_EQ(lc_grpc_base64_decode((const uint8_t *)"a*k=", 4, a, &out, &n, &st), -1);
    LC_ASSERT_EQ(lc_grpc_base64_decode((const uint8_t *)"a=k=", 4, a, &out, &n, &st), -1);
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_base64_encode((const uint8_t *)"hello", 5, &b));
    LC_ASSERT_EQ(b.len, 8);
    LC_ASSERT_MEM_EQ(b.data, "aGVsbG8=", 8);
    lc_buf_fini(&b);
    lc_arena_free(a);
}

static void test_unwrap(void)
{
    lc_arena_t *a = lc_arena_new(1 << 20);
    lc_status_t st;
    const uint8_t *msg;
    size_t n;
    const uint8_t one[] = {0, 0, 0, 0, 2, 0x08, 0x01};
    LC_ASSERT_OK(lc_grpc_unwrap_request(LC_GRPC_WEB, one, sizeof(one), NULL, a, &msg, &n, &st));
    LC_ASSERT_EQ(n, 2);
    LC_ASSERT_EQ(msg[0], 0x08);
    /* frame longer than the body */
    const uint8_t longer[] = {0, 0, 0, 0, 9, 0x08, 0x01};
    LC_ASSERT_EQ(
        lc_grpc_unwrap_request(LC_GRPC_WEB, longer, sizeof(longer), NULL, a, &msg, &n, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    /* truncated header, bad flags, bytes after the frame */
    LC_ASSERT_EQ(lc_grpc_unwrap_request(LC_GRPC_WEB, one, 3, NULL, a, &msg, &n, &st), -1);
    const uint8_t flags[] = {0x80, 0, 0, 0, 0};
    LC_ASSERT_EQ(lc_grpc_unwrap_request(LC_GRPC_WEB, flags, 5, NULL, a, &msg, &n, &st), -1);
    const uint8_t extra[] = {0, 0, 0, 0, 0, 7};
    LC_ASSERT_EQ(lc_grpc_unwrap_request(LC_GRPC_WEB, extra, 6, NULL, a, &msg, &n, &st), -1);
    /* compressed without gzip: unimplemented; with gzip: inflated */
    const uint8_t comp[] = {1, 0, 0, 0, 0};
    LC_ASSERT_EQ(lc_grpc_unwrap_request(LC_GRPC_WEB, comp, 5, NULL, a, &msg, &n, &st), -1);
    LC_ASSERT_EQ(st.code, LC_CODE_UNIMPLEMENTED);
    lc_buf_t z, frame;
    lc_buf_init(&z, LC_BUF_UNLIMITED);
    lc_buf_init(&frame, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip((const uint8_t *)"\x08\x05", 2, 0, &z));
    LC_ASSERT_OK(lc_grpc_append_frame(&frame, LC_GRPC_FLAG_COMPRESSED, z.data, z.len));
    LC_ASSERT_OK(
        lc_grpc_unwrap_request(LC_GRPC_WEB, frame.data, frame.len, "gzip", a, &msg, &n, &st));
    LC_ASSERT_EQ(n, 2);
    LC_ASSERT_EQ(msg[1], 5);
    /* text: base64 of the frame */
    lc_buf_t text;
    lc_buf_init(&text, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_base64_encode(one, sizeof(one), &text));
    LC_ASSERT_OK(
        lc_grpc_unwrap_request(LC_GRPC_WEB_TEXT, text.data, text.len, NULL, a, &msg, &n, &st));
    LC_ASSERT_EQ(n, 2);
    lc_buf_fini(&text);
    lc_buf_fini(&z);
    lc_buf_fini(&frame);
    lc_arena_free(a);
}

static void test_trailers_and_timeout(void)
{
    lc_buf_t b;
    lc_status_t st = {.code = LC_CODE_NOT_FOUND};
    snprintf(st.msg, sizeof(st.msg), "no 100%% match\n");
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_grpc_append_trailers(&b, &st));
    const char want[] = "grpc-status: 5\r\ngrpc-message: no 100%25 match%0A\r\n";
    LC_ASSERT_EQ(b.len, 5 + sizeof(want) - 1);
    LC_ASSERT_EQ(b.data[0], 0x80);
    LC_ASSERT_EQ(b.data[4], sizeof(want) - 1);
    LC_ASSERT_MEM_EQ(b.data + 5, want, sizeof(want) - 1);
    lc_buf_fini(&b);
    uint64_t ms = 0;
    LC_ASSERT_OK(lc_grpc_parse_timeout("10S", &ms, &st));
    LC_ASSERT_EQ(ms, 10000);
    LC_ASSERT_OK(lc_grpc_parse_timeout("1500u", &ms, &st));
    LC_ASSERT_EQ(ms, 2);
    LC_ASSERT_OK(lc_grpc_parse_timeout("2H", &ms, &st));
    LC_ASSERT_EQ(ms, 7200000);
    LC_ASSERT_EQ(lc_grpc_parse_timeout("123456789S", &ms, &st), -1);
    LC_ASSERT_EQ(lc_grpc_parse_timeout("10x", &ms, &st), -1);
    LC_ASSERT_EQ(lc_grpc_parse_timeout("S", &ms, &st), -1);
}

/* ---- through lc_connect on a hand-built request ---- */

typedef struct fake_req_s {
    lc_http_req_t req;
    lc_http_header_t headers[4];
} fake_req_t;

static void fake_init(fake_req_t *f, const char *ct, const void *body, size_t len)
{
    memset(f, 0, sizeof(*f));
    f->req.method = "POST";
    f->req.path = "/querier.v1.QuerierService/ProfileTypes";
    f->req.query = "";
    f->req.headers = f->headers;
    f->req.body = body;
    f->req.body_len = len;
    f->req.arena = lc_arena_new(1 << 20);
    f->req.status = 200;
    lc_buf_init(&f->req.resp_body, 1 << 20);
    f->headers[f->req.n_headers++] = (lc_http_header_t){"content-type", ct};
}

static void fake_fini(fake_req_t *f)
{
    lc_arena_free(f->req.arena);
    lc_buf_fini(&f->req.resp_body);
    lc_free(f->req._resp_headers);
    lc_free(f->req._trailers);
}

static void test_connect_decode_reply_web(void)
{
    const uint8_t body[] = {0, 0, 0, 0, 4, 0x08, 0x07, 0x10, 0x09}; /* start=7 end=9 */
    fake_req_t f;
    fake_init(&f, "application/grpc-web+proto", body, sizeof(body));
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_connect_decode(&f.req, &querier__v1__profile_types_request__descriptor, &msg,
                                   &codec, &st));
    LC_ASSERT_EQ(codec, LC_CONNECT_GRPC_WEB);
    LC_ASSERT_EQ(((Querier__V1__ProfileTypesRequest *)msg)->end, 9);
    lc_connect_reply(&f.req, codec, msg);
    const char tr[] = "grpc-status: 0\r\n";
    LC_ASSERT_EQ(f.req.status, 200);
    LC_ASSERT_EQ(f.req.resp_body.len, sizeof(body) + 5 + sizeof(tr) - 1);
    LC_ASSERT_MEM_EQ(f.req.resp_body.data, body, sizeof(body));
    LC_ASSERT_EQ(f.req.resp_body.data[sizeof(body)], 0x80);
    LC_ASSERT_MEM_EQ(f.req.resp_body.data + sizeof(body) + 5, tr, sizeof(tr) - 1);
    fake_fini(&f);
}

static void test_connect_errors(void)
{
    /* frame longer than the body, gRPC-Web text: a base64 trailer frame */
    lc_buf_t text;
    lc_buf_init(&text, LC_BUF_UNLIMITED);
    const uint8_t bad[] = {0, 0, 0, 0, 9, 0x08};
    LC_ASSERT_OK(lc_base64_encode(bad, sizeof(bad), &text));
    fake_req_t f;
    fake_init(&f, "application/grpc-web-text", text.data, text.len);
    ProtobufCMessage *msg;
    lc_connect_codec_t codec;
    lc_status_t st = {0};
    LC_ASSERT_EQ(lc_connect_decode(&f.req, &querier__v1__profile_types_request__descriptor, &msg,
                                   &codec, &st),
                 -1);
    lc_connect_error(&f.req, &st);
    LC_ASSERT_EQ(f.req.status, 200);
    uint8_t *raw;
    size_t n;
    LC_ASSERT_OK(lc_grpc_base64_decode(f.req.resp_body.data, f.req.resp_body.len, f.req.arena, &raw,
                                       &n, &st));
    LC_ASSERT_EQ(raw[0], 0x80);
    LC_ASSERT_MEM_EQ(raw + 5, "grpc-status: 3\r\n", 16);
    fake_fini(&f);
    lc_buf_fini(&text);

    /* native gRPC: Trailers-Only headers */
    fake_init(&f, "application/grpc", "", 0);
    lc_status_set(&st, LC_CODE_NOT_FOUND, "gone");
    lc_connect_error(&f.req, &st);
    LC_ASSERT_EQ(f.req.status, 200);
    bool seen = false;
    for (size_t i = 0; i < f.req._n_resp_headers; i++)
        if (strcasecmp(f.req._resp_headers[i].name, "grpc-status") == 0)
            seen = strcmp(f.req._resp_headers[i].value, "5") == 0;
    LC_ASSERT_EQ(seen, true);
    fake_fini(&f);
}

LC_TEST_MAIN(test_kinds, test_base64, test_unwrap, test_trailers_and_timeout,
             test_connect_decode_reply_web, test_connect_errors)
