/*
 * test_receivers.c — /ingest and Push end to end inside one process: a real
 * lc_httpd on loopback, the direct transport, the writer and an LMDB store in
 * a mkdtemp directory. A client thread sends requests over a socket (status
 * codes and error bodies of pyroscope-api.md §2.11 and §3.3); afterwards the
 * store is read back to see what was (and was not) stored. A profile the
 * writer cannot apply is answered 400, never 200.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lc/tenant.h"
#include "lc_test.h"
#include "push/v1/push.pb-c.h"
#include "receive_int.h"

/* ---------------------------------------------------------------- the server */

typedef struct env_s env_t;
typedef void (*script_fn)(env_t *e);

struct env_s {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t client;
    lc_httpd_t *httpd;
    lc_transport_t *tr;
    lc_store_t *store;
    ing_writer_t *writer;
    lc_metrics_t *metrics;
    ing_t *ing;
    int port;
    char dir[64];
    script_fn script;
};

static void env_on_transport_closed(void *data)
{
    env_t *e = data;
    uv_close((uv_handle_t *)&e->stop, NULL);
}

static void env_on_http_closed(void *data)
{
    env_t *e = data;
    lc_transport_close(e->tr, env_on_transport_closed, e);
}

static void env_on_stop(uv_async_t *a)
{
    env_t *e = a->data;
    lc_httpd_close(e->httpd, env_on_http_closed, e);
}

static void env_client_main(void *arg)
{
    env_t *e = arg;
    e->script(e);
    uv_async_send(&e->stop);
}

static void env_run(env_t *e, const ing_opts_t *opts, size_t max_backlog, script_fn script)
{
    memset(e, 0, sizeof(*e));
    e->script = script;
    snprintf(e->dir, sizeof(e->dir), "/tmp/ember-recv-XXXXXX");
    LC_CHECK(mkdtemp(e->dir) != NULL);
    lc_store_opts_t so = {.dir = e->dir};
    LC_ASSERT_OK(uv_loop_init(&e->loop));
    LC_ASSERT_OK(lc_store_open(&so, &e->store));
    e->metrics = lc_metrics_new();
    LC_ASSERT_OK(ing_writer_new(e->store, e->metrics, &e->writer));
    lc_direct_opts_t dopts = {.max_backlog_bytes = max_backlog};
    LC_ASSERT_OK(lc_transport_direct_new(&e->loop, &dopts, ing_writer_consume, e->writer, &e->tr));
    lc_httpd_opts_t ho = {.address = "127.0.0.1:0", .metrics = e->metrics};
    LC_ASSERT_OK(lc_httpd_new(&e->loop, &ho, &e->httpd));
    LC_ASSERT_OK(ing_new(&e->loop, opts, e->httpd, e->tr, e->metrics, &e->ing));
    LC_ASSERT_OK(lc_httpd_listen(e->httpd));
    e->port = lc_httpd_port(e->httpd);
    LC_ASSERT_OK(uv_async_init(&e->loop, &e->stop, env_on_stop));
    e->stop.data = e;
    LC_ASSERT_OK(uv_thread_create(&e->client, env_client_main, e));
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_thread_join(&e->client);
    LC_ASSERT_OK(uv_loop_close(&e->loop));
    ing_free(e->ing);
}

static void env_free(env_t *e)
{
    ing_writer_free(e->writer);
    lc_store_close(e->store);
    lc_metrics_free(e->metrics);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
    LC_ASSERT_OK(system(cmd));
}

/* ---------------------------------------------------------------- the client */

typedef struct resp_s {
    int status;
    char head[4096];
    char *body;
    size_t body_len;
} resp_t;

static void resp_free(resp_t *r)
{
    free(r->body);
}

