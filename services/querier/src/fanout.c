/*
 * fanout.c — the set of ingesters a query asks (static list and members
 * discovered through Redis), the fan-out's lifecycle and its back end
 * (fo_backend): the front end (frontend.c) over the shard calls of
 * fanout_call.c, made by fanout_rpc.c and fanout_list.c.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fanout_int.h"
#include "lc/log.h"

static void curl_global_init_all(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
}

/* ------------------------------------------------------------- membership */

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_free(v[i]);
    lc_free(v);
}

/* "http://a:1, http://b:2" -> trimmed copies without trailing slashes. */
static char **split_urls(const char *list, size_t *n)
{
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        size_t l = len;
        while (l && (*s == ' ' || *s == '\t'))
            s++, l--;
        while (l && (s[l - 1] == ' ' || s[l - 1] == '/'))
            l--;
        if (l) {
            v = lc_xgrow(v, &cap, *n + 1, sizeof(*v));
            v[(*n)++] = lc_xstrndup(s, l);
        }
        p += len + (p[len] == ',');
    }
    return v;
}

void qry_fanout_set_members(qry_fanout_t *f, const char *const *urls, const int64_t *marks_ms,
                            size_t n, const char *marks_spec)
{
    char **v = lc_xcalloc(n ? n : 1, sizeof(*v));
    int64_t *marks = lc_xcalloc(n ? n : 1, sizeof(*marks));
    for (size_t i = 0; i < n; i++) {
        v[i] = lc_xstrdup(urls[i]);
        marks[i] = marks_ms ? marks_ms[i] : LC_MEMBER_NO_MARK;
    }
    char *spec = marks_spec && *marks_spec ? lc_xstrdup(marks_spec) : NULL;
    pthread_mutex_lock(&f->lock);
    char **old = f->members;
    size_t n_old = f->n_members;
    int64_t *old_marks = f->marks_ms;
    char *old_spec = f->marks_spec;
    f->members = v;
    f->marks_ms = marks;
    f->n_members = n;
    f->marks_spec = spec;
    pthread_mutex_unlock(&f->lock);
    strv_free(old, n_old);
    lc_free(old_marks);
    lc_free(old_spec);
}

void qry_fanout_set_bucket(qry_fanout_t *f, const char *const *urls, size_t n)
{
    char **v = lc_xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = lc_xstrdup(urls[i]);
    pthread_mutex_lock(&f->lock);
    char **old = f->bucket_urls;
    size_t n_old = f->n_bucket_urls;
    f->bucket_urls = v;
    f->n_bucket_urls = n;
    pthread_mutex_unlock(&f->lock);
    strv_free(old, n_old);
}

void qry_fanout_set_unavailable(qry_fanout_t *f, const char *reason)
{
    char *copy = reason ? lc_xstrdup(reason) : NULL;
    pthread_mutex_lock(&f->lock);
    char *old = f->unavailable;
    f->unavailable = copy;
    pthread_mutex_unlock(&f->lock);
    lc_free(old);
}

void qry_fanout_set_history(qry_fanout_t *f, int64_t history_below_ms)
{
    pthread_mutex_lock(&f->lock);
    f->history_below_ms = history_below_ms;
    pthread_mutex_unlock(&f->lock);
}

size_t qry_fanout_count(qry_fanout_t *f)
{
    pthread_mutex_lock(&f->lock);
    size_t n = f->n_fixed + f->n_members;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* -------------------------------------------------------------- lifecycle */

void qry_fanout_opts_default(qry_fanout_opts_t *o)
{
    *o = (qry_fanout_opts_t){.timeout_ms = 30000, .connect_timeout_ms = 2000};
    qry_opts_default(&o->q);
}

void qry_fanout_free(qry_fanout_t *f)
{
    if (!f)
        return;
    qry_front_fini(&f->front);
    strv_free(f->fixed, f->n_fixed);
    strv_free(f->members, f->n_members);
    lc_free(f->marks_ms);
    lc_free(f->marks_spec);
    strv_free(f->bucket_urls, f->n_bucket_urls);
    lc_free(f->unavailable);
    pthread_mutex_destroy(&f->lock);
    lc_free(f);
}

/* ------------------------------------------------------------ the back end */

const qry_backend_t fo_backend = {
    .merge_tree = fo_merge_tree,
    .merge_pprof = fo_merge_pprof,
    .merge_parts = fo_merge_parts,
    .select_series = fo_select_series,
    .select_profiles = fo_select_profiles,
    .profile_types = fo_rpc_profile_types,
    .label_names = fo_rpc_label_names,
    .label_values = fo_rpc_label_values,
    .series = fo_rpc_series,
    .get_profile_stats = fo_rpc_get_profile_stats,
    .analyze_query = fo_rpc_analyze_query,
};

int qry_fanout_new(uv_loop_t *loop, const qry_fanout_opts_t *opts, lc_httpd_t *srv,
                   lc_metrics_t *metrics, qry_fanout_t **out)
{
    LC_UNUSED(loop);
    if (opts->q.max_query_length_ms || opts->q.max_query_lookback_ms) {
        /* Refused rather than ignored: the shard calls would read the whole range. */
        LC_LOG_ERROR("the fan-out applies no time-range rules: max-query-length and "
                     "max-query-lookback must be 0 in ember-querier");
        return LC_EUNSUPPORTED;
    }
    static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
    pthread_once(&curl_once, curl_global_init_all);
    qry_fanout_t *f = lc_xcalloc(1, sizeof(*f));
    qry_front_init(&f->front, &opts->q, &fo_backend, metrics);
    f->opts = *opts;
    f->opts.ingesters = NULL; /* not kept: split below */
    pthread_mutex_init(&f->lock, NULL);
    f->history_below_ms = INT64_MIN;
    f->fixed = split_urls(opts->ingesters, &f->n_fixed);
    f->metrics = metrics;
    f->shard_calls = lc_metrics_counter(metrics, "ember_querier_shard_calls_total",
                                        "Calls to ingesters' shard API", "");
    f->shard_errors = lc_metrics_counter(metrics, "ember_querier_shard_failures_total",
                                         "Queries failed because an ingester did not answer", "");
    /* Every route checks the tenant before it reads the request, as the
     * local querier's; the ingesters check it again. */
    int rc = qry_front_register(&f->front, srv);
    if (rc) {
        qry_fanout_free(f);
        return rc;
    }
    *out = f;
    return 0;
}
