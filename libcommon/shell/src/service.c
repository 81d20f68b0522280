/*
 * service.c — the process shell (lc/service.h): stop signals, the final close
 * of a loop, and the ordered start and stop of a process's nodes around one
 * loop, one metrics registry and one HTTP server.
 */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include "lc/alloc.h"
#include "lc/auth.h"
#include "lc/err.h"
#include "lc/log.h"
#include "lc/service.h"

/* ---------------------------------------------------------------- signals */

static void on_signal(uv_signal_t *sig, int signum)
{
    lc_stop_signals_fire(sig->data, signum);
}

int lc_stop_signals_start(uv_loop_t *loop, lc_stop_signals_t *s, lc_stop_fn fn, void *data)
{
    *s = (lc_stop_signals_t){.fn = fn, .data = data, .started = true};
    s->term.data = s->intr.data = s;
    uv_signal_init(loop, &s->term);
    uv_signal_init(loop, &s->intr);
    int rc = uv_signal_start(&s->term, on_signal, SIGTERM);
    return rc ? rc : uv_signal_start(&s->intr, on_signal, SIGINT);
}

void lc_stop_signals_fire(lc_stop_signals_t *s, int signum)
{
    if (!s->started || s->fired)
        return;
    s->fired = true;
    uv_close((uv_handle_t *)&s->term, NULL);
    uv_close((uv_handle_t *)&s->intr, NULL);
    s->fn(signum, s->data);
}

