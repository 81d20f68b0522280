/*
 * ui.h — ember's web UI, served from assets compiled into the binary.
 *
 * ui_register adds these routes to an HTTP server (before lc_httpd_listen):
 *   GET /, /comparison-diff, /comparison  the page (index.html, Cache-Control: no-cache)
 *   GET /assets/<name>.<hash>.<ext>       scripts and styles, immutable for a year
 * Each answer carries a Content-Security-Policy that allows only this origin, and
 * is gzip-encoded (precompressed at build time) when Accept-Encoding allows it.
 * The page talks to the server only through its public API (querier.v1 Connect
 * JSON and /pyroscope/render*), so the same UI runs on `ember` and `ember-querier`.
 */
#ifndef UI_H
#define UI_H

#include "lc/httpd.h"
#include "lc/service.h"

int ui_register(lc_httpd_t *srv) LC_MUST_CHECK;

/* The UI as a node of the process shell (in `ember` and `ember-querier`). */
extern const lc_node_ops_t ui_node;

#endif
