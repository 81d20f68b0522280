/*
 * handover.c — decoded profiles held for the writer of this process
 * (handover.h): a FIFO list in put order, so that expiry looks at its head
 * only, and a take scans it (it holds tens of profiles at most: the cap is
 * bytes of decoded profiles of a few MiB each).
 */
#include <string.h>

#include "handover.h"
#include "lc/clock.h"
#include "lc/transport.h"

struct ing_handover_item_s {
    struct ing_handover_item_s *prev, *next;
    uint8_t id[LC_INGEST_ID_BYTES];
    uint32_t partition;
    int64_t put_ns;
    size_t bytes;
    bool published; /* counted in published_bytes */
    lc_arena_t *arena;
    const lc_pprof_t *profile;
    const lc_pprof_index_t *index;
};

typedef enum {
    HO_KEPT,    /* held for the writer */
    HO_FULL,    /* not held: the cap */
    HO_TAKEN,   /* the writer took it instead of decoding */
    HO_EXPIRED, /* never taken: consumed elsewhere, or never published */
    HO_PASSED,  /* a later entry of its stream was taken: another consumer had it */
    HO_DROPPED, /* its publish failed */
    HO_RESULTS,
} ho_result_t;

struct ing_handover_s {
    uv_mutex_t mu;
    ing_handover_item_t *head, *tail; /* oldest first */
    size_t bytes, max_bytes;
    size_t published_bytes; /* of those a writer can take now */
    lc_metric_t *m_result[HO_RESULTS];
    lc_metric_t *m_bytes;
};

static void ho_register(ing_handover_t *h, lc_metrics_t *m)
{
    static const char *const names[HO_RESULTS] = {"kept",    "full",   "taken",
                                                  "expired", "passed", "dropped"};
    if (!m)
        return;
    for (int i = 0; i < HO_RESULTS; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "result=\"%s\"", names[i]);
        h->m_result[i] = lc_metrics_counter(
            m, "ember_ingest_handover_total",
            "Decoded profiles a receiver left for the writer of its process over Redis, by "
            "result",
            labels);
    }
    h->m_bytes = lc_metrics_gauge(m, "ember_ingest_handover_bytes",
                                  "Bytes of decoded profiles held for the writer", "");
}

ing_handover_t *ing_handover_new(size_t max_bytes, lc_metrics_t *metrics)
{
    ing_handover_t *h = lc_xcalloc(1, sizeof(*h));
    if (uv_mutex_init(&h->mu) != 0) {
        lc_free(h);
        return NULL;
    }
    h->max_bytes = max_bytes;
    ho_register(h, metrics);
    return h;
}

void ing_handover_item_free(ing_handover_item_t *it)
{
    if (!it)
        return;
    lc_arena_free(it->arena);
    lc_free(it);
}

void ing_handover_free(ing_handover_t *h)
{
    if (!h)
        return;
    for (ing_handover_item_t *it = h->head, *next; it; it = next) {
        next = it->next;
        ing_handover_item_free(it);
    }
    uv_mutex_destroy(&h->mu);
    lc_free(h);
}

/* Under mu. */
static void ho_unlink(ing_handover_t *h, ing_handover_item_t *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        h->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        h->tail = it->prev;
    h->bytes -= it->bytes;
    if (it->published)
        h->published_bytes -= it->bytes;
    lc_metric_set(h->m_bytes, (double)h->bytes);
}

/* Under mu: unlinks what is too old; returns the list of them. */
static ing_handover_item_t *ho_expire(ing_handover_t *h, int64_t now_ns)
{
    ing_handover_item_t *old = NULL;
    while (h->head && now_ns - h->head->put_ns > ING_HANDOVER_MAX_AGE_NS) {
        ing_handover_item_t *it = h->head;
        ho_unlink(h, it);
        it->next = old;
        old = it;
        lc_metric_add(h->m_result[HO_EXPIRED], 1);
    }
    return old;
}

/* Outside mu: arenas can be large, freeing them is not the lock's work. */
static void ho_free_list(ing_handover_item_t *it)
{
    while (it) {
        ing_handover_item_t *next = it->next;
        ing_handover_item_free(it);
        it = next;
    }
}

