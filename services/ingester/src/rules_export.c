/*
 * rules_export.c — starts and stops the recording-rule pipeline of an
 * ingester node (rules_export.h): settings store -> evaluator -> remote write.
 */
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/remote_write.h"
#include "rules_eval.h"
#include "rules_export.h"

#define SETTINGS_SUBDIR "settings" /* as the querier's services_extra.c */

struct ing_rules_export_s {
    lc_settings_store_t *settings; /* owned */
    lc_remote_write_t *out;
    ing_rules_t *rules;
};

static int open_rules_settings(const ember_settings_t *s, lc_settings_store_t **out)
{
    if (ember_clustered(s))
        return lc_settings_store_open_redis(s->redis_url, 0, out);
    size_t len = strlen(s->data_dir) + sizeof(SETTINGS_SUBDIR) + 1;
    char *dir = lc_xmalloc(len);
    snprintf(dir, len, "%s/%s", s->data_dir, SETTINGS_SUBDIR);
    int rc = lc_settings_store_open_lmdb(dir, out);
    lc_free(dir);
    return rc;
}

int ing_rules_export_start(lc_proc_t *p, const ember_settings_t *s, ing_writer_t *writer,
                           ing_rules_export_t **out)
{
    *out = NULL;
    if (!s->remote_write_url || !*s->remote_write_url)
        return 0;
    ing_rules_export_t *x = lc_xcalloc(1, sizeof(*x));
    int rc = open_rules_settings(s, &x->settings);
    lc_remote_write_opts_t wo = {.url = s->remote_write_url, .metrics = p->metrics};
    if (rc == 0)
        rc = lc_remote_write_new(&wo, &x->out);
    ing_rules_opts_t ro = {.settings = x->settings, .out = x->out, .metrics = p->metrics};
    if (rc == 0)
        rc = ing_rules_new(&ro, &x->rules);
    if (rc) {
        LC_LOG_ERROR("cannot start recording rules export url=%s err=\"%s\"",
                     rc == LC_EINPUT ? s->remote_write_url : "(set)", lc_strerror(rc));
        ing_rules_export_free(x);
        return rc;
    }
    ing_writer_set_rules(writer, x->rules);
    if (!ember_clustered(s))
        p->settings = x->settings; /* the querier node borrows it */
    *out = x;
    return 0;
}

void ing_rules_export_free(ing_rules_export_t *x)
{
    if (!x)
        return;
    ing_rules_free(x->rules);     /* sends what is open into the sender */
    lc_remote_write_free(x->out); /* one last try, then stops */
    lc_settings_store_free(x->settings);
    lc_free(x);
}
