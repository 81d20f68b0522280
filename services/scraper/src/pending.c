/*
 * pending.c — the end of a scraper's life: scr_close (scraper.c) marks it
 * closing, and whichever piece of pending work finishes last (a handle's
 * close, the HTTP client's close, an in-flight scrape in scrape.c) frees it
 * through scr_pending_done. Below scraper.c and scrape.c, which both call it.
 * Threading: the scraper's loop thread.
 */
#include "lc/alloc.h"
#include "scraper_int.h"

static void scr_free(scr_t *s)
{
    scr_config_free(s->config);
    scr_strings_free(s->members, s->n_members);
    lc_free(s->live);
    lc_free((char *)s->opts.config_file);
    lc_free((char *)s->opts.tenant);
    lc_free((char *)s->opts.replica_id);
    void (*cb)(void *) = s->close_cb;
    void *data = s->close_data;
    lc_free(s);
    if (cb)
        cb(data);
}

void scr_pending_done(scr_t *s)
{
    if (--s->pending == 0 && s->closing)
        scr_free(s);
}
