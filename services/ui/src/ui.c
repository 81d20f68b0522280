/*
 * ui.c — serves the web UI's compiled-in files (see ui.h).
 */
#include "ui.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "ui_assets.h"

#define ASSET_PREFIX "/assets/"

/* Only this origin: the page's own scripts and styles, API calls to the same
 * server, canvas images as data:/blob: URLs (the SVG download). */
static const char CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; "
                          "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

static const ui_asset_t *find_asset(const char *name)
{
    for (size_t i = 0; i < ui_n_assets; i++)
        if (strcmp(ui_assets[i].name, name) == 0)
            return &ui_assets[i];
    return NULL;
}

/* True when Accept-Encoding lists gzip (or *) without q=0. */
static bool accepts_gzip(const char *ae)
{
    if (!ae)
        return false;
    for (const char *s = ae; *s;) {
        while (*s == ' ' || *s == ',')
            s++;
        size_t n = strcspn(s, ",");
        size_t tok = strcspn(s, ";, ");
        bool named = (tok == 4 && strncasecmp(s, "gzip", 4) == 0) || (tok == 1 && *s == '*');
        if (named) {
            const char *q = memchr(s, ';', n);
            if (!q)
                return true;
            while (q < s + n && (*q == ';' || *q == ' '))
                q++;
            if (!(strncasecmp(q, "q=0", 3) == 0 &&
                  (q + 3 >= s + n || q[3] == ' ' || q[3] == ',' ||
                   (q[3] == '.' && strspn(q + 4, "0") == (size_t)(s + n - q - 4)))))
                return true;
        }
        s += n;
    }
    return false;
}

static void send_asset(lc_http_req_t *req, const ui_asset_t *a, const char *cache_control)
{
    lc_http_set_header(req, "Cache-Control", cache_control);
    lc_http_set_header(req, "Content-Security-Policy", CSP);
    lc_http_set_header(req, "X-Content-Type-Options", "nosniff");
    lc_http_set_header(req, "Referrer-Policy", "no-referrer");
    lc_http_set_header(req, "Vary", "Accept-Encoding");
    if (accepts_gzip(lc_http_header(req, "accept-encoding"))) {
        lc_http_set_header(req, "Content-Encoding", "gzip");
        lc_http_reply(req, 200, a->content_type, a->gz, a->gz_len);
    } else {
        lc_http_reply(req, 200, a->content_type, a->raw, a->raw_len);
    }
}

static void send_not_found(lc_http_req_t *req)
{
    static const char msg[] = "{\"code\":\"not_found\",\"message\":\"no such UI asset\"}";
    lc_http_set_header(req, "Cache-Control", "no-cache");
    lc_http_reply(req, 404, "application/json", msg, sizeof(msg) - 1);
}

static lc_http_result_t page_handler(lc_http_req_t *req, void *data)
{
    (void)data;
    const ui_asset_t *a = find_asset("index.html");
    if (a)
        send_asset(req, a, "no-cache");
    else
        send_not_found(req);
    return LC_HTTP_DONE;
}

static lc_http_result_t asset_handler(lc_http_req_t *req, void *data)
{
    (void)data;
    const char *name = req->path + strlen(ASSET_PREFIX);
    const ui_asset_t *a = strcmp(name, "index.html") == 0 ? NULL : find_asset(name);
    if (a)
        send_asset(req, a, "public, max-age=31536000, immutable");
    else
        send_not_found(req);
    return LC_HTTP_DONE;
}

int ui_register(lc_httpd_t *srv)
{
    static const char *const pages[] = {"/", "/comparison-diff", "/comparison", "/recording-rules",
                                        "/explore-labels"};
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        lc_http_route_t r = {.path = pages[i],
                             .methods = "GET",
                             .scope = LC_HTTP_SCOPE_PUBLIC, /* static pages, no data */
                             .work = page_handler,
                             .metric_name = "/ui"};
        int rc = lc_httpd_route(srv, &r);
        if (rc)
            return rc;
    }
    lc_http_route_t assets = {.path = ASSET_PREFIX "*",
                              .methods = "GET",
                              .scope = LC_HTTP_SCOPE_PUBLIC,
                              .work = asset_handler,
                              .metric_name = "/assets"};
    return lc_httpd_route(srv, &assets);
}

/* ---------------------------------------------------------------- the node */

static int ui_node_start(lc_proc_t *p, const void *settings, void **state)
{
    LC_UNUSED(settings);
    *state = NULL; /* nothing to stop or free: the routes live with the server */
    return ui_register(p->httpd);
}

const lc_node_ops_t ui_node = {.name = "ui", .start = ui_node_start};
