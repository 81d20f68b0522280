/*
 * test_redis.c — lc_redis against a real redis-server: URL parsing, the
 * handshake (AUTH, SELECT), replies, the per-command timeout (a slow command
 * behind a blocking one times out alone; an overdue oldest command drops and
 * re-establishes the link), fail-fast while down, reconnection after the
 * server comes back, and exactly one callback per command on every path,
 * close included. Every test ends with uv_loop_close() == 0.
 */
#include <stdbool.h>
#include <string.h>

#include "lc/redis.h"
#include "lc_test.h"
#include "test_redis_server.h"

typedef struct probe_s {
    int ups, downs;
    int replies, errors; /* callbacks with status 0 / < 0 */
    int last_status;
    char last_str[64];
    long long last_int;
    int last_type;
    bool closed;
    lc_redis_t *close_in_cb; /* closed from inside the next reply callback */
} probe_t;

static void on_state(lc_redis_t *r, bool up, void *data)
{
    probe_t *p = data;
    LC_UNUSED(r);
    if (up)
        p->ups++;
    else
        p->downs++;
}

static void on_reply(lc_redis_t *r, int status, const redisReply *reply, void *data)
{
    probe_t *p = data;
    LC_UNUSED(r);
    p->last_status = status;
    if (status) {
        p->errors++;
        return;
    }
    p->replies++;
    p->last_type = reply->type;
    p->last_int = reply->integer;
    p->last_str[0] = 0;
    if (reply->str)
        snprintf(p->last_str, sizeof(p->last_str), "%.*s", (int)reply->len, reply->str);
    if (p->close_in_cb) {
        lc_redis_close(p->close_in_cb, NULL, NULL);
        p->close_in_cb = NULL;
    }
}

static void on_closed(void *data)
{
    ((probe_t *)data)->closed = true;
}

static bool is_up(void *arg)
{
    return lc_redis_is_up(arg);
}
static bool is_down(void *arg)
{
    return !lc_redis_is_up(arg);
}
static bool two_answers(void *arg)
{
    probe_t *p = arg;
    return p->replies + p->errors >= 2;
}
static bool one_answer(void *arg)
{
    probe_t *p = arg;
    return p->replies + p->errors >= 1;
}

static lc_redis_t *open_conn(uv_loop_t *loop, const char *url, probe_t *p, uint32_t timeout_ms)
{
    lc_redis_opts_t o = {.url = url,
                         .name = "test",
                         .cmd_timeout_ms = timeout_ms,
                         .connect_timeout_ms = 1000,
                         .backoff_max_ms = 400,
                         .on_state = on_state,
                         .state_data = p};
    lc_redis_t *r = NULL;
    LC_ASSERT_OK(lc_redis_new(loop, &o, &r));
    return r;
}

static void close_and_drain(uv_loop_t *loop, lc_redis_t *r, probe_t *p)
{
    lc_redis_close(r, on_closed, p);
    uv_run(loop, UV_RUN_DEFAULT);
    LC_CHECK(p->closed);
    LC_ASSERT_OK(uv_loop_close(loop));
}

static void test_url_parse(void)
{
    lc_redis_url_t u;
    LC_ASSERT_OK(lc_redis_url_parse("redis://127.0.0.1", &u));
    LC_ASSERT_STR_EQ(u.host, "127.0.0.1");
    LC_ASSERT_EQ(u.port, 6379);
    LC_ASSERT_EQ(u.db, 0);
    LC_ASSERT_OK(lc_redis_url_parse("redis://redis.ns.svc:6380/3", &u));
    LC_ASSERT_STR_EQ(u.host, "redis.ns.svc");
    LC_ASSERT_EQ(u.port, 6380);
    LC_ASSERT_EQ(u.db, 3);
    LC_ASSERT_OK(lc_redis_url_parse("redis://:p%40ss@[::1]:7000/", &u));
    LC_ASSERT_STR_EQ(u.host, "::1");
    LC_ASSERT_STR_EQ(u.password, "p@ss");
    LC_ASSERT_STR_EQ(u.user, "");
    LC_ASSERT_EQ(u.port, 7000);
    LC_ASSERT_OK(lc_redis_url_parse("redis://ember:s3cret@h:1", &u));
    LC_ASSERT_STR_EQ(u.user, "ember");
    LC_ASSERT_STR_EQ(u.password, "s3cret");
    LC_ASSERT_OK(lc_redis_url_parse("redis://token@h", &u));
    LC_ASSERT_STR_EQ(u.password, "token");
    const char *bad[] = {"",
                         "http://h",
                         "redis://",
                         "redis://h:0",
                         "redis://h:65536",
                         "redis://h:x",
                         "redis://h/x",
                         "redis://h/1/2",
                         "redis://[::1",
                         "redis://::1",
                         "redis://h?db=1",
                         "redis://:%4@h",
                         "redis://:%zz@h",
                         "redis://:a%00b@h",
                         "redis://h:/"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        int rc = lc_redis_url_parse(bad[i], &u);
        if (rc != LC_EINPUT)
            fprintf(stderr, "accepted bad url: %s\n", bad[i]);
        LC_ASSERT_EQ(rc, LC_EINPUT);
    }
    LC_ASSERT_EQ(lc_redis_url_parse(NULL, &u), LC_EINPUT);
}

