/*
 * remote_write.c — the Prometheus remote write sender (lc/remote_write.h):
 * a bounded FIFO of samples, one worker thread that batches, packs, snappy-
 * compresses and POSTs them, retrying what the receiver may take later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <snappy-c.h>
#include <uv.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/remote_write.h"
#include "prometheus/remote.pb-c.h"

#define RW_BACKOFF_MIN_NS 1000000000ULL
#define RW_BACKOFF_MAX_NS 30000000000ULL

typedef struct rw_sample_s {
    struct rw_sample_s *next;
    Prometheus__Label *labels; /* sorted by name; strings owned */
    size_t n_labels;
    int64_t time_ms;
    double value;
} rw_sample_t;

typedef enum { RW_SENT, RW_RETRY, RW_REJECTED } rw_outcome_t;

struct lc_remote_write_s {
    char *url;
    uint32_t timeout_ms;
    size_t max_queue;
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_thread_t worker;
    rw_sample_t *head, *tail; /* FIFO under mu */
    size_t queued;
    bool stopping;
    lc_metric_t *m_sent, *m_dropped_full, *m_dropped_rejected;
    lc_metric_t *m_req_ok, *m_req_retry, *m_req_rejected, *m_queue;
};

static void sample_free(rw_sample_t *s)
{
    for (size_t i = 0; i < s->n_labels; i++) {
        lc_free(s->labels[i].name);
        lc_free(s->labels[i].value);
    }
    lc_free(s->labels);
    lc_free(s);
}

static void samples_free(rw_sample_t *s)
{
    while (s) {
        rw_sample_t *next = s->next;
        sample_free(s);
        s = next;
    }
}

static int rw_label_cmp(const void *a, const void *b)
{
    return strcmp(((const Prometheus__Label *)a)->name, ((const Prometheus__Label *)b)->name);
}

static rw_sample_t *sample_new(const lc_rw_label_t *labels, size_t n, int64_t time_ms, double value)
{
    rw_sample_t *s = lc_xcalloc(1, sizeof(*s));
    s->labels = lc_xcalloc(n, sizeof(*s->labels));
    s->n_labels = n;
    for (size_t i = 0; i < n; i++) {
        prometheus__label__init(&s->labels[i]);
        s->labels[i].name = lc_xstrdup(labels[i].name);
        s->labels[i].value = lc_xstrdup(labels[i].value);
    }
    qsort(s->labels, n, sizeof(*s->labels), rw_label_cmp);
    s->time_ms = time_ms;
    s->value = value;
    return s;
}

int lc_remote_write_push(lc_remote_write_t *rw, const lc_rw_label_t *labels, size_t n,
                         int64_t time_ms, double value)
{
    if (n == 0 || n > LC_RW_MAX_LABELS)
        return LC_EINPUT;
    rw_sample_t *s = sample_new(labels, n, time_ms, value);
    rw_sample_t *dropped = NULL;
    uv_mutex_lock(&rw->mu);
    if (rw->queued >= rw->max_queue) { /* drop the oldest: newer points matter more */
        dropped = rw->head;
        rw->head = dropped->next;
        rw->tail = rw->head ? rw->tail : NULL;
        dropped->next = NULL;
        rw->queued--;
    }
    if (rw->tail)
        rw->tail->next = s;
    else
        rw->head = s;
    rw->tail = s;
    rw->queued++;
    lc_metric_set(rw->m_queue, (double)rw->queued);
    uv_cond_signal(&rw->cond);
    uv_mutex_unlock(&rw->mu);
    if (dropped) {
        lc_metric_add(rw->m_dropped_full, 1);
        sample_free(dropped);
    }
    return 0;
}

/* Takes up to LC_RW_BATCH samples off the queue (mu held). */
static rw_sample_t *take_batch(lc_remote_write_t *rw, size_t *n)
{
    rw_sample_t *first = rw->head, *last = NULL;
    size_t k = 0;
    for (rw_sample_t *s = first; s && k < LC_RW_BATCH; s = s->next, k++)
        last = s;
    if (!last) {
        *n = 0;
        return NULL;
    }
    rw->head = last->next;
    rw->tail = rw->head ? rw->tail : NULL;
    last->next = NULL;
    rw->queued -= k;
    lc_metric_set(rw->m_queue, (double)rw->queued);
    *n = k;
    return first;
}

