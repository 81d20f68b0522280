/*
 * sd_dns.c — dns_sd_configs: targets from DNS records, refreshed every
 * refresh_interval (Prometheus's DNS discovery, with its __meta_dns_* labels).
 *
 * Lookups block, so they run on the libuv thread pool: A and AAAA through
 * getaddrinfo (which also reads /etc/hosts, as Go's resolver does), SRV, MX
 * and NS through res_nquery with a private resolver state per lookup
 * (thread-safe). One target group per name, source = the name; a name whose
 * lookup fails keeps the targets it had.
 */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lc/alloc.h"
#include "scraper_int.h"

#define DNS_ANSWER_MAX 65536
#define DNS_MAX_RECORDS 4096

typedef struct dns_result_s {
    scr_group_t group;
    bool ok;
    char error[SCR_ERROR_MAX];
} dns_result_t;

typedef struct dns_disc_s {
    scr_disc_t d;
    uv_loop_t *loop;
    char **names;
    size_t n_names;
    scr_dns_type_t type;
    int port;
    int64_t refresh_ns;
    uv_timer_t timer;
    uv_work_t work;
    bool busy, closing, timer_closed;
    dns_result_t *results; /* one per name, filled by the work */
} dns_disc_t;

/* ---------------------------------------------------------------- records */

static void add_target(scr_group_t *g, const char *host, int port, const char *meta_name,
                       const char *meta_value, const char *port_meta)
{
    if (g->n_targets >= DNS_MAX_RECORDS)
        return;
    char addr[NS_MAXDNAME + 16];
    snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    g->targets = lc_xrealloc(g->targets, (g->n_targets + 1) * sizeof(*g->targets));
    lc_labels_t *t = &g->targets[g->n_targets++];
    lc_labels_init(t);
    lc_labels_add(t, "__address__", addr);
    if (meta_name)
        lc_labels_add(t, meta_name, meta_value);
    if (port_meta) {
        char num[16];
        snprintf(num, sizeof(num), "%d", port);
        lc_labels_add(t, port_meta, num);
    }
}

static void trim_dot(char *name)
{
    size_t n = strlen(name);
    if (n > 1 && name[n - 1] == '.')
        name[n - 1] = '\0';
}

int scr_dns_parse_answer(const uint8_t *msg, size_t len, scr_dns_type_t type, int port,
                         scr_group_t *g)
{
    ns_msg handle;
    if (ns_initparse(msg, (int)len, &handle) != 0)
        return LC_ECORRUPT;
    int want = type == SCR_DNS_SRV ? ns_t_srv : type == SCR_DNS_MX ? ns_t_mx : ns_t_ns;
    for (int i = 0; i < ns_msg_count(handle, ns_s_an); i++) {
        ns_rr rr;
        if (ns_parserr(&handle, ns_s_an, i, &rr) != 0)
            return LC_ECORRUPT;
        if ((int)ns_rr_type(rr) != want)
            continue; /* CNAMEs on the way */
        const uint8_t *rd = ns_rr_rdata(rr);
        size_t skip = type == SCR_DNS_SRV ? 6 : type == SCR_DNS_MX ? 2 : 0;
        if ((size_t)ns_rr_rdlen(rr) < skip + 1)
            return LC_ECORRUPT;
        char target[NS_MAXDNAME];
        if (dn_expand(ns_msg_base(handle), ns_msg_end(handle), rd + skip, target, sizeof(target)) <
            0)
            return LC_ECORRUPT;
        trim_dot(target);
        if (type == SCR_DNS_SRV)
            add_target(g, target, rd[4] << 8 | rd[5], "__meta_dns_srv_record_target", target,
                       "__meta_dns_srv_record_port");
        else if (type == SCR_DNS_MX)
            add_target(g, target, port, "__meta_dns_mx_record_target", target, NULL);
        else
            add_target(g, target, port, "__meta_dns_ns_record_target", target, NULL);
    }
    return 0;
}

static void lookup_records(const dns_disc_t *dd, const char *name, dns_result_t *r)
{
    struct __res_state state;
    memset(&state, 0, sizeof(state));
    if (res_ninit(&state) != 0) {
        snprintf(r->error, sizeof(r->error), "%s: resolver setup failed", name);
        return;
    }
    int type = dd->type == SCR_DNS_SRV ? ns_t_srv : dd->type == SCR_DNS_MX ? ns_t_mx : ns_t_ns;
    uint8_t *answer = lc_xmalloc(DNS_ANSWER_MAX);
    int len = res_nquery(&state, name, ns_c_in, type, answer, DNS_ANSWER_MAX);
    if (len < 0)
        snprintf(r->error, sizeof(r->error), "%s: lookup failed: %s", name,
                 hstrerror(state.res_h_errno));
    else if (scr_dns_parse_answer(answer, (size_t)len, dd->type, dd->port, &r->group) != 0)
        snprintf(r->error, sizeof(r->error), "%s: malformed DNS answer", name);
    else
        r->ok = true;
    lc_free(answer);
    res_nclose(&state);
}

