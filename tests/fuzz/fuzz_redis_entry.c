/*
 * fuzz_redis_entry.c — arbitrary RESP bytes through hiredis's reply reader
 * into the stream entry decoders the redis transport uses on XREADGROUP and
 * XAUTOCLAIM replies (lc_redis_entries_from_read / _from_array), and into
 * lc_redis_id_parse; and, for Redis Cluster (lc/redis_cluster.h), into the
 * CLUSTER SLOTS map parser and the MOVED / ASK parser. Whatever the bytes,
 * decoding must not crash or leak, and what it accepts must be sane: every
 * entry names a known stream and carries an id that parses and formats back
 * to itself; the byte count adds up; every slot's owner is a node of the map
 * with a non-empty host and a port; a redirection names a slot below 16384.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lc/redis.h"
#include "lc/redis_cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"ember:ingest:0", "ember:ingest:1", "ember:ingest:2"};

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_redis_entry: broken promise: %s\n", what);
        abort();
    }
}

static void check_entries(const lc_redis_entries_t *e)
{
    size_t bytes = 0;
    for (size_t i = 0; i < e->n; i++) {
        const lc_redis_entry_t *x = &e->v[i];
        lc_redis_id_t id;
        require(x->stream < LC_ARRAY_LEN(names), "entry of a known stream");
        require(lc_redis_id_parse(x->id, strlen(x->id), &id) == 0, "entry id parses");
        require(x->data || x->len == 0, "no length without data");
        bytes += x->len;
    }
    require(bytes == e->bytes, "byte count adds up");
}

static void check_slot_map(const redisReply *reply)
{
    lc_redis_slot_map_t m = {0};
    if (lc_redis_slot_map_parse(&m, reply) == 0) {
        require(m.n_nodes <= LC_REDIS_CLUSTER_NODES_MAX, "node count within its limit");
        for (size_t i = 0; i < m.n_nodes; i++)
            require(m.nodes[i].host[0] && m.nodes[i].port, "a node has a host and a port");
        for (size_t s = 0; s < LC_REDIS_SLOTS; s++)
            require(m.owner[s] <= m.n_nodes, "a slot's owner is a node of the map");
    } else {
        require(m.n_nodes == 0 && !m.nodes, "a refused map is empty");
    }
    lc_redis_slot_map_fini(&m);
}

static void check_redirect(const uint8_t *data, size_t size)
{
    uint16_t slot;
    lc_redis_node_t to;
    bool ask;
    if (lc_redis_redirect_parse((const char *)data, size, &slot, &to, &ask) == 0)
        require(slot < LC_REDIS_SLOTS && to.host[0] && to.port, "a redirection is sane");
    require(lc_redis_key_slot((const char *)data, size) < LC_REDIS_SLOTS, "a slot is in range");
}

static void decode_reply(const redisReply *reply)
{
    check_slot_map(reply);
    lc_redis_entries_t e = {0};
    if (lc_redis_entries_from_read(&e, reply, names, LC_ARRAY_LEN(names), "m") == 0)
        check_entries(&e);
    lc_redis_entries_reset(&e);
    if (lc_redis_entries_from_array(&e, reply, 1, "m") == 0)
        check_entries(&e);
    lc_redis_entries_reset(&e);
    /* XAUTOCLAIM: [cursor, entries, deleted ids] */
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
        lc_redis_entries_from_array(&e, reply->element[1], 2, "m") == 0)
        check_entries(&e);
    lc_redis_entries_fini(&e);
}

static void check_id(const uint8_t *data, size_t size)
{
    lc_redis_id_t id, again;
    if (lc_redis_id_parse((const char *)data, size, &id) != 0)
        return;
    char text[LC_REDIS_ID_MAX];
    lc_redis_id_format(id, text);
    require(lc_redis_id_parse(text, strlen(text), &again) == 0, "formatted id parses");
    require(lc_redis_id_cmp(id, again) == 0, "id round-trips");
    require(lc_redis_id_cmp(id, lc_redis_id_next(id)) < 0 ||
                (id.ms == UINT64_MAX && id.seq == UINT64_MAX),
            "next id is greater");
}

/* hiredis 0.14 allocates an array as soon as it reads its "*<count>" header:
 * skip inputs that declare huge arrays (a real server's replies are trusted). */
static bool declares_huge_array(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*' || (i && data[i - 1] != '\n'))
            continue;
        size_t digits = 0;
        while (i + 1 + digits < size && data[i + 1 + digits] >= '0' && data[i + 1 + digits] <= '9')
            digits++;
        if (digits > 4)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_id(data, size);
    check_redirect(data, size);
    if (declares_huge_array(data, size))
        return 0;
    redisReader *reader = redisReaderCreate();
    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
        void *reply = NULL;
        for (int i = 0; i < 16; i++) {
            if (redisReaderGetReply(reader, &reply) != REDIS_OK || !reply)
                break;
            decode_reply(reply);
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(reader);
    return 0;
}