static int send_all(int fd, const void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* One HTTP/1.1 request on a fresh connection (Connection: close). */
static resp_t http(env_t *e, const char *method, const char *target, const char *ctype,
                   const void *body, size_t len)
{
    resp_t r = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return r;
    char head[1024];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, target, ctype, len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while ((k = read(fd, buf + got, cap - got - 1)) > 0) {
        got += (size_t)k;
        if (got + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    close(fd);
    buf[got] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    sscanf(buf, "HTTP/1.1 %d", &r.status);
    if (sep) {
        snprintf(r.head, sizeof(r.head), "%.*s", (int)(sep - buf), buf);
        r.body_len = got - (size_t)(sep + 4 - buf);
        r.body = malloc(r.body_len + 1);
        memcpy(r.body, sep + 4, r.body_len + 1);
    }
    free(buf);
    return r;
}

static void expect(resp_t r, int status, const char *body_has, const char *what)
{
    if (r.status != status || (body_has && (!r.body || !strstr(r.body, body_has))))
        fprintf(stderr, "  %s: got %d %s\n", what, r.status, r.body ? r.body : "");
    LC_ASSERT_EQ(r.status, status);
    if (body_has)
        LC_CHECK(r.body && strstr(r.body, body_has));
    resp_free(&r);
}

static unsigned char *testdata(const char *rel, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LC_TESTDATA_DIR, rel);
    unsigned char *d = lc_test_read_file(path, len);
    LC_CHECK(d != NULL);
    return d;
}

/* A pyroscope-go style form (real-clients.md §2b). cfg/prev may be NULL. */
static char *go_form(const unsigned char *profile, size_t plen, const char *cfg, bool prev,
                     size_t *len)
{
    static const char b[] = "0123456789abcdef0123456789abcdef";
    size_t cap = plen * 2 + 4096;
    char *out = malloc(cap);
    size_t n = 0;
    if (profile) {
        n += (size_t)snprintf(out + n, cap - n,
                              "--%s\r\nContent-Disposition: form-data; name=\"profile\"; "
                              "filename=\"profile.pprof\"\r\n"
                              "Content-Type: application/octet-stream\r\n\r\n",
                              b);
        memcpy(out + n, profile, plen);
        n += plen;
        n += (size_t)snprintf(out + n, cap - n, "\r\n");
    }
    if (prev) {
        n += (size_t)snprintf(out + n, cap - n,
                              "--%s\r\nContent-Disposition: form-data; "
                              "name=\"prev_profile\"; filename=\"p\"\r\n\r\n",
                              b);
        memcpy(out + n, profile, plen);
        n += plen;
        n += (size_t)snprintf(out + n, cap - n, "\r\n");
    }
    if (cfg)
        n += (size_t)snprintf(out + n, cap - n,
                              "--%s\r\nContent-Disposition: form-data; "
                              "name=\"sample_type_config\"; "
                              "filename=\"sample_type_config.json\"\r\n\r\n%s\r\n",
                              b, cfg);
    n += (size_t)snprintf(out + n, cap - n, "--%s--\r\n", b);
    *len = n;
    return out;
}

#define GO_FORM_CT "multipart/form-data; boundary=0123456789abcdef0123456789abcdef"

/* A PushRequest (application/proto) of up to two series. */
static uint8_t *push_body(const char *const *labels1, const char *const *labels2,
                          const unsigned char *prof, size_t plen, size_t *len)
{
    Types__V1__LabelPair pairs[2][8], *pp[2][8];
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT, *samples[] = {&sample};
    sample.raw_profile = (ProtobufCBinaryData){plen, (uint8_t *)prof};
    Push__V1__RawProfileSeries s[2], *sp[2];
    const char *const *ls[2] = {labels1, labels2};
    size_t n_series = 0;
    for (; n_series < 2 && ls[n_series]; n_series++) {
        push__v1__raw_profile_series__init(&s[n_series]);
        size_t k = 0;
        for (; ls[n_series][2 * k]; k++) {
            types__v1__label_pair__init(&pairs[n_series][k]);
            pairs[n_series][k].name = (char *)ls[n_series][2 * k];
            pairs[n_series][k].value = (char *)ls[n_series][2 * k + 1];
            pp[n_series][k] = &pairs[n_series][k];
        }
        s[n_series].labels = pp[n_series];
        s[n_series].n_labels = k;
        s[n_series].samples = prof ? samples : NULL;
        s[n_series].n_samples = prof ? 1 : 0;
        sp[n_series] = &s[n_series];
    }
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.series = sp;
    req.n_series = n_series;
    *len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *out = malloc(*len ? *len : 1);
    protobuf_c_message_pack(&req.base, out);
    return out;
}

/* ---------------------------------------------------------------- reading back */

typedef struct find_s {
    const char *service, *type;
    int64_t total;
    size_t series;
} find_t;

static int find_profile(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    ((find_t *)data)->total += p->total;
    return 0;
}

static int find_series(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                       void *data)
{
    find_t *f = data;
    const char *svc = lc_labels_get(ls, "service_name"),
               *type = lc_labels_get(ls, "__profile_type__");
    if (!svc || strcmp(svc, f->service) != 0 || (f->type && (!type || strcmp(type, f->type) != 0)))
        return 0;
    f->series++;
    return lc_block_profiles(b, id, 0, INT64_MAX, find_profile, f);
}

/* Total stored for a service (and profile type, if given); -1 if no series. */
static int64_t stored(env_t *e, const char *service, const char *type)
{
    find_t f = {service, type, 0, 0};
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(e->store, 0, INT64_MAX, &r));
    const char *tenants[] = {"anonymous"};
    for (size_t i = 0; i < lc_store_reader_count(r); i++)
        LC_ASSERT_OK(
            lc_block_series(lc_store_reader_block(r, i), tenants, 1, NULL, find_series, &f));
    lc_store_read_end(r);
    return f.series ? f.total : -1;
}

/* The deepest stack stored in any block (root = depth 0). */
static uint32_t stored_max_depth(env_t *e)
{
    uint32_t deepest = 0;
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(e->store, 0, INT64_MAX, &r));
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        lc_block_t *b = lc_store_reader_block(r, i);
        uint32_t n = lc_block_node_count(b);
        uint32_t *parents = calloc(n ? n : 1, sizeof(*parents));
        LC_ASSERT_OK(lc_block_nodes(b, parents, NULL, n));
        for (uint32_t id = 0; id < n; id++) {
            uint32_t depth = 0;
            for (uint32_t k = id; k != 0 && depth <= n; k = parents[k])
                depth++;
            deepest = depth > deepest ? depth : deepest;
        }
        free(parents);
    }
    lc_store_read_end(r);
    return deepest;
}

