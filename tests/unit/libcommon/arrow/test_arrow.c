/*
 * test_arrow.c — lc/arrow.h on a real Parca Agent push
 * (tests/fixtures/parca-agent/v2/writearrow-000.bin): the schema and values
 * the agent documents (parca-agent-wire: 433 rows, period 1e9/97 ns,
 * duration 1e9, producer "parca_agent"), then every limit in turn must stop
 * the same stream with a message naming it, and misused getters must fail
 * cleanly. Value-for-value checks against pyarrow are in
 * integration/test_arrow_ipc.py.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lc/arrow.h"
#include "lc_test.h"

#define FIXTURE_DIR LC_FIXTURES_DIR "/parca-agent/v2/"

static uint8_t *push;
static const uint8_t *stream;
static size_t stream_len;

/* Field 1 of the WriteArrowRequest: tag 0x0a, a varint length, the bytes. */
static void load_push(void)
{
    size_t len = 0;
    push = lc_test_read_file(FIXTURE_DIR "writearrow-000.bin", &len);
    LC_CHECK(push != NULL && len > 8 && push[0] == 0x0a);
    const uint8_t *p = push + 1;
    uint64_t n = 0;
    LC_ASSERT_OK(lc_uvarint_get(&p, push + len, &n));
    LC_ASSERT_EQ(n, (uint64_t)(push + len - p));
    stream = p;
    stream_len = (size_t)n;
}

/* Opens and reads the whole stream; returns the rows, or -1 with st set. */
static int64_t read_all(const lc_arrow_limits_t *lim, size_t arena_cap, lc_status_t *st)
{
    lc_arena_t *arena = lc_arena_new(arena_cap);
    lc_arrow_stream_t *s;
    int64_t rows = -1;
    if (lc_arrow_stream_open(&s, stream, stream_len, lim, arena, st) == 0) {
        const lc_arrow_batch_t *b;
        int rc;
        rows = 0;
        while ((rc = lc_arrow_stream_next(s, &b, st)) == 1)
            rows += b->length;
        if (rc < 0)
            rows = -1;
        lc_arrow_stream_close(s);
    }
    lc_arena_free(arena);
    return rows;
}

static const lc_arrow_array_t *column(const lc_arrow_batch_t *b, const lc_arrow_schema_t *sc,
                                      const char *name)
{
    for (size_t i = 0; i < sc->n_fields; i++)
        if (strcmp(sc->fields[i].name, name) == 0)
            return &b->columns[i];
    LC_FAIL_("no column %s", name);
    return NULL;
}

static void check_schema(const lc_arrow_schema_t *sc)
{
    LC_ASSERT_EQ(sc->n_fields, 13u);
    LC_ASSERT_EQ(sc->n_meta, 1u);
    LC_ASSERT_STR_EQ(sc->meta_keys[0], "parca_write_schema_version");
    LC_ASSERT_STR_EQ(sc->meta_values[0], "v2");
    LC_ASSERT_STR_EQ(sc->fields[0].name, "labels");
    LC_ASSERT_EQ(sc->fields[0].kind, LC_ARROW_STRUCT);
    LC_ASSERT_EQ(sc->fields[1].kind, LC_ARROW_LIST_VIEW);
    LC_CHECK(sc->fields[1].children[0].dict_encoded);
    LC_ASSERT_EQ(sc->fields[1].children[0].kind, LC_ARROW_STRUCT);
    LC_ASSERT_EQ(sc->fields[2].kind, LC_ARROW_FIXED_BINARY);
    LC_ASSERT_STR_EQ(sc->fields[2].extension_name, "arrow.uuid");
    LC_CHECK(sc->fields[12].is_timestamp);
}

static void check_values(const lc_arrow_batch_t *b, const lc_arrow_schema_t *sc)
{
    lc_status_t st = {0};
    int64_t v;
    uint64_t u;
    const uint8_t *p;
    size_t n;
    LC_ASSERT_EQ(b->length, 433);
    for (int64_t row = 0; row < b->length; row++) {
        LC_ASSERT_OK(lc_arrow_get_int(column(b, sc, "period"), row, &v, &st));
        LC_ASSERT_EQ(v, 1000000000 / 97);
        LC_ASSERT_OK(lc_arrow_get_uint(column(b, sc, "duration"), row, &u, &st));
        LC_ASSERT_EQ(u, 1000000000u);
        LC_ASSERT_OK(lc_arrow_get_bytes(column(b, sc, "producer"), row, &p, &n, &st));
        LC_CHECK(n == 11 && memcmp(p, "parca_agent", 11) == 0);
        LC_ASSERT_OK(lc_arrow_get_int(column(b, sc, "value"), row, &v, &st));
        LC_ASSERT_EQ(v, 1);
    }
    /* a frame: dictionary-encoded struct inside a list view */
    const lc_arrow_array_t *frames, *frame;
    int64_t start, count, r;
    LC_ASSERT_OK(lc_arrow_get_list(column(b, sc, "stacktrace"), 0, &frames, &start, &count, &st));
    LC_CHECK(count > 0);
    LC_ASSERT_OK(lc_arrow_get_struct(frames, start, &frame, &r, &st));
    LC_ASSERT_EQ(lc_arrow_get_bytes(lc_arrow_child(frame, "mapping_file"), r, &p, &n, &st), 0);
    LC_CHECK(n > 0);
    /* misuse: a clear -1, never a read */
    LC_ASSERT_EQ(lc_arrow_get_int(column(b, sc, "producer"), 0, &v, &st), -1);
    LC_CHECK(strstr(st.msg, "does not hold") != NULL);
    LC_ASSERT_EQ(lc_arrow_get_int(column(b, sc, "value"), 433, &v, &st), -1);
    LC_CHECK(strstr(st.msg, "outside") != NULL);
}