static void test_bad_url_is_refused(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_redis_opts_t o = {.url = "redis://h:99999"};
    lc_redis_t *r = NULL;
    LC_ASSERT_EQ(lc_redis_new(&loop, &o, &r), LC_EINPUT);
    LC_CHECK(r == NULL);
    LC_ASSERT_OK(uv_loop_close(&loop));
}

static void test_commands_and_replies(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 2000);
    LC_CHECK(!lc_redis_is_up(r));
    LC_ASSERT_EQ(lc_redis_commandf(r, 0, on_reply, &p, "PING"), LC_REDIS_EDOWN);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_EQ(p.ups, 1);
    const char *argv[] = {"SET", "k", "a\0b"};
    const size_t lens[] = {3, 1, 3};
    LC_ASSERT_OK(lc_redis_command(r, 0, on_reply, &p, 3, argv, lens));
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &p, "STRLEN %s", "k"));
    LC_CHECK(test_run_until(&loop, two_answers, &p, 3000));
    LC_ASSERT_EQ(p.replies, 2);
    LC_ASSERT_EQ(p.last_type, REDIS_REPLY_INTEGER);
    LC_ASSERT_EQ(p.last_int, 3);
    probe_t e = {0};
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &e, "XADD %s", "k"));
    LC_CHECK(test_run_until(&loop, one_answer, &e, 3000));
    LC_ASSERT_EQ(e.replies, 1); /* an error reply is still a reply */
    LC_ASSERT_EQ(e.last_type, REDIS_REPLY_ERROR);
    LC_ASSERT_STR_EQ(e.last_str, "ERR wrong number of arguments for 'xadd' command");
    close_and_drain(&loop, r, &p);
    LC_ASSERT_EQ(p.downs, 0); /* closing is not "down" */
    test_redis_finish(&srv);
}

static void test_auth_and_select(void)
{
    test_redis_t srv = {.password = "pw"};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    char url[160];
    snprintf(url, sizeof(url), "%s/5", srv.url);
    probe_t p = {0};
    lc_redis_t *r = open_conn(&loop, url, &p, 2000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &p, "SET %s %s", "db5", "yes"));
    LC_CHECK(test_run_until(&loop, one_answer, &p, 3000));
    LC_ASSERT_EQ(test_redis_int(&srv, "EXISTS db5"), 0); /* not in db 0 */
    redisContext *c = test_redis_connect(&srv);
    redisReply *rep = redisCommand(c, "SELECT 5");
    freeReplyObject(rep);
    rep = redisCommand(c, "EXISTS db5");
    LC_ASSERT_EQ(rep->integer, 1);
    freeReplyObject(rep);
    redisFree(c);
    close_and_drain(&loop, r, &p);

    /* A wrong password never comes up, and closing it is clean. */
    uv_loop_init(&loop);
    snprintf(url, sizeof(url), "redis://:nope@127.0.0.1:%d", srv.port);
    probe_t q = {0};
    r = open_conn(&loop, url, &q, 2000);
    LC_CHECK(!test_run_until(&loop, is_up, r, 600));
    LC_ASSERT_EQ(q.ups, 0);
    close_and_drain(&loop, r, &q);
    test_redis_finish(&srv);
}

