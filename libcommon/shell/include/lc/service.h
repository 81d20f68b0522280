/*
 * lc/service.h — the process shell every ember binary runs in: one libuv
 * loop, one metrics registry, one HTTP server with /ready, /live and /metrics,
 * SIGTERM/SIGINT as one drain request, and an ordered start and stop of the
 * process's *nodes* (the roles it runs: ingester, querier, scraper, agent).
 *
 * Start: lc_proc_run raises the soft open-file limit to the hard one,
 * creates the loop, the registry and the server, starts every node in the
 * order given (each registers its routes and opens its handles), listens,
 * tells each node the server is listening, and runs the loop.
 * Stop (a signal, or lc_proc_stop): /ready answers 503, each node drains in
 * start order (flush, leave a group: while the server still answers), the
 * server closes (requests in flight finish), then each node closes in reverse
 * start order (so a producer stops before the transport it publishes into);
 * the loop then ends and every node is freed. A failed start runs the same
 * stop over the nodes that started.
 *
 * Ownership: the shell owns the loop, the registry, the server and the node
 * states (freed through each node's free). Nodes of one process share what
 * one of them owns through the slots below (e.g. the ingester node sets the
 * store and the transport the querier and scraper nodes use).
 * Threading: loop thread only.
 */
#ifndef LC_SERVICE_H
#define LC_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "lc/httpd.h"
#include "lc/metrics.h"
#include "lc/settings_store.h"
#include "lc/store.h"
#include "lc/transport.h"

/* ------------------------------------------------------------ stop signals */

/* signum: SIGTERM, SIGINT, or what lc_stop_signals_fire was given. */
typedef void (*lc_stop_fn)(int signum, void *data);

typedef struct lc_stop_signals_s {
    uv_signal_t term, intr;
    lc_stop_fn fn;
    void *data;
    bool started; /* the handles are initialised */
    bool fired;
} lc_stop_signals_t;

/* Watches SIGTERM and SIGINT. The first of them closes both handles (so
 * that the loop can end once the drain is done) and calls fn, once; later
 * signals are ignored. */
int lc_stop_signals_start(uv_loop_t *loop, lc_stop_signals_t *s, lc_stop_fn fn, void *data);

/* The same stop, asked for by the process itself (it cannot go on). A
 * no-op once stopped, or when never started. */
void lc_stop_signals_fire(lc_stop_signals_t *s, int signum);

/* Closes every handle still open on loop and runs it until they are closed:
 * the last step before uv_loop_close. */
void lc_loop_close_all(uv_loop_t *loop);

/* ------------------------------------------------------------ the process */

typedef struct lc_proc_s lc_proc_t;

/* One role of a process. Every hook but start is optional (NULL). */
typedef struct lc_node_ops_s {
    const char *name;
    /* Before the server listens: register routes, open handles, fill the
     * shared slots. *state = NULL means "not running in this process" (e.g.
     * ember without --agent); the node is skipped from then on. A non-zero
     * return fails the start (the node logged why). */
    int (*start)(lc_proc_t *p, const void *settings, void **state);
    /* The server listens (its port is known). */
    int (*listening)(lc_proc_t *p, void *state);
    /* Stop, before the server closes. Calls lc_proc_continue(p) once, at
     * once or when its asynchronous part is done. */
    void (*drain)(lc_proc_t *p, void *state);
    /* Stop, after the server closed, in reverse start order. Calls
     * lc_proc_continue(p) once, like drain. */
    void (*close)(lc_proc_t *p, void *state);
    /* NULL when this node is ready, else why not (the 503 body of /ready). */
    const char *(*not_ready)(void *state);
    /* Refreshes this node's gauges before /metrics renders. */
    void (*collect)(void *state);
    /* After the loop ended: frees the state. */
    void (*free)(void *state);
} lc_node_ops_t;

typedef struct lc_proc_opts_s {
    const char *name;                  /* the binary, for logs */
    const char *http_address;          /* host:port */
    size_t max_body_bytes;             /* 0: the server's default */
    size_t max_connections;            /* 0: the server's default */
    bool h2_disable;                   /* HTTP/1.1 only (lc_httpd_opts_t) */
    uint32_t h2_max_streams;           /* 0: the server's default */
    const char *auth_tokens_file;      /* lc/auth.h; NULL or "": no authentication */
    const lc_node_ops_t *const *nodes; /* in start order */
    size_t n_nodes;
    const void *settings; /* handed to every node's start */
} lc_proc_opts_t;

struct lc_proc_s {
    uv_loop_t loop;
    lc_metrics_t *metrics;
    lc_httpd_t *httpd;
    /* Shared between the nodes of one process; NULL until a node sets them. */
    lc_store_t *store;         /* set by the node that opened it */
    lc_transport_t *transport; /* set by the node that owns it */
    /* per-tenant settings and recording rules, when a node opened them for
     * others (the ingester evaluating rules, issue 29); NULL: whoever needs
     * them opens their own */
    lc_settings_store_t *settings;
    bool stopping; /* a stop was asked: /ready is 503 */
};

/* Runs the process until a stop and its drain end. 0 after a clean stop,
 * non-zero when the start failed (logged). */
int lc_proc_run(const lc_proc_opts_t *opts);

/* A node's drain or close is done: the stop goes on with the next node. */
void lc_proc_continue(lc_proc_t *p);

/* A node cannot go on: the same stop as SIGTERM. */
void lc_proc_stop(lc_proc_t *p);

#endif