static void test_agent_push(void)
{
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lc_arena_t *arena = lc_arena_new(64u << 20);
    lc_status_t st = {0};
    lc_arrow_stream_t *s;
    LC_ASSERT_OK(lc_arrow_stream_open(&s, stream, stream_len, &lim, arena, &st));
    const lc_arrow_schema_t *sc = lc_arrow_stream_schema(s);
    check_schema(sc);
    const lc_arrow_batch_t *b;
    LC_ASSERT_EQ(lc_arrow_stream_next(s, &b, &st), 1);
    check_values(b, sc);
    LC_ASSERT_EQ(lc_arrow_stream_next(s, &b, &st), 0);
    lc_arrow_stream_close(s);
    lc_arena_free(arena);
}

/* Each limit set just below what the push needs stops it, naming why. Every
 * limit is a 64-bit field (int64_t or size_t), so one setter serves all. */
static void test_limits(void)
{
    static const struct {
        size_t field;
        uint64_t value;
        size_t arena_cap;
        const char *msg;
    } cases[] = {
        {offsetof(lc_arrow_limits_t, max_rows), 432, 64u << 20, "past 432"},
        {offsetof(lc_arrow_limits_t, max_decompressed_bytes), 1000, 64u << 20,
         "decompressed buffers pass the limit"},
        {offsetof(lc_arrow_limits_t, max_depth), 3, 64u << 20, "nests deeper than 3"},
        {offsetof(lc_arrow_limits_t, max_fields), 10, 64u << 20, "more than 10 fields"},
        {offsetof(lc_arrow_limits_t, max_dictionary_rows), 1, 64u << 20, "passes 1 entries"},
        {offsetof(lc_arrow_limits_t, max_messages), 5, 64u << 20, "more than 5 messages"},
        {offsetof(lc_arrow_limits_t, max_body_bytes), 64, 64u << 20, "past the limit (64)"},
        {offsetof(lc_arrow_limits_t, max_metadata_bytes), 64, 64u << 20, "past the limit (64)"},
        {offsetof(lc_arrow_limits_t, max_buffers), 8, 64u << 20, "more than 8 buffers"},
        {offsetof(lc_arrow_limits_t, max_rows), 16 << 20, 4096, "out of memory"},
    };
    _Static_assert(sizeof(size_t) == 8 && sizeof(int64_t) == 8, "64-bit limits");
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        lc_arrow_limits_t lim;
        lc_arrow_limits_default(&lim);
        memcpy((char *)&lim + cases[i].field, &cases[i].value, sizeof(uint64_t));
        lc_status_t st = {0};
        LC_ASSERT_EQ(read_all(&lim, cases[i].arena_cap, &st), -1);
        if (!strstr(st.msg, cases[i].msg))
            LC_FAIL_("case %zu: \"%s\" does not say \"%s\"", i, st.msg, cases[i].msg);
    }
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lc_status_t st = {0};
    LC_ASSERT_EQ(read_all(&lim, 64u << 20, &st), 433);
}

static void test_not_a_stream(void)
{
    lc_arrow_limits_t lim;
    lc_arrow_limits_default(&lim);
    lc_arena_t *arena = lc_arena_new(1 << 20);
    lc_status_t st = {0};
    lc_arrow_stream_t *s;
    LC_ASSERT_EQ(lc_arrow_stream_open(&s, (const uint8_t *)"", 0, &lim, arena, &st), -1);
    LC_CHECK(strstr(st.msg, "does not start with a schema") != NULL);
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0, 1, 2, 3};
    LC_ASSERT_EQ(lc_arrow_stream_open(&s, junk, sizeof(junk), &lim, arena, &st), -1);
    LC_CHECK(st.msg[0] != 0);
    lc_arena_free(arena);
}

static void setup(void)
{
    load_push();
}

static void teardown(void)
{
    free(push);
}

LC_TEST_MAIN(setup, test_agent_push, test_limits, test_not_a_stream, teardown)
