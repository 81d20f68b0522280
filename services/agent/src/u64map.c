/*
 * u64map.c — a uint64 -> uint64 hash map (linear probing, backward-shift
 * deletion, load factor under 3/4) for the agent's hot lookups: stack hashes,
 * addresses, pids. Key 0 marks an empty slot.
 */
#include <string.h>

#include "agent_int.h"
#include "lc/hash.h"
#include "lc/log.h"

void agt_u64map_init(agt_u64map_t *m)
{
    memset(m, 0, sizeof(*m));
}

void agt_u64map_fini(agt_u64map_t *m)
{
    lc_free(m->keys);
    lc_free(m->vals);
    memset(m, 0, sizeof(*m));
}

void agt_u64map_clear(agt_u64map_t *m)
{
    if (m->cap)
        memset(m->keys, 0, m->cap * sizeof(*m->keys));
    m->n = 0;
}

static size_t slot_of(const agt_u64map_t *m, uint64_t key)
{
    return (size_t)lc_mix64(key) & (m->cap - 1);
}

static void u64map_grow(agt_u64map_t *m)
{
    agt_u64map_t bigger = {0};
    bigger.cap = m->cap ? m->cap * 2 : 16;
    bigger.keys = lc_xcalloc(bigger.cap, sizeof(*bigger.keys));
    bigger.vals = lc_xcalloc(bigger.cap, sizeof(*bigger.vals));
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = slot_of(&bigger, m->keys[i]);
        while (bigger.keys[j])
            j = (j + 1) & (bigger.cap - 1);
        bigger.keys[j] = m->keys[i];
        bigger.vals[j] = m->vals[i];
    }
    bigger.n = m->n;
    agt_u64map_fini(m);
    *m = bigger;
}

uint64_t *agt_u64map_get(const agt_u64map_t *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    for (size_t i = slot_of(m, key); m->keys[i]; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
    }
    return NULL;
}

uint64_t *agt_u64map_put(agt_u64map_t *m, uint64_t key, bool *added)
{
    LC_ASSERT(key != 0);
    if ((m->n + 1) * 4 > m->cap * 3)
        u64map_grow(m);
    size_t i = slot_of(m, key);
    for (; m->keys[i]; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            if (added)
                *added = false;
            return &m->vals[i];
        }
    }
    m->keys[i] = key;
    m->vals[i] = 0;
    m->n++;
    if (added)
        *added = true;
    return &m->vals[i];
}

/* Backward-shift deletion: later members of the probe run move up into the
 * hole unless their home slot lies (cyclically) after it. */
bool agt_u64map_del(agt_u64map_t *m, uint64_t key)
{
    uint64_t *v = agt_u64map_get(m, key);
    if (!v)
        return false;
    size_t mask = m->cap - 1;
    size_t hole = (size_t)(v - m->vals);
    for (size_t j = (hole + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m, m->keys[j]);
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays)
            continue;
        m->keys[hole] = m->keys[j];
        m->vals[hole] = m->vals[j];
        hole = j;
    }
    m->keys[hole] = 0;
    m->n--;
    return true;
}