static void close_one(uv_handle_t *h, void *arg)
{
    LC_UNUSED(arg);
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void lc_loop_close_all(uv_loop_t *loop)
{
    uv_walk(loop, close_one, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}

/* ---------------------------------------------------------------- the process */

typedef struct proc_s {
    lc_proc_t pub;
    const lc_proc_opts_t *opts;
    void **states;    /* per node; NULL: not running here */
    size_t n_started; /* nodes 0..n_started-1 were started (maybe partly) */
    size_t stage;     /* the node the stop sequence is at */
    bool closing;     /* the stop is past the server: nodes close */
    lc_stop_signals_t signals;
} proc_t;

static const lc_node_ops_t *node_ops(const proc_t *p, size_t i)
{
    return p->opts->nodes[i];
}

/* Phase 2: each node's close, from the last started to the first. */
static void close_next(proc_t *p)
{
    while (p->stage > 0) {
        size_t i = --p->stage;
        const lc_node_ops_t *ops = node_ops(p, i);
        if (p->states[i] && ops->close) {
            ops->close(&p->pub, p->states[i]);
            return;
        }
    }
}

static void on_http_closed(void *data)
{
    proc_t *p = data;
    p->pub.httpd = NULL;
    p->stage = p->n_started;
    p->closing = true;
    close_next(p);
}

/* Phase 1: each node's drain, in start order, then the server. */
static void drain_next(proc_t *p)
{
    while (p->stage < p->n_started) {
        size_t i = p->stage++;
        const lc_node_ops_t *ops = node_ops(p, i);
        if (p->states[i] && ops->drain) {
            ops->drain(&p->pub, p->states[i]);
            return;
        }
    }
    if (p->pub.httpd)
        lc_httpd_close(p->pub.httpd, on_http_closed, p);
    else
        on_http_closed(p);
}

/* signum 0: not a signal (a failed start, or the loop ended by itself). */
static void on_stop(int signum, void *data)
{
    proc_t *p = data;
    if (p->pub.stopping)
        return;
    p->pub.stopping = true;
    if (signum)
        LC_LOG_INFO("draining signal=%d", signum);
    p->stage = 0;
    drain_next(p);
}

void lc_proc_continue(lc_proc_t *pub)
{
    proc_t *p = LC_CONTAINER_OF(pub, proc_t, pub);
    if (p->closing)
        close_next(p);
    else
        drain_next(p);
}

void lc_proc_stop(lc_proc_t *pub)
{
    proc_t *p = LC_CONTAINER_OF(pub, proc_t, pub);
    if (p->signals.started)
        lc_stop_signals_fire(&p->signals, SIGTERM);
    else
        on_stop(SIGTERM, p);
}

/* ---------------------------------------------------------------- /ready, /metrics */

static lc_http_result_t ready_handler(lc_http_req_t *req, void *data)
{
    proc_t *p = data;
    const char *why = p->pub.stopping ? "shutting down" : NULL;
    for (size_t i = 0; !why && i < p->n_started; i++) {
        const lc_node_ops_t *ops = node_ops(p, i);
        if (p->states[i] && ops->not_ready)
            why = ops->not_ready(p->states[i]);
    }
    if (why)
        lc_http_reply(req, 503, "text/plain", why, strlen(why));
    else
        lc_http_reply(req, 200, "text/plain", "ready", 5);
    return LC_HTTP_DONE;
}

/* The process answers: what a liveness probe asks (readiness is /ready). */
static lc_http_result_t live_handler(lc_http_req_t *req, void *data)
{
    LC_UNUSED(data);
    lc_http_reply(req, 200, "text/plain", "alive", 5);
    return LC_HTTP_DONE;
}

static lc_http_result_t metrics_handler(lc_http_req_t *req, void *data)
{
    proc_t *p = data;
    for (size_t i = 0; i < p->n_started; i++) {
        const lc_node_ops_t *ops = node_ops(p, i);
        if (p->states[i] && ops->collect)
            ops->collect(p->states[i]);
    }
    lc_http_reply_metrics(req, p->pub.metrics);
    return LC_HTTP_DONE;
}

/* Every route the server has, with the scope it needs (lc_httpd_routes_text):
 * what docs/operations.md's route table must cover (tests/integration/
 * test_scopes.py walks it). Public like the docs that list the same. */
static lc_http_result_t routes_handler(lc_http_req_t *req, void *data)
{
    proc_t *p = data;
    lc_buf_t text;
    lc_buf_init(&text, LC_BUF_UNLIMITED);
    if (lc_httpd_routes_text(p->pub.httpd, &text) == 0)
        lc_http_reply(req, 200, "text/plain", text.data, text.len);
    else
        lc_http_reply(req, 500, "text/plain", "out of memory", 13);
    lc_buf_fini(&text);
    return LC_HTTP_DONE;
}

static int register_ops_routes(proc_t *p)
{
    const lc_http_route_t routes[] = {
        {.path = "/ready", .methods = "GET", .work = ready_handler, .data = p},
        {.path = "/live", .methods = "GET", .work = live_handler, .data = p},
        {.path = "/metrics", .methods = "GET", .work = metrics_handler, .data = p},
        {.path = "/debug/routes", .methods = "GET", .work = routes_handler, .data = p},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(routes); i++) {
        lc_http_route_t r = routes[i];
        r.scope = LC_HTTP_SCOPE_PUBLIC; /* probes and scrapers carry no credential */
        int rc = lc_httpd_route(p->pub.httpd, &r);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- start */

static int start_nodes(proc_t *p)
{
    for (size_t i = 0; i < p->opts->n_nodes; i++) {
        p->n_started = i + 1;
        int rc = node_ops(p, i)->start(&p->pub, p->opts->settings, &p->states[i]);
        if (rc) {
            LC_LOG_ERROR("cannot start node=%s err=\"%s\"", node_ops(p, i)->name, lc_strerror(rc));
            return rc;
        }
    }
    return 0;
}

static int notify_listening(proc_t *p)
{
    for (size_t i = 0; i < p->n_started; i++) {
        const lc_node_ops_t *ops = node_ops(p, i);
        int rc = p->states[i] && ops->listening ? ops->listening(&p->pub, p->states[i]) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static int start_http(proc_t *p)
{
    lc_httpd_opts_t ho = {.address = p->opts->http_address,
                          .max_body_bytes = p->opts->max_body_bytes,
                          .max_connections = p->opts->max_connections,
                          .h2_disable = p->opts->h2_disable,
                          .h2_max_streams = p->opts->h2_max_streams,
                          .metrics = p->pub.metrics,
                          .guard = lc_auth_guard};
    /* Credentials first: no route may answer before they are in force. */
    int rc = lc_auth_init(&p->pub.loop, p->opts->auth_tokens_file);
    if (!rc)
        rc = lc_httpd_new(&p->pub.loop, &ho, &p->pub.httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", p->opts->http_address,
                     lc_strerror(rc));
    return rc;
}

static int listen_http(proc_t *p)
{
    int rc = register_ops_routes(p);
    if (!rc)
        rc = lc_httpd_listen(p->pub.httpd);
    if (rc)
        LC_LOG_ERROR("cannot serve HTTP addr=%s err=\"%s\"", p->opts->http_address,
                     lc_strerror(rc));
    return rc;
}

static int start(proc_t *p)
{
    int rc = start_http(p);
    if (!rc)
        rc = start_nodes(p);
    if (!rc)
        rc = listen_http(p);
    if (!rc)
        rc = notify_listening(p);
    if (!rc)
        rc = lc_stop_signals_start(&p->pub.loop, &p->signals, on_stop, p);
    return rc;
}

/* After the loop ended, or a failed start: the stop sequence if it has not
 * run (reconnect timers would keep the loop alive), then whatever is left. */
static void finish(proc_t *p)
{
    if (!p->pub.stopping) {
        if (p->signals.started)
            lc_stop_signals_fire(&p->signals, 0);
        else
            on_stop(0, p);
    }
    uv_run(&p->pub.loop, UV_RUN_DEFAULT);
    if (p->pub.httpd)
        lc_httpd_close(p->pub.httpd, NULL, NULL);
    lc_loop_close_all(&p->pub.loop);
    for (size_t i = p->n_started; i-- > 0;) {
        const lc_node_ops_t *ops = node_ops(p, i);
        if (p->states[i] && ops->free)
            ops->free(p->states[i]);
    }
}

/* ---------------------------------------------------------------- limits */

/* Raises the soft open-file limit to the hard one (as Redis and nginx do):
 * the default soft limit, often 1024, is below what a process with thousands
 * of connections and hundreds of open LMDB blocks needs, and the hard limit
 * is what the administrator allows. Before the nodes start, so that the store
 * sizes its open-block cap from the raised limit. */
static void raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return;
    if (rl.rlim_cur == rl.rlim_max) {
        LC_LOG_DEBUG("open-file limit nofile=%llu", (unsigned long long)rl.rlim_cur);
        return;
    }
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl))
        LC_LOG_WARN("cannot raise the open-file limit nofile=%llu hard=%llu",
                    (unsigned long long)was, (unsigned long long)rl.rlim_max);
    else
        LC_LOG_INFO("raised the open-file limit from=%llu to=%llu", (unsigned long long)was,
                    (unsigned long long)rl.rlim_max);
}

int lc_proc_run(const lc_proc_opts_t *opts)
{
    proc_t p = {.opts = opts};
    raise_nofile_limit();
    int rc = uv_loop_init(&p.pub.loop);
    if (rc)
        return rc;
    p.pub.metrics = lc_metrics_new();
    p.states = lc_xcalloc(opts->n_nodes ? opts->n_nodes : 1, sizeof(*p.states));
    rc = start(&p);
    if (!rc) {
        LC_LOG_INFO("%s is ready addr=%s port=%d", opts->name, opts->http_address,
                    lc_httpd_port(p.pub.httpd));
        rc = uv_run(&p.pub.loop, UV_RUN_DEFAULT) < 0 ? -1 : 0;
    } else {
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    }
    finish(&p);
    lc_free(p.states);
    lc_metrics_free(p.pub.metrics);
    uv_loop_close(&p.pub.loop);
    return rc;
}
