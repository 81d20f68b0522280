/*
 * redis_stream.c — stream ids and the decoding of stream entry replies.
 *
 * Replies are RESP2 trees that hiredis frees after the callback, so entries
 * must outlive them: each entry's value (the body, often 0.1-1 MiB) is taken
 * out of the reply rather than copied — hiredis allocated it with malloc, the
 * reply element becomes nil and hiredis's free of the rest skips it — and the
 * short ids are copied. Nothing from the wire is trusted: every level's type and
 * arity is checked, and the fuzz target (tests/fuzz/fuzz_redis_entry.c)
 * feeds arbitrary RESP through hiredis's reader into these functions.
 *
 * An entry whose fields are nil (deleted while pending) or that lacks the
 * wanted field is kept with data == NULL: the consumer must still ack it,
 * or it would be redelivered forever.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/redis.h"

/* ---------------------------------------------------------------- ids */

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20)
        return LC_EINPUT;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return LC_EINPUT;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return LC_EINPUT;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int lc_redis_id_parse(const char *s, size_t len, lc_redis_id_t *out)
{
    const char *dash = memchr(s, '-', len);
    out->seq = 0;
    if (!dash)
        return parse_u64(s, len, &out->ms);
    int rc = parse_u64(s, (size_t)(dash - s), &out->ms);
    return rc ? rc : parse_u64(dash + 1, len - (size_t)(dash - s) - 1, &out->seq);
}

int lc_redis_id_cmp(lc_redis_id_t a, lc_redis_id_t b)
{
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}

lc_redis_id_t lc_redis_id_next(lc_redis_id_t id)
{
    if (id.seq == UINT64_MAX)
        return (lc_redis_id_t){id.ms + 1, 0};
    return (lc_redis_id_t){id.ms, id.seq + 1};
}

void lc_redis_id_format(lc_redis_id_t id, char out[LC_REDIS_ID_MAX])
{
    snprintf(out, LC_REDIS_ID_MAX, "%" PRIu64 "-%" PRIu64, id.ms, id.seq);
}

/* ---------------------------------------------------------------- entries */

static bool is_string(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static bool string_is(const redisReply *r, const char *s, size_t len)
{
    return is_string(r) && r->len == len && memcmp(r->str, s, len) == 0;
}

static lc_redis_entry_t *entry_slot(lc_redis_entries_t *out)
{
    out->v = lc_xgrow(out->v, &out->cap, out->n + 1, sizeof(*out->v));
    lc_redis_entry_t *e = &out->v[out->n];
    memset(e, 0, sizeof(*e));
    return e;
}

/* The value of field in a flat [f, v, f, v, ...] array, or NULL. */
static redisReply *field_value(const redisReply *fields, const char *field, int *rc)
{
    size_t flen = strlen(field);
    if (fields->elements % 2) {
        *rc = LC_ECORRUPT;
        return NULL;
    }
    for (size_t i = 0; i < fields->elements; i += 2) {
        if (!is_string(fields->element[i]) || !is_string(fields->element[i + 1])) {
            *rc = LC_ECORRUPT;
            return NULL;
        }
        if (string_is(fields->element[i], field, flen))
            return fields->element[i + 1];
    }
    return NULL;
}

/* Takes a string's bytes out of the reply: the caller frees them with
 * lc_free (malloc's free, as hiredis's own freeReplyObject would). */
static uint8_t *string_take(redisReply *v)
{
    uint8_t *bytes = (uint8_t *)v->str;
    v->str = NULL;
    v->len = 0;
    v->type = REDIS_REPLY_NIL;
    return bytes;
}

/* One [id, [f, v, ...] | nil] element. */
static int entry_decode(lc_redis_entries_t *out, const redisReply *r, uint32_t stream,
                        const char *field)
{
    if (r->type == REDIS_REPLY_NIL)
        return 0; /* a claimed entry deleted meanwhile (Redis < 7): no id to ack */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_string(r->element[0]))
        return LC_ECORRUPT;
    const redisReply *id = r->element[0], *fields = r->element[1];
    lc_redis_id_t parsed;
    if (id->len >= LC_REDIS_ID_MAX || lc_redis_id_parse(id->str, id->len, &parsed) != 0)
        return LC_ECORRUPT;
    if (fields->type != REDIS_REPLY_NIL && fields->type != REDIS_REPLY_ARRAY)
        return LC_ECORRUPT;
    int rc = 0;
    redisReply *value = fields->type == REDIS_REPLY_ARRAY ? field_value(fields, field, &rc) : NULL;
    if (rc)
        return rc;
    if (value && !value->str)
        return LC_ECORRUPT; /* hiredis always allocates a string's bytes */
    lc_redis_entry_t *e = entry_slot(out);
    e->stream = stream;
    memcpy(e->id, id->str, id->len);
    if (value) {
        e->len = value->len;
        e->data = string_take(value);
        out->bytes += e->len;
    }
    out->n++;
    return 0;
}

int lc_redis_entries_from_array(lc_redis_entries_t *out, const redisReply *entries, uint32_t stream,
                                const char *field)
{
    if (!entries || entries->type != REDIS_REPLY_ARRAY)
        return LC_ECORRUPT;
    for (size_t i = 0; i < entries->elements; i++) {
        int rc = entry_decode(out, entries->element[i], stream, field);
        if (rc)
            return rc;
    }
    return 0;
}

static int stream_index(const redisReply *name, const char *const *names, size_t n_names,
                        uint32_t *out)
{
    if (!is_string(name))
        return LC_ECORRUPT;
    for (size_t i = 0; i < n_names; i++) {
        if (string_is(name, names[i], strlen(names[i]))) {
            *out = (uint32_t)i;
            return 0;
        }
    }
    return LC_ECORRUPT;
}

int lc_redis_entries_from_read(lc_redis_entries_t *out, const redisReply *reply,
                               const char *const *names, size_t n_names, const char *field)
{
    if (!reply || reply->type == REDIS_REPLY_NIL)
        return 0; /* BLOCK expired */
    if (reply->type != REDIS_REPLY_ARRAY)
        return LC_ECORRUPT;
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *s = reply->element[i];
        uint32_t stream;
        if (s->type != REDIS_REPLY_ARRAY || s->elements != 2)
            return LC_ECORRUPT;
        int rc = stream_index(s->element[0], names, n_names, &stream);
        if (rc == 0 && s->element[1]->type != REDIS_REPLY_NIL)
            rc = lc_redis_entries_from_array(out, s->element[1], stream, field);
        if (rc)
            return rc;
    }
    return 0;
}

void lc_redis_entries_reset(lc_redis_entries_t *e)
{
    for (size_t i = 0; i < e->n; i++)
        lc_free(e->v[i].data);
    e->n = 0;
    e->bytes = 0;
}

void lc_redis_entries_fini(lc_redis_entries_t *e)
{
    lc_redis_entries_reset(e);
    lc_free(e->v);
    memset(e, 0, sizeof(*e));
}
