/*
 * handover.h — decoded profiles a receiver hands the writer of its own
 * process over Redis (issue 32).
 *
 * Over the `direct` transport the writer gets the receiver's decoded and
 * checked pprof with the message (ing_decoded_t). Over Redis the 200 goes
 * out once the XADD is durable, before any writer reads the entry, so the
 * request's arena is gone by then and the writer had to gunzip, decode and
 * check the entry again: on heap profiles with four sample types that was
 * a third of the process's CPU. Here a receiver leaves the profile, in an
 * arena of its own, under the message's ingest id; the writer that consumes
 * an entry with that id takes it instead of decoding the entry's bytes.
 *
 * Only an optimisation: the stream entry stays the truth. A profile not
 * taken (another ingester consumed the entry, the publish failed) expires
 * after ING_HANDOVER_MAX_AGE_NS; when the held bytes would pass the cap a
 * new one is not kept; a writer that finds nothing decodes as before. What
 * is held was validated and checked by the receiver for the message's
 * tenant and time, and an ingest id is 16 random bytes drawn here, so an
 * entry with that id is the message the receiver built (or a replay of it).
 *
 * Threading: every function may be called from any thread (one mutex); an
 * item taken belongs to its taker.
 */
#ifndef ING_HANDOVER_H
#define ING_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lc/alloc.h"
#include "lc/metrics.h"
#include "lc/pprof.h"
#include "lc/store.h"

/* Profiles not taken within this long were consumed elsewhere, or never
 * published. */
#define ING_HANDOVER_MAX_AGE_NS ((int64_t)30 * 1000 * 1000 * 1000)

typedef struct ing_handover_s ing_handover_t;
typedef struct ing_handover_item_s ing_handover_item_t;

/* Holds at most max_bytes of decoded profiles (arena bytes). */
ing_handover_t *ing_handover_new(size_t max_bytes, lc_metrics_t *metrics);
/* Frees everything still held. */
void ing_handover_free(ing_handover_t *h);

/* Takes arena (always: it is freed when not kept), in which p and ix live
 * wholly, and holds them under the 16-byte ingest id of a message for the
 * stream `partition`. */
void ing_handover_put(ing_handover_t *h, const uint8_t *ingest_id, uint32_t partition,
                      lc_arena_t *arena, const lc_pprof_t *p, const lc_pprof_index_t *ix);
/* The message of what is held under ingest_id is being published: from now
 * on it counts for ing_handover_crowded. */
void ing_handover_published(ing_handover_t *h, const uint8_t *ingest_id);
/* Past a quarter of the cap in profiles published and not taken yet (the
 * rest is room for those being received meanwhile, which are put before
 * they wait; with half, 5% of a heap mix found it full): receivers
 * wait before publishing more (publish.c), so that the writer finds what
 * they publish here instead of decoding it. (Those that wait hold theirs
 * unpublished, and must not count: nothing would take them.) */
bool ing_handover_crowded(ing_handover_t *h);
/* Forgets what is held under ingest_id (its publish failed). */
void ing_handover_drop(ing_handover_t *h, const uint8_t *ingest_id);
/* What is held under the ingest id (id_len bytes), now the caller's; NULL
 * when nothing is. What was put before it into the same stream goes: it was
 * delivered to another consumer. */
ing_handover_item_t *ing_handover_take(ing_handover_t *h, const uint8_t *ingest_id, size_t id_len);
const lc_pprof_t *ing_handover_profile(const ing_handover_item_t *it);
const lc_pprof_index_t *ing_handover_index(const ing_handover_item_t *it);
/* Frees a taken item and its arena; NULL is fine. */
void ing_handover_item_free(ing_handover_item_t *it);

#endif
