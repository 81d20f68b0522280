/*
 * writer_fixture.h — a writer over a real store in a mkdtemp directory, and
 * IngestProfile messages for it, and cpu profiles with chosen values (the
 * writer's and lc_store_check_profile's unit tests). Include after lc_test.h
 * and write_int.h.
 */
#ifndef WRITER_FIXTURE_H
#define WRITER_FIXTURE_H

#include <unistd.h>

#include "lc_test_pprof.h"

typedef struct fixture_s {
    char dir[64];
    lc_store_t *store;
    ing_writer_t *w;
    lc_arena_t *arena;
} fixture_t;

/* map_size: LMDB map per block, 0 for the default. */
static void fx_open_sized(fixture_t *f, size_t map_size)
{
    snprintf(f->dir, sizeof(f->dir), "/tmp/ember-writer-XXXXXX");
    LC_CHECK(mkdtemp(f->dir) != NULL);
    lc_store_opts_t o = {.dir = f->dir, .map_size_bytes = map_size};
    LC_ASSERT_OK(lc_store_open(&o, &f->store));
    LC_ASSERT_OK(ing_writer_new(f->store, NULL, &f->w));
    f->arena = lc_arena_new((size_t)1 << 30);
}

static void fx_open(fixture_t *f)
{
    fx_open_sized(f, 0);
}

static void fx_close(fixture_t *f)
{
    ing_writer_free(f->w);
    lc_store_close(f->store);
    lc_arena_free(f->arena);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    LC_ASSERT_OK(system(cmd));
}

/* An encoded IngestProfile (tenant "anonymous") of pprof bytes, with the
 * NULL-terminated name/value pairs as labels; id makes its ingest id. */
static lc_transport_msg_t fx_message(fixture_t *f, const uint8_t *pprof, size_t len,
                                     int64_t time_ns, const char *const *labels,
                                     bool delta_disabled, uint8_t id)
{
    Types__V1__LabelPair pairs[16], *pp[16];
    size_t n = 0;
    for (; labels[2 * n]; n++) {
        types__v1__label_pair__init(&pairs[n]);
        pairs[n].name = (char *)labels[2 * n];
        pairs[n].value = (char *)labels[2 * n + 1];
        pp[n] = &pairs[n];
    }
    uint8_t ingest_id[16] = {id, 1, 2, 3};
    Ember__V1__IngestProfile m = EMBER__V1__INGEST_PROFILE__INIT;
    m.tenant = "anonymous";
    m.ingest_id = (ProtobufCBinaryData){16, ingest_id};
    m.labels = pp;
    m.n_labels = n;
    m.pprof = (ProtobufCBinaryData){len, (uint8_t *)pprof};
    m.time_nanos = time_ns;
    m.delta_disabled = delta_disabled;
    size_t size = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *data = lc_arena_alloc(f->arena, size);
    protobuf_c_message_pack(&m.base, data);
    return (lc_transport_msg_t){.data = data, .len = size, .id = ""};
}

#define FX_TIME 1700000000000000000LL

/* A cpu/nanoseconds profile (lc_test_pprof_app's frame, frames "a" and "b")
 * with one sample per value: on frame stacks[i], labelled key=label_values[i]
 * when that is set. Encoded bytes in f->arena. */
static const uint8_t *fx_pprof(fixture_t *f, const int64_t *values, const int *stacks,
                               const char *key, const char *const *label_values, size_t n,
                               size_t *len)
{
    char names[2][16] = {"a", "b"};
    uint64_t locs[2];
    lc_pprof_builder_t *b = lc_test_pprof_app(names, 2, locs);
    lc_pprof_builder_times(b, FX_TIME, 0);
    for (size_t i = 0; i < n; i++) {
        const char *kv[2] = {key, label_values ? label_values[i] : NULL};
        lc_pprof_builder_sample(b, &locs[stacks[i]], 1, &values[i], kv, kv[1] ? 1 : 0);
    }
    lc_buf_t buf;
    lc_buf_init(&buf, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_pprof_builder_encode(b, false, &buf));
    lc_pprof_builder_free(b);
    uint8_t *copy = lc_arena_alloc(f->arena, buf.len);
    memcpy(copy, buf.data, buf.len);
    *len = buf.len;
    lc_buf_fini(&buf);
    return copy;
}

#endif
