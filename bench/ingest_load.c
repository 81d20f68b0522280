/*
 * ingest_load.c — closed-loop load generator for POST /ingest.
 *
 * usage: ingest_load PORT CONNS REQUESTS GROUPS PODS APP BODY...
 *
 * Sends exactly REQUESTS requests over CONNS keep-alive connections (one
 * thread each). Request i carries body BODY[i % nbodies] as raw pprof
 * (format=pprof) under
 *   name=APP{file=<(i % nbodies) % GROUPS>,pod=p<(i / nbodies) % PODS>}
 * so with bodies that differ in time_nanos every (series, time) is distinct.
 * Prints one JSON line: requests, ok, non-2xx, transport errors, wall seconds,
 * latency percentiles (ms) and per-group counts of acknowledged requests.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_GROUPS 64

typedef struct {
    char *data;
    size_t len;
} body_t;

static int g_port, g_groups, g_pods;
static const char *g_app;
static long g_requests;
static body_t *g_bodies;
static int g_nbodies;
static atomic_long g_next, g_ok, g_bad, g_errors;
static atomic_long g_group_ok[MAX_GROUPS];
static double *g_lat_ms; /* per request, -1 if failed */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Reads one response; returns the status (0 on error) and sets *close_after. */
static int read_response(int fd, char *buf, size_t cap, int *close_after)
{
    size_t have = 0;
    char *eoh;
    while (!(eoh = memmem(buf, have, "\r\n\r\n", 4))) {
        if (have == cap)
            return 0;
        ssize_t n = read(fd, buf + have, cap - have);
        if (n <= 0)
            return 0;
        have += (size_t)n;
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    long clen = 0;
    *close_after = 0;
    for (char *p = buf; p < eoh;) {
        char *eol = memchr(p, '\n', (size_t)(eoh - p));
        if (!eol)
            eol = eoh;
        if (strncasecmp(p, "content-length:", 15) == 0)
            clen = strtol(p + 15, NULL, 10);
        else if (strncasecmp(p, "connection:", 11) == 0 && strcasestr(p, "close") &&
                 strcasestr(p, "close") < eol)
            *close_after = 1;
        p = eol + 1;
    }
    long left = clen - (long)(have - (size_t)(eoh + 4 - buf));
    while (left > 0) {
        ssize_t n = read(fd, buf, left < (long)cap ? (size_t)left : cap);
        if (n <= 0)
            return 0;
        left -= n;
    }
    return status;
}

static void *worker(void *arg)
{
    (void)arg;
    char hdr[1024];
    size_t cap = 1 << 16;
    char *rbuf = malloc(cap);
    int fd = -1;
    for (;;) {
        long i = atomic_fetch_add(&g_next, 1);
        if (i >= g_requests)
            break;
        int b = (int)(i % g_nbodies), group = b % g_groups;
        long pod = (i / g_nbodies) % g_pods;
        int hl = snprintf(hdr, sizeof hdr,
                          "POST /ingest?name=%s%%7Bfile%%3D%d%%2Cpod%%3Dp%ld%%7D&format=pprof"
                          "&spyName=gospy HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
                          g_app, group, pod, g_bodies[b].len);
        double t0 = now_s();
        int status = 0, close_after = 0;
        for (int attempt = 0; attempt < 2; attempt++) {
            int reused = fd >= 0;
            if (fd < 0 && (fd = dial()) < 0)
                break;
            struct iovec iov[2] = {{hdr, (size_t)hl}, {g_bodies[b].data, g_bodies[b].len}};
            if (write_all(fd, iov, 2) == 0)
                status = read_response(fd, rbuf, cap, &close_after);
            if (!status || close_after) {
                close(fd);
                fd = -1;
            }
            if (status || !reused) /* retry once, only on a stale keep-alive socket */
                break;
        }
        if (status >= 200 && status < 300) {
            atomic_fetch_add(&g_ok, 1);
            atomic_fetch_add(&g_group_ok[group], 1);
            g_lat_ms[i] = (now_s() - t0) * 1e3;
        } else {
            atomic_fetch_add(status ? &g_bad : &g_errors, 1);
            g_lat_ms[i] = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    free(rbuf);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int load(const char *path, body_t *out)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        perror(path);
        return -1;
    }
    out->len = (size_t)st.st_size;
    out->data = malloc(out->len ? out->len : 1);
    if (!out->data || fread(out->data, 1, out->len, f) != out->len) {
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* A whole decimal number in [min, max], or -1 (the caller prints the usage). */
static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: %s PORT CONNS REQUESTS GROUPS PODS APP BODY...\n", argv[0]);
        return 2;
    }
    long port, conns_l, groups, pods;
    if (parse_long(argv[1], 0, 65535, &port) || parse_long(argv[2], 1, INT_MAX, &conns_l) ||
        parse_long(argv[3], 1, LONG_MAX, &g_requests) ||
        parse_long(argv[4], 1, MAX_GROUPS, &groups) || parse_long(argv[5], 1, INT_MAX, &pods))
        return 2;
    g_port = (int)port;
    int conns = (int)conns_l;
    g_groups = (int)groups;
    g_pods = (int)pods;
    g_app = argv[6];
    g_nbodies = argc - 7;
    signal(SIGPIPE, SIG_IGN);
    g_bodies = calloc((size_t)g_nbodies, sizeof *g_bodies);
    g_lat_ms = calloc((size_t)g_requests, sizeof *g_lat_ms);
    size_t body_bytes = 0;
    for (int k = 0; k < g_nbodies; k++) {
        if (load(argv[7 + k], &g_bodies[k]))
            return 1;
    }
    for (long i = 0; i < g_requests; i++)
        body_bytes += g_bodies[i % g_nbodies].len;
    pthread_t *t = calloc((size_t)conns, sizeof *t);
    double t0 = now_s();
    for (int k = 0; k < conns; k++)
        pthread_create(&t[k], NULL, worker, NULL);
    for (int k = 0; k < conns; k++)
        pthread_join(t[k], NULL);
    double secs = now_s() - t0;
    size_t n = 0;
    for (long i = 0; i < g_requests; i++)
        if (g_lat_ms[i] >= 0)
            g_lat_ms[n++] = g_lat_ms[i];
    qsort(g_lat_ms, n, sizeof *g_lat_ms, cmp_double);
    double p50 = n ? g_lat_ms[n / 2] : 0, p99 = n ? g_lat_ms[(size_t)((double)n * 0.99)] : 0;
    printf("{\"requests\": %ld, \"ok\": %ld, \"non_2xx\": %ld, \"errors\": %ld, \"seconds\": %.6f, "
           "\"body_bytes\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, "
           "\"group_ok\": [",
           g_requests, atomic_load(&g_ok), atomic_load(&g_bad), atomic_load(&g_errors), secs,
           body_bytes, p50, p99, n ? g_lat_ms[n - 1] : 0);
    for (int g = 0; g < g_groups; g++)
        printf("%s%ld", g ? ", " : "", atomic_load(&g_group_ok[g]));
    printf("]}\n");
    return 0;
}