/* The snappy-compressed WriteRequest of a batch (one series per sample), or
 * NULL when it cannot be built. */
static char *rw_encode_batch(const rw_sample_t *batch, size_t n, size_t *out_len)
{
    Prometheus__TimeSeries *series = lc_xcalloc(n, sizeof(*series));
    Prometheus__TimeSeries **ptrs = lc_xcalloc(n, sizeof(*ptrs));
    Prometheus__Sample *samples = lc_xcalloc(n, sizeof(*samples));
    Prometheus__Label **labels = NULL;
    size_t n_labels = 0, k = 0;
    for (const rw_sample_t *s = batch; s; s = s->next)
        n_labels += s->n_labels;
    labels = lc_xcalloc(n_labels ? n_labels : 1, sizeof(*labels));
    size_t li = 0;
    for (const rw_sample_t *s = batch; s && k < n; s = s->next, k++) {
        prometheus__time_series__init(&series[k]);
        prometheus__sample__init(&samples[k]);
        samples[k].value = s->value;
        samples[k].timestamp = s->time_ms;
        series[k].labels = &labels[li];
        series[k].n_labels = s->n_labels;
        for (size_t i = 0; i < s->n_labels; i++)
            labels[li++] = &s->labels[i];
        ptrs[k] = &series[k];
    }
    Prometheus__Sample **sample_ptrs = lc_xcalloc(n, sizeof(*sample_ptrs));
    for (size_t i = 0; i < n; i++) {
        sample_ptrs[i] = &samples[i];
        series[i].samples = &sample_ptrs[i];
        series[i].n_samples = 1;
    }
    Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
    req.timeseries = ptrs;
    req.n_timeseries = n;
    size_t raw_len = prometheus__write_request__get_packed_size(&req);
    uint8_t *raw = lc_xmalloc(raw_len ? raw_len : 1);
    prometheus__write_request__pack(&req, raw);
    *out_len = snappy_max_compressed_length(raw_len);
    char *out = lc_xmalloc(*out_len);
    if (snappy_compress((const char *)raw, raw_len, out, out_len) != SNAPPY_OK) {
        lc_free(out);
        out = NULL;
    }
    lc_free(raw);
    lc_free(sample_ptrs);
    lc_free(labels);
    lc_free(samples);
    lc_free(ptrs);
    lc_free(series);
    return out;
}

static size_t discard_body(char *p, size_t size, size_t n, void *data)
{
    LC_UNUSED(p);
    LC_UNUSED(data);
    return size * n;
}

