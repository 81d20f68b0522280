/*
 * rules_sums.c — recording-rule points from pending (one writer
 * transaction) to sums per series and step, and from there, once a step
 * has been idle for flush_idle_ms, to remote write (rules_eval.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/labels.h"
#include "rules_eval_int.h"

#define FLUSH_TICK_NS 1000000000ULL

static void point_free(point_t *p)
{
    for (size_t i = 0; i < p->n_labels; i++) {
        lc_free((char *)p->labels[i].name);
        lc_free((char *)p->labels[i].value);
    }
    lc_free(p->labels);
    lc_free(p->key);
    lc_free(p);
}

static void points_free(point_t *p)
{
    while (p) {
        point_t *next = p->next;
        point_free(p);
        p = next;
    }
}

static void add_label(point_t *p, const char *name, const char *value)
{
    p->labels[p->n_labels].name = lc_xstrdup(name);
    p->labels[p->n_labels].value = lc_xstrdup(value);
    p->n_labels++;
}

/* The exported series: __name__, profiles_rule_id, the external labels and
 * the group_by labels the series has (an absent label is no label, as in
 * Prometheus); its key adds the step. */
void ing_rules_pending_add(ing_rules_t *r, const rule_t *rule, const lc_labels_t *ls,
                           int64_t bucket_ms, double value)
{
    point_t *p = lc_xcalloc(1, sizeof(*p));
    p->labels = lc_xcalloc(2 + rule->n_external + rule->n_group_by, sizeof(*p->labels));
    add_label(p, "__name__", rule->metric);
    add_label(p, "profiles_rule_id", rule->id);
    for (size_t i = 0; i < rule->n_external; i++)
        add_label(p, rule->external[i].name, rule->external[i].value);
    lc_buf_t key;
    lc_buf_init(&key, LC_BUF_UNLIMITED);
    int rc = lc_buf_printf(&key, "%s\x1f%lld", rule->id, (long long)bucket_ms);
    for (size_t i = 0; i < rule->n_group_by && rc == 0; i++) {
        const char *v = lc_labels_get(ls, rule->group_by[i]);
        if (v && v[0])
            add_label(p, rule->group_by[i], v);
        rc = lc_buf_printf(&key, "\x1f%s", v ? v : "");
    }
    if (rc == 0)
        rc = lc_buf_putc(&key, '\0');
    p->key = rc == 0 ? (char *)key.data : lc_xstrdup("");
    if (rc)
        lc_buf_fini(&key);
    p->bucket_ms = bucket_ms;
    p->value = value;
    p->next = r->pending;
    r->pending = p;
}

void ing_rules_discard(ing_rules_t *r)
{
    points_free(r->pending);
    r->pending = NULL;
}

/* Adds p to the sums (mu held); p is consumed. */
static void sums_add(ing_rules_t *r, point_t *p, int64_t now_ms)
{
    size_t h = lc_hash64(p->key, strlen(p->key), 0) % RULES_TABLE_HEADS;
    for (point_t *q = r->heads[h]; q; q = q->next) {
        if (strcmp(q->key, p->key) == 0) {
            q->value += p->value;
            q->last_ms = now_ms;
            lc_metric_add(r->m_points, 1);
            point_free(p);
            return;
        }
    }
    if (r->n_points >= r->max_series) {
        lc_metric_add(r->m_dropped, 1);
        point_free(p);
        return;
    }
    p->last_ms = now_ms;
    p->next = r->heads[h];
    r->heads[h] = p;
    r->n_points++;
    lc_metric_add(r->m_points, 1);
}

void ing_rules_commit(ing_rules_t *r)
{
    point_t *p = r->pending;
    r->pending = NULL;
    if (!p)
        return;
    int64_t now_ms = lc_monotonic_ns() / 1000000;
    uv_mutex_lock(&r->mu);
    while (p) {
        point_t *next = p->next;
        sums_add(r, p, now_ms);
        p = next;
    }
    lc_metric_set(r->m_open, (double)r->n_points);
    uv_mutex_unlock(&r->mu);
}

/* Unlinks the sums idle since before cutoff_ms (all with INT64_MAX); mu held. */
static point_t *take_idle(ing_rules_t *r, int64_t cutoff_ms)
{
    point_t *out = NULL;
    for (size_t h = 0; h < RULES_TABLE_HEADS; h++) {
        for (point_t **pp = &r->heads[h]; *pp;) {
            point_t *q = *pp;
            if (q->last_ms > cutoff_ms) {
                pp = &q->next;
                continue;
            }
            *pp = q->next;
            q->next = out;
            out = q;
            r->n_points--;
        }
    }
    lc_metric_set(r->m_open, (double)r->n_points);
    return out;
}

static int point_time_cmp(const void *a, const void *b)
{
    const point_t *x = *(const point_t *const *)a, *y = *(const point_t *const *)b;
    return (x->bucket_ms > y->bucket_ms) - (x->bucket_ms < y->bucket_ms);
}

/* Oldest step first: take_idle gathers in table order, and a receiver such
 * as Prometheus refuses a series' sample older than one it already took. */
static void send_points(ing_rules_t *r, point_t *list)
{
    size_t n = 0;
    for (point_t *p = list; p; p = p->next)
        n++;
    point_t **v = lc_xmalloc((n ? n : 1) * sizeof(*v));
    n = 0;
    for (point_t *p = list; p; p = p->next)
        v[n++] = p;
    qsort(v, n, sizeof(*v), point_time_cmp);
    for (size_t i = 0; i < n; i++) {
        if (lc_remote_write_push(r->out, v[i]->labels, v[i]->n_labels, v[i]->bucket_ms,
                                 v[i]->value) == 0)
            lc_metric_add(r->m_flushed, 1);
    }
    lc_free(v);
    points_free(list);
}

void ing_rules_flush_main(void *arg)
{
    ing_rules_t *r = arg;
    uv_mutex_lock(&r->mu);
    while (!r->stopping) {
        (void)uv_cond_timedwait(&r->cond, &r->mu, FLUSH_TICK_NS);
        int64_t now_ms = lc_monotonic_ns() / 1000000;
        point_t *idle = take_idle(r, now_ms - r->flush_idle_ms);
        uv_mutex_unlock(&r->mu);
        send_points(r, idle);
        uv_mutex_lock(&r->mu);
    }
    point_t *rest = take_idle(r, INT64_MAX); /* a stop: everything open goes */
    uv_mutex_unlock(&r->mu);
    send_points(r, rest);
}