static void lookup_addresses(const dns_disc_t *dd, const char *name, dns_result_t *r)
{
    struct addrinfo hints = {.ai_family = dd->type == SCR_DNS_A ? AF_INET : AF_INET6,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(r->error, sizeof(r->error), "%s: lookup failed: %s", name, gai_strerror(rc));
        return;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        char host[INET6_ADDRSTRLEN];
        const void *addr = a->ai_family == AF_INET
                               ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
        if (!inet_ntop(a->ai_family, addr, host, sizeof(host)))
            continue;
        bool seen = false; /* getaddrinfo repeats addresses per protocol */
        for (size_t i = 0; i < r->group.n_targets && !seen; i++) {
            char want[INET6_ADDRSTRLEN + 16];
            snprintf(want, sizeof(want), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, dd->port);
            seen = strcmp(lc_labels_get(&r->group.targets[i], "__address__"), want) == 0;
        }
        if (!seen)
            add_target(&r->group, host, dd->port, NULL, NULL, NULL);
    }
    freeaddrinfo(res);
    r->ok = true;
}

static void dns_work(uv_work_t *w)
{
    dns_disc_t *dd = LC_CONTAINER_OF(w, dns_disc_t, work);
    for (size_t i = 0; i < dd->n_names; i++) {
        dns_result_t *r = &dd->results[i];
        memset(r, 0, sizeof(*r));
        r->group.source = lc_xstrdup(dd->names[i]);
        lc_labels_init(&r->group.labels);
        lc_labels_add(&r->group.labels, "__meta_dns_name", dd->names[i]);
        if (dd->type == SCR_DNS_A || dd->type == SCR_DNS_AAAA)
            lookup_addresses(dd, dd->names[i], r);
        else
            lookup_records(dd, dd->names[i], r);
    }
}

/* ---------------------------------------------------------------- lifecycle */

static void dns_free(dns_disc_t *dd)
{
    scr_strings_free(dd->names, dd->n_names);
    lc_free(dd->results);
    scr_disc_fini(&dd->d);
    lc_free(dd);
}

static void dns_after(uv_work_t *w, int status)
{
    dns_disc_t *dd = LC_CONTAINER_OF(w, dns_disc_t, work);
    LC_UNUSED(status);
    dd->busy = false;
    for (size_t i = 0; i < dd->n_names; i++) {
        dns_result_t *r = &dd->results[i];
        if (r->ok && !dd->closing) {
            scr_disc_upsert(&dd->d, &r->group);
        } else {
            if (!dd->closing)
                scr_disc_error(&dd->d, "%s", r->error);
            scr_group_fini(&r->group);
        }
    }
    if (dd->closing) {
        if (dd->timer_closed)
            dns_free(dd);
        return;
    }
    scr_disc_notify(&dd->d);
}

static void dns_tick(uv_timer_t *t)
{
    dns_disc_t *dd = t->data;
    if (dd->busy || dd->closing)
        return;
    dd->busy = true;
    if (uv_queue_work(dd->loop, &dd->work, dns_work, dns_after) != 0)
        dd->busy = false;
}

static void dns_on_closed(uv_handle_t *h)
{
    dns_disc_t *dd = h->data;
    dd->timer_closed = true;
    if (!dd->busy)
        dns_free(dd);
}

static void dns_close(scr_disc_t *d)
{
    dns_disc_t *dd = (dns_disc_t *)d;
    dd->closing = true;
    uv_close((uv_handle_t *)&dd->timer, dns_on_closed);
}

int scr_disc_dns_new(uv_loop_t *loop, const scr_dns_sd_t *cfg, scr_disc_t **out)
{
    dns_disc_t *dd = lc_xcalloc(1, sizeof(*dd));
    dd->d.kind = SCR_DISC_DNS;
    dd->d.key = cfg->key;
    dd->d.close = dns_close;
    dd->loop = loop;
    dd->names = lc_xcalloc(cfg->n_names + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_names; i++)
        dd->names[dd->n_names++] = lc_xstrdup(cfg->names[i]);
    dd->results = lc_xcalloc(cfg->n_names + 1, sizeof(*dd->results));
    dd->type = cfg->type;
    dd->port = cfg->port;
    dd->refresh_ns = cfg->refresh_ns;
    uv_timer_init(loop, &dd->timer);
    dd->timer.data = dd;
    uint64_t every_ms = (uint64_t)(cfg->refresh_ns / 1000000);
    uv_timer_start(&dd->timer, dns_tick, 0, every_ms ? every_ms : 1);
    *out = &dd->d;
    return 0;
}