/* ---------------------------------------------------------------- scripts */

/* tree: root -> a -> {b 3, c 2}; trie: "" -> "a;" -> {"b" 4, "c" 1} (§2.7). */
static const char TREE_BODY[] = "\x00\x00\x01"
                                "\x01"
                                "a\x00\x02"
                                "\x01"
                                "b\x03\x00"
                                "\x01"
                                "c\x02\x00";
static const char TRIE_BODY[] = "\x00\x00\x01"
                                "\x02"
                                "a;\x00\x02"
                                "\x01"
                                "b\x04\x00"
                                "\x01"
                                "c\x01\x00";

static void script_tree_formats(env_t *e)
{
    size_t tree_len = sizeof(TREE_BODY) - 1, trie_len = sizeof(TRIE_BODY) - 1;
    expect(http(e, "POST", "/ingest?name=tree-app&format=tree&sampleRate=0",
                "application/octet-stream", TREE_BODY, tree_len),
           200, NULL, "tree");
    expect(http(e, "POST", "/ingest?name=trie-app.wall", "binary/octet-stream+trie", TRIE_BODY,
                trie_len),
           200, NULL, "trie by content type");
    expect(http(e, "POST", "/ingest?name=x&format=tree", "application/octet-stream", TREE_BODY,
                tree_len - 1),
           422, "tree: truncated", "truncated tree");
    expect(http(e, "POST", "/ingest?name=my.app&format=tree", "application/octet-stream", TREE_BODY,
                tree_len),
           400, "unknown profile type", "tree with an unknown suffix");
    expect(http(e, "POST", "/ingest?name=pid-tree%7Bprofile_id%3Dabc%7D&format=trie",
                "application/octet-stream", TRIE_BODY, trie_len),
           200, NULL, "trie with a profile_id");
    expect(http(e, "POST", "/ingest?name=x&format=speedscope", "application/json", "x", 1), 422,
           "speedscope: invalid JSON", "bad speedscope");
    static const char several_none[] =
        "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
        "\"shared\":{\"frames\":[{\"name\":\"a\"}]},\"profiles\":["
        "{\"type\":\"sampled\",\"name\":\"p1\",\"unit\":\"none\",\"samples\":[[0]],"
        "\"weights\":[1]},"
        "{\"type\":\"sampled\",\"name\":\"p2\",\"unit\":\"none\",\"samples\":[[0]],"
        "\"weights\":[1]}]}";
    expect(http(e, "POST", "/ingest?name=ss-none&format=speedscope", "application/json",
                several_none, sizeof(several_none) - 1),
           422, "unknown profile type: none", "several speedscope profiles in unit none");
}