static void test_timeout_behind_blocking_command(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0}, blocked = {0}, quick = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 3000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_OK(lc_redis_commandf(r, 3000, on_reply, &blocked, "BLPOP %s %s", "nolist", "1"));
    LC_ASSERT_OK(lc_redis_commandf(r, 100, on_reply, &quick, "PING"));
    uint64_t t0 = uv_hrtime();
    LC_CHECK(test_run_until(&loop, one_answer, &quick, 3000));
    uint64_t waited_ms = (uv_hrtime() - t0) / 1000000u;
    LC_ASSERT_EQ(quick.errors, 1);
    LC_ASSERT_EQ(quick.last_status, LC_ETIMEOUT);
    LC_CHECK(waited_ms < 900); /* well before BLPOP returns */
    LC_CHECK(test_run_until(&loop, one_answer, &blocked, 3000));
    LC_ASSERT_EQ(blocked.replies, 1);
    LC_ASSERT_EQ(blocked.last_type, REDIS_REPLY_NIL);
    LC_ASSERT_EQ(quick.errors + quick.replies, 1); /* the late PONG was swallowed */
    LC_ASSERT_EQ(p.downs, 0);
    close_and_drain(&loop, r, &p);
    test_redis_finish(&srv);
}

static void test_overdue_oldest_command_drops_the_link(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0}, stuck = {0}, behind = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 3000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_OK(lc_redis_commandf(r, 200, on_reply, &stuck, "BLPOP %s %s", "nolist", "5"));
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &behind, "PING"));
    LC_CHECK(test_run_until(&loop, one_answer, &behind, 3000));
    LC_ASSERT_EQ(stuck.errors, 1);
    LC_ASSERT_EQ(stuck.last_status, LC_ETIMEOUT);
    LC_ASSERT_EQ(behind.errors, 1);
    LC_ASSERT_EQ(behind.last_status, LC_REDIS_ELOST);
    LC_ASSERT_EQ(p.downs, 1);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000)); /* back by itself */
    LC_ASSERT_EQ(p.ups, 2);
    close_and_drain(&loop, r, &p);
    LC_ASSERT_EQ(stuck.errors + stuck.replies, 1);
    test_redis_finish(&srv);
}

static void test_reconnects_after_server_restart(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0}, inflight = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 5000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_OK(lc_redis_commandf(r, 5000, on_reply, &inflight, "BLPOP %s %s", "l", "4"));
    uv_run(&loop, UV_RUN_NOWAIT);
    test_redis_stop(&srv, SIGKILL); /* unread BLPOP bytes: the client gets a reset */
    LC_CHECK(test_run_until(&loop, is_down, r, 3000));
    LC_ASSERT_EQ(p.downs, 1);
    LC_ASSERT_EQ(inflight.errors, 1);
    LC_ASSERT_EQ(inflight.last_status, LC_REDIS_ELOST);
    probe_t refused = {0};
    LC_ASSERT_EQ(lc_redis_commandf(r, 0, on_reply, &refused, "PING"), LC_REDIS_EDOWN);
    uv_sleep(300); /* a few failed attempts while it is away */
    LC_ASSERT_OK(test_redis_restart(&srv));
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_EQ(p.ups, 2);
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &p, "PING"));
    LC_CHECK(test_run_until(&loop, one_answer, &p, 3000));
    LC_ASSERT_STR_EQ(p.last_str, "PONG");
    LC_ASSERT_EQ(refused.replies + refused.errors, 0);
    close_and_drain(&loop, r, &p);
    test_redis_finish(&srv);
}

static void test_server_absent_at_start(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    test_redis_stop(&srv, SIGTERM);
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 2000);
    LC_CHECK(!test_run_until(&loop, is_up, r, 500));
    LC_ASSERT_EQ(p.downs, 0); /* never up, so never "down" */
    LC_ASSERT_OK(test_redis_restart(&srv));
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    LC_ASSERT_EQ(p.ups, 1);
    close_and_drain(&loop, r, &p);
    test_redis_finish(&srv);

    /* Closing while it is still trying is clean too. */
    uv_loop_init(&loop);
    probe_t q = {0};
    r = open_conn(&loop, "redis://127.0.0.1:1", &q, 2000);
    uv_run(&loop, UV_RUN_NOWAIT);
    close_and_drain(&loop, r, &q);
}

