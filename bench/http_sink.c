/*
 * http_sink.c — the floor for the ingest benchmark: an HTTP/1.1 server that
 * reads each request (headers + Content-Length body), discards it and answers
 * "200 OK" with an empty body. Thread per connection, keep-alive.
 *
 * usage: http_sink PORT     (PORT 0 = any; the chosen port is printed on stdout)
 * Stops on SIGTERM/SIGINT. Bench only: no chunked bodies, no pipelining needs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HDR_MAX (64 * 1024)

static const char k_reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

static long content_length(const char *hdr, size_t len)
{
    const char *p = hdr, *end = hdr + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        if ((size_t)(eol - p) > 15 && strncasecmp(p, "content-length:", 15) == 0)
            return strtol(p + 15, NULL, 10);
        p = eol + 1;
    }
    return 0;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(HDR_MAX);
    char *sink = malloc(1 << 20);
    size_t have = 0;
    if (!buf || !sink)
        goto out;
    for (;;) {
        char *eoh;
        while (!(eoh = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == HDR_MAX)
                goto out;
            ssize_t n = read(fd, buf + have, HDR_MAX - have);
            if (n <= 0)
                goto out;
            have += (size_t)n;
        }
        size_t hlen = (size_t)(eoh - buf) + 4;
        long body = content_length(buf, hlen);
        size_t extra = have - hlen; /* body bytes already read */
        if ((long)extra >= body) {
            memmove(buf, buf + hlen + body, extra - (size_t)body);
            have = extra - (size_t)body;
        } else {
            long left = body - (long)extra;
            while (left > 0) {
                ssize_t n = read(fd, sink, left < (1 << 20) ? (size_t)left : (1 << 20));
                if (n <= 0)
                    goto out;
                left -= n;
            }
            have = 0;
        }
        if (write(fd, k_reply, sizeof k_reply - 1) != (ssize_t)(sizeof k_reply - 1))
            goto out;
    }
out:
    free(buf);
    free(sink);
    close(fd);
    return NULL;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    long port = 0;
    if (argc > 1) {
        char *end = NULL;
        errno = 0;
        port = strtol(argv[1], &end, 10);
        if (errno || end == argv[1] || *end || port < 0 || port > 65535) {
            fprintf(stderr, "usage: http_sink [PORT]\n");
            return 2;
        }
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 512)) {
        perror("http_sink: listen");
        return 1;
    }
    socklen_t al = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &al);
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: accept returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!g_stop) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            perror("http_sink: accept");
            break;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
    close(ls);
    return 0;
}