static void script_ingest(env_t *e)
{
    const char *folded = "a;b 3\na;c 2\n";
    expect(http(e, "POST", "/ingest?name=fold-app.cpu%7Benv%3Dt%7D&sampleRate=100", "text/plain",
                folded, strlen(folded)),
           200, NULL, "folded");
    expect(http(e, "POST", "/pyroscope/ingest?name=lines-app&format=lines&sampleRate=0",
                "text/plain", "a;b\na;b\nc\n", 10),
           200, NULL, "lines");
    expect(http(e, "POST", "/ingest?name=x&format=jfr", "application/octet-stream", "x", 1), 422,
           "invalid jfr: truncated chunk header", "jfr too short");
    script_tree_formats(e);
    expect(http(e, "POST", "/ingest?name=my.app", "text/plain", "a 1\n", 4), 400,
           "unknown profile type", "unknown suffix");
    expect(http(e, "POST", "/ingest?name=bad%20app", "text/plain", "a 1\n", 4), 400,
           "\"code\":\"invalid_argument\"", "bad name");
    expect(http(e, "POST", "/ingest?name=app.cpu", "text/plain", "a x\n", 4), 422,
           "\"code\":\"unknown\"", "bad folded count");
    expect(http(e, "POST", "/ingest?name=pid-app%7Bprofile_id%3Dabc%7D", "text/plain", "a 1\n", 4),
           200, NULL, "profile_id upload");
    expect(http(e, "GET", "/ingest?name=x", "text/plain", "", 0), 405, NULL, "GET");

    size_t plen, clen, flen;
    unsigned char *block = testdata("ingest/req_3.pprof", &plen);
    unsigned char *cfg = testdata("ingest/req_3.st.json", &clen);
    char *cfgz = strndup((char *)cfg, clen);
    char *form = go_form(block, plen, cfgz, false, &flen);
    expect(http(e, "POST", "/ingest?name=go-block%7B__session_id__%3Dabc%7D&spyName=gospy",
                GO_FORM_CT, form, flen),
           200, NULL, "Go SDK block profile");
    expect(http(e, "POST", "/ingest?name=sniff-app&format=pprof", "application/octet-stream", form,
                flen),
           200, NULL, "format=pprof with a multipart body (lenient)");
    free(form);
    form = go_form(block, plen, NULL, true, &flen);
    expect(http(e, "POST", "/ingest?name=prev-app", GO_FORM_CT, form, flen), 422,
           "unsupported client version", "prev_profile");
    free(form);
    form = go_form(NULL, 0, cfgz, false, &flen);
    expect(http(e, "POST", "/ingest?name=noprofile-app", GO_FORM_CT, form, flen), 200, NULL,
           "form without a profile part");
    free(form);
    form = go_form(block, plen, "{\"contentions\":", false, &flen);
    expect(http(e, "POST", "/ingest?name=badcfg-app", GO_FORM_CT, form, flen), 422,
           "sample_type_config", "bad sample_type_config");
    free(form);
    free(cfgz);
    free(cfg);
    free(block);

    unsigned char *cpu = testdata("pprof/pyroscope-cpu.pprof", &plen);
    expect(
        http(e, "POST", "/ingest?name=raw-cpu&format=pprof", "application/octet-stream", cpu, plen),
        200, NULL, "raw pprof");
    expect(http(e, "POST", "/ingest?name=trunc-cpu&format=pprof", "application/octet-stream", cpu,
                plen / 2),
           422, "\"code\":\"unknown\"", "truncated pprof");
    size_t blen;
    const char *ok[] = {"__name__", "process_cpu", "service_name", "push-ok", NULL};
    const char *no_name[] = {"service_name", "push-bad", NULL};
    uint8_t *body = push_body(ok, no_name, cpu, plen, &blen);
    expect(http(e, "POST", "/push.v1.PusherService/Push", "application/proto", body, blen), 400,
           "1 of 2 profiles rejected", "Push with one bad series");
    free(body);
    body = push_body(ok, NULL, NULL, 0, &blen);
    expect(http(e, "POST", "/push.v1.PusherService/Push", "application/proto", body, blen), 400,
           "no profiles received", "Push without samples");
    free(body);
    const char *ok2[] = {"__name__", "process_cpu", "service_name", "push-ok2", NULL};
    body = push_body(ok2, NULL, cpu, plen, &blen);
    resp_t r = http(e, "POST", "/push.v1.PusherService/Push", "application/proto", body, blen);
    LC_ASSERT_EQ(r.status, 200);
    LC_ASSERT_EQ(r.body_len, 0); /* an empty PushResponse */
    LC_CHECK(strstr(r.head, "application/proto") != NULL);
    resp_free(&r);
    free(body);
    free(cpu);
}

