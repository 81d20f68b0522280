/*
 * transport_dead_int.h — the redis transport's dead letters
 * (transport_redis_dead.c; not a public header).
 *
 * A message the consumer set aside (lc_transport_msg_t.reject_err) can never
 * be applied: leaving it pending would have it claimed back forever and hold
 * its stream's trim point. It is copied to the dead-letter stream of its
 * partition, <dead_prefix><p>, and only then acked with its batch. Each
 * dead letter is written once per batch that set it aside; one that failed
 * is sent again by the next send of the same batch.
 *
 * Threading: the loop thread only (the counter is read from any thread).
 */
#ifndef LC_TRANSPORT_DEAD_INT_H
#define LC_TRANSPORT_DEAD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "lc/metrics.h"
#include "lc/redis.h"
#include "lc/transport.h"

typedef struct lc_dead_s lc_dead_t;

/* prefix NULL: "ember:dead:"; max_len 0: 10000; metrics may be NULL. The
 * strings are copied. */
lc_dead_t *lc_transport__dead_new(const char *prefix, uint32_t max_len, const char *consumer,
                                  lc_metrics_t *metrics);
void lc_transport__dead_free(lc_dead_t *d);
/* Where dead letters go: <prefix><first + stream index>, or with tagged
 * (Redis Cluster) <prefix>{<stream name>}, in the source stream's slot. */
void lc_transport__dead_place(lc_dead_t *d, uint32_t first, bool tagged);

/* A batch came back from consume: how many of its n messages were set
 * aside (0: there is nothing to write). Forgets what the last batch wrote. */
size_t lc_transport__dead_begin(lc_dead_t *d, const lc_transport_msg_t *msgs, size_t n);

/* Writes the dead letters of the batch that are not written yet on link:
 * msgs are the batch's entries that have data, in order (as handed to
 * consume); streams names the source streams by partition. done runs exactly
 * once (possibly before this returns): 0 once every one is in Redis, else
 * the first failure (the caller retries later; the batch stays unacked). */
void lc_transport__dead_send(lc_dead_t *d, lc_redis_t *link, const lc_redis_entries_t *batch,
                             const char *const *streams, const lc_transport_msg_t *msgs,
                             void (*done)(int status, void *data), void *data);

/* Dead letters written so far (any thread). 0 for NULL. */
uint64_t lc_transport__dead_count(const lc_dead_t *d);

#endif