/* One POST of body; what to do with the batch afterwards. */
static rw_outcome_t post(lc_remote_write_t *rw, const char *body, size_t len)
{
    CURL *c = curl_easy_init();
    if (!c)
        return RW_RETRY;
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Encoding: snappy");
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
    h = curl_slist_append(h, "User-Agent: ember");
    curl_easy_setopt(c, CURLOPT_URL, rw->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rw->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (cc != CURLE_OK || status >= 500 || status == 429) {
        LC_LOG_WARN("remote write failed, will retry status=%ld err=\"%s\"", status,
                    cc == CURLE_OK ? "" : curl_easy_strerror(cc));
        return RW_RETRY;
    }
    if (status < 200 || status >= 300) {
        LC_LOG_WARN("remote write rejected, dropping the batch status=%ld", status);
        return RW_REJECTED;
    }
    return RW_SENT;
}

/* Waits ns unless a stop comes first (mu held); true when stopping. */
static bool wait_or_stop(lc_remote_write_t *rw, uint64_t ns)
{
    if (!rw->stopping)
        (void)uv_cond_timedwait(&rw->cond, &rw->mu, ns);
    return rw->stopping;
}

/* Sends one batch until it is sent, rejected, or a stop ends the retries. */
static void send_batch(lc_remote_write_t *rw, rw_sample_t *batch, size_t n)
{
    size_t len;
    char *body = rw_encode_batch(batch, n, &len);
    uint64_t backoff = RW_BACKOFF_MIN_NS;
    rw_outcome_t out = body ? RW_RETRY : RW_REJECTED;
    for (bool last = false; body && !last;) {
        out = post(rw, body, len);
        if (out != RW_RETRY)
            break;
        lc_metric_add(rw->m_req_retry, 1);
        uv_mutex_lock(&rw->mu);
        last = wait_or_stop(rw, backoff);
        uv_mutex_unlock(&rw->mu);
        backoff = backoff * 2 > RW_BACKOFF_MAX_NS ? RW_BACKOFF_MAX_NS : backoff * 2;
    }
    if (out == RW_SENT) {
        lc_metric_add(rw->m_req_ok, 1);
        lc_metric_add(rw->m_sent, (double)n);
    } else {
        lc_metric_add(out == RW_REJECTED ? rw->m_req_rejected : rw->m_req_retry, 1);
        lc_metric_add(rw->m_dropped_rejected, (double)n);
    }
    lc_free(body);
}

static void rw_worker(void *arg)
{
    lc_remote_write_t *rw = arg;
    for (;;) {
        uv_mutex_lock(&rw->mu);
        while (!rw->head && !rw->stopping)
            uv_cond_wait(&rw->cond, &rw->mu);
        size_t n;
        rw_sample_t *batch = take_batch(rw, &n);
        bool stop = rw->stopping && !batch;
        uv_mutex_unlock(&rw->mu);
        if (stop)
            return;
        send_batch(rw, batch, n);
        samples_free(batch);
    }
}

static void rw_register_metrics(lc_remote_write_t *rw, lc_metrics_t *m)
{
    const char *samples = "ember_remote_write_samples_total";
    const char *samples_help = "Recording-rule samples by what became of them.";
    const char *reqs = "ember_remote_write_requests_total";
    const char *reqs_help = "Remote write requests by outcome (retry: will be sent again).";
    rw->m_sent = lc_metrics_counter(m, samples, samples_help, "outcome=\"sent\"");
    rw->m_dropped_full =
        lc_metrics_counter(m, samples, samples_help, "outcome=\"dropped_queue_full\"");
    rw->m_dropped_rejected =
        lc_metrics_counter(m, samples, samples_help, "outcome=\"dropped_rejected\"");
    rw->m_req_ok = lc_metrics_counter(m, reqs, reqs_help, "outcome=\"ok\"");
    rw->m_req_retry = lc_metrics_counter(m, reqs, reqs_help, "outcome=\"retry\"");
    rw->m_req_rejected = lc_metrics_counter(m, reqs, reqs_help, "outcome=\"rejected\"");
    rw->m_queue = lc_metrics_gauge(m, "ember_remote_write_queue_samples",
                                   "Samples waiting to be sent by remote write.", "");
}

int lc_remote_write_new(const lc_remote_write_opts_t *opts, lc_remote_write_t **out)
{
    if (!opts->url ||
        (strncmp(opts->url, "http://", 7) != 0 && strncmp(opts->url, "https://", 8) != 0))
        return LC_EINPUT;
    lc_remote_write_t *rw = lc_xcalloc(1, sizeof(*rw));
    rw->url = lc_xstrdup(opts->url);
    rw->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 10000;
    rw->max_queue = opts->max_queue ? opts->max_queue : LC_RW_DEFAULT_MAX_QUEUE;
    rw_register_metrics(rw, opts->metrics);
    uv_mutex_init(&rw->mu);
    uv_cond_init(&rw->cond);
    if (uv_thread_create(&rw->worker, rw_worker, rw) != 0) {
        uv_cond_destroy(&rw->cond);
        uv_mutex_destroy(&rw->mu);
        lc_free(rw->url);
        lc_free(rw);
        return -ENOMEM;
    }
    *out = rw;
    return 0;
}

void lc_remote_write_free(lc_remote_write_t *rw)
{
    if (!rw)
        return;
    uv_mutex_lock(&rw->mu);
    rw->stopping = true;
    uv_cond_broadcast(&rw->cond);
    uv_mutex_unlock(&rw->mu);
    uv_thread_join(&rw->worker);
    samples_free(rw->head);
    uv_cond_destroy(&rw->cond);
    uv_mutex_destroy(&rw->mu);
    lc_free(rw->url);
    lc_free(rw);
}
