/*
 * test_redis_server.h — a real redis-server child for the Redis unit tests.
 *
 * test_redis_start() picks a free loopback port, makes a fresh data dir and
 * runs `redis-server` in the foreground as a child (no RDB snapshots; AOF
 * with appendfsync always when asked), then waits until it answers PING.
 * test_redis_stop() ends it by pid (SIGTERM, or SIGKILL to simulate a crash)
 * and reaps it (and it dies with the test process if that crashes); test_redis_restart() starts it
 * again on the same port and dir, so an AOF brings the data back. A synchronous hiredis client
 * (test_redis_cmd) lets tests look at streams behind the code under test.
 */
#ifndef TEST_REDIS_SERVER_H
#define TEST_REDIS_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <uv.h>

typedef struct test_redis_s {
    pid_t pid;
    int port;
    bool aof;
    const char *password; /* NULL = no requirepass */
    int replica_of;       /* a port on 127.0.0.1: start as its replica (0 = a master) */
    bool cluster;         /* cluster-enabled yes (nodes.conf in dir) */
    char dir[64];
    char url[128];
} test_redis_t;

static int test_redis_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static redisContext *test_redis_connect(const test_redis_t *s)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (s->password) {
        redisReply *r = redisCommand(c, "AUTH %s", s->password);
        if (r)
            freeReplyObject(r);
    }
    return c;
}

static bool test_redis_ping(const test_redis_t *s)
{
    redisContext *c = test_redis_connect(s);
    if (!c)
        return false;
    redisReply *r = redisCommand(c, "PING");
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

static void test_redis_exec(const test_redis_t *s)
{
    char port[16], log[128], master[16], nodes[128];
    snprintf(port, sizeof(port), "%d", s->port);
    snprintf(master, sizeof(master), "%d", s->replica_of);
    snprintf(log, sizeof(log), "%s/redis.log", s->dir);
    const char *argv[32] = {"redis-server",
                            "--port",
                            port,
                            "--bind",
                            "127.0.0.1",
                            "--save",
                            "",
                            "--dir",
                            s->dir,
                            "--logfile",
                            log,
                            "--appendonly",
                            s->aof ? "yes" : "no",
                            "--appendfsync",
                            "always"};
    int n = 15;
    if (s->password) {
        argv[n++] = "--requirepass";
        argv[n++] = s->password;
    }
    if (s->cluster) {
        snprintf(nodes, sizeof(nodes), "%s/nodes.conf", s->dir);
        argv[n++] = "--cluster-enabled";
        argv[n++] = "yes";
        argv[n++] = "--cluster-config-file";
        argv[n++] = nodes;
        argv[n++] = "--cluster-announce-ip"; /* a lone node does not know its address */
        argv[n++] = "127.0.0.1";
    }
    if (s->replica_of) {
        argv[n++] = "--replicaof";
        argv[n++] = "127.0.0.1";
        argv[n++] = master;
    }
    argv[n] = NULL;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a crashed test must not leave its server behind */
    execvp("redis-server", (char *const *)argv);
    _exit(127);
}

/* The pid the server on s->port reports: another test process may have won
 * the race for a "free" port, and then the server answering is not ours. */
static long test_redis_server_pid(const test_redis_t *s)
{
    redisContext *c = test_redis_connect(s);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "INFO server");
    const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "process_id:") : NULL;
    long pid = at ? strtol(at + strlen("process_id:"), NULL, 10) : -1;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return pid;
}

static int test_redis_spawn(test_redis_t *s)
{
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0)
        test_redis_exec(s);
    for (int i = 0; i < 500; i++) { /* up to 5 s */
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0; /* it could not start (port taken?) */
            return -1;
        }
        if (test_redis_ping(s))
            return test_redis_server_pid(s) == s->pid ? 0 : -1;
        usleep(10000);
    }
    return -1;
}

/* Starts a server on a free port; returns 0 once it answers. */
static int test_redis_start(test_redis_t *s, bool aof)
{
    s->aof = aof;
    snprintf(s->dir, sizeof(s->dir), "/tmp/ember-redis-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    for (int attempt = 0; attempt < 5; attempt++) { /* lost port races are retried */
        s->port = test_redis_free_port();
        if (s->password)
            snprintf(s->url, sizeof(s->url), "redis://:%s@127.0.0.1:%d", s->password, s->port);
        else
            snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", s->port);
        if (test_redis_spawn(s) == 0)
            return 0;
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
        }
    }
    return -1;
}

/* signo: SIGTERM for a clean shutdown, SIGKILL for a crash. */
static void test_redis_stop(test_redis_t *s, int signo)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, signo);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static int test_redis_restart(test_redis_t *s)
{
    return test_redis_spawn(s);
}

/* Stops the server and removes its dir. */
static void test_redis_finish(test_redis_t *s)
{
    test_redis_stop(s, SIGTERM);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

/* One synchronous command; returns its integer reply (or array length), -1 on error. */
static long long test_redis_int(const test_redis_t *s, const char *fmt, ...)
{
    redisContext *c = test_redis_connect(s);
    if (!c)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_ARRAY)
        v = (long long)r->elements;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Runs the loop until done() or timeout_ms passes; returns done(). */
static bool test_run_until(uv_loop_t *loop, bool (*done)(void *), void *arg, int timeout_ms)
{
    uint64_t end = uv_hrtime() + (uint64_t)timeout_ms * 1000000u;
    while (!done(arg) && uv_hrtime() < end)
        uv_run(loop, UV_RUN_ONCE);
    return done(arg);
}

#endif