static void test_ingest_and_push(void)
{
    env_t e;
    ing_opts_t o;
    ing_opts_default(&o);
    env_run(&e, &o, 256u << 20, script_ingest);
    /* 5 folded samples x (1e9 / 100) ns */
    LC_ASSERT_EQ(stored(&e, "fold-app", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"), 50000000);
    LC_ASSERT_EQ(stored(&e, "lines-app", "process_cpu:samples:count::"), 3);
    /* MANIFEST totals of ingest/req_3.pprof and pprof/pyroscope-cpu.pprof */
    LC_ASSERT_EQ(stored(&e, "go-block", "block:contentions:count:contentions:count"), 43);
    LC_ASSERT_EQ(stored(&e, "go-block", "block:delay:nanoseconds:contentions:count"),
                 22674240703LL);
    LC_ASSERT_EQ(stored(&e, "sniff-app", "block:contentions:count:contentions:count"), 43);
    LC_ASSERT_EQ(stored(&e, "raw-cpu", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"), 470000000);
    LC_ASSERT_EQ(stored(&e, "push-ok", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"), 470000000);
    LC_ASSERT_EQ(stored(&e, "push-ok2", "process_cpu:samples:count:cpu:nanoseconds"), 47);
    LC_ASSERT_EQ(stored(&e, "tree-app", "process_cpu:samples:count::"), 5);
    /* 5 trie samples x (1e9 / 100) ns */
    LC_ASSERT_EQ(stored(&e, "trie-app", "wall:wall:nanoseconds:cpu:nanoseconds"), 50000000);
    static const char *const absent[] = {
        "pid-app", "prev-app", "noprofile-app", "badcfg-app", "trunc-cpu", "push-bad",
        "x",       "my",       "pid-tree",      "ss-none"};
    for (size_t i = 0; i < LC_ARRAY_LEN(absent); i++)
        LC_ASSERT_EQ(stored(&e, absent[i], NULL), -1);
    lc_metric_t *m =
        lc_metrics_counter(e.metrics, "ember_ingest_profiles_total", "", "route=\"ingest\"");
    LC_ASSERT_EQ(lc_metric_value(m), 7); /* fold, lines, go-block, sniff-app, raw-cpu, tree, trie */
    env_free(&e);
}

/* Validation cuts every stack to one frame: what is stored must be the cut
 * profile, encoded again, not the bytes that were received. */
static void script_normalised(env_t *e)
{
    size_t plen, blen;
    unsigned char *cpu = testdata("pprof/pyroscope-cpu.pprof", &plen);
    expect(http(e, "POST", "/ingest?name=cut-ingest&format=pprof", "application/octet-stream", cpu,
                plen),
           200, NULL, "raw pprof with deep stacks");
    const char *labels[] = {"__name__", "process_cpu", "service_name", "cut-push", NULL};
    uint8_t *body = push_body(labels, NULL, cpu, plen, &blen);
    expect(http(e, "POST", "/push.v1.PusherService/Push", "application/proto", body, blen), 200,
           NULL, "Push with deep stacks");
    free(body);
    free(cpu);
}

static void test_normalised_profiles_are_encoded_again(void)
{
    env_t e;
    ing_opts_t o;
    ing_opts_default(&o);
    env_run(&e, &o, 256u << 20, script_normalised);
    LC_CHECK(stored_max_depth(&e) > 1); /* as received: the stacks are deeper */
    env_free(&e);
    o.limits.max_stack_depth = 1;
    env_run(&e, &o, 256u << 20, script_normalised);
    LC_ASSERT_EQ(stored_max_depth(&e), 1);
    const char *type = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    LC_ASSERT_EQ(stored(&e, "cut-ingest", type), 470000000); /* MANIFEST */
    LC_ASSERT_EQ(stored(&e, "cut-push", type), 470000000);
    env_free(&e);
}

static void script_limits(env_t *e)
{
    size_t plen;
    unsigned char *cpu = testdata("pprof/pyroscope-cpu.pprof", &plen); /* from 2021 */
    expect(
        http(e, "POST", "/ingest?name=old-cpu&format=pprof", "application/octet-stream", cpu, plen),
        400, "older than the ingestion window", "old profile");
    resp_t r = http(e, "POST", "/ingest?name=fresh.cpu", "text/plain", "a 1\n", 4);
    LC_ASSERT_EQ(r.status, 429); /* the tiny backlog cannot take the profile */
    LC_CHECK(strstr(r.head, "Retry-After: 1") != NULL || strstr(r.head, "retry-after: 1") != NULL);
    LC_CHECK(r.body && strstr(r.body, "resource_exhausted"));
    resp_free(&r);
    free(cpu);
}

static void test_window_and_backpressure(void)
{
    env_t e;
    ing_opts_t o;
    ing_opts_default(&o);
    o.reject_older_than_ns = 3600LL * 1000000000LL;
    env_run(&e, &o, 16, script_limits);
    LC_ASSERT_EQ(stored(&e, "old-cpu", NULL), -1);
    LC_ASSERT_EQ(stored(&e, "fresh", NULL), -1);
    env_free(&e);
}

static void script_tenants(env_t *e)
{
    expect(http(e, "POST", "/ingest?name=t-app.cpu", "text/plain", "a 1\n", 4), 401,
           "unauthenticated", "no X-Scope-OrgID");
}

static void test_multitenancy_requires_header(void)
{
    env_t e;
    ing_opts_t o;
    ing_opts_default(&o);
    o.multitenancy = true;
    env_run(&e, &o, 256u << 20, script_tenants);
    env_free(&e);
}

/* Two stacks of 2^63-1 each: the profile's total overflows int64, which the
 * store would refuse (issue 25). The receiver refuses it first (422, /ingest's
 * code for a profile it cannot use, naming the reason) and nothing of it is
 * stored; the profiles around it are. */
static void script_overflow(env_t *e)
{
    const char *ok = "a;b\na;b\nc\n";
    const char *huge = "a;b 9223372036854775807\na;c 9223372036854775807\n";
    expect(http(e, "POST", "/ingest?name=before-app&format=lines&sampleRate=0", "text/plain", ok,
                strlen(ok)),
           200, NULL, "valid before");
    expect(http(e, "POST", "/ingest?name=huge-app&sampleRate=0", "text/plain", huge, strlen(huge)),
           422, "past int64", "total over int64");
    expect(http(e, "POST", "/ingest?name=after-app&format=lines&sampleRate=0", "text/plain", ok,
                strlen(ok)),
           200, NULL, "valid after");
}

static void test_overflowing_profile_refused_alone(void)
{
    env_t e;
    ing_opts_t o;
    ing_opts_default(&o);
    env_run(&e, &o, 256u << 20, script_overflow);
    LC_ASSERT_EQ(stored(&e, "before-app", "process_cpu:samples:count::"), 3);
    LC_ASSERT_EQ(stored(&e, "after-app", "process_cpu:samples:count::"), 3);
    LC_ASSERT_EQ(stored(&e, "huge-app", NULL), -1);
    env_free(&e);
}

LC_TEST_MAIN(test_ingest_and_push, test_normalised_profiles_are_encoded_again,
             test_window_and_backpressure, test_multitenancy_requires_header,
             test_overflowing_profile_refused_alone)
