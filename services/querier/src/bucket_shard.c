/*
 * bucket_shard.c — the querier's shard on the bucket (bucket_shard.h): each
 * thread owns a loop, a loopback server and the shard API mounted on the
 * store, with a metrics registry of its own (the shard's query metrics are
 * not the querier's: /metrics would count each query twice).
 */
#include <stdio.h>

#include <uv.h>

#include "bucket_shard.h"
#include "lc/alloc.h"
#include "lc/httpd.h"
#include "lc/log.h"
#include "lc/metrics.h"
#include "shard.h"

typedef struct shard_thread_s {
    uv_thread_t tid;
    uv_loop_t loop;
    uv_async_t stop;
    uv_sem_t ready; /* posted once listening (or failed) */
    lc_store_t *store;
    bool multitenancy;
    lc_httpd_t *srv;
    qry_shard_t *shard;
    lc_metrics_t *metrics;
    int rc;
    char url[64];
} shard_thread_t;

struct qry_bucket_shard_s {
    shard_thread_t t[BUCKET_SHARD_THREADS];
    size_t n_started;
    const char *urls[BUCKET_SHARD_THREADS];
};

static void on_server_closed(void *data)
{
    shard_thread_t *t = data;
    t->srv = NULL;
    uv_close((uv_handle_t *)&t->stop, NULL); /* the loop's last handle: uv_run returns */
}

static void shard_on_stop(uv_async_t *a)
{
    shard_thread_t *t = a->data;
    if (t->srv)
        lc_httpd_close(t->srv, on_server_closed, t);
    else
        uv_close((uv_handle_t *)&t->stop, NULL);
}

static int thread_listen(shard_thread_t *t)
{
    lc_httpd_opts_t ho = {.address = "127.0.0.1:0", .no_offload = true};
    int rc = lc_httpd_new(&t->loop, &ho, &t->srv);
    if (rc)
        return rc;
    rc = qry_shard_new(&t->loop, t->srv, t->store, t->metrics, t->multitenancy, &t->shard);
    if (!rc)
        rc = lc_httpd_listen(t->srv);
    if (!rc)
        snprintf(t->url, sizeof t->url, "http://127.0.0.1:%d", lc_httpd_port(t->srv));
    return rc;
}

static void thread_main(void *arg)
{
    shard_thread_t *t = arg;
    t->rc = thread_listen(t);
    uv_sem_post(&t->ready);
    uv_run(&t->loop, UV_RUN_DEFAULT); /* until shard_on_stop: the server is closed, then stop */
    qry_shard_free(t->shard);
    LC_ASSERT(uv_loop_close(&t->loop) == 0);
}

static int thread_start(shard_thread_t *t, lc_store_t *store, bool multitenancy)
{
    t->store = store;
    t->multitenancy = multitenancy;
    t->metrics = lc_metrics_new();
    uv_loop_init(&t->loop);
    uv_async_init(&t->loop, &t->stop, shard_on_stop);
    t->stop.data = t;
    uv_sem_init(&t->ready, 0);
    int rc = uv_thread_create(&t->tid, thread_main, t);
    if (rc) {
        uv_close((uv_handle_t *)&t->stop, NULL);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        uv_loop_close(&t->loop);
        uv_sem_destroy(&t->ready);
        lc_metrics_free(t->metrics);
        return rc;
    }
    uv_sem_wait(&t->ready);
    return 0;
}

int qry_bucket_shard_start(lc_store_t *store, bool multitenancy, qry_bucket_shard_t **out)
{
    qry_bucket_shard_t *b = lc_xcalloc(1, sizeof(*b));
    int rc = 0;
    for (size_t i = 0; i < BUCKET_SHARD_THREADS && !rc; i++) {
        if ((rc = thread_start(&b->t[i], store, multitenancy)) != 0)
            break;
        b->n_started++;
        rc = b->t[i].rc;
        b->urls[i] = b->t[i].url;
    }
    if (rc) {
        LC_LOG_ERROR("cannot start the querier's shard on the bucket err=\"%s\"", lc_strerror(rc));
        qry_bucket_shard_stop(b);
        return rc;
    }
    LC_LOG_INFO("the querier reads the bucket below the ingesters' marks threads=%d url=%s",
                BUCKET_SHARD_THREADS, b->urls[0]);
    *out = b;
    return 0;
}

size_t qry_bucket_shard_urls(const qry_bucket_shard_t *b, const char *const **out)
{
    *out = b->urls;
    return b->n_started;
}

void qry_bucket_shard_stop(qry_bucket_shard_t *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_started; i++)
        uv_async_send(&b->t[i].stop);
    for (size_t i = 0; i < b->n_started; i++) {
        uv_thread_join(&b->t[i].tid);
        uv_sem_destroy(&b->t[i].ready);
        lc_metrics_free(b->t[i].metrics);
    }
    lc_free(b);
}