void ing_handover_put(ing_handover_t *h, const uint8_t *ingest_id, uint32_t partition,
                      lc_arena_t *arena, const lc_pprof_t *p, const lc_pprof_index_t *ix)
{
    ing_handover_item_t *it = lc_xcalloc(1, sizeof(*it));
    memcpy(it->id, ingest_id, sizeof(it->id));
    it->partition = partition;
    it->put_ns = lc_monotonic_ns();
    it->bytes = lc_arena_used(arena);
    it->arena = arena;
    it->profile = p;
    it->index = ix;
    uv_mutex_lock(&h->mu);
    ing_handover_item_t *expired = ho_expire(h, it->put_ns);
    bool kept = h->bytes + it->bytes <= h->max_bytes;
    if (kept) {
        it->prev = h->tail;
        if (h->tail)
            h->tail->next = it;
        else
            h->head = it;
        h->tail = it;
        h->bytes += it->bytes;
        lc_metric_set(h->m_bytes, (double)h->bytes);
    }
    lc_metric_add(h->m_result[kept ? HO_KEPT : HO_FULL], 1);
    uv_mutex_unlock(&h->mu);
    ho_free_list(expired);
    if (!kept)
        ing_handover_item_free(it);
}

/* Under mu. */
static ing_handover_item_t *ho_find(const ing_handover_t *h, const uint8_t *id)
{
    for (ing_handover_item_t *it = h->head; it; it = it->next)
        if (memcmp(it->id, id, sizeof(it->id)) == 0)
            return it;
    return NULL;
}

/* Under mu: unlinks the items put before `it` into its stream; returns
 * the list of them. A stream delivers its entries in order, so those were
 * delivered already, and not here (they would have been taken): another
 * consumer has them. (Two publishes of one stream racing each other can
 * make this wrong for one entry: the writer then decodes it.) */
static ing_handover_item_t *ho_pass(ing_handover_t *h, const ing_handover_item_t *it)
{
    ing_handover_item_t *passed = NULL;
    for (ing_handover_item_t *o = h->head, *next; o && o != it; o = next) {
        next = o->next;
        if (o->partition != it->partition)
            continue;
        ho_unlink(h, o);
        o->next = passed;
        passed = o;
        lc_metric_add(h->m_result[HO_PASSED], 1);
    }
    return passed;
}

static ing_handover_item_t *ho_remove(ing_handover_t *h, const uint8_t *id, ho_result_t result,
                                      ing_handover_item_t **passed)
{
    uv_mutex_lock(&h->mu);
    ing_handover_item_t *it = ho_find(h, id);
    if (it && passed)
        *passed = ho_pass(h, it);
    if (it) {
        ho_unlink(h, it);
        it->prev = it->next = NULL;
        lc_metric_add(h->m_result[result], 1);
    }
    uv_mutex_unlock(&h->mu);
    return it;
}

void ing_handover_drop(ing_handover_t *h, const uint8_t *ingest_id)
{
    ing_handover_item_free(ho_remove(h, ingest_id, HO_DROPPED, NULL));
}

ing_handover_item_t *ing_handover_take(ing_handover_t *h, const uint8_t *ingest_id, size_t id_len)
{
    if (id_len != LC_INGEST_ID_BYTES)
        return NULL;
    ing_handover_item_t *passed = NULL;
    ing_handover_item_t *it = ho_remove(h, ingest_id, HO_TAKEN, &passed);
    ho_free_list(passed);
    return it;
}

void ing_handover_published(ing_handover_t *h, const uint8_t *ingest_id)
{
    uv_mutex_lock(&h->mu);
    ing_handover_item_t *it = ho_find(h, ingest_id);
    if (it && !it->published) {
        it->published = true;
        h->published_bytes += it->bytes;
    }
    uv_mutex_unlock(&h->mu);
}

bool ing_handover_crowded(ing_handover_t *h)
{
    uv_mutex_lock(&h->mu);
    bool crowded = h->published_bytes > h->max_bytes / 4;
    uv_mutex_unlock(&h->mu);
    return crowded;
}

const lc_pprof_t *ing_handover_profile(const ing_handover_item_t *it)
{
    return it->profile;
}

const lc_pprof_index_t *ing_handover_index(const ing_handover_item_t *it)
{
    return it->index;
}
