/*
 * httpd_xchg.c — the life of one request/response exchange (httpd_int.h):
 * set up around a fresh request parser, and ended. Below both transports that
 * own exchanges, the HTTP/1.1 connection (httpd.c) and the HTTP/2 stream
 * (httpd_h2.c); routing and running the handlers stays with the server.
 * Threading: the loop thread of the owning connection.
 */
#include <string.h>

#include "httpd_int.h"

void lc_httpd__xchg_init(lc_httpd__xchg_t *x, lc_httpd_t *srv, const lc_httpd__limits_t *lim,
                         void (*respond)(lc_httpd__xchg_t *), void *owner)
{
    memset(x, 0, sizeof(*x));
    x->srv = srv;
    x->respond = respond;
    x->owner = owner;
    lc_httpd__parser_init(&x->parser, lim);
    x->parser.req._conn = x;
}

void lc_httpd__xchg_fini(lc_httpd__xchg_t *x)
{
    lc_httpd__parser_fini(&x->parser);
}
