/*
 * disc.c — what every discoverer shares: its current target groups, change
 * notification and the last error (shown on /targets through the log).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "scraper_int.h"

static void free_groups(scr_group_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        scr_group_fini(&g[i]);
    lc_free(g);
}

void scr_disc_notify(scr_disc_t *d)
{
    d->reported = true;
    if (d->changed)
        d->changed(d, d->data);
}

void scr_disc_set_groups(scr_disc_t *d, scr_group_t *groups, size_t n)
{
    free_groups(d->groups, d->n_groups);
    d->groups = groups;
    d->n_groups = n;
    d->last_error[0] = '\0';
    scr_disc_notify(d);
}

void scr_disc_upsert(scr_disc_t *d, scr_group_t *g)
{
    size_t i = 0;
    while (i < d->n_groups && strcmp(d->groups[i].source, g->source) != 0)
        i++;
    if (i < d->n_groups) {
        scr_group_fini(&d->groups[i]);
        if (g->n_targets) {
            d->groups[i] = *g;
        } else {
            d->groups[i] = d->groups[d->n_groups - 1];
            d->n_groups--;
            scr_group_fini(g);
        }
    } else if (g->n_targets) {
        d->groups = lc_xrealloc(d->groups, (d->n_groups + 1) * sizeof(*d->groups));
        d->groups[d->n_groups++] = *g;
    } else {
        scr_group_fini(g);
    }
    memset(g, 0, sizeof(*g));
}

void scr_disc_fini(scr_disc_t *d)
{
    free_groups(d->groups, d->n_groups);
    d->groups = NULL;
    d->n_groups = 0;
}

void scr_disc_error(scr_disc_t *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->last_error, sizeof(d->last_error), fmt, ap);
    va_end(ap);
    static const char *const kinds[] = {"file", "dns", "kubernetes"};
    LC_LOG_WARN("discovery failed kind=%s err=\"%s\"", kinds[d->kind], d->last_error);
}

static char *dup_or_null(const char *s)
{
    return s ? lc_xstrdup(s) : NULL;
}

void scr_client_copy(scr_client_t *dst, const scr_client_t *src)
{
    *dst = *src;
    dst->username = dup_or_null(src->username);
    dst->username_file = dup_or_null(src->username_file);
    dst->password = dup_or_null(src->password);
    dst->password_file = dup_or_null(src->password_file);
    dst->auth_type = dup_or_null(src->auth_type);
    dst->credentials = dup_or_null(src->credentials);
    dst->credentials_file = dup_or_null(src->credentials_file);
    dst->ca_file = dup_or_null(src->ca_file);
    dst->cert_file = dup_or_null(src->cert_file);
    dst->key_file = dup_or_null(src->key_file);
    dst->ca = dup_or_null(src->ca);
    dst->cert = dup_or_null(src->cert);
    dst->key = dup_or_null(src->key);
    dst->server_name = dup_or_null(src->server_name);
    dst->proxy_url = dup_or_null(src->proxy_url);
}
