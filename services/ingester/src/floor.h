/*
 * floor.h — the ingester's mark (issue 27): the store's floor
 * (lc_store_set_floor) published as this ingester's mark in the membership
 * (lc_members_set_mark), so that queriers read what lies below it from the
 * bucket instead of asking this ingester. Set once the ingester is
 * registered (before it consumes) and only with --storage.local-retention:
 * without it no block ever leaves, and the queriers ask for everything.
 *
 * The store calls publish on the writer's thread (a write below the floor
 * lowers the mark first) or the uploader's (lc_store_floor_update after its
 * drops); it hands the command to the loop thread, which owns the
 * membership, and waits for Redis's answer (at most ING_FLOOR_WAIT_MS). A
 * failure is -EAGAIN: the writer's batch fails as a storage error does and is
 * consumed again later, never set aside.
 *
 * Ownership: ing_floor_new borrows the store and the members. Close it
 * before the members (it stops using them), free it after the store (the
 * store may call publish until it closes: it then fails).
 * Threading: new/close/free on the loop thread; publish on any other thread.
 */
#ifndef EMBER_ING_FLOOR_H
#define EMBER_ING_FLOOR_H

#include <uv.h>

#include "lc/members.h"
#include "lc/metrics.h"
#include "lc/store.h"

#define ING_FLOOR_WAIT_MS 10000

typedef struct ing_floor_s ing_floor_t;

/* Sets itself as the store's floor; publishes nothing yet (the mark in Redis,
 * if an earlier life left one, holds until the first write below it or the
 * uploader's first update). */
int ing_floor_new(uv_loop_t *loop, lc_store_t *store, lc_members_t *members, lc_metrics_t *metrics,
                  ing_floor_t **out) LC_MUST_CHECK;
/* Fails every publish from now on (-EAGAIN: a write below the floor is
 * consumed again by the next life) and lets go of the members. NULL-safe. */
void ing_floor_close(ing_floor_t *f);
/* After the store closed and the loop ran once since ing_floor_close. NULL-safe. */
void ing_floor_free(ing_floor_t *f);

#endif
