/*
 * rules_export.h — what an ingester node needs to evaluate recording rules
 * and send their series (issue 29): the settings store the rules live in,
 * the remote write sender and the evaluator, wired to the writer.
 *
 * Started only with --metrics-export.remote-write-url. The settings store is
 * the one the querier uses: LMDB under <data.dir>/settings in `ember` (put
 * in p->settings, so that the querier node of the same process borrows it:
 * LMDB allows one environment per file per process), the Redis of
 * --redis.url in `ember-ingester`. Ownership: the node owns the result;
 * free it after the writer. Threading: the loop thread.
 */
#ifndef EMBER_ING_RULES_EXPORT_H
#define EMBER_ING_RULES_EXPORT_H

#include "ember_process.h"
#include "ingester.h"

typedef struct ing_rules_export_s ing_rules_export_t;

/* *out NULL when no URL is set. Non-zero (logged) when a part cannot start. */
int ing_rules_export_start(lc_proc_t *p, const ember_settings_t *s, ing_writer_t *writer,
                           ing_rules_export_t **out) LC_MUST_CHECK;
void ing_rules_export_free(ing_rules_export_t *x);

#endif