static void test_close_fails_inflight_once(void)
{
    test_redis_t srv = {0};
    LC_ASSERT_OK(test_redis_start(&srv, false));
    uv_loop_t loop;
    uv_loop_init(&loop);
    probe_t p = {0}, first = {0}, rest = {0};
    lc_redis_t *r = open_conn(&loop, srv.url, &p, 2000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    first.close_in_cb = r; /* the first reply closes the connection */
    LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &first, "PING"));
    for (int i = 0; i < 10; i++)
        LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &rest, "PING"));
    uv_run(&loop, UV_RUN_DEFAULT); /* everything ends: the close frees r */
    LC_ASSERT_EQ(first.replies, 1);
    LC_ASSERT_EQ(rest.replies + rest.errors, 10);
    LC_CHECK(rest.errors == 0 || rest.last_status == LC_ECLOSED);
    LC_ASSERT_OK(uv_loop_close(&loop));

    /* Closing with commands in flight answers each of them with LC_ECLOSED. */
    uv_loop_init(&loop);
    probe_t q = {0}, pending = {0};
    r = open_conn(&loop, srv.url, &q, 2000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    for (int i = 0; i < 5; i++)
        LC_ASSERT_OK(lc_redis_commandf(r, 0, on_reply, &pending, "BLPOP %s %s", "l", "1"));
    close_and_drain(&loop, r, &q);
    LC_ASSERT_EQ(pending.errors, 5);
    LC_ASSERT_EQ(pending.last_status, LC_ECLOSED);
    test_redis_finish(&srv);
}

/* ---- a fake server on the test loop: answers the handshake, then resets the idle link. */

typedef struct fake_s {
    uv_tcp_t listener, conn;
    uv_timer_t reset_timer;
    uv_write_t wr;
    char buf[256];
    bool accepted, reset;
} fake_t;

static void fake_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    fake_t *f = h->data;
    LC_UNUSED(hint);
    *out = uv_buf_init(f->buf, sizeof(f->buf));
}

static void fake_on_reset_timer(uv_timer_t *t)
{
    fake_t *f = t->data;
    f->reset = true;
    uv_tcp_close_reset(&f->conn, NULL); /* RST, not FIN */
}

/* Answers every command of the (pipelined) handshake with +PONG, then arms the reset. */
static void fake_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    fake_t *f = s->data;
    static char pongs[] = "+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n";
    int commands = 0;
    for (ssize_t i = 0; i < n; i++)
        commands += buf->base[i] == '*' && (i == 0 || buf->base[i - 1] == '\n');
    if (commands == 0)
        return;
    uv_buf_t b = uv_buf_init(pongs, (unsigned)(7 * (commands < 4 ? commands : 4)));
    LC_ASSERT_OK(uv_write(&f->wr, s, &b, 1, NULL));
    uv_read_stop(s);
    uv_timer_start(&f->reset_timer, fake_on_reset_timer, 100, 0);
}

static void fake_on_connection(uv_stream_t *server, int status)
{
    fake_t *f = server->data;
    LC_ASSERT_OK(status);
    uv_tcp_init(server->loop, &f->conn);
    f->conn.data = f;
    LC_ASSERT_OK(uv_accept(server, (uv_stream_t *)&f->conn));
    f->accepted = true;
    uv_close((uv_handle_t *)&f->listener, NULL); /* one connection only */
    uv_read_start((uv_stream_t *)&f->conn, fake_alloc, fake_on_read);
}

static int fake_listen(uv_loop_t *loop, fake_t *f)
{
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, &f->listener);
    uv_timer_init(loop, &f->reset_timer);
    f->listener.data = f->reset_timer.data = f;
    LC_ASSERT_OK(uv_tcp_bind(&f->listener, (const struct sockaddr *)&a, 0));
    LC_ASSERT_OK(uv_listen((uv_stream_t *)&f->listener, 4, fake_on_connection));
    int len = sizeof(a);
    uv_tcp_getsockname(&f->listener, (struct sockaddr *)&a, &len);
    return ntohs(a.sin_port);
}

static void test_reset_of_an_idle_link_is_noticed(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake_t f = {0};
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fake_listen(&loop, &f));
    probe_t p = {0};
    lc_redis_t *r = open_conn(&loop, url, &p, 5000);
    LC_CHECK(test_run_until(&loop, is_up, r, 3000));
    uint64_t t0 = uv_hrtime();
    LC_CHECK(test_run_until(&loop, is_down, r, 3000));
    LC_CHECK(f.reset);
    LC_ASSERT_EQ(p.downs, 1);
    LC_CHECK((uv_hrtime() - t0) / 1000000u < 1000); /* seen at once, no command needed */
    uv_close((uv_handle_t *)&f.reset_timer, NULL);
    close_and_drain(&loop, r, &p);
}

LC_TEST_MAIN(test_url_parse, test_bad_url_is_refused, test_commands_and_replies,
             test_auth_and_select, test_timeout_behind_blocking_command,
             test_overdue_oldest_command_drops_the_link, test_reconnects_after_server_restart,
             test_server_absent_at_start, test_close_fails_inflight_once,
             test_reset_of_an_idle_link_is_noticed)
