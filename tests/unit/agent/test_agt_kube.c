/*
 * test_agt_kube.c — container id -> pod metadata from the API server's pod
 * list: parsing a PodList, and a real HTTP round trip against a one-shot
 * server on loopback that records the request line (the node's field
 * selector) and answers with a PodList.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agt_test_util.h"

#define CID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define CID_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

static const char pod_list[] =
    "{\"kind\":\"PodList\",\"items\":["
    "{\"metadata\":{\"namespace\":\"shop\",\"name\":\"cart-7d9f\"},"
    " \"status\":{\"containerStatuses\":["
    "   {\"name\":\"cart\",\"containerID\":\"containerd://" CID_A "\"},"
    "   {\"name\":\"sidecar\",\"containerID\":\"cri-o://" CID_B "\"}],"
    "  \"initContainerStatuses\":[{\"name\":\"init\",\"containerID\":\"docker://" CID_C "\"}]}},"
    "{\"metadata\":{\"namespace\":\"x\",\"name\":\"pending\"},"
    " \"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":\"\"}]}}"
    "]}";

static void test_pod_list_parsing(void)
{
    agt_kube_t *k = NULL;
    LC_ASSERT_OK(agt_kube_new("http://127.0.0.1:1", "node-1", &k));
    LC_ASSERT_OK(agt_kube_load_pods(k, pod_list, strlen(pod_list)));
    const agt_pod_t *a = agt_kube_lookup(k, CID_A);
    LC_CHECK(a != NULL);
    if (a) {
        LC_ASSERT_STR_EQ(a->namespace_, "shop");
        LC_ASSERT_STR_EQ(a->pod, "cart-7d9f");
        LC_ASSERT_STR_EQ(a->container, "cart");
    }
    const agt_pod_t *b = agt_kube_lookup(k, CID_B);
    LC_ASSERT_STR_EQ(b ? b->container : NULL, "sidecar");
    const agt_pod_t *c = agt_kube_lookup(k, CID_C);
    LC_ASSERT_STR_EQ(c ? c->container : NULL, "init");
    LC_CHECK(agt_kube_lookup(k, "") == NULL);
    /* Unknown id: one refresh attempt against a closed port, then NULL. */
    LC_CHECK(agt_kube_lookup(
                 k, "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd") == NULL);
    LC_ASSERT_EQ(agt_kube_load_pods(k, "{\"items\":3}", 11), LC_EINPUT);
    LC_ASSERT_EQ(agt_kube_load_pods(k, "not json", 8), LC_EINPUT);
    agt_kube_free(k);
}

static void test_not_in_a_cluster(void)
{
    agt_kube_t *k = NULL;
    unsetenv("KUBERNETES_SERVICE_HOST");
    LC_ASSERT_EQ(agt_kube_new(NULL, "node-1", &k), LC_ENOTFOUND);
    LC_CHECK(k == NULL);
}

typedef struct server_s {
    int fd;
    char request_line[512];
} server_t;

static void *serve_once(void *arg)
{
    server_t *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char buf[8192];
    ssize_t n = read(c, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    snprintf(s->request_line, sizeof(s->request_line), "%.*s", (int)strcspn(buf, "\r\n"), buf);
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      strlen(pod_list));
    if (write(c, head, (size_t)hl) < 0 || write(c, pod_list, strlen(pod_list)) < 0)
        perror("write");
    close(c);
    return NULL;
}

static void test_fetch_from_api_server(void)
{
    server_t s = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    LC_ASSERT_OK(bind(s.fd, (struct sockaddr *)&addr, sizeof(addr)));
    LC_ASSERT_OK(listen(s.fd, 1));
    LC_ASSERT_OK(getsockname(s.fd, (struct sockaddr *)&addr, &len));
    pthread_t t;
    pthread_create(&t, NULL, serve_once, &s);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(addr.sin_port));
    agt_kube_t *k = NULL;
    LC_ASSERT_OK(agt_kube_new(url, "node 1", &k));
    const agt_pod_t *a = k ? agt_kube_lookup(k, CID_A) : NULL;
    pthread_join(t, NULL);
    close(s.fd);
    LC_ASSERT_STR_EQ(a ? a->pod : NULL, "cart-7d9f");
    LC_ASSERT_STR_EQ(s.request_line,
                     "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dnode%201 HTTP/1.1");
    agt_kube_free(k);
}

LC_TEST_MAIN(test_pod_list_parsing, test_not_in_a_cluster, test_fetch_from_api_server)
